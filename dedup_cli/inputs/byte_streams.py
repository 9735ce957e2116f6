"""Byte streams of inputs: transparent decompression, counting what was consumed, reading capped, and lines.

``.gz``, ``.bz2``, ``.xz`` and ``.zst`` files are decompressed while reading; the format is chosen from the
name inside the suffix (``x.jsonl.gz`` is JSON Lines). Line formats split on ``\\n`` and drop a trailing
``\\r``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from dedup_cli.atomic_files import input_status, open_input
from dedup_cli.inputs.decoding import BOM

COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
_COMPRESSED_ENDINGS = tuple(COMPRESSION_SUFFIXES)
_CHUNK = 1 << 20
# What reading a damaged or vanished file can raise: OS errors, truncated or corrupt compressed data.
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, pa.ArrowException)


def compression(name: str) -> str | None:
    """The compression a file's name says (its suffix, in any case), or None."""
    if not name[-4:].lower().endswith(_COMPRESSED_ENDINGS):  # most names: one slice, no path split
        return None
    return COMPRESSION_SUFFIXES.get(os.path.splitext(name)[1].lower())


class Prefixed(io.RawIOBase):
    """A raw stream that yields ``head`` (already read, to sniff for binary) and then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: Any) -> None:
        super().__init__()
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            if count == len(buffer):
                return count
            # The rest of the read from the stream: reads stay aligned on the stream's blocks.
            data = self._stream.read(len(buffer) - count)
            buffer[count : count + len(data)] = data
            return count + len(data)
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


Position = Callable[[], int]
"""How many bytes of a file on disk have been consumed so far (compressed bytes for a compressed file)."""


@contextmanager
def open_decompressed(path: str, compression: str | None
                       ) -> Iterator[tuple[Any, os.stat_result | None, Position]]:
    """The decompressed bytes of ``path`` as a readable stream, the file's ``stat``, and its :data:`Position`."""
    handle = open_input(path)  # closed below, after any decompressor wrapping it
    raw: Any = handle
    position = handle.tell
    if not handle.seekable():  # a FIFO (e.g. a shell's <(zcat …)): no position to ask, so count
        raw = Counted(handle)
        position = raw.position
    try:
        try:
            status: os.stat_result | None = input_status(handle)
        except (OSError, AttributeError, io.UnsupportedOperation):
            status = None
        with decompressing(raw, compression) as stream:
            yield stream, status, position
    finally:
        handle.close()


@contextmanager
def decompressing(raw: Any, compression: str | None) -> Iterator[Any]:
    """The decompressed bytes of the raw stream ``raw`` (itself when ``compression`` is None)."""
    if compression is None:
        yield raw
    elif compression == "gzip":
        with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
            yield stream
    elif compression == "bz2":
        with bz2.BZ2File(raw) as stream:
            yield stream
    elif compression == "xz":
        with lzma.LZMAFile(raw) as stream:
            yield stream
    else:
        native = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), compression)
        try:
            yield native
        finally:
            native.close()


# The first bytes of each compressed format read (their magic numbers), for a stream without a name (stdin);
# bzip2's "BZh" is followed by the block size, a digit from 1 to 9.
MAGIC_NUMBERS = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
MAGIC_BYTES = 6


def sniffed_compression(head: bytes) -> str | None:
    """The compression a stream's first :data:`MAGIC_BYTES` bytes say, or None."""
    for magic, name in MAGIC_NUMBERS.items():
        if head.startswith(magic):
            return name
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0":
        return "bz2"
    return None


def extended(buffer: bytearray, data: bytes) -> bytearray:
    """``buffer`` with ``data`` appended: in place, or as a new buffer when something still holds a view of it.

    A bytearray that a numpy array or a memoryview still views cannot be resized (``BufferError``). The readers'
    views are gone when they return, but a thread that samples stacks (Dask's worker profiler, every 10 ms) can
    hold a finished frame, and the views in it, a moment longer."""
    try:
        buffer += data
    except BufferError:
        return buffer + data
    return buffer


def trimmed(buffer: bytearray, start: int, stop: int | None = None) -> bytearray:
    """``buffer[start:stop]``: cut in place, or copied when something still holds a view of it (:func:`extended`)."""
    try:
        if stop is not None:
            del buffer[stop:]
        del buffer[:start]
    except BufferError:
        return bytearray(buffer[start:stop])
    return buffer


def read_head(stream: Any, size: int) -> bytes:
    """Up to ``size`` first bytes of ``stream`` (a pipe may return fewer at a time: read until it has them)."""
    head = b""
    while len(head) < size:
        data = stream.read(size - len(head))
        if not data:
            break
        head += data
    return head


def read_capped(stream: Any, head: bytes, limit: int | None) -> bytearray | None:
    """``head`` and the rest of ``stream``; None as soon as more than ``limit`` bytes have been seen."""
    raw = bytearray(head)
    while limit is None or len(raw) <= limit:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return raw
        raw += chunk
    return None


def iter_lines(stream: Any, limit: int | None) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number from 1, the line without ``\\n``/``\\r\\n`` or None when over ``limit``, bytes consumed).

    A line over the limit is consumed in chunks and never held whole. A byte-order mark opening line 1 is
    dropped. Reading and re-reading both count lines here, so their numbers agree.
    """
    number = 0
    while True:
        line = stream.readline() if limit is None else stream.readline(limit + 2)
        if not line:
            return
        number += 1
        consumed = len(line)
        if limit is not None and consumed == limit + 2 and not line.endswith(b"\n"):
            while True:
                chunk = stream.readline(_CHUNK)
                consumed += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield number, None, consumed
            continue
        line = line_content(line, number)
        if limit is not None and len(line) > limit:
            yield number, None, consumed
            continue
        yield number, line, consumed


def line_content(line: bytes, number: int) -> bytes:
    """Line ``number`` (from 1) as read, without its ``\\n``/``\\r\\n`` and the byte-order mark that may open line 1."""
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    if number == 1 and line.startswith(BOM):
        line = line[3:]
    return line


def iter_raw_lines(stream: Any, first: int = 1) -> Iterator[tuple[int, bytes, bytes]]:
    """(line number, the line exactly as read, with its end; its content as :func:`iter_lines` gives it), for
    copying lines byte for byte (one line is held at a time); ``first``: the number of the stream's first line (a
    stream that starts inside a file)."""
    for number, raw in enumerate(iter(stream.readline, b""), start=first):
        yield number, raw, line_content(raw, number)


class Counted(io.RawIOBase):
    """A stream that counts the bytes read through it (stdin has no position to ask)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.consumed += len(data)
        return bytes(data)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def position(self) -> int:
        return self.consumed
