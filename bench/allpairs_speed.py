"""Throughput and memory of the all-pairs kernel (``dedup_cli.candidates.allpairs``) on synthetic signatures.

Usage: python bench/allpairs_speed.py [--docs 20000] [--num-perm 256] [--bits 2 8] [--thresholds 0.5 0.8]
Random b-bit values stand for unrelated documents (the bulk of any corpus); one document in fifty gets a
near-copy (90 % of positions shared). Prints a markdown table: pairs compared per second by ``all_pairs``,
its peak traced allocation (tracemalloc, which numpy reports to) and the process's peak RSS, then the speed
of ``count_matches_packed`` against ``estimates.pairs.count_matches`` on random candidate pairs.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from dedup_cli.candidates.allpairs import all_pairs, count_matches_packed, pack_blocks
from dedup_cli.candidates.match_bounds import min_matches_for_threshold
from dedup_cli.estimates.pairs import count_matches
from dedup_cli.minhash.packing import value_dtype


def synthetic_values(n_docs: int, num_perm: int, bits: int, seed: int = 0) -> np.ndarray:
    """uint[n_docs, num_perm] random b-bit values, every 50th document a 90 % copy of the one before."""
    rng = np.random.default_rng(seed)
    high = (1 << bits) - 1
    values = rng.integers(0, high, size=(n_docs, num_perm), dtype=np.uint64, endpoint=True).astype(value_dtype(bits))
    copies = np.arange(1, n_docs, 50)
    shared = rng.random((copies.size, num_perm)) < 0.9
    values[copies] = np.where(shared, values[copies - 1], values[copies])
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--num-perm", type=int, default=256)
    parser.add_argument("--bits", nargs="+", type=int, default=[2, 8])
    parser.add_argument("--thresholds", nargs="+", type=float, default=[0.5, 0.8])
    parser.add_argument("--memory-bytes", type=int, default=256 << 20)
    parser.add_argument("--candidate-pairs", type=int, default=2_000_000)
    arguments = parser.parse_args()
    n, k = arguments.docs, arguments.num_perm
    total_pairs = n * (n - 1) // 2
    print(f"{n} documents, k = {k}, {total_pairs:,} pairs, memory_bytes = {arguments.memory_bytes:,}\n")
    print("| b | R0 | min matches | pairs found | seconds | M pairs/s | peak traced MiB | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for bits in arguments.bits:
        values = synthetic_values(n, k, bits)
        for threshold in arguments.thresholds:
            needed = min_matches_for_threshold(threshold, k, bits)
            tracemalloc.start()
            started = time.perf_counter()
            first, _, _ = all_pairs(values, bits, needed, memory_bytes=arguments.memory_bytes)
            seconds = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
            print(
                f"| {bits} | {threshold:g} | {needed} | {first.size:,} | {seconds:.2f} | "
                f"{total_pairs / seconds / 1e6:.1f} | {peak / 2**20:.1f} | {rss:.0f} |"
            )
    print("\n| b | candidate pairs | count_matches M pairs/s | count_matches_packed M pairs/s |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(1)
    first = rng.integers(0, n, arguments.candidate_pairs)
    second = rng.integers(0, n, arguments.candidate_pairs)
    for bits in arguments.bits:
        values = synthetic_values(n, k, bits)
        started = time.perf_counter()
        reference = count_matches(values, first, second)
        unpacked_seconds = time.perf_counter() - started
        packed = pack_blocks(values, bits)
        started = time.perf_counter()
        counts = count_matches_packed(packed, bits, k, first, second)
        packed_seconds = time.perf_counter() - started
        assert np.array_equal(counts, reference)
        print(
            f"| {bits} | {first.size:,} | {first.size / unpacked_seconds / 1e6:.1f} | "
            f"{first.size / packed_seconds / 1e6:.1f} |"
        )


if __name__ == "__main__":
    main()
