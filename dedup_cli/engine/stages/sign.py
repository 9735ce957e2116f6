"""The signing stage: a batch of documents (or integer sets) → shingle counts and packed b-bit signatures.

Two functions an engine maps over its work, both returning the rows a store writes
(:class:`dedup_cli.store.format.DocumentBatch`):

* :func:`sign_records`: documents already read → their rows;
* :func:`sign_task`: a reading task (:mod:`dedup_cli.inputs.tasks`: whole files, a chunk of lines, Parquet rows)
  → read, parsed and signed where it runs, so a worker receives a list of files or raw bytes, never texts.

Text is signed by one of two kernels with byte-identical results (:mod:`dedup_cli.kernel.choice`): ``numpy``
(:mod:`dedup_cli.text.shingles`, :mod:`dedup_cli.minhash`), the reference, always installed; or ``numba``
(:mod:`dedup_cli.kernel.compiled`), the same hot path compiled. Integer sets are signed in numpy.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from dedup_cli.engine.stages.record_places import CHANGED, ELSEWHERE, NEW, Placed, placed_documents, read_status
from dedup_cli.inputs.columns import TextColumns, Wheres
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import ReadTask, Record, read_task, read_task_columns
from dedup_cli.kernel.choice import compiled_kernel
from dedup_cli.minhash.kperm import HashFamily, min_hash_values
from dedup_cli.minhash.oph import min_hash_values_oph
from dedup_cli.minhash.packing import pack_values, unpack_values, xor_bits
from dedup_cli.options.input_options import InputOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.worker_parts import ReadIds
from dedup_cli.text.shingles import batch_shingles

if TYPE_CHECKING:
    from dedup_cli.minhash.universe import UniversePermutations

Hasher: TypeAlias = "HashFamily | UniversePermutations"

# Small enough that two workers get several batches of a 10 MB corpus, large enough that numpy's per-call
# overhead stays small (1 MB vs 8 MB batches: 0.27 s vs 0.30 s for 16 MB on 2 workers).
BATCH_BYTES = 1 << 20
BATCH_DOCUMENTS = 4096


def batches(documents: Iterable[Record]) -> Iterator[list[Record]]:
    """Documents in batches of about :data:`BATCH_BYTES` bytes or :data:`BATCH_DOCUMENTS` documents, in order."""
    batch: list[Record] = []
    size = 0
    for document in documents:
        batch.append(document)
        size += document.size
        if size >= BATCH_BYTES or len(batch) >= BATCH_DOCUMENTS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


@functools.lru_cache(maxsize=4)
def hasher_for(params: SignatureParams) -> Hasher:
    """The hash family a run needs: k permutations of the universe for integer sets, else k hash functions
    (only kperm uses them; oph derives its keys from the seed); 2k for a store of XOR bits."""
    if params.xor_pairs:
        return hasher_for(params.permutation_params())
    if params.input_kind == "sets":
        from dedup_cli.minhash.universe import UniversePermutations  # only for integer sets

        return UniversePermutations(params.universe, params.num_perm, params.seed)
    return HashFamily.from_seed(params.seed, params.num_perm)


def xor_signatures(signed: tuple[np.ndarray, np.ndarray], params: SignatureParams) -> tuple[np.ndarray, np.ndarray]:
    """(counts, packed 1-bit values of ``params.permutation_params()``) → (counts, packed XOR bits of ``params``):
    a b = 1/2 store's signatures are signed as 2k one-bit values, then combined (Li & König 2010, Sec. 5.3)."""
    counts, packed = signed
    values = unpack_values(packed, 1, params.permutations)
    return counts, pack_values(xor_bits(values), 1)


def sign_texts(texts: Sequence[str], params: SignatureParams, family: HashFamily | None = None,
               kernel: str = "numpy") -> tuple[np.ndarray, np.ndarray]:
    """Shingle, minhash (``params.scheme``: k hash functions ``family``, or one permutation) and pack texts.

    Args:
        texts: n raw texts (normalised here).
        params: text signature parameters.
        family: kperm's hash functions (default: ``params``' own).
        kernel: ``"numpy"`` or ``"numba"``; both give the same bytes.

    Returns:
        (int64[n] shingle counts f, uint8[n, signature_bytes] packed signatures).
    """
    if params.xor_pairs:
        return xor_signatures(sign_texts(texts, params.permutation_params(), family, kernel), params)
    if kernel == "numba":
        return compiled_kernel().sign_texts(texts, params)
    if kernel != "numpy":
        raise ValueError(f"unknown kernel {kernel!r}")
    shingles, offsets = batch_shingles(texts, params.shingle_size, params.shingle_unit, params.tokenisation,
                                       params.short_documents)
    if params.scheme == "oph":
        values = min_hash_values_oph(shingles, offsets, params.num_perm, params.seed)
    else:
        hashes = family if family is not None else hasher_for(params)
        assert isinstance(hashes, HashFamily)
        values = min_hash_values(shingles, offsets, hashes)
    return np.diff(offsets), pack_values(values, params.bits)


def sign_sets(sets: Sequence[np.ndarray], params: SignatureParams,
              permutations: UniversePermutations) -> tuple[np.ndarray, np.ndarray]:
    """Minhash integer sets under true permutations of Ω (the minima themselves are stored) and pack them.

    Returns:
        (int64[n] set sizes f, uint8[n, signature_bytes] packed signatures; an empty set's values are 0).
    """
    if params.xor_pairs:
        return xor_signatures(sign_sets(sets, params.permutation_params(), permutations), params)
    counts = np.array([elements.size for elements in sets], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    elements = np.concatenate(list(sets)) if len(sets) else np.empty(0, dtype=np.uint64)
    values = permutations.min_values(elements, offsets)
    values[counts == 0] = 0
    return counts, pack_values(values, params.bits)


def _batch(records: Sequence[Record], counts: np.ndarray, signatures: np.ndarray) -> DocumentBatch:
    return DocumentBatch(
        ids=[record.id for record in records],
        paths=[record.path for record in records],
        sizes=np.array([record.size for record in records], dtype=np.int64),
        mtimes_ns=np.array([record.mtime_ns for record in records], dtype=np.int64),
        content_hashes=np.array([record.content_hash for record in records], dtype=np.uint64),
        shingle_counts=counts,
        signatures=signatures,
    )


def sign_batch(documents: Sequence[Document], params: SignatureParams, family: HashFamily | None = None,
               kernel: str = "numpy") -> DocumentBatch:
    """One batch of documents as the rows a store writes."""
    return _batch(documents, *sign_texts([document.text for document in documents], params, family, kernel))


def sign_set_batch(sets: Sequence[IntegerSet], params: SignatureParams,
                   permutations: UniversePermutations) -> DocumentBatch:
    """One batch of integer sets as the rows a store writes."""
    return _batch(sets, *sign_sets([integer_set.elements for integer_set in sets], params, permutations))


def sign_records(batch: Sequence[Record], params: SignatureParams, hasher: Hasher | None = None,
                 kernel: str = "numpy") -> DocumentBatch:
    """Sign one batch of documents (text, with ``kernel``) or integer sets, as ``params.input_kind`` says."""
    hasher = hasher if hasher is not None else hasher_for(params)
    if params.input_kind == "sets":
        return sign_set_batch(batch, params, hasher)  # type: ignore[arg-type]
    return sign_batch(batch, params, hasher, kernel)  # type: ignore[arg-type]


def sign_columns(columns: TextColumns, params: SignatureParams, kernel: str = "numpy") -> tuple[np.ndarray, np.ndarray]:
    """Sign documents read as columns: the compiled kernel reads their UTF-8 buffer as it is (only non-ASCII
    texts are normalised, in Python), the numpy kernel their decoded texts.

    Returns:
        (int64[n] shingle counts f, uint8[n, signature_bytes] packed signatures), as :func:`sign_texts`.
    """
    if params.xor_pairs:
        return xor_signatures(sign_columns(columns, params.permutation_params(), kernel), params)
    if kernel == "numba":
        compiled = compiled_kernel()
        data, offsets, ascii_documents = compiled.normalise_encoded(columns.data, columns.offsets, columns.ascii)
        return compiled.sign_encoded(data, offsets, params, ascii_documents)
    return sign_texts(columns.texts(), params, kernel=kernel)


@dataclass
class SignedTask:
    """One reading task read and signed: its rows, and what the run needs to accept them.

    ``ids``, ``wheres`` (where each document was read, for messages), ``empty`` (bool: empty or white-space-only)
    and ``fresh`` (bool: new or changed since the store signed it: only these were signed) are aligned with the
    documents read, but for those whose id another source holds (in ``placed``, for the driver to settle);
    ``batch`` holds the rows of the fresh ones, in order; ``placed`` the documents whose row the driver writes
    (moved ones, and those candidates: :mod:`dedup_cli.engine.stages.record_places`); ``report`` is what reading the
    task skipped or repaired.
    """

    batch: DocumentBatch
    ids: list[str]
    wheres: Wheres
    empty: np.ndarray
    fresh: np.ndarray
    report: ReadReport
    kernel: str
    placed: Placed


def sign_task(task: ReadTask, params: SignatureParams, options: InputOptions, kernel: str = "numpy",
              stored: DocumentIndex | None = None) -> SignedTask:
    """Read one task (as ``options`` say) and sign with ``kernel`` its documents that are new or changed since
    ``stored`` (the store's index; None: all of them), noting the moved ones and those whose id another source
    holds (:func:`dedup_cli.engine.stages.record_places.read_status`): the unit of work a worker runs. Duplicate
    ids are for the caller to drop, in task order (:func:`dedup_cli.inputs.reading.accept_documents`)."""
    if params.input_kind == "sets":
        return _sign_set_task(task, params, options, stored)
    found = read_task_columns(task, options)
    columns = found.columns
    status, rows = read_status(columns.ids, columns.locations, columns.content_hashes, stored)

    def sign_some(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sign_columns(columns.take(positions), params, kernel)

    placed = placed_documents(status, rows, columns.ids, columns.locations, columns.wheres, columns.sizes,
                              columns.mtimes_ns, columns.content_hashes, stored, params.signature_bytes, sign_some)
    if len(placed) and placed.candidate.any():
        kept = np.flatnonzero(status != ELSEWHERE)
        columns, status = columns.take(kept), status[kept]
    fresh = (status == NEW) | (status == CHANGED)
    signing = columns.take(np.flatnonzero(fresh))
    counts, signatures = sign_columns(signing, params, kernel)
    batch = DocumentBatch(signing.ids, signing.locations, signing.sizes, signing.mtimes_ns, signing.content_hashes,
                          counts, signatures)
    return SignedTask(batch, columns.ids, columns.wheres, columns.empty, fresh, found.report, kernel, placed)


def _sign_set_task(task: ReadTask, params: SignatureParams, options: InputOptions,
                   stored: DocumentIndex | None) -> SignedTask:
    """:func:`sign_task` of integer sets, read record by record."""
    read = read_task(task, options)
    documents = read.documents
    ids = [document.id for document in documents]
    hashes = np.array([document.content_hash for document in documents], np.uint64)
    locations = [document.path for document in documents]
    status, rows = read_status(ids, locations, hashes, stored)

    def sign_some(positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        signed = sign_records([documents[p] for p in positions.tolist()], params)
        return signed.shingle_counts, signed.signatures

    placed = placed_documents(status, rows, ids, locations, read.wheres,
                              np.array([d.size for d in documents], np.int64),
                              np.array([d.mtime_ns for d in documents], np.int64), hashes, stored,
                              params.signature_bytes, sign_some)
    if len(placed) and placed.candidate.any():
        kept = np.flatnonzero(status != ELSEWHERE).tolist()
        documents, status = [documents[p] for p in kept], status[kept]
        read.wheres = [read.wheres[p] for p in kept]
    fresh = (status == NEW) | (status == CHANGED)
    batch = sign_records([document for document, new in zip(documents, fresh.tolist(), strict=True) if new], params)
    return SignedTask(batch, [document.id for document in documents], read.wheres,
                      np.array([document.is_empty for document in documents], dtype=np.bool_), fresh, read.report,
                      "numpy", placed)


@dataclass
class Signed:
    """What an engine's signing of a run did: the reading report, documents written (and of those, empty ones),
    documents found unchanged, documents found at a new place (``moved``: written again unsigned), the ids read
    or found unchanged (what a prune keeps), as strings or as the columns the local engine's workers return, and
    the stored documents that the sources read completely no longer hold (``removed``, by the run in any case)."""

    report: ReadReport = field(default_factory=ReadReport)
    documents: int = 0
    empty: int = 0
    unchanged: int = 0
    moved: int = 0
    seen: list[str] = field(default_factory=list)
    seen_ids: list[ReadIds] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
