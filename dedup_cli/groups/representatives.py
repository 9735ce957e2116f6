"""What is said of each group: its weakest accepted link and the member it keeps (its representative)."""

from __future__ import annotations

import numpy as np

from dedup_cli.groups.components import Groups
from dedup_cli.options.vocabulary import KEEP_CHOICES, KEEP_FIELD

KEEP_POLICIES = (*KEEP_CHOICES, KEEP_FIELD)


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


def representatives(groups: Groups, keep: str, shingle_counts: np.ndarray, runs: np.ndarray | None = None,
                    mtimes_ns: np.ndarray | None = None, scores: np.ndarray | None = None,
                    preferred: np.ndarray | None = None, live: np.ndarray | None = None) -> np.ndarray:
    """The member each group keeps (the others are the duplicates to delete): int64[n_groups].

    ``keep`` is one of :data:`KEEP_POLICIES`:

    - ``id``: the member with the smallest id. Documents are indexed in store order, which is ascending id.
    - ``first``: the first member in document order. The store keeps documents in id order and records no
      other input order, so this is the same member as ``id``; both names exist because users ask for either.
    - ``longest``: the member with the most shingles; ``shortest``: the fewest.
    - ``oldest``: the member written by the earliest sign run, then with the earliest modification time;
      ``newest``: the latest run, then the latest modification time.
    - ``field``: the member with the highest ``scores`` value; NaN (a missing value) ranks lowest.

    Ties go to the smallest index (id). With ``preferred``, a group's preferred members (a reference store's
    documents) come before all others, and the policy chooses among them. With ``live``, a group's live members
    come before everything else: a document that is gone since it was signed is kept only when all are gone.

    Args:
        groups: the groups (members ascending within each group).
        keep: the policy, one of :data:`KEEP_POLICIES`.
        shingle_counts: int[num_docs], distinct shingles (set size) of each document.
        runs, mtimes_ns: int64[num_docs], the sign run and modification time of each (``oldest``, ``newest``).
        scores: float64[num_docs], the values ``field`` compares (NaN where missing).
        preferred: bool[num_docs], documents a group keeps before any other.
        live: bool[num_docs], documents that can still be read; a group keeps one before any other, preferred
            or not.

    Raises:
        ValueError: if ``keep`` is not one of :data:`KEEP_POLICIES` (the option is checked before), or the
            arrays its policy needs are missing.
    """
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep {keep!r} is not a policy; choose one of {', '.join(KEEP_POLICIES)}")
    starts = groups.offsets[:-1]
    members = groups.members
    if (keep in ("first", "id") and preferred is None and live is None) or members.size == 0:
        return members[starts].astype(np.int64)
    keys = _policy_keys(members, keep, shingle_counts, runs, mtimes_ns, scores, preferred, live)
    keys.append(np.repeat(np.arange(len(groups), dtype=np.int64), np.diff(groups.offsets)))
    # Within each group (primary key) the best member comes first, ties in member (id) order; groups stay in
    # place because their segments are contiguous and already sorted by group id.
    order = np.lexsort(keys)
    return members[order[starts]].astype(np.int64)


def keep_ranks(members: np.ndarray, num_docs: int, keep: str, shingle_counts: np.ndarray,
               runs: np.ndarray | None = None, mtimes_ns: np.ndarray | None = None, scores: np.ndarray | None = None,
               preferred: np.ndarray | None = None, live: np.ndarray | None = None) -> np.ndarray:
    """int64[num_docs]: each of ``members``' place in the order :func:`representatives` keeps members by (0
    first; distinct, ties by id), over all of them rather than within a group: what the witness rule takes
    documents in (:mod:`dedup_cli.groups.witnesses`). Other documents rank after every member. The other
    arguments are :func:`representatives`'."""
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep {keep!r} is not a policy; choose one of {', '.join(KEEP_POLICIES)}")
    members = np.asarray(members, np.int64)
    ranks = np.arange(num_docs, dtype=np.int64) + members.size
    order = np.lexsort(_policy_keys(members, keep, shingle_counts, runs, mtimes_ns, scores, preferred, live))
    ranks[members[order]] = np.arange(members.size, dtype=np.int64)
    return ranks


def _policy_keys(members: np.ndarray, keep: str, shingle_counts: np.ndarray, runs: np.ndarray | None,
                 mtimes_ns: np.ndarray | None, scores: np.ndarray | None, preferred: np.ndarray | None,
                 live: np.ndarray | None) -> list[np.ndarray]:
    """The np.lexsort keys (the last is the primary one) that order ``members`` by the policy ``keep``: live
    first, then preferred, then the policy, then id."""
    keys: list[np.ndarray] = [members]
    if keep in ("longest", "shortest"):
        counts = np.asarray(shingle_counts, dtype=np.int64)[members]
        keys.append(-counts if keep == "longest" else counts)
    elif keep in ("oldest", "newest"):
        if runs is None:
            raise ValueError(f"keep {keep!r} needs the runs of the documents")
        times = np.zeros(members.size, np.int64) if mtimes_ns is None else np.asarray(mtimes_ns, np.int64)[members]
        member_runs = np.asarray(runs, dtype=np.int64)[members]
        keys += [times, member_runs] if keep == "oldest" else [-times, -member_runs]
    elif keep == KEEP_FIELD:
        if scores is None:
            raise ValueError("keep 'field' needs the values of the field")
        values = np.asarray(scores, dtype=np.float64)[members]
        keys.append(np.where(np.isnan(values), np.inf, -values))
    if preferred is not None:
        keys.append(~np.asarray(preferred, dtype=bool)[members])
    if live is not None:
        keys.append(~np.asarray(live, dtype=bool)[members])
    return keys
