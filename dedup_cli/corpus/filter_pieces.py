"""Filtering one input in pieces, for an engine that runs them side by side, and joining what the pieces wrote
into the bytes that filtering the input whole writes.

- A **line piece** (JSON Lines, lines, integer sets; uncompressed) is the bytes ``start`` … ``stop`` of the file,
  cut just after a line end (:func:`line_ranges`), whose first line is line ``first_line`` of the file (the lines
  before it counted by :func:`count_lines`). Lines are copied byte for byte, so the outputs of consecutive pieces,
  concatenated (:func:`join_lines`), are the output of the whole file.
- A **Parquet piece** is a run of row groups. A whole file is filtered in batches of
  :data:`~dedup_cli.corpus.parquet_filter.PARQUET_FILTER_ROWS` rows counted from its first row, which run across row
  groups, and each batch becomes one row group of the output; a piece filters the same batches, a batch that a
  piece boundary cuts in two becoming two fragments, and writes its fragments as an Arrow IPC stream with the
  number of the batch each belongs to. :func:`join_parquet` merges the fragments of each batch and writes one row
  group per batch with the file's schema and codec: the file that filtering it whole writes.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.atomic_files import OutputError
from dedup_cli.corpus import parquet_filter as filtered_parquet
from dedup_cli.corpus.lines import filter_lines
from dedup_cli.corpus.parquet_filter import filter_batch, output_schema, parquet_writer
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.corpus.sources import read_failure
from dedup_cli.inputs.byte_streams import READ_ERRORS
from dedup_cli.inputs.locations import Source
from dedup_cli.options.input_options import InputOptions

LINE_FORMATS = ("jsonl", "lines", "sets")
_SCAN = 1 << 16


@dataclass(frozen=True)
class Piece:
    """A part of one input: bytes ``start`` … ``stop`` of a line file (``stop`` None: to its end), or the row
    groups ``source.row_groups`` of a Parquet file (its first row ``source.first_row``); ``number`` orders the
    pieces of one input."""

    source: Source
    number: int
    start: int = 0
    stop: int | None = None
    first_line: int = 1

    @property
    def size(self) -> int:
        """Its bytes on disk, for progress."""
        if self.source.format == "parquet":
            return self.source.size
        return (self.source.size if self.stop is None else self.stop) - self.start


def line_ranges(path: str, size: int, piece_bytes: int) -> list[tuple[int, int | None]]:
    """Byte ranges of about ``piece_bytes`` covering the line file ``path`` (``size`` bytes when listed), each
    starting a line; the last one runs to the end of the file, whatever it holds then."""
    cuts = [0]
    with open(path, "rb") as handle:
        for target in range(piece_bytes, size, piece_bytes):
            if target <= cuts[-1]:
                continue
            handle.seek(target - 1)  # a line ending at target − 1 makes target a cut
            position = target - 1
            while True:
                chunk = handle.read(_SCAN)
                if not chunk:
                    position = size
                    break
                end = chunk.find(b"\n")
                if end >= 0:
                    position += end + 1
                    break
                position += len(chunk)
            if position >= size:
                break
            cuts.append(position)
    return [(start, stop) for start, stop in zip(cuts, cuts[1:], strict=False)] + [(cuts[-1], None)]


def row_group_runs(source: Source, sizes: list[int], piece_bytes: int) -> list[Source]:
    """A Parquet source (row groups of ``sizes`` rows) as runs of row groups of about ``piece_bytes`` each."""
    total = max(sum(sizes), 1)
    runs: list[Source] = []
    start = first_row = rows = 0
    for group, size in enumerate(sizes):
        rows += size
        if source.size * rows // total >= piece_bytes or group == len(sizes) - 1:
            runs.append(dataclasses.replace(source, size=source.size * rows // total, row_groups=(start, group + 1),
                                            first_row=first_row))
            start, first_row, rows = group + 1, first_row + rows, 0
    return runs


def count_lines(path: str, start: int, stop: int) -> int:
    """Line ends in bytes ``start`` … ``stop`` of ``path``: the lines of a range cut at line ends."""
    count = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        left = stop - start
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


class _Range(io.RawIOBase):
    """The bytes of an open file from where it stands up to ``stop`` (None: its end)."""

    def __init__(self, handle: BinaryIO, stop: int | None) -> None:
        super().__init__()
        self._handle = handle
        self._left = None if stop is None else stop - handle.tell()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        wanted = len(buffer) if self._left is None else min(len(buffer), self._left)
        if wanted <= 0:
            return 0
        data = self._handle.read(wanted)
        buffer[: len(data)] = data
        if self._left is not None:
            self._left -= len(data)
        return len(data)


def _fragments(batches: Iterable[pa.RecordBatch], first_row: int) -> Iterator[tuple[int, int, pa.RecordBatch]]:
    """(batch number, first row, rows) of consecutive rows from ``first_row`` on, cut at every multiple of
    ``PARQUET_FILTER_ROWS``: the whole file's batches, or the parts of them these rows hold."""
    size = filtered_parquet.PARQUET_FILTER_ROWS
    row = first_row
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            take = min(batch.num_rows - offset, (row // size + 1) * size - row)
            yield row // size, row, batch.slice(offset, take)
            offset += take
            row += take


def filter_piece(piece: Piece, decisions: Decisions, options: InputOptions, annotate: bool,
                 out: BinaryIO, seen: set[str] | None = None) -> tuple[SourceOutcome, list[int]]:
    """Filter one piece into ``out``: its kept lines, or its kept (annotated) Parquet fragments as an Arrow IPC
    stream; returns what it did and, for Parquet, the batch number of each fragment written. ``seen``: the ids of
    earlier pieces that this one repeats (skipped), told of the ids the piece reads.

    Raises:
        InputError: the input could not be read to the piece's end.
    """
    source = piece.source
    try:
        with open(source.path, "rb") as handle:
            if source.format != "parquet":
                handle.seek(piece.start)
                outcome = filter_lines(_Range(handle, piece.stop), source, options, decisions, out, annotate,
                                       first_line=piece.first_line, seen=seen)
                return outcome, []
            parquet = pq.ParquetFile(handle)
            schema = output_schema(parquet, source, options, annotate)
            assert source.row_groups is not None
            batches = parquet.iter_batches(batch_size=filtered_parquet.PARQUET_FILTER_ROWS,
                                           row_groups=list(range(*source.row_groups)), use_threads=False)
            outcome = SourceOutcome()
            numbers: list[int] = []
            seen = set() if seen is None else seen
            with pa.ipc.new_stream(out, schema) as writer:
                for number, row, rows in _fragments(batches, source.first_row):
                    writer.write_batch(filter_batch(rows, row, source, options, decisions, annotate, schema, outcome,
                                                    seen))
                    numbers.append(number)
            return outcome, numbers
    except OutputError:
        raise
    except READ_ERRORS as error:
        raise read_failure(source, error) from error


def join_lines(parts: Iterable[Any], out: BinaryIO) -> None:
    """The outputs of a line file's pieces (bytes, or open binary files), in order, into ``out``."""
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            out.write(part)
        else:
            shutil.copyfileobj(part, out, 1 << 20)


def join_parquet(source: Source, options: InputOptions, annotate: bool, parts: Iterable[tuple[Any, list[int]]],
                 out: BinaryIO) -> None:
    """The Parquet file of a source filtered in pieces: from each piece's IPC stream (bytes or an open file) and
    the batch numbers of its fragments, in order, one row group per batch (see the module docstring)."""
    try:
        with open(source.path, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            schema = output_schema(parquet, source, options, annotate)
            writer = parquet_writer(out, parquet, schema)
    except OutputError:
        raise
    except READ_ERRORS as error:
        raise read_failure(source, error) from error
    with writer:
        held: list[pa.RecordBatch] = []
        current = -1
        for stream, numbers in parts:
            with pa.ipc.open_stream(stream) as reader:
                for number, fragment in zip(numbers, reader, strict=True):
                    if number != current and held:
                        _write_batch(writer, held, schema)
                        held = []
                    current = number
                    held.append(fragment)
        if held:
            _write_batch(writer, held, schema)


def _write_batch(writer: pq.ParquetWriter, fragments: list[pa.RecordBatch], schema: pa.Schema) -> None:
    """One batch of the whole file's filtering, from its fragments: the same values, so the same row group."""
    if len(fragments) == 1:
        writer.write_batch(fragments[0])
    else:
        writer.write_table(pa.Table.from_batches(fragments, schema).combine_chunks())
