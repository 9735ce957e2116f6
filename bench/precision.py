"""Precision of ``dedup find`` at any number of candidates: reported pairs and triples far below R0, per --bits.

Usage: python bench/precision.py [--families 150] [--singles 300] [--seed 1] [--threshold 0.5]
                                 [--out bench/RESULTS-precision.md]

Corpus (written to a temporary folder, deterministic for a seed): ``--families`` planted families of 2–8 documents,
each member an edit of its family's base text (150–300 words drawn from 5,000; each word replaced with a
probability drawn per member from U[0, 0.1], so that members' resemblances spread from about 0.3 to 1), and
``--singles`` unrelated documents. Exact 5-word-shingle Jaccard of every pair sharing a shingle (counted through
the documents of each shingle) and the exact 3-way resemblance of each reported triple are the truth.

For each b of 1/2, 1, 2, 4, 8 (and b = 1/2 and 1 again at k = 64): the corpus is signed with k = 256 and 8 stored
bits (``--bits 1/2``: a store of XOR bits, as ``sign -b 1/2`` writes it, banded on them), and ``dedup find -t R0
--bits b --output pairs`` (and for b ≥ 2 ``--ways 3 --output triples``) runs with the default ``--verify
borderline``; the table counts the candidate pairs, the exact checks, the pairs reported with exact R < R0 − 0.1
and < R0, the recall of the pairs with exact R ≥ R0, and the triples reported with exact 3-way R < R0 and their
lowest value. Run it with ``PYTHONPATH`` naming
another checkout to measure that one (the table says which commit ran).

Run it alone on a shared machine: about 2 minutes of one core at the defaults.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RUNS = (("1/2", 256), ("1", 256), ("2", 256), ("4", 256), ("8", 256), ("1/2", 64), ("1", 64))
"""(--bits, k): every b at the default k, and b = 1/2 and 1 from short signatures, whose noisier estimates make
the chance accepts of a per-pair interval show at this corpus size."""


def planted_corpus(root: Path, families: int, singles: int, seed: int) -> dict[str, str]:
    """Write the corpus into ``root`` (one text file a document); the texts by id."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(5000)])
    texts = {}
    for family in range(families):
        base = rng.choice(vocabulary, size=int(rng.integers(150, 300)))
        for member in range(int(rng.integers(2, 9))):
            words = base.copy()
            change = rng.random(words.size) < rng.uniform(0.0, 0.1)
            words[change] = rng.choice(vocabulary, size=int(change.sum()))
            texts[f"f{family:04d}-{member}.txt"] = " ".join(words)
    for single in range(singles):
        texts[f"s{single:05d}.txt"] = " ".join(rng.choice(vocabulary, size=int(rng.integers(150, 300))))
    root.mkdir(parents=True)
    for name, text in texts.items():
        (root / name).write_text(text)
    return texts


def shingle_sets(texts: dict[str, str]) -> dict[str, np.ndarray]:
    """Each document's 5-word shingles as dedup makes them (sorted distinct hashes)."""
    sys.path.insert(0, str(REPO))
    from dedup_cli.params import SignatureParams
    from dedup_cli.text.shingles import batch_shingles

    params = SignatureParams()
    ids = sorted(texts)
    shingles, offsets = batch_shingles([texts[i] for i in ids], params.shingle_size, params.shingle_unit,
                                       params.tokenisation)
    return {name: np.unique(shingles[offsets[place]:offsets[place + 1]]) for place, name in enumerate(ids)}


def exact_pairs(sets: dict[str, np.ndarray]) -> dict[tuple[str, str], float]:
    """Exact Jaccard of every pair sharing a shingle (the others are 0), by sorted ids: the documents of each
    shingle, grouped by how many they are, give the pairs that share it, counted per pair."""
    ids = sorted(sets)
    docs = np.repeat(np.arange(len(ids)), [sets[i].size for i in ids])
    shingles = np.concatenate([sets[i] for i in ids])
    order = np.lexsort((docs, shingles))
    docs, shingles = docs[order], shingles[order]
    starts = np.flatnonzero(np.r_[True, shingles[1:] != shingles[:-1]])
    counts = np.diff(np.r_[starts, shingles.size])
    codes = []
    for size in np.unique(counts[counts >= 2]).tolist():
        members = docs[starts[counts == size][:, None] + np.arange(size)]  # [groups, size], ascending
        for a, b in itertools.combinations(range(size), 2):
            codes.append(members[:, a].astype(np.int64) * len(ids) + members[:, b])
    pairs, shared = np.unique(np.concatenate(codes) if codes else np.empty(0, np.int64), return_counts=True)
    first, second = pairs // len(ids), pairs % len(ids)
    sizes = np.array([sets[i].size for i in ids], dtype=np.float64)
    jaccard = shared / (sizes[first] + sizes[second] - shared)
    return {(ids[a], ids[b]): float(j) for a, b, j in zip(first.tolist(), second.tolist(), jaccard.tolist(),
                                                          strict=True)}


def exact_triple(sets: dict[str, np.ndarray], ids: tuple[str, str, str]) -> float:
    a, b, c = (sets[name] for name in ids)
    return np.intersect1d(np.intersect1d(a, b), c).size / np.union1d(np.union1d(a, b), c).size


def dedup(*args: str) -> subprocess.CompletedProcess[str]:
    # Run outside the checkout, so that PYTHONPATH (not the working directory) says which dedup_cli runs.
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, text=True, check=True,
                          cwd=tempfile.gettempdir())


def measure(folder: Path, corpus: Path, sets: dict[str, np.ndarray], truth: dict[tuple[str, str], float],
            threshold: float, bits: str, num_perm: int) -> dict[str, object]:
    store = folder / f"store-{bits.replace('/', '_')}-{num_perm}.parquet"
    dedup("sign", str(corpus), "-k", str(num_perm), "-b", "1/2" if bits == "1/2" else "8", "-o", str(store), "-q")
    started = time.perf_counter()
    found = dedup("find", str(store), "-t", str(threshold), "--bits", bits, "--output", "pairs")
    seconds = time.perf_counter() - started
    line = found.stderr.splitlines()[0]
    candidates = int(line.split(" candidates")[0].rsplit(", ", 1)[-1].replace(",", ""))
    checked = int(line.split(" pairs verified")[0].rsplit(", ", 1)[-1].replace(",", "")) if "verified" in line else 0
    reported = [json.loads(record) for record in found.stdout.splitlines()]
    values = np.array([truth.get((r["id_a"], r["id_b"]), 0.0) for r in reported])
    wanted = sum(1 for value in truth.values() if value >= threshold)
    row: dict[str, object] = {
        "bits": bits, "k": num_perm, "candidates": candidates, "checked": checked, "reported": len(reported),
        "far_below": int(np.count_nonzero(values < threshold - 0.1)),
        "below": int(np.count_nonzero(values < threshold)),
        "recall": float(np.count_nonzero(values >= threshold)) / max(wanted, 1), "seconds": seconds,
        "triples": None, "triples_below": None, "triple_lowest": None}
    if bits in ("1/2", "1"):
        return row
    triples = [json.loads(record) for record in
               dedup("find", str(store), "-t", str(threshold), "--bits", bits, "--ways", "3", "--output", "triples",
                     "-q").stdout.splitlines()]
    exact = np.array([exact_triple(sets, (t["id_a"], t["id_b"], t["id_c"])) for t in triples])
    row.update(triples=len(triples), triples_below=int(np.count_nonzero(exact < threshold)),
               triple_lowest=float(exact.min()) if exact.size else None)
    return row


def table(rows: list[dict[str, object]], threshold: float) -> list[str]:
    lines = [f"| --bits | k | candidates | exact checks | pairs reported | exact R < {threshold - 0.1:.1f} | exact R < "
             f"{threshold:.1f} | recall (R ≥ {threshold:.1f}) | find seconds | triples reported | triples < "
             f"{threshold:.1f} | lowest triple |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        triples = ("—", "—", "—") if row["triples"] is None else (
            f"{row['triples']:,}", f"{row['triples_below']:,} ({row['triples_below'] / max(row['triples'], 1):.1%})",
            "—" if row["triple_lowest"] is None else f"{row['triple_lowest']:.3f}")
        lines.append(f"| {row['bits']} | {row['k']} | {row['candidates']:,} | {row['checked']:,} | "
                     f"{row['reported']:,} | "
                     f"{row['far_below']} | {row['below']} | {row['recall']:.3f} | {row['seconds']:.1f} | "
                     f"{' | '.join(triples)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=150)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS-precision.md")
    arguments = parser.parse_args()
    checkout = os.environ.get("PYTHONPATH", str(REPO)).split(os.pathsep)[0]
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip() or "unknown"
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        texts = planted_corpus(folder / "corpus", arguments.families, arguments.singles, arguments.seed)
        sets = shingle_sets(texts)
        truth = exact_pairs(sets)
        rows = []
        for bits, num_perm in RUNS:
            rows.append(measure(folder, folder / "corpus", sets, truth, arguments.threshold, bits, num_perm))
            print(rows[-1], file=sys.stderr)
    heading = (f"## {len(texts):,} documents ({arguments.families} families, {arguments.singles} unrelated, seed "
               f"{arguments.seed}), R0 = {arguments.threshold}, commit {commit}")
    body = [heading, "", *table(rows, arguments.threshold), ""]
    previous = arguments.out.read_text().split("\n## ")[0].rstrip() + "\n\n" if arguments.out.exists() else (
        "# Precision of dedup find at any number of candidates\n\n"
        "Written by `python bench/precision.py`: a planted corpus (families of 2–8 edited copies of a random text, "
        "and unrelated documents), signed with k = 256 (8 stored bits; `-b 1/2` for the rows of b = 1/2, a store "
        "of XOR bits), found with the default `--verify borderline` at each --bits. Pairs and triples are judged "
        "by their exact resemblance.\n\n")
    kept = [section for section in (arguments.out.read_text().split("\n## ")[1:] if arguments.out.exists() else [])
            if f"commit {commit}" not in section.splitlines()[0]]
    arguments.out.write_text(previous + "".join(f"## {section.rstrip()}\n\n" for section in kept)
                             + "\n".join(body))


if __name__ == "__main__":
    main()
