"""What page checksums cost: sign and find on one store written and read with them (as dedup does) and without.

Usage: python bench/checksum_cost.py [--docs 300000] [--repeats 2] [--find-repeats 3] [--out DIR]

A JSON Lines corpus of ``--docs`` short documents (20-120 words drawn from a 20,000-word vocabulary, fixed seed)
is signed into a new store (``sign --jobs 1``) and the store searched ``--find-repeats`` times (``find``, output
discarded), in a fresh process each time, alternating the two ways so that a load that comes and goes on the
machine falls on both:

* ``checksums``: as dedup writes and reads a store (every page with its CRC-32, verified on read; no statistics
  for the signature column);
* ``without``: as before checksums were added (no CRC written or verified, statistics for every column).

The seconds are those of the command itself, measured in its process (not the interpreter's start); then each
store's parts are read whole by pyarrow alone, verifying the checksums or not, which isolates what verifying
costs. Prints a Markdown table of the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

_CHILD = """
import sys, time
import pyarrow.parquet as pq
from dedup_cli.store import places
if sys.argv[1] == "without":
    places.WRITE_OPTIONS["write_page_checksum"] = False
    places.WRITE_OPTIONS["write_statistics"] = True
    unverified = pq.ParquetFile.__init__
    def opened(self, *arguments, **options):
        options["page_checksum_verification"] = False
        unverified(self, *arguments, **options)
    pq.ParquetFile.__init__ = opened
from dedup_cli.cli.main import cli
start = time.perf_counter()
cli(sys.argv[2:], standalone_mode=False)
print(time.perf_counter() - start, file=sys.stderr)
"""


def corpus(path: Path, documents: int) -> None:
    rng = np.random.default_rng(1)
    vocabulary = np.array([f"w{number}" for number in range(20_000)])
    with path.open("w") as handle:
        for start in range(0, documents, 10_000):
            count = min(10_000, documents - start)
            lengths = rng.integers(20, 121, count)
            words = vocabulary[rng.zipf(1.3, int(lengths.sum())) % vocabulary.size]
            cuts = np.cumsum(lengths)[:-1]
            for number, text in enumerate(np.split(words, cuts)):
                handle.write(json.dumps({"id": f"d{start + number}", "text": " ".join(text)}) + "\n")


def timed(way: str, arguments: list[str]) -> float:
    done = subprocess.run([sys.executable, "-c", _CHILD, way, *arguments], capture_output=True, text=True,
                          check=True, cwd=REPO)
    return float(done.stderr.strip().splitlines()[-1])


def read_parts(store: Path, verify: bool, repeats: int = 5) -> float:
    """The median seconds to read every part of ``store`` whole (all columns), verifying the checksums or not."""
    import pyarrow.parquet as pq

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for part in sorted(store.glob("part-*.parquet")):
            pq.ParquetFile(part, page_checksum_verification=verify).read(use_threads=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=2, help="stores signed each way")
    parser.add_argument("--find-repeats", type=int, default=3, help="finds on each store")
    parser.add_argument("--out", type=Path, default=None, help="a folder for the corpus (default: a temporary one)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = options.out or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / f"corpus-{options.docs}.jsonl"
        if not source.exists():
            corpus(source, options.docs)
        seconds: dict[tuple[str, str], list[float]] = {}
        for repeat in range(options.repeats):
            for way in (("checksums", "without") if repeat % 2 == 0 else ("without", "checksums")):
                store = folder / f"store-{way}"
                subprocess.run(["rm", "-rf", str(store)], check=True)
                seconds.setdefault(("sign", way), []).append(
                    timed(way, ["sign", str(source), "--id-field", "id", "-o", str(store), "--jobs", "1", "-q"]))
                for _ in range(options.find_repeats):
                    seconds.setdefault(("find", way), []).append(
                        timed(way, ["find", str(store), "-o", "/dev/null", "-q"]))
                size = sum(path.stat().st_size for path in store.iterdir())
                seconds.setdefault(("MB", way), []).append(size / 1e6)
                seconds.setdefault(("read", way), []).append(read_parts(store, way == "checksums"))
        print(f"{options.docs} documents, {options.repeats} stores signed each way, {options.find_repeats} finds on "
              "each, medians:\n")
        print("| | with checksums | without | ratio |\n|---|---|---|---|")
        labels = {"MB": "store size", "read": "reading every part whole (in one process, median of 5)"}
        for what, unit in (("sign", "s"), ("find", "s"), ("read", "s"), ("MB", "MB")):
            with_them = statistics.median(seconds[(what, "checksums")])
            without = statistics.median(seconds[(what, "without")])
            label = labels.get(what, f"`{what}`")
            print(f"| {label} | {with_them:.2f} {unit} | {without:.2f} {unit} | {with_them / without:.3f} |")
        print("\nall runs:", json.dumps({f"{what} {way}": [round(x, 3) for x in values]
                                         for (what, way), values in seconds.items()}))


if __name__ == "__main__":
    main()
