"""Recall of ``find --ways 3`` against the exact 3-way resemblance: qualifying triples missed, and triples reported
below R0, per R0, --bits and --verify.

Usage:

    python bench/make_corpus.py --docs 10000 --seed 1          # bench/data/corpus-10000 and its truth.tsv
    python bench/triples.py [--corpus bench/data/corpus-10000] [--baseline CHECKOUT] [--out FILE.md]

The truth: every pair with exact 5-shingle Jaccard ≥ 0.3 is in the corpus's ``truth.tsv``; a triple can reach R0
only if its three pairs do (R ≤ min R_ij, docs/estimators.md), so the qualifying triples are the triangles of the
pairs with J ≥ R0 whose exact |A ∩ B ∩ C| / |A ∪ B ∪ C| (the shingle sets as dedup makes them) is ≥ R0. The corpus
is signed once with the defaults (k = 256, 8 stored bits) into ``OUT_DIR/triples-store.parquet``; then for each R0,
--bits and --verify, ``dedup find STORE -t R0 -b B --ways 3 --verify V --output triples`` is compared with them.
``--baseline`` runs another checkout's dedup (its ``dedup_cli`` through PYTHONPATH) the same way beside this one's,
with the times of both measured in the same run (the machine is shared: compare ratios, not seconds).
"""

from __future__ import annotations

import argparse
import csv
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
sys.path.insert(0, str(REPO / "bench"))
from exact_checks import checkout_of  # noqa: E402 - beside this script

CASES = ((0.5, "2", "borderline"), (0.5, "2", "none"), (0.5, "8", "borderline"), (0.8, "2", "borderline"))


def dedup(checkout: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``dedup`` of ``checkout`` in a fresh process, outside any checkout (PYTHONPATH says which runs)."""
    environment = dict(os.environ, PYTHONPATH=str(checkout))
    return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], env=environment, capture_output=True,
                          text=True, check=True, cwd=tempfile.gettempdir())


def is_jsonl(corpus: Path) -> bool:
    """Whether ``corpus`` is a long-document benchmark corpus (``corpus.jsonl``, ``truth.csv``) rather than one of
    ``bench/make_corpus.py`` (``docs/``, ``truth.tsv``)."""
    return (corpus / "corpus.jsonl").exists()


def truth_pairs(corpus: Path, threshold: float) -> list[tuple[str, str]]:
    jsonl = is_jsonl(corpus)
    with (corpus / ("truth.csv" if jsonl else "truth.tsv")).open(newline="") as handle:
        rows = csv.DictReader(handle, delimiter="," if jsonl else "\t")
        names = ("doc_a", "doc_b") if jsonl else ("id_a", "id_b")
        return [(row[names[0]], row[names[1]]) for row in rows if float(row["jaccard"]) >= threshold]


def texts_of(corpus: Path, names: list[str]) -> list[str]:
    if not is_jsonl(corpus):
        return [(corpus / "docs" / name).read_text() for name in names]
    wanted = set(names)
    found = {}
    with (corpus / "corpus.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            if record["id"] in wanted:
                found[record["id"]] = record["text"]
    return [found[name] for name in names]


def shingle_sets(corpus: Path, ids: set[str]) -> dict[str, np.ndarray]:
    """The 5-word shingle sets of documents ``ids`` as dedup makes them."""
    sys.path.insert(0, str(REPO))
    from dedup_cli.params import SignatureParams
    from dedup_cli.text.shingles import batch_shingles

    params = SignatureParams()
    names = sorted(ids)
    texts = texts_of(corpus, names)
    shingles, offsets = batch_shingles(texts, params.shingle_size, params.shingle_unit, params.tokenisation)
    return {name: shingles[offsets[place]:offsets[place + 1]] for place, name in enumerate(names)}


def qualifying_triples(corpus: Path, threshold: float) -> dict[tuple[str, str, str], float]:
    """Every triple with exact 3-way resemblance ≥ R0, by sorted ids, with that resemblance."""
    pairs = truth_pairs(corpus, threshold)
    neighbours: dict[str, set[str]] = {}
    for a, b in pairs:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    triangles = {tuple(sorted((a, b, c))) for a, b in pairs for c in neighbours[a] & neighbours[b]}
    sets = shingle_sets(corpus, {name for triple in triangles for name in triple})
    found = {}
    for triple in triangles:
        a, b, c = (sets[name] for name in triple)
        value = np.intersect1d(np.intersect1d(a, b), c).size / np.union1d(np.union1d(a, b), c).size
        if value >= threshold:
            found[triple] = value
    return found  # type: ignore[return-value]


def measured(checkout: Path, store: Path, qualifying: dict[tuple[str, str, str], float], threshold: float,
             bits: str, verify: str) -> dict[str, object]:
    started = time.perf_counter()
    run = dedup(checkout, "find", str(store), "-t", str(threshold), "-b", bits, "--ways", "3", "--verify", verify,
                "--output", "triples")
    seconds = time.perf_counter() - started
    reported = {tuple(sorted((r["id_a"], r["id_b"], r["id_c"]))) for r in map(json.loads, run.stdout.splitlines())}
    missed = [triple for triple in qualifying if triple not in reported]
    return {"reported": len(reported), "missed": len(missed), "below": len(reported - set(qualifying)),
            "seconds": seconds, "summary": run.stderr.splitlines()[0] if run.stderr else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "bench" / "data" / "corpus-10000")
    parser.add_argument("--baseline", help="another checkout (a folder) or git revision to run beside this one")
    parser.add_argument("--out", type=Path, help="write the table here (Markdown)")
    parser.add_argument("--section", type=Path, help="put the table as the section \"Triples\" of this Markdown "
                        "file (replacing that section, or at its end)")
    arguments = parser.parse_args()
    arguments.corpus = arguments.corpus.resolve()
    store = arguments.corpus / "triples-store.parquet"
    if not store.exists():
        inputs = ([str(arguments.corpus / "corpus.jsonl"), "--id-field", "id"] if is_jsonl(arguments.corpus)
                  else [str(arguments.corpus / "docs")])
        dedup(REPO, "sign", *inputs, "-o", str(store), "-q")
    work = Path(tempfile.mkdtemp(prefix="triples-baseline-"))
    checkouts = [("this checkout", REPO)] + ([(f"baseline ({arguments.baseline})",
                                               checkout_of(arguments.baseline, work))] if arguments.baseline else [])
    lines = ["| checkout | R0 | --bits | --verify | qualifying triples | reported | missed | missed share | "
             "reported below R0 | find seconds |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    qualifying_at = {threshold: qualifying_triples(arguments.corpus, threshold)
                     for threshold in sorted({case[0] for case in CASES})}
    for (threshold, bits, verify), (name, checkout) in itertools.product(CASES, checkouts):
        qualifying = qualifying_at[threshold]
        row = measured(checkout, store, qualifying, threshold, bits, verify)
        lines.append(f"| {name} | {threshold} | {bits} | {verify} | {len(qualifying):,} | {row['reported']:,} | "
                     f"{row['missed']:,} | {row['missed'] / max(len(qualifying), 1):.2%} | {row['below']:,} | "
                     f"{row['seconds']:.2f} |")
        print(lines[-1], file=sys.stderr)
    table = "\n".join(lines) + "\n"
    if arguments.out:
        arguments.out.write_text(table)
    if arguments.section:
        write_section(arguments.section, arguments, table)
    print(table)


SECTION = "## Triples: qualifying triples missed"


def write_section(path: Path, arguments: argparse.Namespace, table: str) -> None:
    """The table, with what made it, as the last section of ``path`` (an earlier one replaced)."""
    text = path.read_text() if path.exists() else ""
    text = text.split(SECTION)[0].rstrip() + "\n\n" if SECTION in text or text else text
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    name = arguments.corpus.name
    baseline = f" --baseline {arguments.baseline}" if arguments.baseline else ""
    path.write_text(
        f"{text}{SECTION}\n\nWritten by `python bench/triples.py --corpus bench/data/{name}{baseline} --section "
        f"{path.name}` at commit {commit}: the corpus signed with the defaults (k = 256, 8 stored bits); a triple "
        "qualifies when its exact 3-way resemblance |A ∩ B ∩ C| / |A ∪ B ∪ C| of 5-word shingles is ≥ R0 (the "
        "triangles of the corpus's truth pairs with J ≥ R0, checked one by one); `dedup find STORE -t R0 -b B "
        "--ways 3 --verify V --output triples`. \"missed\": qualifying triples not reported; \"reported below "
        f"R0\": reported triples that do not qualify. Seconds are wall times of one run each, start-up included.\n\n"
        f"{table}")


if __name__ == "__main__":
    main()
