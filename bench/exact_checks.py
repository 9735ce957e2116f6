"""What the exact checks of ``find`` cost: this checkout beside a baseline checkout, measured in the same run.

Usage:

    python bench/npm_corpus.py                                  # bench/data/npm: READMEs, changelogs, licences
    python bench/make_corpus.py --docs 100000 --seed 1          # bench/data/corpus-100000 (and its truth.tsv)
    python ../shared/bench-corpus/make_corpus.py --docs 10000 --seed 1 --out bench/data/long-10000 --jsonl --no-files
    python bench/exact_checks.py --baseline CHECKOUT_OR_REVISION [--repeat 5] [--out bench/RESULTS-exact.md]

The corpora (each signed once into ``STORE`` beside it, by this checkout):

* ``npm`` (``bench/npm_corpus.py``): the README, CHANGELOG and LICENSE files of a few hundred npm packages at three
  versions each, signed with the defaults; ``find STORE -t 0.8 -b 2`` against the same with ``--verify none``.
  Licences repeat hundreds of times, so nearly every candidate pair is checked exactly.
* ``long-10000``: the long-document benchmark corpus (``corpus.jsonl``, ``--id-field id``), signed with ``-k 128 -b 8``
  (the store the target was set on: a store of 16-bit values decides a few pairs otherwise than the baseline);
  ``find STORE -t 0.5 -b 2`` (about 900 exact checks) against ``--verify none``.
* ``corpus-100000`` (``bench/make_corpus.py``): signed with the defaults; ``find STORE --output pairs`` with the
  default options, and its precision and recall against the corpus's ``truth.tsv`` (every pair with exact
  Jaccard ≥ 0.3).

Each command runs ``--repeat`` times for each checkout, the checkouts taking turns, in fresh processes
(``python -m dedup_cli`` with PYTHONPATH naming the checkout, run outside any checkout); the table keeps the fastest
wall time and the ``find`` summary's own seconds of that run, and the ratios are of times measured in this run
(the machine may be shared: compare ratios, not seconds across runs). The two checkouts must report the same pairs
or groups (:func:`answer`). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"
SECONDS = re.compile(r", ([\d.]+) s; estimator")
CHECKED = re.compile(r"([\d,]+) pairs? verified exactly")


def dedup(checkout: Path, *arguments: str) -> tuple[float, str, str]:
    """(wall seconds, stdout, stderr) of ``dedup ARGUMENTS`` of ``checkout`` in a fresh process."""
    environment = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], env=environment, capture_output=True,
                          text=True, check=True, cwd=tempfile.gettempdir())
    return time.perf_counter() - started, done.stdout, done.stderr


def checkout_of(baseline: str, work: Path) -> Path:
    """A checkout to run: ``baseline`` itself when it is a folder, else its ``dedup_cli`` at that git revision
    extracted into ``work``."""
    if Path(baseline).is_dir():
        return Path(baseline).resolve()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", baseline, "dedup_cli"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    return work


def signed(corpus: str, inputs: list[str], options: list[str], checkout: Path = REPO, name: str = "") -> Path:
    """The store of ``corpus`` signed by ``checkout`` (this one by default), signed once into bench/data."""
    store = DATA / f"exact-{corpus}{name}.parquet"
    if not store.exists():
        dedup(checkout, "sign", *inputs, *options, "-o", str(store), "-q")
    return store


def fastest(checkouts: dict[str, Path], arguments: list[str] | Callable[[str], list[str]], repeat: int,
            same: bool = True) -> dict[str, dict[str, object]]:
    """For each checkout: the fastest wall time, the summary's seconds of that run, the exact checks and the output
    (the checkouts take turns, so that a burst of load on the machine falls on both); with ``same``, the checkouts
    must have reported the same answer. ``arguments`` may depend on the checkout's name."""
    best: dict[str, dict[str, object]] = {}
    for _ in range(repeat):
        for name, checkout in checkouts.items():
            wall, stdout, stderr = dedup(checkout, *(arguments(name) if callable(arguments) else arguments))
            if name not in best or wall < float(best[name]["wall"]):  # type: ignore[arg-type]
                summary = SECONDS.search(stderr)
                checked = CHECKED.search(stderr)
                best[name] = {"wall": wall, "find": float(summary.group(1)) if summary else float("nan"),
                              "checked": int(checked.group(1).replace(",", "")) if checked else 0, "out": stdout}
    answers = {answer(str(row["out"])) for row in best.values()}
    if same and len(answers) != 1:
        raise SystemExit(f"the checkouts disagree on: dedup {' '.join(arguments)}")
    return best


def answer(output: str) -> frozenset[tuple[str, ...]]:
    """What a find reported, whatever it measured on the way: its pairs (``--output pairs``) or its groups' members.
    The estimates beside them are left out: the checkouts may check different pairs exactly (the intervals of one
    may be wider), so a group's weakest link may be an exact value in one and an estimate in the other."""
    records = [json.loads(line) for line in output.splitlines()]
    return frozenset(tuple(sorted((record["id_a"], record["id_b"]))) if "id_a" in record
                     else tuple(record["members"]) for record in records)


def precision_recall(pairs_jsonl: str, truth: Path, threshold: float) -> tuple[float, float]:
    with truth.open(newline="") as handle:
        exact = {(row["id_a"], row["id_b"]): float(row["jaccard"]) for row in csv.DictReader(handle, delimiter="\t")}
    reported = [tuple(sorted((record["id_a"], record["id_b"]))) for record in map(json.loads, pairs_jsonl.splitlines())]
    true = sum(1 for pair in reported if exact.get(pair, 0.0) >= threshold)  # type: ignore[arg-type]
    wanted = sum(1 for value in exact.values() if value >= threshold)
    return true / max(len(reported), 1), true / max(wanted, 1)


def ratio_section(checkouts: dict[str, Path], title: str, arguments: list[str], repeat: int) -> list[str]:
    """A table of ``dedup ARGUMENTS`` against the same with ``--verify none``, per checkout."""
    lines = [f"## {title}", "", "| checkout | exact checks | find s (summary) | wall s | find s, --verify none | "
             "wall s, --verify none | ratio (wall) | ratio (summary) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    checked = fastest(checkouts, arguments, repeat)
    unchecked = fastest(checkouts, [*arguments, "--verify", "none"], repeat)
    for name in checkouts:
        on, off = checked[name], unchecked[name]
        lines.append(f"| {name} | {on['checked']:,} | {on['find']:.2f} | {on['wall']:.2f} | {off['find']:.2f} | "
                     f"{off['wall']:.2f} | {float(on['wall']) / float(off['wall']):.2f} | "
                     f"{float(on['find']) / float(off['find']):.2f} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the checkout (a folder) or git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="exact-baseline-"))
    checkouts = {"this checkout": REPO, f"baseline ({arguments.baseline})": checkout_of(arguments.baseline, work)}
    lines: list[str] = []
    started = time.perf_counter()
    if (DATA / "npm" / "files").is_dir():
        npm = signed("npm", [str(DATA / "npm" / "files")], [])
        lines += ratio_section(checkouts, "npm: README, CHANGELOG and LICENSE files, `find STORE -t 0.8 -b 2`",
                               ["find", str(npm), "-t", "0.8", "-b", "2"], arguments.repeat)
    if (DATA / "long-10000" / "corpus.jsonl").exists():
        long = signed("long-10000", [str(DATA / "long-10000" / "corpus.jsonl"), "--id-field", "id"],
                      ["-k", "128", "-b", "8"])
        lines += ratio_section(checkouts, "long-10000 (k = 128, 8 bits stored): `find STORE -t 0.5 -b 2`",
                               ["find", str(long), "-t", "0.5", "-b", "2"], arguments.repeat)
    if (DATA / "corpus-100000" / "docs").is_dir():
        # Each checkout's own defaults, the store's layout included: measured against the truth, not against each
        # other (another layout finds other chance pairs).
        large = {name: signed("corpus-100000", [str(DATA / "corpus-100000" / "docs")], [], checkout,
                              "" if checkout == REPO else "-baseline") for name, checkout in checkouts.items()}
        lines += ["## corpus-100000 (each checkout's defaults, its own store): `find STORE --output pairs`", "",
                  "| checkout | exact checks | find s (summary) | wall s | precision | recall |",
                  "|---|---:|---:|---:|---:|---:|"]
        checked = fastest(checkouts, lambda name: ["find", str(large[name]), "--output", "pairs"], arguments.repeat,
                          same=False)
        for name in checkouts:
            on = checked[name]
            precision, recall = precision_recall(str(on["out"]), DATA / "corpus-100000" / "truth.tsv", 0.5)
            lines.append(f"| {name} | {on['checked']:,} | {on['find']:.2f} | {on['wall']:.2f} | {precision:.4f} | "
                         f"{recall:.4f} |")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    head = [f"Written by `python bench/exact_checks.py --baseline {arguments.baseline} --repeat {arguments.repeat}` "
            f"at commit {commit}, {os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}, "
            f"in {time.perf_counter() - started:.0f} s: the fastest wall time of {arguments.repeat} runs of each "
            "command and the summary's seconds of that run, the checkouts taking turns; both reported the same "
            "pairs (or groups) but on corpus-100000, measured against its truth instead.",
            ""]
    text = "\n".join(head + lines)
    if arguments.out:
        arguments.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
