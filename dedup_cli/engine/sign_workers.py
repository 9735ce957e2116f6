"""The local engine's ``sign``: reading tasks read and signed in worker processes of this machine, in order.

The process that drives the run plans the tasks (:func:`dedup_cli.inputs.planning.plan_tasks`) and writes what
comes back; ``jobs`` forked workers each read, parse and sign whole tasks
(:func:`dedup_cli.engine.sign_stage.sign_task`), so reading files, parsing JSON and signing all use every core,
and only file lists and raw bytes travel to the workers. Results come back in task order, so the store is
byte-identical whatever ``jobs`` is.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from dedup_cli.engine.sign_stage import SignedTask, sign_task
from dedup_cli.errors import DedupError
from dedup_cli.inputs.tasks import ReadTask, task_bytes, task_coming_bytes, task_documents, task_held_bytes
from dedup_cli.kernel.choice import KernelChoice, compiled_kernel
from dedup_cli.options.checks import literal
from dedup_cli.options.reading import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.processes import die_with_parent
from dedup_cli.store.snapshot import DocumentIndex

# The store's index, for the forked workers to inherit rather than receive with every task.
_stored: DocumentIndex | None = None
# glibc's malloc gives blocks over a threshold (128 KB to start with) back to the system when they are freed, so
# the numpy kernel's temporaries (up to about 20 bytes per byte of a task) are faulted in, zeroed, again for every
# task: a third of its time. Signing processes keep up to this much freed memory for the next task instead.
KEEP_FREED_BYTES = 128 << 20


def keep_freed_memory() -> None:
    """Let this process's malloc reuse freed blocks of up to :data:`KEEP_FREED_BYTES` instead of returning them
    to the system after each task (glibc only; elsewhere nothing changes)."""
    import ctypes
    import ctypes.util

    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    trim_threshold, mmap_threshold = -1, -3  # M_TRIM_THRESHOLD, M_MMAP_THRESHOLD (malloc.h)
    mallopt(mmap_threshold, KEEP_FREED_BYTES // 2)
    mallopt(trim_threshold, KEEP_FREED_BYTES)


def start_worker(driver: int) -> None:
    """What a signing worker does first: end when ``driver`` (the run's process) ends, so that a killed run
    leaves no worker behind; keep freed memory for the next task."""
    die_with_parent(driver)
    keep_freed_memory()


def _sign_in_worker(task: ReadTask, params: SignatureParams, options: InputOptions, kernel: str) -> SignedTask:
    return sign_task(task, params, options, kernel, _stored)


# Tasks that hold their text (a stream's chunks, Parquet rows) are looked at ahead only up to this many bytes: a
# stream of unknown size then starts with numpy and may switch later, rather than be held in memory.
HELD_AHEAD_BYTES = 16 << 20


def sign_tasks(tasks: Iterable[ReadTask], params: SignatureParams, options: InputOptions, jobs: int,
               choice: KernelChoice, stored: DocumentIndex | None = None) -> Iterator[tuple[ReadTask, SignedTask]]:
    """Sign tasks in order, with ``jobs`` worker processes once there is more than one task.

    ``choice`` gives each task's kernel (and records which ran). The workers start at once; while they sign, this
    process plans the tasks ahead (walking the directories, cutting line files) until the kernel of the run is
    settled, and each task gets the kernel decided when it is handed out: numpy before, the compiled kernel after
    when chosen, which each worker then loads itself, in parallel with the others and with the planning. (When
    it is chosen before the workers start, it is loaded here once and they inherit it.) Documents unchanged since
    ``stored`` (the store's index) are read but not signed. At most two tasks per worker are in flight, so memory
    stays bounded. A worker that dies (out of memory, a signal) ends the run with a one-line
    :class:`DedupError`; nothing is stored.
    """
    global _stored
    text = params.input_kind == "text"
    planner = TaskPlanner(iter(tasks), choice if text else None)
    if jobs <= 1 or not planner.ahead(2):  # one task: a pool would only add start-up time
        if jobs <= 1:
            keep_freed_memory()
        planner.settle()  # one process: the kernel first
        while (task := planner.next()) is not None:
            yield task, sign_task(task, params, options, planner.kernel(task), stored)
        return
    if text and choice.decided == "numba":
        compiled_kernel()  # chosen already (asked for, or loaded in this process): loaded once, here
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
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=start_worker,
                                 initargs=(os.getpid(),)) as pool:
            pending: deque[tuple[ReadTask, Any]] = deque()
            while True:
                while len(pending) < 2 * jobs and (task := planner.next()) is not None:
                    pending.append((task, pool.submit(_sign_in_worker, task, params, options, planner.kernel(task))))
                if not pending:
                    break
                done, future = pending.popleft()
                while not future.done() and planner.undecided():
                    planner.ahead(len(planner.planned) + 1)  # plan ahead while the workers sign
                yield done, future.result()
    except BrokenProcessPool as error:
        # A worker was killed (out of memory, a signal): the run is discarded, the store stays as it was.
        raise DedupError(f"a signing worker process died ({literal(error)}); nothing was stored, run again "
                         "(with {jobs} 1 to sign in one process)", options=True) from error
    finally:
        _stored = None


class TaskPlanner:
    """The tasks of a run, planned ahead of handing them out when asked to, told to ``choice`` as planned.

    Tasks of whole files and of line files read in place hold only names and offsets, so the walk runs ahead at
    no cost in memory; tasks that hold their text (a stream's chunks, Parquet rows) are planned ahead only up to
    :data:`HELD_AHEAD_BYTES` (a stream of unknown size is then left undecided: numpy, maybe switching later)."""

    def __init__(self, tasks: Iterator[ReadTask], choice: KernelChoice | None) -> None:
        self.tasks = tasks
        self.choice = choice
        self.planned: deque[ReadTask] = deque()
        self.counted: set[int] = set()  # the tasks told to the choice when planned ahead
        self.held = 0
        self.exhausted = False

    def ahead(self, count: int) -> bool:
        """Plan until ``count`` tasks wait (or there are no more); whether they do."""
        while len(self.planned) < count and not self.exhausted:
            task = next(self.tasks, None)
            if task is None:
                self.exhausted = True
                if self.choice is not None:
                    self.choice.decide()
                break
            self.planned.append(task)
            self.held += task_held_bytes(task)
            if self.choice is not None:
                self.choice.see(task_documents(task), task_bytes(task), task_coming_bytes(task))
                self.counted.add(id(task))
        return len(self.planned) >= count

    def settle(self) -> deque[ReadTask]:
        """Plan ahead until the kernel of the whole run is settled (or the tasks end, or hold too much text);
        returns the tasks planned ahead."""
        while self.undecided():
            self.ahead(len(self.planned) + 1)
        return self.planned

    def undecided(self) -> bool:
        """Whether planning ahead may still settle the kernel: undecided, tasks left, not too much text held."""
        return (self.choice is not None and self.choice.decided is None and not self.exhausted
                and self.held < HELD_AHEAD_BYTES)

    def next(self) -> ReadTask | None:
        """The next task to hand out."""
        if not self.planned:
            self.ahead(1)
        if not self.planned:
            return None
        task = self.planned.popleft()
        self.held -= task_held_bytes(task)
        return task

    def kernel(self, task: ReadTask) -> str:
        """The kernel of a task handed out now."""
        if self.choice is None:
            return "numpy"
        ahead = id(task) in self.counted
        self.counted.discard(id(task))
        return self.choice.kernel_for(task_documents(task), task_bytes(task), ahead=ahead)
