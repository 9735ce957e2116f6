"""Seeded pseudo-random permutations of a stated universe Ω = {0 … D−1}, for integer-set input.

When the input is already sets of integers over a universe D (e.g. word → set of document ids, the papers'
word-association experiments), r = f/D is a property of the data and the dense estimators (docs/estimators.md,
"Dense sets") need minima that live in [0, D) with the law of min π(S) under a random permutation π of Ω.
A hash onto 64 bits would give the sparse law instead (r ≈ 0), so here each π_j is a keyed Feistel network
on the smallest even number of bits 2h with 2^(2h) ≥ D, restricted to Ω by cycle walking (Black & Rogaway
2002): re-encrypt while the value is ≥ D. The network is a bijection of {0 … 2^(2h) − 1}, so walking from a
value in Ω ends in Ω and the restriction is a bijection of Ω; since 2^(2h) < 4D, a walk takes fewer than 4
steps on average.

The network is :func:`dedup_cli.minhash.feistel.feistel`. Round keys of permutation j are row j of a PCG64
stream seeded by ``seed``, so permutation j does not depend on ``num_perm``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.minhash.feistel import feistel
from dedup_cli.options.vocabulary import MAX_SET_UNIVERSE

# Luby–Rackoff: 4 rounds give a strong pseudo-random permutation; 2 more buy margin on the tiny domains
# (a few bits per half) where the asymptotic argument says little, for 1.5× the cost.
FEISTEL_ROUNDS = 6
# Bounds the [num_perm, chunk] uint64 temporaries of min_values to a few tens of MB whatever k is.
_ELEMENTS_PER_CHUNK = 1 << 20
# A table of π_j(x) for every j and every x of Ω, up to this many entries (64 MB), is built once and read by index
# when a batch holds at least D elements: a gather instead of six Feistel rounds per element and permutation.
_TABLE_ENTRIES = 1 << 23


@dataclass(frozen=True)
class UniversePermutations:
    """k seeded pseudo-random permutations π_1 … π_k of Ω = {0 … D−1} (keyed Feistel + cycle walking).

    Attributes:
        universe: D, 2 ≤ D ≤ 2^62.
        num_perm: k ≥ 1.
        seed: non-negative int; the same (universe, seed) gives the same π_j for every j < k.

    The network (FEISTEL_ROUNDS, the mixer, the key schedule) is part of what a stored signature means:
    changing any of them changes every minimum.
    """

    universe: int
    num_perm: int
    seed: int = 1
    _half_bits: int = field(init=False, repr=False, compare=False)
    _round_keys: np.ndarray = field(init=False, repr=False, compare=False)  # uint64[num_perm, FEISTEL_ROUNDS]
    _table: list[np.ndarray] = field(init=False, repr=False, compare=False, default_factory=list)  # [uint64[k, D]]

    def __post_init__(self) -> None:
        if not isinstance(self.universe, (int, np.integer)) or not 2 <= self.universe <= MAX_SET_UNIVERSE:
            raise ValueError(f"universe {self.universe!r} is out of range; use an integer from 2 to 2^62")
        if not isinstance(self.num_perm, (int, np.integer)) or self.num_perm < 1:
            raise ValueError(f"num_perm {self.num_perm!r} must be a positive integer")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed {self.seed!r} must be a non-negative integer")
        # Smallest h with 2^(2h) ≥ D, at least 1 (D = 2 still needs a 2-bit domain).
        half_bits = max(1, ((int(self.universe) - 1).bit_length() + 1) // 2)
        # random_raw draws whole 64-bit words row by row, so row j is the same for any num_perm > j.
        keys = np.random.PCG64(int(self.seed)).random_raw(int(self.num_perm) * FEISTEL_ROUNDS)
        object.__setattr__(self, "_half_bits", half_bits)
        object.__setattr__(self, "_round_keys", keys.astype(np.uint64).reshape(int(self.num_perm), FEISTEL_ROUNDS))

    def _as_values(self, values: ArrayLike) -> np.ndarray:
        """Validated uint64[n]; raise ValueError naming a value outside Ω."""
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"values must be a 1-d array of integers, got shape {array.shape}")
        if array.size == 0:
            return np.zeros(0, dtype=np.uint64)
        if array.dtype.kind not in "iu":
            raise ValueError(f"values must be integers in [0, {self.universe}), got dtype {array.dtype}")
        if array.dtype.kind == "i" and array.min() < 0:
            raise ValueError(
                f"value {int(array.min())} is outside the universe [0, {self.universe}); "
                "integer-set input must hold ids from 0 to D − 1"
            )
        if int(array.max()) >= self.universe:
            raise ValueError(
                f"value {int(array.max())} is outside the universe [0, {self.universe}); "
                f"raise the universe to at least {int(array.max()) + 1} or remap the ids"
            )
        return array.astype(np.uint64, copy=False)

    def _apply(self, values: np.ndarray) -> np.ndarray:
        """π_j(x) for all j and all x in Ω: uint64[k, n]."""
        keys = self._round_keys  # [k, rounds]
        out = feistel(values[None, :], keys[:, None, :], self._half_bits)
        # Cycle walking: only values that left Ω are re-encrypted, each with its own permutation's keys.
        universe = np.uint64(self.universe)
        outside = np.flatnonzero(out >= universe)
        while outside.size:
            rows = outside // values.size
            walked = feistel(out.flat[outside], keys[rows], self._half_bits)
            out.flat[outside] = walked
            outside = outside[walked >= universe]
        return out

    def _applied(self, values: np.ndarray, batch: int) -> np.ndarray:
        """:meth:`_apply`, from the table of every π_j(x) when Ω is small and the batch of ``batch`` elements
        is at least as large (the same values: the table is :meth:`_apply` of 0 … D−1)."""
        if self.num_perm * self.universe > _TABLE_ENTRIES or batch < self.universe:
            return self._apply(values)
        if not self._table:
            self._table.append(self._apply(np.arange(self.universe, dtype=np.uint64)))
        return np.take(self._table[0], values.astype(np.intp), axis=1)

    def min_values(self, values: ArrayLike, offsets: ArrayLike) -> np.ndarray:
        """Minwise values z_{s,j} = min π_j(S_s) of many sets at once (Li, König & Gui 2010, Alg. 1).

        Args:
            values: uint64[n_total] (any integer dtype), the elements of all sets concatenated, each in [0, D).
            offsets: int64[n_sets + 1], non-decreasing, offsets[0] = 0 and offsets[-1] = n_total; set s
                owns ``values[offsets[s]:offsets[s + 1]]`` (CSR layout).

        Returns:
            uint64[n_sets, k]. The row of an empty set is D in every column ("no minimum": larger than
            any real minimum, and never a valid element).

        Raises:
            ValueError: a value outside [0, D), or malformed offsets.
        """
        array = self._as_values(values)
        bounds = np.asarray(offsets)
        if bounds.ndim != 1 or bounds.size < 1 or bounds.dtype.kind not in "iu":
            raise ValueError(f"offsets must be a 1-d integer array of n_sets + 1 entries, got {bounds!r}")
        bounds = bounds.astype(np.int64)
        if bounds[0] != 0 or bounds[-1] != array.size or np.any(np.diff(bounds) < 0):
            raise ValueError(
                f"offsets must be non-decreasing from 0 to len(values) = {array.size}, got {bounds[0]} … {bounds[-1]}"
            )
        num_sets = bounds.size - 1
        k = self.num_perm
        minima = np.full((num_sets, k), self.universe, dtype=np.uint64)
        total = array.size
        chunk = max(1, _ELEMENTS_PER_CHUNK // k)
        for start in range(0, total, chunk):
            stop = min(total, start + chunk)
            permuted = self._applied(array[start:stop], total)  # [k, stop − start]
            # Non-empty sets overlapping [start, stop) tile it exactly, so their clipped starts are strictly
            # increasing and reduceat gives one minimum per set; a set cut by a chunk edge is finished by
            # np.minimum with what earlier chunks found.
            first = int(np.searchsorted(bounds, start, side="right")) - 1
            last = int(np.searchsorted(bounds, stop, side="left"))
            sets = np.arange(first, last)
            sets = sets[bounds[sets + 1] > bounds[sets]]
            starts = np.maximum(bounds[sets], start) - start
            partial = np.minimum.reduceat(permuted, starts, axis=1)  # [k, len(sets)]
            minima[sets] = np.minimum(minima[sets], partial.T)
        return minima
