"""Library entry points: ``sign`` a corpus into a store, ``find`` duplicate pairs and groups in a store.

Both take plain arguments and an optional progress callback, so they are usable without the CLI.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dedup_cli.corpus import (
    Document,
    IntegerSet,
    ReadReport,
    SetReadReport,
    discover_files,
    read_documents,
    read_integer_sets,
)
from dedup_cli.errors import InputError, StoreError, UsageError
from dedup_cli.grouping import Groups, group_components
from dedup_cli.hashing import HashFamily, min_hash_values
from dedup_cli.lsh import Banding, candidate_pairs, choose_banding
from dedup_cli.permutation import UniversePermutations
from dedup_cli.scoring import ScoredPairs, score_pairs
from dedup_cli.shingling import document_shingles
from dedup_cli.signatures import SignatureParams, pack_values
from dedup_cli.storage import DocumentBatch, StoredSignatures, StoreWriter, read_store, read_store_params

Progress = Callable[[int], None]
"""Called with the number of documents just finished."""

BATCH_BYTES = 8 << 20
# Above this r = f/D the sparse-limit coefficients are visibly off; find says it used the precise ones.
DENSE_R = 1e-4
BATCH_DOCUMENTS = 4096


@dataclass
class SignReport:
    """What a sign run did."""

    documents: int = 0
    empty: int = 0
    read: ReadReport = field(default_factory=ReadReport)
    sets: SetReadReport = field(default_factory=SetReadReport)
    seconds: float = 0.0
    files_found: int = 0


def _batches(documents: Iterable[Document] | Iterable[IntegerSet]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    size = 0
    for document in documents:
        batch.append(document)
        size += document.size if isinstance(document, Document) else 8 * document.elements.size
        if size >= BATCH_BYTES or len(batch) >= BATCH_DOCUMENTS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def sign_batch(documents: Sequence[Document], params: SignatureParams, family: HashFamily) -> DocumentBatch:
    """Shingle, minhash and pack one batch of documents."""
    shingle_sets = [document_shingles(d.text, params.shingle_size, params.shingle_unit) for d in documents]
    counts = np.array([s.size for s in shingle_sets], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    shingles = np.concatenate(shingle_sets) if shingle_sets else np.empty(0, dtype=np.uint64)
    values = min_hash_values(shingles, offsets, family)
    return DocumentBatch(
        ids=[d.id for d in documents],
        paths=[d.path for d in documents],
        sizes=np.array([d.size for d in documents], dtype=np.int64),
        mtimes_ns=np.array([d.mtime_ns for d in documents], dtype=np.int64),
        content_hashes=np.array([d.content_hash for d in documents], dtype=np.uint64),
        shingle_counts=counts,
        signatures=pack_values(values, params.bits),
    )


def sign_set_batch(sets: Sequence[IntegerSet], params: SignatureParams,
                   permutations: UniversePermutations) -> DocumentBatch:
    """Minhash one batch of integer sets under true permutations of Ω; the minima themselves are stored."""
    counts = np.array([s.elements.size for s in sets], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    elements = np.concatenate([s.elements for s in sets]) if sets else np.empty(0, dtype=np.uint64)
    values = permutations.min_values(elements, offsets)
    values[counts == 0] = 0
    return DocumentBatch(
        ids=[s.id for s in sets],
        paths=[s.source for s in sets],
        sizes=counts * 8,
        mtimes_ns=np.zeros(len(sets), dtype=np.int64),
        content_hashes=np.zeros(len(sets), dtype=np.uint64),
        shingle_counts=counts,
        signatures=pack_values(values, params.bits),
    )


def sign_sets(
    inputs: Sequence[str],
    output: str | os.PathLike[str],
    params: SignatureParams,
    progress: Progress | None = None,
) -> SignReport:
    """Sign integer sets (JSON Lines or TSV files, see :func:`read_integer_sets`) into ``output``.

    Rows are written in id order, as for text stores, so all sets are read before writing; the sets
    themselves are compact (8 bytes an element).
    """
    started = time.perf_counter()
    output = Path(output)
    if params.input_kind != "sets":
        raise UsageError("sign_sets needs SignatureParams.for_sets(universe=...)")
    _check_overwrite(output, params)
    report = SignReport()
    for name in inputs:
        if not os.path.isfile(name):
            raise InputError(f"input {name} is not a file; --input-format sets reads JSON Lines or TSV files")
    sets = sorted(read_integer_sets(inputs, params.universe, report.sets), key=lambda s: s.id)
    permutations = UniversePermutations(params.universe, params.num_perm, params.seed)
    with StoreWriter(output, params) as writer:
        for batch in _batches(sets):
            signed = sign_set_batch(batch, params, permutations)
            writer.write(signed)
            report.documents += len(batch)
            report.empty += int(np.count_nonzero(signed.shingle_counts == 0))
            if progress is not None:
                progress(len(batch))
    report.read.bytes_read = report.sets.bytes_read
    report.seconds = time.perf_counter() - started
    return report


def _check_overwrite(output: Path, params: SignatureParams) -> None:
    """Refuse to replace a file that is not a dedup store, or a store signed with other parameters."""
    if not output.exists():
        return
    try:
        existing = read_store_params(output)
    except StoreError as error:
        raise StoreError(f"refusing to overwrite {output}: {error}") from None
    differences = existing.differences(params)
    if differences:
        raise UsageError(
            f"{output} was signed with other parameters ({'; '.join(differences)}, stored vs requested); "
            f"sign into a new store or remove {output}"
        )


def sign(
    inputs: Sequence[str],
    output: str | os.PathLike[str],
    params: SignatureParams,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    progress: Progress | None = None,
    on_start: Callable[[int], None] | None = None,
) -> SignReport:
    """Sign every document under ``inputs`` into the store ``output`` (written atomically).

    ``on_start`` is told how many files were found before reading starts (to size a progress bar).
    """
    started = time.perf_counter()
    output = Path(output)
    _check_overwrite(output, params)
    report = SignReport()
    files = discover_files(inputs, include, exclude, report.read)
    report.files_found = len(files)
    if on_start is not None:
        on_start(len(files))
    family = HashFamily.from_seed(params.seed, params.num_perm)
    with StoreWriter(output, params) as writer:
        for batch in _batches(read_documents(files, report.read)):
            signed = sign_batch(batch, params, family)
            writer.write(signed)
            report.documents += len(batch)
            report.empty += int(np.count_nonzero(signed.shingle_counts == 0))
            if progress is not None:
                progress(len(batch))
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class FindResult:
    """Everything ``find`` learned, for printing in any format."""

    store: StoredSignatures
    bits: int
    threshold: float
    banding: Banding
    candidates: int
    pairs: ScoredPairs
    groups: Groups
    oversized_buckets: int
    eligible: int
    seconds: float
    estimator: str


def find(
    store_path: str | os.PathLike[str],
    threshold: float,
    bits: int | None = None,
    bands: int | None = None,
    rows: int | None = None,
    recall: float = 0.99,
    max_bucket: int = 1000,
) -> FindResult:
    """Candidate pairs by LSH banding, scored with the 2-way b-bit estimator, grouped by components.

    Band keys use all stored bits (more bits make banding more selective); the estimator uses ``bits``
    (default: all stored bits). ``bands``/``rows`` override the automatic choice, which reaches
    ``recall`` at R = ``threshold``.
    """
    started = time.perf_counter()
    store = read_store(store_path)
    params = store.params
    bits = params.bits if bits is None else bits
    if not 1 <= bits <= params.bits:
        raise UsageError(
            f"--bits {bits} exceeds the {params.bits} bits stored in {store_path}; "
            f"use --bits 1 to {params.bits}, or re-sign with --bits {bits} or more"
        )
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold {threshold} must be in (0, 1]")
    banding = _banding(threshold, params, bands, rows, recall)
    stored_values = store.values()
    eligible = store.shingle_counts > 0  # a document with no shingle resembles nothing
    candidates = candidate_pairs(stored_values, banding.bands, banding.rows, eligible, max_bucket)
    values = store.values(bits)
    r = store.shingle_counts.astype(np.float64) / float(params.universe)
    scored = score_pairs(values, candidates.first, candidates.second, r, bits)
    accepted = scored.select(scored.estimate >= threshold)
    groups = group_components(len(store), accepted.first, accepted.second)
    return FindResult(
        store=store,
        bits=bits,
        threshold=threshold,
        banding=banding,
        candidates=int(candidates.first.size),
        pairs=accepted,
        groups=groups,
        oversized_buckets=candidates.oversized_buckets,
        eligible=int(np.count_nonzero(eligible)),
        seconds=time.perf_counter() - started,
        estimator=(
            f"2-way b-bit with precise r = f/D (max r = {r.max():.3g})" if r.max() > DENSE_R
            else "2-way b-bit, sparse limit (r ≈ 0)"
        ),
    )


def _banding(
    threshold: float, params: SignatureParams, bands: int | None, rows: int | None, recall: float
) -> Banding:
    if bands is None and rows is None:
        return choose_banding(threshold, params.num_perm, params.bits, recall)
    if bands is None or rows is None:
        # One given: use as many of the other as the signature allows.
        if rows is not None:
            bands = params.num_perm // rows
        else:
            assert bands is not None
            rows = params.num_perm // bands
    if bands < 1 or rows < 1 or bands * rows > params.num_perm:
        raise UsageError(
            f"--bands {bands} × --rows {rows} needs {bands * rows} values but signatures hold "
            f"{params.num_perm}; choose bands × rows ≤ {params.num_perm}"
        )
    return Banding(bands, rows, params.bits)
