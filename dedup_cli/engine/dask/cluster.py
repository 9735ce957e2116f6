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
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dask
from distributed import Client, LocalCluster, futures_of, wait
from distributed.scheduler import KilledWorker

from dedup_cli.errors import DedupError
from dedup_cli.options.checks import literal
from dedup_cli.options.engines import EngineOptions

ALLOWED_FAILURES = 3
"""Workers a task may lose before Dask gives up on it (its ``distributed.scheduler.allowed-failures``)."""

CONNECT_SECONDS = 10

WORKER_START = "fork" if sys.platform.startswith("linux") else "spawn"
"""How a local cluster's worker processes start: forked on Linux; spawned elsewhere, where forking a process with
threads is unsafe (macOS) or impossible (Windows)."""


@contextmanager
def connected(options: EngineOptions) -> Iterator[Client]:
    """A client of the cluster ``options`` name: the scheduler's, else a local cluster started for the run.

    Dask's own log lines (workers restarting, slow event loops) are kept off stderr below errors, since the
    command's output there is its summary. A worker lost for good (``KilledWorker``) becomes a
    :class:`DedupError`.
    """
    for name in ("distributed", "dask"):
        logging.getLogger(name).setLevel(logging.ERROR)
    address = options.scheduler_address()
    cluster = None
    try:
        if address is not None:
            client = Client(address, timeout=CONNECT_SECONDS)
        else:
            # Workers forked from this process start with its modules imported (numpy, pandas, pyarrow, Dask,
            # dedup's): spawned, each imported them again, about a second of CPU a worker before its first task.
            with dask.config.set({"distributed.worker.multiprocessing-method": WORKER_START}):
                cluster = LocalCluster(n_workers=options.cluster_workers, threads_per_worker=1, processes=True,
                                       memory_limit=options.memory_limit, host="127.0.0.1", dashboard_address=None)
            client = Client(cluster)
    except (OSError, TimeoutError) as error:
        if cluster is not None:
            cluster.close()
        where = f"the Dask scheduler at {literal(address)}" if address else "a local Dask cluster"
        raise DedupError(f"cannot connect to {where} ({literal(error)}); start one with: dask scheduler, or leave "
                         "{scheduler} out for a local cluster", options=True) from error
    try:
        yield client
    except KilledWorker as error:
        raise DedupError(f"Dask workers died {ALLOWED_FAILURES} times running one task ({literal(error)}); give "
                         "each more memory ({memory_limit}) or use more of them ({workers})", options=True) from error
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def settled(*collections: Any) -> tuple[Any, ...]:
    """``dask.persist(*collections)``, returned once the cluster holds every result (see the module docstring)."""
    persisted = dask.persist(*collections)
    wait(futures_of(persisted))
    return persisted
