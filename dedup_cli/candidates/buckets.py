"""Band keys and buckets: the candidate pairs of LSH banding, vectorised band by band.

Each band of ``rows`` values becomes one 64-bit key per document; documents sharing a key in some band
share a bucket, and every pair inside a bucket is a candidate (Mining of Massive Datasets, Sec. 3.4).
The banding itself is chosen in :mod:`dedup_cli.candidates.banding`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import code_pairs, large_empty, mix64, pair_codes, sorted_unique
from dedup_cli.minhash.packing import unpack_values

# Pairs are accumulated as codes i·n + j and de-duplicated whenever this many have piled up (``plan`` models it).
DEDUPLICATE_EVERY = 1 << 24
# Documents whose band keys are written at a time (:func:`band_keys` into ``out``): 4096 rows of a 256-byte
# signature are 1 MB, a block that stays in the cache while its rows are read band by band.
TRANSPOSE_ROWS = 4096


def band_keys(values: np.ndarray, bands: int, rows: int, dtype: np.dtype | type = np.uint64,
              out: np.ndarray | None = None) -> np.ndarray:
    """One key per band and document: uint64[bands, n_docs] (or ``dtype``, wide enough for a packed band),
    written into ``out`` when given (a [bands, n_docs] array or view of that dtype).

    ``values`` is uint[n_docs, k]. A band whose rows fit in 64 bits is packed exactly, row r in bits
    [r·w, (r+1)·w) of the key; wider bands are combined with a multiply-and-mix hash (collisions have
    probability ~2^-64).
    """
    n_docs, k = values.shape
    if bands * rows > k:
        raise ValueError(f"bands {bands} × rows {rows} exceeds the {k} values per signature")
    value_bits = values.dtype.itemsize * 8
    if rows * value_bits in (16, 32, 64) and sys.byteorder == "little":
        # The packed key of a band is its rows' bytes read as one little-endian integer: a view, no shifts, and
        # one strided copy into the [band, document] layout (a view needs only the values' rows contiguous).
        block = values[:, : bands * rows]
        if block.strides[-1] != block.itemsize:
            block = np.ascontiguousarray(block)
        packed = block.view(f"<u{rows * value_bits // 8}")
        if out is None:
            return packed.T.astype(dtype)
        # Transposed a block of documents at a time: a block's rows stay in the cache while each band reads its
        # column of them (the whole array band after band would stream every row in from memory once a band).
        for start in range(0, n_docs, TRANSPOSE_ROWS):
            out[:, start : start + TRANSPOSE_ROWS] = packed[start : start + TRANSPOSE_ROWS].T
        return out
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
    keys = keys if np.dtype(dtype) == np.uint64 else keys.astype(dtype)
    if out is None:
        return keys
    out[...] = keys
    return out


def bucket_runs(sorted_keys: np.ndarray, max_bucket: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The buckets of keys sorted so that equal keys are adjacent: (starts int64[b], lengths int64[b] cut to
    ``max_bucket``, cut bool[b]), buckets of one member left out (they pair with nothing).

    Found from the positions where a key repeats the one before, which are few (most buckets hold one document),
    so nothing of the size of the keys is built beyond one boolean mask.
    """
    empty = np.empty(0, dtype=np.int64)
    if sorted_keys.size < 2:
        return empty, empty, np.empty(0, bool)
    repeats = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])  # i: key i + 1 equals key i
    if repeats.size == 0:
        return empty, empty, np.empty(0, bool)
    breaks = np.flatnonzero(np.diff(repeats) != 1)
    starts = repeats[np.r_[0, breaks + 1]]
    lengths = repeats[np.r_[breaks, repeats.size - 1]] + 2 - starts
    return starts, np.minimum(lengths, max_bucket), lengths > max_bucket


def run_pairs(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (first, second) of every pair within each run [start, start + length), first < second."""
    if starts.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    # Every member at offset o of a run of length L pairs with the L − 1 − o members after it.
    member_run = np.repeat(np.arange(starts.size), lengths)
    member_offset = np.arange(member_run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    member_position = starts[member_run] + member_offset
    partners = lengths[member_run] - 1 - member_offset
    first = np.repeat(member_position, partners)
    step = np.arange(first.size) - np.repeat(np.cumsum(partners) - partners, partners) + 1
    return first, first + step


def key_dtype(rows: int, value_dtype: np.dtype) -> np.dtype:
    """The narrowest dtype that holds a band key exactly: uint32 when ``rows`` values at their dtype's stride
    (how :func:`band_keys` packs them) fit in 32 bits, else uint64 (packed up to 64 bits, hashed beyond)."""
    return np.dtype(np.uint32 if rows * np.dtype(value_dtype).itemsize * 8 <= 32 else np.uint64)


class SortBuffers:
    """What sorting a band allocates, kept for the next band of the same process: the packed sort words (key or
    key prefix above, position below; in huge pages where offered, :func:`dedup_cli.array_primitives.large_empty`)
    and the positions 0 … n − 1. A band of 10^7 documents would otherwise fault in 120 MB of fresh memory, and on
    some machines that costs more than the sort itself."""

    def __init__(self, size: int) -> None:
        self.packed = large_empty(size, np.uint64)
        self.positions = np.arange(size, dtype=np.uint32)


def bucket_order(keys: np.ndarray, buffers: SortBuffers | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(order, keys[order]): positions sorted by key, equal keys in position order; of 64-bit keys, only the
    positions whose key may be shared (a document alone in its bucket pairs with nothing).

    32-bit keys are sorted together with their positions as one uint64 each (key above, position below): one
    sort of plain integers instead of a stable argsort, about twice as fast; both results are then strided views
    of that one sorted array (little-endian: the position is the lower half), so nothing of the size of the keys
    is copied out of it. With ``buffers`` (at least as large as the keys) that array is theirs: the views are
    valid until the next band sorted with them. 64-bit keys (rows of 16-bit values) take
    :func:`_wide_bucket_order`, the same one sort of plain integers.
    """
    n = keys.size
    if n >= (1 << 32):
        order = np.argsort(keys, kind="stable")
        return order, keys[order]
    if buffers is not None and buffers.positions.size >= n:
        packed, positions = buffers.packed[:n], buffers.positions[:n]
    else:
        packed, positions = np.empty(n, np.uint64), np.arange(n, dtype=np.uint32)
    if keys.dtype == np.uint32 and sys.byteorder == "little":
        halves = packed.view(np.uint32)
        halves[1::2] = keys
        halves[0::2] = positions
        packed.sort()
        return halves[0::2], halves[1::2]
    if keys.dtype == np.uint64:
        return _wide_bucket_order(keys, packed, positions)
    order = np.argsort(keys, kind="stable")
    return order, keys[order]


# Words compared at a time when finding runs of equal prefixes (8 MB of temporaries).
COMPARE_BLOCK = 1 << 20
# Fibonacci hashing's odd multiplier: a bijection of 64-bit words whose top bits depend on every bit of the key.
SPREAD = np.uint64(0x9E3779B97F4A7C15)


def _wide_bucket_order(keys: np.ndarray, packed: np.ndarray, positions: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bucket_order` of 64-bit keys, which leave no room for a position beside them in one word.

    Each word holds the top 64 − p bits of key · :data:`SPREAD` above the position (p bits for n positions), and
    one sort of those words (a vectorised sort of plain integers, where a stable argsort of the keys themselves
    is a merge sort several times slower) brings every run of equal keys together, in position order, inside a
    run of equal prefixes. Only the positions in runs of two or more prefixes are kept, few beside n (the
    documents that share a bucket, and about n²/2^(65−p) chance prefix collisions), and ordered by (full key,
    position): the buckets, and their members' order, of a stable argsort."""
    n = keys.size
    position_bits = max(1, (n - 1).bit_length())
    mask = np.uint64((1 << position_bits) - 1)
    np.multiply(keys, SPREAD, out=packed)
    np.bitwise_and(packed, ~mask, out=packed)
    np.bitwise_or(packed, positions, out=packed)
    packed.sort()
    # Neighbours whose words differ only in the position bits; compared a block at a time, so that no temporary
    # of 8 bytes a document is made beside the words.
    repeats = np.empty(max(n - 1, 0), bool)
    for start in range(0, n - 1, COMPARE_BLOCK):
        end = min(n - 1, start + COMPARE_BLOCK)
        np.less_equal(packed[start + 1 : end + 1] ^ packed[start:end], mask, out=repeats[start:end])
    shared = np.zeros(n, bool)
    shared[1:] = repeats
    shared[:-1] |= repeats
    taken = (packed[shared] & mask).astype(np.int64)
    taken_keys = keys[taken]
    # Within a run of equal prefixes the positions ascend; lexsort is stable, so equal keys keep that order.
    order = np.lexsort((taken, taken_keys))
    return taken[order], taken_keys[order]


def band_pair_codes(keys: np.ndarray, docs: np.ndarray, max_bucket: int, documents: int,
                    buffers: SortBuffers | None = None) -> tuple[np.ndarray, int]:
    """The candidate pairs of one band as codes first · documents + second (first < second), and the buckets
    cut to ``max_bucket``: every pair within each run of equal keys, runs longer than ``max_bucket`` cut to it.

    Args:
        keys: the band's key of each document (any unsigned dtype).
        docs: int64[n], the documents, ascending (so a bucket lists its members in document order).
        buffers: what a process sorting band after band reuses (:class:`SortBuffers`).
    """
    order, sorted_keys = bucket_order(keys, buffers)
    starts, lengths, cut = bucket_runs(sorted_keys, max_bucket)
    first, second = run_pairs(starts, lengths)
    # Only the members of buckets are looked up: most documents are alone in theirs (a few hundredths of a pair
    # a document), so the documents are never gathered in key order whole.
    codes = pair_codes(docs[order[first]], docs[order[second]], documents)
    return codes, int(np.count_nonzero(cut))


class PairCodes:
    """Candidate pair codes gathered band after band, de-duplicated whenever :data:`DEDUPLICATE_EVERY` have
    piled up (the same pair is found in every band its documents share)."""

    def __init__(self) -> None:
        self._codes: list[np.ndarray] = []
        self._pending = 0

    def add(self, codes: np.ndarray) -> None:
        self._codes.append(codes)
        self._pending += codes.size
        if self._pending > DEDUPLICATE_EVERY:
            self._codes = [self.unique()]
            self._pending = self._codes[0].size

    def unique(self) -> np.ndarray:
        """The codes so far, sorted and distinct: uint64[m]."""
        return sorted_unique(np.concatenate(self._codes)) if self._codes else np.empty(0, np.uint64)


@dataclass
class CandidateResult:
    """Candidate pairs (i < j, sorted, unique) and how many buckets were cut."""

    first: np.ndarray  # int64[n_pairs]
    second: np.ndarray  # int64[n_pairs]
    oversized_buckets: int

    @classmethod
    def of_codes(cls, codes: np.ndarray, documents: int, oversized_buckets: int) -> CandidateResult:
        """The pairs of sorted distinct codes first · documents + second (:func:`dedup_cli.array_primitives.
        pair_codes`)."""
        return cls(*code_pairs(codes, documents), oversized_buckets)


def candidate_pairs(
    values: np.ndarray, bands: int, rows: int, eligible: np.ndarray | None = None, max_bucket: int = 1000
) -> CandidateResult:
    """Candidate pairs from banding ``values`` (uint[n_docs, k]); only ``eligible`` documents take part.

    A bucket holding more than ``max_bucket`` documents (boilerplate shared by everything) contributes
    only the pairs among its first ``max_bucket`` members, and is counted in ``oversized_buckets``. Keys are
    made one band at a time, so beyond the values this holds one band's keys and their sort.
    """
    n_docs, k = values.shape
    if bands * rows > k:
        raise ValueError(f"bands {bands} × rows {rows} exceeds the {k} values per signature")
    docs = np.arange(n_docs) if eligible is None else np.flatnonzero(eligible)
    codes, oversized = bands_pair_codes(values, range(bands), rows, docs, max_bucket)
    return CandidateResult.of_codes(codes, n_docs, oversized)


def bands_pair_codes(values: np.ndarray, bands: Iterable[int], rows: int, docs: np.ndarray, max_bucket: int
                     ) -> tuple[np.ndarray, int]:
    """The candidate pairs of some bands (numbered from 0) of ``values`` (uint[n_docs, k]) among documents
    ``docs`` (int64, ascending): sorted distinct codes first · n_docs + second, and the buckets cut."""
    n_docs = values.shape[0]
    dtype = key_dtype(rows, values.dtype)
    codes = PairCodes()
    oversized = 0
    for band in bands:
        key = band_keys(values[:, band * rows : (band + 1) * rows], 1, rows, dtype)[0]
        found, cut = band_pair_codes(key if docs.size == n_docs else key[docs], docs, max_bucket, n_docs)
        codes.add(found)
        oversized += cut
    return codes.unique(), oversized


def block_band_keys(packed: np.ndarray, taken: np.ndarray | None, bits: int, num_perm: int, first_band: int,
                    last_band: int, rows: int, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """The keys of bands ``first_band`` … ``last_band`` − 1 (:func:`band_keys`) of a block of stored signatures
    (uint8[n, S], k = ``num_perm`` values of ``bits`` bits packed), of its rows ``taken`` (bool[n]; None: every
    row), written into ``out`` when given: dtype[bands, m]. Both engines key the blocks they read with it (a row
    group, a record batch of a piece), the rows in and out in the same order."""
    values = unpack_values(packed if taken is None else packed[taken], bits, num_perm)
    return band_keys(values[:, first_band * rows : last_band * rows], last_band - first_band, rows, dtype, out)


def round_pair_codes(keys: np.ndarray, docs: np.ndarray, max_bucket: int, documents: int,
                     bands: Iterable[int] | None = None, each: Callable[[], None] | None = None
                     ) -> tuple[np.ndarray, int]:
    """The candidate pairs of some bands of a round's keys (dtype[bands, n], ``bands``: which rows, all by
    default) among the documents ``docs`` (int64[n], the keys' columns): sorted distinct codes (:func:`dedup_cli.
    array_primitives.pair_codes`) and the buckets cut. Documents out of order (pieces whose ids interleave) are
    put in order first, a band at a time, since a bucket is cut at ``max_bucket`` in document order; ``each`` is
    told as each band is done."""
    order = None if docs.size < 2 or bool(np.all(docs[1:] > docs[:-1])) else np.argsort(docs, kind="stable")
    ordered = docs if order is None else docs[order]
    bands = range(keys.shape[0]) if bands is None else list(bands)
    buffers = SortBuffers(docs.size) if len(bands) > 1 else None
    codes, oversized = PairCodes(), 0
    for band in bands:
        found, cut = band_pair_codes(keys[band] if order is None else keys[band][order], ordered, max_bucket,
                                     documents, buffers)
        codes.add(found)
        oversized += cut
        if each is not None:
            each()
    return codes.unique(), oversized

