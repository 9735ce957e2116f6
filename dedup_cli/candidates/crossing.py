"""Band keys held by more than one share of the documents, found without moving the keys themselves.

When the documents are split into shares (contiguous ranges of document numbers, one worker's at a time), a
bucket of a band is either inside one share, where that share pairs its members itself, or crosses shares. Almost
every band key is a bucket of one document (LSH's chance collisions are rare by design), so instead of sending
every (key, document) row to be sorted by key, each share sends, per band, the set of its keys' **fingerprints**:
``position_bits`` bits of a hash of (band, key), ``position_bits`` = log2(documents) + :data:`SPARSITY_BITS` so
that a document's fingerprint meets another key's by chance with probability about 2^-SPARSITY_BITS. The
fingerprints are cut into ``slices`` by their value modulo the number of slices, one slice per owner, and each
share's part of a slice is sent Elias–Fano coded (:mod:`dedup_cli.candidates.elias_fano`): about
SPARSITY_BITS + log2(shares) + 2 bits a row instead of the row's 12 bytes.

An owner decodes the shares' sets of its slice and finds the fingerprints present in two shares or more
(:func:`shared_fingerprints`); each share then sends only its rows whose fingerprint is one of those (every
member of every crossing bucket, and the few rows whose fingerprint met another key's by chance) to the owner of
the fingerprint's slice, which sorts them by exact key and pairs them (:func:`dedup_cli.candidates.buckets.
band_pair_codes`). A share pairs its other rows itself: their buckets lie whole inside it. The candidate pairs
are exactly those of sorting every row by key, buckets cut at ``max_bucket`` included, since every bucket is
paired whole in one place.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.candidates.elias_fano import EliasFano, decode, encode
from dedup_cli.primitives import first_of_runs, mix64, sorted_unique

SPARSITY_BITS = 6
"""Fingerprints have 2^6 = 64 times as many values as there are documents: a singleton key meets another share's
key by chance with probability about 1/64, and its row then travels needlessly."""

_BAND_SALT = np.uint64(0x9E3779B97F4A7C15)


def position_bits(documents: int) -> int:
    """Bits of a fingerprint for a corpus of ``documents`` (see the module docstring), at most 64."""
    return min(64, max(1, int(documents) - 1).bit_length() + SPARSITY_BITS)


def fingerprints(keys: np.ndarray, band: int, bits: int) -> np.ndarray:
    """uint64[n]: ``bits`` bits of a hash of (band, key) for each of ``keys`` (one band's, any unsigned dtype)."""
    salted = keys.astype(np.uint64) ^ mix64(np.array([band + 1], np.uint64) * _BAND_SALT)[0]
    return mix64(salted) >> np.uint64(64 - bits)


def slice_universe(bits: int, slices: int) -> int:
    """The values a fingerprint's position within its slice may take: ⌈2^bits / slices⌉."""
    return -(-(1 << bits) // slices)


def slice_sets(prints: np.ndarray, slices: int, bits: int) -> list[EliasFano]:
    """A share's fingerprints of one band, distinct, cut into ``slices`` by value modulo ``slices``, each set
    coded by its values divided by ``slices`` (ascending within a slice, since the fingerprints are sorted)."""
    unique = sorted_unique(prints)
    owner = (unique % np.uint64(slices)).astype(np.int64)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(slices + 1))
    within = unique[order] // np.uint64(slices)
    universe = slice_universe(bits, slices)
    return [encode(within[bounds[t]:bounds[t + 1]], universe) for t in range(slices)]


def shared_fingerprints(sets: list[EliasFano]) -> list[np.ndarray]:
    """For the sets of one slice and band sent by each share: per share, its values that another share sent too
    (uint64, ascending)."""
    decoded = [decode(found) for found in sets]
    everything = np.sort(np.concatenate(decoded)) if decoded else np.empty(0, np.uint64)
    starts = first_of_runs(everything)
    repeated = np.flatnonzero(~starts)  # the second, third … copy of a value: it is in two sets at least
    common = everything[repeated][first_of_runs(everything[repeated])] if repeated.size else everything[:0]
    return [values[_member(values, common)] for values in decoded]


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """bool[n]: which ``values`` are in ``sorted_set`` (ascending)."""
    if sorted_set.size == 0 or values.size == 0:
        return np.zeros(values.size, bool)
    where = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[where] == values


def crossing_rows(prints: np.ndarray, shared: list[np.ndarray], slices: int) -> np.ndarray:
    """bool[n]: the rows of one band whose fingerprint ``prints`` another share holds too, from the owners'
    answers ``shared`` (per slice: the values within the slice, as :func:`shared_fingerprints` gives them)."""
    absolute = [values * np.uint64(slices) + np.uint64(t) for t, values in enumerate(shared)]
    crossing = np.sort(np.concatenate(absolute)) if absolute else np.empty(0, np.uint64)
    return _member(prints, crossing)


def owners(prints: np.ndarray, slices: int) -> np.ndarray:
    """int64[n]: the slice (owner) of each fingerprint."""
    return (prints % np.uint64(slices)).astype(np.int64)
