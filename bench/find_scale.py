"""Time and peak memory of ``find`` at 10^4, 10^5 and 10^6 documents (k = 256, 8 stored bits).

Usage: python bench/find_scale.py [--sizes 10000 100000 1000000] [--out bench/RESULTS-find.md]

Signatures are synthetic: uniformly random values (unrelated documents) plus planted families of
near-duplicates (each member copies each value of its family's seed with probability R in 0.5…0.95), which
is what real signatures look like to banding. Each size runs in a fresh process so its peak RSS is its own.
The script asserts nothing about time; it writes a markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


def build_store(num_docs: int, path: Path, seed: int = 0) -> None:
    """A store of ``num_docs`` synthetic signatures, 1 % of them in planted families of 2–5 members."""
    from dedup_cli.params import SignatureParams
    from dedup_cli.store.format import DocumentBatch
    from dedup_cli.store.store import create_store

    params = SignatureParams(num_perm=256, bits=8)
    generator = np.random.default_rng(seed)
    batch = 100_000
    with create_store(path, params).begin_run(params) as writer:
        for start in range(0, num_docs, batch):
            count = min(batch, num_docs - start)
            values = generator.integers(0, 256, size=(count, 256), dtype=np.uint8)
            # Planted families: rows copy a family seed row position-wise with probability R.
            family_starts = np.arange(0, count - 5, 500)
            for family_start in family_starts:
                members = int(generator.integers(2, 6))
                resemblance = float(generator.uniform(0.5, 0.95))
                for member in range(1, members):
                    copy = generator.random(256) < resemblance
                    values[family_start + member, copy] = values[family_start, copy]
            writer.write(
                DocumentBatch(
                    ids=[f"doc{start + i:08d}" for i in range(count)],
                    paths=[""] * count,
                    sizes=np.zeros(count, np.int64),
                    mtimes_ns=np.zeros(count, np.int64),
                    content_hashes=np.zeros(count, np.uint64),
                    shingle_counts=np.full(count, 1000, np.int64),
                    signatures=values,
                )
            )


def measure(store: Path, threshold: float, bits: int) -> dict[str, float]:
    """Run find in this process and report its time, peak RSS and counts."""
    import dedup_cli as dedup

    started = time.perf_counter()
    result = dedup.find(store, dedup.FindOptions(threshold=threshold, bits=bits))
    seconds = time.perf_counter() - started
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec from the parent.
    with open("/proc/self/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return {
        "seconds": seconds,
        "peak_mb": peak_kib / 1024,
        "candidates": result.candidates,
        "pairs": result.pair_count,
        "groups": result.group_count,
        "banding": f"{result.banding.bands}x{result.banding.rows}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--bits", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "RESULTS-find.md")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # child mode
    arguments = parser.parse_args()
    if arguments.measure:
        print(json.dumps(measure(arguments.measure, arguments.threshold, arguments.bits)))
        return
    DATA.mkdir(exist_ok=True)
    rows = []
    for size in arguments.sizes:
        store = DATA / f"synthetic-{size}.parquet"
        if not store.exists():
            build_store(size, store)
        child = subprocess.run(
            [sys.executable, __file__, "--measure", str(store), "--threshold", str(arguments.threshold),
             "--bits", str(arguments.bits)],
            capture_output=True, text=True, check=True,
        )
        result = json.loads(child.stdout.strip().splitlines()[-1])
        rows.append((size, result))
        print(size, result, flush=True)
    lines = [
        f"# find at scale (k = 256, 8 stored bits, --threshold {arguments.threshold} --bits {arguments.bits})",
        "",
        f"Command: `python bench/find_scale.py --sizes {' '.join(map(str, arguments.sizes))}`",
        "",
        "| documents | banding | candidates | pairs ≥ R0 | groups | find time (s) | peak RSS (MB) | MB per 10^4 docs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, r in rows:
        lines.append(
            f"| {size:,} | {r['banding']} | {r['candidates']:,} | {r['pairs']:,} | {r['groups']:,} | "
            f"{r['seconds']:.2f} | {r['peak_mb']:.0f} | {r['peak_mb'] / size * 1e4:.1f} |"
        )
    arguments.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
