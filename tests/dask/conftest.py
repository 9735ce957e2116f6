"""One real distributed cluster for the Dask tests: a scheduler and two worker processes on the loopback interface.

Starting a ``LocalCluster`` costs about a second and closing it a fraction of one, so one cluster serves every Dask
test; each test reaches it the way a user reaches a running cluster, by its address (``--scheduler``), so the
engine's own client, shuffles between processes and pickling are what is tested. Worker processes of one thread
and 2 GiB each, as the engine starts them itself.

The cluster is started at the first test that asks for it and closed after the last test of this directory, not
at the end of the session: its scheduler threads allocate in the background, and later tests that measure their
own allocations with tracemalloc (tests/test_allpairs.py) would count them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the dask extra: pip install 'dedup-cli[dask]'")

from distributed import Client, LocalCluster  # noqa: E402 - after the skip

from dedup_cli.options.engines import EngineOptions  # noqa: E402

HERE = Path(__file__).resolve().parent
_RUNNING: list[LocalCluster] = []
_CLIENTS: list[Client] = []
WORKERS = 2


def _cluster() -> LocalCluster:
    if not _RUNNING:
        _RUNNING.append(LocalCluster(n_workers=WORKERS, processes=True, threads_per_worker=1, host="127.0.0.1",
                                     dashboard_address=None, memory_limit="2GiB"))
    return _RUNNING[0]


def _close() -> None:
    while _CLIENTS:
        _CLIENTS.pop().close()
    while _RUNNING:
        _RUNNING.pop().close()


@pytest.fixture(scope="session")
def cluster() -> LocalCluster:
    """The shared cluster (started on first use)."""
    return _cluster()


@pytest.fixture(scope="session")
def engine(cluster: LocalCluster) -> EngineOptions:
    """``--engine dask --scheduler ADDRESS`` of the shared cluster."""
    return EngineOptions("dask", scheduler=cluster.scheduler_address)


@pytest.fixture(scope="session")  # session scope: Hypothesis refuses function-scoped fixtures in @given tests
def client(cluster: LocalCluster) -> Client:
    """A client of the shared cluster (the default one for computations), for tests that call the engine's stages
    or act on the workers themselves."""
    if not _CLIENTS:
        _CLIENTS.append(Client(_cluster().scheduler_address))
    _CLIENTS[0].wait_for_workers(WORKERS, timeout=60)
    return _CLIENTS[0]


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Should a Dask test run after the cluster was closed (a reordered run), start it again.
    if {"cluster", "engine", "client"} & set(getattr(item, "fixturenames", ())) and not _RUNNING:
        _cluster()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or HERE not in Path(str(nextitem.path)).resolve().parents:
        _close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _close()
