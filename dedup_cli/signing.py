"""Signing: documents (or integer sets) → shingles → minwise signatures → the Parquet store.

Reads in batches and writes one Parquet row group per batch, so memory does not grow with the corpus.
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
from dedup_cli.hashing import HashFamily, min_hash_values
from dedup_cli.permutation import UniversePermutations
from dedup_cli.shingling import document_shingles
from dedup_cli.signatures import SignatureParams, pack_values
from dedup_cli.storage import DocumentBatch, StoreWriter, read_store_params

Progress = Callable[[int], None]
"""Called with the number of documents just finished."""

BATCH_BYTES = 8 << 20
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
