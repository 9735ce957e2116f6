"""find -j N on one machine: wall time, speed-up over -j 1, CPU time and the serial share.

Usage (every timing run holds the shared lock, so no two benchmarks overlap):

    flock /tmp/dedup-bench.lock python bench/find_jobs.py --sizes 1000000 --jobs 1 2 --repeat 3

Stores are ``bench/scale.py``'s synthetic ones (``bench/data/synthetic-N.parquet``, built when missing). Each run
is a fresh process calling ``dedup.find`` (the local engine, R0 0.55, b 2 as in ``bench/scale.py``); it reports
its wall time and, from ``resource.getrusage``, the CPU time of the driver (itself) and of its workers (its
children). The serial share is the driver's CPU beyond its start-up ÷ the CPU time of all processes: by Amdahl's
law a share s caps the speed-up at 1/s. The start-up (imports, first calls) is the same find of a one-document
store, run first in the same process and left out. On a machine other work shares, the wall time says little; the
CPU model (the driver's CPU + the workers' ÷ N, the wall time on N idle cores if the workers' work divides evenly)
says what the cores would give. Prints JSON lines and a markdown table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure(store: Path, tiny: Path, jobs: int, threshold: float, bits: int) -> dict:
    """One find in this process, after the same find of a one-document store (the start-up: imports, first
    calls), which is left out of the driver's CPU time."""
    import dedup_cli as dedup
    from dedup_cli.cli.pandas_hidden import pandas_hidden

    options = dedup.FindOptions(threshold=threshold, bits=bits, jobs=jobs)
    with pandas_hidden(True):  # as the command line runs it (pyarrow would import pandas, 0.5 s, otherwise)
        dedup.find(tiny, options)
        startup = _cpu(resource.RUSAGE_SELF)
        started = time.perf_counter()
        result = dedup.find(store, options)
        seconds = time.perf_counter() - started
    driver = _cpu(resource.RUSAGE_SELF) - startup
    workers = _cpu(resource.RUSAGE_CHILDREN)
    return {"documents": result.document_count, "jobs": jobs, "threshold": threshold, "bits": bits,
            "seconds": seconds, "driver_cpu": driver, "workers_cpu": workers, "startup_cpu": startup,
            "serial_share": driver / max(driver + workers, 1e-9),
            # The wall time on an idle machine of N cores, if the workers' CPU divides evenly among them.
            "cpu_model_seconds": driver + workers / jobs, "candidates": result.candidates,
            "pairs": result.pair_count, "groups": result.group_count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000_000])
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each -j, interleaved")
    parser.add_argument("--threshold", type=float, default=0.55)
    parser.add_argument("--bits", type=int, default=2)
    parser.add_argument("--data", type=Path, default=BENCH / "data")
    parser.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)  # child: store tiny jobs R0 bits
    args = parser.parse_args()
    if args.measure:
        store, tiny, jobs, threshold, bits = args.measure
        print(json.dumps(measure(Path(store), Path(tiny), int(jobs), float(threshold), int(bits))))
        return
    sys.path.insert(0, str(BENCH))
    from scale import ensure_store

    rows = []
    tiny = ensure_store(1, args.data)
    for size in args.sizes:
        store = ensure_store(size, args.data)
        for _ in range(args.repeat):
            for jobs in args.jobs:
                done = subprocess.run([sys.executable, __file__, "--measure", str(store), str(tiny), str(jobs),
                                       str(args.threshold), str(args.bits)], check=True, capture_output=True,
                                      text=True)
                row = json.loads(done.stdout.strip().splitlines()[-1])
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("| documents | -j | wall s (best) | speed-up, wall | driver CPU s | workers CPU s | serial share | "
          "CPU model s | speed-up, CPU model |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        best = {jobs: min((r for r in rows if r["documents"] == size and r["jobs"] == jobs),
                          key=lambda r: r["seconds"]) for jobs in args.jobs}
        modelled = {jobs: min((r for r in rows if r["documents"] == size and r["jobs"] == jobs),
                              key=lambda r: r["cpu_model_seconds"]) for jobs in args.jobs}
        first = args.jobs[0]
        for jobs, row in best.items():
            model = modelled[jobs]
            print(f"| {size:,} | {jobs} | {row['seconds']:.2f} | {best[first]['seconds'] / row['seconds']:.2f}× "
                  f"| {model['driver_cpu']:.2f} | {model['workers_cpu']:.2f} | {model['serial_share']:.2f} "
                  f"| {model['cpu_model_seconds']:.2f} "
                  f"| {modelled[first]['cpu_model_seconds'] / model['cpu_model_seconds']:.2f}× |")


if __name__ == "__main__":
    main()
