"""The accuracy of ``dedup find`` on the benchmark corpora, from ``dedup eval``: bench/RESULTS-accuracy.md.

Usage: python bench/accuracy.py [--corpus bench/data/corpus-10000 ...] [--thresholds 0.5 0.8] [--bits 1/2]
       [--xor-thresholds 0.8] [--sample 2000] [--out bench/RESULTS-accuracy.md]

Each corpus comes from ``bench/make_corpus.py``: one file per document under ``docs/`` and ``truth.tsv``, every pair
with exact 5-shingle Jaccard ≥ 0.3 (its ``jaccard`` column is what ``dedup eval --truth`` reads as the resemblance,
so the file is a truth file as it stands). The corpus is signed once (k = 256, 8 stored bits, oph, seed 1) into a
scratch store; then, for each R0,

    dedup eval STORE -t R0 -b B --truth CORPUS/truth.tsv --format json   precision and recall, counted
    dedup eval STORE -t R0 -b B --sample N --format json                 the same, estimated from N pairs

The tables give find's precision and recall against the truth for b = 1/2 (the XOR estimator, with ``-b 1/2``,
the default), 1, 2, 4, 8 with and without exact checks, and the bytes a document a store keeping only those bits
would take (k·b/8), beside what eval's sample estimated with its 95 % interval (how well the sample tells the
truth), then the estimator's errors and the banding's S-curve, measured on the sample. For each of
``--xor-thresholds`` the corpus is also signed with ``--bits 1/2`` (only the XOR bits, k/16 bytes a document) and
that store, banded on its XOR bits, is judged against the truth.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def dedup(*arguments: str) -> str:
    """Run the dedup command line in a fresh process; its stdout."""
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"dedup {' '.join(arguments)} failed: {done.stderr.strip()}")
    return done.stdout


def share(estimate: dict[str, float] | None, interval: bool = False) -> str:
    if estimate is None:
        return "–"
    if not interval:
        return f"{estimate['value']:.3f}"
    return f"{estimate['value']:.3f} [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}]"


def label(bits: float) -> str:
    """b as the command line writes it: 1/2 for the XOR estimator."""
    return "1/2" if bits == 0.5 else str(int(bits))


def retrieval_table(truth: dict[str, Any], sample: dict[str, Any]) -> list[str]:
    lines = ["| R0 | b | verify | bytes a document | true pairs | reported | precision | recall | "
             "eval's sample: precision | recall |", "|---|---|---|---|---|---|---|---|---|---|"]
    estimated = {(r["bits"], r["verify"]): r for r in sample["accuracy"]["at_threshold"]}
    for counted in truth["accuracy"]["at_threshold"]:
        guess = estimated[(counted["bits"], counted["verify"])]
        lines.append(f"| {counted['threshold']} | {label(counted['bits'])} | {counted['verify']} | "
                     f"{sample['num_perm'] * counted['bits'] / 8:g} | "
                     f"{counted['true']['value']:,.0f} | {counted['reported']['value']:,.0f} | "
                     f"{share(counted['precision'])} | {share(counted['recall'])} | "
                     f"{share(guess['precision'], True)} | {share(guess['recall'], True)} |")
    return lines


def truth_pairs(corpus: Path) -> dict[tuple[str, str], float]:
    """The truth file's pairs (id_a < id_b) with their exact Jaccard; every pair not listed has Jaccard < 0.3."""
    rows = (line.split("\t") for line in (corpus / "truth.tsv").read_text().splitlines()[1:])
    return {(row[0], row[1]): float(row[4]) for row in rows}


def xor_store_rows(store: str, corpus: Path, threshold: str, truth: dict[tuple[str, str], float]
                   ) -> tuple[list[str], str]:
    """find on a store of XOR bits against the truth, with and without exact checks: table rows, and the summary
    of the borderline run (its banding and candidates). eval would also band the whole store with its looser frame
    banding, which on XOR rows (a chance agreement of 1/2 a row) means most pairs; find bands only its own."""
    level = float(threshold)
    true = {pair for pair, jaccard in truth.items() if jaccard >= level}
    rows, summary = [], ""
    for verify in ("none", "borderline"):
        done = subprocess.run([sys.executable, "-m", "dedup_cli", "find", store, "-t", threshold, "--verify", verify,
                               "--output", "pairs"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"dedup find {store} failed: {done.stderr.strip()}")
        summary = next(line for line in done.stderr.splitlines() if " candidates, " in line).split(": ", 1)[1]
        reported = {tuple(sorted((record["id_a"], record["id_b"]))) for record in map(json.loads,
                                                                                       done.stdout.splitlines())}
        hits = len(reported & true)
        precision = hits / len(reported) if reported else 1.0
        rows.append(f"| {threshold} | 1/2 (XOR store) | {verify} | {store_bytes(store)} | {len(true):,} | "
                    f"{len(reported):,} | {precision:.3f} | {hits / len(true) if true else 1.0:.3f} |")
    return rows, summary


def store_bytes(store: str) -> int:
    """Signature bytes a document of a store, from ``dedup info``."""
    return int(json.loads(dedup("info", store))["params"]["num_perm"]) // 8


def estimator_table(sample: dict[str, Any]) -> list[str]:
    threshold = sample["threshold"]
    near = min(int(threshold * 10), 9)
    lines = [f"| b | bias | RMSE | MSE / eq. 11 (26 for b = 1/2) | 95 % coverage | RMSE, R in [{near / 10:.1f}, "
             f"{(near + 1) / 10:.1f}) | MSE / eq. 11 there |", "|---|---|---|---|---|---|---|"]
    for entry in sample["estimators"]:
        overall, there = entry["overall"], entry["bins"][near]
        cell = lambda estimate, digits=4: "–" if estimate is None else f"{estimate['value']:.{digits}f}"  # noqa: E731
        lines.append(f"| {label(entry['bits'])} | {cell(overall['bias'])} ± {overall['bias']['stderr']:.4f} | "
                     f"{cell(overall['rmse'])} | {cell(overall['variance_ratio'], 3)} | {cell(overall['coverage'], 3)} "
                     f"| {cell(there['rmse'])} | {cell(there['variance_ratio'], 3)} |")
    return lines


def s_curve_table(sample: dict[str, Any]) -> list[str]:
    points = [point for point in sample["s_curve"] if point["measured"] is not None]
    banding = sample["banding"]
    return [f"S-curve of {banding['bands']}×{banding['rows']} bands on {label(banding['band_bits'])} bits "
            f"(R0 = {sample['threshold']}), Pr(candidate) by exact R:", "",
            "| R | " + " | ".join(f"{point['low']:.1f}–{point['high']:.1f}" for point in points) + " |",
            "|---|" + "---|" * len(points),
            "| measured | " + " | ".join(share(point["measured"]) for point in points) + " |",
            "| predicted | " + " | ".join(f"{point['predicted']:.3f}" for point in points) + " |", "",
            f"Below R = {sample['reach']} the sampled strata hold under 99 % of the pairs, and the measured share can be "
            "too high (docs/evaluation.md, \"What no sample can show\")."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", type=Path, default=[HERE / "data" / "corpus-10000"])
    parser.add_argument("--thresholds", nargs="+", default=["0.5", "0.8"])
    parser.add_argument("--bits", default="1/2", help="the b of the sweep and of the headline find (b = 1/2 is "
                        "measured only when it is this b)")
    parser.add_argument("--xor-thresholds", nargs="*", default=["0.8"],
                        help="the R0 at which a store signed with --bits 1/2 is judged too (none: skip it)")
    parser.add_argument("--sample", default="2000")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-accuracy.md")
    arguments = parser.parse_args()
    lines = ["# Accuracy of dedup find, from dedup eval", "",
             "Written by `python bench/accuracy.py` (`make bench`): each corpus signed with k = 256, 8 stored bits, "
             "oph, seed 1; precision and recall counted by `dedup eval STORE -t R0 -b B --truth CORPUS/truth.tsv` "
             f"(every pair with exact Jaccard ≥ 0.3), beside the estimates of `dedup eval STORE -t R0 -b B --sample "
             f"{arguments.sample}` with their 95 % intervals; the estimator's errors and the S-curve from that sample. "
             f"B = {arguments.bits}: the rows of b = 1/2 (the XOR of the lowest bits of permutations j and j + k/2, "
             "Li & König eq. 25) stand beside b = 1, 2, 4, 8; \"bytes a document\" is k·b/8, what a store keeping "
             "only those bits takes (this store keeps 8 bits, 256 bytes, for its banding).", ""]
    for corpus in arguments.corpus:
        if not (corpus / "truth.tsv").exists():
            sys.exit(f"{corpus} has no truth.tsv; build it with: python bench/make_corpus.py")
        manifest = json.loads((corpus / "manifest.json").read_text())
        with tempfile.TemporaryDirectory() as scratch:
            store = str(Path(scratch) / "sigs.parquet")
            dedup("sign", str(corpus / "docs"), "-o", store, "-q")
            lines += [f"## {corpus.name}: {manifest['documents']:,} documents, "
                      f"{manifest['truth_pairs']['>=0.3']['total']:,} pairs with Jaccard ≥ 0.3", ""]
            for threshold in arguments.thresholds:
                common = ["eval", store, "-t", threshold, "-b", arguments.bits, "--format", "json", "-q"]
                truth = json.loads(dedup(*common, "--truth", str(corpus / "truth.tsv")))
                sample = json.loads(dedup(*common, "--sample", arguments.sample))
                print(f"{corpus.name} R0 = {threshold}: eval --truth {truth['seconds']:.1f} s, "
                      f"eval --sample {sample['seconds']:.1f} s", file=sys.stderr)
                lines += [*retrieval_table(truth, sample), "",
                          f"The estimator on {sample['sample']['measured']:,} sampled pairs (weighted by the design; "
                          f"eval took {sample['seconds']:.1f} s, with the truth file {truth['seconds']:.1f} s):", "",
                          *estimator_table(sample), "", *s_curve_table(sample), ""]
            if arguments.xor_thresholds:
                xor_store = str(Path(scratch) / "xor.parquet")
                dedup("sign", str(corpus / "docs"), "-o", xor_store, "--bits", "1/2", "-q")
                pairs = truth_pairs(corpus)
                table = ["| R0 | b | verify | bytes a document | true pairs | reported | precision | recall |",
                         "|---|---|---|---|---|---|---|---|"]
                summaries = []
                for threshold in arguments.xor_thresholds:
                    rows, summary = xor_store_rows(xor_store, corpus, threshold, pairs)
                    print(f"{corpus.name} XOR store R0 = {threshold}: {summary}", file=sys.stderr)
                    table += rows
                    summaries.append(f"at R0 = {threshold}: `{summary}`")
                lines += [f"The same corpus signed with `--bits 1/2`: only the XOR bits, {store_bytes(xor_store)} bytes "
                          "a document, banded on them (a row agrees with probability T = (1 + R²)/2), judged by "
                          "`dedup find` against the truth file (k = 256 permutations give only 128 XOR bits, so the "
                          "banding lets millions of unrelated pairs through, all scored); find's summary "
                          + "; ".join(summaries), "",
                          *table, ""]
    arguments.out.write_text("\n".join(lines))
    print(f"wrote {arguments.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
