"""Strict groups: every pair (and optionally every triple) inside a group is accepted.

Complete-linkage clustering cut at R0, merged greedily from the most similar pair (see :func:`strict_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from dedup_cli.array_primitives import among, pair_codes
from dedup_cli.groups.components import Groups, groups_from_labels

# Rows of int64[m, 3] handed to ``triple_ok`` per call: bounds the memory of one call while keeping calls few.
TRIPLE_BATCH = 65_536


def _pair_codes(num_docs: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The code of each unordered pair (:func:`dedup_cli.array_primitives.pair_codes` of its lower and higher
    document): uint64[m]."""
    return pair_codes(np.minimum(first, second), np.maximum(first, second), num_docs)


def _all_pairs_accepted(num_docs: int, part_a: np.ndarray, part_b: np.ndarray, accepted_codes: np.ndarray) -> bool:
    """Whether every cross pair of two disjoint index sets is in ``accepted_codes`` (uint64, sorted ascending)."""
    return bool(np.all(among(_pair_codes(num_docs, part_a[:, None], part_b[None, :]).ravel(), accepted_codes)[0]))


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
        # Two lone documents need no check: the pair itself is accepted and a group of two has no triple.
        if part_a is not None or part_b is not None:
            key = (min(group_a, group_b), max(group_a, group_b))
            if key in refused:
                continue
            if not _clique_when_merged(num_docs, _or_alone(part_a, a), _or_alone(part_b, b), accepted_codes,
                                       triple_ok):
                refused.add(key)
                continue
        _merge(label, members, group_a, _or_alone(part_a, a), group_b, _or_alone(part_b, b))
    return _groups_of_members(num_docs, members)


def _or_alone(part: np.ndarray | None, document: int) -> np.ndarray:
    """A group's members, int64[g]; a document that is in no group yet is alone in its own."""
    return np.array([document], dtype=np.int64) if part is None else part


def _clique_when_merged(num_docs: int, part_a: np.ndarray, part_b: np.ndarray, accepted_codes: np.ndarray,
                        triple_ok: Callable[[np.ndarray], np.ndarray] | None) -> bool:
    """Whether two groups merged would still have every pair accepted (and, with ``triple_ok``, every triple):
    only the pairs and triples that span both groups are new."""
    if not _all_pairs_accepted(num_docs, part_a, part_b, accepted_codes):
        return False
    return triple_ok is None or all(bool(np.all(triple_ok(batch))) for batch in _spanning_triples(part_a, part_b))


def _merge(label: list[int], members: dict[int, np.ndarray], group_a: int, part_a: np.ndarray, group_b: int,
           part_b: np.ndarray) -> None:
    """Merge two groups under the label of the larger, relabelling the smaller's members (so each document is
    relabelled O(log n) times over the whole run)."""
    if part_a.size >= part_b.size:
        kept, moved = group_a, part_b
    else:
        kept, moved = group_b, part_a
    for document in moved.tolist():
        label[document] = kept
    members.pop(group_a, None)
    members.pop(group_b, None)
    members[kept] = np.concatenate([part_a, part_b])


def _groups_of_members(num_docs: int, members: dict[int, np.ndarray]) -> Groups:
    """:class:`Groups` of the groups of two or more, each labelled by its smallest member (groups_from_labels
    orders groups by label)."""
    labels = np.arange(num_docs, dtype=np.int64)
    for group in members.values():
        labels[group] = group.min()
    return groups_from_labels(labels)
