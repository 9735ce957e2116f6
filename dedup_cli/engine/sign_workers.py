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
from dedup_cli.inputs.tasks import ReadTask, task_bytes, task_documents, task_held_bytes
from dedup_cli.kernel.choice import KernelChoice, compiled_kernel
from dedup_cli.options.checks import literal
from dedup_cli.options.reading import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import DocumentIndex

# The store's index, for the forked workers to inherit rather than receive with every task.
_stored: DocumentIndex | None = None


def _sign_in_worker(task: ReadTask, params: SignatureParams, options: InputOptions, kernel: str) -> SignedTask:
    return sign_task(task, params, options, kernel, _stored)


# Tasks that hold their text (a stream's chunks, Parquet rows) are looked at ahead only up to this many bytes: a
# stream of unknown size then starts with numpy and may switch later, rather than be held in memory.
HELD_AHEAD_BYTES = 16 << 20


def look_ahead(tasks: Iterator[ReadTask], choice: KernelChoice) -> list[ReadTask]:
    """Plan tasks ahead until ``choice`` can settle the kernel of the whole run: when what they hold repays
    loading the compiled kernel, or when there are no more (then it is decided), or when those that hold their
    text in memory reach :data:`HELD_AHEAD_BYTES` (a stream: left undecided). Returns the tasks planned ahead.

    Tasks of whole files and of line files read in place hold only names and offsets, so the planner's walk
    runs ahead at no cost in memory."""
    ahead: list[ReadTask] = []
    held = 0
    while choice.decided is None:
        task = next(tasks, None)
        if task is None:
            choice.decide()
            break
        ahead.append(task)
        choice.see(task_documents(task), task_bytes(task))
        held += task_held_bytes(task)
        if held >= HELD_AHEAD_BYTES:
            break
    return ahead


def sign_tasks(tasks: Iterable[ReadTask], params: SignatureParams, options: InputOptions, jobs: int,
               choice: KernelChoice, stored: DocumentIndex | None = None) -> Iterator[tuple[ReadTask, SignedTask]]:
    """Sign tasks in order, with ``jobs`` worker processes once there is more than one task.

    ``choice`` gives each task's kernel (and records which ran): the tasks are planned ahead until it is settled
    (:func:`look_ahead`), and the compiled kernel, when chosen, is loaded here once, before the workers fork.
    Documents unchanged since ``stored`` (the store's index) are read but not signed. At most two tasks per
    worker are in flight, so memory stays bounded. A worker that dies (out of memory, a signal) ends the run with
    a one-line :class:`DedupError`; nothing is stored.
    """
    global _stored
    iterator = iter(tasks)
    text = params.input_kind == "text"
    ahead = look_ahead(iterator, choice) if text else []
    seen_ahead = {id(task) for task in ahead}
    first = ahead[0] if ahead else next(iterator, None)
    if first is None:
        return
    rest = itertools.chain(ahead[1:], iterator) if ahead else iterator
    second = next(rest, None)
    queue = itertools.chain([first] if second is None else [first, second], rest)

    def kernel(task: ReadTask) -> str:
        if not text:
            return "numpy"
        return choice.kernel_for(task_documents(task), task_bytes(task), ahead=id(task) in seen_ahead)

    if jobs <= 1 or second is None:  # one task: a pool would only add start-up time
        for task in queue:
            yield task, sign_task(task, params, options, kernel(task), stored)
        return
    if text and choice.planned == "numba":
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
            for task in queue:
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
