"""What ``find --recall`` buys: recall, precision and find time at R0 0.5 and 0.8 for --recall 0.99 and 0.999.

Usage (``make_corpus.py`` is the long-document benchmark generator's, kept outside the repository):

    python make_corpus.py --docs 100000 --seed 1 --out DIR --jsonl --no-files     # the corpus and its truth
    python bench/recall.py --corpus DIR [--repeat 3] [--baseline CHECKOUT] [--out bench/RESULTS-recall.md]

The corpus is a long-document benchmark corpus (``make_corpus.py`` of the benchmark corpus generator:
``DIR/corpus.jsonl`` with ``id`` and ``text``, and ``DIR/truth.csv``, the exact 5-word-shingle Jaccard of every
pair with J ≥ 0.1). It is signed once (``dedup sign DIR/corpus.jsonl --id-field id -k 128``, 8 stored bits, into
``DIR/recall-store.parquet`` unless ``--store`` names one), then for each R0 and each --recall
``dedup find STORE -t R0 -b 2 --recall R --output pairs --format tsv -j 1`` runs ``--repeat`` times (the fastest
wall time is shown). A pair is true when its exact J ≥ R0 in the truth file (a pair the file does not list has
J < 0.1); recall = reported true pairs ÷ true pairs, precision = reported true pairs ÷ reported pairs, with find's
default ``--verify borderline``. ``--baseline`` names another checkout whose default find (no ``--recall``) runs on
the same store: its output must be byte for byte the same as this checkout's default.

Nothing here asserts a time; run it alone on a quiet machine (about a minute at 10^4 documents).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
THRESHOLDS = (0.5, 0.8)
RECALLS = (0.99, 0.999)
SUMMARY = re.compile(r"(\d+)×(\d+) bands on .*?, ([\d,]+) candidates?,.*?([\d,]+) pairs? verified exactly")


def dedup(checkout: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run ``dedup`` of ``checkout`` as the user does, a fresh process."""
    environment = dict(os.environ, PYTHONPATH=str(checkout))
    return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], env=environment, capture_output=True,
                          text=True, check=True)


def read_truth(path: Path) -> dict[tuple[str, str], float]:
    with path.open(newline="") as handle:
        return {(row["doc_a"], row["doc_b"]): float(row["jaccard"]) for row in csv.DictReader(handle)}


def reported_pairs(path: Path) -> set[tuple[str, str]]:
    with path.open(newline="") as handle:
        return {(min(row["id_a"], row["id_b"]), max(row["id_a"], row["id_b"]))
                for row in csv.DictReader(handle, delimiter="\t")}


def find_run(checkout: Path, store: Path, out: Path, threshold: float, recall: float | None, repeat: int
             ) -> tuple[float, str]:
    """The fastest wall time of ``repeat`` finds, and what the last wrote on stderr (its summary, warnings)."""
    arguments = ["find", str(store), "-t", f"{threshold:g}", "-b", "2", "--output", "pairs", "--format", "tsv",
                 "-j", "1", "-o", str(out)]
    if recall is not None:
        arguments += ["--recall", f"{recall:g}"]
    best, summary = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = dedup(checkout, *arguments)
        best = min(best, time.perf_counter() - start)
        summary = done.stderr
    return best, summary


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="make_corpus.py's --out DIR (with --jsonl)")
    parser.add_argument("--store", type=Path, default=None, help="the signed store (default: DIR/recall-store.parquet)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, for the byte-for-byte check")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS-recall.md")
    args = parser.parse_args()
    store = args.store or args.corpus / "recall-store.parquet"
    if not store.exists():
        dedup(REPO, "sign", str(args.corpus / "corpus.jsonl"), "--id-field", "id", "-k", "128", "-o", str(store),
              "-q")
    truth = read_truth(args.corpus / "truth.csv")
    documents = sum(1 for _ in (args.corpus / "corpus.jsonl").open())
    work = store.parent / "recall-bench-out"
    work.mkdir(exist_ok=True)
    rows, identical, warnings = [], [], []
    for threshold in THRESHOLDS:
        true = {pair for pair, value in truth.items() if value >= threshold}
        times = {}
        for recall in RECALLS:
            out = work / f"pairs-{threshold:g}-{recall:g}.tsv"
            seconds, summary = find_run(REPO, store, out, threshold, None if recall == 0.99 else recall, args.repeat)
            times[recall] = seconds
            reported = reported_pairs(out)
            hits = len(reported & true)
            below = sum(1 for pair in reported if truth.get(pair, 0.0) < threshold)
            warnings += [f"R0 {threshold:g}, --recall {recall:g}: {line.removeprefix('warning: ')}"
                         for line in summary.splitlines() if line.startswith("warning:")]
            match = SUMMARY.search(summary)
            bands, rows_, candidates, checks = match.groups() if match else ("?", "?", "?", "?")
            rows.append(f"| {threshold:g} | {recall:g} | {bands}×{rows_} | {candidates} | {checks} | {len(true):,} "
                        f"| {len(reported):,} | {below} | {hits / len(true) if true else float('nan'):.4f} "
                        f"| {hits / len(reported) if reported else float('nan'):.4f} | {seconds:.2f} "
                        f"| {seconds / times[RECALLS[0]]:.2f} |")
        if args.baseline is not None:
            default = work / f"pairs-{threshold:g}-0.99.tsv"
            baseline = work / f"pairs-{threshold:g}-baseline.tsv"
            find_run(args.baseline, store, baseline, threshold, None, 1)
            identical.append(f"R0 {threshold:g}: {'identical' if digest(default) == digest(baseline) else 'DIFFERENT'}")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [
        "# What `find --recall` buys",
        "",
        f"Written by `python bench/recall.py --corpus DIR --repeat {args.repeat}` on a corpus of {documents:,} "
        f"documents of the long-document benchmark generator (`make_corpus.py --docs {documents} --seed 1 --out DIR "
        "--jsonl --no-files`; its `truth.csv` gives the exact 5-word-shingle Jaccard of every pair with J ≥ 0.1), "
        f"signed with `-k 128` (8 stored bits); `find -t R0 -b 2 --recall R --output pairs -j 1` with the default "
        f"`--verify borderline`. Commit {commit}, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}; the seconds are the fastest of {args.repeat} wall times, start-up "
        "included, on a machine shared with other work.",
        "",
        "| R0 | --recall | banding | candidates | exact checks | true pairs (J ≥ R0) | reported | reported with J < R0 "
        "| recall | precision | find seconds | time ÷ 0.99 |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    if warnings:
        lines += ["", "What find warned:", "", *(f"- {line}" for line in warnings)]
    lines += [
        "",
        f"This run used {documents:,} documents. At 10^5 (about 7 minutes to generate, most of it the exact truth):",
        "",
        "    python make_corpus.py --docs 100000 --seed 1 --out DIR --jsonl --no-files",
        f"    python bench/recall.py --corpus DIR --repeat {args.repeat} --baseline MAIN_CHECKOUT",
    ]
    if identical:
        baseline = subprocess.run(["git", "-C", str(args.baseline), "rev-parse", "--short=12", "HEAD"],
                                  capture_output=True, text=True).stdout.strip() or "another checkout"
        lines += ["", f"Default output (no `--recall`, `--output pairs --format tsv`) against commit {baseline}'s: "
                  + "; ".join(identical) + "."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
