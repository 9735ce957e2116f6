"""Planning a run's reading: the inputs as a stream of tasks (:mod:`dedup_cli.inputs.tasks`), in input order.

This runs in the process that drives the run and does as little as it can, so that workers do the reading:
whole files are grouped into :class:`FilesTask` s of about :data:`TASK_BYTES` (or :data:`TASK_FILES` files) by
their size on disk (every file's ``stat`` when an incremental run compares them with its store, else a sample's:
:data:`EXACT_STAT_FILES`), without opening them, and a file that an incremental run finds unchanged
(``unchanged``, from its size and modification time) is skipped here; a plain line file is cut into ranges of
bytes by its size alone when the caller can number the lines of each once the ranges before it are counted (the
local engine's ``sign``), its lines then found and counted by the workers; other line files and stdin are read
here in blocks and cut into chunks of whole lines (:mod:`dedup_cli.inputs.chunks`), CSV and TSV files into chunks
of whole records (:mod:`dedup_cli.inputs.delimited`: where a CSV record ends depends on the quotes before it, so
only a pass from the file's start can tell), Parquet files into parts of rows. Which tasks there are depends on the
inputs alone, so the store is the same however many workers read them.
"""

from __future__ import annotations

import dataclasses
import io
import os
import stat as stat_module
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Any, BinaryIO

from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import (
    READ_ERRORS,
    Counted,
    Position,
    Prefixed,
    compression,
    open_decompressed,
    read_capped,
)
from dedup_cli.inputs.chunks import CHUNK_BYTES, CHUNK_LINES, NEWLINE, LineChunk, in_place_chunks, line_chunks
from dedup_cli.inputs.delimited import TABLE_FORMATS, column_positions, parse_header, table_chunks
from dedup_cli.inputs.discovery import stat_run
from dedup_cli.inputs.files import BINARY_SNIFF_BYTES, note_unreadable, read_whole
from dedup_cli.inputs.json_arrays import array_documents, starts_an_array
from dedup_cli.inputs.locations import STDIN, STDIN_NAME, FileRun, Source, location_path
from dedup_cli.inputs.report import ReadReport, emptiness
from dedup_cli.inputs.stdin import stdin_stream
from dedup_cli.inputs.tasks import DocumentsTask, FilesTask, LineRangeTask, LinesTask, ReadTask, RowsTask, TableTask
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.input_options import InputOptions

Unchanged = Callable[[str, str, os.stat_result], bool]
"""Told (id, location, stat) of a whole text file before it is read; True skips it as already signed."""

# Small enough that two workers get several tasks of a 10 MB corpus, large enough that numpy's per-call overhead
# stays small (1 MB vs 8 MB batches: 0.27 s vs 0.30 s for 16 MB on 2 workers).
TASK_BYTES = CHUNK_BYTES
TASK_FILES = CHUNK_LINES
# Later files tasks grow with the files planned before them (each at least 1/TASK_GROWTH of those), up to
# LARGEST_TASK_BYTES: the driver's cost per task (handing it out, receiving its columns) then stays a small share
# of a large corpus (10^5 files of 7 KB: 704 tasks of 1 MB, or 266 growing ones), while a small corpus keeps its
# many small tasks. It depends on the inputs alone, so the tasks are the same whatever the number of workers.
TASK_GROWTH = 64
LARGEST_TASK_BYTES = 4 << 20
# Whole files are stated by the workers that read them; the planning states them too, to cut tasks by their size
# and give the progress its total, but after the first EXACT_STAT_FILES files of a run only every
# STAT_SAMPLE_EVERY-th, the others taken to have the mean size of those (2 µs a file saved: a fifth of the CPU
# this process spends on 10^5 files), unless an incremental run compares every file with the store. Eight
# samples in each batch of the walk (1,024 files) size its tasks well enough; 32 were an eighth of the
# planning's time. Which files are stated depends on the inputs alone, so the tasks are the same whatever the
# number of workers.
EXACT_STAT_FILES = 256
STAT_SAMPLE_EVERY = 128
# A plain line file is cut into ranges of this many bytes (more for a large file, as files tasks grow), whatever
# its lines: a worker finds the lines that start in its range.
LINE_RANGE_BYTES = CHUNK_BYTES


def _skip_unchanged(identifier: str, path: str, status: os.stat_result | None, compressed: bool, limit: int | None,
                    unchanged: Unchanged | None) -> bool:
    """Whether a whole file is skipped unread as already signed.

    Not when this run's rules would skip it anyway (a plain file over the size limit, judged from ``stat``), so
    that whether a stored document counts as seen (for ``--prune``) never depends on its modification time; and
    a compressed file is read when there is a size limit, its size being known only once decompressed.
    """
    if unchanged is None or status is None:
        return False
    if not compressed:
        if limit is not None and stat_module.S_ISREG(status.st_mode) and status.st_size > limit:
            return False
    elif limit is not None:
        return False
    return unchanged(identifier, location_path(path), status)


def _changed_files(run: FileRun, limit: int | None, unchanged: Unchanged | None, report: ReadReport
                   ) -> tuple[list[str], list[str], list[int]]:
    """The ids, paths and sizes of the files of ``run`` to read: all but those skipped as unchanged (counted in
    ``report.unchanged``, their size in ``report.input_done``)."""
    assert run.sizes is not None and run.statuses is not None  # stated by stat_run
    if unchanged is None:
        return run.ids, run.paths, run.sizes
    read = [position for position, (identifier, path, status) in enumerate(zip(run.ids, run.paths, run.statuses,
                                                                               strict=True))
            if not _skip_unchanged(identifier, path, status, limit is not None and compression(path) is not None,
                                   limit, unchanged)]
    if len(read) == len(run.ids):
        return run.ids, run.paths, run.sizes
    report.unchanged += len(run.ids) - len(read)
    report.input_done += sum(run.sizes) - sum(run.sizes[position] for position in read)
    return ([run.ids[position] for position in read], [run.paths[position] for position in read],
            [run.sizes[position] for position in read])


class _UniformEnds:
    """The running sizes of ``count`` files of one ``size`` each (a run whose sizes are a sample's mean):
    ``ends[k] = (k + 1)·size``, for bisection without a list of them."""

    def __init__(self, size: int, count: int) -> None:
        self.size, self.count = size, count

    def __getitem__(self, position: int) -> int:
        return (position + 1) * self.size

    def __len__(self) -> int:
        return self.count


class _FilesAhead:
    """Whole files waiting to become a :class:`FilesTask`: cut when they reach :data:`TASK_BYTES` or
    :data:`TASK_FILES`, so which tasks there are depends on the files alone, however they were batched."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.paths: list[str] = []
        self.size = 0
        self.planned = 0  # bytes of the files tasks so far

    def task_bytes(self) -> int:
        """The size the next task is cut at: :data:`TASK_BYTES`, growing with the files planned before it."""
        return max(TASK_BYTES, min(LARGEST_TASK_BYTES, self.planned // TASK_GROWTH))

    def add(self, ids: list[str], paths: list[str], sizes: list[int]) -> Iterator[FilesTask]:
        """The tasks completed by these files (in order): the cut points found by bisection of their running
        sizes, so the work per file is a slice."""
        uniform = bool(sizes) and sizes.count(sizes[0]) == len(sizes)
        ends: _UniformEnds | list[int] = _UniformEnds(sizes[0], len(sizes)) if uniform else list(accumulate(sizes))
        start = 0
        while start < len(ids):
            before = ends[start - 1] if start else 0
            task_bytes = self.task_bytes()
            end = min(bisect_left(ends, task_bytes - self.size + before, start) + 1,
                      start + TASK_FILES - len(self.ids), len(ids))
            if self.ids:
                self.ids.extend(ids[start:end])
                self.paths.extend(paths[start:end])
            else:  # one copy of the names, not two
                self.ids, self.paths = ids[start:end], paths[start:end]
            self.size += ends[end - 1] - before
            start = end
            if self.size >= task_bytes or len(self.ids) >= TASK_FILES:
                yield from self.flush()

    def flush(self) -> Iterator[FilesTask]:
        if self.ids:
            yield FilesTask(tuple(self.ids), tuple(self.paths), self.size)
            self.planned += self.size
            self.ids, self.paths, self.size = [], [], 0


def plan_tasks(sources: Iterable[Source | FileRun], options: InputOptions, report: ReadReport, stdin: BinaryIO,
               unchanged: Unchanged | None = None, line_ranges: bool = False) -> Iterator[ReadTask]:
    """The tasks that read ``sources`` (from :func:`dedup_cli.inputs.discovery.plan_sources`, or runs of whole
    files from :func:`dedup_cli.inputs.discovery.walk_runs`), in order.

    Whole files skipped as unchanged are counted in ``report.unchanged`` and their size in ``report.input_done``;
    what is read here (stdin, line files, Parquet) is reported here or carried in the tasks. With
    ``line_ranges``, a plain line file read with no line limit is cut into :class:`LineRangeTask` s by its size
    alone (:func:`line_ranges_of`), for a caller that numbers their lines
    (:func:`dedup_cli.inputs.tasks.numbered_lines`).
    """
    files = _FilesAhead()
    limit = options.max_document_bytes
    whole_files = 0  # of runs of whole files, planned so far
    for source in sources:
        if isinstance(source, FileRun):
            every = 1 if unchanged is not None or whole_files < EXACT_STAT_FILES else STAT_SAMPLE_EVERY
            whole_files += len(source.ids)
            yield from files.add(*_changed_files(stat_run(source, report, every), limit, unchanged, report))
            continue
        if source.format == "text" and source.path != STDIN:
            if _skip_unchanged(source.id, source.path, source.status, source.compression is not None, limit,
                               unchanged):
                report.unchanged += 1
                report.input_done += source.size
                continue
            yield from files.add([source.id], [source.path], [source.size])
            continue
        yield from files.flush()
        if source.chunks is not None:  # a piece of a file (file_pieces): its chunks were cut when it was planned
            yield from source.chunks
            continue
        yield from _source_tasks(source, options, report, stdin, line_ranges)
    yield from files.flush()


def file_pieces(source: Source, options: InputOptions, piece_bytes: int) -> list[Source]:
    """A plain line or CSV/TSV file larger than ``piece_bytes`` cut into pieces of about that size, for the tasks
    of a distributed engine; else (a compressed file, which can only be read from its start, stdin, an object
    store's file, a JSON array, which only a parse from its start can cut, a smaller one) the file itself.

    The cuts are those :func:`plan_tasks` makes for any reader (whole lines; whole CSV/TSV records, where the quotes
    before them say a CSV record ends), found by reading the file once here: each piece carries its run of
    chunks (``Source.chunks``), which know their first line's number, so a worker reads its piece alone and numbers
    its lines (``FILE:LINE`` ids, locations) as a reader of the whole file would. A file this reading cannot cut
    (read error, binary) stays whole, for the worker to read and report as it reads any file. InputError when a
    CSV/TSV header lacks a named column.
    """
    if (source.format in ("text", "json", "parquet") or source.chunks is not None or source.size <= piece_bytes
            or not _in_place(source, source.status)):
        return [source]
    planned = ReadReport(max_document_bytes=options.max_document_bytes)
    pieces: list[Source] = []
    chunks: list[ReadTask] = []
    start = 0  # where the piece being gathered starts in the file (the first holds the header, if any)
    for task in _source_tasks(source, options, planned, io.BytesIO()):
        if not isinstance(task, (LinesTask, TableTask)) or task.notes or task.chunk.offset < 0:
            return [source]  # binary, or damaged: read whole by the worker, which reports it
        chunks.append(task)
        end = task.chunk.offset + task.chunk.length  # a chunk read in place: where its lines are
        if end - start >= piece_bytes:
            pieces.append(dataclasses.replace(source, size=end - start, chunks=tuple(chunks)))
            chunks, start = [], end
    if chunks:
        pieces.append(dataclasses.replace(source, size=source.size - start, chunks=tuple(chunks)))
    return pieces if len(pieces) > 1 and not planned.count("unreadable") else [source]


def _source_tasks(source: Source, options: InputOptions, report: ReadReport, stdin: BinaryIO, line_ranges: bool = False
                  ) -> Iterator[ReadTask]:
    """The tasks of stdin, a line file or a Parquet file, read here. Each input of records is entered in
    ``report.records_by_input`` (one that yields none held no record); stdin that holds no byte is noted as
    empty, and read no further."""
    if source.format == "parquet" and source.compression is not None:
        report.note("unreadable", (source.display, f"Parquet cannot be read through {source.compression} "
                                                   "compression (it compresses its own columns); decompress it"))
        return
    if source.path != STDIN:
        report.records_by_input.setdefault(source.display, [0, 0])
    done = 0  # of the source's bytes on disk, those the tasks so far account for
    try:
        if source.path == STDIN:
            consumed = Counted(stdin)
            with stdin_stream(consumed, source, options) as (stream, source):
                if not stream.peek(1):  # an empty batch (a pipe whose writer failed): no document, not even ''
                    report.note("empty_inputs", (STDIN_NAME, emptiness(source.compression, consumed.consumed)))
                    return
                if source.format != "text":
                    report.records_by_input.setdefault(source.display, [0, 0])
                if source.format == "text":
                    read = list(read_whole(stream, None, source, options.max_document_bytes, report))
                    yield DocumentsTask(tuple(d for _, d in read), tuple(w for w, _ in read), consumed.consumed)
                elif source.format == "json":
                    yield from _json_tasks(stream, None, source, options, report)
                elif source.format in TABLE_FORMATS:
                    yield from _table_tasks(stream, None, source, options, consumed.position)
                else:
                    yield from _line_tasks(stream, None, source, options, consumed.position)
            return
        with open_decompressed(source.path, source.compression) as (stream, status, position):
            mtime_ns = status.st_mtime_ns if status is not None else 0
            if source.format == "parquet":
                from dedup_cli.inputs.parquet_inputs import open_parquet, parquet_rows  # only with Parquet inputs

                parquet = open_parquet(stream, source, report)
                for rows in [] if parquet is None else parquet_rows(parquet, source, options, TASK_FILES, TASK_BYTES):
                    yield RowsTask(source, rows, mtime_ns, rows.position - done)
                    done = rows.position
                return
            tasks = (_table_tasks(stream, status, source, options, position) if source.format in TABLE_FORMATS
                     else _json_tasks(stream, status, source, options, report) if source.format == "json"
                     else _line_tasks(stream, status, source, options, position, line_ranges))
            for task in tasks:
                yield task
                done += task.input_bytes
    except READ_ERRORS as error:
        note_unreadable(report, source, error)
    finally:
        report.input_done += max(0, source.size - done)


def _json_tasks(stream: Any, status: os.stat_result | None, source: Source, options: InputOptions,
                report: ReadReport) -> Iterator[DocumentsTask]:
    """The records of a JSON array file (or stdin) as tasks of :data:`TASK_FILES` documents or :data:`TASK_BYTES`
    of text, parsed here: an array cannot be cut into tasks without parsing it (:mod:`dedup_cli.inputs.json_arrays`).
    Under ``auto``, a file that starts no array is one text document, as any other file; under ``json`` it is
    skipped as malformed."""
    data = read_capped(stream, b"", None)
    assert data is not None
    read = ReadReport(max_document_bytes=options.max_document_bytes)
    mtime_ns = status.st_mtime_ns if status is not None else 0
    if data.find(b"\0", 0, BINARY_SNIFF_BYTES) >= 0:
        report.bytes_read += min(len(data), BINARY_SNIFF_BYTES)
        report.note("binary", source.display)
        return
    if not starts_an_array(data) and options.input_format == "json":
        if data.strip():  # (white space alone holds no record: an empty input)
            read.note("malformed", (source.display, "expected a JSON array of records (it does not start with "
                                                    "'['); read it as text with --input-format auto"))
        read.tally_input(source.display, 0)
        report.merge(read)
        return
    if not starts_an_array(data):  # one text document, as any file: no records, no record options to apply
        found = list(read_whole(io.BytesIO(data), status, dataclasses.replace(source, format="text"),
                                options.max_document_bytes, read))
        report.records_by_input.pop(source.display, None)
        read.count_format("json", -1)
        read.count_format("text")
        report.merge(read)
        if found:
            yield DocumentsTask(tuple(d for _, d in found), tuple(w for w, _ in found), source.size)
        return
    read.bytes_read += len(data)
    documents: list[Any] = []
    wheres: list[str] = []
    held = done = total = 0  # the text the batch holds; the bytes of the file the tasks so far account for
    for where, document, end in array_documents(data, source, options, mtime_ns, read):
        documents.append(document)
        wheres.append(where)
        held += document.size
        total += 1
        if len(documents) >= TASK_FILES or held >= TASK_BYTES:
            reached = source.size * end // max(1, len(data))  # about where the element ends in the file
            yield DocumentsTask(tuple(documents), tuple(wheres), reached - done)
            documents, wheres, held, done = [], [], 0, reached
    read.tally_input(source.display, total)
    report.merge(read)
    if documents:
        yield DocumentsTask(tuple(documents), tuple(wheres), source.size - done)


def line_range_bytes(size: int) -> int:
    """The size of the ranges a line file of ``size`` bytes is cut into: :data:`LINE_RANGE_BYTES`, larger for a
    large file (1/:data:`TASK_GROWTH` of it, up to :data:`LARGEST_TASK_BYTES`), as files tasks grow; it depends
    on the size alone, so the tasks are the same whatever the number of workers."""
    return max(LINE_RANGE_BYTES, min(LARGEST_TASK_BYTES, size // TASK_GROWTH))


def line_ranges_of(source: Source, status: os.stat_result, head: bytes) -> Iterator[LineRangeTask]:
    """A plain line file of ``status.st_size`` bytes cut into ranges (:func:`line_range_bytes`), none read here;
    ``head``, its first bytes, tells about how many lines each holds (for the choice of kernel)."""
    size, step = status.st_size, line_range_bytes(status.st_size)
    newlines = max(1, head.count(NEWLINE))
    for start in range(0, size, step):
        end = min(size, start + step)
        yield LineRangeTask(source, start, end, size, status.st_mtime_ns,
                            max(1, (end - start) * newlines // max(1, len(head))))


def _in_place(source: Source, status: os.stat_result | None) -> bool:
    """Whether a file's lines or records can stay where they are, for the workers to read them themselves."""
    return (source.path != STDIN and source.compression is None and status is not None
            and stat_module.S_ISREG(status.st_mode) and not is_url(source.path))  # an object is read once


def _table_tasks(stream: Any, status: os.stat_result | None, source: Source, options: InputOptions,
                 position: Position) -> Iterator[TableTask]:
    """The chunks of whole records of a CSV or TSV file (or stdin) as tasks, cut where records end
    (:func:`dedup_cli.inputs.delimited.table_chunks`: this process reads the input once, the workers parse the
    records); a binary file is one task with nothing but its note. InputError when the header lacks a named
    column or is not one record."""
    mtime_ns = status.st_mtime_ns if status is not None else 0
    head = stream.read(BINARY_SNIFF_BYTES)
    if b"\0" in head:
        yield TableTask(source, (), LineChunk(b"", 1), mtime_ns, position(), (("binary", source.display),), len(head))
        return
    chunks = table_chunks(stream, head, position, _in_place(source, status), CHUNK_BYTES, CHUNK_LINES, source.format)
    try:
        raw = next(chunks, None)  # the header comes first
    except ValueError as error:  # the header runs to the end of the file inside a quoted field
        raise InputError(f"{source.display}: its header is {error}") from None
    if raw is None:
        return
    assert isinstance(raw, bytes)
    header, header_bytes, done = parse_header(raw, source), len(raw), 0
    column_positions(header, source, options.text_field, options.id_field)
    for chunk in chunks:
        assert isinstance(chunk, LineChunk)
        yield TableTask(source, header, chunk, mtime_ns, chunk.position - done, bytes_read=header_bytes)
        header_bytes, done = 0, chunk.position


def _line_tasks(stream: Any, status: os.stat_result | None, source: Source, options: InputOptions,
                position: Position, line_ranges: bool = False) -> Iterator[LinesTask | LineRangeTask]:
    """The chunks of a line file (or stdin) as tasks; a binary file is one task with nothing but its note."""
    mtime_ns = status.st_mtime_ns if status is not None else 0
    head = stream.read(BINARY_SNIFF_BYTES)
    if b"\0" in head:
        yield LinesTask(source, LineChunk(b"", 1), mtime_ns, position(), (("binary", source.display),), len(head))
        return
    done = 0
    # A plain file's lines stay where they are: the workers read their chunk's lines from the file themselves.
    in_place = _in_place(source, status)
    if in_place and line_ranges and options.max_document_bytes is None:
        # No line to skip (a line over a limit is skipped unread, by one reader), so the lines can be found where
        # they are: by the workers, each in its own range of the file; nothing more is read here.
        assert status is not None
        yield from line_ranges_of(source, status, head)
        return
    if in_place and options.max_document_bytes is None:  # no line to skip: only the newlines' places are needed
        chunks = in_place_chunks(stream, head)
    else:
        chunks = line_chunks(Prefixed(head, stream), options.max_document_bytes, position, in_place)
    while True:
        try:
            chunk = next(chunks, None)
        except READ_ERRORS as error:
            damaged = ReadReport()
            note_unreadable(damaged, source, error)
            yield LinesTask(source, LineChunk(b"", 1), mtime_ns, position() - done, (("unreadable",
                                                                                      damaged.unreadable[0]),))
            return
        if chunk is None:
            return
        yield LinesTask(source, chunk, mtime_ns, chunk.position - done)
        done = chunk.position
