"""What ``dedup review`` costs beside the ``find`` it runs, and how large its page is, at the defaults.

Usage: flock /tmp/dedup-bench.lock python bench/review_bench.py [--docs 100000 | --long] [--repeat 3]
           [--out bench/RESULTS-review.md]
(under the lock every benchmark of this repository holds, so that measurements on a shared machine take turns)

Builds (once, deterministic) a corpus of ``--docs`` JSON Lines records in ``bench/data/review-N/``: texts of 80-400
words drawn from a Zipf law over 20,000 words, a tenth of them in families of 2-12 near-duplicates (each member
its family's base with 1-15 % of its words replaced, and a few exact copies), so that find reports thousands of
groups; signs it; then times, in turns so that a busy machine slows both alike, ``find`` at the defaults and
``review`` at the defaults (find, then the page: the shown groups' texts read from the JSON Lines file, compared
and written). Reports the medians, the page's size and what it shows, and writes the table to ``--out``.

``--long`` measures the largest page the defaults allow instead: 400 families of 12 texts of 3,000 words (a
uniform draw of 20,000 words, each member its family's base with 2 % of its words replaced), so that every shown
group has 10 members with text and each member's differences fill its 5,000 characters.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import dedup_cli as dedup

HERE = Path(__file__).resolve().parent
VOCABULARY = 20_000


def make_corpus(docs: int, path: Path, seed: int = 1) -> None:
    """``docs`` records, a tenth in families of near-duplicates (see the module docstring)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{index}" for index in range(VOCABULARY)])
    weights = 1.0 / np.arange(1, VOCABULARY + 1)
    weights /= weights.sum()
    lengths = rng.integers(80, 400, docs)
    texts: list[str] = []
    while len(texts) < docs:
        size = int(rng.integers(2, 13)) if rng.random() < 0.02 else 1
        base = rng.choice(VOCABULARY, size=int(lengths[len(texts)]), p=weights)
        for member in range(min(size, docs - len(texts))):
            drawn = base.copy()
            if member and rng.random() > 0.1:  # a few exact copies, the rest edited
                changed = rng.random(drawn.size) < rng.uniform(0.01, 0.15)
                drawn[changed] = rng.choice(VOCABULARY, size=int(changed.sum()), p=weights)
            texts.append(" ".join(words[drawn]))
    order = rng.permutation(docs)  # families spread over the file
    scratch = path.with_suffix(".tmp")
    with open(scratch, "w", encoding="utf-8") as out:
        for number, index in enumerate(order.tolist()):
            out.write(json.dumps({"id": f"doc-{number:07d}", "text": texts[index]}) + "\n")
    os.replace(scratch, path)


def make_long_corpus(path: Path, seed: int = 2) -> int:
    """400 families of 12 long near-duplicates (see ``--long``); returns the number of records."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{index}" for index in range(VOCABULARY)])
    scratch = path.with_suffix(".tmp")
    with open(scratch, "w", encoding="utf-8") as out:
        for family in range(400):
            base = rng.integers(0, VOCABULARY, 3000)
            for member in range(12):
                drawn = base.copy()
                changed = rng.random(drawn.size) < 0.02
                drawn[changed] = rng.integers(0, VOCABULARY, int(changed.sum()))
                out.write(json.dumps({"id": f"f{family:03d}-{member:02d}", "text": " ".join(words[drawn])}) + "\n")
    os.replace(scratch, path)
    return 400 * 12


def timed(call) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--long", action="store_true", help="the largest page the defaults allow (see above)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    arguments = parser.parse_args()
    folder = HERE / "data" / ("review-long" if arguments.long else f"review-{arguments.docs}")
    folder.mkdir(parents=True, exist_ok=True)
    corpus, store, page = folder / "corpus.jsonl", folder / "sigs.parquet", folder / "review.html"
    if arguments.long:
        arguments.docs = 400 * 12
    if not corpus.exists():
        seconds, _ = timed(lambda: make_long_corpus(corpus) if arguments.long else make_corpus(arguments.docs, corpus))
        print(f"wrote {corpus} ({corpus.stat().st_size / 1e6:.0f} MB) in {seconds:.0f} s", file=sys.stderr)
    if not store.exists():
        reading = dedup.InputOptions(id_field="id", text_field="text")
        seconds, _ = timed(lambda: dedup.sign([str(corpus)], store, dedup.SignOptions(input=reading)))
        print(f"signed into {store} in {seconds:.0f} s", file=sys.stderr)
    finds, reviews = [], []
    report = None
    for _ in range(arguments.repeat + 1):  # the first of each warms the caches and is not counted
        seconds, _ = timed(lambda: dedup.find(store, dedup.FindOptions()))
        finds.append(seconds)
        seconds, report = timed(lambda: dedup.review(store, page, dedup.ReviewOptions()))
        reviews.append(seconds)
    assert isinstance(report, dedup.ReviewReport)
    find_seconds, review_seconds = statistics.median(finds[1:]), statistics.median(reviews[1:])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    rows = [
        f"| {arguments.docs:,} | {corpus.stat().st_size / 1e6:.0f} MB | {report.groups:,} | {report.shown} "
        f"({report.largest} largest, {report.shown - report.largest} sampled) | {report.members:,} | "
        f"{report.page_bytes / 1e6:.1f} MB | {find_seconds:.2f} s | {review_seconds:.2f} s | "
        f"{review_seconds / find_seconds:.2f}× |",
    ]
    table = "\n".join([
        f"`review` at the defaults beside `find` at the defaults (`python bench/review_bench.py "
        f"{'--long' if arguments.long else f'--docs {arguments.docs}'}`; medians of {arguments.repeat} runs after one "
        "to warm up, find and review in turns), "
        f"commit {commit}, {os.cpu_count()} cores ({platform.processor() or platform.machine()}), a machine shared "
        "with other work:",
        "",
        "| documents | JSON Lines | groups | shown | members with text | page | find | review (find and page) | "
        "review / find |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    print(table)
    if arguments.out is not None:
        previous = arguments.out.read_text("utf-8") if arguments.out.exists() else "# review's cost\n"
        arguments.out.write_text(previous.rstrip("\n") + "\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
