"""Writing files so that a reader sees the old content or the new, never a part: the one atomic-write helper.

Every file dedup replaces (a store's manifest and parts, a single-file store, ``find -o FILE``, ``filter``'s
output) is written under a temporary name beside its final one, flushed and fsynced, renamed over the final name
with ``os.replace`` (atomic on POSIX), and the directory is fsynced so that the rename survives a crash. A
directory (``filter``'s output for several inputs) is written the same way, as a whole.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
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


def scratch_name(path: str | os.PathLike[str], kind: str = "tmp", pid: int | None = None) -> Path:
    """Where a new ``path`` is written meanwhile (``.NAME.tmp-PID``), or an old one set aside (``kind`` old)."""
    target = Path(path)
    return target.with_name(f".{target.name}.{kind}-{os.getpid() if pid is None else pid}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        unlink_quietly(path)


def remove_stale_scratch(path: str | os.PathLike[str]) -> list[str]:
    """Delete what killed runs left beside ``path`` (``.NAME.tmp-PID``, ``.NAME.old-PID`` of processes that are
    gone), so that a killed run costs only disk space until the next one; returns the names removed."""
    target = Path(path)
    pattern = re.compile(re.escape(f".{target.name}.") + r"(?:tmp|old)-(\d+)")
    removed: list[str] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or _alive(int(match.group(1))):
            continue
        _remove(target.parent / name)
        removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # an earlier run with this pid: it was killed, this one is not it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def atomic_path(path: str | os.PathLike[str], temporary: str | os.PathLike[str] | None = None,
                directory: bool = False) -> Iterator[Path]:
    """A scratch path to write the new ``path`` at: renamed over ``path`` if the block ends without an exception,
    otherwise removed, so ``path`` holds the old content or the new, complete.

    Args:
        path: the file (or directory) to (re)place.
        temporary: the scratch path (default :func:`scratch_name`); it must be on the same file system.
        directory: the scratch path is a directory, created empty. A directory already at ``path`` is renamed
            aside, the new one renamed into place and the old one deleted (a directory cannot be replaced by one
            rename): a run killed in between leaves ``path`` absent and the old one at ``.NAME.old-PID``.
    """
    target = Path(path)
    scratch = Path(temporary) if temporary is not None else scratch_name(target)
    if directory:
        _remove(scratch)
        scratch.mkdir()
    try:
        yield scratch
        if not directory:
            commit_file(scratch, target)
            return
        fsync_path(scratch, directory=True)
        if target.exists():
            aside = scratch_name(target, "old")
            os.replace(target, aside)
            os.replace(scratch, target)
            _remove(aside)
        else:
            os.replace(scratch, target)
        fsync_path(target.parent, directory=True)
    finally:
        _remove(scratch)


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
    with atomic_path(path, temporary) as scratch:
        with open(scratch, "wb") if binary else open(scratch, "w", encoding="utf-8", newline="") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
