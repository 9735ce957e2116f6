"""Writing files so that a reader sees the old content or the new, never a part: the one atomic-write helper.

Every file dedup replaces (a store's manifest and parts, a single-file store, ``find -o FILE``, ``filter``'s
output) is written under a temporary name beside its final one, flushed and fsynced, renamed over the final name
with ``os.replace`` (atomic on POSIX), and the directory is fsynced so that the rename survives a crash. A
directory (``filter``'s output for several inputs) is written the same way, as a whole.

What an output path names decides how it is written (:func:`output_target`, used by every command's outputs): a
regular file, or a path that does not exist, is replaced atomically; a symbolic link to one has its target
replaced and stays a link; a character or block device, a FIFO, a socket, or the name of an open descriptor
(``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, what ``>(command)`` passes) is opened and written in
place, as every Unix tool does, so ``-o /dev/null`` never replaces the device. An ``s3://`` URL names an object,
written in one PUT or one multipart upload that the server makes visible only when it is complete: atomic by
nature, like the rename (:mod:`dedup_cli.objectstore.objects`).
"""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from dedup_cli.objectstore.urls import is_url
from dedup_cli.processes import running

MAX_LINK_HOPS = 40
"""Symbolic links followed before a path is called a loop (ELOOP), as the kernel does."""

_DESCRIPTOR_NAME = re.compile(r"/(?:proc/(?:self|thread-self|\d+)|dev)/fd/\d+|/dev/std(?:in|out|err)")
"""Paths that name an open file descriptor rather than a file: written where the descriptor points, never replaced."""

WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
"""Causes only writing can have (a full disk or quota, a file past its size limit, a read-only file system): an
error with one of them is the output's, whatever path a library put in it."""


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
        if match is None or process_alive(int(match.group(1))):
            continue
        _remove(target.parent / name)
        removed.append(name)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this process's own pid counts as a killed earlier run's)."""
    if pid == os.getpid():
        return False  # an earlier run with this pid: it was killed, this one is not it
    return running(pid)


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

    Raises:
        OutputError: flushing, syncing or closing the file failed (a full disk), naming ``path``.
    """
    with atomic_path(path, temporary) as scratch:
        stream = open(scratch, "wb") if binary else open(scratch, "w", encoding="utf-8", newline="")
        try:
            yield stream
            try:  # what fails now is writing ``path`` (a full disk shows at the flush): say so, naming it
                stream.flush()
                os.fsync(stream.fileno())
                stream.close()
            except OSError as error:
                raise OutputError(error.errno, error.strerror or str(error), os.fspath(path)) from error
        finally:
            if not stream.closed:
                try:
                    stream.close()
                except OSError:  # the buffer a failed write left: the error that counts is already raised
                    pass


class OutputError(OSError):
    """Writing an output failed (no space, a closed pipe, a device error), as opposed to reading an input: raised
    by :class:`OutputStream` so that a stage that reads and writes at once reports the right path."""


class OutputStream:
    """A writable stream whose write errors are :class:`OutputError` naming ``name``; everything else is the
    wrapped stream's."""

    def __init__(self, stream: IO[Any], name: str | os.PathLike[str]) -> None:
        self._stream = stream
        self._name = os.fspath(name)

    def _failed(self, error: OSError) -> OutputError:
        return OutputError(error.errno, error.strerror or str(error), self._name)

    def write(self, data: Any) -> int:
        try:
            return self._stream.write(data)
        except OutputError:
            raise
        except OSError as error:
            raise self._failed(error) from error

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OutputError:
            raise
        except OSError as error:
            raise self._failed(error) from error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@dataclass(frozen=True)
class OutputTarget:
    """What writing an output path means: ``replace`` the regular file (or absent path) ``path`` atomically, or
    write ``path`` ``in_place`` (a device, FIFO, socket or open descriptor; ``append`` for a regular file reached
    through a descriptor, so that ``>> log`` keeps what the shell's file held)."""

    path: Path
    in_place: bool
    kind: str  # "file", "absent", "character device", "block device", "FIFO", "socket", "descriptor"
    append: bool = False


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "directory")):
        if test(mode):
            return name
    return "file"


def path_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is once links are followed: ``file``, ``directory``, ``FIFO``, ``socket``, ``character
    device`` or ``block device``; None when nothing is there (a dangling link included).

    Raises:
        OSError: the path cannot be examined (a loop of links, a name too long, a component that is a file).
    """
    if is_url(path):
        from dedup_cli.objectstore import objects

        return objects.kind(str(path))
    try:
        return _kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _follow(path: str | os.PathLike[str]) -> tuple[str, os.stat_result | None, bool]:
    """Follow ``path``'s symbolic links one at a time: (where they end, its ``lstat`` or None when nothing is
    there, whether it names an open descriptor, which is never followed further)."""
    current = os.path.abspath(path)
    for _ in range(MAX_LINK_HOPS):
        if _DESCRIPTOR_NAME.fullmatch(current):
            return current, _stat_or_none(current), True
        try:
            status = os.lstat(current)
        except FileNotFoundError:
            return current, None, False
        if not stat.S_ISLNK(status.st_mode):
            return current, status, False
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(path))


def output_target(path: str | os.PathLike[str]) -> OutputTarget:
    """How to write the output ``path``, following symbolic links one at a time (see the module).

    Raises:
        IsADirectoryError: ``path`` is (or links to) a directory.
        OSError: a loop of links (ELOOP), or a path that cannot be examined.
    """
    current, status, descriptor = _follow(path)
    if descriptor:
        return OutputTarget(Path(current), True, "descriptor", status is not None and stat.S_ISREG(status.st_mode))
    if status is None:
        return OutputTarget(Path(current), False, "absent")
    kind = _kind(status.st_mode)
    if kind == "directory":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    return OutputTarget(Path(current), kind != "file", kind)


def rereadable(path: str | os.PathLike[str]) -> str | io.BytesIO:
    """A file a reader may open more than once (to sniff its format, then parse it): ``path`` itself when it is a
    regular file (or missing, or a directory: opening it says so), else the whole stream of a FIFO or an open
    descriptor (``<(command)``, ``/dev/stdin``) read now, in memory.

    Raises:
        OSError: ``path`` is a device or socket, which is never read (``/dev/zero`` would never end).
    """
    if is_url(path):
        return str(path)
    current, status, descriptor = _follow(path)
    if status is None or stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode):
        return os.fspath(path)
    if descriptor or stat.S_ISFIFO(status.st_mode):
        with open(current, "rb") as stream:
            return io.BytesIO(stream.read())
    raise OSError(errno.EINVAL, f"a {_kind(status.st_mode)} is not read as a file; give a file or a pipe",
                  os.fspath(path))


def _stat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


@contextmanager
def _in_place(target: OutputTarget, binary: bool) -> Iterator[IO[Any]]:
    """A stream onto a device, FIFO, socket or open descriptor; write errors (ENOSPC on ``/dev/full``, EPIPE)
    surface when the block flushes, never silently."""
    raw: IO[bytes]
    if target.kind == "socket":
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(os.fspath(target.path))
        except OSError as error:
            connection.close()
            raise OSError(error.errno, error.strerror, os.fspath(target.path)) from None
        raw = connection.makefile("wb")
        connection.close()  # the file object keeps the connection open until it is closed
    else:
        flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | (os.O_APPEND if target.append else 0)
        raw = os.fdopen(os.open(target.path, flags), "wb")
    with raw:
        if binary:
            yield raw
            raw.flush()
            return
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=False)
        yield text
        text.flush()
        text.detach()  # ``raw`` is closed by its own block


@contextmanager
def open_output(path: str | os.PathLike[str], binary: bool = True) -> Iterator[Any]:
    """A stream to write the output ``path`` through, as :func:`output_target` says: a regular file (or a new
    path, or a link's regular target) appears complete or not at all, keeping the old file's permissions; a
    device, FIFO, socket or descriptor is written in place.

    Args:
        path: the output.
        binary: a binary stream, else text (UTF-8, newlines untranslated).

    Raises:
        OutputError: a write failed (the old file, if any, is left as it was).
        OSError: the path cannot be opened or examined.
    """
    if is_url(path):
        with _object_output(str(path), binary) as stream:
            yield stream
        return
    target = output_target(path)
    written = False  # past the caller's block: what fails now is this output's flush, fsync or rename
    try:
        if target.in_place:
            with _in_place(target, binary) as stream:
                yield OutputStream(stream, path)
                written = True
            return
        mode = None if target.kind == "absent" else stat.S_IMODE(os.stat(target.path).st_mode)
        remove_stale_scratch(target.path)
        with atomic_write(target.path, binary=binary) as stream:
            if mode is not None:
                os.chmod(stream.fileno(), mode)
            yield OutputStream(stream, path)
            written = True
    except OSError as error:
        scratch = not written and error.filename is not None and os.path.basename(os.fsdecode(error.filename)) \
            .startswith(f".{os.path.basename(os.fspath(target.path))}.tmp")
        if (not written and not scratch) or isinstance(error, OutputError):
            raise
        # the output's own name, not its scratch file's: "cannot write out.jsonl: No such file or directory"
        raise OutputError(error.errno, error.strerror or str(error), os.fspath(path)) from error


@contextmanager
def _object_output(url: str, binary: bool) -> Iterator[Any]:
    """A stream onto the object ``url``, complete when the block ends without an exception, else never written."""
    from dedup_cli.objectstore import object_streams

    written = False
    try:
        with object_streams.writing(url) as raw:
            if binary:
                yield OutputStream(raw, url)
            else:
                text = io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=True)
                yield OutputStream(text, url)
                text.flush()
                text.detach()
            written = True
    except OSError as error:
        if not written or isinstance(error, OutputError):
            raise
        raise OutputError(error.errno, error.strerror or str(error), url) from error


def open_input(path: str | os.PathLike[str]) -> Any:
    """A binary file to read the input ``path`` from: a local file, or an object (read in large ranged GETs)."""
    if is_url(path):
        from dedup_cli.objectstore import object_streams

        return object_streams.open_read(str(path))
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def input_status(handle: Any) -> os.stat_result:
    """``os.fstat`` of a file :func:`open_input` opened (an object's size and modification time)."""
    status = getattr(handle, "status", None)
    return status() if callable(status) else os.fstat(handle.fileno())


@contextmanager
def output_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """An empty scratch directory to build the output directory ``path`` in, renamed into place as a whole when
    the block ends without an exception (:func:`atomic_path`); a symbolic link to a directory stays a link, its
    target replaced. What killed runs left beside it is removed first."""
    if is_url(path):
        # A prefix has no rename: each object is written whole where it goes, the marker last (docs/filter.md).
        yield str(path).rstrip("/")  # type: ignore[misc]
        return
    target = Path(os.path.realpath(path))
    remove_stale_scratch(target)
    with atomic_path(target, directory=True) as scratch:
        yield scratch


def remove_others(url: str, names: list[str]) -> None:
    """Delete the objects under the prefix ``url`` other than ``names`` (keys relative to it)."""
    from dedup_cli.objectstore import objects

    keep = {f"{url}/{name}" for name in names}
    objects.delete_many([item.url for item in objects.listing(url) if item.url not in keep])
