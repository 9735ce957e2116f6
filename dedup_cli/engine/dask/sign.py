"""``sign`` on a Dask cluster: tasks read and sign their share of the inputs and each write one part of the run.

The driver lists the inputs, takes the store's writer lock and reads its document index, as the local engine does
(:mod:`dedup_cli.api.sign`); it cuts the inputs into tasks of about :data:`TASK_BYTES` (less for a small run:
:func:`run_task_bytes`), runs of files in id order; a Parquet file larger than that by row groups, and a plain line
or CSV/TSV file at record boundaries, as the local engine's planning cuts it
(:func:`dedup_cli.inputs.task_planning.file_pieces`), and gives each task the stored entries of its documents, so
that unchanged files and records are skipped there without being signed. Each task signs the reading tasks of
its share (:func:`dedup_cli.inputs.task_planning.plan_tasks`) with the local engine's unit of work,
:func:`dedup_cli.engine.stages.sign.sign_task`, against an index of the stored documents it may meet, and writes
its rows as one part under a temporary name (:func:`dedup_cli.store.runs.write_task_part`). The driver then
drops what the tasks could not know alone (an id already read by an earlier task; a record whose stored copy is
the same text at the same place; an id another source keeps), writes the rows of the documents found at new
places (:mod:`dedup_cli.engine.stages.record_places`, as the local engine's driver does), adopts the parts into the
run and commits once: the manifest replace is still the only commit point, so a driver killed at any moment leaves
the store as it was, and a task that ran on a worker killed mid-way runs again and writes its part again.

The workers read the inputs at the paths the driver names and write into the store directory: both must be on a
filesystem the workers share.
"""

from __future__ import annotations

import bisect
import dataclasses
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from distributed import as_completed, get_client
from distributed.scheduler import KilledWorker

from dedup_cli.engine.dask.cluster import ALLOWED_FAILURES
from dedup_cli.engine.stages.record_places import Placed, SourcesRead, settle_places, write_places
from dedup_cli.engine.stages.sign import Signed
from dedup_cli.engine.stages.sign import sign_task as sign_read_task
from dedup_cli.errors import DedupError
from dedup_cli.inputs.locations import Source, location_path, parse_location, where_read
from dedup_cli.inputs.reading import accept_documents
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.task_planning import file_pieces
from dedup_cli.inputs.task_planning import plan_tasks as plan_read_tasks
from dedup_cli.kernel.choice import KernelChoice
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import HELD_ELSEWHERE, DocumentIndex, source_of
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.names import Names
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.runs import StoreRun, rewrite_task_part, write_task_part
from dedup_cli.store.worker_parts import ReadIds

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

Known = DocumentIndex | None
"""The stored documents a task may meet (:func:`known_entries`: an index of them alone), None when there are none."""


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
    """What a task did: its reading report, its part and the ids of its rows, the ids it read, counts, and the
    documents whose rows the driver writes or skips (moved, or held elsewhere: ``placed``). Ids and locations are
    Arrow strings (:class:`Names`), so that the driver holds a few buffers a task rather than a Python string a
    document, and the ids read come with their 64-bit hashes, which find the ids read by two tasks in one sort."""

    index: int
    report: ReadReport
    part: WrittenFile | None
    ids: Any  # Names: of the part's rows, in order (a list while the task runs)
    hashes: np.ndarray  # uint64, their content hashes
    locations: Any  # Names: their locations
    seen: Any  # Names: every id read (signed or unchanged), in order
    empty: int  # rows with no shingle
    unchanged: int  # documents read and found unchanged
    size: int  # the sources' bytes on disk
    placed: list[Placed] = field(default_factory=list)
    seen_hashes: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint64))  # uint64: of ``seen``


def sign_task(task: SignTask) -> TaskResult:
    """Read, sign and write one task's share (runs on a worker): each reading task signed as a worker of the
    local engine signs it (:func:`dedup_cli.engine.stages.sign.sign_task`), against the stored documents the task
    may meet; an id read twice in the task is kept once."""
    report = ReadReport()
    report.max_document_bytes = task.input.max_document_bytes
    known = task.known
    result = TaskResult(task.index, report, None, [], np.empty(0, np.uint64), [], [], 0, 0,
                        sum(source.size for source in task.sources))
    hashes: list[np.ndarray] = []

    def file_unchanged(identifier: str, location: str, status: Any) -> bool:
        if not task.by_status:  # (checksum) read it: its content hash decides
            return False
        same = known is not None and known.file_unchanged(identifier, location, status.st_size, status.st_mtime_ns)
        if same:
            result.seen.append(identifier)
        return same

    accepted: set[str] = set()

    def signed() -> Iterator[DocumentBatch]:
        for read in plan_read_tasks(task.sources, task.input, report, sys.stdin.buffer, file_unchanged):
            done = sign_read_task(read, task.params, task.input, task.kernel, known)
            report.merge(done.report)
            report.input_done += read.input_bytes
            kept = np.zeros(len(done.ids), bool)
            kept[accept_documents(report, accepted, done.ids, done.wheres, done.empty)] = True
            placed = done.placed
            if len(placed):
                # A moved document read twice in the task is kept once, as the others; candidates are not among ids.
                among = np.zeros(len(placed), bool)
                moving = ~placed.candidate
                among[moving] = kept[placed.positions[moving]]
                result.placed.append(placed.take(placed.candidate | among))
                result.unchanged -= int(np.count_nonzero(among))  # moved: counted apart
            result.seen.extend(identifier for identifier, keep in zip(done.ids, kept.tolist(), strict=True) if keep)
            result.unchanged += int(np.count_nonzero(kept & ~done.fresh))
            batch = done.batch.take(np.flatnonzero(kept[done.fresh]).tolist())
            if not batch.ids:
                continue
            result.empty += int(np.count_nonzero(batch.shingle_counts == 0))
            result.ids.extend(batch.ids)
            result.locations.extend(batch.paths)
            hashes.append(np.asarray(batch.content_hashes, np.uint64))
            yield batch

    result.part = write_task_part(task.store, task.params, task.run, task.number, task.token, signed())
    result.hashes = np.concatenate(hashes) if hashes else np.empty(0, np.uint64)
    result.ids, result.locations, result.seen = Names.of(result.ids), Names.of(result.locations), Names.of(result.seen)
    result.seen_hashes = result.seen.hashes()
    return result


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
    return index.subset(rows) if rows else None


@dataclass
class _Corrections:
    """What the driver makes of the tasks' parts (:func:`_corrections`): per task, the rows to drop, and of
    those the repeats and the ones held elsewhere (with the stored row of each); rows written again at a new place
    with the stored text (``moved``); stored rows whose id a task's row took from a source that no longer holds it
    (``moved_rows``); and each task's placed documents, less the ids an earlier task read."""

    drop: dict[int, list[int]] = field(default_factory=dict)
    repeated: dict[int, set[int]] = field(default_factory=dict)
    held: dict[int, dict[int, int]] = field(default_factory=dict)
    moved: int = 0
    moved_rows: list[int] = field(default_factory=list)
    placed: list[Placed] = field(default_factory=list)


def _read_by_two(results: list[TaskResult]) -> np.ndarray:
    """uint64: the hashes of the ids that more than one task read (by one sort of every id's hash): the only ids
    one task may repeat of another's (a task keeps one document of an id it reads twice)."""
    hashes = np.concatenate([result.seen_hashes for result in results]) if results else np.empty(0, np.uint64)
    if hashes.size < 2:
        return np.empty(0, np.uint64)
    hashes.sort()
    return np.unique(hashes[1:][hashes[1:] == hashes[:-1]])


def _corrections(results: list[TaskResult], index: DocumentIndex, complete: set[str], report: ReadReport
                 ) -> _Corrections:
    """Rows to drop from each task's part: ids an earlier task read (duplicates), rows whose stored copy is the
    same text at the same place (unchanged records the task could not look up), and ids the store holds from
    another source that keeps them (:func:`dedup_cli.engine.stages.record_places.settle_places`' rule, for the
    rows a task signed without knowing their id was stored: the stored source keeps the id unless the run read it
    completely and did not find it there). The ids held elsewhere are taken out of the task's ``seen``: they were
    not read, as far as a later task or a prune is concerned.

    Only the ids whose hash more than one task read (:func:`_read_by_two`) are held as strings, so the driver's
    memory grows with the repeated ids, not with the corpus."""
    found = _Corrections()
    shared = _read_by_two(results)
    read: set[str] = set()  # the ids of ``shared`` hashes read so far, by earlier tasks
    candidates: list[tuple[TaskResult, int, int]] = []  # (task, part row, stored row): maybe held elsewhere
    for result in results:
        mine = set(result.seen[np.isin(result.seen_hashes, shared)].tolist()) if shared.size else set()
        earlier = mine & read
        repeated = [row for row, identifier in enumerate(result.ids) if identifier in earlier] if earlier else []
        unchanged, maybe_held = [], set()
        rows = index.rows_of(result.ids) if len(index) and len(result.ids) else np.empty(0, np.int64)
        for row in np.flatnonzero(rows >= 0).tolist():  # the ids the store holds: looked at one by one
            identifier, stored = result.ids[row], int(rows[row])
            if identifier in earlier:
                continue
            source = index.source_of(stored, result.locations[row])
            same_text = int(index.content_hashes[stored]) == int(result.hashes[row])
            if source == HELD_ELSEWHERE:
                candidates.append((result, row, stored))
                maybe_held.add(identifier)
            elif same_text and index.location(stored) == result.locations[row]:
                unchanged.append(row)
            elif same_text:
                found.moved += 1
        found.drop[result.index] = repeated + unchanged
        found.repeated[result.index] = set(repeated)
        for placed in result.placed:
            # A task numbers the stored documents it was given from 0: their rows in the store's index, here.
            placed.stored_rows = index.rows_of(placed.batch.ids)
            again = np.array([not candidate and identifier in earlier for identifier, candidate in
                              zip(placed.batch.ids, placed.candidate.tolist(), strict=True)], bool)
            for place in np.flatnonzero(again).tolist():
                report.note("duplicate_ids", (placed.wheres[place], placed.batch.ids[place]))
            found.placed.append(placed.take(~again) if again.any() else placed)
        if maybe_held:
            kept = np.array([identifier not in maybe_held for identifier in result.seen], bool)
            result.seen, result.seen_hashes = result.seen[kept], result.seen_hashes[kept]
        read |= mine - maybe_held
    _settle_candidates(found, candidates, index, complete, results)
    return found


def _settle_candidates(found: _Corrections, candidates: list[tuple[TaskResult, int, int]], index: DocumentIndex,
                       complete: set[str], results: list[TaskResult]) -> None:
    """The rows tasks signed whose id another source holds: the id moves here when that source was read
    completely and did not hold it (the first such row in task order), else the row is dropped."""
    if not candidates:
        return
    seen = ~index.absent([], [result.seen.array for result in results])
    taken: set[int] = set()
    for result, row, stored in candidates:
        if seen[stored] or stored in taken or source_of(index.location(stored)) not in complete:
            found.drop[result.index].append(row)
            if stored in taken:
                found.repeated[result.index].add(row)
            else:
                found.held.setdefault(result.index, {})[row] = stored
            continue
        taken.add(stored)
        found.moved_rows.append(stored)
        result.seen = Names.joined([result.seen, result.ids[row:row + 1]])
        if int(index.content_hashes[stored]) == int(result.hashes[row]):
            found.moved += 1


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

    watched = SourcesRead()
    sources = [source for source in watched.watch(sources) if isinstance(source, Source)]
    by_source = None if records or not len(index) else index.rows_by_source()
    shares = plan_tasks(sources, row_groups, pieces=cut_file)
    lines = piece_lines(shares)
    numbered: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    tasks = [SignTask(number, share, known_entries(index, ids, share, records, by_source, lines, numbered), options,
                      params, folder, run.number, run.reserve_file(), token, kernel(share), by_status)
             for number, share in enumerate(shares)]
    results = _run_tasks(client, tasks, progress)
    signed = Signed()
    for result in results:
        signed.report.merge(result.report)
    found = _corrections(results, index, watched.complete(signed.report), signed.report)
    rewritten = {result.index: client.submit(rewrite_task_part, result.part, params, token,
                                             sorted(found.drop[result.index]), pure=False)
                 for result in results if found.drop[result.index] and result.part is not None}
    for result in results:
        signed.seen_ids.append(ReadIds(result.seen.array, result.seen_hashes.view(np.int64)))
        signed.unchanged += result.unchanged
        part, ids_written, empty = result.part, result.ids, result.empty
        if result.index in rewritten:
            part, locations, dropped_empty = rewritten[result.index].result()
            dropped = sorted(found.drop[result.index])
            repeated, held = found.repeated[result.index], found.held.get(result.index, {})
            for location, row in zip(locations, dropped, strict=True):
                if row in repeated:  # read by an earlier task: skipped, as the local engine skips it
                    signed.report.note("duplicate_ids", (where_read(location), result.ids[row]))
                elif row in held:  # the store holds the id from another source: skipped, as the local engine does
                    signed.report.note("held_elsewhere", (where_read(location), result.ids[row],
                                                          where_read(index.location(held[row]))))
            kept_rows = np.ones(len(result.ids), bool)
            kept_rows[dropped] = False
            ids_written = result.ids[kept_rows]
            signed.unchanged += len(dropped) - len(repeated) - len(held)
            signed.report.documents -= len(repeated) + len(held)
            empty -= dropped_empty
        if part is not None:
            run.adopt(part, ids_written, distinct=True)  # each id once: repeats were dropped above
        signed.documents += len(ids_written)
        signed.empty += empty
    settled = settle_places(index, found.placed, [], [read.ids for read in signed.seen_ids],
                            watched.complete(signed.report), signed.report, params.signature_bytes,
                            np.array(found.moved_rows, np.int64))
    write_places(run, settled)
    # Rows a task signed without knowing their id was stored, found to be the stored text at a new place, count
    # as moved, as the local engine counts them (it copies their signatures).
    signed.documents -= found.moved
    signed.moved, signed.removed = found.moved + settled.moved, settled.removed
    signed.seen.extend(settled.seen)
    return signed


def _run_tasks(client: Any, tasks: list[SignTask], progress: Callable[[int], None] | None) -> list[TaskResult]:
    """Run the tasks on the cluster; their results in task order."""
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
    return results
