"""The seeded minwise hash family: k hash functions standing in for random permutations.

Minwise hashing (Broder; Li & König 2010, Sec. 2): for each of k hash functions h_j, a set's value is
z_j = min over its elements of h_j(x). Here h_j(x) = a_j·x + c_j (mod 2^64) with random odd a_j, a
bijection of the 64-bit universe, applied to shingle hashes that are already uniformly mixed.

The stored value is ``mix64(z_j)``, not z_j: the low bits of a·x + c depend only on the low bits of x
and the minimum of many values is small, so neither is uniform (SPEC, Notation). Because h_j is a
bijection, z_j identifies the winning element, so two sets whose minima coincide still get equal
values, while distinct winners get independent uniform bits, which is what the b-bit estimators assume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MASK64 = (1 << 64) - 1
# Bounds the [chunk, k] temporaries of the kernel to a few tens of MB whatever k and document sizes are.
_ELEMENTS_PER_CHUNK = 1 << 21


def mix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, a bijection of uint64 with full avalanche; returns a new array."""
    z = np.array(values, dtype=np.uint64, copy=True)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


@dataclass(frozen=True)
class HashFamily:
    """k seeded hash functions h_j(x) = a_j·x + c_j mod 2^64, a_j odd."""

    multipliers: np.ndarray  # uint64[k], odd
    increments: np.ndarray  # uint64[k]

    @classmethod
    def from_seed(cls, seed: int, num_perm: int) -> HashFamily:
        generator = np.random.Generator(np.random.PCG64(seed))
        words = generator.integers(0, 1 << 64, size=(2, num_perm), dtype=np.uint64, endpoint=False)
        return cls(multipliers=words[0] | np.uint64(1), increments=words[1])

    @property
    def num_perm(self) -> int:
        return int(self.multipliers.size)


def min_hash_values(shingles: np.ndarray, offsets: np.ndarray, family: HashFamily) -> np.ndarray:
    """Minwise hash values of many shingle sets at once.

    Args:
        shingles: uint64[n_total], the shingle hashes of all documents concatenated.
        offsets: int64[n_docs + 1], document d owns ``shingles[offsets[d]:offsets[d + 1]]``.
        family: the k hash functions.

    Returns:
        uint64[n_docs, k]: ``mix64(min_x h_j(x))`` per document and function; rows of empty
        documents are 0 and must be recognised by their shingle count, not their values.
    """
    num_docs = offsets.size - 1
    k = family.num_perm
    minima = np.full((num_docs, k), np.iinfo(np.uint64).max, dtype=np.uint64)
    total = int(offsets[-1])
    chunk = max(1, _ELEMENTS_PER_CHUNK // k)
    for start in range(0, total, chunk):
        stop = min(total, start + chunk)
        hashed = np.multiply.outer(shingles[start:stop], family.multipliers)
        hashed += family.increments
        # The non-empty documents overlapping [start, stop), and where each begins inside the chunk.
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        last = int(np.searchsorted(offsets, stop, side="left"))
        docs = np.arange(first, last)
        docs = docs[offsets[docs + 1] > offsets[docs]]
        bounds = np.maximum(offsets[docs], start) - start
        minima[docs] = np.minimum(minima[docs], np.minimum.reduceat(hashed, bounds, axis=0))
    values = mix64(minima)
    values[np.diff(offsets) == 0] = 0
    return values
