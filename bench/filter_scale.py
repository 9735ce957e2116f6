"""filter with the local engine and with the Dask engine: wall time, peak memory of all processes, the same bytes.

Usage (every timing run holds the shared lock, so no two benchmarks overlap on this 2-core machine):

    flock /tmp/dedup-bench.lock python bench/filter_scale.py --records 1000000 --out bench/RESULTS-filter.md

The corpus is synthetic JSON Lines (built once into the git-ignored ``bench/data/``): records ``{"id", "text"}``
of 60–180 words drawn from a Zipf-like vocabulary of 50,000 made-up words, 4 % of them near-duplicates of an
earlier record (0.5–3 % of their words replaced), in one file and the same records split into 16 files; both are
signed once (``--id-field id``, not timed). Each measurement runs ``dedup filter`` through the API in a fresh
process: ``--engine local``, or ``--engine dask`` on a local cluster of 2 worker processes (one thread each,
``--memory-limit`` each) started and closed inside the measured time, the decisions from ``find`` on that engine
and the inputs rewritten by its tasks. A thread samples the peak resident memory (VmHWM) of that process and of
every process it starts; their sum is an upper bound of the simultaneous peak. The output of each run is hashed
and the hashes compared. Prints JSON lines and writes a markdown table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data"
VOCABULARY = 50_000
SPLIT_FILES = 16


def build_corpus(records: int, folder: Path, seed: int = 7) -> None:
    """``corpus.jsonl`` and ``split/part-NN.jsonl`` (the same records in 16 files), written atomically."""
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "split").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, VOCABULARY)
    words = ["".join(letters[rng.integers(0, 26, n)]) for n in lengths.tolist()]
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 0.9
    cumulative = np.cumsum(weights / weights.sum())

    def draw(count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(cumulative, rng.random(count)), VOCABULARY - 1)

    per_file = -(-records // SPLIT_FILES)
    kept: list[np.ndarray] = []
    with open(staging / "corpus.jsonl", "w", encoding="utf-8") as whole:
        part = None
        for index in range(records):
            if index % per_file == 0:
                if part is not None:
                    part.close()
                part = open(staging / "split" / f"part-{index // per_file:02d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
            if kept and rng.random() < 0.04:  # a near-duplicate of an earlier record
                tokens = kept[int(rng.integers(len(kept)))].copy()
                edits = rng.random(tokens.size) < rng.uniform(0.005, 0.03)
                tokens[edits] = draw(int(edits.sum()))
            else:
                tokens = draw(int(rng.integers(60, 181)))
                if len(kept) < 200_000:
                    kept.append(tokens)
                else:
                    kept[int(rng.integers(len(kept)))] = tokens
            line = json.dumps({"id": f"r{index:08d}", "text": " ".join(words[t] for t in tokens.tolist())}) + "\n"
            whole.write(line)
            assert part is not None
            part.write(line)
        if part is not None:
            part.close()
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


def ensure(records: int, data: Path) -> Path:
    """The corpus of ``records`` records and its two stores (one file, split), built once."""
    folder = data / f"filter-jsonl-{records}"
    if not (folder / "corpus.jsonl").exists():
        build_corpus(records, folder)
    for name, inputs in (("whole", folder / "corpus.jsonl"), ("split", folder / "split")):
        store = folder.with_name(f"{folder.name}-{name}.parquet")
        if not store.exists():
            subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(inputs), "-o", str(store), "--id-field",
                            "id", "-q"], check=True)
    return folder


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def measure(inputs: Path, store: Path, out: Path, engine: str, workers: int, memory_limit: str,
            threshold: float) -> dict:
    """One filter in this process."""
    sys.path.insert(0, str(BENCH))
    from scale import Peaks

    import dedup_cli as dedup
    from dedup_cli.options.engine_choice import EngineOptions

    peaks = Peaks()
    options = EngineOptions() if engine == "local" else EngineOptions("dask", workers=workers,
                                                                      memory_limit=memory_limit)
    started = time.perf_counter()
    report = dedup.filter([str(inputs)], out, store, dedup.FilterOptions(
        find=dedup.FindOptions(threshold=threshold, engine=options)))
    seconds = time.perf_counter() - started
    found = peaks.stop()
    me = os.getpid()
    return {"records": report.records, "inputs": report.inputs, "engine": engine,
            "workers": workers if engine == "dask" else 0, "threshold": threshold, "seconds": seconds,
            "dropped": report.dropped, "groups": report.groups, "peak_mb": sum(found.values()) / 1024,
            "driver_peak_mb": found[me] / 1024,
            "other_peaks_mb": sorted((kib / 1024 for pid, kib in found.items() if pid != me), reverse=True),
            "input_gb": sum(p.stat().st_size for p in ([inputs] if inputs.is_file() else inputs.rglob("*.jsonl")))
            / 1e9, "sha256": _digest(out)}


def table(rows: list[dict]) -> list[str]:
    lines = ["| records | inputs | engine | time s | peak MB (sum) | driver MB | largest other MB | dropped | groups | "
             "output sha256 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        engine = "local" if r["engine"] == "local" else f"dask, {r['workers']} workers"
        other = f"{r['other_peaks_mb'][0]:,.0f}" if r["other_peaks_mb"] else ""
        lines.append(f"| {r['records']:,} | {r['inputs']} file{'s' * (r['inputs'] > 1)}, {r['input_gb']:.2f} GB | "
                     f"{engine} | {r['seconds']:.1f} | {r['peak_mb']:,.0f} | {r['driver_peak_mb']:,.0f} | {other} | "
                     f"{r['dropped']:,} | {r['groups']:,} | `{r['sha256'][:12]}` |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1.5GiB", help="per Dask worker")
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--measure", nargs=6, help=argparse.SUPPRESS)  # child: inputs store out engine workers R0
    arguments = parser.parse_args()
    if arguments.measure:
        inputs, store, out, engine, workers, threshold = arguments.measure
        print(json.dumps(measure(Path(inputs), Path(store), Path(out), engine, int(workers), arguments.memory_limit,
                                 float(threshold))))
        return
    folder = ensure(arguments.records, arguments.data)
    rows = []
    for name, inputs in (("whole", folder / "corpus.jsonl"), ("split", folder / "split")):
        store = folder.with_name(f"{folder.name}-{name}.parquet")
        for engine, workers in (("local", 0), ("dask", arguments.workers)):
            out = folder.with_name(f"{folder.name}-{name}-{engine}.out")
            child = subprocess.run([sys.executable, __file__, "--memory-limit", arguments.memory_limit, "--measure",
                                    str(inputs), str(store), str(out), engine, str(workers),
                                    str(arguments.threshold)], capture_output=True, text=True)
            if child.returncode != 0:
                print(f"{name} {engine}: failed\n{child.stderr[-3000:]}", flush=True)
                continue
            row = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
    same = {name: len({r["sha256"] for r in rows if r["inputs"] == count}) == 1
            for name, count in (("one file", 1), ("split", SPLIT_FILES))}
    command = "python bench/filter_scale.py " + " ".join(sys.argv[1:])
    text = "\n".join([
        "# filter: the local engine and the Dask engine", "",
        f"Command: `{command}` (written by `bench/filter_scale.py`). Synthetic JSON Lines, 4 % near-duplicates, "
        f"signed with `--id-field id`; `dedup filter INPUT -o OUT -s STORE -t {arguments.threshold:g}`, the find "
        "and the rewriting on the engine named. Peak memory is the sum of every process's VmHWM (driver with the "
        f"scheduler, workers, Dask's resource tracker); each Dask worker has one thread and `--memory-limit` "
        f"{arguments.memory_limit}. Time includes starting and closing the local cluster.", "",
        *table(rows), "",
        "Same bytes on both engines: " + ", ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in same.items())
        + ".", ""])
    print(text)
    if arguments.out:
        arguments.out.write_text(text)


if __name__ == "__main__":
    main()
