"""The local engine's ``sign``: reading tasks read, signed and written in worker processes of this machine.

The process that drives the run plans the tasks (:func:`dedup_cli.inputs.task_planning.plan_tasks`) and hands them
out; ``jobs`` forked workers each read, parse and sign whole tasks (:func:`dedup_cli.engine.stages.sign.sign_task`)
and append the new and changed rows to a part of the store of their own
(:class:`dedup_cli.store.worker_parts.RunParts`), so reading files, parsing JSON, signing and writing Parquet all
use every core, and only file lists, ranges of files and raw bytes travel to the workers. A line file is handed
out as ranges of its bytes (:class:`dedup_cli.inputs.tasks.LineRangeTask`): each worker finds and counts the lines
of its range, tells the driver the count and is told the number of its first line (:class:`LineNumbering`), so
the driver reads nothing of the file and does per-task work only. Tasks go out by index through shared memory
(:class:`TaskBoard`); per task, only its index, input bytes and closed parts come back at once. What a task did is
small and columnar: its reading report, the ids it read (one Arrow column and their 64-bit hashes), a few boolean
arrays and where its rows went; each worker sends those of all its tasks once, at its end (:class:`WorkerRows`),
and the driver takes them in task order (:mod:`dedup_cli.engine.local.sign`).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedup_cli.engine.local.task_board import BOARD_SLOT_BYTES, TaskBoard, collector_paused
from dedup_cli.engine.local.task_rows import LineNumbering, TaskRows, WorkerRows
from dedup_cli.engine.stages.sign import sign_task
from dedup_cli.errors import DedupError
from dedup_cli.inputs.tasks import (
    DocumentsTask,
    FilesTask,
    LineRangeTask,
    LinesTask,
    ReadTask,
    numbered_lines,
    task_bytes,
    task_coming_bytes,
    task_documents,
    task_held_bytes,
)
from dedup_cli.kernel.choice import KernelChoice
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.worker_parts import ReadIds, RunParts

# glibc's malloc gives blocks over a threshold (128 KB to start with) back to the system when they are freed, so
# the numpy kernel's temporaries (up to about 20 bytes per byte of a task) are faulted in, zeroed, again for every
# task: a third of its time. Signing processes keep up to this much freed memory for the next task instead.
KEEP_FREED_BYTES = 128 << 20


def keep_freed_memory() -> None:
    """Let this process's malloc reuse freed blocks of up to :data:`KEEP_FREED_BYTES` instead of returning them
    to the system after each task (glibc only; elsewhere nothing changes)."""
    import ctypes

    if sys.platform != "linux":
        return
    try:
        # The program's own symbols (dlopen of NULL), glibc's among them; find_library would run ldconfig in a
        # subprocess in every worker.
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    trim_threshold, mmap_threshold = -1, -3  # M_TRIM_THRESHOLD, M_MMAP_THRESHOLD (malloc.h)
    mallopt(mmap_threshold, KEEP_FREED_BYTES // 2)
    mallopt(trim_threshold, KEEP_FREED_BYTES)


@dataclass
class SignJob:
    """What every task of a run shares: how to read and sign, and where the parts go."""

    params: SignatureParams
    options: InputOptions
    stored: DocumentIndex | None
    run: StoreRun


def sign_and_write(job: SignJob, parts: RunParts, index: int, task: ReadTask, kernel: str, number: int,
                   first_line_of: Callable[[int], int] | None = None) -> TaskRows:
    """Read and sign one task, append its new and changed rows to ``parts``: the unit of work of a worker.
    ``first_line_of`` numbers the lines of a range task (:func:`dedup_cli.inputs.tasks.numbered_lines`)."""
    finished = len(parts.finished)
    if isinstance(task, LineRangeTask):
        assert first_line_of is not None
        task = numbered_lines(task, first_line_of)
    signed = sign_task(task, job.params, job.options, kernel, job.stored)
    part, first_row = parts.add(signed.batch, number)
    return TaskRows(index, signed.report, ReadIds.of(signed.ids), signed.wheres, np.asarray(signed.empty, bool),
                    np.asarray(signed.fresh, bool), signed.batch.shingle_counts == 0, part, first_row,
                    task.input_bytes, parts.finished[finished:], placed=signed.placed)


def task_input(task: ReadTask) -> str:
    """The input a task reads, as messages name it."""
    if isinstance(task, LinesTask):
        return f"{literal(task.source.display)} from line {task.chunk.first_line}"
    if isinstance(task, LineRangeTask):
        return f"{literal(task.source.display)} from byte {task.start}"
    if isinstance(task, FilesTask):
        first = literal(task.paths[0]) if task.paths else "?"
        return first if len(task.paths) == 1 else f"{first} (and {len(task.paths) - 1} more files)"
    if isinstance(task, DocumentsTask):
        return literal(task.wheres[0]) if task.wheres else "standard input"
    return literal(task.source.display)


# A worker sends the rows of its tasks (:class:`WorkerRows`) when it ends, or sooner once they are this many.
ROWS_HELD = 1 << 20


# What forked workers inherit rather than receive: the run's shared settings (with the store's index, its id
# look-up built once before the fork).
_job: SignJob | None = None


def _work(board: TaskBoard, results: Any, lines: Any, parent: int, reading: Any, worker: int) -> None:
    """A worker process: sign the tasks it takes from ``board`` into its own parts, tell ``results``; ``lines``
    gives the first line of each range task it counted (:class:`LineNumbering`, in the driver) and the tasks too
    large for the board; ``reading[worker]`` (shared memory) holds the task it reads (-1: none), which the driver
    names if it dies, for no message."""
    from dedup_cli.processes import die_with_parent

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver ends the run on Ctrl-C, and then the workers
    keep_freed_memory()
    job = _job
    assert job is not None
    parts = RunParts(job.run.path, job.params, job.run.number, job.run.token)
    signed: list[TaskRows] = []  # sent at the end, or with a task once they hold ROWS_HELD rows (WorkerRows)
    held = 0
    try:
        while (taken := board.take()) is not None:
            index, pickled = taken
            reading[worker] = index
            if pickled is None:  # too large for the board: from the driver, through this worker's pipe
                results.send(("ask", index))
                pickled = lines.recv_bytes()
            _, task, kernel, number = pickle.loads(pickled)

            def first_line_of(newlines: int, index: int = index) -> int:
                results.send(("lines", (index, newlines)))
                return int(lines.recv())

            rows = sign_and_write(job, parts, index, task, kernel, number, first_line_of).sent(task)
            signed.append(rows)
            held += len(rows.ids)
            sent = None
            if held >= ROWS_HELD:  # sent sooner, so that a worker holds at most about this many
                sent, signed, held = WorkerRows.of(signed), [], 0
            results.send(("task", (index, rows.input_bytes, rows.finished, sent)))
            reading[worker] = -1
        results.send(("done", (parts.close(), WorkerRows.of(signed))))
    except BaseException as error:  # told to the driver, which ends the run with it
        parts.discard()
        try:
            results.send(("error", error))
        except Exception:  # not picklable
            results.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))
    finally:
        results.close()


# Tasks that hold their text (a stream's chunks, Parquet rows) are looked at ahead only up to this many bytes: a
# stream of unknown size then starts with numpy and may switch later, rather than be held in memory.
HELD_AHEAD_BYTES = 16 << 20


def sign_tasks(tasks: Iterator[ReadTask], job: SignJob, jobs: int, choice: KernelChoice,
               take: Callable[[TaskRows], None], signed: Callable[[int], None]) -> list[WrittenFile]:
    """Sign and write tasks with ``jobs`` worker processes once there is more than one task; ``signed`` is told
    the input bytes of each task as it is done (for progress), ``take`` what each task did, in task order (with
    workers, once they have all ended). Returns the parts written, closed (each run's parts are adopted by the
    caller once it knows which rows to keep).

    ``choice`` gives each task's kernel (and records which ran). The workers start at once; while they sign, this
    process plans the tasks ahead (walking the directories, cutting line files) until the kernel of the run is
    settled, and each task gets the kernel decided when it is handed out: numpy before, the compiled kernel after
    when chosen, which each worker then loads itself, in parallel with the others and with the planning (also when
    it was chosen before the workers start). Documents unchanged since
    the store's index are read but not signed. At most two tasks per worker are in flight, so memory stays
    bounded. A worker that dies (out of memory, a signal) ends the run with a one-line :class:`DedupError`
    naming the input it was reading; nothing is stored.
    """
    text = job.params.input_kind == "text"
    planner = TaskPlanner(tasks, choice if text else None)
    with collector_paused():
        several = jobs > 1 and planner.ahead(2)  # the walk's first listing
    if not several:  # one task: a pool would only add start-up time
        if jobs <= 1:
            keep_freed_memory()
        planner.settle()  # one process: the kernel first
        parts = RunParts(job.run.path, job.params, job.run.number, job.run.token)
        numbering = LineNumbering()
        try:
            index = 0
            while (task := planner.next()) is not None:
                current = {index: task}

                def first_line_of(newlines: int, index: int = index, current: dict[int, ReadTask] = current) -> int:
                    return numbering.count(index, newlines, current, index)[index]

                rows = sign_and_write(job, parts, index, task, planner.kernel(task), job.run.reserve_part(),
                                      first_line_of)
                signed(rows.input_bytes)
                take(rows)
                index += 1
            parts.close()
        except BaseException:
            parts.discard()
            raise
        return parts.finished
    # The compiled kernel is not loaded here even when it is chosen already: each worker loads it (from numba's
    # cache) in parallel with the others and with the planning, rather than the driver for 0.5-0.8 s before any
    # worker starts.
    with WorkerPool(job, jobs) as pool, collector_paused():  # the workers, forked already, collect as before
        return pool.run(planner, take, signed)


@dataclass
class _RunLedger:
    """What :meth:`WorkerPool.run` keeps track of while the workers sign."""

    handed: dict[int, ReadTask] = field(default_factory=dict)  # tasks handed out and not yet told
    oversized: dict[int, bytes | memoryview] = field(default_factory=dict)  # too large for the board, until asked
    arrived: set[int] = field(default_factory=set)  # tasks done, not yet told
    paths: dict[int, tuple[str, ...]] = field(default_factory=dict)  # files task → its paths, left out of its rows
    rows: list[WorkerRows] = field(default_factory=list)
    numbering: LineNumbering = field(default_factory=LineNumbering)
    counting: dict[int, int] = field(default_factory=dict)  # range task → the worker waiting for its first line
    written: list[WrittenFile] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)  # workers that said they are done
    next_told: int = 0
    index: int = 0  # the next task's index
    exhausted: bool = False

    def tell_arrived(self) -> None:
        """Forget the tasks done, in order, keeping a files task's paths for its rows."""
        while self.next_told in self.arrived:
            self.arrived.remove(self.next_told)
            task = self.handed.pop(self.next_told)
            if isinstance(task, FilesTask):
                self.paths[self.next_told] = task.paths
            self.next_told += 1


class WorkerPool:
    """``jobs`` forked worker processes, each with a pipe back to this one; tasks are handed out by index through
    shared memory (:class:`TaskBoard`), so an idle worker takes the next. Leaving the ``with`` block ends every
    worker (killed unless it finished)."""

    def __init__(self, job: SignJob, jobs: int) -> None:
        global _job
        import multiprocessing

        # fork: workers inherit the imported modules (and the store's index, its id look-up built once here), so
        # they start in milliseconds.
        if job.stored is not None and len(job.stored):
            job.stored.row("")
            job.stored.location(0)  # the stored locations too, which the id rule compares (DocumentIndex.source_of)
        context = multiprocessing.get_context("fork")
        self.job = job
        self.jobs = jobs
        # Tasks handed out and not yet done: at most two per worker, so memory stays bounded; each has a slot.
        self.in_flight = 2 * jobs
        self.board = TaskBoard(context, self.in_flight, BOARD_SLOT_BYTES)
        self.pipes: list[Any] = []
        self.lines: list[Any] = []  # to each worker: the first lines of the ranges it counts
        self.processes: list[Any] = []
        self.reading = context.RawArray("q", [-1] * jobs)  # worker → the task it is reading (-1: none)
        _job = job
        try:
            for worker in range(jobs):
                receiving, sending = context.Pipe(duplex=False)
                lines_in, lines_out = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(self.board, sending, lines_in, os.getpid(), self.reading,
                                                                    worker),
                                          daemon=True)
                process.start()
                sending.close()
                lines_in.close()
                self.pipes.append(receiving)
                self.lines.append(lines_out)
                self.processes.append(process)
        except BaseException:
            self.close()
            raise
        finally:
            _job = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def close(self) -> None:
        """End the workers: those still running are killed (an error or an interrupt ended the run)."""
        for process in self.processes:
            if process.is_alive():
                process.kill()
        for process in self.processes:
            process.join()
        for pipe in self.pipes + self.lines:
            pipe.close()
        self.board.close()
        self.processes, self.pipes, self.lines = [], [], []

    def run(self, planner: TaskPlanner, take: Callable[[TaskRows], None], signed: Callable[[int], None]
            ) -> list[WrittenFile]:
        """Hand out every task, tell ``signed`` each one's input bytes as it is done and ``take`` each one's rows
        in order once the workers end; the parts written."""
        ledger = _RunLedger()
        # One poll object for the run (multiprocessing's wait builds a selector per call): pipes and sentinels.
        poller, owner = select.poll(), {}  # owner: descriptor → its worker
        for worker, pipe in enumerate(self.pipes):
            for descriptor in (pipe.fileno(), self.processes[worker].sentinel):
                poller.register(descriptor, select.POLLIN)
                owner[descriptor] = worker
        while len(ledger.finished) < self.jobs:
            self._hand_out(planner, ledger)
            while True:
                polled = [descriptor for descriptor, _ in poller.poll(0 if planner.undecided() else None)]
                if polled or not planner.undecided():
                    break
                planner.ahead(len(planner.planned) + 1)  # plan ahead while the workers sign
            ready = {owner[descriptor] for descriptor in polled}
            for worker, pipe in enumerate(self.pipes):
                if worker not in ledger.finished and worker in ready:
                    self._receive(worker, pipe, pipe.fileno() in polled, poller, ledger, signed)
            ledger.tell_arrived()
        for task_rows in sorted((task_rows for worker_rows in ledger.rows for task_rows in worker_rows.unpacked()),
                                key=lambda task_rows: task_rows.index):
            take(task_rows.received(ledger.paths.pop(task_rows.index, ())))
        return ledger.written

    def _hand_out(self, planner: TaskPlanner, ledger: _RunLedger) -> None:
        """Post tasks to the board until ``in_flight`` are out, or tell the workers there are no more."""
        while not ledger.exhausted and len(ledger.handed) < self.in_flight:
            task = planner.next()
            if task is None:
                ledger.exhausted = True
                self.board.end(ledger.index, self.jobs)
                return
            ledger.handed[ledger.index] = task
            # Plain pickle (no pipe or socket is in a task): its C path, with no Pickler and buffer per task.
            item = (ledger.index, task, planner.kernel(task), self.job.run.reserve_part())
            pickled = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
            if not self.board.post(ledger.index, pickled):
                ledger.oversized[ledger.index] = pickled
            ledger.index += 1

    def _receive(self, worker: int, pipe: Any, pipe_ready: bool, poller: Any, ledger: _RunLedger,
                 signed: Callable[[int], None]) -> None:
        """Act on one message of ``worker``, whose pipe or sentinel polled ready."""
        message: Any
        try:  # a pipe that polled ready holds a message, or has ended (EOFError)
            kind, message = pipe.recv() if pipe_ready or pipe.poll() else ("died", None)
        except (EOFError, OSError):
            kind, message = "died", None
        if kind == "ask":
            with suppress(OSError):  # a worker that died since it asked: its sentinel tells, ending the run
                self.lines[worker].send_bytes(ledger.oversized.pop(message))
        elif kind == "lines":
            counted, newlines = message
            ledger.counting[counted] = worker
            for resolved, first_line in ledger.numbering.count(counted, newlines, ledger.handed,
                                                               ledger.next_told).items():
                with suppress(OSError):  # the worker died since it asked: its sentinel tells, ending the run
                    self.lines[ledger.counting.pop(resolved)].send(first_line)
        elif kind == "task":
            done, input_bytes, closed, sent = message
            ledger.written.extend(closed)
            ledger.rows.extend([sent] if sent is not None else [])
            ledger.arrived.add(done)
            signed(input_bytes)
        elif kind == "done":
            ledger.finished.add(worker)
            for descriptor in (pipe.fileno(), self.processes[worker].sentinel):
                poller.unregister(descriptor)
            closed, worker_rows = message
            if closed is not None:
                ledger.written.append(closed)
            ledger.rows.append(worker_rows)
        elif kind == "error":
            raise message
        else:
            self._died(worker, ledger.handed.get(self.reading[worker]))

    def _died(self, worker: int, task: ReadTask | None) -> None:
        process = self.processes[worker]
        process.join(1)
        code = process.exitcode
        cause = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0 and
                 -code in signal.Signals._value2member_map_ else f"exit code {code}")
        where = f" while reading {task_input(task)}" if task is not None else ""
        raise DedupError(f"a signing worker process died{where} ({cause}); nothing was stored, run again (with "
                         "{jobs} 1 to sign in one process)", options=True)


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
