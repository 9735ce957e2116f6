"""Test-only helpers: reference implementations the package is tested against, and small conveniences that
only tests need (a format 1 store writer, per-document text functions, re-reading one document)."""

from __future__ import annotations

import csv
import fcntl
import io
import itertools
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from numpy.typing import ArrayLike

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.atomic_files import commit_file, fsync_path
from dedup_cli.candidates.triangles import _forward_graph
from dedup_cli.cli.main import message
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.errors import DedupError, InputError, StoreError
from dedup_cli.inputs.locations import display_name, parse_location
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.records import Document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import reread_documents, reread_group
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex
from dedup_cli.store.format import DocumentBatch, batch_table, store_schema
from dedup_cli.store.manifest import MANIFEST_NAME
from dedup_cli.store.store import create_store, open_store
from dedup_cli.text import scripts
from dedup_cli.text.normalise import check_unit, fold
from dedup_cli.text.shingles import _window_hashes, batch_shingles
from dedup_cli.text.tokens import _code_points, _word_token_streams, char_hashes

# The repository's root, whichever folder of tests/ a test sits in.
REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPORA = REPO / "sample_corpora"

WORD_PATTERN = re.compile(r"\w+")
"""The words of a normalised text for the ``w-runs`` tokenisation: the runs of ``\\w``."""


# --- text: the per-document definitions the batched pipeline is tested against -------------------------------


def normalise(text: str) -> str:
    """Unicode NFKC, case-folded, with every run of white space collapsed to one space."""
    return " ".join(fold(text).split())


def words_of(text: str, tokenisation: str = "unicode-words") -> list[str]:
    """The words of a normalised text, found one character at a time (what the batched tokenisers must find).

    ``w-runs``: the runs of ``\\w``. ``unicode-words``: a character of class SINGLE is a token, a run of KATAKANA
    is one, a run of other word characters is one, each with the marks (EXTEND) that follow it; a mark after
    anything else is dropped (:mod:`dedup_cli.text.scripts`).
    """
    if tokenisation == "w-runs":
        return WORD_PATTERN.findall(text)
    classes = scripts.token_classes(tokenisation)
    found: list[str] = []
    current, made_of = "", ""
    for char in text:
        bits = int(classes[ord(char)])
        if bits & scripts.EXTEND:
            current += char if current else ""
        elif bits & scripts.WORD:
            kind = "single" if bits & scripts.SINGLE else "katakana" if bits & scripts.KATAKANA else "run"
            if current and (kind == "single" or kind != made_of):
                found.append(current)
                current = ""
            current += char
            made_of = kind
        elif current:
            found.append(current)
            current = ""
    return found + [current] if current else found


def token_hashes(text: str, unit: str, tokenisation: str = "unicode-words") -> np.ndarray:
    """Hash the tokens of an already normalised text.

    Returns uint64[n_tokens]: the word token hash of each word (``unit="word"``, found as ``tokenisation``
    says), or mix64(code point + C) of each character (``unit="char"``, spaces included).
    """
    check_unit(unit)
    if unit == "word":
        return _word_token_streams([text], fold=False, tokenisation=tokenisation)[0]
    return char_hashes(_code_points(text))


def shingle_hashes(tokens: np.ndarray, size: int) -> np.ndarray:
    """The distinct shingle hashes (sorted) of one token stream: uint64[n_shingles]."""
    return sorted_unique(_window_hashes(tokens, size))


def document_shingles(text: str, size: int, unit: str, tokenisation: str | None = None,
                      short_documents: str = "whole") -> np.ndarray:
    """The shingle set of one raw document text, batched alone: uint64[f], sorted, distinct."""
    return batch_shingles([text], size, unit, tokenisation, short_documents)[0]


def read_corpus(path: str | Path) -> list[Document]:
    """Every file under ``path`` (but the SOURCE notes) as one text document each."""
    options = InputOptions(input_format="text", exclude=("SOURCE",))
    return list(read_inputs([str(path)], options, ReadReport()))


def summary(report: ReadReport) -> str:
    """One line: documents read, bytes, and every kind of skipped or repaired input that occurred."""
    parts = [f"read {report.documents} documents from {report.files_found} inputs ({report.bytes_read / 1e6:.1f} MB)"]
    skipped = [(report.count("binary"), "binary"), (report.count("unreadable"), "unreadable"),
               (report.count("malformed"), "malformed"), (report.count("duplicate_ids"), "duplicate id"),
               (report.count("oversized"), "too large")]
    named = [f"{count} {what}" for count, what in skipped if count]
    parts.append(f"skipped {', '.join(named)}" if named else "nothing skipped")
    if report.count("invalid_utf8"):
        parts.append(f"{report.count('invalid_utf8')} with invalid UTF-8 replaced")
    if report.empty_documents:
        parts.append(f"{report.empty_documents} empty")
    return "; ".join(parts)


def reread_document(location: str, content_hash: int | None = None) -> str | None:
    """The text at ``location`` read again with the same decoding, or None (stdin, gone, changed)."""
    return reread_documents([location], None if content_hash is None else [content_hash])[0]


def read_text(path: str | Path) -> str:
    """Read one document again, like :func:`reread_document` but raising an InputError naming the location."""
    location = str(path)
    where = parse_location(location)
    texts = reread_group(where.path, where.kind, where.name, {where.number})
    if where.number not in texts:
        unit = "row" if where.kind == "row" else "line"
        raise InputError(f"cannot re-read {display_name(location)}: {unit} {where.number} of "
                         f"{display_name(where.path)} is gone or no longer holds a text")
    return texts[where.number]


# --- stores -----------------------------------------------------------------------------------------------------


class StoreWriter:
    """Write a whole single-file (format 1) store beside ``path`` and rename it into place only on success,
    as the first version of dedup did (stores of that format are still read)."""

    def __init__(self, path: str | os.PathLike[str], params: SignatureParams) -> None:
        self.path = Path(path)
        self.params = params
        self.schema = store_schema(params)
        self.temp_path = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._writer: pq.ParquetWriter | None = None
        self.rows_written = 0

    def __enter__(self) -> StoreWriter:
        if self.path.is_dir():
            raise StoreError(
                f"cannot write {self.path}: it is a directory store; sign into it with a run, or choose another path"
            )
        try:
            self._writer = pq.ParquetWriter(self.temp_path, self.schema, compression="zstd")
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        return self

    def write(self, batch: DocumentBatch) -> None:
        assert self._writer is not None, "use StoreWriter as a context manager"
        self._writer.write_table(batch_table(batch, self.params, self.schema, run=None))
        self.rows_written += len(batch.ids)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._writer is not None
        try:
            self._writer.close()
            if kind is None:
                fsync_path(self.temp_path)
                commit_file(self.temp_path, self.path)
        except OSError as failure:
            if kind is None:
                raise StoreError(f"cannot write {self.path}: {failure.strerror or failure}") from failure
        finally:
            if self.temp_path.exists():
                self.temp_path.unlink()


def create_store_signed_before_short_documents(path: str | os.PathLike[str], **params: Any) -> None:
    """An empty store as dedup made them before documents of fewer tokens than w had a shingle (the rule
    ``none``): runs signed into it keep that rule. Make it look written by that version with
    :func:`forget_short_document_rule` after signing."""
    create_store(path, SignatureParams(short_documents="none", **params))
    forget_short_document_rule(path)


def forget_short_document_rule(path: str | os.PathLike[str]) -> None:
    """Drop ``short_documents`` from the manifest's parameters, as stores of that version recorded them."""
    manifest = Path(path) / MANIFEST_NAME
    document = json.loads(manifest.read_text())
    assert document["params"].pop("short_documents") == "none"
    manifest.write_text(json.dumps(document))


def compact(path: str | os.PathLike[str], lock_timeout: float | None = 0.0) -> bool:
    """Compact the store at ``path`` (see ``Store.compact``)."""
    return open_store(path).compact(lock_timeout)


def read_store_params(path: str | os.PathLike[str]) -> SignatureParams:
    """The parameters of the store at ``path``, reading only its manifest (or a format 1 file's footer)."""
    return open_store(path).params


def lookup(index: DocumentIndex, ids: Sequence[str]) -> np.ndarray:
    """The row of each of ``ids`` in ``index``, −1 where it is not stored: int64[len(ids)]."""
    rows = [index.row(identifier) for identifier in ids]
    return np.array([-1 if row is None else row for row in rows], dtype=np.int64)


def unchanged(index: DocumentIndex, ids: Sequence[str], paths: Sequence[str], sizes: Sequence[int],
              mtimes_ns: Sequence[int]) -> np.ndarray:
    """bool[m]: which files ``index`` says are unchanged (same id, path, size and modification time)."""
    return np.array([index.file_unchanged(*file) for file in zip(ids, paths, sizes, mtimes_ns, strict=True)],
                    dtype=bool)


# --- candidates and permutations --------------------------------------------------------------------------------


def wedge_count(first: np.ndarray, second: np.ndarray, num_docs: int) -> int:
    """The number of wedges ``triangles`` tests: Σ_u d⁺(u)(d⁺(u) − 1)/2."""
    _, _, _, forward_degree = _forward_graph(first, second, num_docs)
    return int(np.sum(forward_degree * (forward_degree - 1) // 2))


# --- the reference Markov chain of the dense collision probabilities ------------------------------------------


def markov_chain_collision_probability(region_masses: ArrayLike, bits: int) -> np.ndarray:
    """Pr(all n sets' b-bit minima equal) from the uncollapsed Markov chain (reference, slow).

    States: (subset F of sets whose minimum has been found, residue mod 2^b of the first minimum found),
    plus "all found at one residue" (success) and "a minimum at another residue" (failure). The chain is
    run over one block of 2^b positions (the product of the 2^b per-position transition matrices, the
    position's residue being fixed within the block), and the absorption probability is summed over blocks
    as a geometric series, success = e_start^T (I − Q)^{-1} s_block. About 2 + (2^n − 2) 2^b states: use it
    to check :func:`collision_probability_2way` / :func:`collision_probability_3way` for b ≤ 5.

    Args:
        region_masses: float64[..., 2^n − 1], the mass of each Venn region; entry ``mask − 1`` holds the
            region of elements in exactly the sets whose bits are set in ``mask`` (bit i−1 for S_i), e.g.
            for n = 2: [r1 − s12, r2 − s12, s12]. The rest of the mass is "no element".
        bits: int ≥ 1.

    Returns:
        float64[...].
    """
    masses = np.asarray(region_masses, dtype=np.float64)
    num_regions = masses.shape[-1]
    num_sets = int(num_regions + 1).bit_length() - 1
    if (1 << num_sets) - 1 != num_regions:
        raise ValueError(f"region_masses has {num_regions} columns; expected 2^n − 1 (3 or 7)")
    batch_shape = masses.shape[:-1]
    masses = masses.reshape(-1, num_regions)
    batch = masses.shape[0]
    modulus = 1 << bits
    full = (1 << num_sets) - 1
    partial_subsets = list(range(1, full))
    # State indices: 0 = nothing found; then (F, residue) for each proper non-empty F; then success, failure.
    index = {state: 1 + i for i, state in enumerate(itertools.product(partial_subsets, range(modulus)))}
    success = 1 + len(index)
    failure = success + 1
    num_states = failure + 1
    # Column 0: "no element here"; column v: an element of the region with mask v.
    weights = np.concatenate([1.0 - masses.sum(axis=1, keepdims=True), masses], axis=1)
    # (state index, sets found, residue of the first minimum; unused while nothing is found)
    states = [(0, 0, 0)] + [(idx, f, rho) for (f, rho), idx in index.items()]

    def step(position: int) -> np.ndarray:
        """Transition matrix (batch, from, to) for one position of residue ``position``."""
        # Which region moves which state where is the same for every configuration: a 0/1 table
        # [from·to, region] that the region masses turn into the batch of matrices in one product.
        structure = np.zeros((num_states * num_states, num_regions + 1))
        structure[success * num_states + success, :] = 1.0
        structure[failure * num_states + failure, :] = 1.0
        for source, found, rho in states:
            structure[source * num_states + source, 0] += 1.0
            for mask in range(1, full + 1):
                new = mask & ~found
                if new == 0:
                    target = source  # the element belongs only to sets already found
                elif found and rho != position:
                    target = failure  # a later minimum at another residue
                elif found | mask == full:
                    target = success
                else:
                    target = index[(found | mask, rho if found else position)]
                structure[source * num_states + target, mask] += 1.0
        return (weights @ structure.T).reshape(batch, num_states, num_states)

    block = np.broadcast_to(np.eye(num_states), (batch, num_states, num_states)).copy()
    for position in range(modulus):
        block = block @ step(position)
    transient = slice(0, success)
    q = block[:, transient, transient]
    to_success = block[:, transient, success]
    identity = np.eye(success)
    absorbed = np.linalg.solve(identity - q, to_success[..., None])[..., 0]
    return absorbed[:, 0].reshape(batch_shape)


# --- errors as the command line words them -----------------------------------------------------------------------


@contextmanager
def raises_worded(kind: type[DedupError], match: str) -> Iterator[pytest.ExceptionInfo[DedupError]]:
    """Expect a ``kind`` error whose message, as the command line words it (options as flags), matches
    ``match`` (``re.search``, like ``pytest.raises(match=...)``)."""
    with pytest.raises(kind) as caught:
        yield caught
    worded = message(caught.value)
    assert re.search(match, worded), worded


def union_find_labels(num_docs: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """Reference: union-find, then label every document with the smallest index in its component."""
    parent = list(range(num_docs))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)  # the root stays the smallest member
    return np.array([root(node) for node in range(num_docs)], dtype=np.int64)


# --- corpora with planted near-duplicates, for eval --------------------------------------------------------------


def planted_families(root: Path, families: int, size: int, edit_rate: tuple[float, float], seed: int) -> dict[str, str]:
    """Write ``families`` × ``size`` documents into ``root``: each an edit of its family's random base text.

    Each word of the base (150–300 words drawn from 5000) is replaced by a random word with probability q, q drawn
    per document from U[edit_rate]; unrelated documents share almost no 5-shingle, members of one family a spread of
    resemblances around (1 − q)^5-ish. Returns the texts by id (file name).
    """
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(5000)])
    root.mkdir(parents=True, exist_ok=True)
    texts = {}
    for family in range(families):
        base = rng.choice(vocabulary, size=int(rng.integers(150, 300)))
        for member in range(size):
            words = base.copy()
            change = rng.random(words.size) < rng.uniform(*edit_rate)
            words[change] = rng.choice(vocabulary, size=int(change.sum()))
            texts[f"f{family:02d}-{member}.txt"] = " ".join(words)
    for name, text in texts.items():
        (root / name).write_text(text)
    return texts


def pair_codes_by_id(result: FindResult, ids: Sequence[str]) -> np.ndarray:
    """The accepted pairs of a find as codes a · n + b over ``ids`` (the whole store's ids, ascending): a result
    holds only the documents it reports, numbered among themselves."""
    rank = {identifier: index for index, identifier in enumerate(ids)}
    numbers = np.array([rank[identifier] for identifier in result.store.ids], np.int64)
    first, second = numbers[result.accepted.first], numbers[result.accepted.second]
    return np.minimum(first, second) * len(ids) + np.maximum(first, second)


# --- the command line as a user sees it ---------------------------------------------------------------------


def on_a_terminal(*args: str) -> tuple[int, str]:
    """Run dedup with stderr on a pseudo-terminal (stdout to a pipe): its exit code and what the terminal got."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    child = subprocess.Popen([sys.executable, "-m", "dedup_cli", *args], stdout=subprocess.PIPE, stderr=slave,
                             env=environment)
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert child.stdout is not None
    child.stdout.read()
    os.close(master)
    return child.wait(timeout=120), shown.decode("utf-8", "replace")


def reused_bands(note: str) -> int:
    """How many bands ``resuming: candidates for bands 1–4, 7–9 from DIR`` names."""
    ranges = note.split("bands ")[1].split(" from")[0]
    return sum(int(b) - int(a) + 1 for a, b in (part.split("–") for part in ranges.split(", ")))


def bible_jsonl(path: Path) -> Path:
    """The bible editions of the sample corpora as one JSON Lines file (an id and a text a line)."""
    import json

    bible = SAMPLE_CORPORA / "bible-editions"
    lines = [json.dumps({"id": file.relative_to(bible).as_posix(), "text": file.read_text("utf-8")})
             for file in sorted(bible.rglob("*.txt"))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def exact_resemblances(corpus: Path) -> dict[tuple[str, str], float]:
    """The exact resemblance (Jaccard of 5-word shingle sets) of every pair of a corpus's documents, by sorted ids."""
    sets = {d.id: document_shingles(d.text, 5, "word") for d in read_corpus(corpus)}
    result = {}
    for a, b in itertools.combinations(sorted(sets), 2):
        shared = np.intersect1d(sets[a], sets[b]).size
        result[(a, b)] = shared / (sets[a].size + sets[b].size - shared)
    return result


def csv_module_rows(text: str, **dialect: Any) -> list[list[str]]:
    """The rows Python's csv module reads from ``text``. Python 3.10's reader refuses a NUL character anywhere
    ("line contains NUL"), where 3.11 reads it as any other: there, each NUL is read as a character the text does
    not hold, and given back."""
    if sys.version_info >= (3, 11) or "\0" not in text:
        return list(csv.reader(io.StringIO(text, newline=""), **dialect))
    stand_in = next(chr(code) for code in range(0xE000, 0xF900) if chr(code) not in text)
    rows = csv.reader(io.StringIO(text.replace("\0", stand_in), newline=""), **dialect)
    return [[field.replace(stand_in, "\0") for field in row] for row in rows]


# --- review's page --------------------------------------------------------------------------------------------


def page_scripts(page: str) -> list[tuple[dict[str, str | None], str]]:
    """Every ``<script>`` element of an HTML page as a browser's parser finds it: (its attributes, its text)."""
    from html.parser import HTMLParser

    found: list[tuple[dict[str, str | None], str]] = []

    class Scripts(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.inside: dict[str, str | None] | None = None
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "script":
                self.inside, self.text = dict(attrs), []

        def handle_endtag(self, tag: str) -> None:
            if tag == "script" and self.inside is not None:
                found.append((self.inside, "".join(self.text)))
                self.inside = None

        def handle_data(self, data: str) -> None:
            if self.inside is not None:
                self.text.append(data)

    Scripts().feed(page)
    return found


def review_data(page: str) -> dict[str, Any]:
    """The JSON document of a review page (its ``review-data`` script element), parsed."""
    [data] = [text for attributes, text in page_scripts(page) if attributes.get("id") == "review-data"]
    return json.loads(data)
