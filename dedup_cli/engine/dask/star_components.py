"""Connected components of an edge list held in parts on a cluster: alternating large-star and small-star
(:mod:`dedup_cli.groups.star_contraction`, Kiveris et al. 2014), each step one exchange on a node column followed by
the step's numpy on each part; the edge set is persisted after every round, so the task graph never grows with the
number of rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, column_hash, exchange
from dedup_cli.engine.dask.table_kinds import EDGES, LABELS
from dedup_cli.groups import star_contraction as stars


@dataclass
class Components:
    """The result of :func:`connected_components`.

    ``labels`` are delayed tables with columns ``node`` and ``label`` (int64), one row for every node whose
    label is not itself (the smallest node of its component is its own label and does not appear; neither
    does any node without an edge). ``iterations`` counts the large-star/small-star rounds.
    """

    labels: list[Any]
    iterations: int


def _table(edges: tuple[np.ndarray, np.ndarray]) -> Table:
    return EDGES.of(u=edges[0], v=edges[1])


def _symmetric(edges: Table) -> Table:
    return _table(stars.symmetric(edges["u"], edges["v"]))


def _large_star(edges: Table) -> tuple[Table, int]:
    starred, unsettled = stars.large_star(edges["u"], edges["v"])
    return _table(starred), unsettled


def _small_star(edges: Table) -> Table:
    return _table(stars.small_star(edges["u"], edges["v"]))


def _oriented(pairs: Table) -> Table:
    return _table(stars.orient(pairs["first"], pairs["second"]))


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
        gathered = exchange([dask.delayed(_symmetric)(part) for part in current], column_hash, parts, "u", parts,
                            kind=EDGES)
        steps = [dask.delayed(_large_star)(part) for part in gathered]
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
        current = list(settled(*exchange(starred, column_hash, parts, "u", parts, then=_small_star, kind=EDGES)))
    raise RuntimeError(f"connected components did not converge in {max_iterations} large-star/small-star rounds")
