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

import dataclasses
import gc
import os
import pickle
import select
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedup_cli.engine.stages.sign import sign_task
from dedup_cli.errors import DedupError
from dedup_cli.inputs.columns import FileWheres, Wheres
from dedup_cli.inputs.report import ReadReport
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
from dedup_cli.options.reading import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.runs import StoreRun
from dedup_cli.store.snapshot import DocumentIndex
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
class TaskRows:
    """What signing one task did: its reading report, the ids it read (``ids``, in order), and aligned with
    them ``wheres`` (for messages), ``empty`` (bool: empty or white space only) and ``fresh`` (bool: new or
    changed since the store signed it: only these were signed and written); ``blank`` (bool, one per fresh
    document: no shingle); the part its fresh rows were appended to (None: none was fresh) and the row of the
    first of them there; ``input_bytes``, for progress; ``finished``: parts the worker closed before writing them."""

    index: int
    report: ReadReport
    ids: ReadIds
    wheres: Wheres
    empty: np.ndarray
    fresh: np.ndarray
    blank: np.ndarray
    part: str | None
    first_row: int
    input_bytes: int  # the task's share of the inputs on disk, for progress
    finished: list[WrittenFile] = field(default_factory=list)
    paths_left_out: bool = False  # ``wheres`` name the task's files without their paths (:meth:`sent`)

    def sent(self, task: ReadTask) -> TaskRows:
        """These rows as a worker sends them: a files task's paths left out of ``wheres`` (the driver has them)."""
        wheres = self.wheres
        if isinstance(task, FilesTask) and isinstance(wheres, FileWheres) and wheres.paths is task.paths:
            return dataclasses.replace(self, wheres=FileWheres((), wheres.positions), paths_left_out=True)
        return self

    def received(self, paths: tuple[str, ...]) -> TaskRows:
        """The rows a worker sent of a files task of ``paths``, its paths back in ``wheres``."""
        if self.paths_left_out and isinstance(self.wheres, FileWheres):
            self.wheres, self.paths_left_out = FileWheres(paths, self.wheres.positions), False
        return self


@dataclass
class WorkerRows:
    """The rows of every task one worker signed, sent to the driver once, when the worker ends, rather than a
    message of arrays per task (whose unpickling was most of the driver's cost per task): the tasks' ids, hashes
    and flags end to end, one array each, and a few values per task. Each task's rows are views of them again
    (:meth:`unpacked`)."""

    ids: ReadIds
    empty: np.ndarray
    fresh: np.ndarray
    blank: np.ndarray
    # per task: index, report, wheres (None: a files task's positions 0 … n − 1, its paths left out), documents,
    # part, first row, input bytes, whether its paths were left out
    tasks: list[tuple[int, ReadReport, Wheres | None, int, str | None, int, int, bool]]

    @classmethod
    def of(cls, rows: list[TaskRows]) -> WorkerRows:
        tasks = []
        for task in rows:
            wheres: Wheres | None = task.wheres
            if (task.paths_left_out and isinstance(wheres, FileWheres)
                    and np.array_equal(wheres.positions, np.arange(len(wheres.positions)))):
                wheres = None
            tasks.append((task.index, task.report, wheres, len(task.ids), task.part, task.first_row,
                          task.input_bytes, task.paths_left_out))
        return cls(ReadIds.joined([task.ids for task in rows]), _joined([task.empty for task in rows]),
                   _joined([task.fresh for task in rows]), _joined([task.blank for task in rows]), tasks)

    def unpacked(self) -> Iterator[TaskRows]:
        """The rows of each task, in the order the worker signed them (the ``finished`` parts told already)."""
        start = fresh_start = 0
        for index, report, wheres, count, part, first_row, input_bytes, paths_left_out in self.tasks:
            end = start + count
            fresh = self.fresh[start:end]
            fresh_end = fresh_start + int(np.count_nonzero(fresh))
            yield TaskRows(index, report, ReadIds(self.ids.ids.slice(start, count), self.ids.hashes[start:end]),
                           FileWheres((), np.arange(count)) if wheres is None else wheres, self.empty[start:end],
                           fresh, self.blank[fresh_start:fresh_end], part, first_row, input_bytes, [],
                           paths_left_out)
            start, fresh_start = end, fresh_end


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.bool_)


@dataclass
class SignJob:
    """What every task of a run shares: how to read and sign, and where the parts go."""

    params: SignatureParams
    options: InputOptions
    stored: DocumentIndex | None
    run: StoreRun


class LineNumbering:
    """The number of the first line of each :class:`LineRangeTask`: one more than the newlines of the ranges of its
    file before it. Told each range's newlines as its worker counts them, in any order; resolves the ranges in
    task order (per-task work: the driver never sees a line)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.next = 0  # the first task not resolved yet
        self.line = 1  # the number of the next line of the file being resolved
        self.unreadable = False  # a range of that file could not be read: those after it are not numbered

    def count(self, index: int, newlines: int, tasks: Mapping[int, ReadTask], done: int) -> dict[int, int]:
        """Tell that range task ``index`` holds ``newlines`` newlines (-1: it could not be read); returns the first
        line of each range task now resolved (0: after one that could not be read, so not to be numbered).
        ``tasks``: the tasks handed out and not yet done, by index; the ``done`` tasks before them are all done
        (none of them is a range waiting for its first line)."""
        self.counts[index] = newlines
        self.next = max(self.next, done)
        resolved: dict[int, int] = {}
        while self.next in tasks:
            task = tasks[self.next]
            if isinstance(task, LineRangeTask):
                counted = self.counts.pop(self.next, None)
                if counted is None:
                    break
                if task.start == 0:  # a file's first range
                    self.line, self.unreadable = 1, False
                resolved[self.next] = 0 if self.unreadable else self.line
                if counted < 0:
                    self.unreadable = True
                else:
                    self.line += counted
            self.next += 1
        return resolved


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
                    task.input_bytes, parts.finished[finished:])


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


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: while the driver walks and hands out tasks it makes objects by the
    hundred thousand (a directory's entries, its names, the tasks) and little cyclic garbage, and each collection
    would look through them again (a few percent of its CPU). Collection resumes, as it was, on leaving."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# A task's slot on the board (:class:`TaskBoard`): a files task of a few hundred files takes tens of KB pickled;
# a larger one (thousands of long paths, a stream's chunk of text) is handed to its worker through its pipe.
BOARD_SLOT_BYTES = 256 << 10


class TaskBoard:
    """Tasks handed out by index, through memory shared with the forked workers: no pickling thread, no write
    to a pipe per task. The driver posts task i (pickled) into slot i mod ``slots`` and counts it on a
    semaphore; a worker waits on the semaphore, takes the next index from a shared counter and reads its slot.
    Slot i mod ``slots`` is posted again only once task i was done (the driver keeps at most ``slots`` tasks
    handed out and not yet done), so a slot is never written while read. A task whose pickle is larger than a
    slot is marked so (length -1): its worker asks the driver for it, which sends it through that worker's pipe.
    Once every task is posted, the count of tasks is set and each worker is given one more index, at or past it:
    the end."""

    def __init__(self, context: Any, slots: int, slot_bytes: int) -> None:
        import mmap

        self.slots = slots
        self.slot_bytes = slot_bytes
        self.memory = mmap.mmap(-1, max(1, slots * slot_bytes))  # anonymous and shared: forked workers see it
        self.lengths = context.RawArray("q", slots)  # slot → the length of the task's pickle (-1: ask for it)
        self.taken = context.RawValue("q", 0)  # the next index to take
        self.count = context.RawValue("q", 1 << 62)  # the number of tasks, once all are posted
        self.lock = context.Lock()
        self.posted = context.Semaphore(0)

    def post(self, index: int, pickled: bytes | memoryview) -> bool:
        """Post task ``index`` (driver); False when too large for its slot (its worker will ask for it)."""
        slot = index % self.slots
        fits = len(pickled) <= self.slot_bytes
        if fits:
            start = slot * self.slot_bytes
            self.memory[start:start + len(pickled)] = pickled
        self.lengths[slot] = len(pickled) if fits else -1
        self.posted.release()
        return fits

    def end(self, count: int, workers: int) -> None:
        """Tell the ``workers`` that there are ``count`` tasks in all (driver)."""
        self.count.value = count
        for _ in range(workers):
            self.posted.release()

    def take(self) -> tuple[int, bytes | None] | None:
        """The next task's index and pickle (None: ask the driver for it), or None once all are taken (worker)."""
        self.posted.acquire()
        with self.lock:
            index = self.taken.value
            self.taken.value = index + 1
        if index >= self.count.value:
            return None
        slot = index % self.slots
        length = self.lengths[slot]
        if length < 0:
            return index, None
        start = slot * self.slot_bytes
        return index, self.memory[start:start + length]

    def close(self) -> None:
        self.memory.close()


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
    signed: list[TaskRows] = []  # sent once, at the end (:class:`WorkerRows`)
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
            results.send(("task", (index, rows.input_bytes, rows.finished)))
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
    with WorkerPool(job, jobs) as pool:
        return pool.run(planner, take, signed)


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
        with collector_paused():  # the workers, forked already, collect as before
            return self._run(planner, take, signed)

    def _run(self, planner: TaskPlanner, take: Callable[[TaskRows], None], signed: Callable[[int], None]
             ) -> list[WrittenFile]:
        job, jobs = self.job, self.jobs
        from multiprocessing.reduction import ForkingPickler

        handed: dict[int, ReadTask] = {}  # tasks handed out and not yet told
        oversized: dict[int, bytes | memoryview] = {}  # tasks too large for the board, until their worker asks
        # One poll object for the run (multiprocessing's wait builds a selector per call): pipes and sentinels.
        poller, owner = select.poll(), {}  # owner: descriptor → its worker
        for worker, pipe in enumerate(self.pipes):
            for descriptor in (pipe.fileno(), self.processes[worker].sentinel):
                poller.register(descriptor, select.POLLIN)
                owner[descriptor] = worker
        arrived: set[int] = set()  # tasks done, not yet told
        paths: dict[int, tuple[str, ...]] = {}  # files task → its paths, which its worker leaves out of its rows
        rows: list[WorkerRows] = []
        numbering = LineNumbering()
        counting: dict[int, int] = {}  # range task → the worker waiting for its first line
        next_told = 0
        index = 0
        exhausted = False
        written: list[WrittenFile] = []
        finished: set[int] = set()
        while len(finished) < jobs:
            while not exhausted and len(handed) < self.in_flight:
                task = planner.next()
                if task is None:
                    exhausted = True
                    self.board.end(index, jobs)
                    break
                handed[index] = task
                pickled = ForkingPickler.dumps((index, task, planner.kernel(task), job.run.reserve_part()))
                if not self.board.post(index, pickled):
                    oversized[index] = pickled
                index += 1
            while True:
                polled = [descriptor for descriptor, _ in poller.poll(0 if planner.undecided() else None)]
                if polled or not planner.undecided():
                    break
                planner.ahead(len(planner.planned) + 1)  # plan ahead while the workers sign
            ready = {owner[descriptor] for descriptor in polled}
            for worker, pipe in enumerate(self.pipes):
                if worker in finished or worker not in ready:
                    continue
                message: Any
                try:  # a pipe that polled ready holds a message, or has ended (EOFError)
                    kind, message = pipe.recv() if pipe.fileno() in polled or pipe.poll() else ("died", None)
                except (EOFError, OSError):
                    kind, message = "died", None
                if kind == "ask":
                    try:
                        self.lines[worker].send_bytes(oversized.pop(message))
                    except OSError:  # the worker died since it asked: its sentinel tells, and ends the run
                        pass
                elif kind == "lines":
                    counted, newlines = message
                    counting[counted] = worker
                    for resolved, first_line in numbering.count(counted, newlines, handed, next_told).items():
                        try:
                            self.lines[counting.pop(resolved)].send(first_line)
                        except OSError:  # the worker died since it asked: its sentinel tells, and ends the run
                            pass
                elif kind == "task":
                    done, input_bytes, closed = message
                    written.extend(closed)
                    arrived.add(done)
                    signed(input_bytes)
                elif kind == "done":
                    finished.add(worker)
                    for descriptor in (pipe.fileno(), self.processes[worker].sentinel):
                        poller.unregister(descriptor)
                    closed, worker_rows = message
                    if closed is not None:
                        written.append(closed)
                    rows.append(worker_rows)
                elif kind == "error":
                    raise message
                else:
                    self._died(worker, handed.get(self.reading[worker]))
            while next_told in arrived:
                arrived.remove(next_told)
                task = handed.pop(next_told)
                if isinstance(task, FilesTask):
                    paths[next_told] = task.paths
                next_told += 1
        for task_rows in sorted((task_rows for worker_rows in rows for task_rows in worker_rows.unpacked()),
                                key=lambda task_rows: task_rows.index):
            take(task_rows.received(paths.pop(task_rows.index, ())))
        return written

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
