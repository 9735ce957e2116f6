"""oph: one-permutation hashing (Li, Owen & Zhang, NIPS 2012) with optimal densification (Shrivastava, ICML 2017).

Each shingle is hashed once and falls into one of k bins; a bin's value is its minimum, and an empty bin
borrows the value of another bin chosen by a seeded sequence shared by all documents, so Pr(bin j agrees) = R
for every j and the b-bit estimators apply unchanged (:func:`min_hash_values_oph`). Cost: one mix per shingle,
plus densification for documents with fewer shingles than about k.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from dedup_cli.array_primitives import mix64_inplace
from dedup_cli.minhash.feistel import feistel

# Bounds the per-chunk temporaries of hashing the shingles to a few tens of MB whatever the document sizes are.
_ELEMENTS_PER_CHUNK = 1 << 21
# Bin orders are tabulated (uint16[k, k], built once per (k, seed)) up to this k, computed on the fly above it.
_TABULATED_BINS = 2048
_FEISTEL_ROUNDS = 4
# Bounds the [documents, filled bins, k] and [pairs, steps] temporaries of densification.
_DENSIFY_ELEMENTS = 1 << 20
# Draws made at once for every pending empty bin: one row of 8 booleans is one uint64.
_DRAWS_PER_BLOCK = 8


def _oph_keys(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The seeded keys of one-permutation hashing: (uint64[1] shingle key, uint64[k] bin salts,
    uint64[k, rounds] round keys of each bin's order). A stream apart from :class:`HashFamily`'s."""
    generator = np.random.Generator(np.random.PCG64([seed, 0x4F5048]))  # "OPH"
    words = generator.integers(0, 1 << 64, size=1 + num_perm * (1 + _FEISTEL_ROUNDS), dtype=np.uint64,
                               endpoint=False)
    salts = words[1 : 1 + num_perm]
    round_keys = words[1 + num_perm :].reshape(num_perm, _FEISTEL_ROUNDS)
    return words[:1], salts, round_keys


class _BinOrders:
    """For each bin j, a seeded order in which to visit the other bins when j is empty (optimal densification).

    Shrivastava (ICML 2017) fills an empty bin j by drawing bins from a hash of (j, attempt) until one is
    non-empty, with the same draws for every document. Here bin j's draws are σ_j(0), σ_j(1), … for a keyed
    permutation σ_j of 2^(2h) ≥ k steps (a 4-round Feistel network; values ≥ k are skipped). The bins in
    order of first appearance of a with-replacement draw form a uniform random permutation, so the law is
    the paper's; and because σ_j is invertible the same bin can be found from the other side, as the
    filled bin i of smallest rank σ_j⁻¹(i). A document with m of k bins filled costs about k/m draws, or
    m ranks, per empty bin: draws for m ≥ √k, ranks below. (Measured: the estimators' variance is the same,
    within 2 %, as with truly random permutations for the bin orders.)

    Up to ``_TABULATED_BINS`` bins both directions are tables (2·k² uint16); above, σ_j is computed on
    the fly, which is much slower for documents of fewer than about k shingles (kperm is then faster).
    """

    def __init__(self, round_keys: np.ndarray) -> None:
        self.num_bins = round_keys.shape[0]
        self.half_bits = max(1, ((self.num_bins - 1).bit_length() + 1) // 2)
        self.round_keys = round_keys
        self.steps = 1 << (2 * self.half_bits)
        self.order: np.ndarray | None = None  # uint16[k, k]: row j, the bins < k in j's visiting order
        self.rank_by_bin: np.ndarray | None = None  # uint16[k, k]: [i, j], bin i's place in j's order
        if self.num_bins <= _TABULATED_BINS:
            k = self.num_bins
            bins = np.arange(k, dtype=np.uint64)
            ranks = feistel(np.tile(bins, k), round_keys, self.half_bits, rows=np.repeat(np.arange(k), k),
                            inverse=True).reshape(k, k)
            self.order = np.argsort(ranks, axis=1).astype(np.uint16)
            rank = np.empty((k, k), dtype=np.uint16)
            np.put_along_axis(rank, self.order.astype(np.int64), np.arange(k, dtype=np.uint16)[None, :], axis=1)
            self.rank_by_bin = np.ascontiguousarray(rank.T)
            self.steps = k

    def draws(self, bins: np.ndarray, start: int, stop: int, skip: int) -> np.ndarray:
        """[len(bins), stop − start]: the bins visited at steps [start, stop) for each empty bin in ``bins``,
        any draw ≥ k replaced by ``skip``."""
        if self.order is not None:
            return self.order[:, start:stop].take(bins, axis=0)
        steps = np.arange(start, stop, dtype=np.uint64)
        rows = np.broadcast_to(bins[:, None], (bins.size, steps.size))
        drawn = feistel(np.broadcast_to(steps, rows.shape), self.round_keys, self.half_bits, rows=rows)
        drawn = drawn.astype(np.int64)
        return np.minimum(drawn, skip, out=drawn)

    def ranks(self, filled_bins: np.ndarray) -> np.ndarray:
        """int64 or uint16[..., k]: [..., j] is the step at which bin j's order visits ``filled_bins[...]``."""
        if self.rank_by_bin is not None:
            return self.rank_by_bin[filled_bins]
        rows = np.broadcast_to(np.arange(self.num_bins), (*filled_bins.shape, self.num_bins))
        values = np.broadcast_to(filled_bins[..., None].astype(np.uint64), rows.shape)
        return feistel(values, self.round_keys, self.half_bits, rows=rows, inverse=True)


@functools.lru_cache(maxsize=8)
def _bin_orders(seed: int, num_perm: int) -> _BinOrders:
    """Memoised: the orders depend only on (seed, k), and the tables cost O(k²) to build."""
    return _BinOrders(_oph_keys(seed, num_perm)[2])


def _densify(minima: np.ndarray, filled: np.ndarray, orders: _BinOrders) -> None:
    """Give each empty bin the minimum of the filled bin its order reaches first (optimal densification).

    Args:
        minima: uint64[n_docs, k], the bins' minima; the empty bins are overwritten.
        filled: bool[n_docs, k], which bins hold an element.
        orders: the bins' visiting orders.

    Vectorised across documents: documents with m ≥ √k filled bins draw for all their empty bins at once,
    8 draws at a time; sparser ones rank their m filled bins in every bin's order, grouped by m. Documents
    with no filled bin are left alone (the caller zeroes their values). A filled bin is never written, so
    copying inside ``minima`` is safe.
    """
    num_docs, k = filled.shape
    counts = filled.sum(axis=1)
    cutoff = max(1, math.isqrt(k))
    sparse = (counts > 0) & (counts < cutoff)
    _densify_by_draws(minima, filled, np.flatnonzero((counts >= cutoff) & (counts < k)), orders)
    for filled_count in np.unique(counts[sparse]).tolist():
        docs = np.flatnonzero(counts == filled_count)
        per_call = max(1, _DENSIFY_ELEMENTS // (filled_count * k))
        for begin in range(0, docs.size, per_call):
            _densify_by_ranks(minima, filled, docs[begin : begin + per_call], filled_count, orders)


def _densify_by_draws(minima: np.ndarray, filled: np.ndarray, docs: np.ndarray, orders: _BinOrders) -> None:
    """Each empty bin of ``docs`` takes the first filled bin its order draws, 8 draws at a time."""
    k = filled.shape[1]
    # Column k stands for every draw ≥ k (skipped): never filled.
    padded = np.zeros((docs.size, k + 1), dtype=bool)
    padded[:, :k] = filled[docs]
    rows, bins = np.nonzero(~padded[:, :k])
    index_type = np.int32 if padded.size < 1 << 31 else np.int64
    cells = (rows * (k + 1)).astype(index_type)  # where each pending (document, empty bin)'s row starts
    bases = docs[rows] * k  # and where its document's row starts in ``minima``
    targets = bases + bins  # and the empty bin itself
    flat_padded, flat_minima = padded.ravel(), minima.ravel()
    per_call = max(1, _DENSIFY_ELEMENTS // _DRAWS_PER_BLOCK)
    for start in range(0, orders.steps, _DRAWS_PER_BLOCK):
        if cells.size == 0:
            break
        stop = min(orders.steps, start + _DRAWS_PER_BLOCK)
        resolved = np.zeros(cells.size, dtype=bool)
        for begin in range(0, cells.size, per_call):
            end = min(cells.size, begin + per_call)
            drawn = orders.draws(bins[begin:end], start, stop, k)
            hits = np.zeros((end - begin, _DRAWS_PER_BLOCK), dtype=bool)
            np.take(flat_padded, drawn + cells[begin:end, None], out=hits[:, : drawn.shape[1]])
            packed = hits.view(np.uint64).ravel()
            found = np.flatnonzero(packed)
            if sys.byteorder == "little":
                # The first hit of a row of 8 booleans is the lowest set byte of the row read as a uint64
                # (8× faster than argmax along rows this short).
                lowest = packed[found]
                lowest &= ~lowest + np.uint64(1)
                first = (np.frexp(lowest.astype(np.float64))[1] - 1) >> 3
            else:
                first = hits[found].argmax(axis=1)
            pairs = begin + found
            flat_minima[targets[pairs]] = flat_minima[bases[pairs] + drawn[found, first]]
            resolved[pairs] = True
        pending = np.flatnonzero(~resolved)
        cells, bins, bases, targets = cells[pending], bins[pending], bases[pending], targets[pending]


def _densify_by_ranks(minima: np.ndarray, filled: np.ndarray, docs: np.ndarray, filled_count: int,
                      orders: _BinOrders) -> None:
    """Every empty bin of ``docs`` (each with ``filled_count`` filled bins) takes its filled bin of least rank."""
    filled_bins = np.nonzero(filled[docs])[1].reshape(docs.size, filled_count)
    # [docs, k]: which of the filled bins comes first in each bin's order. Ranks < 2^16 and m ≤ √k < 2^16, so
    # (rank, position) packs into a uint32 whose minimum along the m axis is the argmin (5× numpy's argmin).
    keys = orders.ranks(filled_bins).astype(np.uint32) << 16
    keys |= np.arange(filled_count, dtype=np.uint32)[None, :, None]
    best = keys.min(axis=1) & 0xFFFF
    rows, bins = np.nonzero(~filled[docs])
    minima[docs[rows], bins] = minima[docs[rows], filled_bins[rows, best[rows, bins]]]


def min_hash_values_oph(shingles: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """One-permutation minwise hash values of many shingle sets, densified (Li, Owen & Zhang 2012;
    Shrivastava 2017).

    Each shingle is hashed once, h = mix64(x XOR key); its bin is ⌊k·(h >> 32) / 2^32⌋, i.e. the hash range
    is split into k equal intervals (the top log2 k bits when k is a power of two), so a bin's minimum is the
    minimum h falling in it. Empty bins are filled by optimal densification (:class:`_BinOrders`), the same
    draws for every document, so Pr(position j agrees) = R for every j. The stored value of bin j is
    mix64(minimum ^ salt_j): uniform bits, independent of which element won, and different at two bins that
    copied the same minimum (docs/estimators.md, "What the estimators assume").

    Args:
        shingles: uint64[n_total], the shingle hashes of all documents concatenated.
        offsets: int64[n_docs + 1], document d owns ``shingles[offsets[d]:offsets[d + 1]]``.
        num_perm: k, the number of bins.
        seed: selects the key, the salts and the bin orders.

    Returns:
        uint64[n_docs, k]; rows of empty documents are 0.
    """
    num_docs = offsets.size - 1
    k = int(num_perm)
    key, salts, _ = _oph_keys(seed, k)
    minima = np.full(num_docs * k, np.iinfo(np.uint64).max, dtype=np.uint64)
    filled = np.zeros(num_docs * k, dtype=bool)
    total = int(offsets[-1])
    for start in range(0, total, _ELEMENTS_PER_CHUNK):  # bounds the temporaries for huge documents
        stop = min(total, start + _ELEMENTS_PER_CHUNK)
        hashed = shingles[start:stop] ^ key
        mix64_inplace(hashed)
        cells = hashed >> np.uint64(32)
        cells *= np.uint64(k)
        cells >>= np.uint64(32)  # the bin, ⌊k·(h >> 32) / 2^32⌋
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        last = int(np.searchsorted(offsets, stop, side="left"))
        within = np.diff(np.clip(offsets[first : last + 1], start, stop))
        cells += np.repeat(np.arange(first, last, dtype=np.uint64) * np.uint64(k), within)
        cells = cells.view(np.int64)  # the (document, bin) cell, < 2^63
        np.minimum.at(minima, cells, hashed)
        filled[cells] = True
    values = minima.reshape(num_docs, k)
    _densify(values, filled.reshape(num_docs, k), _bin_orders(int(seed), k))
    values ^= salts
    mix64_inplace(values)
    values[np.diff(offsets) == 0] = 0
    return values
