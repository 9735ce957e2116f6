"""Connected components of an edge list held as a Dask dataframe: alternating large-star and small-star.

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
which the large-star's shuffle on u already gathers.

Each step is one shuffle on a node column followed by numpy per partition (sort, segment reductions); the
edge set is persisted after every round, so the task graph never grows with the number of rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask import delayed

from dedup_cli.engine.dask.cluster import settled

# Every frame here has two int64 node columns.
_EDGE_META = pd.DataFrame({"u": pd.Series([], dtype=np.int64), "v": pd.Series([], dtype=np.int64)})

@dataclass
class Components:
    """The result of :func:`connected_components`.

    ``labels`` is a Dask dataframe with columns ``node`` and ``label`` (int64), one row for every node whose
    label is not itself (the smallest node of its component is its own label and does not appear; neither
    does any node without an edge). ``iterations`` counts the large-star/small-star rounds.
    """

    labels: dd.DataFrame
    iterations: int


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of equal values in sorted ``keys``: int64[g] each."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else np.empty(0, dtype=np.int64)
    return starts, np.diff(np.r_[starts, keys.size])


def _sorted_unique_edges(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges sorted by (u, v) with repeats dropped: repeats would only multiply the shuffled bytes."""
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    if u.size > 1:
        keep = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])]
        u, v = u[keep], v[keep]
    return u, v


def orient(edges: pd.DataFrame) -> pd.DataFrame:
    """Edges (first, second) as (u, v) = (larger, smaller) node, self-loops dropped: the small-star's input."""
    first = edges.iloc[:, 0].to_numpy(dtype=np.int64)
    second = edges.iloc[:, 1].to_numpy(dtype=np.int64)
    keep = first != second
    first, second = first[keep], second[keep]
    return pd.DataFrame({"u": np.maximum(first, second), "v": np.minimum(first, second)})


def symmetric(edges: pd.DataFrame) -> pd.DataFrame:
    """Each edge in both directions, so that a shuffle on ``u`` gathers Γ(u) for every node u."""
    u = edges["u"].to_numpy()
    v = edges["v"].to_numpy()
    return pd.DataFrame({"u": np.concatenate([u, v]), "v": np.concatenate([v, u])})


def large_star(edges: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Large-star on the nodes gathered in one partition, and how many of them are neither centre nor leaf.

    ``edges`` holds (u, v) for every neighbour v of each u it contains (the symmetric edge list shuffled on
    u). Returns the edges (v, m(u)) for v ∈ Γ(u), v > u, oriented (larger, smaller), and the count of nodes
    that break the convergence test of the module docstring.
    """
    u, v = _sorted_unique_edges(edges["u"].to_numpy(dtype=np.int64), edges["v"].to_numpy(dtype=np.int64))
    if u.size == 0:
        return _EDGE_META.copy(), 0
    starts, lengths = _segments(u)
    node = u[starts]
    smallest = np.minimum(np.minimum.reduceat(v, starts), node)  # m(u)
    lower = np.add.reduceat((v < u).astype(np.int64), starts)
    settled = (lower == 0) | ((lengths == 1) & (lower == 1))
    unsettled = int(np.count_nonzero(~settled))
    upper = v > u
    return pd.DataFrame({"u": v[upper], "v": np.repeat(smallest, lengths)[upper]}), unsettled


def small_star(edges: pd.DataFrame) -> pd.DataFrame:
    """Small-star on the nodes gathered in one partition.

    ``edges`` holds oriented edges (u, v), u > v, shuffled on u, so all lower neighbours of each u are
    together. Returns (w, m) for every w ∈ N(u) ∪ {u} other than m = min N(u), oriented (larger, smaller).
    """
    u, v = _sorted_unique_edges(edges["u"].to_numpy(dtype=np.int64), edges["v"].to_numpy(dtype=np.int64))
    if u.size == 0:
        return _EDGE_META.copy()
    starts, lengths = _segments(u)
    smallest = v[starts]  # sorted by (u, v): the first lower neighbour is the smallest
    centre = np.repeat(smallest, lengths)
    others = v != centre  # the lower neighbours other than m, connected to m
    return pd.DataFrame({
        "u": np.concatenate([u[starts], v[others]]),
        "v": np.concatenate([smallest, centre[others]]),
    })


def _shuffle(frame: dd.DataFrame, method: str | None) -> dd.DataFrame:
    # Keep the partition count: the edge count shrinks or stays, and a fixed count keeps partitions comparable.
    return frame.shuffle(on="u", npartitions=frame.npartitions, shuffle_method=method)


def connected_components(
    edges: dd.DataFrame,
    max_iterations: int = 64,
    shuffle_method: str | None = None,
) -> Components:
    """Label every node of an edge list with the smallest node of its connected component.

    Args:
        edges: a Dask dataframe whose first two columns are int64 node numbers (any order, repeats and
            self-loops allowed).
        max_iterations: rounds allowed before giving up; O(log² n) suffice (Kiveris et al. 2014, Thm 3.5),
            so 64 is far beyond any graph that fits in int64.
        shuffle_method: ``"p2p"``, ``"tasks"`` or None (Dask's default: p2p on a distributed cluster).

    Returns:
        :class:`Components`; the labels are persisted on the cluster.

    Raises:
        RuntimeError: when the edge set is not a star forest after ``max_iterations`` rounds (a bug, or a
            bound set too low).
    """
    (current,) = settled(edges.map_partitions(orient, meta=_EDGE_META))
    for iteration in range(max_iterations + 1):
        gathered = _shuffle(current.map_partitions(symmetric, meta=_EDGE_META), shuffle_method)
        steps = [delayed(large_star, nout=2)(part) for part in gathered.to_delayed()]
        # One computation yields both the new edges and the convergence count; persisting delayed objects
        # only (not a dataframe with them) keeps Dask from materialising the dataframe's expression twice.
        *parts, unsettled = settled(*[step[0] for step in steps], delayed(sum)([step[1] for step in steps]))
        starred = dd.from_delayed(parts, meta=_EDGE_META, verify_meta=False)
        if unsettled.compute() == 0:
            # ``current`` is the star forest: every edge joins a node to its component's minimum. It may hold an
            # edge twice (from two partitions); this round's large-star gave each leaf exactly once, from the
            # one partition that gathered its centre's edges.
            return Components(starred.rename(columns={"u": "node", "v": "label"}), iteration)
        if iteration == max_iterations:
            break
        (current,) = settled(_shuffle(starred, shuffle_method).map_partitions(small_star, meta=_EDGE_META))
    raise RuntimeError(f"connected components did not converge in {max_iterations} large-star/small-star rounds")
