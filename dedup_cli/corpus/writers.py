"""Where kept records go: output streams compressed as their input was, and whole files linked or copied.

``.gz`` output is written with a zero modification time and no file name in its header, so the same input gives
the same bytes; ``.bz2``, ``.xz`` and ``.zst`` use their libraries' default levels.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import pyarrow as pa

from dedup_cli.atomic_files import WRITE_ERRNOS, OutputError, OutputStream, open_input, open_output
from dedup_cli.objectstore.urls import is_url


class _KeepOpen(io.RawIOBase):
    """Writes through to ``stream`` and leaves it open when closed (Arrow closes the file it wraps)."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._stream.write(data)


@contextmanager
def compressed(stream: BinaryIO, compression: str | None) -> Iterator[BinaryIO]:
    """A stream that writes to ``stream`` compressed as ``compression`` says (None: as is); the compressor is
    finished when the block ends, ``stream`` stays open."""
    if compression is None:
        yield stream
        return
    writer: Any
    if compression == "gzip":
        writer = gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0)
    elif compression == "bz2":
        writer = bz2.BZ2File(stream, "wb")
    elif compression == "xz":
        writer = lzma.LZMAFile(stream, "wb")
    elif compression == "zstd":
        writer = pa.CompressedOutputStream(pa.PythonFile(_KeepOpen(stream), mode="w"), "zstd")
    else:
        raise ValueError(f"unknown compression {compression!r}")
    with writer:
        yield writer


@contextmanager
def output_file(target: str | BinaryIO) -> Iterator[BinaryIO]:
    """``target`` itself when it is a stream, else the file at path ``target``, created (with its directory),
    flushed and fsynced when the block ends; its write errors are :class:`~dedup_cli.atomic_files.OutputError`."""
    if not isinstance(target, str):
        yield target
        return
    if is_url(target):  # an object: one upload, complete when the block ends
        with open_output(target) as stream:
            yield stream
        return
    try:
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "wb") as stream:
            yield OutputStream(stream, target)  # type: ignore[misc]
            stream.flush()
            os.fsync(stream.fileno())
    except OutputError:
        raise
    except OSError as error:
        if error.filename is not None and error.filename != target:
            raise  # not this output's (an input read inside the block)
        raise OutputError(error.errno, error.strerror or str(error), target) from error


def link_or_copy(source: str, target: str | BinaryIO) -> None:
    """Put the file ``source`` at ``target``: a hard link where the file system allows one, else a copy (with the
    modification time); into a stream, its bytes. Failures to write are :class:`~dedup_cli.atomic_files.OutputError`."""
    if not isinstance(target, str) or is_url(source) or is_url(target):  # bytes copied, through a stream
        with open_input(source) as handle, output_file(target) as out:
            shutil.copyfileobj(handle, out, 1 << 20)
        return
    try:
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        os.link(source, target)
        return
    except OSError:  # another file system (EXDEV), no links allowed (EPERM), too many links (EMLINK)
        pass
    try:
        shutil.copy2(source, target)
        with open(target, "rb") as copied:
            os.fsync(copied.fileno())
    except OSError as error:
        # shutil names the source in any error of its copy loop (sendfile), a full output disk included: only the
        # causes a write alone has make it the output's error then
        if error.filename == source and error.errno not in WRITE_ERRNOS:
            raise  # the input's error, not the output's
        raise OutputError(error.errno, error.strerror or str(error), target) from error
