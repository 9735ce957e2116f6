"""Reading tasks: the units of the inputs that a worker reads and turns into documents, wherever it runs.

The process that plans a run (:mod:`dedup_cli.inputs.task_planning`) lists the files (and ``stat`` s them, or a
sample of them) and reads only what must be read in order: line files (cut into chunks of whole lines) and Parquet
files (rows in batches). Workers do the rest, in parallel: open and read whole files, split and parse lines
(JSON), turn Parquet cells into documents. A task is a small picklable value:

* :class:`FilesTask`: whole files, each one document (plain or compressed), read by the worker;
* :class:`LinesTask`: a chunk of whole lines of one lines, JSON Lines or integer-set input;
* :class:`LineRangeTask`: the lines that start in a range of bytes of a plain line file, found and counted by
  the worker, which becomes a :class:`LinesTask` once the lines before the range are counted
  (:func:`numbered_lines`);
* :class:`TableTask`: a chunk of whole records of one CSV or TSV input, with its header
  (:mod:`dedup_cli.inputs.delimited`);
* :class:`RowsTask`: consecutive rows of one Parquet input (its text and id columns);
* :class:`DocumentsTask`: documents already read (stdin read as one document).

:func:`read_task` gives a task's documents, the location of each (for messages) and what it skipped or repaired,
as a :class:`ReadReport` to merge into the run's in task order; duplicate ids are found there, since only the
whole run knows which id came first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dedup_cli.inputs.blocks import parse_block
from dedup_cli.inputs.chunks import LineChunk, chunk_lines, count_newlines, read_range
from dedup_cli.inputs.columns import ColumnsBuilder, TextColumns, columns_of
from dedup_cli.inputs.delimited import table_documents
from dedup_cli.inputs.files import line_document, note_unreadable, read_files
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.input_options import InputOptions

if TYPE_CHECKING:
    from dedup_cli.inputs.parquet_inputs import ParquetRows

Record = Document | IntegerSet


@dataclass(frozen=True)
class FilesTask:
    """Whole files to read, each one document: their ids and paths; ``input_bytes``: their size on disk (for
    progress). Pickled, the ids and the paths are each one string, NUL between them (:meth:`__reduce__`), so that
    a task of hundreds of files is a copy of two strings rather than a pickle opcode per name."""

    ids: tuple[str, ...]
    paths: tuple[str, ...]
    input_bytes: int

    @classmethod
    def of(cls, sources: list[Source], input_bytes: int) -> FilesTask:
        return cls(tuple(source.id for source in sources), tuple(source.path for source in sources), input_bytes)

    def __reduce__(self) -> tuple[Any, ...]:
        return _files_task, (_nul_joined(self.ids), _nul_joined(self.paths), self.input_bytes)


def _nul_joined(names: tuple[str, ...]) -> str | tuple[str, ...]:
    """``names`` as one string, NUL between them, unless one holds a NUL (no file's name can; an object's key
    might) or there are none: then the names themselves."""
    joined = "\0".join(names)
    return joined if joined.count("\0") == len(names) - 1 else names


def _files_task(ids: str | tuple[str, ...], paths: str | tuple[str, ...], input_bytes: int) -> FilesTask:
    """A :class:`FilesTask` unpickled (:func:`_nul_joined`)."""
    return FilesTask(tuple(ids.split("\0")) if isinstance(ids, str) else ids,
                     tuple(paths.split("\0")) if isinstance(paths, str) else paths, input_bytes)


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
class LineRangeTask:
    """The lines of the plain line file ``source`` that start in its bytes ``start`` … ``end`` − 1, as
    :func:`dedup_cli.inputs.chunks.read_range` finds them; ``size`` and ``mtime_ns`` are the file's when planned
    (a file that changed since is reported, not read); ``lines``: about how many lines the range holds (from the
    file's first bytes), for the choice of kernel. The process that plans it reads nothing of the range: the
    worker reads and counts its lines, and numbers them once the ranges before it are counted
    (:func:`numbered_lines`)."""

    source: Source
    start: int
    end: int
    size: int
    mtime_ns: int
    lines: int

    @property
    def input_bytes(self) -> int:
        return self.end - self.start


def numbered_lines(task: LineRangeTask, first_line_of: Callable[[int], int]) -> LinesTask:
    """Read the lines of a range and number them: ``first_line_of`` is told how many newlines the range holds
    (-1 when it could not be read) and gives the number of its first line, once the ranges of the file before it
    are counted (0: one of them could not be read, so its lines cannot be numbered; it is not read)."""
    try:
        data = read_range(task.source.path, task.start, task.end, task.size, task.mtime_ns)
    except (OSError, ValueError) as error:
        first_line_of(-1)
        damaged = ReadReport()
        note_unreadable(damaged, task.source, error)
        return LinesTask(task.source, LineChunk(b"", 1), task.mtime_ns, task.input_bytes,
                         (("unreadable", damaged.unreadable[0]),))
    first_line = first_line_of(count_newlines(data))
    if first_line <= 0:
        return LinesTask(task.source, LineChunk(b"", 1), task.mtime_ns, task.input_bytes)
    return LinesTask(task.source, LineChunk(data, first_line), task.mtime_ns, task.input_bytes)


@dataclass(frozen=True)
class TableTask:
    """A chunk of whole records of the CSV or TSV input ``source`` (its ``first_line`` is the number of its first
    record), whose header names the columns ``header``; ``notes`` and ``bytes_read`` as for :class:`LinesTask`."""

    source: Source
    header: tuple[str, ...]
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


ReadTask = FilesTask | LinesTask | LineRangeTask | TableTask | RowsTask | DocumentsTask


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


def _line_documents(task: LinesTask, chunk: LineChunk, options: InputOptions, report: ReadReport
                    ) -> Iterator[tuple[str, Record]]:
    """The records of a chunk, line by line: the parser that names each bad line ``FILE:LINE``."""
    source = task.source
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


def _chunk(task: LinesTask | TableTask, report: ReadReport) -> LineChunk | None:
    """The task's chunk with its lines, or None when they cannot be read (noted in ``report``)."""
    try:
        return task.chunk.with_data(task.source.path)
    except (OSError, ValueError) as error:
        note_unreadable(report, task.source, error)
        return None


def _task_notes(task: LinesTask | TableTask, report: ReadReport) -> None:
    report.bytes_read += task.bytes_read
    for kind, item in task.notes:
        report.note(kind, item)


def _line_columns(task: LinesTask, options: InputOptions, report: ReadReport) -> TextColumns:
    """The documents of a chunk of a ``lines`` or ``jsonl`` input as columns: a block at a time when the block
    parser can vouch for the chunk (:mod:`dedup_cli.inputs.blocks`), else line by line."""
    source = task.source
    chunk = _chunk(task, report)
    if chunk is None:
        return ColumnsBuilder().build()
    block = parse_block(chunk.data, chunk.first_line, source, options.text_field, options.id_field,
                        options.max_document_bytes, task.mtime_ns)
    if block is None:
        builder = ColumnsBuilder()
        for where, document in _line_documents(task, chunk, options, report):
            builder.add_document(where, document)  # type: ignore[arg-type]
        columns = builder.build()
    else:
        for number, consumed in chunk.skipped:  # the lines over the limit just before the chunk's own
            report.bytes_read += consumed
            report.note("oversized", (f"{source.display}:{number}", consumed))
        report.bytes_read += len(chunk.data)
        report.blank_lines += block.blank_lines
        columns = block.columns
    _task_notes(task, report)
    return columns


@dataclass
class TaskColumns:
    """What reading one task of text gave: its documents in input order, as columns, and the task's skipped and
    repaired inputs and bytes read."""

    columns: TextColumns
    report: ReadReport


def read_task_columns(task: ReadTask, options: InputOptions) -> TaskColumns:
    """The documents of one task of text inputs (not integer sets) as columns, read as ``options`` say."""
    if isinstance(task, LineRangeTask):
        raise TypeError("a range of lines is read by numbered_lines, once the lines before it are counted")
    report = ReadReport(max_document_bytes=options.max_document_bytes)
    if isinstance(task, FilesTask):
        columns = read_files(task.ids, task.paths, options.max_document_bytes, report)
    elif isinstance(task, LinesTask):
        columns = _line_columns(task, options, report)
        report.tally_input(task.source.display, len(columns))
    else:
        read = read_task(task, options)
        columns = columns_of(read.documents, read.wheres)  # type: ignore[arg-type]
        report = read.report
    return TaskColumns(columns, report)


def read_task(task: ReadTask, options: InputOptions) -> TaskDocuments:
    """The documents of one task, read as ``options`` say, and what reading them found."""
    if isinstance(task, LineRangeTask):
        raise TypeError("a range of lines is read by numbered_lines, once the lines before it are counted")
    read = TaskDocuments(report=ReadReport(max_document_bytes=options.max_document_bytes))
    if isinstance(task, FilesTask) or (isinstance(task, LinesTask) and task.source.format != "sets"):
        found = read_task_columns(task, options)
        read.documents, read.report = list(found.columns.documents()), found.report
        read.wheres = [found.columns.wheres[position] for position in range(len(found.columns))]
    elif isinstance(task, LinesTask):
        chunk = _chunk(task, read.report)
        if chunk is not None:
            read.add(_line_documents(task, chunk, options, read.report))
            _task_notes(task, read.report)
        read.report.tally_input(task.source.display, len(read.documents))
    elif isinstance(task, TableTask):
        chunk = _chunk(task, read.report)
        if chunk is not None:
            read.add(table_documents(chunk.data, chunk.first_line, task.source, task.header, options.text_field,
                                     options.id_field, options.max_document_bytes, task.mtime_ns, read.report))
            _task_notes(task, read.report)
        read.report.tally_input(task.source.display, len(read.documents))
    elif isinstance(task, RowsTask):
        from dedup_cli.inputs.parquet_inputs import row_documents  # only with Parquet inputs

        read.add(row_documents(task.rows, task.source, options, task.mtime_ns, read.report))
        read.report.tally_input(task.source.display, len(read.documents))
    else:
        read.documents, read.wheres = list(task.documents), list(task.wheres)
    return read


def task_bytes(task: ReadTask) -> int:
    """About how many bytes of text a task holds: its size on disk, or its bytes already read."""
    if isinstance(task, (LinesTask, TableTask)):
        return task.chunk.length or len(task.chunk.data)  # a chunk read in place holds no data yet
    if isinstance(task, RowsTask):
        return task.rows.texts.nbytes
    return task.input_bytes


def task_documents(task: ReadTask) -> int:
    """About how many documents a task holds: its files, lines or rows."""
    if isinstance(task, FilesTask):
        return len(task.ids)
    if isinstance(task, (LinesTask, TableTask)):
        return task.chunk.newlines if task.chunk.offset >= 0 else task.chunk.data.count(b"\n")
    if isinstance(task, LineRangeTask):
        return task.lines
    if isinstance(task, RowsTask):
        return len(task.rows.texts)
    return len(task.documents)


def task_held_bytes(task: ReadTask) -> int:
    """The bytes of text a task holds in memory (none for whole files and line files read in place)."""
    if isinstance(task, (LinesTask, TableTask)):
        return len(task.chunk.data)
    if isinstance(task, (FilesTask, LineRangeTask)):
        return 0
    return task_bytes(task)


def task_coming_bytes(task: ReadTask) -> int:
    """The bytes of a file read in place after a task's chunk: tasks still to come (none for other tasks)."""
    if isinstance(task, (LinesTask, TableTask)) and task.chunk.offset >= 0:
        return max(0, task.source.size - task.chunk.offset - task.chunk.length)
    if isinstance(task, LineRangeTask):
        return task.size - task.end
    return 0
