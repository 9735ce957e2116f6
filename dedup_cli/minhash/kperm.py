"""kperm: k seeded hash functions standing in for k random permutations (Broder; Li & König 2010, Sec. 2).

For each of k hash functions h_j, a set's value is z_j = min over its elements of h_j(x). Here
h_j(x) = a_j·x + c_j (mod 2^64) with random odd a_j, a bijection of the 64-bit universe, applied to shingle
hashes that are already uniformly mixed. Cost: k multiply-adds per shingle (about 0.4 ns each here).

The stored value is ``mix64(z_j)``, not z_j: the low bits of a·x + c depend only on the low bits of x and the
minimum of many values is small, so neither is uniform (docs/estimators.md, "What the estimators assume").
Because h_j is a bijection, z_j identifies the winning element, so two sets whose minima coincide still get
equal values, while distinct winners get independent uniform bits, which is what the b-bit estimators assume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import mix64_inplace

# Bounds the [k, chunk] buffer of the kernel to a few tens of MB whatever k and the document sizes are.
_ELEMENTS_PER_CHUNK = 1 << 21


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
    total = int(offsets[-1])
    # Layout [k, chunk]: each hash function's values of a chunk are contiguous, so the per-document minimum
    # is a reduceat along the last axis (about 8× faster than along the first) and the multiply-add runs
    # over long rows in place, in one buffer reused for every chunk.
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    starts = offsets[nonempty]
    # Column c is the c-th non-empty document, so the documents of a chunk are a slice of columns.
    minima = np.empty((k, nonempty.size), dtype=np.uint64)
    chunk = max(1, min(total, _ELEMENTS_PER_CHUNK // k))
    buffer = np.empty((k, chunk), dtype=np.uint64)
    multipliers = family.multipliers[:, None]
    increments = family.increments[:, None]
    for start in range(0, total, chunk):
        stop = min(total, start + chunk)
        hashed = buffer[:, : stop - start]
        np.multiply(multipliers, shingles[start:stop], out=hashed)
        hashed += increments
        # The non-empty documents overlapping [start, stop), and where each begins inside the chunk.
        first = max(0, int(np.searchsorted(starts, start, side="right")) - 1)
        last = int(np.searchsorted(starts, stop, side="left"))
        continued = minima[:, first].copy() if starts[first] < start else None
        np.minimum.reduceat(hashed, np.maximum(starts[first:last], start) - start, axis=1,
                            out=minima[:, first:last])
        if continued is not None:
            np.minimum(minima[:, first], continued, out=minima[:, first])
    values = np.zeros((num_docs, k), dtype=np.uint64)
    values[nonempty] = mix64_inplace(minima).T
    return values


