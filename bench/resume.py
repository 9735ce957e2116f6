"""What a killed ``dedup find --work-dir`` costs: the time to finish a run killed part-way, against a clean run.

Usage (under the shared lock, so no two benchmarks overlap on this 2-core machine):

    flock /tmp/dedup-bench.lock python bench/resume.py --size 10000000 --engine local --out bench/RESULTS-resume.md

For each engine: one clean run of ``dedup find STORE --work-dir W`` (a real process, timed, the work files kept
to measure their size), then for each kill point f: a run killed with SIGKILL f × the clean time after its start
(the process group, so Dask's workers die with it), or with ``--after-candidates`` as soon as every round of
the candidate stage is kept, and the same command again, timed to its end. The output of
every finishing run is compared byte for byte with the clean run's. The store is ``bench/scale.py``'s synthetic
one (built into bench/data/ when missing). Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scale import DATA, _folder_bytes, ensure_store  # noqa: E402


def _command(store: Path, out: Path, work: Path, engine: str, workers: int, memory_limit: str,
             threshold: float) -> list[str]:
    command = [sys.executable, "-m", "dedup_cli", "find", str(store), "--threshold", str(threshold), "-q",
               "--output", "pairs", "-o", str(out), "--work-dir", str(work), "--keep-work"]
    if engine == "dask":
        command += ["--engine", "dask", "--workers", str(workers), "--memory-limit", memory_limit]
    return command


def _rounds_kept(work: Path) -> int:
    return len(list(work.glob("candidates-*.npz"))) if work.is_dir() else 0


def _run(command: list[str], kill_after: float | None = None, work: Path | None = None,
         rounds: int | None = None) -> tuple[float, bool]:
    """Wall seconds of the command, and whether it was killed: at ``kill_after`` seconds, or as soon as ``rounds``
    rounds of the candidate stage are kept in ``work`` (the stage complete)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while child.poll() is None:
        late = kill_after is not None and time.perf_counter() - start >= kill_after
        done = rounds is not None and work is not None and _rounds_kept(work) >= rounds
        if late or done:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            time.sleep(2)  # Dask's worker processes are gone before the next run starts
            return time.perf_counter() - start, True
        time.sleep(0.1)
    assert child.stderr is not None
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}): {child.stderr.read().decode()[-2000:]}")
    return time.perf_counter() - start, False


def _when(kill_at: float | str) -> str:
    return "after the candidate stage" if kill_at == "candidates" else f"{kill_at:.0%} of the clean time"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--engines", nargs="+", default=["local"], choices=["local", "dask"])
    parser.add_argument("--kill-at", type=float, nargs="*", default=[0.5, 0.8], help="fractions of the clean time")
    parser.add_argument("--after-candidates", action="store_true",
                        help="also kill each engine's run as soon as its candidate stage is kept (every round)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="3GiB")
    parser.add_argument("--threshold", type=float, default=0.55)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    store = ensure_store(arguments.size, arguments.data)
    rows = []
    with tempfile.TemporaryDirectory(dir=arguments.data) as scratch:
        for engine in arguments.engines:
            clean_out, work = Path(scratch) / "clean.jsonl", Path(scratch) / "work"
            command = _command(store, clean_out, work, engine, arguments.workers, arguments.memory_limit,
                               arguments.threshold)
            clean, _ = _run(command)
            work_bytes = _folder_bytes(work)
            rounds = _rounds_kept(work)
            shutil.rmtree(work)
            kills: list[float | str] = [*arguments.kill_at, *(["candidates"] if arguments.after_candidates else [])]
            for fraction in kills:
                out = Path(scratch) / f"resumed-{fraction}.jsonl"
                command = _command(store, out, work, engine, arguments.workers, arguments.memory_limit,
                                   arguments.threshold)
                if fraction == "candidates":
                    killed_after, killed = _run(command, work=work, rounds=rounds)
                else:
                    assert isinstance(fraction, float)
                    killed_after, killed = _run(command, kill_after=fraction * clean)
                resumed, _ = _run(command)
                same = out.read_bytes() == clean_out.read_bytes()
                row = dict(engine=engine, documents=arguments.size, clean_seconds=round(clean, 1),
                           work_mb=round(work_bytes / 1e6, 1), kill_at=fraction, killed=killed,
                           killed_after=round(killed_after, 1), resumed_seconds=round(resumed, 1),
                           resumed_share=round(resumed / clean, 3), same_output=same)
                print(json.dumps(row), flush=True)
                rows.append(row)
                shutil.rmtree(work, ignore_errors=True)
                out.unlink()
    if arguments.out:
        lines = ["# A killed find, resumed from its --work-dir", "",
                 f"`python bench/resume.py --size {arguments.size} --engines {' '.join(arguments.engines)}` "
                 f"(R0 {arguments.threshold}, output pairs; Dask: a local cluster of {arguments.workers} workers, "
                 f"{arguments.memory_limit} each). The resumed run is the same command run again after the kill.",
                 "", "| engine | documents | clean run (s) | work files (MB) | killed at | resumed run (s) | "
                 "resumed / clean | same output |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['engine']} | {r['documents']:,} | {r['clean_seconds']} | {r['work_mb']} | "
                  f"{_when(r['kill_at'])} ({r['killed_after']} s){'' if r['killed'] else ', had finished'} | "
                  f"{r['resumed_seconds']} | {r['resumed_share']:.2f} | {'yes' if r['same_output'] else 'NO'} |"
                  for r in rows]
        arguments.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
