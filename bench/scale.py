"""find at scale with the local engine and the Dask engine: wall time, peak memory of all processes, candidates.

Usage (every timing run holds the shared lock, so no two benchmarks overlap on this 2-core machine):

    flock /tmp/dedup-bench.lock python bench/scale.py --sizes 1000000 10000000 --out bench/RESULTS-scale.md
    flock /tmp/dedup-bench.lock python bench/scale.py --sizes 100000 1000000 --engines local --threshold 0.5

Stores are synthetic (``bench/find_scale.py``'s generator: k = 256, B = 8, 1 % of documents in planted families
of 2–5 near-duplicates), built into the git-ignored ``bench/data/`` unless ``--data`` names a folder that holds
them already (``synthetic-N.parquet``). Each measurement runs in a fresh process: ``dedup.find`` with
``--engine local``, or ``--engine dask`` on a local cluster of 1 or 2 worker processes (one thread each, a memory
limit per worker, spilling to disk), started and closed by the engine inside the measured time. A thread samples
the peak resident memory (VmHWM) of that process and of every process it starts (nannies, workers, Dask's
resource tracker) every 0.2 s; their sum is an upper bound of the simultaneous peak. CPU is user + system time of
that process and of the processes it started and reaped (``getrusage``), the driver's apart. Prints JSON lines
and writes a markdown table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from dedup_cli.processes import descendants

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data"


def _peak_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def _io_bytes(pid: int) -> tuple[int, int]:
    """(bytes read through read calls, bytes of them fetched from the disk) of a process so far, from /proc."""
    try:
        with open(f"/proc/{pid}/io") as io:
            fields = dict(line.split(": ") for line in io.read().splitlines())
        return int(fields["rchar"]), int(fields["read_bytes"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


class Peaks:
    """The latest VmHWM of this process and each descendant, sampled until stopped (VmHWM only grows), and the
    largest size the Dask workers' scratch folder (their spilled data) reached; and the bytes the processes read.

    A process's I/O counters in /proc include those of its children once it has reaped them, so the reads are
    this process's own counters from start to stop (the command, once waited for, with every forked worker it
    reaped) plus the last sample of each descendant still running at the stop (a cluster's scheduler and workers,
    which outlive the command); summing every descendant's samples would count each forked worker twice."""

    def __init__(self, every: float = 0.2, scratch: Path | None = None) -> None:
        self.peaks: dict[int, int] = {}
        self.read: dict[int, tuple[int, int]] = {}
        self._own_start = _io_bytes(os.getpid())
        self._own_read = (0, 0)
        self._running: set[int] = set()
        self.scratch_peak = 0
        self._scratch = scratch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        me = os.getpid()
        ticks = 0
        while not self._stop.is_set():
            below = descendants(me)
            self._running = set(below)
            for pid in [me, *below]:
                self.peaks[pid] = max(self.peaks.get(pid, 0), _peak_kib(pid))
                if pid != me:
                    self.read[pid] = max(self.read.get(pid, (0, 0)), _io_bytes(pid))
            if self._scratch is not None and ticks % 10 == 0 and self._scratch.exists():
                self.scratch_peak = max(self.scratch_peak, _folder_bytes(self._scratch))
            ticks += 1
            self._stop.wait(every)

    def stop(self) -> dict[int, int]:
        self._stop.set()
        self._thread.join()
        self.peaks[os.getpid()] = _peak_kib(os.getpid())
        now = _io_bytes(os.getpid())
        self._own_read = (now[0] - self._own_start[0], now[1] - self._own_start[1])
        self._running = set(descendants(os.getpid()))
        return self.peaks

    def bytes_read(self) -> tuple[int, int]:
        """(read through read calls, fetched from the disk) by the processes of the run (call after :meth:`stop`):
        those reaped by this process, and the last sample of each still running."""
        running = [self.read[pid] for pid in self._running if pid in self.read]
        return (self._own_read[0] + sum(r for r, _ in running), self._own_read[1] + sum(d for _, d in running))


def measure(store: Path, engine: str, workers: int, memory_limit: str, threshold: float, bits: int) -> dict:
    """One find in this process."""
    import tempfile

    import dedup_cli as dedup
    from dedup_cli.options.engine_choice import EngineOptions

    scratch = Path(tempfile.gettempdir()) / "dask-scratch-space"
    peaks = Peaks(scratch=scratch if engine == "dask" else None)
    options = EngineOptions() if engine == "local" else EngineOptions("dask", workers=workers,
                                                                      memory_limit=memory_limit)
    import resource

    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    started = time.perf_counter()
    result = dedup.find(store, dedup.FindOptions(threshold=threshold, bits=bits, engine=options))
    seconds = time.perf_counter() - started
    # CPU of this process (the driver, and a local cluster's scheduler) and of the processes it started and reaped
    # (the workers, closed with the cluster inside find): user + system.
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = [a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True)]
    found = peaks.stop()
    me = os.getpid()
    banding = result.banding
    return {
        "documents": result.document_count, "engine": engine, "workers": workers if engine == "dask" else 0,
        "memory_limit": memory_limit if engine == "dask" else None,
        "threshold": threshold, "bits": bits, "seconds": seconds,
        "cpu_seconds": sum(cpu), "driver_cpu_seconds": cpu[0], "banding": f"{banding.bands}x{banding.rows}",
        "candidates": result.candidates, "pairs": result.pair_count, "groups": result.group_count,
        "peak_mb": sum(found.values()) / 1024, "driver_peak_mb": found[me] / 1024,
        "store_gb": _folder_bytes(store) / 1e9, "spill_peak_gb": peaks.scratch_peak / 1e9,
        "other_peaks_mb": sorted((kib / 1024 for pid, kib in found.items() if pid != me), reverse=True),
        "chance_expected": (result.banding_choice.chance_candidates if result.banding_choice else None),
        "profile": result.profile,
    }


def ensure_store(size: int, data: Path) -> Path:
    path = data / f"synthetic-{size}.parquet"
    if not path.exists():
        sys.path.insert(0, str(BENCH))
        from find_scale import build_store

        data.mkdir(parents=True, exist_ok=True)
        build_store(size, path)
    return path


def table(rows: list[dict]) -> list[str]:
    lines = ["| documents | R0 | engine | memory limit | workers restarted | banding | candidates | per document | "
             "pairs ≥ R0 | time s | CPU s (driver) | peak MB (sum) | driver MB | largest other MB | store GB | "
             "spilled GB (peak) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        engine = "local" if r["engine"] == "local" else f"dask, {r['workers']} worker{'s' * (r['workers'] > 1)}"
        other = f"{r['other_peaks_mb'][0]:,.0f}" if r["other_peaks_mb"] else ""
        spilled = f"{r['spill_peak_gb']:.2f}" if "spill_peak_gb" in r and r["engine"] == "dask" else ""
        store = f"{r['store_gb']:.1f}" if "store_gb" in r else ""
        limit = r.get("memory_limit") or ""
        restarted = _restarted(r) if r["engine"] == "dask" else ""
        cpu = f"{r['cpu_seconds']:.1f} ({r['driver_cpu_seconds']:.1f})" if "cpu_seconds" in r else ""
        lines.append(f"| {r['documents']:,} | {r['threshold']:g} | {engine} | {limit} | {restarted} | {r['banding']} | "
                     f"{r['candidates']:,} | "
                     f"{r['candidates'] / r['documents']:.4f} | {r['pairs']:,} | {r['seconds']:.1f} | {cpu} | "
                     f"{r['peak_mb']:,.0f} | {r['driver_peak_mb']:,.0f} | {other} | {store} | {spilled} |")
    return lines


def _restarted(r: dict) -> int:
    """Workers started again after one was killed at its memory limit: the processes beside the driver as large as
    a worker (a quarter of the largest at least; Dask's resource tracker and helpers are far smaller), less the
    workers."""
    peaks = r["other_peaks_mb"]
    return max(0, sum(peak >= peaks[0] / 4 for peak in peaks) - r["workers"]) if peaks else 0


def latest(rows: list[dict]) -> list[dict]:
    """The last run of each (documents, R0, engine, workers, memory limit), ordered by those; for the Dask engine
    also its last run in which no worker was restarted, when that is another run."""
    def key(r: dict) -> tuple:
        return (r["documents"], r["threshold"], r["engine"], r["workers"], r.get("memory_limit") or "")

    found = {key(r): r for r in rows}
    calm = {key(r): r for r in rows if r["engine"] == "dask" and not _restarted(r)}
    chosen = [found[k] for k in sorted(found)]
    return sorted(chosen + [r for k, r in calm.items() if r is not found[k]], key=key)


def moved(profile: dict) -> float:
    """Bytes the Dask stages passed between tasks: fingerprints, crossing rows, pair codes and the scoring joins."""
    return (profile["fingerprint_bytes"] + profile["crossing_bytes"] + profile["pair_code_bytes"]
            + profile["join_bytes"])


def stages(rows: list[dict]) -> list[str]:
    """The Dask runs' stages: seconds, and the bytes each passed between tasks."""
    lines = ["| documents | workers | read s | candidates s | scoring s | decisions s | end s | rounds | shares | "
             "band keys (not moved) | fingerprints (to another worker) | crossing rows | pair codes | joins | "
             "moved in all |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["profile"]
        if not p:
            continue
        lines.append(f"| {r['documents']:,} | {r['workers']} | {p['read_seconds']:.1f} | {p['candidates_seconds']:.1f} "
                     f"| {p['scoring_seconds']:.1f} | {p['decisions_seconds']:.1f} | {p['end_seconds']:.1f} | "
                     f"{p['rounds']:.0f} | {p['shares']:.0f} | {p['band_keys']:,.0f} | "
                     f"{p['fingerprint_bytes'] / 1e6:,.0f} MB ({p['fingerprint_bytes_across'] / 1e6:,.0f} MB) | "
                     f"{p['crossing_rows']:,.0f} ({p['crossing_bytes'] / 1e6:,.1f} MB) | "
                     f"{p['pair_code_bytes'] / 1e6:,.1f} MB | {p['join_bytes'] / 1e6:,.1f} MB | "
                     f"{moved(p) / 1e6:,.0f} MB |")
    return lines


def report(rows: list[dict], command: str) -> str:
    return "\n".join([
        "# find at scale: the local engine and the Dask engine", "",
        f"Command: `{command}` (written by `bench/scale.py`). Synthetic stores: k = 256, B = 8, 1 % of documents in "
        "planted families; `--bits 2`. Peak memory is the sum of every process's VmHWM (driver with the "
        "scheduler, workers, Dask's resource tracker, and any worker started again after one reached its memory "
        "limit); each Dask worker has one thread and the memory limit shown, spilling to disk. Time includes "
        "starting and closing the local cluster. Every run of the log, oldest first.", "",
        *table(rows), "", "Stages of the Dask runs (bytes passed between tasks):", "",
        *stages(rows), ""])


def write_report(out: Path, text: str) -> None:
    """Write ``text`` to ``out``, keeping the section ``bench/card_scale.py`` writes at its top."""
    start, end = "<!-- card: start -->", "<!-- card: end -->"
    old = out.read_text() if out.exists() else ""
    kept = old[:old.index(end) + len(end)] + "\n\n" if start in old and end in old else ""
    out.write_text(kept + text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000_000, 10_000_000])
    parser.add_argument("--engines", nargs="+", default=["local", "dask"], choices=["local", "dask"])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--memory-limit", default="1.5GiB", help="per Dask worker")
    parser.add_argument("--threshold", nargs="+", type=float, default=[0.55])
    parser.add_argument("--bits", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DATA, help="folder holding (or to hold) synthetic-N.parquet")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--report", nargs="+", type=Path, help="write --out from the JSON lines of earlier runs' logs")
    parser.add_argument("--log", type=Path, help="append each run's JSON line here (the table is then written from "
                                                  "every line of it, the latest run of each configuration)")
    parser.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)  # child: store engine workers R0 memory
    arguments = parser.parse_args()
    command = "python bench/scale.py " + " ".join(sys.argv[1:])
    if arguments.report:
        found = [json.loads(line) for log in arguments.report for line in log.read_text().splitlines()
                 if line.startswith("{")]
        if arguments.out:
            write_report(arguments.out, report(found, command))
        print(report(found, command))
        return
    if arguments.measure:
        store, engine, workers, threshold, memory = arguments.measure
        print(json.dumps(measure(Path(store), engine, int(workers), memory, float(threshold), arguments.bits)))
        return
    rows = []
    for size in arguments.sizes:
        store = ensure_store(size, arguments.data)
        for threshold in arguments.threshold:
            runs = [("local", 0)] if "local" in arguments.engines else []
            runs += [("dask", workers) for workers in arguments.workers] if "dask" in arguments.engines else []
            for engine, workers in runs:
                child = subprocess.run([sys.executable, __file__, "--bits", str(arguments.bits), "--measure",
                                        str(store), engine, str(workers), str(threshold), arguments.memory_limit],
                                       capture_output=True, text=True)
                if child.returncode != 0:
                    print(f"{size} {engine} {workers}: failed\n{child.stderr[-2000:]}", flush=True)
                    continue
                row = json.loads(child.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(json.dumps(row), flush=True)
                if arguments.log:
                    with arguments.log.open("a") as log:
                        log.write(json.dumps(row) + "\n")
    if arguments.log:
        rows = latest([json.loads(line) for line in arguments.log.read_text().splitlines() if line.strip()])
    print(report(rows, command))
    if arguments.out:
        write_report(arguments.out, report(rows, command))


if __name__ == "__main__":
    main()
