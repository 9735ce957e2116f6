"""Band keys and buckets: the candidate pairs of LSH banding, vectorised band by band.

Each band of ``rows`` values becomes one 64-bit key per document; documents sharing a key in some band
share a bucket, and every pair inside a bucket is a candidate (Mining of Massive Datasets, Sec. 3.4).
The banding itself is chosen in :mod:`dedup_cli.candidates.banding`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.primitives import mix64, sorted_unique

# Pairs are accumulated as codes i·n + j and de-duplicated whenever this many have piled up (``plan`` models it).
DEDUPLICATE_EVERY = 1 << 24


def band_keys(values: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per band and document: uint64[bands, n_docs].

    ``values`` is uint[n_docs, k]. A band whose rows fit in 64 bits is packed exactly; wider bands are
    combined with a multiply-and-mix hash (collisions have probability ~2^-64).
    """
    n_docs, k = values.shape
    if bands * rows > k:
        raise ValueError(f"bands {bands} × rows {rows} exceeds the {k} values per signature")
    value_bits = values.dtype.itemsize * 8
    keys = np.empty((bands, n_docs), dtype=np.uint64)
    for band in range(bands):
        # Widen one band at a time: widening all k columns at once would cost 8 bytes per value.
        block = values[:, band * rows : (band + 1) * rows].astype(np.uint64)
        key = np.zeros(n_docs, dtype=np.uint64)
        if rows * value_bits <= 64:
            for row in range(rows):
                key |= block[:, row] << np.uint64(row * value_bits)
        else:
            for row in range(rows):
                key = mix64(key * np.uint64(0x9E3779B97F4A7C15) + block[:, row])
        keys[band] = key
    return keys


def bucket_pairs(
    sorted_docs: np.ndarray, sorted_keys: np.ndarray, max_bucket: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """All pairs within runs of equal keys; runs longer than ``max_bucket`` are cut to it."""
    n = sorted_keys.size
    if n < 2:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, 0
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    lengths = np.diff(np.r_[starts, n])
    oversized = int(np.count_nonzero(lengths > max_bucket))
    lengths = np.minimum(lengths, max_bucket)
    keep = lengths >= 2
    starts, lengths = starts[keep], lengths[keep]
    if starts.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, oversized
    # Every member at offset o of a run of length L pairs with the L − 1 − o members after it.
    member_run = np.repeat(np.arange(starts.size), lengths)
    member_offset = np.arange(member_run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    member_position = starts[member_run] + member_offset
    partners = lengths[member_run] - 1 - member_offset
    first = np.repeat(member_position, partners)
    step = np.arange(first.size) - np.repeat(np.cumsum(partners) - partners, partners) + 1
    second = first + step
    return sorted_docs[first], sorted_docs[second], oversized


@dataclass
class CandidateResult:
    """Candidate pairs (i < j, sorted, unique) and how many buckets were cut."""

    first: np.ndarray  # int64[n_pairs]
    second: np.ndarray  # int64[n_pairs]
    oversized_buckets: int


def candidate_pairs(
    values: np.ndarray, bands: int, rows: int, eligible: np.ndarray | None = None, max_bucket: int = 1000
) -> CandidateResult:
    """Candidate pairs from banding ``values`` (uint[n_docs, k]); only ``eligible`` documents take part.

    A bucket holding more than ``max_bucket`` documents (boilerplate shared by everything) contributes
    only the pairs among its first ``max_bucket`` members, and is counted in ``oversized_buckets``.
    """
    n_docs = values.shape[0]
    docs = np.arange(n_docs) if eligible is None else np.flatnonzero(eligible)
    # Keys of all documents, then each band's eligible ones: selecting rows of ``values`` first would copy
    # the whole signature matrix.
    keys = band_keys(values, bands, rows)
    codes: list[np.ndarray] = []
    pending = 0
    oversized = 0
    for all_keys in keys:
        band_key = all_keys if docs.size == n_docs else all_keys[docs]
        order = np.argsort(band_key, kind="stable")
        first, second, cut = bucket_pairs(docs[order], band_key[order], max_bucket)
        oversized += cut
        low, high = np.minimum(first, second), np.maximum(first, second)
        codes.append(low.astype(np.uint64) * np.uint64(n_docs) + high.astype(np.uint64))
        pending += low.size
        if pending > DEDUPLICATE_EVERY:
            codes = [sorted_unique(np.concatenate(codes))]
            pending = codes[0].size
    unique = sorted_unique(np.concatenate(codes)) if codes else np.empty(0, dtype=np.uint64)
    return CandidateResult(
        first=(unique // np.uint64(n_docs)).astype(np.int64),
        second=(unique % np.uint64(n_docs)).astype(np.int64),
        oversized_buckets=oversized,
    )
