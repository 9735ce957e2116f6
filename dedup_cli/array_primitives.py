"""Numpy primitives every stage shares: distinct sorted values, the splitmix64 mixer, large arrays in huge pages,
the one code of a pair of documents, membership in sorted values, and the keys and splitters of a sample sort.

The lowest layer of the package with :mod:`dedup_cli.errors` and :mod:`dedup_cli.atomic_files`: it imports numpy
and nothing of dedup, so the text, minhash, candidate and grouping stages can all use it.
"""

from __future__ import annotations

import mmap

import numpy as np

_SHIFT_30, _SHIFT_27, _SHIFT_31 = np.uint64(30), np.uint64(27), np.uint64(31)
_SHIFT_16, _SHIFT_13 = np.uint32(16), np.uint32(13)
_MIX32_1, _MIX32_2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_MIX_1, _MIX_2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


HUGE_PAGE_BYTES = 32 << 20
"""Arrays from this size on are mapped in huge pages where the system offers them (:func:`large_empty`)."""


def large_empty(shape: int | tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """``np.empty(shape, dtype)``; from :data:`HUGE_PAGE_BYTES` on, a private anonymous mapping that asks for
    transparent huge pages (Linux's ``MADV_HUGEPAGE``), unmapped when the array is freed.

    Filling fresh memory faults it in a page at a time: a band's keys of 10^7 documents are 234,000 pages of 4 KB,
    and on a virtual machine each fault is dear (a 960 MB array filled in 2.1 s here, 0.17 s in 2 MB pages).
    Elsewhere, or below the size, or where the system refuses, it is ``np.empty``.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    size = count * dtype.itemsize
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if size < HUGE_PAGE_BYTES or advice is None:
        return np.empty(shape, dtype)
    try:
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        memory.madvise(advice)
    except (OSError, ValueError, AttributeError):
        return np.empty(shape, dtype)
    return np.frombuffer(memory, dtype, count).reshape(shape)


def shared_empty(shape: int | tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised array in anonymous shared memory (``MAP_SHARED | MAP_ANONYMOUS``): what processes forked
    after it write into it, the others (their parent among them) see."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype)
    memory = mmap.mmap(-1, count * dtype.itemsize)  # MAP_SHARED | MAP_ANONYMOUS
    return np.frombuffer(memory, dtype, count).reshape(shape)


def first_of_runs(ordered: np.ndarray) -> np.ndarray:
    """bool[n]: True where a sorted array's value differs from the one before (and at position 0)."""
    first = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values in ascending order.

    Same result as ``np.unique`` on 1-D integer arrays, by sort and mask: numpy 2.4's ``np.unique`` took
    about 1 s for 10^6 uint64 values here, against 6 ms for this.
    """
    ordered = np.sort(values)
    return ordered[first_of_runs(ordered)]


def pair_codes(first: np.ndarray, second: np.ndarray, documents: int) -> np.ndarray:
    """uint64[m]: first · documents + second, the one code of a pair of documents (first < second < documents,
    exact while documents² < 2^64), whose order is the order of the pairs by (first, second)."""
    return np.asarray(first).astype(np.uint64) * np.uint64(documents) + np.asarray(second).astype(np.uint64)


def code_pairs(codes: np.ndarray, documents: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (int64[m] first, int64[m] second) of codes made by :func:`pair_codes`."""
    width = np.uint64(max(documents, 1))
    codes = np.asarray(codes).astype(np.uint64, copy=False)
    return (codes // width).astype(np.int64), (codes % width).astype(np.int64)


def among(values: np.ndarray, sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``values`` is in ``sorted_values`` (ascending): (bool[m] found, int64[m] its position there,
    valid where found)."""
    if sorted_values.size == 0:
        return np.zeros(np.shape(values), dtype=bool), np.zeros(np.shape(values), dtype=np.int64)
    where = np.minimum(np.searchsorted(sorted_values, values), sorted_values.size - 1)
    return sorted_values[where] == values, where


def sort_keys(columns: list[np.ndarray]) -> np.ndarray:
    """Bytes that sort as the rows sort by ``columns`` (float64 or non-negative int64), one a row: each column
    big-endian, a float's bits flipped so that its order is the order of the bytes."""
    parts = []
    for column in columns:
        if column.dtype.kind == "f":
            bits = np.ascontiguousarray(column, np.float64).view(np.uint64)
            negative = (bits >> np.uint64(63)).astype(bool)
            column = np.where(negative, ~bits, bits | np.uint64(1 << 63))
        parts.append(np.ascontiguousarray(np.asarray(column).astype(">u8")).view(np.uint8).reshape(-1, 8))
    return np.ascontiguousarray(np.hstack(parts)).view(f"S{8 * len(columns)}").ravel()


def evenly_spaced(values: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``values`` at evenly spaced positions, the first and the last among them: a sample
    of a part for drawing a sample sort's splitters."""
    if not len(values):
        return values
    return values[np.linspace(0, len(values) - 1, min(count, len(values))).astype(np.int64)]


def splitters(samples: np.ndarray, parts: int) -> np.ndarray:
    """The ``parts`` − 1 values that cut sorted ``samples`` into ``parts`` runs of about equal size: a row goes to
    the part of ``np.searchsorted(splitters, key, side="right")``."""
    if not len(samples):
        return samples
    return samples[np.linspace(0, len(samples), parts + 1).astype(np.int64)[1:-1]]


def mix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, a bijection of uint64 with full avalanche; returns a new array."""
    return mix64_inplace(np.array(values, dtype=np.uint64, copy=True))


def mix64_inplace(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` of a uint64 array, overwriting it (no temporaries beyond one shift); returns it."""
    z ^= z >> _SHIFT_30
    z *= _MIX_1
    z ^= z >> _SHIFT_27
    z *= _MIX_2
    z ^= z >> _SHIFT_31
    return z


def mix32(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, a bijection of uint32 with full avalanche; returns a new array."""
    z = np.array(values, dtype=np.uint32, copy=True)
    z ^= z >> _SHIFT_16
    z *= _MIX32_1
    z ^= z >> _SHIFT_13
    z *= _MIX32_2
    z ^= z >> _SHIFT_16
    return z
