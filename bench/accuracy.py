"""The accuracy of ``dedup find`` on the benchmark corpora, from ``dedup eval``: bench/RESULTS-accuracy.md.

Usage: python bench/accuracy.py [--corpus bench/data/corpus-10000 ...] [--thresholds 0.5 0.8] [--bits 2]
       [--sample 2000] [--out bench/RESULTS-accuracy.md]

Each corpus comes from ``bench/make_corpus.py``: one file per document under ``docs/`` and ``truth.tsv``, every pair
with exact 5-shingle Jaccard ≥ 0.3 (its ``jaccard`` column is what ``dedup eval --truth`` reads as the resemblance,
so the file is a truth file as it stands). The corpus is signed once (k = 256, 8 stored bits, oph, seed 1) into a
scratch store; then, for each R0,

    dedup eval STORE -t R0 -b B --truth CORPUS/truth.tsv --format json   precision and recall, counted
    dedup eval STORE -t R0 -b B --sample N --format json                 the same, estimated from N pairs

The tables give find's precision and recall against the truth for b = 1, 2, 4, 8 with and without exact checks,
beside what eval's sample estimated with its 95 % interval (how well the sample tells the truth), then the
estimator's errors and the banding's S-curve, measured on the sample.
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


def retrieval_table(truth: dict[str, Any], sample: dict[str, Any]) -> list[str]:
    lines = ["| R0 | b | verify | true pairs | reported | precision | recall | eval's sample: precision | recall |",
             "|---|---|---|---|---|---|---|---|---|"]
    estimated = {(r["bits"], r["verify"]): r for r in sample["accuracy"]["at_threshold"]}
    for counted in truth["accuracy"]["at_threshold"]:
        guess = estimated[(counted["bits"], counted["verify"])]
        lines.append(f"| {counted['threshold']} | {counted['bits']} | {counted['verify']} | "
                     f"{counted['true']['value']:,.0f} | {counted['reported']['value']:,.0f} | "
                     f"{share(counted['precision'])} | {share(counted['recall'])} | "
                     f"{share(guess['precision'], True)} | {share(guess['recall'], True)} |")
    return lines


def estimator_table(sample: dict[str, Any]) -> list[str]:
    threshold = sample["threshold"]
    near = min(int(threshold * 10), 9)
    lines = [f"| b | bias | RMSE | MSE / eq. 11 | 95 % coverage | RMSE, R in [{near / 10:.1f}, {(near + 1) / 10:.1f}) "
             "| MSE / eq. 11 there |", "|---|---|---|---|---|---|---|"]
    for entry in sample["estimators"]:
        overall, there = entry["overall"], entry["bins"][near]
        cell = lambda estimate, digits=4: "–" if estimate is None else f"{estimate['value']:.{digits}f}"  # noqa: E731
        lines.append(f"| {entry['bits']} | {cell(overall['bias'])} ± {overall['bias']['stderr']:.4f} | "
                     f"{cell(overall['rmse'])} | {cell(overall['variance_ratio'], 3)} | {cell(overall['coverage'], 3)} "
                     f"| {cell(there['rmse'])} | {cell(there['variance_ratio'], 3)} |")
    return lines


def s_curve_table(sample: dict[str, Any]) -> list[str]:
    points = [point for point in sample["s_curve"] if point["measured"] is not None]
    banding = sample["banding"]
    return [f"S-curve of {banding['bands']}×{banding['rows']} bands on {banding['band_bits']} bits "
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
    parser.add_argument("--bits", default="2", help="the b of the sweep and of the headline find")
    parser.add_argument("--sample", default="2000")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-accuracy.md")
    arguments = parser.parse_args()
    lines = ["# Accuracy of dedup find, from dedup eval", "",
             "Written by `python bench/accuracy.py` (`make bench`): each corpus signed with k = 256, 8 stored bits, "
             "oph, seed 1; precision and recall counted by `dedup eval STORE -t R0 -b B --truth CORPUS/truth.tsv` "
             f"(every pair with exact Jaccard ≥ 0.3), beside the estimates of `dedup eval STORE -t R0 -b B --sample "
             f"{arguments.sample}` with their 95 % intervals; the estimator's errors and the S-curve from that sample.",
             ""]
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
    arguments.out.write_text("\n".join(lines))
    print(f"wrote {arguments.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
