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

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dedup_cli.inputs.chunks import LineChunk, chunk_lines
from dedup_cli.inputs.files import line_document, note_unreadable, read_whole
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.parquet import ParquetRows, row_documents
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.streams import READ_ERRORS, open_decompressed
from dedup_cli.options.reading import InputOptions

Record = Document | IntegerSet


@dataclass(frozen=True)
class FilesTask:
    """Whole files to read, each one document; ``input_bytes``: their size on disk (for progress)."""

    sources: tuple[Source, ...]
    input_bytes: int


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


def read_file(source: Source, limit: int | None, report: ReadReport) -> Iterator[tuple[str, Document]]:
    """The document of one whole file (plain or compressed); a file that cannot be read is noted in ``report``."""
    try:
        if source.compression is None:
            # The common case, many small plain files: opened directly, without the decompression layer.
            with open(source.path, "rb") as plain:
                yield from read_whole(plain, os.fstat(plain.fileno()), source, limit, report)
            return
        with open_decompressed(source.path, source.compression) as (stream, status, _):
            yield from read_whole(stream, status, source, limit, report)
    except READ_ERRORS as error:
        note_unreadable(report, source, error)


def _line_documents(task: LinesTask, options: InputOptions, report: ReadReport) -> Iterator[tuple[str, Record]]:
    source = task.source
    for number, line, consumed in chunk_lines(task.chunk, options.max_document_bytes):
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
        for source in task.sources:
            read.add(read_file(source, options.max_document_bytes, read.report))
    elif isinstance(task, LinesTask):
        read.add(_line_documents(task, options, read.report))
    elif isinstance(task, RowsTask):
        read.add(row_documents(task.rows, task.source, options, task.mtime_ns, read.report))
    else:
        read.documents, read.wheres = list(task.documents), list(task.wheres)
    return read


def task_bytes(task: ReadTask) -> int:
    """About how many bytes of text a task holds: its size on disk, or its bytes already read."""
    if isinstance(task, LinesTask):
        return len(task.chunk.data)
    if isinstance(task, RowsTask):
        return task.rows.texts.nbytes
    return task.input_bytes
