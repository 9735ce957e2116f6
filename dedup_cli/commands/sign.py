"""``sign``: documents (or integer sets) → shingles → minwise signatures → the store, incrementally.

Reads in tasks (whole files, chunks of lines, Parquet rows: :mod:`dedup_cli.inputs.planning`) that workers read
and sign (:mod:`dedup_cli.engine.sign_workers`), and writes a Parquet row group per :data:`WRITE_ROWS` documents,
so memory does not grow with the corpus. A run
into an existing store is incremental: whole files whose location, size and modification time match the
store are skipped unread, documents whose content hash matches are skipped after reading, and only new or
changed documents are signed and written as one more part of the store (docs/store-format.md).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedup_cli.engine.extras import require_dask
from dedup_cli.engine.sign_stage import SignedTask
from dedup_cli.engine.sign_workers import sign_tasks
from dedup_cli.errors import OptionError, StoreError, UsageError
from dedup_cli.inputs.locations import STDIN, Source
from dedup_cli.inputs.parquet import row_group_sizes
from dedup_cli.inputs.planning import plan_tasks
from dedup_cli.inputs.reading import accept_documents, plan_inputs, walk_inputs
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import ReadTask
from dedup_cli.kernel.background import compile_later
from dedup_cli.kernel.cache import failure
from dedup_cli.kernel.choice import COMPILE_FAILED, INTEGER_SETS, NOT_COMPILED, KernelChoice, numba_version
from dedup_cli.options.checks import literal
from dedup_cli.options.reading import InputOptions
from dedup_cli.options.signing import SignOptions
from dedup_cli.options.vocabulary import READING_OPTIONS, default_store
from dedup_cli.params import SignatureParams
from dedup_cli.storage.urls import absolute
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.manifest import RunInput, RunRecord
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.snapshot import DocumentIndex
from dedup_cli.store.store import create_store, stored_id_root, stored_params

Progress = Callable[[int], None]
"""Called with the number of input bytes (on disk) just read or skipped."""


@dataclass
class SignReport:
    """What a sign run did."""

    store: str = ""  # the store signed into
    documents: int = 0  # documents signed in this run
    empty: int = 0  # of those, documents with no shingle
    unchanged: int = 0  # documents already in the store as they are now (skipped)
    read: ReadReport = field(default_factory=ReadReport)
    seconds: float = 0.0
    files_found: int = 0
    run: RunRecord | None = None  # the committed run: its number and added/changed/removed counts
    prune_skipped: bool = False  # prune was asked for but some input could not be read
    kernels: list[str] = field(default_factory=list)  # the signing kernels that ran ("numpy", "numba"), in order
    kernel_reason: str = ""  # why numpy signed, when it did (dedup_cli.kernel.choice: requested, small run, …)
    numba_version: str | None = None  # when the compiled kernel ran
    compile_failure: str | None = None  # why compiling the kernel in the background failed, when that kept numpy


class _AfterTheWalk:
    """The caller's progress callbacks, told the inputs' total (``on_start``) once the walk of the inputs has
    found it; bytes done before that are added up and told right after it."""

    def __init__(self, on_start: Callable[[int | None], None] | None, progress: Progress | None) -> None:
        self.on_start = on_start
        self.progress = progress
        self.started = False
        self.owed = 0

    def walked(self, sources: Iterable[Source], read: ReadReport) -> Iterator[Source]:
        yield from sources
        self.start(read.input_bytes)

    def start(self, total: int | None) -> None:
        if self.started:
            return
        self.started = True
        if self.on_start is not None:
            self.on_start(total)
        if self.owed:
            self.advance(0)

    def advance(self, count: int) -> None:
        if not self.started:
            self.owed += count
        elif self.progress is not None:
            self.progress(self.owed + count)
            self.owed = 0


# Rows written to the store at a time (one Parquet row group): a row group per task of a few hundred documents
# costs five times the CPU of writing the same rows in groups of thousands.
WRITE_ROWS = 8192


def _joined(batches: list[DocumentBatch]) -> DocumentBatch:
    """Batches of rows one after the other."""
    if len(batches) == 1:
        return batches[0]
    return DocumentBatch([i for b in batches for i in b.ids], [p for b in batches for p in b.paths],
                         *(np.concatenate([getattr(b, name) for b in batches]) for name in
                           ("sizes", "mtimes_ns", "content_hashes", "shingle_counts", "signatures")))


def _write_signed(run: StoreRun, signed: Iterable[tuple[ReadTask, SignedTask]], seen: list[str],
                  report: SignReport, progress: Progress | None) -> None:
    """Write the new and changed documents of each signed task, in task order, :data:`WRITE_ROWS` at a time;
    count the rest."""
    read = report.read
    ids: set[str] = set()
    done = 0
    waiting: list[DocumentBatch] = []
    rows = 0
    for task, result in signed:
        read.merge(result.report)
        kept = np.array(accept_documents(read, ids, result.ids, result.wheres, result.empty), dtype=np.int64)
        seen.extend(result.ids if len(kept) == len(result.ids) else [result.ids[position] for position in kept])
        batch_rows = np.cumsum(result.fresh) - 1  # the batch row of each fresh document
        changed = batch_rows[kept[result.fresh[kept]]].tolist()
        report.unchanged += len(kept) - len(changed)
        written = result.batch.take(changed)
        if changed:
            waiting.append(written)
            rows += len(changed)
        if rows >= WRITE_ROWS:
            run.write(_joined(waiting))
            waiting, rows = [], 0
        report.documents += len(changed)
        report.empty += int(np.count_nonzero(written.shingle_counts == 0))
        read.input_done += task.input_bytes
        if progress is not None and read.input_done > done:
            progress(read.input_done - done)
            done = read.input_done
    if waiting:
        run.write(_joined(waiting))
    if progress is not None and read.input_done > done:
        progress(read.input_done - done)  # the unchanged files skipped after the last task


def _sign_on_cluster(sources: Sequence[Source], reading: InputOptions, params: SignatureParams, run: StoreRun,
                     index: DocumentIndex, options: SignOptions, report: SignReport, progress: Progress | None,
                     seen: list[str], choice: KernelChoice) -> None:
    """The Dask engine's share of a run: tasks sign and write parts, adopted into ``run`` (committed by the caller)."""
    from dedup_cli.engine.dask import cluster
    from dedup_cli.engine.dask.sign import sign_on_cluster

    with cluster.connected(options.engine):
        signed = sign_on_cluster(sources, reading, params, run, index, row_group_sizes, progress, choice)
    report.read.merge(signed.report)
    report.documents += signed.documents
    report.empty += signed.empty
    report.unchanged += signed.unchanged
    seen.extend(signed.seen)


def sign(
    inputs: Sequence[str],
    store: str | os.PathLike[str] | None = None,
    options: SignOptions | None = None,
    progress: Progress | None = None,
    on_start: Callable[[int | None], None] | None = None,
    stdin: Any = None,
) -> SignReport:
    """Sign the documents (or integer sets) of ``inputs`` into ``store``, incrementally.

    Args:
        inputs: files, directories and ``-`` (stdin), read as ``options.input`` says.
        store: the store; created if missing, else extended by one run (atomically, under a lock). Default:
            ``$DEDUP_STORE``, else ``./dedup.parquet``.
        options: what to read, the signature parameters (they must equal the store's), and the run's
            behaviour: workers, prune, wait (default: ``SignOptions()``, the command line's defaults).
        progress: told how many bytes of the inputs (on disk) were just read or skipped.
        on_start: told the inputs' total size on disk (None when reading stdin), before reading.
        stdin: a binary stream for ``-`` (default: the process's stdin).

    Ids of files are relative to the store's id root: the root ``options.input.id_root`` names on the first
    run, else the deepest directory holding the first run's inputs; later runs keep it, and refuse an input
    outside it (:class:`dedup_cli.errors.UsageError`) rather than give a document a second id.
    """
    started = time.perf_counter()
    options = SignOptions() if options is None else options
    output = default_store(store)
    # A store keeps the tokenisation it was signed with unless the options name one (then they must agree).
    params = SignatureParams.from_options(options, stored_params(output))
    report = SignReport(store=output)
    recorded = stored_id_root(output)
    asked = options.input.id_root
    if asked is not None and recorded is not None and absolute(asked) != recorded:
        raise OptionError("id_root", asked, f"{{id_root}} {literal(asked)} differs from {literal(recorded)}, the "
                          f"directory the ids of {literal(output)} are relative to; leave {{id_root}} out, or sign "
                          "into another store")
    root = recorded if recorded is not None else asked
    index: DocumentIndex | None = None
    seen: list[str] = []  # ids this run read or found unchanged: the others are what a prune removes

    def file_unchanged(identifier: str, location: str, status: os.stat_result) -> bool:
        unchanged = index is not None and index.file_unchanged(identifier, location, status.st_size,
                                                               status.st_mtime_ns)
        if unchanged:
            seen.append(identifier)
        return unchanged

    # Inputs are checked (a missing one is an error) before the store is created or locked; the local engine's
    # walk of the directories then goes on as the run signs, and the progress starts once it knows the total.
    reading = dataclasses.replace(options.input, id_root=root)
    on_cluster = options.engine.name == "dask"
    announced = _AfterTheWalk(on_start, progress)
    if on_cluster:
        require_dask()
        sources, stream = plan_inputs(inputs, reading, report.read, stdin)
        if any(source.path == STDIN for source in sources):
            raise UsageError("- (stdin) cannot be read by Dask workers; save it to a file they can read, or sign it "
                             "with {engine} local", options=True)
    else:
        walked, stream = walk_inputs(inputs, reading, report.read, stdin)
    created = create_store(output, params, exist_ok=True, lock_timeout=options.wait)
    with created.begin_run(params, lock_timeout=options.wait) as run:
        if run.id_root is None:
            run.id_root = report.read.id_root
        elif report.read.id_root is not None and report.read.id_root != run.id_root:
            raise StoreError(f"another run fixed the id root of {output} while this one started; run again")
        run.input = RunInput(run.number, **{name: getattr(options.input, name) for name in READING_OPTIONS})
        index = run.document_index()
        choice = KernelChoice(options.kernel if params.input_kind == "text" else "numpy", options.workers, params)
        if choice.blocked == NOT_COMPILED:
            compile_later()  # for later runs: this one signs with numpy, and never waits for the compiler
        if on_cluster:
            announced.start(report.read.input_bytes)
            choice.see(len(sources), report.read.input_bytes or 0)  # every source is planned: decide once
            choice.decide()
            _sign_on_cluster(sources, reading, params, run, index, options, report, announced.advance, seen,
                             choice)
        else:
            known = file_unchanged if len(index) else None  # a new store: nothing to look up
            tasks = plan_tasks(announced.walked(walked, report.read), reading, report.read, stream, unchanged=known)
            signed = sign_tasks(tasks, params, reading, options.workers, choice, index)
            _write_signed(run, signed, seen, report, announced.advance)
        report.files_found = report.read.files_found
        if options.prune:
            if report.read.count("unreadable"):
                report.prune_skipped = True
            else:
                run.remove(index.ids_at(index.absent(seen)))
    report.kernels = choice.used
    report.kernel_reason = INTEGER_SETS if params.input_kind == "sets" else choice.reason
    if "numba" in choice.used:
        report.numba_version = numba_version()
    if report.kernel_reason == COMPILE_FAILED:
        report.compile_failure = failure()
    report.unchanged += report.read.unchanged
    report.run = run.record
    report.seconds = time.perf_counter() - started
    return report
