"""Connected components on the cluster against a union-find, on the graphs that are hard for label propagation."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from distributed import Client
from helpers import union_find_labels
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.engine.dask.exchange import Table, joined
from dedup_cli.engine.dask.star_components import connected_components
from dedup_cli.groups.components import connected_components as local_components


def as_labels(found: Table, num_nodes: int) -> np.ndarray:
    labels = np.arange(num_nodes, dtype=np.int64)
    labels[found["node"]] = found["label"]
    return labels


def run(first: np.ndarray, second: np.ndarray, partitions: int = 3, max_iterations: int = 64) -> tuple[Table, int]:
    bounds = np.linspace(0, first.size, partitions + 1).astype(np.int64)
    parts = [dask.delayed({"first": first[start:stop].astype(np.int64), "second": second[start:stop].astype(np.int64)})
             for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]
    found = connected_components(parts, max_iterations=max_iterations)
    return joined(dask.compute(*found.labels)), found.iterations


# --- on the cluster -------------------------------------------------------------------------------------------


def _graph(kind: str, size: int) -> list[tuple[int, int]]:
    """Edges of one component over nodes 0 … size − 1."""
    if kind == "path":
        return [(i, i + 1) for i in range(size - 1)]
    if kind == "star":
        return [(0, i) for i in range(1, size)]
    if kind == "clique":
        return [(i, j) for i in range(size) for j in range(i + 1, size)]
    if kind == "cycle":
        return [(i, (i + 1) % size) for i in range(size)] if size > 2 else [(0, 1)] if size == 2 else []
    return []  # "isolated": nodes without edges


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    """Unions of paths, stars, cliques, cycles and isolated nodes, nodes renumbered at random."""
    pieces = draw(st.lists(
        st.tuples(st.sampled_from(["path", "star", "clique", "cycle", "isolated"]), st.integers(1, 40)),
        min_size=1, max_size=10,
    ))
    edges: list[tuple[int, int]] = []
    offset = 0
    for kind, size in pieces:
        size = min(size, 12) if kind == "clique" else size
        edges.extend((a + offset, b + offset) for a, b in _graph(kind, size))
        offset += size
    num_nodes = offset
    # Random renumbering: a path numbered 0, 1, 2, … is easy for min-propagation; a random order is not.
    relabel = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(num_nodes)
    pairs = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return num_nodes, relabel[pairs[:, 0]], relabel[pairs[:, 1]]


@settings(max_examples=6)  # each example is ~5 rounds of two exchanges, ~1.3 s
@given(graph=graphs())
def test_components_match_union_find(client: Client, graph: tuple[int, np.ndarray, np.ndarray]) -> None:
    num_nodes, first, second = graph
    labels, _ = run(first, second)
    expected = union_find_labels(num_nodes, list(zip(first.tolist(), second.tolist(), strict=True)))
    assert np.array_equal(as_labels(labels, num_nodes), expected)
    assert np.array_equal(expected, local_components(num_nodes, first, second))
    # Only nodes that are not their own label are listed, each once.
    assert np.unique(labels["node"]).size == labels["node"].size
    assert (labels["node"] > labels["label"]).all()


def test_long_chain_converges_in_logarithmic_rounds(client: Client) -> None:
    # A chain of 20,000 nodes in random order: plain min-label propagation needs up to 19,999 rounds.
    num_nodes = 20_000
    order = np.random.default_rng(5).permutation(num_nodes)
    first, second = order[:-1], order[1:]
    labels, iterations = run(first, second, partitions=4)
    assert np.array_equal(as_labels(labels, num_nodes), np.zeros(num_nodes, dtype=np.int64))
    assert iterations <= 2 * int(np.ceil(np.log2(num_nodes)))


def test_descending_chain_and_repeated_edges(client: Client) -> None:
    # The chain numbered downwards, every edge given twice and reversed, plus self-loops.
    nodes = np.arange(3_000, 0, -1)
    first = np.concatenate([nodes[:-1], nodes[1:], nodes])
    second = np.concatenate([nodes[1:], nodes[:-1], nodes])
    labels, _ = run(first, second)
    assert np.array_equal(as_labels(labels, 3_001)[1:], np.ones(3_000, dtype=np.int64))


def test_empty_edge_list(client: Client) -> None:
    labels, iterations = run(np.empty(0, np.int64), np.empty(0, np.int64), partitions=1)
    assert labels["node"].size == 0 and iterations == 0


def test_too_few_rounds_is_an_error(client: Client) -> None:
    order = np.random.default_rng(6).permutation(1_000)
    with pytest.raises(RuntimeError, match="did not converge in 1 "):
        run(order[:-1], order[1:], max_iterations=1)
