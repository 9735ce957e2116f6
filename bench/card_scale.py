"""The card's command at scale, measured: ``dedup sign CORPUS`` and ``dedup find --threshold 0.5 --bits 2`` with the
default store, on corpora of short synthetic records with planted near-duplicates, on the local engine (``-j 2``)
and on the Dask engine with workers on separate loopback hosts, beside what ``dedup plan`` promised.

    flock /tmp/dedup-bench.lock python bench/card_scale.py --sizes 1000000 10000000 100000000 --find-limit 3000

For each size N the corpus (JSON Lines parts of 12–24 made-up words a record, from a Zipf law over 200,000 words; 1
% of the records near copies of another record of their part: an exact copy, or one or two words replaced or
inserted) is built once into the git-ignored ``bench/data/card-N/`` with the exact Jaccard of every pair inside a
family of copies (``truth.tsv``). Each run records the wall time, the CPU of every process (``wait4`` of the
command, and ``/proc`` of a cluster's scheduler and workers), the peak resident memory of each process (VmHWM,
sampled), the bytes they read (all, and those the disk delivered: a store larger than the page cache read once a
round shows here), the store's bytes on disk, the candidates, the reported pairs and their precision and recall
against the planted pairs at R0 (a reported pair outside the families counts as wrong), and the plan's figures for
the same N. Writes the tables into ``bench/RESULTS-scale.md`` between its card markers (the rest of the file is
``bench/scale.py``'s) and each run's JSON line into ``bench/card-runs.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from cluster import loopback_cluster  # noqa: E402 - beside this script
from scale import Peaks, _folder_bytes  # noqa: E402
from scaling import Stopped, run_command  # noqa: E402

DATA = BENCH / "data"
PARTS = 16
VOCABULARY = 200_000
START, END = "<!-- card: start -->", "<!-- card: end -->"
NOTES = "<!-- card: notes -->"  # what follows it, up to the end marker, is written by hand and kept


def _words(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(letters[rng.integers(0, 26, n)]) for n in rng.integers(3, 9, VOCABULARY).tolist()]


def shingle_set(tokens: list[int]) -> set[tuple[int, ...]]:
    return {tuple(tokens[i:i + 5]) for i in range(max(len(tokens) - 4, 1))}


def _write_part(task: tuple[Path, int, int, int]) -> list[tuple[str, str, float]]:
    """Records ``start`` … ``start + count − 1`` into ``path``; returns the exact Jaccard of the pairs inside each
    family of copies."""
    path, start, count, seed = task
    rng = np.random.default_rng([seed, start])
    words = _words(seed)
    cumulative = np.cumsum(1.0 / np.arange(1, VOCABULARY + 1) ** 0.8)
    cumulative /= cumulative[-1]
    lengths = rng.integers(12, 25, count)
    tokens = np.minimum(np.searchsorted(cumulative, rng.random(int(lengths.sum()))), VOCABULARY - 1)
    ends = np.cumsum(lengths)
    copies = np.flatnonzero(rng.random(count) < 0.01)
    copies = copies[copies > 0]
    sources = (rng.random(copies.size) * copies).astype(np.int64)  # an earlier record of the part
    records = [tokens[end - length:end].tolist() for end, length in zip(ends.tolist(), lengths.tolist(),
                                                                         strict=True)]
    family = np.arange(count)
    for copy, source in zip(copies.tolist(), sources.tolist(), strict=True):
        edited = list(records[source])
        for _ in range(int(rng.integers(0, 3))):  # 0: an exact copy
            place = int(rng.integers(len(edited)))
            word = int(rng.integers(VOCABULARY))
            if rng.random() < 0.5:
                edited[place] = word
            else:
                edited.insert(place, word)
        records[copy] = edited
        family[copy] = family[source]
    with open(path, "w", encoding="ascii") as handle:
        handle.writelines(f'{{"id":"r{start + index:010d}","text":"{" ".join([words[t] for t in record])}"}}\n'
                          for index, record in enumerate(records))
    truth = []
    members: dict[int, list[int]] = {}
    for copy in copies.tolist():
        members.setdefault(int(family[copy]), [int(family[copy])]).append(copy)
    for group in members.values():
        group = sorted(set(group))
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                sa, sb = shingle_set(records[a]), shingle_set(records[b])
                truth.append((f"r{start + a:010d}", f"r{start + b:010d}", len(sa & sb) / len(sa | sb)))
    return truth


def corpus(size: int, data: Path, seed: int = 11) -> Path:
    """``data/card-N``: the corpus in ``docs/``, and ``truth.tsv``; built once."""
    folder = data / f"card-{size}"
    if (folder / "truth.tsv").exists():
        return folder
    from multiprocessing import Pool

    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "docs").mkdir(parents=True)
    per_part = -(-size // PARTS)
    tasks = [(staging / "docs" / f"part-{part:02d}.jsonl", start, min(per_part, size - start), seed)
             for part, start in enumerate(range(0, size, per_part))]
    with Pool(min(len(tasks), os.cpu_count() or 1)) as pool:
        found = pool.map(_write_part, tasks)
    with open(staging / "truth.tsv", "w") as handle:
        handle.writelines(f"{a}\t{b}\t{j:.6f}\n" for part in found for a, b, j in part)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)
    return folder


def accuracy(pairs_file: Path, truth_file: Path, threshold: float) -> dict[str, float]:
    truth = {}
    for line in truth_file.read_text().splitlines():
        a, b, j = line.split("\t")
        truth[(a, b)] = float(j)
    true = {pair for pair, j in truth.items() if j >= threshold}
    reported = set()
    for line in pairs_file.read_text().splitlines()[1:]:
        a, b = line.split("\t")[:2]
        reported.add((min(a, b), max(a, b)))
    right = len(reported & true)
    return {"reported": len(reported), "true": len(true), "precision": right / len(reported) if reported else 1.0,
            "recall": right / len(true) if true else 1.0}


# The fewest word 5-shingles of a record (12 words): find bands for the store's shortest documents, and so does the
# plan told of them.
SHORTEST_SHINGLES = 12 - 4


def planned(size: int, threshold: float) -> dict:
    found = subprocess.run([sys.executable, "-m", "dedup_cli", "plan", "-t", str(threshold), "-b", "2", "--docs",
                            str(size), "-j", "2", "--shingles", str(SHORTEST_SHINGLES), "--format", "json"],
                           capture_output=True, text=True, check=True)
    plan = json.loads(found.stdout)
    return {"plan_banding": f"{plan['bands']}x{plan['rows']}", "plan_candidates": plan["expected_candidates"],
            "plan_memory_gb": (plan["memory_peak_bytes"] or 0) / 1e9, "plan_warnings": plan["warnings"]}


def _candidates(stderr: str) -> int | None:
    found = re.search(r"([\d,]+) candidates?,", stderr)
    return int(found.group(1).replace(",", "")) if found else None


def run_case(size: int, engine: str, folder: Path, scratch: Path, threshold: float,
             find_limit: float | None = None) -> dict:
    """sign, then find, of one corpus on one engine, each measured; a find past ``find_limit`` seconds is stopped
    and recorded as such (its time, CPU, memory and reads so far)."""
    store = scratch / f"store-{engine}"
    shutil.rmtree(store, ignore_errors=True)
    pairs = scratch / f"pairs-{engine}.tsv"
    row: dict = {"documents": size, "engine": engine, "threshold": threshold}
    for step in ("sign", "find"):
        arguments = (["sign", str(folder / "docs"), "--id-field", "id", "-o", str(store), "-q"] if step == "sign"
                     else ["find", str(store), "--threshold", str(threshold), "--bits", "2", "--output", "pairs",
                           "--format", "tsv", "-o", str(pairs)])
        peaks = Peaks()
        limit = find_limit if step == "find" else None
        stopped = None
        if engine == "local":
            try:
                run = run_command([*arguments, "-j", "2"], scratch, limit=limit)
            except Stopped as stop:
                stopped = stop
            cluster_cpu = 0.0
        else:
            with loopback_cluster(2, scratch, {}) as cluster:
                before = cluster.cpu()
                try:
                    run = run_command([*arguments, "--engine", "dask", "--scheduler", cluster.address], scratch,
                                      limit=limit)
                except Stopped as stop:
                    stopped = stop
                cluster_cpu = cluster.cpu() - before
        found = peaks.stop()
        me = os.getpid()
        others = sorted((kib / 1024 for pid, kib in found.items() if pid != me), reverse=True)
        row[f"{step}_seconds"] = run.wall if stopped is None else stopped.wall
        row[f"{step}_cpu_seconds"] = (run.total_cpu if stopped is None else stopped.cpu) + cluster_cpu
        row[f"{step}_peak_mb"] = others[0] if others else 0.0
        row[f"{step}_peaks_mb"] = [round(peak) for peak in others[:6]]
        read, from_disk = peaks.bytes_read()
        row[f"{step}_read_gb"], row[f"{step}_disk_read_gb"] = read / 1e9, from_disk / 1e9
        if stopped is not None:
            row["find_stopped"] = True
            row["candidates"] = None
            break
        if step == "find":
            row["candidates"] = _candidates((scratch / "stderr.txt").read_text(errors="replace"))
    row["store_gb"] = _folder_bytes(store) / 1e9
    row["corpus_gb"] = _folder_bytes(folder / "docs") / 1e9
    if not row.get("find_stopped"):
        row.update(accuracy(pairs, folder / "truth.tsv", threshold))
    row.update(planned(size, threshold))
    shutil.rmtree(store, ignore_errors=True)
    return row


def table(rows: list[dict]) -> list[str]:
    lines = ["| documents | engine | sign s (CPU s) | sign peak MB | store GB | find s (CPU s) | find peak MB "
             "(largest processes) | find reads GB (from disk) | candidates (plan) | find memory GB, plan | pairs | "
             "precision | recall |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        stopped = r.get("find_stopped", False)
        find = f"{r['find_seconds']:.1f} ({r['find_cpu_seconds']:.1f})"
        reads = (f"{r['find_read_gb']:,.0f} ({r['find_disk_read_gb']:,.0f})" if "find_read_gb" in r else "")
        lines.append(
            f"| {r['documents']:,} | {r['engine']} | {r['sign_seconds']:.1f} ({r['sign_cpu_seconds']:.1f}) | "
            f"{r['sign_peak_mb']:,.0f} | {r['store_gb']:.2f} | {'stopped after ' + find if stopped else find} "
            f"| {r['find_peak_mb']:,.0f} ({', '.join(f'{p:,}' for p in r['find_peaks_mb'])}) | {reads} | "
            f"{r['candidates'] or 0:,} ({r['plan_candidates']:,.0f} chance) | {r['plan_memory_gb']:.2f} | "
            + (" | | |" if stopped else f"{r['reported']:,} | {r['precision']:.4f} | {r['recall']:.4f} |"))
    return lines


def growth(rows: list[dict]) -> list[str]:
    """How each cost grows with N: each size's over the size below it, divided by the growth of N, per engine."""
    lines = ["| engine | from → to | sign s ÷ growth of N | find s ÷ growth | find CPU ÷ growth | find peak ÷ "
             "| store ÷ growth |", "|---|---|---|---|---|---|---|"]
    for engine in sorted({r["engine"] for r in rows}):
        mine = sorted((r for r in rows if r["engine"] == engine and not r.get("find_stopped")),
                      key=lambda r: r["documents"])
        for low, high in zip(mine, mine[1:], strict=False):
            scale = high["documents"] / low["documents"]
            lines.append(f"| {engine} | {low['documents']:,} → {high['documents']:,} | "
                         f"{high['sign_seconds'] / low['sign_seconds'] / scale:.2f} | "
                         f"{high['find_seconds'] / low['find_seconds'] / scale:.2f} | "
                         f"{high['find_cpu_seconds'] / low['find_cpu_seconds'] / scale:.2f} | "
                         f"{high['find_peak_mb'] / max(low['find_peak_mb'], 1):.1f} | "
                         f"{high['store_gb'] / low['store_gb'] / scale:.2f} |")
    return lines


def write(rows: list[dict], out: Path, command: str) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    processor = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor())
    memory = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal")) / 1024 ** 2
    section = [
        START, "## The card's command with the default store: sign, then find --threshold 0.5 --bits 2", "",
        f"Command: `{command}` at commit {commit}, {time.strftime('%Y-%m-%d')}, on {os.cpu_count()} cores "
        f"({processor}), {memory:.0f} GiB of memory. Written by `bench/card_scale.py`; its docstring says what "
        "the corpus is and what each column measures. Local: `-j 2`; dask: a scheduler on 127.0.0.1 and two "
        "one-thread workers on 127.0.0.2 and .3, CPU and peak memory of every process counted.", "",
        *table(rows), "",
        "How each cost grows (1.00 is linear in N):", "", *growth(rows), ""]
    old = out.read_text() if out.exists() else ""
    notes = ""
    if START in old:
        inside = old[old.index(START):old.index(END)]
        notes = inside[inside.index(NOTES):].rstrip("\n") + "\n" if NOTES in inside else ""
        old = old[:old.index(START)] + old[old.index(END) + len(END):].lstrip("\n")
    section += [notes.rstrip("\n"), "", END] if notes else [END]
    out.write_text("\n".join(section) + "\n\n" + old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000_000, 10_000_000])
    parser.add_argument("--engines", nargs="+", default=["local", "dask"], choices=["local", "dask"])
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--scratch", type=Path, default=DATA / "card-scratch")
    parser.add_argument("--log", type=Path, default=BENCH / "card-runs.jsonl")
    parser.add_argument("--out", type=Path, default=BENCH / "RESULTS-scale.md")
    parser.add_argument("--find-limit", type=float, default=None, metavar="SECONDS",
                        help="stop a find that runs longer, and record it as stopped")
    parser.add_argument("--report", action="store_true",
                        help="only write --out from the latest run of each size and engine in --log, with the plan's "
                             "figures of this dedup")
    args = parser.parse_args()
    if args.report:
        rows = latest(args.log)
        for row in rows:
            row.update(planned(row["documents"], row["threshold"]))
        write(rows, args.out, "python bench/card_scale.py (the latest run of each size and engine in "
              f"{args.log.relative_to(REPO) if args.log.is_relative_to(REPO) else args.log})")
        return
    args.scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes:
        folder = corpus(size, args.data)
        for engine in args.engines:
            row = run_case(size, engine, folder, args.scratch, args.threshold, args.find_limit)
            print(json.dumps(row), flush=True)
            with open(args.log, "a") as log:
                log.write(json.dumps(row) + "\n")
            rows.append(row)
    write(latest(args.log), args.out, "python bench/card_scale.py --sizes " + " ".join(map(str, args.sizes)))


def latest(log: Path) -> list[dict]:
    """The latest row of each (size, engine) in the log, by size then engine."""
    rows: dict[tuple[int, str], dict] = {}
    for line in log.read_text().splitlines():
        row = json.loads(line)
        rows[(row["documents"], row["engine"])] = row
    return [rows[key] for key in sorted(rows)]


if __name__ == "__main__":
    main()
