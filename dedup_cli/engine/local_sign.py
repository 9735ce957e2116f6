"""The local engine's ``sign``: reading tasks signed by a pool of worker processes while the driver walks the
inputs, and the new and changed documents written into the run in task order.

The reading and signing of one task is :func:`dedup_cli.engine.sign_stage.sign_task`; the pool that runs it is
:mod:`dedup_cli.engine.sign_workers`. The Dask engine's counterpart is :mod:`dedup_cli.engine.dask.sign`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dedup_cli.engine.progress import InputProgress
from dedup_cli.engine.sign_stage import Signed, SignedTask
from dedup_cli.engine.sign_workers import sign_tasks
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.planning import plan_tasks
from dedup_cli.inputs.reading import accept_documents
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import ReadTask
from dedup_cli.kernel.choice import KernelChoice
from dedup_cli.options.reading import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.snapshot import DocumentIndex

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


def _write_signed(run: StoreRun, signed: Iterable[tuple[ReadTask, SignedTask]], read: ReadReport,
                  progress: Callable[[int], None] | None) -> Signed:
    """Write the new and changed documents of each signed task, in task order, :data:`WRITE_ROWS` at a time;
    count the rest."""
    report = Signed(report=read)
    seen = report.seen
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
    return report


def sign_locally(sources: Iterable[Source], stream: Any, run: StoreRun, index: DocumentIndex,
                 params: SignatureParams, reading: InputOptions, workers: int, choice: KernelChoice,
                 read: ReadReport, progress: InputProgress,
                 unchanged: Callable[[str, str, Any], bool] | None) -> Signed:
    """Sign ``sources`` (walked as they are signed) into ``run`` with ``workers`` processes; the caller commits.

    ``unchanged`` tells whether a file can be skipped unread (its location, size and modification time are the
    store's); ``read`` is the run's reading report, which the walk, the tasks and this add to.
    """
    tasks = plan_tasks(progress.walked(sources, read), reading, read, stream, unchanged=unchanged)
    signed = sign_tasks(tasks, params, reading, workers, choice, index)
    return _write_signed(run, signed, read, progress.advance)
