"""Turning accepted pairs into duplicate groups with deterministic ids and member order.

Documents are indexed in store order (ascending id), so ordering by index is ordering by id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from dedup_cli.errors import UsageError


def connected_components(num_docs: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Label every document with the smallest index of its connected component: int64[num_docs].

    Vectorised min-label propagation with pointer jumping: each round hooks every edge's endpoints and
    their roots onto the smaller of their labels, then shortcuts label chains, until nothing changes.
    """
    labels = np.arange(num_docs, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    while True:
        smaller = np.minimum(labels[first], labels[second])
        before = labels.copy()
        np.minimum.at(labels, first, smaller)
        np.minimum.at(labels, second, smaller)
        # Hook the roots too (labels are roots after pointer jumping): hooking only the endpoints moves a
        # smaller label one hop per round, O(n) rounds on a long chain of near-duplicates.
        np.minimum.at(labels, before[first], smaller)
        np.minimum.at(labels, before[second], smaller)
        # Pointer jumping: a label's own label is at most it, so this converges.
        while True:
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
        if np.array_equal(labels, before):
            return labels


@dataclass
class Groups:
    """Groups of two or more documents: ``members[offsets[g]:offsets[g+1]]`` is group g (id g + 1)."""

    members: np.ndarray  # int64[n_grouped], ascending within each group
    offsets: np.ndarray  # int64[n_groups + 1]

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def group(self, index: int) -> np.ndarray:
        return self.members[self.offsets[index] : self.offsets[index + 1]]


def groups_from_labels(labels: np.ndarray) -> Groups:
    """Collect documents sharing a label into groups of size ≥ 2, ordered by their first member."""
    order = np.argsort(labels, kind="stable")  # stable: members stay in index (id) order
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    sizes = np.diff(np.r_[starts, labels.size])
    # Labels are the smallest member index, so sorting by label orders groups by their first member.
    keep = sizes >= 2
    member_mask = np.repeat(keep, sizes)
    members = order[member_mask]
    offsets = np.r_[0, np.cumsum(sizes[keep])].astype(np.int64)
    return Groups(members=members.astype(np.int64), offsets=offsets)


def group_components(num_docs: int, first: np.ndarray, second: np.ndarray) -> Groups:
    """Connected components of the accepted-pair graph, as deterministic groups."""
    return groups_from_labels(connected_components(num_docs, first, second))


# ---------------------------------------------------------------------------------------------------------------------
# Strict groups: every pair (and optionally every triple) inside a group is accepted.
# ---------------------------------------------------------------------------------------------------------------------

GROUP_METHODS = ("components", "strict")
KEEP_CHOICES = ("first", "longest", "shortest", "id")

# Rows of int64[m, 3] handed to ``triple_ok`` per call: bounds the memory of one call while keeping calls few.
TRIPLE_BATCH = 65_536


def _pair_codes(num_docs: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Code each unordered pair as ``min · num_docs + max``: int64[m] (exact while num_docs² < 2^63)."""
    return np.minimum(first, second) * np.int64(num_docs) + np.maximum(first, second)


def _all_pairs_accepted(num_docs: int, part_a: np.ndarray, part_b: np.ndarray, accepted_codes: np.ndarray) -> bool:
    """Whether every cross pair of two disjoint index sets is in ``accepted_codes`` (int64, sorted ascending)."""
    codes = _pair_codes(num_docs, part_a[:, None], part_b[None, :]).ravel()
    where = np.searchsorted(accepted_codes, codes)
    # A code past the end is absent; clip so the comparison below can index safely.
    where = np.minimum(where, accepted_codes.size - 1)
    return bool(np.all(accepted_codes[where] == codes))


def _spanning_triples(part_a: np.ndarray, part_b: np.ndarray) -> Iterator[np.ndarray]:
    """Every triple of ``part_a ∪ part_b`` with members in both parts, in batches of int64[t, 3].

    Triples are two from one part and one from the other: C(|A|, 2)·|B| + |A|·C(|B|, 2) in all. A batch holds
    t ≤ max(TRIPLE_BATCH, size of the single-member part) rows, each sorted ascending so that a callback may rely
    on ``row[0] < row[1] < row[2]``.
    """
    for two_from, one_from in ((part_a, part_b), (part_b, part_a)):
        if two_from.size < 2:
            continue
        i, j = np.triu_indices(two_from.size, k=1)
        inner = np.stack([two_from[i], two_from[j]], axis=1)  # int64[C(|two_from|, 2), 2]
        # Batch over the inner pairs so one batch holds at most about TRIPLE_BATCH triples.
        step = max(1, TRIPLE_BATCH // one_from.size)
        for start in range(0, inner.shape[0], step):
            chunk = inner[start : start + step]
            triples = np.empty((chunk.shape[0], one_from.size, 3), dtype=np.int64)
            triples[:, :, :2] = chunk[:, None, :]
            triples[:, :, 2] = one_from[None, :]
            yield np.sort(triples.reshape(-1, 3), axis=1)


def strict_groups(
    num_docs: int,
    first: np.ndarray,
    second: np.ndarray,
    estimate: np.ndarray,
    triple_ok: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Groups:
    """Groups in which every pair is an accepted pair (and, with ``triple_ok``, every triple passes it).

    This is complete-linkage agglomerative clustering cut at the acceptance threshold R0, applied greedily: the
    pairs are visited from the most similar down, and a pair whose ends lie in different groups merges those two
    groups only if the merged group would still be a clique of accepted pairs. Complete linkage is the linkage
    whose cut guarantees the user's requirement (no A with C merely because A~B and B~C); visiting the most
    similar pairs first makes each document join the group of its nearest neighbours before a weaker link can
    claim it. Finding a maximum clique partition is NP-hard, so this is a heuristic; it is not optimal in group
    count, but every group it returns satisfies the requirement.

    Determinism: pairs are visited in the order (estimate descending, first ascending, second ascending), a total
    order on distinct pairs, so the groups depend only on the set of (pair, estimate) and not on the order of the
    input arrays. Repeated pairs are harmless (a repeat finds both ends already in one group).

    Cost: one merge attempt of groups G1, G2 looks up |G1|·|G2| cross pairs by binary search in the sorted pair
    codes, O(|G1|·|G2|·log m); with ``triple_ok`` it then tests C(|G1|,2)·|G2| + |G1|·C(|G2|,2) triples. A failed
    attempt is remembered: groups only grow, so a pair of groups that once failed fails forever, and later pairs
    between the same two groups are skipped in O(1) instead of repeating the check. Merging two singletons needs
    no look-up (their pair is accepted). Total: O(m log m) to sort plus Σ over attempted merges of |G1|·|G2|·log m.

    Args:
        num_docs: number of documents n; indices lie in [0, n). n² must fit in int64 (n < 3·10^9).
        first: int64[m], the smaller index of each accepted pair.
        second: int64[m], the larger index of each accepted pair.
        estimate: float64[m], each pair's estimated resemblance (all ≥ R0; only their order matters here).
        triple_ok: optional batched test of triples: given int64[t, 3] (each row ascending) it returns bool[t],
            True where the triple is acceptable (e.g. its 3-way estimate is ≥ R0). Called only for triples that
            span both parts of a merge whose cross pairs all passed, in batches of about ``TRIPLE_BATCH`` rows;
            calls stop at the first batch with a False.

    Returns:
        :class:`Groups` of size ≥ 2, members ascending, groups ordered by their first member.
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    estimate = np.asarray(estimate, dtype=np.float64)
    if not (first.shape == second.shape == estimate.shape) or first.ndim != 1:
        raise ValueError("first, second and estimate must be 1-D arrays of one length")
    accepted_codes = np.sort(_pair_codes(num_docs, first, second))
    # lexsort's last key is primary: estimate descending, then (first, second) ascending for a total order.
    order = np.lexsort((second, first, -estimate))

    # ``label[i]`` is the group of i, named by one of its members; ``members[g]`` lists group g (absent for a
    # document still alone). Plain Python containers: the loop below reads single elements, where numpy scalar
    # indexing would cost more than the work itself.
    label = list(range(num_docs))
    members: dict[int, np.ndarray] = {}
    refused: set[tuple[int, int]] = set()
    for a, b in zip(first[order].tolist(), second[order].tolist(), strict=True):
        group_a, group_b = label[a], label[b]
        if group_a == group_b:
            continue
        part_a = members.get(group_a)
        part_b = members.get(group_b)
        if part_a is None and part_b is None:
            # Two lone documents: the pair itself is accepted and a group of two has no triple.
            part_a = np.array([a], dtype=np.int64)
            part_b = np.array([b], dtype=np.int64)
        else:
            key = (min(group_a, group_b), max(group_a, group_b))
            if key in refused:
                continue
            if part_a is None:
                part_a = np.array([a], dtype=np.int64)
            if part_b is None:
                part_b = np.array([b], dtype=np.int64)
            if not _all_pairs_accepted(num_docs, part_a, part_b, accepted_codes) or (
                triple_ok is not None
                and not all(bool(np.all(triple_ok(batch))) for batch in _spanning_triples(part_a, part_b))
            ):
                refused.add(key)
                continue
        # Relabel the smaller part, so each document is relabelled O(log n) times over the whole run.
        if part_a.size >= part_b.size:
            kept, moved = group_a, part_b
        else:
            kept, moved = group_b, part_a
        for document in moved.tolist():
            label[document] = kept
        members.pop(group_a, None)
        members.pop(group_b, None)
        members[kept] = np.concatenate([part_a, part_b])

    labels = np.arange(num_docs, dtype=np.int64)
    for group in members.values():
        # groups_from_labels orders groups by label, so label each group by its smallest member.
        labels[group] = group.min()
    return groups_from_labels(labels)


def _group_labels(groups: Groups, num_docs: int) -> np.ndarray:
    """Group index of every document, -1 for documents in no group: int64[num_docs]."""
    labels = np.full(num_docs, -1, dtype=np.int64)
    labels[groups.members] = np.repeat(np.arange(len(groups), dtype=np.int64), np.diff(groups.offsets))
    return labels


def weakest_estimates(groups: Groups, first: np.ndarray, second: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """The smallest estimate over the accepted pairs inside each group: float64[n_groups].

    Only accepted pairs are known. For strict groups that is every pair of the group, so the value is the
    weakest link of the group. For connected components, pairs inside a component that were not accepted (A and
    C in A~B~C) have no estimate and are left out: the value is the weakest *accepted* link, and the true weakest
    pair may be lower. A group with no accepted pair inside (possible only for hand-made groups) gets NaN.

    Args:
        groups: the groups.
        first, second: int64[m], the accepted pairs.
        estimate: float64[m], their estimates.
    """
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    estimate = np.asarray(estimate, dtype=np.float64)
    weakest = np.full(len(groups), np.nan, dtype=np.float64)
    if first.size == 0 or len(groups) == 0:
        return weakest
    num_docs = int(max(first.max(), second.max(), groups.members.max())) + 1
    labels = _group_labels(groups, num_docs)
    group_first, group_second = labels[first], labels[second]
    inside = (group_first == group_second) & (group_first >= 0)
    pair_group = group_first[inside]
    pair_estimate = estimate[inside]
    if pair_group.size == 0:
        return weakest
    # Sort-based reduction: sort by group, then the minimum of each run of equal group ids.
    order = np.argsort(pair_group, kind="stable")
    pair_group = pair_group[order]
    starts = np.flatnonzero(np.r_[True, pair_group[1:] != pair_group[:-1]])
    weakest[pair_group[starts]] = np.minimum.reduceat(pair_estimate[order], starts)
    return weakest


def representatives(groups: Groups, keep: str, shingle_counts: np.ndarray) -> np.ndarray:
    """The member each group keeps (the others are the duplicates to delete): int64[n_groups].

    ``keep`` is one of :data:`KEEP_CHOICES`:

    - ``id``: the member with the smallest id. Documents are indexed in store order, which is ascending id.
    - ``first``: the first member in document order. The store keeps documents in id order and records no
      other input order, so this is the same member as ``id``; both names exist because users ask for either.
    - ``longest``: the member with the most shingles; ties go to the smallest id.
    - ``shortest``: the member with the fewest shingles; ties go to the smallest id.

    Args:
        groups: the groups (members ascending within each group).
        keep: the policy, one of :data:`KEEP_CHOICES`.
        shingle_counts: int[num_docs], distinct shingles (set size) of each document.

    Raises:
        UsageError: if ``keep`` is not one of :data:`KEEP_CHOICES`.
    """
    if keep not in KEEP_CHOICES:
        raise UsageError(f"--keep {keep!r} is not a policy; choose one of {', '.join(KEEP_CHOICES)}")
    starts = groups.offsets[:-1]
    if keep in ("first", "id"):
        return groups.members[starts].astype(np.int64)
    counts = np.asarray(shingle_counts, dtype=np.int64)[groups.members]
    group_ids = np.repeat(np.arange(len(groups), dtype=np.int64), np.diff(groups.offsets))
    key = -counts if keep == "longest" else counts
    # Within each group (primary key) the best count comes first, ties in member (id) order; groups stay in
    # place because their segments are contiguous and already sorted by group id.
    order = np.lexsort((groups.members, key, group_ids))
    return groups.members[order[starts]].astype(np.int64)
