"""Connected components by alternating large-star and small-star: the steps on one part's edges, as numpy.

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
which the large-star's gathering of the edges on u already gives.

Edges are two int64 arrays (u, v). An engine gathers each node's edges in one part (the Dask engine by an
exchange on u, :mod:`dedup_cli.engine.dask.star_components`) and runs these steps on each part.
"""

from __future__ import annotations

import numpy as np

Edges = tuple[np.ndarray, np.ndarray]


def _edges(u: np.ndarray, v: np.ndarray) -> Edges:
    return np.asarray(u, np.int64), np.asarray(v, np.int64)


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


def orient(first: np.ndarray, second: np.ndarray) -> Edges:
    """Edges (first, second) as (u, v) = (larger, smaller) node, self-loops dropped: the small-star's input."""
    keep = first != second
    first, second = first[keep], second[keep]
    return _edges(np.maximum(first, second), np.minimum(first, second))


def symmetric(u: np.ndarray, v: np.ndarray) -> Edges:
    """Each edge in both directions, so that gathering the edges on ``u`` gathers Γ(u) for every node u."""
    return _edges(np.concatenate([u, v]), np.concatenate([v, u]))


def large_star(u: np.ndarray, v: np.ndarray) -> tuple[Edges, int]:
    """Large-star on the nodes gathered in one part, and how many of them are neither centre nor leaf.

    The edges (u, v) hold every neighbour v of each u they contain (the symmetric edge list gathered on u).
    Returns the edges (v, m(u)) for v ∈ Γ(u), v > u, oriented (larger, smaller), and the count of nodes that
    break the convergence test of the module docstring.
    """
    u, v = _sorted_unique_edges(u, v)
    if u.size == 0:
        return _edges(u, v), 0
    starts, lengths = _segments(u)
    node = u[starts]
    smallest = np.minimum(np.minimum.reduceat(v, starts), node)  # m(u)
    lower = np.add.reduceat((v < u).astype(np.int64), starts)
    done = (lower == 0) | ((lengths == 1) & (lower == 1))
    upper = v > u
    return _edges(v[upper], np.repeat(smallest, lengths)[upper]), int(np.count_nonzero(~done))


def small_star(u: np.ndarray, v: np.ndarray) -> Edges:
    """Small-star on the nodes gathered in one part.

    The edges (u, v) are oriented, u > v, and gathered on u, so all lower neighbours of each u are together.
    Returns (w, m) for every w ∈ N(u) ∪ {u} other than m = min N(u), oriented (larger, smaller).
    """
    u, v = _sorted_unique_edges(u, v)
    if u.size == 0:
        return _edges(u, v)
    starts, lengths = _segments(u)
    smallest = v[starts]  # sorted by (u, v): the first lower neighbour is the smallest
    centre = np.repeat(smallest, lengths)
    others = v != centre  # the lower neighbours other than m, connected to m
    return _edges(np.concatenate([u[starts], v[others]]), np.concatenate([smallest, centre[others]]))
