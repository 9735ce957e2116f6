"""Reading tasks: the units of the inputs that a worker reads and turns into documents, wherever it runs.

The process that plans a run (:mod:`dedup_cli.inputs.planning`) lists and stats the files and reads only what
must be read in order: line files (cut into chunks of whole lines) and Parquet files (rows in batches). Workers
do the rest, in parallel: open and read whole files, split and parse lines (JSON), turn Parquet cells into
documents. A task is a small picklable value:

* :class:`FilesTask`: whole files, each one document (plain or compressed), read by the worker;
* :class:`LinesTask`: a chunk of whole lines of one lines, JSON Lines or integer-set input;
* :class:`RowsTask`: consecutive rows of one Parquet input (its text and id columns);
* :class:`DocumentsTask`: documents already read (stdin read as one document).

:func:`read_task` gives a task's documents, the location of each (for messages) and what it skipped or repaired,
as a :class:`ReadReport` to merge into the run's in task order; duplicate ids are found there, since only the
whole run knows which id came first.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dedup_cli.inputs.chunks import LineChunk, chunk_lines
from dedup_cli.inputs.files import line_document, note_unreadable, read_whole
from dedup_cli.inputs.locations import Source, display_name
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.remote import fetch_documents
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.streams import READ_ERRORS, compression, open_decompressed
from dedup_cli.options.reading import InputOptions
from dedup_cli.storage.urls import is_url

if TYPE_CHECKING:
    from dedup_cli.inputs.parquet import ParquetRows

Record = Document | IntegerSet


@dataclass(frozen=True)
class FilesTask:
    """Whole files to read, each one document: their ids and paths (two tuples of strings, so that a task of
    thousands of files travels to a worker in a few hundred microseconds); ``input_bytes``: their size on disk
    (for progress)."""

    ids: tuple[str, ...]
    paths: tuple[str, ...]
    input_bytes: int

    @classmethod
    def of(cls, sources: list[Source], input_bytes: int) -> FilesTask:
        return cls(tuple(source.id for source in sources), tuple(source.path for source in sources), input_bytes)

    def sources(self) -> Iterator[Source]:
        """The files as :func:`dedup_cli.inputs.discovery.plan_sources` lists them (text, by their names)."""
        for identifier, path in zip(self.ids, self.paths, strict=True):
            yield Source(identifier, path, display_name(path), "text", compression(path))


@dataclass(frozen=True)
class LinesTask:
    """A chunk of whole lines of ``source``; ``notes`` (kind, item) are noted after its lines (a binary file, a
    read error) and ``bytes_read`` are bytes read besides them (the head of a binary file)."""

    source: Source
    chunk: LineChunk
    mtime_ns: int
    input_bytes: int
    notes: tuple[tuple[str, Any], ...] = ()
    bytes_read: int = 0


@dataclass(frozen=True)
class RowsTask:
    """Consecutive rows of the Parquet input ``source``."""

    source: Source
    rows: ParquetRows
    mtime_ns: int
    input_bytes: int


@dataclass(frozen=True)
class DocumentsTask:
    """Documents already read, with their locations for messages."""

    documents: tuple[Record, ...]
    wheres: tuple[str, ...]
    input_bytes: int


ReadTask = FilesTask | LinesTask | RowsTask | DocumentsTask


@dataclass
class TaskDocuments:
    """What reading one task gave: its documents in input order, where each was read (``FILE``, ``FILE:LINE``,
    ``FILE row N``) and the task's skipped and repaired inputs and bytes read."""

    documents: list[Record] = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    report: ReadReport = field(default_factory=ReadReport)

    def add(self, found: Iterator[tuple[str, Record]]) -> None:
        for where, document in found:
            self.wheres.append(where)
            self.documents.append(document)


class PlainFile:
    """A file read with the system's calls alone: open, fstat, read, close. Python's buffered ``open`` adds a
    second fstat and, for a file smaller than its buffer, a second read: six calls a file instead of four, a
    third of the time of reading many small files."""

    def __init__(self, path: str) -> None:
        self.descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def read(self, size: int) -> bytes:
        return os.read(self.descriptor, size)

    def status(self) -> os.stat_result:
        return os.fstat(self.descriptor)

    def __enter__(self) -> PlainFile:
        return self

    def __exit__(self, *exception: object) -> None:
        os.close(self.descriptor)


def read_file(source: Source, limit: int | None, report: ReadReport,
              fetched: tuple[bytes, os.stat_result] | OSError | None = None) -> Iterator[tuple[str, Document]]:
    """The document of one whole file (plain or compressed); a file that cannot be read is noted in ``report``.
    ``fetched``: an object already read, with its status, or the error reading it."""
    try:
        if fetched is not None:
            if isinstance(fetched, OSError):
                raise fetched
            yield from read_whole(io.BytesIO(fetched[0]), fetched[1], source, limit, report)
            return
        if source.compression is None and not is_url(source.path):
            # The common case, many small plain files: without the decompression layer or Python's buffering.
            with PlainFile(source.path) as plain:
                yield from read_whole(plain, plain.status(), source, limit, report)
            return
        with open_decompressed(source.path, source.compression) as (stream, status, _):
            yield from read_whole(stream, status, source, limit, report)
    except READ_ERRORS as error:
        note_unreadable(report, source, error)


def _line_documents(task: LinesTask, options: InputOptions, report: ReadReport) -> Iterator[tuple[str, Record]]:
    source = task.source
    try:
        chunk = task.chunk.with_data(source.path)
    except (OSError, ValueError) as error:
        note_unreadable(report, source, error)
        return
    for number, line, consumed in chunk_lines(chunk, options.max_document_bytes):
        report.bytes_read += consumed
        if line is None:
            report.note("oversized", (f"{source.display}:{number}", consumed))
            continue
        if not line or line.isspace():
            report.blank_lines += 1
            continue
        document = line_document(line, number, source, options, task.mtime_ns, report)
        if document is not None:
            yield f"{source.display}:{number}", document
    report.bytes_read += task.bytes_read
    for kind, item in task.notes:
        report.note(kind, item)


def read_task(task: ReadTask, options: InputOptions) -> TaskDocuments:
    """The documents of one task, read as ``options`` say, and what reading them found."""
    read = TaskDocuments(report=ReadReport(max_document_bytes=options.max_document_bytes))
    if isinstance(task, FilesTask):
        # Objects in object storage are fetched together: one GET each, many in flight.
        fetched = fetch_documents([path for path in task.paths if compression(path) is None])
        for source in task.sources():
            read.add(read_file(source, options.max_document_bytes, read.report, fetched.get(source.path)))
    elif isinstance(task, LinesTask):
        read.add(_line_documents(task, options, read.report))
    elif isinstance(task, RowsTask):
        from dedup_cli.inputs.parquet import row_documents  # only with Parquet inputs

        read.add(row_documents(task.rows, task.source, options, task.mtime_ns, read.report))
    else:
        read.documents, read.wheres = list(task.documents), list(task.wheres)
    return read


def task_bytes(task: ReadTask) -> int:
    """About how many bytes of text a task holds: its size on disk, or its bytes already read."""
    if isinstance(task, LinesTask):
        return task.chunk.length or len(task.chunk.data)  # a chunk read in place holds no data yet
    if isinstance(task, RowsTask):
        return task.rows.texts.nbytes
    return task.input_bytes
