"""``sign`` on a Dask cluster: tasks read and sign their share of the inputs and each write one part of the run.

The driver lists the inputs, takes the store's writer lock and reads its document index, as the local engine does
(:mod:`dedup_cli.api.sign`); it cuts the inputs into tasks of about :data:`TASK_BYTES` (less for a small run:
:func:`run_task_bytes`), runs of files in id order; a Parquet file larger than that by row groups, and a plain line
or CSV/TSV file at record boundaries, as the local engine's planning cuts it
(:func:`dedup_cli.inputs.task_planning.file_pieces`), and gives each task the stored entries of its documents, so
that unchanged files and records are skipped there without being signed. Each task reads as a worker of the
local engine reads, with the same reading tasks (:func:`dedup_cli.inputs.task_planning.plan_tasks`) and column
reader (:func:`dedup_cli.inputs.tasks.read_task_columns`), signs the columns with
:func:`dedup_cli.engine.stages.sign.sign_columns` (integer sets record by record) and writes its rows as one part
under a temporary name (:func:`dedup_cli.store.runs.write_task_part`). The driver then
drops what the tasks could not know alone (an id already read by an earlier task; a record with an id field whose
stored copy is unchanged), adopts the parts into the run and commits once: the manifest replace is still the only
commit point, so a driver killed at any moment leaves the store as it was, and a task that ran on a worker killed
mid-way runs again and writes its part again.

The workers read the inputs at the paths the driver names and write into the store directory: both must be on a
filesystem the workers share.
"""

from __future__ import annotations

import bisect
import dataclasses
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from distributed import as_completed, get_client
from distributed.scheduler import KilledWorker

from dedup_cli.engine.dask.cluster import ALLOWED_FAILURES
from dedup_cli.engine.stages.sign import (
    Record,
    Signed,
    batches,
    hasher_for,
    kept_positions,
    sign_columns,
    sign_records,
)
from dedup_cli.errors import DedupError
from dedup_cli.inputs.columns import TextColumns
from dedup_cli.inputs.locations import Source, location_path, parse_location, where_read
from dedup_cli.inputs.reading import accept_documents, read_sources
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.task_planning import file_pieces
from dedup_cli.inputs.task_planning import plan_tasks as plan_read_tasks
from dedup_cli.inputs.tasks import read_task_columns
from dedup_cli.kernel.choice import KernelChoice
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.runs import StoreRun, rewrite_task_part, write_task_part
from dedup_cli.store.snapshot import HELD_ELSEWHERE, SAME_SOURCE, DocumentIndex, source_of

TASK_BYTES = 64 << 20
"""Input bytes a task aims at: a few seconds of signing, so a lost worker costs little, and few parts per run."""
SMALLEST_TASK_BYTES = 4 << 20
TASKS_AT_LEAST = 32
"""A smaller run has smaller tasks, down to :data:`SMALLEST_TASK_BYTES`, so that it is still :data:`TASKS_AT_LEAST`
tasks and the workers of a cluster share it (one 30 MB file was one task, read by one worker while the others
waited); they depend on the inputs alone, not on the number of workers."""


def run_task_bytes(total: int) -> int:
    """The input bytes a task of a run of ``total`` bytes aims at (:data:`TASK_BYTES`, less for a small run)."""
    return min(TASK_BYTES, max(SMALLEST_TASK_BYTES, total // TASKS_AT_LEAST))

Known = dict[str, tuple[str, int, int, int]]
"""Stored entries a task compares its documents with: id → (location, size, mtime_ns, content hash)."""


@dataclass
class SignTask:
    """One task: its sources (in order), what the store knows of their documents, and where its part goes."""

    index: int
    sources: list[Source]
    known: Known
    input: InputOptions
    params: SignatureParams
    store: str
    run: int
    number: int  # the part's file number
    token: str  # the run's, in temporary names
    kernel: str  # the signing kernel (numpy or numba: the same bytes)
    by_status: bool = True  # a whole file whose location, size and mtime are stored is unchanged unread


@dataclass
class TaskResult:
    """What a task did: its reading report, its part and the ids of its rows, the ids it read, counts."""

    index: int
    report: ReadReport
    part: WrittenFile | None
    ids: list[str]  # of the part's rows, in order
    hashes: np.ndarray  # uint64, their content hashes
    locations: list[str]  # their locations
    seen: list[str]  # every id read (signed or unchanged), in order
    empty: int  # rows with no shingle
    unchanged: int  # documents read and found unchanged
    size: int  # the sources' bytes on disk


def sign_task(task: SignTask) -> TaskResult:
    """Read, sign and write one task's share (runs on a worker)."""
    report = ReadReport()
    seen: list[str] = []
    unchanged = 0
    ids: list[str] = []
    hashes: list[np.ndarray] = []
    locations: list[str] = []
    empty = 0

    def file_unchanged(identifier: str, location: str, status: Any) -> bool:
        if not task.by_status:  # (checksum) read it: its content hash decides
            return False
        entry = task.known.get(identifier)
        same = entry is not None and entry[:3] == (location, status.st_size, status.st_mtime_ns)
        if same:
            seen.append(identifier)
        return same

    # The sources this task reads: an id the store holds from one of them is kept by it, whichever of them
    # comes first in the task (the driver rules on the sources of other tasks, :func:`_corrections`).
    here = {location_path(source.path) for source in task.sources}

    def held_elsewhere(identifier: str, location: str) -> str | None:
        entry = task.known.get(identifier)
        if entry is None:
            return None
        source = source_of(entry[0])
        return entry[0] if source != source_of(location) and source in here else None

    def stored_unchanged(identifier: str, content_hash: int, location: str) -> bool:
        entry = task.known.get(identifier)
        return entry is not None and entry[3] == content_hash and source_of(entry[0]) == source_of(location)

    def signed() -> Iterator[Any]:
        nonlocal unchanged, empty
        if task.params.input_kind == "sets":
            skipped = [0]
            for batch in _signed_records(task, report, file_unchanged, held_elsewhere, stored_unchanged, seen, ids,
                                         hashes, locations, skipped):
                empty += int(np.count_nonzero(batch.shingle_counts == 0))
                yield batch
            unchanged += skipped[0]
            return
        accepted: set[str] = set()
        report.max_document_bytes = task.input.max_document_bytes
        # The local engine's reading tasks and column reading, as each of its workers reads a task.
        for read in plan_read_tasks(task.sources, task.input, report, sys.stdin.buffer, file_unchanged):
            found = read_task_columns(read, task.input)
            report.merge(found.report)
            columns = found.columns
            if task.known:
                columns = _not_held_elsewhere(columns, held_elsewhere, report)
            kept_positions = accept_documents(report, accepted, columns.ids, columns.wheres, columns.empty)
            if len(kept_positions) < len(columns):
                columns = columns.take(np.asarray(kept_positions, np.int64))
            seen.extend(columns.ids)
            fresh = np.ones(len(columns), np.bool_)
            if task.known:
                fresh = np.array([not stored_unchanged(identifier, int(content_hash), location) for
                                  identifier, content_hash, location in
                                  zip(columns.ids, columns.content_hashes.tolist(), columns.locations, strict=True)],
                                 np.bool_)
                unchanged += int(np.count_nonzero(~fresh))
                if not fresh.all():
                    columns = columns.take(np.flatnonzero(fresh))
            report.input_done += read.input_bytes
            if not len(columns):
                continue
            counts, signatures = sign_columns(columns, task.params, task.kernel)
            empty += int(np.count_nonzero(counts == 0))
            ids.extend(columns.ids)
            hashes.append(np.asarray(columns.content_hashes, np.uint64))
            locations.extend(columns.locations)
            yield DocumentBatch(columns.ids, columns.locations, columns.sizes, columns.mtimes_ns,
                                columns.content_hashes, counts, signatures)

    part = write_task_part(task.store, task.params, task.run, task.number, task.token, signed())
    return TaskResult(task.index, report, part, ids, np.concatenate(hashes) if hashes else np.empty(0, np.uint64),
                      locations, seen, empty, unchanged, sum(source.size for source in task.sources))


def _not_held_elsewhere(columns: TextColumns, held_elsewhere: Callable[[str, str], str | None], report: ReadReport
                        ) -> TextColumns:
    """The documents of ``columns`` whose id no other source keeps; the others reported."""
    elsewhere = [(position, stored) for position, (identifier, location) in
                 enumerate(zip(columns.ids, columns.locations, strict=True))
                 if (stored := held_elsewhere(identifier, location)) is not None]
    if not elsewhere:
        return columns
    for position, stored in elsewhere:
        report.note("held_elsewhere", (columns.wheres[position], columns.ids[position], where_read(stored)))
    return columns.take(kept_positions(len(columns), elsewhere))


def _signed_records(task: SignTask, report: ReadReport, file_unchanged: Callable[..., bool],
                    held_elsewhere: Callable[[str, str], str | None],
                    stored_unchanged: Callable[[str, int, str], bool], seen: list[str], ids: list[str],
                    hashes: list[np.ndarray], locations: list[str], skipped: list[int]) -> Iterator[Any]:
    """The signed batches of a task of integer sets, read record by record (:func:`read_sources`); ``skipped[0]``
    counts the records found unchanged."""
    hasher = hasher_for(task.params)

    def to_sign() -> Iterator[Record]:
        for document in read_sources(task.sources, task.input, report, unchanged=file_unchanged,
                                     held_elsewhere=lambda record: held_elsewhere(record.id, record.path)):
            seen.append(document.id)
            if stored_unchanged(document.id, document.content_hash, document.path):
                skipped[0] += 1
                continue
            ids.append(document.id)
            hashes.append(np.array([document.content_hash], np.uint64))
            locations.append(document.path)
            yield document

    for batch in batches(to_sign()):
        yield sign_records(batch, task.params, hasher, task.kernel)


def task_inputs(sources: Sequence[Source]) -> str:
    """The inputs of a task, as messages name them: the one, or the first and last of several."""
    if len(sources) == 1:
        return literal(sources[0].display)
    return (f"one of {len(sources)} inputs from {literal(sources[0].display)} to "
            f"{literal(sources[-1].display)}")


def _parquet_pieces(source: Source, sizes: Sequence[int], task_bytes: int) -> list[Source]:
    """A Parquet source cut at row groups into pieces of about ``task_bytes`` of the file each."""
    total = max(sum(sizes), 1)
    pieces, start, first_row, rows = [], 0, 0, 0
    for group, size in enumerate(sizes):
        rows += size
        if source.size * rows // total >= task_bytes or group == len(sizes) - 1:
            share = source.size * rows // total
            pieces.append(dataclasses.replace(source, size=share, row_groups=(start, group + 1), first_row=first_row))
            start, first_row, rows = group + 1, first_row + rows, 0
    return pieces


def plan_tasks(sources: Sequence[Source], row_groups: Callable[[Source], list[int] | None],
               task_bytes: int | None = None, pieces: Callable[[Source, int], list[Source]] | None = None
               ) -> list[list[Source]]:
    """Sources cut into tasks of about ``task_bytes`` (default :func:`run_task_bytes` of their size) each, in order;
    ``row_groups`` gives a large Parquet file's row-group sizes (None when it cannot be read: it is one task then),
    and ``pieces`` cuts a large line or CSV/TSV file into pieces of about ``task_bytes`` at record boundaries
    (:func:`dedup_cli.inputs.task_planning.file_pieces`, the local engine's cuts), each a task of its own."""
    task_bytes = run_task_bytes(sum(source.size for source in sources)) if task_bytes is None else task_bytes
    tasks: list[list[Source]] = []
    current: list[Source] = []
    size = 0
    for source in sources:
        cut = [source]
        if source.format == "parquet" and source.compression is None and source.size > task_bytes:
            sizes = row_groups(source)
            cut = _parquet_pieces(source, sizes, task_bytes) if sizes else [source]
        elif pieces is not None and source.format not in ("text", "parquet") and source.size > task_bytes:
            cut = pieces(source, task_bytes)
        for piece in cut:
            if current and size + piece.size > task_bytes:
                tasks.append(current)
                current, size = [], 0
            current.append(piece)
            size += piece.size
    if current:
        tasks.append(current)
    return tasks


def unsplit_note(sources: Sequence[Source]) -> str | None:
    """A line for the user when one compressed input holds most (over half) of the inputs' bytes and more than a
    task's: a compressed file is read from its start, so it cannot be cut into tasks, and one worker reads it
    while the others wait. None otherwise."""
    total = sum(source.size for source in sources)
    largest = max((source for source in sources if source.compression is not None), default=None,
                  key=lambda source: source.size)
    if largest is None or 2 * largest.size <= total or largest.size <= run_task_bytes(total):
        return None
    return (f"{largest.display} is {largest.compression}-compressed and holds "
            f"{100 * largest.size // total}% of the input bytes: a compressed file cannot be cut into tasks, so one "
            "Dask worker reads it alone; decompress it (or split it into several files) to share it out")


def piece_lines(shares: Sequence[Sequence[Source]]) -> dict[int, tuple[int, int]]:
    """The numbers of the lines (records, for CSV/TSV) each piece of a file cut into tasks starts at and stops
    before (the next piece's first; no end for the last), by ``id`` of the piece."""
    pieces = [source for share in shares for source in share if source.chunks]
    firsts = [piece.chunks[0].chunk.first_line for piece in pieces if piece.chunks]
    ranges = {}
    for place, piece in enumerate(pieces):
        same_file = place + 1 < len(pieces) and pieces[place + 1].path == piece.path
        ranges[id(piece)] = (firsts[place], firsts[place + 1] if same_file else sys.maxsize)
    return ranges


def _numbered_rows(rows: list[int], ids: list[str], index: DocumentIndex, records: bool, prefix: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A file's stored rows and the line (record) number of each: from ``FILE:N`` ids (``records``), else from
    their locations; -1 where none can be read (such rows go to every piece of the file)."""
    texts = ids if records else index.path_array.take(rows).to_pylist()
    numbers = np.full(len(rows), -1, np.int64)
    for place, row in enumerate(rows):
        if records:
            tail = texts[row][len(prefix):]
            numbers[place] = int(tail) if tail.isdigit() else -1
        else:
            where = parse_location(texts[place])
            numbers[place] = where.number if where.kind != "file" else -1
    return np.asarray(rows, np.int64), numbers


def known_entries(index: DocumentIndex, ids: list[str], sources: Sequence[Source], records: bool,
                  by_source: dict[str, np.ndarray] | None = None, lines: dict[int, tuple[int, int]] | None = None,
                  numbered: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> Known:
    """The stored entries of a task's documents: its files by id; and its records: without an id field
    (``records``) the records ``FILE:N`` of its files, found by prefix in the sorted ids, else those stored from
    its files (``by_source``: the rows of each source, :meth:`DocumentIndex.rows_by_source`). A piece of a file
    gets the rows stored from its ``lines`` (:func:`piece_lines`) only, so that a file cut into many tasks is not
    looked up whole by each (``numbered`` keeps each file's rows and their numbers for its next pieces); a record
    stored from another line of the file is found unchanged by the driver (:func:`_corrections`)."""
    rows: list[int] = []
    for source in sources:
        if source.format == "text":
            row = index.row(source.id)
            if row is not None:
                rows.append(row)
            continue
        if records:
            found = list(range(bisect.bisect_left(ids, source.id + ":"), bisect.bisect_left(ids, source.id + ";")))
        elif by_source is not None:
            found = by_source.get(location_path(source.path), np.empty(0, np.int64)).tolist()
        else:
            continue
        if lines is not None and numbered is not None and id(source) in lines:
            if source.path not in numbered:
                numbered[source.path] = _numbered_rows(found, ids, index, records, source.id + ":")
            stored, numbers = numbered[source.path]
            first, stop = lines[id(source)]
            found = stored[(numbers < 0) | ((numbers >= first) & (numbers < stop))].tolist()
        rows.extend(found)
    if not rows:
        return {}
    paths = index.path_array.take(rows).to_pylist()
    return {ids[row]: (paths[place], int(index.sizes[row]), int(index.mtimes_ns[row]), int(index.content_hashes[row]))
            for place, row in enumerate(rows)}


def _corrections(results: list[TaskResult], index: DocumentIndex
                 ) -> tuple[dict[int, list[int]], dict[int, int], dict[int, dict[int, int]]]:
    """Rows to drop from each task's part: ids an earlier task read (duplicates, reported), ids the store holds
    from another source that keeps them (reported: :meth:`DocumentIndex.source_of`, the local engine's rule), and
    rows whose stored copy from the same source has the same content (unchanged records the task could not look
    up). Returns the rows; per task, how many of them are duplicates (the first ones of its list); and per task,
    its rows held elsewhere with the stored row of each. The ids held elsewhere are taken out of the task's
    ``seen``: they were not read, as far as a later task or a prune is concerned."""
    drop: dict[int, list[int]] = {}
    duplicates: dict[int, int] = {}
    elsewhere: dict[int, dict[int, int]] = {}
    read: set[str] = set()
    for result in results:
        # Set operations for the usual task, whose ids no earlier task read; ids one by one only otherwise.
        distinct = set(result.ids)
        repeated = [] if len(distinct) == len(result.ids) and read.isdisjoint(distinct) else [
            row for row, identifier in enumerate(result.ids) if identifier in read]
        held: dict[int, int] = {}
        unchanged = []
        rows = index.rows_of(result.ids) if len(index) and result.ids else np.empty(0, np.int64)
        for row in np.flatnonzero(rows >= 0).tolist():  # the ids the store holds: looked at one by one
            identifier = result.ids[row]
            stored = None if identifier in read else int(rows[row])
            if stored is None:
                continue
            source = index.source_of(stored, result.locations[row])
            if source == HELD_ELSEWHERE:
                held[row] = stored
            elif source == SAME_SOURCE and int(index.content_hashes[stored]) == int(result.hashes[row]):
                unchanged.append(row)
        if repeated or unchanged or held:
            drop[result.index] = repeated + list(held) + unchanged
            duplicates[result.index] = len(repeated)
        if held:
            elsewhere[result.index] = held
            gone = {result.ids[row] for row in held}
            result.seen = [identifier for identifier in result.seen if identifier not in gone]
        read.update(result.seen)
    return drop, duplicates, elsewhere


def sign_on_cluster(sources: Sequence[Source], options: InputOptions, params: SignatureParams, run: StoreRun,
                    index: DocumentIndex, row_groups: Callable[[Source], list[int] | None],
                    progress: Callable[[int], None] | None = None, choice: KernelChoice | None = None,
                    by_status: bool = True) -> Signed:
    """Sign ``sources`` into ``run`` with the current Dask client's workers; the caller commits the run.

    ``choice`` picks each task's kernel by its bytes, as for the local engine (default: numpy), and records
    which ran; a worker loads the compiled kernel from numba's on-disk cache. ``by_status`` False (``sign
    --checksum``): whole files are read even when their location, size and modification time are the store's,
    and only their content hash says whether they changed.
    """
    client = get_client()
    token = secrets.token_hex(8)
    ids = index.ids
    records = options.id_field is None and options.id_column is None
    folder = str(run.path.resolve())  # the workers' working directory is not this one
    choice = choice if choice is not None else KernelChoice("numpy")

    def kernel(share: list[Source]) -> str:
        if params.input_kind != "text":
            return "numpy"
        return choice.kernel_for(len(share), sum(source.size for source in share), ahead=True)

    def cut_file(source: Source, task_bytes: int) -> list[Source]:
        return file_pieces(source, options, task_bytes)

    by_source = None if records or not len(index) else index.rows_by_source()
    shares = plan_tasks(sources, row_groups, pieces=cut_file)
    lines = piece_lines(shares)
    numbered: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    tasks = [SignTask(number, share, known_entries(index, ids, share, records, by_source, lines, numbered), options,
                      params, folder, run.number, run.reserve_file(), token, kernel(share), by_status)
             for number, share in enumerate(shares)]
    results: list[TaskResult] = []
    futures = client.map(sign_task, tasks, pure=False)
    task_of = {future.key: task for future, task in zip(futures, tasks, strict=True)}
    for future in as_completed(futures):
        try:
            result = future.result()
        except KilledWorker as error:
            # A worker process that died reading (a crash, the memory limit): name what it was reading.
            raise DedupError(f"Dask workers died {ALLOWED_FAILURES} times while reading "
                             f"{task_inputs(task_of[future.key].sources)}; nothing was stored. Give each worker more "
                             "memory ({memory_limit}), or sign those inputs alone to find the one at fault",
                             options=True) from error
        results.append(result)
        if progress is not None:
            progress(result.size)
    results.sort(key=lambda result: result.index)
    drop, duplicates, elsewhere = _corrections(results, index)
    rewritten = {result.index: client.submit(rewrite_task_part, result.part, params, token,
                                             sorted(drop[result.index]), pure=False)
                 for result in results if result.index in drop and result.part is not None}
    signed = Signed()
    for result in results:
        signed.report.merge(result.report)
        signed.seen.extend(result.seen)
        signed.unchanged += result.unchanged
        part, ids_written, empty = result.part, result.ids, result.empty
        if result.index in rewritten:
            part, locations, dropped_empty = rewritten[result.index].result()
            dropped = sorted(drop[result.index])
            repeated = set(drop[result.index][: duplicates[result.index]])
            held = elsewhere.get(result.index, {})
            for location, row in zip(locations, dropped, strict=True):
                if row in repeated:  # read by an earlier task: skipped, as the local engine skips it
                    signed.report.note("duplicate_ids", (where_read(location), result.ids[row]))
                elif row in held:  # the store holds the id from another source: skipped, as the local engine does
                    signed.report.note("held_elsewhere", (where_read(location), result.ids[row],
                                                          where_read(index.location(held[row]))))
            gone = set(dropped)
            ids_written = [identifier for row, identifier in enumerate(result.ids) if row not in gone]
            signed.unchanged += len(dropped) - len(repeated) - len(held)
            signed.report.documents -= len(repeated) + len(held)
            empty -= dropped_empty
        if part is not None:
            run.adopt(part, ids_written, distinct=True)  # each id once: repeats were dropped above
        signed.documents += len(ids_written)
        signed.empty += empty
    return signed
