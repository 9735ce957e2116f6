"""The engine on real processes: a worker killed in the middle of a find, a `dask scheduler` and two `dask worker`
processes started on the loopback interface, and a store other programs read without dedup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest
from distributed import Client
from helpers import REPO
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.store import read_store

SAMPLES = REPO / "sample_corpora"


def _kill_the_first_banding(marker: str) -> None:
    """On a worker: the first task making band keys (of a share, or of a worker's bands) after the marker is written
    kills its own process."""
    from dedup_cli.engine.dask import candidates

    original = candidates.block_band_keys

    def killing(*arguments: object, **named: object) -> object:
        if not os.path.exists(marker):
            Path(marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*arguments, **named)  # type: ignore[arg-type]

    candidates.block_band_keys = killing


def test_a_worker_killed_mid_find_is_replaced_and_the_answer_is_the_same(client: Client, engine: EngineOptions,
                                                                        tmp_path: Path) -> None:
    store = tmp_path / "store"
    dedup.sign([str(SAMPLES)], store, dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",))))
    marker = tmp_path / "killed"
    client.run(_kill_the_first_banding, str(marker))
    workers = set(client.scheduler_info()["workers"])
    remote = dedup.find(store, dedup.FindOptions(engine=engine, ways=3, bits=2))
    assert marker.exists() and set(client.scheduler_info()["workers"]) != workers
    assert_same_answers(dedup.find(store, dedup.FindOptions(ways=3, bits=2)), remote)
    client.wait_for_workers(2, timeout=60)


@pytest.fixture
def processes(tmp_path: Path):
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1, stopped afterwards; yields the address."""
    dask = Path(sys.executable).parent / "dask"
    started: list[subprocess.Popen[bytes]] = []
    scheduler_file = tmp_path / "scheduler.json"
    try:
        started.append(subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                         "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # The scheduler creates its file before it writes it: wait until it holds the address.
        deadline = time.monotonic() + 60
        address = None
        while address is None and time.monotonic() < deadline:
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        assert address is not None, "the scheduler wrote no address within 60 s"
        for _ in range(2):
            started.append(subprocess.Popen([str(dask), "worker", address, "--nthreads", "1", "--no-dashboard",
                                             "--memory-limit", "1GiB", "--host", "127.0.0.1"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_scheduler_and_two_workers_started_by_hand(processes: str, tmp_path: Path) -> None:
    def dedup_command(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)

    for name, engine in (("local", []), ("dask", ["--engine", "dask", "--scheduler", processes])):
        signed = dedup_command("sign", str(SAMPLES), "--exclude", "SOURCE", "-o", f"{name}.parquet", "-q", *engine)
        assert signed.returncode == 0, signed.stderr
        for output in ("groups", "members"):
            found = dedup_command("find", f"{name}.parquet", "--bits", "2", "--group", "strict", "--output", output,
                                  "--format", "csv", "-o", f"{name}-{output}.csv", *engine)
            assert found.returncode == 0, found.stderr
    for output in ("groups", "members"):
        expected = (tmp_path / f"local-{output}.csv").read_bytes()
        assert (tmp_path / f"dask-{output}.csv").read_bytes() == expected and expected.count(b"\n") > 10


def test_the_store_reads_with_dask_and_pyarrow_alone(engine: EngineOptions, tmp_path: Path) -> None:
    # Parquet-dataset conventions: the manifest, lock and removal files start with _ and temporary files with .,
    # so both readers see the parts only; the manifest's live-row rule then gives dedup's own reading.
    import dask.dataframe as dd

    store = tmp_path / "store"
    dedup.sign([str(SAMPLES / "licenses")], store, dedup.SignOptions(engine=engine))
    (store / ".part-000099.parquet.tmp").write_bytes(b"a killed run's leftover")
    expected = read_store(store)
    for table in (dd.read_parquet(str(store)).compute(), ds.dataset(str(store), format="parquet").to_table()
                  .to_pandas()):
        live = table.sort_values(["id", "run"], ascending=[True, False]).drop_duplicates("id")
        assert live["id"].tolist() == expected.ids
        assert np.array_equal(np.stack([np.frombuffer(x, np.uint8) for x in live["signature"]]), expected.packed)
    assert "part-" in ",".join(sorted(os.listdir(store)))


def test_a_local_cluster_of_forked_workers_started_by_the_engine(stores: dict[str, Path]) -> None:
    # --workers without --scheduler: the engine starts its own cluster, its workers forked from the driver on Linux
    # (no second import of the modules), and closes it; the records are the local engine's.
    from dedup_cli.engine.dask import cluster

    assert cluster.WORKER_START == ("fork" if sys.platform.startswith("linux") else "spawn")
    common = [sys.executable, "-m", "dedup_cli", "find", str(stores["sample"]), "--output", "pairs", "--bits", "2",
              "-q"]
    local = subprocess.run(common, capture_output=True, timeout=300)
    remote = subprocess.run([*common, "--engine", "dask", "--workers", "2", "--memory-limit", "1GiB"],
                            capture_output=True, timeout=300)
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and local.stdout.count(b"\n") > 10


def test_workers_are_forked_only_from_a_process_without_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.engine.dask import cluster

    monkeypatch.setattr(cluster, "WORKER_START", "fork")
    monkeypatch.setattr(cluster.threading, "active_count", lambda: 1)
    assert cluster.worker_start() == "fork"
    monkeypatch.setattr(cluster.threading, "active_count", lambda: 2)  # e.g. what an earlier cluster left running
    assert cluster.worker_start() == "spawn"
    monkeypatch.setattr(cluster, "WORKER_START", "spawn")
    assert cluster.worker_start() == "spawn"


TWO_FINDS = """
import json, sys, threading
import dedup_cli as dedup
from dedup_cli.engine.dask import cluster
from dedup_cli.options.engine_choice import EngineOptions


def main():
    options = dedup.FindOptions(bits=2, engine=EngineOptions(name="dask", workers=2, memory_limit="1GiB"))
    runs = []
    for _ in range(2):
        start = cluster.worker_start()
        result = dedup.find(sys.argv[1], options)
        runs.append([start, sorted((pair.id_a, pair.id_b) for pair in result.pairs())])
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
"""


def test_two_finds_on_local_clusters_in_one_process(stores: dict[str, Path], tmp_path: Path) -> None:
    # The second cluster of a process starts its workers beside the threads the first left (its client's loop):
    # forked there, a worker hung in its first peer-to-peer shuffle, so they are spawned.
    script = tmp_path / "two_finds.py"
    script.write_text(TWO_FINDS)
    done = subprocess.run([sys.executable, str(script), str(stores["sample"])], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (first_start, first), (second_start, second) = json.loads(done.stdout)
    if sys.platform.startswith("linux"):
        assert (first_start, second_start) == ("fork", "spawn")
    assert first == second and len(first) > 10


def test_the_driver_of_a_cluster_find_imports_no_data_frames(stores: dict[str, Path], engine: EngineOptions) -> None:
    # The engine's tasks hold numpy tables: its driver needs distributed and numpy, not dask.dataframe or pandas
    # (a second of a small run's start-up), and the command line hides pandas from pyarrow as on the local engine.
    script = ("import sys\n"
              "from dedup_cli.cli.main import cli\n"
              f"cli(['find', {str(stores['sample'])!r}, '-b', '2', '-q', '-o', '/dev/null', '--engine', 'dask', "
              f"'--scheduler', {str(engine.scheduler)!r}], standalone_mode=False)\n"
              "print(sorted(name for name in ('pandas', 'dask.dataframe', 'distributed') if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['distributed']"
