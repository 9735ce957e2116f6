"""The Dask engine on a cluster of several hosts, against the local engine: wall, CPU and bytes moved.

Usage (holds the shared benchmark lock, so no two benchmarks overlap on a shared machine):

    flock /tmp/dedup-bench.lock python bench/cluster.py --out bench/RESULTS-scaling.md --append
    python bench/cluster.py --records 20000 --out /tmp/cluster.md          # a quick look

The hosts are loopback addresses: a scheduler on 127.0.0.1 and one worker process on each of 127.0.0.2, .3, …
(``dask scheduler``, ``dask worker ADDRESS --host 127.0.0.N --nthreads 1 --no-nanny``), each started here with
``PYTHONPATH`` naming this checkout, as a user starts a cluster by hand. Workers on different addresses are what
a real cluster's workers are to the engine: a host of their own each, so nothing takes the path of one machine.
They still share this machine's cores, so the wall time of many workers on 2 cores says little; the CPU time says
what the work is, and it is what grows with hosts when the engine does more than it must.

Cases, on one JSON Lines file of ``--records`` short records (30–60 words, 4 % near-copies of the record before:
``bench/scaling.py``'s generator, about 300 bytes a record):

* ``sign``: ``dedup sign corpus.jsonl --id-field id -o STORE -q``, local ``-j 2`` and on 2 hosts;
* ``find``: ``dedup find STORE -t 0.5 -b 2 --output pairs -q -o OUT``, local ``-j 2`` and on 2 and 4 hosts;
* ``find, split by documents``: the same find with the candidate stage forced onto its general path, the split
  by documents (a store in object storage, or one band of every document past a task), on 2 and 4 hosts;
* ``find, object store``: the same find of a copy of the store in an ``s3://`` bucket of a local S3 server
  (``moto_server``, as the tests start it) on 2 hosts;
* ``find, 10^3 documents``: the wall time of a small find on a running cluster (start-up and planning).

CPU is the driver's (``wait4`` of it: itself and every child it reaped, the local engine's workers) plus the
scheduler's and every worker's (``/proc/PID/stat`` before and after). Bytes moved: ``between workers`` is what
the workers sent each other (Dask's ``transfer_outgoing_bytes_total``), ``loopback`` every byte the loopback
interface carried during the run (``/proc/net/dev``; the driver's traffic with the scheduler and workers, and the
S3 server's, included). Every answer is compared: the stores (rows sorted by id) and the pairs, byte for byte.
Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "tests"))
from scaling import _cpu_seconds, _write_short_part, run_command  # noqa: E402 - beside this script

THRESHOLD = "0.5"
BITS = "2"


def corpus(records: int, data: Path) -> Path:
    """One JSON Lines file of ``records`` short records (built once into ``data``)."""
    path = data / f"cluster-short-{records}" / "corpus.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(".staging")
        _write_short_part((staging, 0, records, 7))
        os.replace(staging, path)
    return path


def loopback_bytes() -> int:
    with open("/proc/net/dev") as table:
        for line in table:
            name, _, counters = line.partition(":")
            if name.strip() == "lo":
                return int(counters.split()[0])
    return 0


@dataclass
class Cluster:
    address: str
    processes: list[subprocess.Popen]

    def cpu(self) -> float:
        return sum(_cpu_seconds(process.pid) or 0.0 for process in self.processes)

    def sent_between_workers(self) -> int:
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            sent = client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
        return int(sum(sent.values()))


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def loopback_cluster(workers: int, scratch: Path, extra: dict[str, str]) -> Iterator[Cluster]:
    """A scheduler on 127.0.0.1 and ``workers`` one-thread workers on 127.0.0.2, .3, …, with ``extra`` in their
    environment; stopped at the end."""
    from distributed import Client

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    environment = {**os.environ, **extra, "PYTHONPATH": str(REPO)}
    logs = open(scratch / f"cluster-{workers}.log", "ab")
    started = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                 "--port", str(port), "--no-dashboard"], env=environment, stdout=logs,
                                stderr=logs)]
    try:
        for index in range(workers):
            started.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", f"127.0.0.{2 + index}",
                 "--nthreads", "1", "--no-nanny", "--no-dashboard", "--memory-limit", "4GiB",
                 "--local-directory", str(scratch / f"worker-{index}")], env=environment, stdout=logs, stderr=logs))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield Cluster(address, started)
    finally:
        for process in reversed(started):
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        logs.close()


@dataclass
class Measured:
    case: str
    engine: str
    wall: float
    cpu_driver: float
    cpu_cluster: float
    between_workers: int
    loopback: int
    answer: str

    @property
    def cpu(self) -> float:
        return self.cpu_driver + self.cpu_cluster


def measure(case: str, engine: str, arguments: list[str], scratch: Path, cluster: Cluster | None,
            answer: Path, environment: dict[str, str] | None = None) -> Measured:
    before_cpu = cluster.cpu() if cluster else 0.0
    before_sent = cluster.sent_between_workers() if cluster else 0
    before_lo = loopback_bytes()
    saved = dict(os.environ)
    os.environ.update(environment or {})
    try:
        run = run_command(arguments, scratch)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    lo = loopback_bytes() - before_lo
    cluster_cpu = cluster.cpu() - before_cpu if cluster else 0.0
    sent = cluster.sent_between_workers() - before_sent if cluster else 0
    return Measured(case, engine, run.wall, run.total_cpu, cluster_cpu, sent, lo, digest(answer))


def digest(path: Path) -> str:
    """The answer's fingerprint: a pairs file's bytes, or a store's rows sorted by id (its files' names and the
    times in its manifest differ from run to run)."""
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(sorted(str(p) for p in path.rglob("*.parquet")))
    table = table.drop_columns([name for name in table.column_names if name in ("run",)])
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))
    hashed = hashlib.sha256()
    for column in table.columns:
        hashed.update(str(column.to_pylist()).encode())
    return hashed.hexdigest()[:12]


def engine_options(cluster: Cluster | None) -> list[str]:
    return ["-j", "2"] if cluster is None else ["--engine", "dask", "--scheduler", cluster.address]


CASES = ("sign", "find", "documents", "small", "s3")


def run_cases(records: int, hosts: list[int], data: Path, scratch: Path, repeats: int,
              cases: tuple[str, ...] = CASES) -> list[Measured]:
    source = corpus(records, data)
    small = corpus(1_000, data)
    rows: list[Measured] = []

    def best(case: str, engine: str, command: list[str], cluster: Cluster | None, answer: Path,
             environment: dict[str, str] | None = None, fresh: Path | None = None) -> Measured:
        runs = []
        for _ in range(repeats):
            if fresh is not None:
                subprocess.run(["rm", "-rf", str(fresh)], check=True)
            runs.append(measure(case, engine, command, scratch, cluster, answer, environment))
        return sorted(runs, key=lambda run: run.wall)[len(runs) // 2]

    def sign(cluster: Cluster | None, engine: str) -> Path:
        store = scratch / f"store-{engine}"
        command = ["sign", str(source), "--id-field", "id", "-o", str(store), "-q", *engine_options(cluster)]
        rows.append(best("sign", engine, command, cluster, store, fresh=store))
        return store

    def find(cluster: Cluster | None, engine: str, store: str, case: str = "find",
             environment: dict[str, str] | None = None) -> None:
        out = scratch / f"pairs-{engine}-{case.replace(' ', '-')}.tsv"
        command = ["find", store, "-t", THRESHOLD, "-b", BITS, "--output", "pairs", "-q", "-o", str(out),
                   *engine_options(cluster)]
        rows.append(best(case, engine, command, cluster, out, environment))

    local_store = sign(None, "local -j 2")
    find(None, "local -j 2", str(local_store))
    small_store = scratch / "store-small"
    dedup(["sign", str(small), "--id-field", "id", "-o", str(small_store), "-q"])
    s3 = s3_store(source, scratch) if "s3" in cases else None
    environment = {} if s3 is None else s3[1]
    try:
        for count in hosts:
            with loopback_cluster(count, scratch, environment) as cluster:
                engine = f"Dask, {count} hosts"
                if count == hosts[0] and "sign" in cases:
                    sign(cluster, engine)
                if "find" in cases:
                    find(cluster, engine, str(local_store))
                if "documents" in cases:
                    # The general path: what a store in object storage or past one band in a task takes.
                    forced = "dedup_cli.engine.dask.candidates:BAND_SPLIT_DOCUMENTS=0"
                    find(cluster, engine, str(local_store), "find, split by documents",
                         {**environment, "DEDUP_BENCH_PATCH": forced})
                if count == hosts[0] and "small" in cases:
                    find(cluster, engine, str(small_store), "find, 10^3 documents")
                    if s3 is not None:
                        find(cluster, engine, s3[0], "find, store in S3", environment)
    finally:
        if s3 is not None:
            s3[2].stop()
    return rows


def dedup(arguments: list[str], environment: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], check=True,
                   env={**os.environ, **(environment or {}), "PYTHONPATH": str(REPO)})


def s3_store(source: Path, scratch: Path):
    """(URL, environment, server): ``source`` signed (local -j 2) into a bucket of a local S3 server; None
    without moto (the test extra)."""
    try:
        from s3_server import S3Server, aws_environment, make_bucket
    except ImportError:
        return None
    server = S3Server().start()
    environment = aws_environment(server.endpoint)
    os.environ.update(environment)
    url = f"s3://dedup-bench-{os.getpid()}/store"
    make_bucket(url)
    dedup(["sign", str(source), "--id-field", "id", "-o", url, "-q", "-j", "2"], environment)
    return url, environment, server


def table(rows: list[Measured]) -> list[str]:
    base = {row.case: row for row in rows if row.engine.startswith("local")}
    lines = ["| case | engine | wall s | CPU s (driver + cluster) | wall ÷ local | CPU ÷ local | "
             "between workers MB | loopback MB | answer |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        local = base.get(row.case) or base.get("find" if row.case.startswith("find") else row.case)
        ratio = ("", "") if local is None or row is local or row.case == "find, 10^3 documents" else (
            f"{row.wall / local.wall:.2f}×", f"{row.cpu / local.cpu:.2f}×")
        same = "" if local is None or row is local or row.case == "find, 10^3 documents" else (
            " (same)" if row.answer == local.answer else " (DIFFERS)")
        lines.append(f"| {row.case} | {row.engine} | {row.wall:.2f} | {row.cpu:.2f} ({row.cpu_driver:.2f} + "
                     f"{row.cpu_cluster:.2f}) | {ratio[0]} | {ratio[1]} | {row.between_workers / 1e6:.1f} | "
                     f"{row.loopback / 1e6:.1f} | {row.answer}{same} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case; the median wall is shown")
    parser.add_argument("--data", type=Path, default=BENCH / "data")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--append", action="store_true")
    arguments = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="dedup-cluster-") as folder:
        rows = run_cases(arguments.records, arguments.hosts, arguments.data, Path(folder), arguments.repeats,
                         tuple(arguments.cases))
    load = os.getloadavg()[0]
    text = "\n".join([
        f"## The Dask engine on loopback hosts, {arguments.records:,} short records in one file", "",
        f"{time.strftime('%Y-%m-%d')}, commit {commit}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load:.1f} at the end. `python bench/cluster.py --records {arguments.records} --hosts "
        f"{' '.join(map(str, arguments.hosts))} --repeats {arguments.repeats}`: median of {arguments.repeats} "
        "runs by wall time; the ratios are to the local engine's -j 2 run of the same case.", "",
        *table(rows), ""])
    print(text)
    if arguments.out is not None:
        with open(arguments.out, "a" if arguments.append else "w", encoding="utf-8") as handle:
            handle.write(("\n" if arguments.append else "") + text)


if __name__ == "__main__":
    main()
