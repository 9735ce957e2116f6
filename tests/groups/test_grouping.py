"""Connected components of accepted pairs and the deterministic groups made from them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import union_find_labels
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.groups import components
from dedup_cli.groups.components import Groups, connected_components, group_components


def _reference_groups(num_docs: int, edges: list[tuple[int, int]]) -> list[list[int]]:
    labels = union_find_labels(num_docs, edges)
    members: dict[int, list[int]] = {}
    for node, label in enumerate(labels.tolist()):
        members.setdefault(label, []).append(node)
    return [group for _, group in sorted(members.items()) if len(group) >= 2]


def _as_lists(groups: Groups) -> list[list[int]]:
    return [groups.group(index).tolist() for index in range(len(groups))]


def _split(edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return array[:, 0], array[:, 1]


@st.composite
def graphs(draw: st.DrawFn, max_docs: int = 40) -> tuple[int, list[tuple[int, int]]]:
    num_docs = draw(st.integers(1, max_docs))
    node = st.integers(0, num_docs - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=3 * num_docs))
    return num_docs, edges


# --- connected components ----------------------------------------------------------------------------------


@settings(derandomize=True, max_examples=300, deadline=None)
@given(graphs())
def test_connected_components_match_union_find(graph: tuple[int, list[tuple[int, int]]]) -> None:
    num_docs, edges = graph
    labels = connected_components(num_docs, *_split(edges))
    assert labels.dtype == np.int64 and labels.shape == (num_docs,)
    assert np.array_equal(labels, union_find_labels(num_docs, edges))


def test_connected_components_hand_computed() -> None:
    labels = connected_components(7, np.array([5, 3, 3]), np.array([6, 0, 1]))
    assert labels.tolist() == [0, 0, 2, 0, 4, 5, 5]


def test_connected_components_without_edges() -> None:
    empty = np.empty(0, dtype=np.int64)
    assert connected_components(4, empty, empty).tolist() == [0, 1, 2, 3]
    assert connected_components(0, empty, empty).tolist() == []


def test_connected_components_random_large_graph_matches_union_find() -> None:
    rng = np.random.default_rng(2017)
    num_docs = 5_000
    first, second = rng.integers(0, num_docs, size=(2, 3_000))
    edges = list(zip(first.tolist(), second.tolist(), strict=True))
    assert np.array_equal(connected_components(num_docs, first, second), union_find_labels(num_docs, edges))


@pytest.mark.parametrize(
    "order",
    ["ascending", "descending-after-zero", "random"],
)
def test_long_chains_converge_quickly(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A path of near-duplicates (revision after revision) is one group whatever the order of its ids.
    # Min-label propagation that moves a label only one hop per round needs O(n) rounds of O(n) work here.
    num_docs = 100_000
    if order == "ascending":
        path = np.arange(num_docs)
    elif order == "descending-after-zero":
        # 0 — n−1 — n−2 — … — 1: the smallest id sits at the far end from where the others point.
        path = np.r_[0, np.arange(num_docs - 1, 0, -1)]
    else:
        path = np.random.default_rng(42).permutation(num_docs)
    # Work is counted, not timed: every round and every pointer jump ends in one comparison of the labels.
    comparisons = 0

    class CountingNumpy:
        def __getattr__(self, name: str) -> object:
            return getattr(np, name)

        @staticmethod
        def array_equal(a: np.ndarray, b: np.ndarray) -> bool:
            nonlocal comparisons
            comparisons += 1
            return bool(np.array_equal(a, b))

    monkeypatch.setattr(components, "np", CountingNumpy())
    labels = connected_components(num_docs, path[:-1], path[1:])
    assert np.all(labels == 0)
    # Rounds and jumps grow with log n (about 17 here); one hop per round would need about n.
    assert comparisons <= 8 * math.ceil(math.log2(num_docs)), comparisons


def test_many_short_chains() -> None:
    num_docs, length = 60_000, 30
    rng = np.random.default_rng(5)
    nodes = rng.permutation(num_docs).reshape(-1, length)
    first, second = nodes[:, :-1].ravel(), nodes[:, 1:].ravel()
    labels = connected_components(num_docs, first, second)
    expected = np.empty(num_docs, dtype=np.int64)
    expected[nodes] = nodes.min(axis=1, keepdims=True)
    assert np.array_equal(labels, expected)


# --- groups ------------------------------------------------------------------------------------------------


def test_group_components_hand_computed() -> None:
    groups = group_components(9, np.array([8, 3, 3, 6, 4]), np.array([5, 0, 1, 6, 4]))
    # {0, 1, 3} and {5, 8}; the self-loops on 6 and 4 leave them alone, and 2, 7 have no edge.
    assert _as_lists(groups) == [[0, 1, 3], [5, 8]]
    assert len(groups) == 2
    assert groups.offsets.tolist() == [0, 3, 5]
    assert groups.members.dtype == np.int64 and groups.offsets.dtype == np.int64


def test_group_components_without_pairs() -> None:
    empty = np.empty(0, dtype=np.int64)
    groups = group_components(5, empty, empty)
    assert len(groups) == 0
    assert groups.members.tolist() == [] and groups.offsets.tolist() == [0]


@settings(derandomize=True, max_examples=300, deadline=None)
@given(graphs())
def test_groups_are_components_of_two_or_more_in_order(graph: tuple[int, list[tuple[int, int]]]) -> None:
    num_docs, edges = graph
    groups = group_components(num_docs, *_split(edges))
    listed = _as_lists(groups)
    assert listed == _reference_groups(num_docs, edges)
    assert all(len(group) >= 2 for group in listed)
    assert all(group == sorted(group) and len(set(group)) == len(group) for group in listed)
    firsts = [group[0] for group in listed]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
    # No document is in two groups.
    assert len(groups.members) == len(set(groups.members.tolist()))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(graphs(), st.randoms(use_true_random=False))
def test_groups_ignore_edge_order_and_direction(graph: tuple[int, list[tuple[int, int]]], random) -> None:
    num_docs, edges = graph
    shuffled = [(b, a) if random.random() < 0.5 else (a, b) for a, b in edges]
    random.shuffle(shuffled)
    expected = group_components(num_docs, *_split(edges))
    permuted = group_components(num_docs, *_split(shuffled))
    assert np.array_equal(permuted.members, expected.members)
    assert np.array_equal(permuted.offsets, expected.offsets)
