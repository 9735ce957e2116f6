"""Connected components of the accepted-pair graph, as groups with deterministic ids and member order.

Documents are indexed in store order (ascending id), so ordering by index is ordering by id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
        """The members (rows, ascending) of group ``index`` (from 0; its number is index + 1)."""
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
