"""A pool of worker processes forked from the driver, for the parallel work of any layer (the local engine's stages
of ``find``, ``filter`` and ``eval``, ``review``'s comparisons of texts): below the engines, so that the shared
stages use it without importing an engine.

The driver first holds what the tasks read (the signatures, a round's band keys, the scored pairs); the workers
are forked after that and inherit it copy-on-write, so nothing of the size of the store is pickled or copied per
worker: a task is a closure over the driver's arrays, and only its result (pair codes, scores) travels back
through a pipe. Task ``t`` runs in worker ``t mod jobs``, a fixed assignment, and the results are handed back in
task order, so what the driver merges from them is the same whatever ``jobs`` is.

Each worker ends with its driver (:func:`dedup_cli.processes.die_with_parent`) and ignores Ctrl-C, which the
driver handles for all of them. A worker that dies (out of memory, a signal) ends the run with a one-line
:class:`DedupError`; an exception raised in a task is raised again in the driver.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from dedup_cli.errors import DedupError
from dedup_cli.processes import die_with_parent

Task = TypeVar("Task")
Result = TypeVar("Result")

# The fewest items worth a worker of their own, by stage: below them forking a worker (milliseconds, more for a
# driver holding gigabytes) costs more than its share of the work saves. Banding takes about 2 µs a document, a
# score about 1 µs a pair, re-reading and shingling a document for the exact checks 20-200 µs; reading the candidates'
# documents costs a row group's decoding (about 20 ms for 10^5 signatures) however few of its rows are taken, and
# runs a worker per row group at most.
BANDED_DOCUMENTS = 16_384
COMPARED_DOCUMENTS = 4_096  # --candidates all: n²/2 comparisons, 4096 documents are 8·10^6 pairs
READ_DOCUMENTS = 1_024
SCORED_PAIRS = 131_072
CHECKED_DOCUMENTS = 64
CHECKED_ELEMENTS = 1 << 20  # elements of the exact checks' sets looked up: about 30 ms


def useful_workers(jobs: int, items: int, share: int) -> int:
    """How many of ``jobs`` workers ``items`` items keep busy: at least ``share`` items each (one worker at
    least)."""
    return max(1, min(jobs, items // max(1, share)))


def chunk_bounds(items: int, chunks: int) -> list[tuple[int, int]]:
    """(start, stop) of ``chunks`` contiguous, nearly equal chunks of ``items`` items."""
    edges = [items * chunk // chunks for chunk in range(chunks + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def forked_map(function: Callable[[Task], Result], tasks: Sequence[Task], jobs: int, stage: str
               ) -> Iterator[Result]:
    """``function(task)`` of each task, in task order, computed by ``min(jobs, len(tasks))`` forked workers (in
    this process when that is one).

    Args:
        function: any callable (a closure is fine: the workers are forked, nothing of it is pickled); its results
            must pickle.
        jobs: worker processes at most.
        stage: what the tasks do, for the message when a worker dies (``"the candidate stage"``).

    Raises:
        DedupError: a worker process died before it handed back all its results.
    """
    workers = min(jobs, len(tasks))
    if workers <= 1:
        for task in tasks:
            yield function(task)
        return
    import multiprocessing

    context = multiprocessing.get_context("fork")
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # a child must not write out what the driver had buffered
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing of it to write twice either
            pass
    started: list[tuple[Any, Any]] = []
    try:
        for worker in range(workers):
            receiving, sending = context.Pipe(duplex=False)
            process = context.Process(target=_work, args=(function, tasks, worker, workers, parent, sending),
                                      name=f"dedup-worker-{worker}", daemon=True)
            process.start()
            sending.close()
            started.append((process, receiving))
        for number in range(len(tasks)):
            process, receiving = started[number % workers]
            try:
                succeeded, value = receiving.recv()
            except EOFError:
                process.join()
                raise DedupError(f"a worker process of {stage} died ({_ending(process.exitcode)}); nothing was "
                                 "written, run again (with {jobs} 1 to run in one process)", options=True) from None
            if not succeeded:
                raise value
            yield value
    finally:
        for process, receiving in started:
            receiving.close()
            if process.is_alive():
                process.kill()
            process.join()


def _ending(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def _work(function: Callable[[Any], Any], tasks: Sequence[Any], worker: int, workers: int, parent: int,
          sending: Any) -> None:
    """A worker: tasks ``worker``, ``worker + workers``, … in turn, each result sent as it is ready."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the driver ends the run
    # A collection would visit every object inherited from the driver, copying each page it writes to: a worker
    # lives for one stage, which makes few cycles.
    gc.disable()
    try:
        for task in tasks[worker::workers]:
            sending.send((True, function(task)))
    except BaseException as error:  # handed to the driver, which raises it
        try:
            sending.send((False, error))
        except Exception:  # it does not pickle: its words then
            sending.send((False, RuntimeError(f"{type(error).__name__}: {error}")))
    finally:
        sending.close()
        # Straight out: nothing of the driver's (atexit handlers, buffered output, pyarrow's pools) runs twice.
        os._exit(0)
