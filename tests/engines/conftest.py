"""One real distributed cluster for the Dask tests: a scheduler and two worker processes on the loopback interface.

Starting a ``LocalCluster`` costs about a second and closing it a fraction of one, so one cluster serves every Dask
test; each test reaches it the way a user reaches a running cluster, by its address (``--scheduler``), so the
engine's own client, shuffles between processes and pickling are what is tested. Worker processes of one thread
and 2 GiB each, as the engine starts them itself.

The cluster is started at the first test that asks for it and closed after the last test of this directory (or,
when ``make test`` spreads the files over two processes, after the last of a run of them), not at the end of the
session: its scheduler threads allocate in the background, and later tests that measure their own allocations
with tracemalloc (tests/candidates/test_allpairs.py) would count them. So the fixtures that name it live for one
module, whose tests run one after the other in one process, and a cluster started again is found again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the dask extra: pip install 'dedup-cli[dask]'")

import asyncio  # noqa: E402
import shutil  # noqa: E402

import numpy as np  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402 - after the skip
from helpers import SAMPLE_CORPORA as SAMPLES  # noqa: E402
from helpers import StoreWriter  # noqa: E402

import dedup_cli as dedup  # noqa: E402
from dedup_cli.engine.dask.cluster import CLOSE_SECONDS, close_cluster  # noqa: E402
from dedup_cli.options.engine_choice import EngineOptions  # noqa: E402
from dedup_cli.store.format import DocumentBatch  # noqa: E402
from dedup_cli.store.store import read_store  # noqa: E402

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
    # Within the engine's bound: Dask's close can wait for good on a worker its nanny is starting again, after a
    # test killed one; the processes left then end with this one.
    while _CLIENTS:
        try:
            _CLIENTS.pop().close(timeout=CLOSE_SECONDS)
        except (TimeoutError, asyncio.TimeoutError):
            pass
    while _RUNNING:
        close_cluster(_RUNNING.pop())


@pytest.fixture(scope="module")
def cluster() -> LocalCluster:
    """The shared cluster (started on first use)."""
    return _cluster()


@pytest.fixture(scope="module")
def engine(cluster: LocalCluster) -> EngineOptions:
    """``--engine dask --scheduler ADDRESS`` of the shared cluster."""
    return EngineOptions("dask", scheduler=cluster.scheduler_address)


@pytest.fixture(scope="module")  # not per function: Hypothesis refuses function-scoped fixtures in @given tests
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


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``sample``: the corpora in one run; ``grown``: three runs with a change, additions and a prune;
    ``legacy``: the sample's rows as a format 1 file; ``reference``: three Bible editions and the declarations,
    a reference store for the others."""
    folder = tmp_path_factory.mktemp("stores")
    reading = dedup.InputOptions(exclude=("SOURCE",))
    sample = folder / "sample.parquet"
    dedup.sign([str(SAMPLES)], sample, dedup.SignOptions(input=reading))
    corpus = folder / "corpus"
    shutil.copytree(SAMPLES / "bible-editions", corpus / "bible")
    shutil.copytree(SAMPLES / "licenses", corpus / "licenses")
    grown = folder / "grown.parquet"
    dedup.sign([str(corpus / "bible" / "KJV"), str(corpus / "licenses")], grown,
               dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",), id_root=str(corpus))))
    dedup.sign([str(corpus)], grown, dedup.SignOptions(input=reading))
    shutil.rmtree(corpus / "bible" / "ASV")
    (corpus / "bible" / "WEB" / "ruth-02.txt").write_text((corpus / "bible" / "KJV" / "ruth-02.txt").read_text())
    dedup.sign([str(corpus)], grown, dedup.SignOptions(input=reading, prune=True))
    legacy = folder / "legacy.parquet"
    rows = read_store(sample)
    with StoreWriter(legacy, rows.params) as writer:
        writer.write(DocumentBatch(rows.ids, rows.paths, np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64),
                                   rows.content_hashes, rows.shingle_counts, rows.packed))
    reference = folder / "reference.parquet"
    dedup.sign([str(SAMPLES / "bible-editions" / name) for name in ("ASV", "UKJV", "RWEBSTER")] +
               [str(SAMPLES / "udhr")], reference,
               dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",), id_root=str(SAMPLES))))
    return {"sample": sample, "grown": grown, "legacy": legacy, "reference": reference}
