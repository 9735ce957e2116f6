"""Exact resemblance of sets, for the exact checks of candidate pairs, ``estimate --exact`` and the tests.

R = |A ∩ B| / |A ∪ B| (Li & König 2010, Sec. 1), or |A ∩ B ∩ C| / |A ∪ B ∪ C| (Li, König & Gui 2010, eq. 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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


_QUERIES_PER_BATCH = 1 << 22
"""Elements looked up at once by the batched intersections (a few arrays of 8 bytes each per element)."""
_SIGN_BIT = np.uint64(1 << 63)
_MIX_MULTIPLIERS = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mixed(values: np.ndarray) -> np.ndarray:
    """uint64[n]: each value mixed so that every bit depends on every bit (the shape of the splitmix64 finaliser),
    for fingerprints of sets; only equal values must give equal results."""
    z = values ^ (values >> np.uint64(30))
    z *= _MIX_MULTIPLIERS[0]
    z ^= z >> np.uint64(27)
    z *= _MIX_MULTIPLIERS[1]
    return z ^ (z >> np.uint64(31))


def _ordered_uint64(values: np.ndarray) -> np.ndarray:
    """uint64[n] in the order and with the equalities of integer ``values`` (signed ones with their sign bit
    flipped, so that −1 < 0 still holds)."""
    values = np.asarray(values)
    if values.dtype.kind == "i":
        return values.astype(np.int64).view(np.uint64) ^ _SIGN_BIT
    return values.astype(np.uint64, copy=False)


@dataclass(frozen=True)
class FlatSets:
    """Many sets end to end, as the exact checks hold them: set i is ``values[offsets[i]:offsets[i + 1]]``,
    sorted and distinct, and ``known[i]`` is False where it could not be read (its slice is then empty).

    One flat array rather than one array a set, so that a batch of pairs or triples is intersected by a few numpy
    passes over all of them (:func:`intersection_sizes`), never by Python per set or per element.
    """

    values: np.ndarray  # uint64[N], ascending within each set
    offsets: np.ndarray  # int64[n + 1]
    known: np.ndarray  # bool[n]

    @classmethod
    def of(cls, sets: Sequence[np.ndarray | None]) -> FlatSets:
        """The sets of a list (sorted, distinct integer arrays; None where unknown), in its order."""
        known = np.array([members is not None for members in sets], dtype=bool)
        sizes = np.array([0 if members is None else members.size for members in sets], dtype=np.int64)
        arrays = [_ordered_uint64(members) for members in sets if members is not None and members.size]
        values = np.concatenate(arrays) if arrays else np.empty(0, np.uint64)
        return cls(values, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), known)

    def __len__(self) -> int:
        return int(self.known.size)

    @property
    def sizes(self) -> np.ndarray:
        """int64[n]: |S_i| (0 where unknown)."""
        return np.diff(self.offsets)

    def take(self, rows: np.ndarray) -> FlatSets:
        """The sets at positions ``rows`` (int64[m]), in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        sizes = self.sizes[rows]
        return FlatSets(self.values[_ragged_positions(self.offsets[rows], sizes)],
                        np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), self.known[rows])

    @classmethod
    def joined(cls, parts: Sequence[FlatSets]) -> FlatSets:
        """The sets of ``parts`` one after the other."""
        if not parts:
            return cls(np.empty(0, np.uint64), np.zeros(1, np.int64), np.empty(0, bool))
        sizes = np.concatenate([part.sizes for part in parts])
        return cls(np.concatenate([part.values for part in parts]),
                   np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                   np.concatenate([part.known for part in parts]))


def _ragged_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64[Σ lengths]: starts[0] … starts[0] + lengths[0] − 1, then the same for every following run."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(int(ends[-1]) if ends.size else 0)


def equal_set_classes(sets: FlatSets) -> np.ndarray:
    """int64[n]: for each set, the first position holding a set equal to it (its own where none is before it).

    Sets are grouped by size and a 64-bit fingerprint (the XOR of their elements, each mixed: the same
    for equal sets whatever their place), then each is compared element by element with the first of its group:
    a set that differs (fingerprints that collide) stays its own. Unknown sets are their own. Exact, O(N).
    """
    sizes, count = sets.sizes, len(sets)
    classes = np.arange(count, dtype=np.int64)
    filled = np.flatnonzero((sizes > 0) & sets.known)
    if filled.size < 2:
        return classes
    fingerprints = np.bitwise_xor.reduceat(_mixed(sets.values), sets.offsets[filled])
    order = np.lexsort((filled, fingerprints, sizes[filled]))  # ties by position: the first of a group is lowest
    ordered_sizes, ordered_prints = sizes[filled][order], fingerprints[order]
    starts = np.r_[True, (ordered_prints[1:] != ordered_prints[:-1]) | (ordered_sizes[1:] != ordered_sizes[:-1])]
    leaders = filled[order][np.maximum.accumulate(np.where(starts, np.arange(order.size), 0))]
    members = filled[order]
    followers = np.flatnonzero(leaders != members)
    if followers.size == 0:
        return classes
    mine, theirs = members[followers], leaders[followers]
    lengths = sizes[mine]
    differ = sets.values[_ragged_positions(sets.offsets[mine], lengths)] != \
        sets.values[_ragged_positions(sets.offsets[theirs], lengths)]
    owner = np.repeat(np.arange(followers.size), lengths)
    same = np.bincount(owner[differ], minlength=followers.size) == 0
    classes[mine[same]] = theirs[same]
    return classes


class _Lookup:
    """Membership of elements in the sets of a :class:`FlatSets`, by binary search on one sorted key array.

    The key of an element of set i is i·2^B + (element >> shift), with B the bits left beside the set number and
    the shift that fits the largest element in them: monotone within a set and ascending over all sets, so no sort
    is needed, and a found key is confirmed on the element itself (keys that the shift made equal are walked).
    """

    def __init__(self, sets: FlatSets) -> None:
        self.values = sets.values
        set_bits = max(1, int(len(sets)).bit_length())
        self.bits = np.uint64(63 - set_bits)
        largest = int(sets.values.max()) if sets.values.size else 0
        self.shift = np.uint64(max(0, largest.bit_length() - (63 - set_bits)))
        owners = np.repeat(np.arange(len(sets), dtype=np.uint64), sets.sizes)
        self.keys = (owners << self.bits) | (sets.values >> self.shift)

    def base(self, targets: np.ndarray) -> np.ndarray:
        """uint64[m]: the part of the keys that names each of the sets ``targets`` (int64[m])."""
        return targets.astype(np.uint64) << self.bits

    def contains(self, bases: np.ndarray, elements: np.ndarray) -> np.ndarray:
        """bool[q]: whether ``elements[j]`` (uint64) is in the set whose :meth:`base` is ``bases[j]``."""
        if self.keys.size == 0:
            return np.zeros(elements.size, dtype=bool)
        wanted = bases | (elements >> self.shift)
        at = np.searchsorted(self.keys, wanted)
        np.minimum(at, self.keys.size - 1, out=at)
        same_key = self.keys[at] == wanted
        found = same_key & (self.values[at] == elements)
        # Elements that the shift made equal to another of the set: walk on along the equal keys (rare).
        pending = np.flatnonzero(same_key & ~found)
        while pending.size:
            places = at[pending] + 1
            inside = places < self.keys.size
            pending, places = pending[inside], places[inside]
            same_key = self.keys[places] == wanted[pending]
            pending, places = pending[same_key], places[same_key]
            equal = self.values[places] == elements[pending]
            found[pending[equal]] = True
            pending = pending[~equal]
            at[pending] = places[~equal]
        return found


Mapper = Callable[[Callable[[tuple[int, int]], np.ndarray], Sequence[tuple[int, int]]], Iterable[np.ndarray]]
"""``mapper(count, tasks)``: ``count(task)`` of each task, in task order (an engine's workers)."""


@dataclass(frozen=True)
class Split:
    """How the lookups of many pairs or triples may be shared: ``mapper`` runs contiguous runs of them (at most
    ``parts``, each of ``least`` elements looked up at least) where it likes, typically in forked workers that
    inherit the sets and their keys. The counts are the same whoever computes them."""

    mapper: Mapper
    parts: int
    least: int = 1


def _contained_split(sets: FlatSets, lookup: _Lookup, source: np.ndarray, targets: Sequence[np.ndarray],
                     split: Split | None) -> np.ndarray:
    """:func:`_contained`, in runs of the pairs or triples of about equal work when ``split`` says so."""
    lengths = sets.sizes[source]
    total = int(lengths.sum())
    parts = 1 if split is None else min(split.parts, total // max(1, split.least))
    if split is None or parts <= 1:
        return _contained(sets, lookup, source, targets)
    weights = np.cumsum(lengths)
    cuts = np.searchsorted(weights, total * np.arange(1, parts) / parts).tolist()
    bounds = [(start, stop) for start, stop in zip([0, *cuts], [*cuts, source.size], strict=True) if stop > start]

    def count(bound: tuple[int, int]) -> np.ndarray:
        start, stop = bound
        return _contained(sets, lookup, source[start:stop], [target[start:stop] for target in targets])

    return np.concatenate(list(split.mapper(count, bounds)))


def _contained(sets: FlatSets, lookup: _Lookup, source: np.ndarray, targets: Sequence[np.ndarray]) -> np.ndarray:
    """int64[m]: how many elements of set ``source[p]`` are in every set ``targets[t][p]``, in batches of about
    :data:`_QUERIES_PER_BATCH` elements."""
    counts = np.zeros(source.size, dtype=np.int64)
    filled = np.flatnonzero(sets.sizes[source] > 0)  # an empty source has nothing in common with anything
    lengths = sets.sizes[source[filled]]
    weights = np.cumsum(lengths)
    begin = 0
    while begin < filled.size:
        before = int(weights[begin - 1]) if begin else 0
        end = max(begin + 1, int(np.searchsorted(weights, before + _QUERIES_PER_BATCH, side="right")))
        batch, runs = filled[begin:end], lengths[begin:end]
        elements = sets.values[_ragged_positions(sets.offsets[source[batch]], runs)]
        inside = None
        for target in targets:
            found = lookup.contains(np.repeat(lookup.base(target[batch]), runs), elements)
            inside = found if inside is None else inside & found
        assert inside is not None
        counts[batch] = np.add.reduceat(inside, np.r_[0, np.cumsum(runs)[:-1]], dtype=np.int64)
        begin = end
    return counts


def intersection_sizes(sets: FlatSets, first: np.ndarray, second: np.ndarray,
                       classes: np.ndarray | None = None, split: Split | None = None) -> np.ndarray:
    """|S_first[p] ∩ S_second[p]| of many pairs at once: int64[m] (0 where a set is unknown).

    Pairs of equal sets (:func:`equal_set_classes`, or ``classes`` computed before) are |S|, and pairs of the same
    two classes are counted once; for each remaining pair the elements of the smaller set are looked up in the
    larger one (:class:`_Lookup`). Cost: about one binary search per element of the smaller sets of the distinct
    pairs of classes; with ``split``, shared as it says.
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    shared = np.zeros(first.size, dtype=np.int64)
    usable = sets.known[first] & sets.known[second]
    if not usable.any():
        return shared
    classes = equal_set_classes(sets) if classes is None else classes
    low = np.minimum(classes[first], classes[second])
    high = np.maximum(classes[first], classes[second])
    codes, inverse = np.unique(low[usable] * len(sets) + high[usable], return_inverse=True)
    left, right = codes // len(sets), codes % len(sets)
    sizes = sets.sizes
    counts = sizes[left].copy()  # equal sets share all their elements
    different = np.flatnonzero(left != right)
    if different.size:
        a, b = left[different], right[different]
        smaller = np.where(sizes[a] <= sizes[b], a, b)
        larger = np.where(sizes[a] <= sizes[b], b, a)
        counts[different] = _contained_split(sets, _Lookup(sets), smaller, [larger], split)
    shared[usable] = counts[inverse.reshape(-1)]
    return shared


def flat_pair_resemblances(sets: FlatSets, first: np.ndarray, second: np.ndarray,
                           split: Split | None = None) -> np.ndarray:
    """R = |A ∩ B| / |A ∪ B| = a / (f_1 + f_2 − a) of each pair (sets[first[p]], sets[second[p]]): float64[m],
    NaN where a set is unknown or both are empty (Li & König 2010, Sec. 1); the lookups shared as ``split``
    says."""
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    result = np.full(first.size, np.nan)
    sizes = sets.sizes
    todo = np.flatnonzero(sets.known[first] & sets.known[second] & (sizes[first] + sizes[second] > 0))
    if todo.size:
        a, b = first[todo], second[todo]
        shared = intersection_sizes(sets, a, b, split=split)
        result[todo] = shared / (sizes[a] + sizes[b] - shared)
    return result


def flat_triple_resemblances(sets: FlatSets, docs: np.ndarray, split: Split | None = None) -> np.ndarray:
    """R = |A ∩ B ∩ C| / |A ∪ B ∪ C| of each triple (rows of int[t, 3] positions in ``sets``): float64[t], NaN
    where a set is unknown or all three are empty (Li, König & Gui 2010, eq. 3).

    |A ∪ B ∪ C| = |A| + |B| + |C| − |A ∩ B| − |A ∩ C| − |B ∩ C| + |A ∩ B ∩ C| (inclusion–exclusion), the pairwise
    intersections by :func:`intersection_sizes` and the triple one by looking the smallest set's elements up in
    the other two; the lookups shared as ``split`` says.
    """
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    result = np.full(docs.shape[0], np.nan)
    sizes = sets.sizes
    todo = np.flatnonzero(sets.known[docs].all(axis=1) & (sizes[docs].sum(axis=1) > 0))
    if todo.size == 0:
        return result
    rows = docs[todo]
    ranked = np.take_along_axis(rows, np.argsort(sizes[rows], axis=1, kind="stable"), axis=1)
    classes = equal_set_classes(sets)
    pairwise = sum(intersection_sizes(sets, rows[:, i], rows[:, j], classes, split)
                   for i, j in ((0, 1), (0, 2), (1, 2)))
    shared = _contained_split(sets, _Lookup(sets), ranked[:, 0], [ranked[:, 1], ranked[:, 2]], split)
    union = sizes[rows].sum(axis=1) - pairwise + shared
    result[todo] = shared / union
    return result


def pair_resemblances(sets: Sequence[np.ndarray | None], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Exact resemblance |A ∩ B| / |A ∪ B| of many pairs at once: float64[n_pairs].

    Args:
        sets: sorted, distinct arrays of one integer dtype (shingle hashes or set elements), None where a set
            is unknown.
        first, second: int[n_pairs] positions in ``sets``.

    Returns:
        R of (sets[first[p]], sets[second[p]]); NaN where either set is None or both are empty
        (:func:`flat_pair_resemblances` of the sets laid end to end).
    """
    return flat_pair_resemblances(FlatSets.of(sets), first, second)


def triple_resemblances(sets: Sequence[np.ndarray | None], docs: np.ndarray) -> np.ndarray:
    """Exact 3-way resemblance |A ∩ B ∩ C| / |A ∪ B ∪ C| of many triples at once (Li, König & Gui 2010, eq. 3):
    float64[n_triples].

    Args:
        sets: sorted, distinct arrays of one integer dtype, None where a set is unknown.
        docs: int[n_triples, 3] positions in ``sets``.

    Returns:
        R of each triple; NaN where a set is None or all three are empty (:func:`flat_triple_resemblances`).
    """
    return flat_triple_resemblances(FlatSets.of(sets), docs)
