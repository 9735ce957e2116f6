"""Precision and recall of ``dedup find`` against exact word-shingle Jaccard, on the bundled corpora.

Usage: python bench/accuracy.py [CORPUS ...] [--thresholds 0.5 0.8] [--bits 1 2 4 8]
Signs each corpus once (k = 256, 8 stored bits), computes the exact resemblance of every pair of
documents from the same shingle sets, and prints a markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np

import dedup_cli as dedup
from dedup_cli.estimates.exact import pair_resemblances
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.text.shingles import document_shingles


def exact_pairs(corpus: Path, options: dedup.SignOptions) -> dict[tuple[str, str], float]:
    """Exact resemblance of every pair of non-empty documents (quadratic: small corpora only)."""
    documents = list(read_inputs([str(corpus)], options.input, dedup.ReadReport()))
    sets = {d.id: document_shingles(d.text, options.shingle_size, options.shingle_unit) for d in documents}
    ids = sorted(i for i, s in sets.items() if s.size)
    first, second = np.triu_indices(len(ids), 1)
    resemblance = pair_resemblances([sets[i] for i in ids], first, second)
    return {
        (ids[a], ids[b]): float(value)
        for a, b, value in zip(first.tolist(), second.tolist(), resemblance.tolist(), strict=True)
        if value > 0
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", default=["sample_corpora/bible-editions", "sample_corpora/licenses"])
    parser.add_argument("--thresholds", nargs="+", type=float, default=[0.5, 0.8])
    parser.add_argument("--bits", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--verify", nargs="+", default=["none", "borderline"])
    arguments = parser.parse_args()
    options = dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",)))
    print("| corpus | R0 | b | verify | true pairs | reported | precision | recall | candidates | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for corpus in map(Path, arguments.corpora):
        truth = exact_pairs(corpus, options)
        with tempfile.TemporaryDirectory() as scratch:
            store = Path(scratch) / "sigs.parquet"
            started = time.perf_counter()
            report = dedup.sign([str(corpus)], store, options)
            elapsed = time.perf_counter() - started
            for threshold, bits, verify in itertools.product(arguments.thresholds, arguments.bits, arguments.verify):
                found = dedup.find(store, dedup.FindOptions(threshold=threshold, bits=bits, verify=verify))
                ids = found.store.ids
                reported = {(ids[i], ids[j]) for i, j in zip(found.pairs.first, found.pairs.second, strict=True)}
                true = {pair for pair, jaccard in truth.items() if jaccard >= threshold}
                hits = len(reported & true)
                precision = hits / len(reported) if reported else 1.0
                recall = hits / len(true) if true else 1.0
                checked = found.verification.checked if found.verification else 0
                print(f"| {corpus.name} | {threshold} | {bits} | {verify} | {len(true)} | {len(reported)} | "
                      f"{precision:.3f} | {recall:.3f} | {found.candidates} | {checked} |")
        print(f"\n{corpus.name}: signed {report.documents} documents, {report.read.bytes_read / 1e6:.2f} MB "
              f"in {elapsed:.2f} s\n")


if __name__ == "__main__":
    main()
