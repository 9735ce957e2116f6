"""The local engine's ``sign``: reading tasks read and signed in worker processes of this machine, in order.

The process that drives the run plans the tasks (:func:`dedup_cli.inputs.planning.plan_tasks`) and writes what
comes back; ``jobs`` forked workers each read, parse and sign whole tasks
(:func:`dedup_cli.engine.sign_stage.sign_task`), so reading files, parsing JSON and signing all use every core,
and only file lists and raw bytes travel to the workers. Results come back in task order, so the store is
byte-identical whatever ``jobs`` is.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from dedup_cli.engine.sign_stage import SignedTask, sign_task
from dedup_cli.errors import DedupError
from dedup_cli.inputs.tasks import ReadTask, task_bytes
from dedup_cli.kernel.choice import KernelChoice, compiled_kernel
from dedup_cli.options.checks import literal
from dedup_cli.options.reading import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import DocumentIndex

# The store's index, for the forked workers to inherit rather than receive with every task.
_stored: DocumentIndex | None = None


def _sign_in_worker(task: ReadTask, params: SignatureParams, options: InputOptions, kernel: str) -> SignedTask:
    return sign_task(task, params, options, kernel, _stored)


def sign_tasks(tasks: Iterable[ReadTask], params: SignatureParams, options: InputOptions, jobs: int,
               choice: KernelChoice, stored: DocumentIndex | None = None) -> Iterator[tuple[ReadTask, SignedTask]]:
    """Sign tasks in order, with ``jobs`` worker processes once there is more than one task.

    ``choice`` gives each task's kernel (and records which ran); documents unchanged since ``stored`` (the
    store's index) are read but not signed. At most two tasks per worker are in flight, so memory stays
    bounded. A worker that dies (out of memory, a signal) ends the run with a one-line :class:`DedupError`;
    nothing is stored.
    """
    global _stored
    iterator = iter(tasks)
    first = next(iterator, None)
    if first is None:
        return
    second = next(iterator, None)
    ahead = itertools.chain([first] if second is None else [first, second], iterator)

    def kernel(task: ReadTask) -> str:
        return choice.kernel_for(task_bytes(task)) if params.input_kind == "text" else "numpy"

    if jobs <= 1 or second is None:  # one task: a pool would only add start-up time
        for task in ahead:
            yield task, sign_task(task, params, options, kernel(task), stored)
        return
    if params.input_kind == "text" and choice.planned == "numba":
        compiled_kernel()  # loaded once, here: the forked workers inherit it
    # Imported here: a run of one task (signing one file) does without them (5 ms).
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # fork: workers inherit the imported modules (and the store's index, its id look-up built once here), so
    # they start in milliseconds.
    if stored is not None and len(stored):
        stored.row("")
    _stored = stored
    context = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            pending: deque[tuple[ReadTask, Any]] = deque()
            for task in ahead:
                pending.append((task, pool.submit(_sign_in_worker, task, params, options, kernel(task))))
                if len(pending) >= 2 * jobs:
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
    except BrokenProcessPool as error:
        # A worker was killed (out of memory, a signal): the run is discarded, the store stays as it was.
        raise DedupError(f"a signing worker process died ({literal(error)}); nothing was stored, run again "
                         "(with {jobs} 1 to sign in one process)", options=True) from error
    finally:
        _stored = None
