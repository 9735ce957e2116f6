"""Connecting to a Dask cluster: a running scheduler, or a local cluster of worker processes that spill to disk.

A local cluster (Dask's ``LocalCluster``) has ``workers`` processes of one thread each, each with a memory limit
beyond which Dask spills its data to disk and pauses it (https://distributed.dask.org/en/stable/worker-memory.html);
one thread per worker keeps one task's temporaries per process. A worker that dies (killed, out of memory) is
replaced by its nanny and its tasks run again; a task that kills :data:`ALLOWED_FAILURES` workers ends the run
with an error naming the memory limit.

Every persisted collection is waited for before the next is built (:func:`settled`). A local cluster's scheduler
runs in this process, in a thread that builds the task graph from the same expression objects the main thread is
optimising, and under Python 3.11 ``functools.cached_property`` holds one lock per property for all instances, so
two threads filling the cached metadata of nested expressions can deadlock (CPython gh-87634, lock removed in 3.12).

Dask's own log records (a task that raised: "Compute Failed" and its traceback; a heartbeat to a scheduler that
is closing: ``CommClosedError``; workers restarted) never reach the user's stderr, whose last line is the
command's one-line error: for the length of the run, the records of this process's ``distributed``, ``dask``,
``tornado`` and ``asyncio`` loggers and the warnings of those packages go to a log file, ``dedup-dask-*.log`` in
the temporary directory (``$TMPDIR``), and so does everything the workers of a local cluster write to their
stderr. The file is deleted when the run succeeds or nothing was logged, and kept when the run fails.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from typing import Any, TextIO

import dask
from distributed import Client, LocalCluster, WorkerPlugin, futures_of, wait
from distributed.comm import CommClosedError
from distributed.scheduler import KilledWorker

from dedup_cli.atomic_files import unlink_quietly
from dedup_cli.errors import DedupError
from dedup_cli.options.checks import literal
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.processes import die_with_parent

ALLOWED_FAILURES = 3
"""Workers a task may lose before Dask gives up on it (its ``distributed.scheduler.allowed-failures``)."""

CONNECT_SECONDS = 10
CLOSE_SECONDS = 20

WORKER_START = "fork" if sys.platform.startswith("linux") else "spawn"
"""How a local cluster's worker processes start: forked on Linux; spawned elsewhere, where forking a process with
threads is unsafe (macOS) or impossible (Windows)."""


SPAWNED_WORKERS_LOGGING = {"DASK_LOGGING__DISTRIBUTED": "warning"}
"""The environment of a local cluster's workers that their nannies start again after one died. The first workers
are forked (:data:`WORKER_START`) and keep this process's routing of Dask's records to the log; a restart is
spawned, since Dask reads the start method when it starts a worker and this process sets "fork" only while its
cluster starts (it runs threads later: :func:`worker_start`). A spawned worker is a fresh interpreter whose Dask
logs to stderr until the worker's plugin (:class:`WorkerStderrToLog`) sends its stderr to the log, and at Dask's
usual level its start said "Starting Worker plugin ..." on the user's stderr; warnings and errors still reach the
log."""


def worker_start() -> str:
    """How this process starts a local cluster's workers now: :data:`WORKER_START`, except that a process already
    running other threads spawns them.

    A child forked while another thread of its parent holds a lock inherits the lock held by no thread, and hangs
    the first time it takes it. The first cluster of a process forks from its one thread; closing a cluster leaves
    threads behind (Dask's offload thread), and a second ``find`` of a 10^7-document store in the same process,
    its workers forked beside that thread, hung in its first peer-to-peer shuffle. Spawned workers import their
    modules again (about a second of CPU each), as Dask's own default has them do.
    """
    if WORKER_START == "fork" and threading.active_count() > 1:
        return "spawn"
    return WORKER_START


_forking_pid = 0  # the process forking now (set just before each fork)
_forks_end_with_parent = False  # whether this process has started a local cluster, whose workers it forks


def _note_forking_process() -> None:
    global _forking_pid
    _forking_pid = os.getpid()


def _end_with_forking_process() -> None:
    if _forks_end_with_parent:
        die_with_parent(_forking_pid)


def _workers_end_with_this_process() -> None:
    """Every process this one forks from now on (a local cluster's workers, forked by its nannies in this
    process) ends when this one ends: killed alone (``kill -9``, the out-of-memory killer), a driver would otherwise
    leave its workers running until Dask's own watch of their nanny noticed, if ever."""
    global _forks_end_with_parent
    if not _forks_end_with_parent and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_note_forking_process, after_in_child=_end_with_forking_process)
        _forks_end_with_parent = True


ROUTED_LOGGERS = ("distributed", "dask", "tornado", "asyncio")
"""The loggers (with their children) whose records go to the run's log file instead of stderr."""

LOG_PREFIX = "dedup-dask-"


class _QuietFileHandler(logging.FileHandler):
    """A log file whose own failures (a full disk) are dropped, not printed as "--- Logging error ---" on stderr."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


class WorkerStderrToLog(WorkerPlugin):
    """Sends everything a worker process writes to its stderr (its log records, warnings, tracebacks Python
    prints) to the run's log file; set up on every worker of a local cluster, a restarted one included."""

    name = "dedup-worker-log"

    def __init__(self, path: str) -> None:
        self.path = path

    def setup(self, worker: Any) -> None:
        sys.stderr.flush()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.dup2(descriptor, sys.stderr.fileno())
        finally:
            os.close(descriptor)


def _new_log() -> str | None:
    """A new, empty log file in the temporary directory; None where none can be made (the records are dropped)."""
    try:
        descriptor, path = tempfile.mkstemp(prefix=LOG_PREFIX, suffix=".log")
    except OSError:
        return None
    os.close(descriptor)
    return path


class _Routing:
    """Whether the records stay routed after the block: a cluster left to end with this process logs until then."""

    def __init__(self) -> None:
        self.kept = False


@contextmanager
def _logs_to(path: str | None) -> Iterator[_Routing]:
    """The records of :data:`ROUTED_LOGGERS` and their children go to ``path`` (None: nowhere) for the length of
    the block; the loggers' handlers and propagation are restored after it, unless the block set ``kept``."""
    handler: logging.Handler = logging.NullHandler() if path is None else _QuietFileHandler(path, delay=True)
    handler.setFormatter(logging.Formatter(dask.config.get("distributed.admin.log-format")))
    saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []
    known = [logging.getLogger(name) for name in ROUTED_LOGGERS]
    known += [logger for name, logger in list(logging.Logger.manager.loggerDict.items())
              if isinstance(logger, logging.Logger) and name.startswith(tuple(f"{top}." for top in ROUTED_LOGGERS))]
    for logger in known:
        saved.append((logger, list(logger.handlers), logger.propagate))
        top = logger.name in ROUTED_LOGGERS
        logger.handlers = [handler] if top else []  # distributed gives some children a stderr handler of their own
        logger.propagate = not top
    show_warning = warnings.showwarning
    folders = _dask_folders()

    def show_dask_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                          file: TextIO | None = None, line: str | None = None) -> None:
        if file is None and os.path.abspath(filename).startswith(folders):
            text = warnings.formatwarning(message, category, filename, lineno, line)
            logging.getLogger("distributed").warning("%s", text.rstrip())
        else:
            show_warning(message, category, filename, lineno, file, line)

    warnings.showwarning = show_dask_warning
    routing = _Routing()
    try:
        yield routing
    finally:
        if not routing.kept:
            warnings.showwarning = show_warning
            for logger, handlers, propagate in saved:
                logger.handlers, logger.propagate = handlers, propagate
            handler.close()


def _dask_folders() -> tuple[str, ...]:
    """The folders of Dask's packages (and tornado, its event loop), whose warnings are log records of the run."""
    packages = [sys.modules.get(name) for name in ("dask", "distributed", "tornado")]
    return tuple(os.path.dirname(os.path.abspath(package.__file__)) + os.sep
                 for package in packages if package is not None and package.__file__ is not None)


@contextmanager
def connected(options: EngineOptions) -> Iterator[Client]:
    """A client of the cluster ``options`` name: the scheduler's, else a local cluster started for the run.

    Dask's log records, and a local cluster's workers' stderr, go to a log file kept only if the run fails (see
    the module docstring). A worker lost for good (``KilledWorker``) becomes a :class:`DedupError`.
    """
    log = _new_log()
    succeeded = False
    try:
        with _logs_to(log) as routing, _client(options, log, routing) as client:
            yield client
        succeeded = True
    finally:
        if log is not None and (succeeded or _empty(log)):
            unlink_quietly(log)


def _empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


@contextmanager
def _client(options: EngineOptions, log: str | None, routing: _Routing) -> Iterator[Client]:
    address = options.scheduler_address()
    cluster = None
    environment = {name: os.environ.get(name) for name in SPAWNED_WORKERS_LOGGING}  # Dask changes it: put back
    try:
        if address is not None:
            client = Client(address, timeout=CONNECT_SECONDS)
        else:
            # Workers forked from this process start with its modules imported (numpy, pandas, pyarrow, Dask,
            # dedup's): spawned, each imported them again, about a second of CPU a worker before its first task.
            # The scheduler serves HTTP (health, metrics) even without a dashboard, by default on port 8787: on
            # port 0 instead, so that two runs on one machine never meet there (Dask warns, and moves the second)
            _workers_end_with_this_process()
            with dask.config.set({"distributed.worker.multiprocessing-method": worker_start(),
                                  "distributed.nanny.pre-spawn-environ": {
                                      **dask.config.get("distributed.nanny.pre-spawn-environ"),
                                      **SPAWNED_WORKERS_LOGGING}}):
                cluster = LocalCluster(n_workers=options.cluster_workers, threads_per_worker=1, processes=True,
                                       memory_limit=options.memory_limit, host="127.0.0.1", dashboard_address=None,
                                       scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            client = Client(cluster)
    except (OSError, TimeoutError) as error:
        if cluster is not None:
            cluster.close()
        where = f"the Dask scheduler at {literal(address)}" if address else "a local Dask cluster"
        raise DedupError(f"cannot connect to {where} ({literal(error)}); start one with: dask scheduler, or leave "
                         "{scheduler} out for a local cluster", options=True) from error
    try:
        if cluster is not None and log is not None:  # a remote cluster's workers log where their owner said
            client.register_plugin(WorkerStderrToLog(log))
        yield client
    except KilledWorker as error:
        where = "" if log is None else f"; Dask's log: {literal(log)}"
        raise DedupError(f"Dask workers died {ALLOWED_FAILURES} times running one task ({literal(error)}); give "
                         "each more memory ({memory_limit}) or use more of them ({workers})" + where,
                         options=True) from error
    except (CancelledError, CommClosedError, OSError) as error:
        if client.status == "running":  # not the scheduler lost: a fault of the run's own, as it is
            raise
        # The scheduler stopped (or the network to it failed): every result it held is gone with it. Nothing was
        # written (outputs and stores are committed only at the end), and the stages a work folder kept stay.
        where = f"the Dask scheduler at {literal(address)}" if address else "the local Dask cluster"
        raise DedupError(f"lost the connection to {where}, which stopped or cannot be reached; nothing was "
                         "written. Start the cluster again and run again (with {work_dir} a run resumes from the "
                         "stages it kept)", options=True) from error
    finally:
        client.close()
        if cluster is not None and not close_cluster(cluster):
            routing.kept = True
        for name, value in environment.items():  # Dask set it in this process's environment before each start
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def close_cluster(cluster: LocalCluster) -> bool:
    """Close the local cluster, giving up after :data:`CLOSE_SECONDS` (False then): a worker its nanny is starting
    again when the close begins (after a task killed one) can keep Dask's close waiting for good; the worker
    processes end with this one anyway (each watches its parent), and Dask's records until then still go to the
    log."""
    try:
        cluster.close(timeout=CLOSE_SECONDS)
    except (TimeoutError, asyncio.TimeoutError):
        logging.getLogger("distributed").warning("the local cluster did not close in %d s; left to end with this "
                                                 "process", CLOSE_SECONDS)
        # nor closed again at exit by Dask (another wait)
        getattr(LocalCluster, "_instances", set()).discard(cluster)
        return False
    return True


def settled(*collections: Any) -> tuple[Any, ...]:
    """``dask.persist(*collections)``, returned once the cluster holds every result (see the module docstring)."""
    persisted = dask.persist(*collections)
    wait(futures_of(persisted))
    return persisted
