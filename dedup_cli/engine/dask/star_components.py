"""Connected components of an edge list held in parts on a cluster: alternating large-star and small-star.

Kiveris, Lattanzi, Mirrokni, Rastogi & Vassilvitskii, *Connected Components in MapReduce and Beyond*
(SoCC 2014), Sec. 3. With Γ(u) the neighbours of u and m(u) = min(Γ(u) ∪ {u}):

- **large-star**: for every node u, connect each neighbour v > u to m(u) (edges (v, m(u))), drop u's others;
- **small-star**: for every node u, with N = {v ∈ Γ(u): v < u} and m = min(N ∪ {u}), connect every node of
  N ∪ {u} other than m to m (edges (v, m)).

Both operations preserve the connectivity of every pair of nodes and never raise a node's smallest
reachable label, and alternating them turns every component into a star whose centre is the component's
smallest node within O(log² n) rounds (their Theorem 3.5; O(log n) rounds are observed in practice; a long
chain, the worst case of plain min-label propagation at n − 1 rounds, takes ~log n here).

Convergence test (exact, checked for free during each large-star's group-by): the edge set is a forest of
stars centred on each component's minimum exactly when every node u is either a centre (every neighbour
> u) or a leaf (exactly one neighbour, and it is < u). A centre is then smaller than all its leaves, so it is
the minimum of its component, and no further operation changes anything. Both conditions only look at Γ(u),
which the large-star's exchange on u already gathers.

Each step is one exchange on a node column followed by numpy per part (sort, segment reductions); the
edge set is persisted after every round, so the task graph never grows with the number of rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, column_hash, exchange
from dedup_cli.engine.dask.table_kinds import EDGES, LABELS


@dataclass
class Components:
    """The result of :func:`connected_components`.

    ``labels`` are delayed tables with columns ``node`` and ``label`` (int64), one row for every node whose
    label is not itself (the smallest node of its component is its own label and does not appear; neither
    does any node without an edge). ``iterations`` counts the large-star/small-star rounds.
    """

    labels: list[Any]
    iterations: int


def _edges(u: np.ndarray, v: np.ndarray) -> Table:
    return EDGES.of(u=np.asarray(u, np.int64), v=np.asarray(v, np.int64))


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of equal values in sorted ``keys``: int64[g] each."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else np.empty(0, dtype=np.int64)
    return starts, np.diff(np.r_[starts, keys.size])


def _sorted_unique_edges(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (u, v) with repeats dropped: repeats would only multiply the moved bytes."""
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    if u.size > 1:
        keep = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])]
        u, v = u[keep], v[keep]
    return u, v


def orient(first: np.ndarray, second: np.ndarray) -> Table:
    """Edges (first, second) as (u, v) = (larger, smaller) node, self-loops dropped: the small-star's input."""
    keep = first != second
    first, second = first[keep], second[keep]
    return _edges(np.maximum(first, second), np.minimum(first, second))


def symmetric(edges: Table) -> Table:
    """Each edge in both directions, so that an exchange on ``u`` gathers Γ(u) for every node u."""
    return _edges(np.concatenate([edges["u"], edges["v"]]), np.concatenate([edges["v"], edges["u"]]))


def large_star(edges: Table) -> tuple[Table, int]:
    """Large-star on the nodes gathered in one part, and how many of them are neither centre nor leaf.

    ``edges`` holds (u, v) for every neighbour v of each u it contains (the symmetric edge list exchanged on
    u). Returns the edges (v, m(u)) for v ∈ Γ(u), v > u, oriented (larger, smaller), and the count of nodes
    that break the convergence test of the module docstring.
    """
    u, v = _sorted_unique_edges(edges["u"], edges["v"])
    if u.size == 0:
        return _edges(u, v), 0
    starts, lengths = _segments(u)
    node = u[starts]
    smallest = np.minimum(np.minimum.reduceat(v, starts), node)  # m(u)
    lower = np.add.reduceat((v < u).astype(np.int64), starts)
    done = (lower == 0) | ((lengths == 1) & (lower == 1))
    upper = v > u
    return _edges(v[upper], np.repeat(smallest, lengths)[upper]), int(np.count_nonzero(~done))


def small_star(edges: Table) -> Table:
    """Small-star on the nodes gathered in one part.

    ``edges`` holds oriented edges (u, v), u > v, exchanged on u, so all lower neighbours of each u are
    together. Returns (w, m) for every w ∈ N(u) ∪ {u} other than m = min N(u), oriented (larger, smaller).
    """
    u, v = _sorted_unique_edges(edges["u"], edges["v"])
    if u.size == 0:
        return _edges(u, v)
    starts, lengths = _segments(u)
    smallest = v[starts]  # sorted by (u, v): the first lower neighbour is the smallest
    centre = np.repeat(smallest, lengths)
    others = v != centre  # the lower neighbours other than m, connected to m
    return _edges(np.concatenate([u[starts], v[others]]), np.concatenate([smallest, centre[others]]))


def _oriented(pairs: Table) -> Table:
    return orient(pairs["first"], pairs["second"])


def _labels(edges: Table) -> Table:
    return LABELS.of(node=edges["u"], label=edges["v"])


def _count(found: tuple[Table, int]) -> int:
    return found[1]


def _edges_of(found: tuple[Table, int]) -> Table:
    return found[0]


def connected_components(pairs: list[Any], max_iterations: int = 64) -> Components:
    """Label every node of an edge list with the smallest node of its connected component.

    Args:
        pairs: delayed tables whose ``first`` and ``second`` columns are int64 node numbers (any order, repeats
            and self-loops allowed).
        max_iterations: rounds allowed before giving up; O(log² n) suffice (Kiveris et al. 2014, Thm 3.5),
            so 64 is far beyond any graph that fits in int64.

    Returns:
        :class:`Components`; the labels are persisted on the cluster.

    Raises:
        RuntimeError: when the edge set is not a star forest after ``max_iterations`` rounds (a bug, or a
            bound set too low).
    """
    parts = max(1, len(pairs))
    current = list(settled(*[dask.delayed(_oriented)(part) for part in pairs]))
    for iteration in range(max_iterations + 1):
        gathered = exchange([dask.delayed(symmetric)(part) for part in current], column_hash, parts, "u", parts,
                            kind=EDGES)
        steps = [dask.delayed(large_star)(part) for part in gathered]
        # One computation yields both the new edges and the convergence count.
        *starred, unsettled = settled(*[dask.delayed(_edges_of)(step) for step in steps],
                                      dask.delayed(sum)([dask.delayed(_count)(step) for step in steps]))
        if unsettled.compute() == 0:
            # ``current`` is the star forest: every edge joins a node to its component's minimum. It may hold an
            # edge twice (from two parts); this round's large-star gave each leaf exactly once, from the one part
            # that gathered its centre's edges.
            return Components([dask.delayed(_labels)(part) for part in starred], iteration)
        if iteration == max_iterations:
            break
        current = list(settled(*exchange(starred, column_hash, parts, "u", parts, then=small_star, kind=EDGES)))
    raise RuntimeError(f"connected components did not converge in {max_iterations} large-star/small-star rounds")
