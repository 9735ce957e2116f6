"""One permutation hashing at every document size: how often find's 95 % intervals hold the exact resemblance, and
how its banding's S-curve compares with what real text measures: bench/RESULTS-accuracy.md.

Usage:

    python bench/densified.py coverage [--pairs 6000] [--num-perm 128]
    python bench/densified.py s-curve [--corpus bench/data/npm/files] [--seeds 24] [--thresholds 0.5 0.8]
    python bench/densified.py all --section bench/RESULTS-accuracy.md

``coverage``: pairs of documents of f = 4, 10, 20, 40, 80, 300 random shingles whose exact R lies in [0.2, 0.95]
(the shared shingles drawn uniformly among the counts that give such an R), signed as ``sign`` signs them (one
permutation hashing into k bins, seed 1, the stored values' lowest b bits; b = 1/2 the XOR bits of positions j and
j + k/2), scored as ``find`` scores them (``estimates.pairs.score_matches``) with the variance of independent
permutations (eq. 11, eq. 26: what find did before) and with that of densified bins (eqs. D4, D5), and the same pairs
signed with k independent permutations (``--scheme kperm``) beside them. A table per b: the share of pairs whose
interval holds R, and the mean of z² = (R̂ − R)²/Var. Then triples (b = 2, k = 64) of three documents with
R = 0.4 and a union of 10 to 250 shingles, eq. 9 against eq. 9 + D6. Everything is seeded: the numbers are the same
on every run.

``s-curve``: the README, CHANGELOG and LICENSE files of bench/npm_corpus.py, signed once with the defaults; the
pairs with exact R in [R0 − 0.3, R0) found once (all pairs compared on the stored values, those estimated ≥ 0.05
intersected exactly); then, for each of 1,000 seeds and each scheme, the values ``sign --seed S --scheme X`` would
store (the shingles hashed once, then one permutation hashing or k hash functions per seed, each seed a different
set of keys and bin orders) and whether find's banding (chosen for the store's shortest documents) makes each pair
a candidate. Per slice of R: the measured share averaged over the seeds with its standard error across seeds,
beside find's predicted curve averaged over the same pairs (the three-point curve of each pair's sizes for oph, the
independent one for kperm, and that one for oph too), for all pairs and for those with a document of fewer than k
shingles. One seed alone is what ``dedup eval`` sees; the column "one seed, largest gap" shows how far that can be
from the curve when near-duplicates come in families (one licence text hundreds of times) and every pair of a
family is decided by the same hash values.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import dedup_cli as dedup  # noqa: E402
from dedup_cli.candidates.banding import Banding, PairSizes, candidate_probability  # noqa: E402
from dedup_cli.engine.stages.plan import find_banding  # noqa: E402
from dedup_cli.estimates.densified import Densification  # noqa: E402
from dedup_cli.estimates.exact import FlatSets, flat_pair_resemblances  # noqa: E402
from dedup_cli.estimates.pairs import score_matches  # noqa: E402
from dedup_cli.estimates.triple_scores import score_triples  # noqa: E402
from dedup_cli.evaluation.accuracy import pair_variance  # noqa: E402
from dedup_cli.minhash.kperm import HashFamily, min_hash_values  # noqa: E402
from dedup_cli.minhash.oph import min_hash_values_oph  # noqa: E402
from dedup_cli.minhash.packing import xor_bits  # noqa: E402
from dedup_cli.verification import read_sets  # noqa: E402

SIZES = (4, 10, 20, 40, 80, 300)
BITS = (0.5, 1, 2, 4, 8, 16)
TEXT = 2.0**64
SECTION = "## One permutation hashing by document size"


def label(bits: float) -> str:
    return "1/2" if bits == 0.5 else str(int(bits))


def planted_pairs(size: int, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` pairs of documents of ``size`` random 64-bit shingles with exact R in [0.2, 0.95]: the shingles
    concatenated, their offsets, and R."""
    shared = np.array([a for a in range(size + 1) if 0.2 <= a / (2 * size - a) <= 0.95])
    overlap = rng.choice(shared, size=count)
    union = rng.integers(0, 2**64, size=(count, 2 * size), dtype=np.uint64)
    second = np.take_along_axis(union, (size - overlap)[:, None] + np.arange(size)[None, :], axis=1)
    shingles = np.stack([union[:, :size], second], axis=1).ravel()
    return shingles, np.arange(0, 2 * count * size + 1, size, dtype=np.int64), overlap / (2 * size - overlap)


def scored(values: np.ndarray, bits: float, num_perm: int, size: int, densification: Densification | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """find's estimate and interval of each pair (rows 2i, 2i + 1 of ``values``)."""
    if bits == 0.5:
        left, right, positions = xor_bits(values[0::2]), xor_bits(values[1::2]), num_perm // 2
    else:
        mask = np.uint64((1 << int(bits)) - 1)
        left, right, positions = values[0::2] & mask, values[1::2] & mask, num_perm
    matches = np.count_nonzero(left == right, axis=1)
    rows = np.arange(matches.size)
    ratio = np.full(matches.size, size / TEXT)
    result = score_matches(rows, rows, matches, ratio, ratio, positions, bits, densification=densification)
    return result.estimate, result.ci_low, result.ci_high


def coverage_tables(pairs: int, num_perm: int) -> list[str]:
    """Coverage and mean z² per b and document size: oph before (eq. 11/26) and after (D4/D5), and kperm."""
    results: dict[tuple[float, int], dict[str, tuple[float, float]]] = {}
    for size in SIZES:
        rng = np.random.default_rng(1000 + size)
        shingles, offsets, exact = planted_pairs(size, pairs, rng)
        oph = min_hash_values_oph(shingles, offsets, num_perm, 1)
        kperm = min_hash_values(shingles, offsets, HashFamily.from_seed(1, num_perm))
        for bits in BITS:
            rows = {}
            for name, values, densification in (("oph, eq. 11", oph, None),
                                                ("oph, eq. D4", oph, Densification(num_perm)),
                                                ("kperm", kperm, None)):
                estimate, low, high = scored(values, bits, num_perm, size, densification)
                covered = float(np.mean((low <= exact) & (exact <= high)))
                ratio = np.full(exact.size, size / TEXT)
                variance = pair_variance(exact, ratio, ratio, bits, num_perm, densification)
                z2 = float(np.mean((estimate - exact) ** 2 / variance))
                rows[name] = (covered, z2)
            results[(bits, size)] = rows
    error = math.sqrt(0.95 * 0.05 / pairs)
    lines = [f"Coverage of the 95 % interval (share of {pairs:,} pairs a size whose interval holds the exact R; "
             f"standard error {error:.4f} at 0.95) and, in brackets, the mean of z² = (R̂ − R)²/Var with the "
             f"variance at the exact R, k = {num_perm} (b = 1/2: k/2 XOR bits; eq. 26 and D5 are the delta "
             "method's, rough at these k):", "",
             "| b | signatures, variance | " + " | ".join(f"f = {size}" for size in SIZES) + " |",
             "|---|---|" + "---:|" * len(SIZES)]
    for bits in BITS:
        for name in ("oph, eq. 11", "oph, eq. D4", "kperm"):
            shown = name if bits != 0.5 else name.replace("eq. 11", "eq. 26").replace("eq. D4", "eq. D5")
            cells = [f"{results[(bits, size)][name][0]:.3f} ({results[(bits, size)][name][1]:.2f})"
                     for size in SIZES]
            lines.append(f"| {label(bits)} | {shown} | " + " | ".join(cells) + " |")
    return lines


def triple_table(count: int) -> list[str]:
    """Coverage of the 3-way score interval (b = 2, k = 64) by the size of the triple's union."""
    members = [[0, 3, 4, 6], [1, 3, 5, 6], [2, 4, 5, 6]]
    lines = ["Triples of R = 0.4 (b = 2, k = 64, pairwise R 0.56): coverage of the 95 % score interval with eq. 9 "
             f"alone and with eq. 9 + D6, {count:,} triples a size:", "",
             "| union of the three | eq. 9 | eq. 9 + D6 |", "|---:|---:|---:|"]
    for scale in (1, 3, 10, 25):
        regions = [scale] * 6 + [4 * scale]
        union = sum(regions)
        rng = np.random.default_rng(2000 + scale)
        elements = rng.integers(0, 2**64, size=(count, union), dtype=np.uint64)
        bounds = np.cumsum([0, *regions])
        sets = [np.concatenate([elements[:, bounds[r]: bounds[r + 1]] for r in regs], axis=1) for regs in members]
        sizes = [s.shape[1] for s in sets]
        offsets = np.r_[0, np.cumsum(np.tile(sizes, count))].astype(np.int64)
        values = (min_hash_values_oph(np.concatenate(sets, axis=1).ravel(), offsets, 64, 1) & np.uint64(3)
                  ).astype(np.uint8)
        docs = np.arange(3 * count).reshape(count, 3)
        ratios = np.array(sizes * count, dtype=np.float64) / TEXT
        cells = []
        for densification in (None, Densification(64)):
            triples = score_triples(values, docs, ratios, 2, densification=densification)
            cells.append(f"{np.mean((triples.ci_low <= 0.4) & (0.4 <= triples.ci_high)):.3f}")
        lines.append(f"| {union} | " + " | ".join(cells) + " |")
    return lines


def npm_pairs(store: dedup.StoredSignatures, sets: FlatSets, floor: float, low: float, high: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of ``store`` with exact R in [low, high): every pair compared on the stored values, those estimated
    ≥ ``floor`` intersected exactly (``sets``: every document's shingles)."""
    values = store.values()
    first, second = [], []
    for row in range(values.shape[0] - 1):
        near = np.flatnonzero((values[row + 1:] == values[row]).mean(axis=1) >= floor)
        first.append(np.full(near.size, row, np.int64))
        second.append(row + 1 + near)
    a, b = np.concatenate(first), np.concatenate(second)
    exact = flat_pair_resemblances(sets, a, b)
    keep = (exact >= low) & (exact < high)
    return a[keep], b[keep], exact[keep]


def banded(values: np.ndarray, a: np.ndarray, b: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """bool[n]: whether pairs (a, b) agree on every row of some band of ``values`` (what find's band keys test)."""
    agree = (values[a, : bands * rows] == values[b, : bands * rows]).reshape(a.size, bands, rows)
    return agree.all(axis=2).any(axis=1)


def s_curve_tables(corpus: Path, seeds: int, thresholds: list[float]) -> list[str]:
    """Measured share of candidates against the predicted S-curve on real text, averaged over seeds."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "sigs.parquet"
        dedup.sign([str(corpus)], str(path), dedup.SignOptions(jobs=1))
        store = dedup.read_store(str(path))
        sets = read_sets(store, np.arange(len(store)))
    params, counts = store.params, store.shingle_counts
    lowest = min(thresholds) - 0.3
    a, b, exact = npm_pairs(store, sets, max(lowest - 0.15, 0.02), lowest, max(thresholds))
    short = np.minimum(counts[a], counts[b]) < params.num_perm
    lines = [f"{len(store):,} documents (shingles: median {int(np.median(counts))}, {np.mean(counts < 128):.0%} "
             f"under k = {params.num_perm}, the fewest {int(counts.min())}); {a.size:,} pairs with exact R in "
             f"[{lowest:.1f}, {max(thresholds):.1f}), {int(short.sum()):,} of them with a document of fewer than k "
             f"shingles, among {np.unique(np.r_[a, b]).size:,} documents. Each seed's values are those `sign --seed "
             "S` stores (the shingles hashed once, then one permutation hashing or k hash functions per seed).", ""]
    mask = np.uint64((1 << params.bits) - 1)
    shares: dict[tuple[str, float], np.ndarray] = {}
    bandings = {}
    for scheme in ("oph", "kperm"):
        scheme_params = dataclasses.replace(params, scheme=scheme)
        for threshold in thresholds:
            bandings[(scheme, threshold)] = find_banding(dedup.FindOptions(threshold=threshold), threshold,
                                                         scheme_params, len(store), int(counts.min())).banding
            shares[(scheme, threshold)] = np.empty((seeds, a.size), dtype=bool)
        for seed in range(1, seeds + 1):
            values = (min_hash_values_oph(sets.values, sets.offsets, params.num_perm, seed) if scheme == "oph" else
                      min_hash_values(sets.values, sets.offsets, HashFamily.from_seed(seed, params.num_perm))) & mask
            for threshold in thresholds:
                banding = bandings[(scheme, threshold)]
                shares[(scheme, threshold)][seed - 1] = banded(values, a, b, banding.bands, banding.rows)
    sizes = PairSizes(params.permutations, counts[a].astype(np.float64), counts[b].astype(np.float64))
    for threshold in thresholds:
        measured = {scheme: (bandings[(scheme, threshold)], shares[(scheme, threshold)]) for scheme in
                    ("oph", "kperm")}
        lines += s_curve_rows(threshold, seeds, exact, measured, sizes)
        lines += s_curve_rows(threshold, seeds, exact, {"oph": measured["oph"]}, sizes, short)
    return lines


def s_curve_rows(threshold: float, seeds: int, exact: np.ndarray, measured: dict[str, tuple[Banding, np.ndarray]],
                 sizes: PairSizes, only: np.ndarray | None = None) -> list[str]:
    """One R0's table: per slice of [R0 − 0.3, R0) and scheme, measured (mean ± s.e. over seeds) and predicted;
    ``only``: bool[n], the pairs to count (the short documents' alone)."""
    edges = np.round(np.arange(threshold - 0.3, threshold + 1e-9, 0.05), 3)
    whose = ("the pairs" if only is None
             else "the pairs with a document of fewer than k shingles")
    lines = [f"R0 = {threshold}: find's banding and, per slice of the exact R, the share of {whose} that are "
             f"candidates (mean over {seeds} seeds ± its standard error) beside the predicted curve averaged over the "
             "same pairs:", "",
             "| scheme, banding | R | pairs | measured | predicted | independent curve | one seed, largest gap |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for scheme, (banding, hits) in measured.items():
        predicted = candidate_probability(exact, banding.bands, banding.rows, banding.band_bits,
                                          sizes if scheme == "oph" else None)
        independent = candidate_probability(exact, banding.bands, banding.rows, banding.band_bits)
        for low, high in zip(edges[:-1], edges[1:], strict=True):
            inside = (exact >= low) & (exact < high) & (True if only is None else only)
            if not inside.any():
                continue
            per_seed = hits[:, inside].mean(axis=1)
            curve = float(predicted[inside].mean())
            lines.append(f"| {scheme}, {banding.bands}×{banding.rows} | {low:.2f}–{high:.2f} | {int(inside.sum()):,} "
                         f"| {per_seed.mean():.3f} ± {per_seed.std(ddof=1) / math.sqrt(seeds):.3f} | {curve:.3f} | "
                         f"{float(independent[inside].mean()):.3f} | {np.max(np.abs(per_seed - curve)):.3f} |")
    return lines + [""]


def write_section(path: Path, body: list[str], command: str) -> None:
    """The section (``SECTION``) in ``path``, replacing an earlier one, before the triples' section if there is one
    (bench/triples.py keeps that one last)."""
    text = path.read_text() if path.exists() else ""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    section = "\n".join([SECTION, "", f"Written by `{command}` at commit {commit} (bench/densified.py says how).", "",
                         *body]).rstrip() + "\n"
    if SECTION in text:
        before, rest = text.split(SECTION, 1)
        following = rest.find("\n## ")
        text = before + section + ("\n" + rest[following + 1:] if following >= 0 else "")
    elif "## Triples" in text:
        before, after = text.split("## Triples", 1)
        text = before + section + "\n## Triples" + after
    else:
        text = text.rstrip() + "\n\n" + section
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["coverage", "s-curve", "all"])
    parser.add_argument("--pairs", type=int, default=6000)
    parser.add_argument("--triples", type=int, default=3000)
    parser.add_argument("--num-perm", type=int, default=128)
    parser.add_argument("--corpus", type=Path, default=HERE / "data" / "npm" / "files")
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.8])
    parser.add_argument("--section", type=Path, help="write the tables as a section of this file")
    arguments = parser.parse_args()
    body: list[str] = []
    started = time.perf_counter()
    if arguments.what in ("coverage", "all"):
        body += ["### Intervals", "", *coverage_tables(arguments.pairs, arguments.num_perm), "",
                 *triple_table(arguments.triples), ""]
    if arguments.what in ("s-curve", "all"):
        if not arguments.corpus.exists():
            sys.exit(f"{arguments.corpus} does not exist: build it with python bench/npm_corpus.py")
        body += ["### The S-curve on real text", "", *s_curve_tables(arguments.corpus, arguments.seeds,
                                                                     arguments.thresholds)]
    body.append(f"({time.perf_counter() - started:.0f} s on a shared two-core machine.)")
    print("\n".join(body))
    if arguments.section:
        shown = " ".join(sys.argv[1:])
        write_section(arguments.section, body, f"python bench/densified.py {shown}")


if __name__ == "__main__":
    main()
