"""Writing files so that a reader sees the old content or the new, never a part: the one atomic-write helper.

Every file dedup replaces (a store's manifest and parts, a single-file store, ``find -o FILE``) is written
under a temporary name beside its final one, flushed and fsynced, renamed over the final name with
``os.replace`` (atomic on POSIX), and the directory is fsynced so that the rename survives a crash.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def fsync_path(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Flush a file (or a directory's entries) to disk."""
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(descriptor)
    except OSError as error:
        # Some file systems cannot fsync a directory; their renames are as durable as they get.
        if not directory or error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(descriptor)


def unlink_quietly(path: str | os.PathLike[str]) -> None:
    """Delete a file that may already be gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def commit_file(temporary: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Rename an fsynced ``temporary`` file over ``final`` and make the rename durable."""
    os.replace(temporary, final)
    fsync_path(Path(final).parent, directory=True)


@contextmanager
def atomic_write(path: str | os.PathLike[str], temporary: str | os.PathLike[str] | None = None,
                 binary: bool = True) -> Iterator[IO[Any]]:
    """A stream to write ``path`` through: the file appears under its name, complete, only if the block ends
    without an exception; otherwise ``path`` is untouched and the temporary file removed.

    Args:
        path: the file to (re)place.
        temporary: where to write meanwhile (default ``.NAME.tmp-PID`` beside ``path``); it must be on the
            same file system.
        binary: a binary stream, else text (UTF-8, newlines untranslated).
    """
    target = Path(path)
    scratch = Path(temporary) if temporary is not None else target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(scratch, "wb") if binary else open(scratch, "w", encoding="utf-8", newline="") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        commit_file(scratch, target)
    finally:
        unlink_quietly(scratch)
