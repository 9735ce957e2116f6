"""Witness groups: every dropped document beside a kept one it resembles at R ≥ R0.

Connected components chain: with A ~ B ~ C accepted and A ~ C not (A = words 1–70, B = 16–85, C = 31–100), a
component keeps A alone and drops C, whose resemblance to A is 0.375. Strict groups (cliques) never do that, but
split a component into many groups. The witness rule keeps the documents of a greedy maximal independent set of
the accepted-pair graph, taken in the keep policy's order: a document is kept unless an accepted neighbour that
the policy ranks higher is kept; then each dropped document has a kept neighbour (its witness), an accepted pair,
so R ≥ R0 by the exact resemblance or by an interval clear of R0. A group is one kept document and those it
witnesses (each the witness of the best-ranked of its kept neighbours): a star, whose representative is the best
ranked member, so the keep policy chooses it as it does for components.

The greedy set is found in rounds over the graph's edges (Blelloch, Fineman and Shun 2012: a document that ranks
above every undecided neighbour is kept, its neighbours dropped), which gives the same set as taking the
documents one at a time in rank order; a long chain of near-duplicates ranked along the chain decides only two
documents a round, so once a round decides little the rest are taken one at a time.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.groups.components import Groups, groups_from_labels

SLOW_ROUND = 0.01
"""A round that decides less than this share of the undecided documents hands the rest to the one-at-a-time pass."""


def greedy_kept(num_docs: int, first: np.ndarray, second: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """bool[num_docs]: the documents the witness rule keeps (see the module docstring) among those in pairs.

    Args:
        num_docs: documents, indexed 0 … num_docs − 1.
        first, second: int64[m], the accepted pairs.
        rank: int64[num_docs], each document's place in the keep policy's order (distinct; lower is kept first).
    """
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    kept = np.zeros(num_docs, bool)
    undecided = np.zeros(num_docs, bool)
    undecided[first] = undecided[second] = True
    while undecided.any():
        live = undecided[first] & undecided[second]
        a, b = first[live], second[live]
        best_neighbour = np.full(num_docs, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(best_neighbour, a, rank[b])
        np.minimum.at(best_neighbour, b, rank[a])
        chosen = undecided & (rank < best_neighbour)
        kept |= chosen
        dropped = np.zeros(num_docs, bool)
        dropped[a[chosen[b]]] = True
        dropped[b[chosen[a]]] = True
        before = int(np.count_nonzero(undecided))
        undecided &= ~(chosen | dropped)
        decided = before - int(np.count_nonzero(undecided))
        if undecided.any() and decided < SLOW_ROUND * before:
            _one_at_a_time(first, second, rank, kept, undecided)
            break
    return kept


def _one_at_a_time(first: np.ndarray, second: np.ndarray, rank: np.ndarray, kept: np.ndarray,
                   undecided: np.ndarray) -> None:
    """Decide the ``undecided`` documents in rank order: kept unless a neighbour is kept (in place)."""
    ends = np.concatenate([first, second])
    others = np.concatenate([second, first])
    order = np.argsort(ends, kind="stable")
    ends, others = ends[order], others[order]
    starts = np.searchsorted(ends, np.arange(kept.size + 1))
    for doc in sorted(np.flatnonzero(undecided).tolist(), key=lambda d: int(rank[d])):
        if not kept[others[starts[doc]:starts[doc + 1]]].any():
            kept[doc] = True
    undecided[:] = False


def witness_groups(num_docs: int, first: np.ndarray, second: np.ndarray, rank: np.ndarray) -> Groups:
    """Stars of the witness rule: each kept document with the dropped documents it witnesses (a dropped document's
    witness is its best-ranked kept neighbour); members ascending, groups ordered by their first member, as
    :func:`dedup_cli.groups.components.groups_from_labels` orders them. Kept documents that witness nothing are in
    no group."""
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    rank = np.asarray(rank, np.int64)
    kept = greedy_kept(num_docs, first, second, rank)
    labels = np.arange(num_docs, dtype=np.int64)
    witness_rank = np.full(num_docs, np.iinfo(np.int64).max, np.int64)
    to_second = kept[first] & ~kept[second]
    to_first = kept[second] & ~kept[first]
    np.minimum.at(witness_rank, second[to_second], rank[first[to_second]])
    np.minimum.at(witness_rank, first[to_first], rank[second[to_first]])
    dropped = np.flatnonzero(witness_rank < np.iinfo(np.int64).max)
    order = np.argsort(rank, kind="stable")  # ranks are distinct: the witness is found back from its rank
    labels[dropped] = order[np.searchsorted(rank[order], witness_rank[dropped])]
    # Each star labelled by its smallest member, so that groups come in the order of their first members.
    smallest = np.arange(num_docs, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(num_docs, dtype=np.int64))
    return groups_from_labels(smallest[labels])
