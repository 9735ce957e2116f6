"""Exact resemblance of sets, for the exact checks of candidate pairs, ``estimate --exact`` and the tests.

R = |A ∩ B| / |A ∪ B| (Li & König 2010, Sec. 1), or |A ∩ B ∩ C| / |A ∪ B ∪ C| (Li, König & Gui 2010, eq. 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray


def _as_unique_array(values: Any) -> NDArray[Any]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"sets must be 1-D arrays of ints or Python sets, got shape {array.shape}")
    return np.unique(array)


def exact_resemblance(set_a: Any, set_b: Any, set_c: Any = None) -> float:
    """Exact resemblance R = |A ∩ B| / |A ∪ B|, or |A ∩ B ∩ C| / |A ∪ B ∪ C| with a third set.

    Li & König 2010, Sec. 1 (2-way); Li, König & Gui 2010, eq. 3 (3-way). Both (all) empty gives
    0.0.

    Args:
        set_a, set_b, set_c: Python sets (or frozensets) or 1-D integer arrays (e.g. uint64 shingle
            hashes); duplicates in arrays are ignored.

    Returns:
        float resemblance in [0, 1].
    """
    sets = [set_a, set_b] if set_c is None else [set_a, set_b, set_c]
    arrays = None
    if not any(isinstance(s, (set, frozenset)) for s in sets):
        arrays = [_as_unique_array(s) for s in sets]
        if len({a.dtype for a in arrays if a.size}) > 1:
            arrays = None  # mixed int64/uint64 would promote to float64 and lose bits
    if arrays is None:
        python_sets = [
            set(s) if isinstance(s, (set, frozenset)) else set(_as_unique_array(s).tolist()) for s in sets
        ]
        intersection = len(set.intersection(*python_sets))
        union = len(set.union(*python_sets))
    else:
        common = arrays[0]
        every = arrays[0]
        for array in arrays[1:]:
            common = np.intersect1d(common, array, assume_unique=True)
            every = np.union1d(every, array)
        intersection, union = common.size, every.size
    return intersection / union if union else 0.0



# Bounds the elements gathered at once by ``pair_resemblances`` (16 bytes each with the pair index).
_ELEMENTS_PER_CHUNK = 1 << 23


def _ragged_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64[Σ lengths]: starts[0] … starts[0] + lengths[0] − 1, then the same for every following run."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(int(ends[-1]) if ends.size else 0)


def pair_resemblances(sets: Sequence[np.ndarray | None], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Exact resemblance |A ∩ B| / |A ∪ B| of many pairs at once: float64[n_pairs].

    Args:
        sets: sorted, distinct arrays of one integer dtype (shingle hashes or set elements), None where a set
            is unknown.
        first, second: int[n_pairs] positions in ``sets``.

    Returns:
        R of (sets[first[p]], sets[second[p]]); NaN where either set is None or both are empty.

    Vectorised: the elements of both sets of a batch of pairs are tagged with their pair, sorted by (pair,
    element), and an element in both sets is one that repeats; no Python runs per pair or per element.
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    result = np.full(first.size, np.nan)
    sizes = np.array([-1 if members is None else members.size for members in sets], dtype=np.int64)
    known = [members for members in sets if members is not None]
    if first.size == 0 or not known:
        return result
    offsets = np.concatenate([[0], np.cumsum(np.maximum(sizes, 0))])
    values = np.concatenate(known)
    size_a, size_b = sizes[first], sizes[second]
    todo = np.flatnonzero((size_a >= 0) & (size_b >= 0) & (size_a + size_b > 0))
    weights = np.cumsum(size_a[todo] + size_b[todo])
    begin = 0
    while begin < todo.size:
        before = int(weights[begin - 1]) if begin else 0
        end = max(begin + 1, int(np.searchsorted(weights, before + _ELEMENTS_PER_CHUNK, side="right")))
        pairs = todo[begin:end]
        a, b = first[pairs], second[pairs]
        lengths = np.concatenate([sizes[a], sizes[b]])
        owner = np.repeat(np.tile(np.arange(pairs.size), 2), lengths)
        elements = values[_ragged_positions(np.concatenate([offsets[a], offsets[b]]), lengths)]
        order = np.lexsort((elements, owner))
        owner, elements = owner[order], elements[order]
        repeated = (owner[1:] == owner[:-1]) & (elements[1:] == elements[:-1])
        shared = np.bincount(owner[1:][repeated], minlength=pairs.size)
        result[pairs] = shared / (sizes[a] + sizes[b] - shared)
        begin = end
    return result


def triple_resemblances(sets: Sequence[np.ndarray | None], docs: np.ndarray) -> np.ndarray:
    """Exact 3-way resemblance |A ∩ B ∩ C| / |A ∪ B ∪ C| of many triples at once (Li, König & Gui 2010, eq. 3):
    float64[n_triples].

    Args:
        sets: sorted, distinct arrays of one integer dtype, None where a set is unknown.
        docs: int[n_triples, 3] positions in ``sets``.

    Returns:
        R of each triple; NaN where a set is None or all three are empty.

    Vectorised as :func:`pair_resemblances`: the elements of the three sets of a batch of triples are tagged with
    their triple and sorted by (triple, element); an element of all three sets is one that appears three times,
    and each distinct (triple, element) is one element of the union.
    """
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    result = np.full(docs.shape[0], np.nan)
    sizes = np.array([-1 if members is None else members.size for members in sets], dtype=np.int64)
    known = [members for members in sets if members is not None]
    if docs.shape[0] == 0 or not known:
        return result
    offsets = np.concatenate([[0], np.cumsum(np.maximum(sizes, 0))])
    values = np.concatenate(known)
    triple_sizes = sizes[docs]
    todo = np.flatnonzero((triple_sizes >= 0).all(axis=1) & (triple_sizes.sum(axis=1) > 0))
    weights = np.cumsum(triple_sizes[todo].sum(axis=1))
    begin = 0
    while begin < todo.size:
        before = int(weights[begin - 1]) if begin else 0
        end = max(begin + 1, int(np.searchsorted(weights, before + _ELEMENTS_PER_CHUNK, side="right")))
        rows = docs[todo[begin:end]]
        members = rows.T.reshape(-1)  # all first documents, then all second, then all third
        lengths = sizes[members]
        owner = np.repeat(np.tile(np.arange(rows.shape[0]), 3), lengths)
        elements = values[_ragged_positions(offsets[members], lengths)]
        order = np.lexsort((elements, owner))
        owner, elements = owner[order], elements[order]
        starts = np.r_[True, (owner[1:] != owner[:-1]) | (elements[1:] != elements[:-1])]
        union = np.bincount(owner[starts], minlength=rows.shape[0])
        run_starts = np.flatnonzero(starts)
        run_lengths = np.diff(np.r_[run_starts, owner.size])
        shared = np.bincount(owner[run_starts][run_lengths == 3], minlength=rows.shape[0])
        result[todo[begin:end]] = shared / union
        begin = end
    return result
