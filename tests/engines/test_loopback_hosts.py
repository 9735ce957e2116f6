"""The Dask engine on workers of separate hosts, and what a fault on such a cluster leaves behind.

The hosts are loopback addresses: a `dask scheduler` on 127.0.0.1 and a `dask worker --no-nanny` on each of
127.0.0.2 and 127.0.0.3, started by hand as a user starts them. To the engine they are two machines, so it takes
the paths of a real cluster (no worker shares a host with another). Without a nanny, a worker that dies stays
dead, as a lost machine does: the run must finish on the worker left. Each test has a cluster of its own, since
the faults end its processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the dask extra: pip install 'dedup-cli[dask]'")

from distributed import Client  # noqa: E402 - after the skip
from helpers import REPO  # noqa: E402

SAMPLES = REPO / "sample_corpora"
HOSTS = ("127.0.0.2", "127.0.0.3")
HERE = Path(__file__).resolve().parent
# The workers import this module, to run the faults below (pickled by name), and the code under test.
ENVIRONMENT = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), str(HERE), str(HERE.parent),
                                                                         os.environ.get("PYTHONPATH")]))}


@dataclass
class Hosts:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]

    def client(self) -> Client:
        return Client(self.address, timeout=30)


def _start(tmp_path: Path, name: str) -> Hosts:
    dask = Path(sys.executable).parent / "dask"
    scheduler_file = tmp_path / f"{name}.json"
    log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115 - the processes write to it until they end
    scheduler = subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(scheduler_file)], stdout=log, stderr=log, env=ENVIRONMENT)
    deadline = time.monotonic() + 60
    address = None
    while address is None and time.monotonic() < deadline:
        try:  # the scheduler creates its file before it writes it
            address = json.loads(scheduler_file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    assert address is not None, "the scheduler wrote no address within 60 s"
    workers = [subprocess.Popen([str(dask), "worker", address, "--host", host, "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--memory-limit", "1GiB",
                                 "--local-directory", str(tmp_path / f"{name}-{host}")],
                                stdout=log, stderr=log, env=ENVIRONMENT) for host in HOSTS]
    hosts = Hosts(address, scheduler, workers)
    with hosts.client() as client:
        client.wait_for_workers(len(HOSTS), timeout=60)
        assert {info["host"] for info in client.scheduler_info()["workers"].values()} == set(HOSTS)
    return hosts


def _stop(hosts: Hosts) -> None:
    # Killed, as a lost machine is: a worker told to stop keeps trying to reach a scheduler that is gone.
    for process in [*hosts.workers, hosts.scheduler]:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    """A scheduler on 127.0.0.1 and a worker on each of 127.0.0.2 and 127.0.0.3, stopped afterwards."""
    started = _start(tmp_path, "cluster")
    try:
        yield started
    finally:
        _stop(started)


def dedup(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=ENVIRONMENT)


def records(folder: Path, count: int = 3_000) -> Path:
    """A JSON Lines file of ``count`` short records, every tenth a near-copy of the one before (a few hundred
    kilobytes: cut into several sign tasks when the task size is small)."""
    import random

    generator = random.Random(5)
    words = [f"w{index}" for index in range(3_000)]
    path = folder / "records.jsonl"
    previous: list[str] = []
    with open(path, "w", encoding="utf-8") as handle:
        for number in range(count):
            text = [word if generator.random() > 0.05 else generator.choice(words) for word in previous] \
                if number % 10 == 9 else generator.choices(words, k=generator.randint(20, 60))
            previous = text
            handle.write(json.dumps({"id": f"r{number:05d}", "text": " ".join(text)}) + "\n")
    return path


def store_digest(store: Path) -> str:
    """Every file of a store, names and bytes, but its lock and temporary files (``.part-….tmp``: what a run
    writes before it commits, and what a worker cut off from its driver may still write; the next run removes
    them)."""
    digest = hashlib.sha256()
    for path in sorted(store.rglob("*")):
        if path.is_file() and path.name != "_dedup.lock" and not path.name.startswith("."):
            digest.update(str(path.relative_to(store)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _kill_own_process_once(marker: str, module: str, name: str) -> None:
    """On a worker: the first call of ``module.name`` after this (on any worker) kills the process that makes it."""
    import importlib

    target = importlib.import_module(module)
    original = getattr(target, name)

    def killing(*arguments: object, **named: object) -> object:
        try:
            descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return original(*arguments, **named)
        os.write(descriptor, str(os.getpid()).encode())
        os.close(descriptor)
        os.kill(os.getpid(), signal.SIGKILL)
        return None

    setattr(target, name, killing)


def _kill_scheduler_once(marker: str, scheduler_pid: int, module: str, name: str) -> None:
    """On a worker: the first call of ``module.name`` kills the scheduler, then waits to be cut off."""
    import importlib

    target = importlib.import_module(module)
    original = getattr(target, name)

    def killing(*arguments: object, **named: object) -> object:
        if not os.path.exists(marker):
            Path(marker).write_text("killed")
            os.kill(scheduler_pid, signal.SIGKILL)
            time.sleep(5)
        return original(*arguments, **named)

    setattr(target, name, killing)


def test_sign_find_and_filter_on_two_hosts_write_what_the_local_engine_writes(hosts: Hosts, tmp_path: Path) -> None:
    # Paths relative to the driver's folder, which is not the workers' working folder.
    records(tmp_path)
    engine = ["--engine", "dask", "--scheduler", hosts.address]
    outputs = {}
    for name, options in (("local", ["-j", "2"]), ("dask", engine)):
        signed = dedup("sign", "records.jsonl", str(SAMPLES), "--exclude", "SOURCE", "--id-field", "id", "-o",
                       f"{name}.parquet", "-q", *options, cwd=tmp_path)
        assert signed.returncode == 0, signed.stderr
        found = dedup("find", f"{name}.parquet", "-b", "2", "--ways", "3", "--output", "members", "--format", "csv",
                      "-o", f"{name}.csv", *options, cwd=tmp_path)
        assert found.returncode == 0, found.stderr
        kept = dedup("filter", "records.jsonl", "-s", f"{name}.parquet", "-b", "2", "-o", f"{name}-kept.jsonl", "-q",
                     *options, cwd=tmp_path)
        assert kept.returncode == 0, kept.stderr
        outputs[name] = (tmp_path / f"{name}.csv").read_bytes(), (tmp_path / f"{name}-kept.jsonl").read_bytes()
    assert outputs["dask"] == outputs["local"] and outputs["local"][0].count(b"\n") > 100
    assert 2_000 < outputs["local"][1].count(b"\n") < 3_000


def test_a_worker_killed_mid_sign_leaves_the_same_store(hosts: Hosts, tmp_path: Path) -> None:
    corpus = records(tmp_path)
    expected = dedup("sign", str(corpus), "--id-field", "id", "-o", "local.parquet", "-q", cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    marker = tmp_path / "killed"
    with hosts.client() as client:
        client.run(_kill_own_process_once, str(marker), "dedup_cli.engine.dask.sign", "sign_read_task")
    # The worker that takes the task dies signing it; the scheduler hands the task to the other host.
    signed = dedup("sign", str(corpus), "--id-field", "id", "-o", "dask.parquet", "-q", "--engine", "dask",
                   "--scheduler", hosts.address, cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    assert marker.exists() and sum(worker.poll() is not None for worker in hosts.workers) == 1
    assert not list((tmp_path / "dask.parquet").glob("*.tmp*")), "a dead task's file left in the store"
    for name in ("local", "dask"):
        found = dedup("find", f"{name}.parquet", "-b", "2", "--output", "pairs", "--format", "csv", "-o",
                      f"{name}.csv", cwd=tmp_path)
        assert found.returncode == 0, found.stderr
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    ids = dedup("info", "dask.parquet", "--ids", cwd=tmp_path)
    assert ids.stdout == dedup("info", "local.parquet", "--ids", cwd=tmp_path).stdout
    assert ids.stdout.count("\n") == 3_000


def test_a_worker_killed_mid_find_leaves_the_same_answer(hosts: Hosts, tmp_path: Path) -> None:
    corpus = records(tmp_path)
    signed = dedup("sign", str(corpus), "--id-field", "id", "-o", "store", "-q", "-j", "2", cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    common = ["find", "store", "-b", "2", "--ways", "3", "--output", "pairs", "--format", "csv"]
    local = dedup(*common, "-o", "local.csv", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    marker = tmp_path / "killed"
    with hosts.client() as client:
        client.run(_kill_own_process_once, str(marker), "dedup_cli.engine.dask.candidates", "block_band_keys")
    remote = dedup(*common, "-o", "dask.csv", "--engine", "dask", "--scheduler", hosts.address, cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr
    assert marker.exists() and sum(worker.poll() is not None for worker in hosts.workers) == 1
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()


def test_a_scheduler_killed_mid_find_ends_the_run_in_one_line_and_work_dir_resumes(hosts: Hosts,
                                                                                  tmp_path: Path) -> None:
    corpus = records(tmp_path)
    signed = dedup("sign", str(corpus), "--id-field", "id", "-o", "store", "-q", "-j", "2", cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    common = ["find", "store", "-b", "2", "--output", "pairs", "--format", "csv", "--work-dir", "work"]
    local = dedup(*common[:-2], "-o", "local.csv", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    before = store_digest(tmp_path / "store")
    marker = tmp_path / "killed"
    with hosts.client() as client:
        # Scoring runs after the candidate stage kept its rounds in the work folder.
        client.run(_kill_scheduler_once, str(marker), hosts.scheduler.pid, "dedup_cli.engine.dask.joins",
                   "score_part")
    started = time.monotonic()
    cut_off = dedup(*common, "-o", "dask.csv", "--engine", "dask", "--scheduler", hosts.address, cwd=tmp_path)
    assert marker.exists() and hosts.scheduler.poll() is not None
    assert cut_off.returncode not in (0, None), cut_off.stderr
    message = cut_off.stderr.strip().splitlines()
    assert len(message) == 1 and "Traceback" not in cut_off.stderr and "scheduler" in message[0], cut_off.stderr
    assert time.monotonic() - started < 120
    # The candidate stage was kept, its parts (written by the workers, whose working folder is not the driver's)
    # beside its file: "work" is relative to the driver's.
    kept = list((tmp_path / "work").glob("candidates-*.npz"))
    assert kept and list(kept[0].with_suffix("").glob("part-*.npz"))
    assert not (tmp_path / "dask.csv").exists()
    assert store_digest(tmp_path / "store") == before
    _stop(hosts)
    again = _start(tmp_path, "again")
    try:
        resumed = dedup(*common, "-o", "dask.csv", "--engine", "dask", "--scheduler", again.address, cwd=tmp_path)
    finally:
        _stop(again)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: candidates" in resumed.stderr
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()


def test_a_scheduler_killed_mid_sign_ends_the_run_in_one_line_and_leaves_the_store_as_it_was(
        hosts: Hosts, tmp_path: Path) -> None:
    corpus = records(tmp_path, 2_000)
    first = dedup("sign", str(corpus), "--id-field", "id", "-o", "store", "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = store_digest(tmp_path / "store")
    records(tmp_path, 3_000)  # a thousand records more, and the rest the same
    marker = tmp_path / "killed"
    with hosts.client() as client:
        client.run(_kill_scheduler_once, str(marker), hosts.scheduler.pid, "dedup_cli.engine.dask.sign",
                   "sign_read_task")
    cut_off = dedup("sign", str(corpus), "--id-field", "id", "-o", "store", "--engine", "dask", "--scheduler",
                    hosts.address, cwd=tmp_path)
    assert marker.exists() and hosts.scheduler.poll() is not None, cut_off.stderr
    assert cut_off.returncode not in (0, None)
    message = cut_off.stderr.strip().splitlines()
    assert len(message) == 1 and "Traceback" not in cut_off.stderr and "scheduler" in message[0], cut_off.stderr
    assert store_digest(tmp_path / "store") == before
    read = dedup("find", "store", "-q", "-o", "pairs.tsv", "--output", "pairs", cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    again = dedup("sign", str(corpus), "--id-field", "id", "-o", "store", "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert dedup("info", "store", "--ids", cwd=tmp_path).stdout.count("\n") == 3_000
    assert not list((tmp_path / "store").glob(".*.tmp")), "a cut-off run's temporary files outlived the next run"
