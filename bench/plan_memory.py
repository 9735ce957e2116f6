"""find -j N's peak memory, summed over the driver and its workers, against ``dedup plan --jobs N``.

Usage (the runs hold the shared lock, so no benchmark overlaps them):

    flock /tmp/dedup-bench.lock python bench/plan_memory.py --sizes 200000 1000000 --jobs 1 2

Stores are ``bench/find_scale.py``'s synthetic ones (k = 256, 8 stored bits, 1 % of documents in planted families),
built under ``--data`` when missing. Each run is a fresh process calling ``dedup.find`` (R0 0.5, b 2, the default
``--band-memory``) while this process samples it and every process it forked, every few milliseconds, and sums
their memory so that a page counts once however many of them map it:

- anonymous memory (numpy arrays, Python's heap) and shared memory by their proportional share (``Pss_Anon`` and
  ``Pss_Shmem`` of ``/proc/PID/smaps_rollup``): a page that k processes map counts 1/k in each. The driver's arrays
  that a forked worker inherits copy-on-write and the band keys the workers share in anonymous shared memory are
  so counted once, where a sum of resident set sizes would count them in every process;
- file pages (Python, numpy and pyarrow's libraries) by the driver's resident size of them (``RssFile`` of
  ``/proc/PID/status``): the workers are forked from it and map the same files. Their proportional share would
  divide them with unrelated processes that load the same libraries.

With one process the sum is its resident set size, what the driver's own peak (``VmHWM``, reported beside it)
measures. The peak of the samples is a lower bound of the true one (a sample can fall between two allocations).
"processes seen" is the most processes of the tree sampled at once, short-lived helpers included (a worker
looking up the C library runs ``ldconfig``). Prints JSON lines and a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from dedup_cli.processes import descendants

BENCH = Path(__file__).resolve().parent

# The child: one find, then its own peak resident memory (VmHWM: ru_maxrss would carry the parent's over).
_FIND = """
import sys
import dedup_cli as dedup
from dedup_cli.cli.pandas_hidden import pandas_hidden
with pandas_hidden(True):  # as the command line runs it
    result = dedup.find(sys.argv[1], dedup.FindOptions(threshold=float(sys.argv[3]), bits=2, jobs=int(sys.argv[2])))
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(result.candidates, peak)
"""


def _fields(path: str, names: tuple[str, ...]) -> int:
    """The sum of some ``Name:  N kB`` fields of a /proc file, in bytes; 0 once the process has gone."""
    total = 0
    try:
        with open(path) as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name in names:
                    total += int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def tree_memory(pid: int) -> tuple[int, int]:
    """(bytes, processes) of ``pid`` and the processes below it: their anonymous and shared memory by
    proportional share, plus the file pages the first of them (the driver) holds."""
    processes = [pid, *descendants(pid)]
    anonymous = sum(_fields(f"/proc/{each}/smaps_rollup", ("Pss_Anon", "Pss_Shmem")) for each in processes)
    return anonymous + _fields(f"/proc/{pid}/status", ("RssFile",)), len(processes)


def sampled_find(store: Path, jobs: int, threshold: float, interval: float = 0.002) -> dict:
    """One find in a fresh process, sampled: the peak of its processes' memory summed (:func:`tree_memory`), and
    the most processes seen at once."""
    environment = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    child = subprocess.Popen([sys.executable, "-c", _FIND, str(store), str(jobs), str(threshold)],
                             stdout=subprocess.PIPE, text=True, env=environment)
    peak_sum, peak_processes, samples = 0, 0, 0
    while child.poll() is None:
        total, processes = tree_memory(child.pid)
        samples += 1
        peak_sum = max(peak_sum, total)
        peak_processes = max(peak_processes, processes)
        time.sleep(interval)
    output, _ = child.communicate()
    if child.returncode:
        raise SystemExit(f"find -j {jobs} on {store} failed with exit code {child.returncode}")
    candidates, driver_peak = map(int, output.split())
    return {"peak_sum": peak_sum, "driver_vmhwm": driver_peak, "processes": peak_processes,
            "samples": samples, "candidates": candidates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[200_000, 1_000_000])
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--data", type=Path, default=BENCH / "data")
    arguments = parser.parse_args()
    sys.path.insert(0, str(BENCH.parent))
    sys.path.insert(0, str(BENCH))
    from find_scale import build_store

    import dedup_cli as dedup

    rows = []
    for size in arguments.sizes:
        store = arguments.data / f"synthetic-{size}.parquet"
        if not store.exists():
            arguments.data.mkdir(parents=True, exist_ok=True)
            build_store(size, store)
        for jobs in arguments.jobs:
            measured = sampled_find(store, jobs, arguments.threshold)
            plan = dedup.plan(dedup.PlanOptions(threshold=arguments.threshold, bits=2, docs=size, jobs=jobs))
            row = {"documents": size, "jobs": jobs, **measured, "plan_peak": plan.memory_peak_bytes,
                   "plan_phase": plan.memory_peak_phase, "plan_processes": plan.memory_processes,
                   "ratio": plan.memory_peak_bytes / measured["peak_sum"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| documents | -j | processes seen | peak sum MB | driver VmHWM MB | plan MB | plan phase | "
          "plan ÷ measured |\n|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['documents']:,} | {row['jobs']} | {row['processes']} | {row['peak_sum'] / 1e6:.0f} | "
              f"{row['driver_vmhwm'] / 1e6:.0f} | {row['plan_peak'] / 1e6:.0f} | {row['plan_phase']} | "
              f"{row['ratio']:.2f} |")


if __name__ == "__main__":
    main()
