"""What is said of each group: its weakest accepted link and the member it keeps (its representative)."""

from __future__ import annotations

import numpy as np

from dedup_cli.groups.components import Groups
from dedup_cli.options import KEEP_CHOICES


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
        ValueError: if ``keep`` is not one of :data:`KEEP_CHOICES` (the option is checked before).
    """
    if keep not in KEEP_CHOICES:
        raise ValueError(f"keep {keep!r} is not a policy; choose one of {', '.join(KEEP_CHOICES)}")
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
