"""The local engine's ``sign``: reading tasks signed and written by a pool of worker processes while the driver
walks the inputs; the driver then keeps the first document of each id and commits the workers' parts.

The reading, signing and writing of one task is :func:`dedup_cli.engine.local.sign_workers.sign_and_write`, run by the
pool of :mod:`dedup_cli.engine.local.sign_workers`. The driver's work per document is a few operations on whole
arrays: the ids read twice are found in one sort of the 64-bit hashes of every id read
(:func:`dedup_cli.store.worker_parts.later_copies`), and only the parts holding rows of such ids (rare) are rewritten
without them before the commit. The Dask engine's counterpart is :mod:`dedup_cli.engine.dask.sign`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dedup_cli.engine.local.sign_workers import SignJob, sign_tasks
from dedup_cli.engine.local.task_rows import TaskRows
from dedup_cli.engine.progress import InputProgress
from dedup_cli.engine.stages.record_places import Placed, SourcesRead, settle_places, write_places
from dedup_cli.engine.stages.sign import Signed
from dedup_cli.inputs.locations import FileRun, Source
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.task_planning import plan_tasks
from dedup_cli.kernel.choice import KernelChoice
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.worker_parts import ReadIds, drop_part_rows, later_copies, merge_parts

MERGED_ROWS = 1 << 16
"""A run whose workers wrote at most this many rows in all is committed as one part, its rows in task order: a
store grown by small runs would otherwise gain a part per worker each time (every part costs readers a request or
two), while joining them costs the driver a few milliseconds."""


class TasksDone:
    """What the tasks of a run did: progress as each is done, their rows in task order, the rest once all are
    done."""

    def __init__(self, read: ReadReport, progress: Callable[[int], None] | None) -> None:
        self.read = read
        self.progress = progress
        self.tasks: list[TaskRows] = []
        self.done = 0

    def take(self, rows: TaskRows) -> None:
        self.tasks.append(rows)

    def signed(self, input_bytes: int) -> None:
        self.read.input_done += input_bytes
        if self.progress is not None and self.read.input_done > self.done:
            self.progress(self.read.input_done - self.done)
            self.done = self.read.input_done

    def finish(self, run: StoreRun, parts: list[WrittenFile], sources: SourcesRead) -> Signed:
        """Keep the first document of each id (in task order; the later ones are reported as duplicates, and
        their rows dropped from the parts), count, adopt the parts into ``run``, and write the rows of the
        documents found at new places (:func:`dedup_cli.engine.stages.record_places.settle_places`)."""
        read, tasks = self.read, self.tasks
        if self.progress is not None and read.input_done > self.done:
            self.progress(read.input_done - self.done)  # the unchanged files skipped after the last task
        starts = np.cumsum([0] + [len(task.ids) for task in tasks])
        later = later_copies(ReadIds.joined([task.ids for task in tasks]))
        bounds = np.searchsorted(later, starts)  # the later copies of task t: later[bounds[t]:bounds[t + 1]]
        signed = Signed(report=read)
        written: list[ReadIds] = []
        dropped: dict[str, list[np.ndarray]] = defaultdict(list)
        rows: list[tuple[str, np.ndarray]] = []  # of each task, the part and rows of its documents kept
        placements: list[Placed] = []
        small = sum(part.rows for part in parts) <= MERGED_ROWS
        for number, task in enumerate(tasks):
            read.merge(task.report)
            repeated = later[bounds[number]:bounds[number + 1]] - starts[number]
            kept = np.ones(len(task.ids), dtype=np.bool_)
            if len(repeated):
                kept[repeated] = False
                for position, identifier in zip(repeated.tolist(), task.ids.at(repeated), strict=True):
                    read.note("duplicate_ids", (task.wheres[position], identifier))
            part_rows = task.first_row + np.cumsum(task.fresh) - 1  # the part row of each fresh document
            kept_fresh = kept[task.fresh]
            if task.part is not None and not kept_fresh.all():
                dropped[task.part].append(part_rows[task.fresh & ~kept])
            if task.part is not None and small:
                rows.append((task.part, part_rows[task.fresh & kept]))
            changed = int(np.count_nonzero(kept_fresh))
            read.documents += len(task.ids) - len(repeated)
            read.empty_documents += int(np.count_nonzero(task.empty & kept))
            signed.documents += changed
            signed.unchanged += len(task.ids) - len(repeated) - changed
            if task.placed is not None and len(task.placed):
                placed = task.placed
                keep = placed.candidate | ~np.isin(placed.positions, repeated)
                placements.append(placed if keep.all() else placed.take(keep))
                signed.unchanged -= int(np.count_nonzero(keep & ~placed.candidate))  # moved: counted apart
            signed.empty += int(np.count_nonzero(task.blank & kept_fresh))
            signed.seen_ids.append(task.ids if not len(repeated) else task.ids.where(kept))
            if changed:
                written.append(task.ids if changed == len(task.ids) else task.ids.where(task.fresh & kept))
        if small and parts:
            # A small run is one part, its rows in task order: the same file whatever -j is, and a store grown
            # by small runs does not gain a part per worker each time.
            merged = merge_parts(parts, rows)
            kept_parts = [] if merged is None else [merged]
        else:
            kept_parts = []
            for part in parts:
                if part.name in dropped:
                    rewritten = drop_part_rows(part, run.params, np.concatenate(dropped[part.name]))
                    if rewritten is None:
                        continue
                    part = rewritten
                kept_parts.append(part)
        settled = settle_places(run.document_index(), placements, [], [read.ids for read in signed.seen_ids],
                                sources.complete(read), read, run.params.signature_bytes)
        run.adopt_parts(kept_parts, written)
        write_places(run, settled)
        signed.moved, signed.removed = settled.moved, settled.removed
        signed.seen.extend(settled.seen)
        return signed


def sign_locally(sources: Iterable[Source | FileRun], stream: Any, run: StoreRun, index: DocumentIndex,
                 params: SignatureParams, reading: InputOptions, workers: int, choice: KernelChoice,
                 read: ReadReport, progress: InputProgress,
                 unchanged: Callable[[str, str, Any], bool] | None) -> Signed:
    """Sign ``sources`` (walked as they are signed) into ``run`` with ``workers`` processes; the caller commits.

    ``unchanged`` tells whether a file can be skipped unread (its location, size and modification time are the
    store's); ``read`` is the run's reading report, which the walk, the tasks and this add to.
    """
    watched = SourcesRead()
    tasks = plan_tasks(watched.watch(progress.walked(sources, read)), reading, read, stream, unchanged=unchanged,
                       line_ranges=True)
    done = TasksDone(read, progress.advance)
    try:
        parts = sign_tasks(iter(tasks), SignJob(params, reading, index, run), workers, choice, done.take,
                           done.signed)
    finally:
        close = getattr(tasks, "close", None)
        if close is not None:
            close()  # the walk ends here, not whenever its generator is collected
    return done.finish(run, parts, watched)
