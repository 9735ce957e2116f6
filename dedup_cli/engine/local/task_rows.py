"""What signing a task did, as a worker of the local engine's ``sign`` tells its driver: :class:`TaskRows` per
task, and :class:`WorkerRows`, the rows of a worker's tasks sent together, at its end; and the numbers of the
first lines of the ranges of line files, from the newlines their workers counted (:class:`LineNumbering`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from dedup_cli.engine.stages.record_places import Placed
from dedup_cli.inputs.columns import FileWheres, Wheres
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import FilesTask, LineRangeTask, ReadTask
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.worker_parts import ReadIds


@dataclass
class TaskRows:
    """What signing one task did: its reading report, the ids it read (``ids``, in order), and aligned with
    them ``wheres`` (for messages), ``empty`` (bool: empty or white space only) and ``fresh`` (bool: new or
    changed since the store signed it: only these were signed and written); ``blank`` (bool, one per fresh
    document: no shingle); the part its fresh rows were appended to (None: none was fresh) and the row of the
    first of them there; ``input_bytes``, for progress; ``finished``: parts the worker closed before writing them;
    ``placed``: the documents whose row the driver writes, or skips (moved, or held elsewhere: not among ``ids``)."""

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
    placed: Placed | None = None

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
    """The rows of the tasks one worker signed, sent to the driver together (when the worker ends, or once they
    hold :data:`dedup_cli.engine.local.sign_workers.ROWS_HELD` rows) rather than a message of arrays per task
    (whose unpickling was most of the driver's cost per task): the tasks' ids, hashes and flags end to end, one
    array each, and a few values per task. Each task's rows are views of them again (:meth:`unpacked`)."""

    ids: ReadIds
    empty: np.ndarray
    fresh: np.ndarray
    blank: np.ndarray
    # per task: index, report, wheres (None: a files task's positions 0 … n − 1, its paths left out), documents,
    # part, first row, input bytes, whether its paths were left out, its placed documents (None: none)
    tasks: list[tuple[int, ReadReport, Wheres | None, int, str | None, int, int, bool, Placed | None]]

    @classmethod
    def of(cls, rows: list[TaskRows]) -> WorkerRows:
        tasks = []
        for task in rows:
            wheres: Wheres | None = task.wheres
            if (task.paths_left_out and isinstance(wheres, FileWheres)
                    and np.array_equal(wheres.positions, np.arange(len(wheres.positions)))):
                wheres = None
            placed = task.placed if task.placed is not None and len(task.placed) else None
            tasks.append((task.index, task.report, wheres, len(task.ids), task.part, task.first_row,
                          task.input_bytes, task.paths_left_out, placed))
        return cls(ReadIds.joined([task.ids for task in rows]), _joined([task.empty for task in rows]),
                   _joined([task.fresh for task in rows]), _joined([task.blank for task in rows]), tasks)

    def unpacked(self) -> Iterator[TaskRows]:
        """The rows of each task, in the order the worker signed them (the ``finished`` parts told already)."""
        start = fresh_start = 0
        for index, report, wheres, count, part, first_row, input_bytes, paths_left_out, placed in self.tasks:
            end = start + count
            fresh = self.fresh[start:end]
            fresh_end = fresh_start + int(np.count_nonzero(fresh))
            yield TaskRows(index, report, ReadIds(self.ids.ids.slice(start, count), self.ids.hashes[start:end]),
                           FileWheres((), np.arange(count)) if wheres is None else wheres, self.empty[start:end],
                           fresh, self.blank[fresh_start:fresh_end], part, first_row, input_bytes, [],
                           paths_left_out, placed)
            start, fresh_start = end, fresh_end


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.bool_)


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
