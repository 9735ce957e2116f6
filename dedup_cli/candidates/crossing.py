"""Band keys held by more than one share of the documents, found without moving the keys themselves.

When the documents are split into shares (ranges of document numbers, each banded where it lies), a bucket of a
band either lies inside one share, which pairs it itself, or crosses shares. Almost every band key is a bucket of
one document (LSH's chance collisions are rare by design), so instead of sending every (key, document) row to be
sorted by key, each share sends, per band, the set of its keys' **fingerprints** and learns which of them another
share holds too.

- A band key is first mixed by a bijection salted with the band (:func:`band_hashes`: MurmurHash3's finaliser on
  32-bit keys, splitmix64's on 64-bit ones), so equal keys stay equal and distinct keys distinct; a share sorts its
  rows by that hash once per band (documents ascending within a bucket), which gives both its buckets and its
  fingerprints in order.
- A fingerprint is the hash's top ``bits`` bits, ``bits`` = log2(documents) + :data:`SPARSITY_BITS` (at most the
  hash's width, where it is the whole key and exact): another key's fingerprint equals it by chance with
  probability about 2^-SPARSITY_BITS.
- Fingerprints are cut into ``slices`` contiguous ranges, one per owner; a share sends each owner its distinct
  fingerprints of the owner's range Elias–Fano coded (:mod:`dedup_cli.candidates.elias_fano`): about
  SPARSITY_BITS + log2(shares) + 2 bits a row instead of the row's 12 bytes.
- An owner answers each share with the fingerprints of its range that another share sent too
  (:func:`shared_fingerprints`). The share then drops its own pairs of those buckets and sends their rows (key,
  document) to the owners, who sort each bucket whole by key and pair it; it keeps its other pairs, from buckets
  that lie whole inside it.

Either way every bucket is paired whole in one place, members in document order and cut at ``max_bucket``, so
the candidate pairs are exactly those of sorting every row by key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import first_of_runs, mix32, mix64
from dedup_cli.candidates.buckets import bucket_runs, run_pairs
from dedup_cli.candidates.elias_fano import EliasFano, decode, encode

SPARSITY_BITS = 6
"""Fingerprints have 2^6 = 64 times as many values as there are documents: a key alone in its bucket meets
another share's fingerprint by chance with probability about 1/64, and its row then travels needlessly."""

_SALT_64 = 0x9E3779B97F4A7C15
_SALT_32 = 0x9E3779B9


def fingerprint_bits(documents: int, key_bits: int) -> int:
    """Bits of a fingerprint for ``documents`` and keys (hashes) of ``key_bits`` bits."""
    return min(key_bits, max(1, int(documents) - 1).bit_length() + SPARSITY_BITS)


def band_hashes(keys: np.ndarray, band: int) -> np.ndarray:
    """A bijection of one band's keys, salted by the band: uint32 for uint32 keys, else uint64."""
    if keys.dtype == np.uint32:
        return mix32(keys ^ np.uint32((band + 1) * _SALT_32 & 0xFFFFFFFF))
    return mix64(keys.astype(np.uint64) ^ np.uint64((band + 1) * _SALT_64 & 0xFFFFFFFFFFFFFFFF))


def hash_order(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64[n] positions sorted by hash, equal hashes in position order; the hashes in that order): for 32-bit
    hashes one plain sort of hash and position packed together, which gives both without a gather."""
    n = hashes.size
    if hashes.dtype == np.uint32 and n < (1 << 32):
        packed = (hashes.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
        packed.sort()
        return (packed & np.uint64(0xFFFFFFFF)).astype(np.int64), (packed >> np.uint64(32)).astype(np.uint32)
    order = np.argsort(hashes, kind="stable")
    return order, hashes[order]


def fingerprints_of(hashes: np.ndarray, bits: int) -> np.ndarray:
    """uint64[n]: the top ``bits`` bits of each hash."""
    width = hashes.dtype.itemsize * 8
    return (hashes >> hashes.dtype.type(width - bits)).astype(np.uint64)


def slice_starts(bits: int, slices: int) -> np.ndarray:
    """uint64[slices + 1]: the first fingerprint of each owner's range, then 2^bits."""
    return np.array([-(-(t << bits) // slices) for t in range(slices + 1)], dtype=np.uint64)


def owner_of(prints: np.ndarray, bits: int, slices: int) -> np.ndarray:
    """int64[n]: the owner (slice) of each fingerprint."""
    return np.searchsorted(slice_starts(bits, slices), prints, side="right").astype(np.int64) - 1


@dataclass
class BandBuckets:
    """One band of one share, sorted by hash: the rows in that order, its own pairs (with the fingerprint of
    each pair's bucket), the fingerprints of its cut buckets, and its distinct fingerprints."""

    hashes: np.ndarray  # uint32 or uint64 [n], the rows' hashes, ascending
    order: np.ndarray  # int32 or int64 [n], the row (position in the share) of each
    first: np.ndarray  # int64[p], documents
    second: np.ndarray  # int64[p]
    pair_prints: np.ndarray  # uint64[p], the fingerprint of the bucket each pair came from
    cut_prints: np.ndarray  # uint64[c], the fingerprints of buckets cut to max_bucket
    prints: np.ndarray  # uint64[u], distinct fingerprints, ascending

    def rows_of(self, crossing: np.ndarray, bits: int) -> np.ndarray:
        """int64[m]: positions (in hash order) of the rows whose fingerprint is in ``crossing`` (ascending)."""
        if crossing.size == 0 or self.hashes.size == 0:
            return np.empty(0, np.int64)
        width = self.hashes.dtype.itemsize * 8
        shift = width - bits
        low = np.searchsorted(self.hashes, (crossing << np.uint64(shift)).astype(self.hashes.dtype), "left")
        if shift:
            top = ((crossing + np.uint64(1)) << np.uint64(shift)) - np.uint64(1)
            top = np.minimum(top, np.uint64((1 << width) - 1)).astype(self.hashes.dtype)
        else:
            top = crossing.astype(self.hashes.dtype)
        high = np.searchsorted(self.hashes, top, "right")
        lengths = high - low
        if not lengths.any():
            return np.empty(0, np.int64)
        starts = np.repeat(low, lengths)
        return starts + np.arange(starts.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def band_buckets(keys: np.ndarray, docs: np.ndarray, band: int, bits: int, max_bucket: int) -> BandBuckets:
    """Sort one band of a share by hash and pair its buckets (see the module docstring).

    Args:
        keys: the band's key of each document (uint32 or uint64).
        docs: int64[n], the share's documents, ascending.
    """
    hashes = band_hashes(keys, band)
    order, ordered = hash_order(hashes)
    starts, lengths, cut = bucket_runs(ordered, max_bucket)
    first, second = run_pairs(starts, lengths)
    prints = ordered >> ordered.dtype.type(ordered.dtype.itemsize * 8 - bits)
    distinct = prints[first_of_runs(prints)].astype(np.uint64) if prints.size else np.empty(0, np.uint64)
    narrow = order.astype(np.int32) if order.size < (1 << 31) else order
    return BandBuckets(ordered, narrow, docs[order[first]], docs[order[second]], prints[first].astype(np.uint64),
                       prints[starts[cut]].astype(np.uint64), distinct)


def slice_sets(prints: np.ndarray, bits: int, slices: int) -> list[EliasFano]:
    """Distinct ascending fingerprints cut into the owners' ranges, each coded relative to its range's start."""
    starts = slice_starts(bits, slices)
    bounds = np.searchsorted(prints, starts)
    return [encode(prints[bounds[t]:bounds[t + 1]] - starts[t], int(starts[t + 1] - starts[t]))
            for t in range(slices)]


def shared_fingerprints(sets: list[EliasFano]) -> list[np.ndarray]:
    """For the sets of one owner's range and one band, one from each share: per share, its values that another
    share sent too (uint64, ascending, relative to the range's start)."""
    decoded = [decode(found) for found in sets]
    if not decoded:
        return []
    # Each set is sorted: a stable sort of their concatenation merges sorted runs (in linear time, about half
    # the time of a binary search of one set in the other).
    everything = np.sort(np.concatenate(decoded), kind="stable")
    if len(decoded) == 2:  # the common case: a value of both is a value repeated, and both hold all of them
        common = everything[:-1][everything[1:] == everything[:-1]]
        return [common, common]
    repeated = everything[~first_of_runs(everything)] if everything.size else everything
    common = repeated[first_of_runs(repeated)] if repeated.size else repeated
    return [values[member(values, common)] for values in decoded]


def member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """bool[n]: which ``values`` are in ``sorted_set`` (ascending)."""
    if sorted_set.size == 0 or values.size == 0:
        return np.zeros(values.size, bool)
    where = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[where] == values


def absolute(shared: list[np.ndarray], bits: int) -> np.ndarray:
    """The owners' answers for one band (per owner, values relative to its range) as fingerprints, ascending."""
    if not shared:
        return np.empty(0, np.uint64)
    starts = slice_starts(bits, len(shared))
    return np.concatenate([values + starts[t] for t, values in enumerate(shared)])
