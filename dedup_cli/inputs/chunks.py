"""Line files cut into chunks of whole lines: read by the process that plans a run, split into lines by a worker.

A line file (lines, JSON Lines, integer sets; plain, compressed or stdin) is read in blocks and cut after the
newline ending the line that crosses :data:`CHUNK_BYTES`, or after :data:`CHUNK_LINES` lines, whichever comes
first. The cuts depend on the bytes alone (not on how reads return them), so a store is the same whoever
reads the chunks. A line longer than ``max_document_bytes`` + 2 bytes is skipped as it is read and never held
whole (:func:`dedup_cli.inputs.byte_streams.iter_lines` does the same); without a limit one line is held whole,
however long. :func:`chunk_lines` splits a chunk into the lines, numbers and verdicts ``iter_lines`` gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.inputs.byte_streams import READ_ERRORS, Position, extended, trimmed
from dedup_cli.inputs.decoding import BOM

CHUNK_BYTES = 1 << 20
CHUNK_LINES = 4096
NEWLINE = b"\n"
_BLOCK = 1 << 16  # the reads iter_lines' reader makes, so a damaged compressed file yields the same lines
_IN_PLACE_BLOCK = 1 << 20  # a plain file's lines stay where they are: larger reads, fewer calls


def count_newlines(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """The newlines of ``data[start:end]``: numpy's comparison on large spans (four times ``bytes.count``'s speed)."""
    end = len(data) if end is None else end
    if end - start < 1 << 16:
        return data.count(NEWLINE, start, end)
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8)[start:end] == 0x0A))


@dataclass(frozen=True)
class LineChunk:
    """Whole lines of one file, as read.

    ``data`` holds lines ``first_line``, ``first_line + 1``, …, each with its ``\\n`` (the file's last line may
    lack one); ``skipped`` lists (line, bytes) of the lines over the limit that came just before them and were
    not held; ``position`` is how much of the file on disk had been consumed when the chunk was cut. A chunk of
    a plain file may leave its lines where they are: ``data`` is then empty and they are the ``length`` bytes at
    ``offset`` in the file, holding ``newlines`` newlines (:meth:`with_data` reads them).
    """

    data: bytes
    first_line: int
    skipped: tuple[tuple[int, int], ...] = ()
    position: int = 0
    offset: int = -1
    length: int = 0
    newlines: int = 0

    def with_data(self, path: str) -> LineChunk:
        """The chunk with its lines read from ``path`` when they were left there; ValueError when the file no
        longer holds the same number of lines there (it changed while it was signed)."""
        if self.offset < 0:
            return self
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            data = os.pread(descriptor, self.length, self.offset)
        finally:
            os.close(descriptor)
        if len(data) != self.length or count_newlines(data) != self.newlines:
            raise ValueError("it changed while it was read; sign it again")
        return LineChunk(data, self.first_line, self.skipped, self.position)


def _cut(held: bytearray, lines: int) -> int:
    """Where the first chunk of ``held`` (holding ``lines`` newlines) ends, or 0 if it does not end yet."""
    cut = held.find(b"\n", CHUNK_BYTES - 1) + 1
    if lines >= CHUNK_LINES:
        newlines = np.flatnonzero(np.frombuffer(held, dtype=np.uint8) == ord("\n"))
        cut = min(cut or len(held), int(newlines[CHUNK_LINES - 1]) + 1)
    return cut


class _Held:
    """The lines read and not yet cut into a chunk: ``data`` holds lines ``first`` … with ``lines`` newlines, the
    last one (from ``start``) maybe incomplete, from ``offset`` in the file; ``skipped`` are the lines over the
    limit before them. With ``in_place``, chunks give the offsets of their lines rather than the lines."""

    def __init__(self, in_place: bool) -> None:
        self.data = bytearray()
        self.first = 1
        self.lines = 0
        self.start = 0
        self.offset = 0
        self.in_place = in_place
        self.skipped: list[tuple[int, int]] = []

    def append(self, block: bytes) -> bool:
        """Add a block; whether a line ended in it."""
        newline = block.rfind(b"\n")
        if newline >= 0:
            self.start = len(self.data) + newline + 1
            self.lines += count_newlines(block)
        self.data = extended(self.data, block)
        return newline >= 0

    def take(self, cut: int, position: int) -> LineChunk:
        """The first ``cut`` bytes as a chunk."""
        count = count_newlines(self.data, 0, cut)
        if self.in_place:
            chunk = LineChunk(b"", self.first, tuple(self.skipped), position, self.offset, cut, count)
        else:
            chunk = LineChunk(bytes(self.data[:cut]), self.first, tuple(self.skipped), position)
        self.data = trimmed(self.data, cut)
        self.first, self.lines, self.start, self.skipped = self.first + count, self.lines - count, self.start - cut, []
        self.offset += cut
        return chunk

    def chunks(self, position: int, everything: bool = False) -> Iterator[LineChunk]:
        """The chunks that end in ``data`` (and with ``everything``, the rest of it as the last one)."""
        while cut := _cut(self.data, self.lines):
            yield self.take(cut, position)
        if everything and (self.data or self.skipped):
            yield self.take(len(self.data), position)


def line_chunks(stream: Any, limit: int | None, position: Position, in_place: bool = False
                ) -> Iterator[LineChunk]:
    """The chunks of a line stream (a raw stream read with ``read(n)``; ``limit``: ``max_document_bytes``).

    With ``in_place`` (a plain file, read from its start), the chunks say where their lines are in the file
    rather than holding them: this reader counts lines and finds the cuts, and the lines go no further. A read
    error (a damaged compressed file) ends the chunks after the whole lines read before it, then propagates.
    """
    held = _Held(in_place)
    skipping = -1  # bytes so far of a line over the limit that is being skipped, or -1
    while True:
        try:
            block = stream.read(_IN_PLACE_BLOCK if in_place else _BLOCK)
        except READ_ERRORS:
            del held.data[held.start :]
            yield from held.chunks(position(), everything=True)
            raise
        if not block:
            break
        if skipping >= 0:
            newline = block.find(b"\n")
            if newline < 0:
                skipping += len(block)
                continue
            held.skipped.append((held.first, skipping + newline + 1))
            held.offset += skipping + newline + 1
            held.first, skipping, block = held.first + 1, -1, block[newline + 1 :]
        ended = held.append(block)
        if limit is not None and len(held.data) - held.start >= limit + 2:
            # The line being read is over the limit: the lines before it go now, the rest of it is skipped.
            skipping = len(held.data) - held.start
            del held.data[held.start :]
            yield from held.chunks(position(), everything=True)
        elif ended:
            yield from held.chunks(position())
    if skipping >= 0:
        held.skipped.append((held.first, skipping))
        held.first += 1
    yield from held.chunks(position(), everything=True)


def in_place_chunks(stream: Any, head: bytes) -> Iterator[LineChunk]:
    """The chunks :func:`line_chunks` cuts from a plain file read in place with no line limit, found by reading
    the file through one window of its bytes not yet cut: the cuts are the same (they depend on the bytes alone),
    without holding or copying the lines. ``stream``: the file after ``head``, its first bytes (already read).
    Each chunk's ``position`` is its end.

    This runs in the process that plans a run's tasks, once per byte of every line file, so it does what it can
    without a Python object or a position per line: the byte cut (the first newline at or after
    ``start + CHUNK_BYTES - 1``) is found with ``bytes.find`` (``memchr``) and the chunk's newlines are only
    counted; their positions are taken only when a chunk may hold :data:`CHUNK_LINES` lines before its byte cut.
    """
    # The bytes from ``start`` on that have been read are buffer[low:high] (less ``gap`` of them): one buffer
    # and one array of flags for the whole file, so that no read allocates (and faults in) new memory.
    size = 2 * CHUNK_BYTES + _IN_PLACE_BLOCK
    buffer = bytearray(max(size, len(head)))
    buffer[: len(head)] = head
    flags = np.empty(len(buffer), dtype=np.bool_)
    low, high = 0, len(head)
    gap = 0  # bytes of a long line dropped after its first CHUNK_BYTES: they hold no newline
    start, first, ended = 0, 1, False
    while True:
        by_bytes = buffer.find(NEWLINE, low + CHUNK_BYTES - 1, high)
        if by_bytes < 0 and not ended and high - low <= CHUNK_BYTES:
            low, high, ended = _read_more(stream, buffer, low, high)
            continue
        end = by_bytes + 1 if by_bytes >= 0 else high  # buffer positions, like ``low`` and ``high``
        if end == low:
            return
        found = np.equal(np.frombuffer(buffer, dtype=np.uint8, count=end - low, offset=low), 0x0A,
                         out=flags[: end - low])
        count = int(np.count_nonzero(found))
        if count > CHUNK_LINES or (count == CHUNK_LINES and by_bytes < 0):
            end = low + int(np.flatnonzero(found)[CHUNK_LINES - 1]) + 1  # the CHUNK_LINES-th line ends first
            count = CHUNK_LINES
        elif by_bytes < 0 and not ended:
            # No newline after CHUNK_BYTES yet, and too few before it to cut by lines: a long line. Its bytes
            # after CHUNK_BYTES are dropped (and counted) as the next ones are read, so memory stays bounded.
            gap += high - (low + CHUNK_BYTES)
            high = low + CHUNK_BYTES
            low, high, ended = _read_more(stream, buffer, low, high)
            continue
        length = end - low + gap  # a long line's dropped bytes come before its end, and no lines cut is before them
        yield LineChunk(b"", first, (), start + length, start, length, count)
        start, first, low, gap = start + length, first + count, end, 0


def _read_more(stream: Any, buffer: bytearray, low: int, high: int) -> tuple[int, int, bool]:
    """Read the next block of ``stream`` after buffer[low:high] (moved to the front first when the block would not
    fit behind it); the new (low, high), and whether the stream ended."""
    if high + _IN_PLACE_BLOCK > len(buffer):
        buffer[: high - low] = buffer[low:high]
        low, high = 0, high - low
    into = getattr(stream, "readinto", None)
    if into is not None:
        read = into(memoryview(buffer)[high : high + _IN_PLACE_BLOCK]) or 0
    else:
        block = stream.read(_IN_PLACE_BLOCK)
        read = len(block)
        buffer[high : high + read] = block
    return low, high + read, read == 0


def chunk_lines(chunk: LineChunk, limit: int | None) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, the line without ``\\n``/``\\r\\n`` (and a byte-order mark opening line 1) or None when over
    ``limit``, bytes consumed) for every line of ``chunk``: what :func:`dedup_cli.inputs.byte_streams.iter_lines`
    gives for the same lines, skipped ones included."""
    for number, consumed in chunk.skipped:
        yield number, None, consumed
    pieces = chunk.data.split(b"\n")
    last = len(pieces) - 1  # the piece after the last newline: a final line without one, or empty
    for offset, piece in enumerate(pieces):
        if offset == last and not piece:
            break
        number = chunk.first_line + offset
        ended = offset < last
        consumed = len(piece) + ended
        # iter_lines reads at most limit + 2 bytes of a line: a line of that many bytes before its newline is over
        # the limit whatever its content (a byte-order mark or \r included).
        over = limit is not None and len(piece) >= limit + 2
        if ended and piece.endswith(b"\r"):
            piece = piece[:-1]
        if number == 1 and piece.startswith(BOM):
            piece = piece[3:]
        if over or (limit is not None and len(piece) > limit):
            yield number, None, consumed
        else:
            yield number, piece, consumed


_ALIGN_BLOCK = 1 << 16  # read past a range's end this much at a time to find the newline that ends it


def _line_end(descriptor: int, offset: int, size: int) -> int:
    """Where the line holding byte ``offset - 1`` of the file ends: just past the first newline at or after
    ``offset - 1`` (``size``, the file's end, when there is none); 0 for offset 0."""
    if offset <= 0:
        return 0
    at = offset - 1
    while at < size:
        block = os.pread(descriptor, min(_ALIGN_BLOCK, size - at), at)
        if not block:
            break
        newline = block.find(NEWLINE)
        if newline >= 0:
            return at + newline + 1
        at += len(block)
    return size


def read_range(path: str, start: int, end: int, size: int, mtime_ns: int) -> bytes:
    """The whole lines of a plain file that start in its bytes ``start`` … ``end`` − 1: the range's ends each moved
    to the end of the line holding the byte before it (so consecutive ranges share their lines out, each line
    to the range holding its first byte, however the ranges cut through lines). ``size`` and ``mtime_ns`` are the
    file's when the ranges were planned; ValueError when it no longer has them (it changed while it was read).

    This runs in a worker: the process that plans the run only cuts the file's size into ranges, reading nothing.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(descriptor)
        if status.st_size != size or status.st_mtime_ns != mtime_ns:
            raise ValueError("it changed while it was read; sign it again")
        first = _line_end(descriptor, start, size)
        if first >= end:  # a line from before the range runs through all of it
            return b""
        last = _line_end(descriptor, end, size) if end < size else size
        data = os.pread(descriptor, last - first, first)
    finally:
        os.close(descriptor)
    if len(data) != last - first:
        raise ValueError("it changed while it was read; sign it again")
    return data
