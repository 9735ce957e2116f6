"""Witness groups: the kept documents are the greedy maximal independent set of the accepted pairs in the keep
policy's order, and every dropped document is grouped with a kept neighbour (its witness)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.groups import witnesses
from dedup_cli.groups.representatives import keep_ranks, representatives
from dedup_cli.groups.witnesses import greedy_kept, witness_groups


def sequential_greedy(num_docs: int, edges: list[tuple[int, int]], rank: np.ndarray) -> np.ndarray:
    """The reference: documents in rank order, each kept unless a neighbour is kept."""
    neighbours: dict[int, set[int]] = {}
    for a, b in edges:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    kept = np.zeros(num_docs, bool)
    for doc in sorted(neighbours, key=lambda d: int(rank[d])):
        if not any(kept[other] for other in neighbours[doc]):
            kept[doc] = True
    return kept


graphs = st.integers(2, 30).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1]), max_size=60),
    st.permutations(list(range(n)))))


@settings(max_examples=200, deadline=None)
@given(graphs)
def test_the_kept_set_is_the_sequential_greedy_one_and_every_drop_has_a_kept_neighbour(graph: tuple) -> None:
    num_docs, edges, order = graph
    rank = np.array(order, np.int64)
    first = np.array([a for a, _ in edges], np.int64)
    second = np.array([b for _, b in edges], np.int64)
    kept = greedy_kept(num_docs, first, second, rank)
    np.testing.assert_array_equal(kept, sequential_greedy(num_docs, edges, rank))
    assert not np.any(kept[first] & kept[second])  # independent
    groups = witness_groups(num_docs, first, second, rank)
    edge_set = {(min(a, b), max(a, b)) for a, b in edges}
    grouped = set()
    for index in range(len(groups)):
        members = groups.group(index).tolist()
        assert members == sorted(members) and len(members) >= 2
        keepers = [m for m in members if kept[m]]
        assert len(keepers) == 1  # a star: one kept document and those it witnesses
        keeper = keepers[0]
        for member in members:
            if member != keeper:
                assert (min(member, keeper), max(member, keeper)) in edge_set
                # its witness is its best-ranked kept neighbour
                kept_neighbours = [o for a, b in edge_set for o in (a, b) if member in (a, b) and o != member
                                   and kept[o]]
                assert keeper == min(kept_neighbours, key=lambda d: int(rank[d]))
        grouped |= set(members)
    touched = set(first.tolist()) | set(second.tolist())
    assert {d for d in touched if not kept[d]} <= grouped  # every dropped document is in a group
    firsts = [int(groups.group(i)[0]) for i in range(len(groups))]
    assert firsts == sorted(firsts)


def test_a_chain_keeps_its_ends_and_every_other_link() -> None:
    # a ~ b ~ c, ranked a, b, c: a kept, b dropped (witnessed by a), c kept with no one to witness.
    groups = witness_groups(3, np.array([0, 1]), np.array([1, 2]), np.array([0, 1, 2]))
    assert [groups.group(i).tolist() for i in range(len(groups))] == [[0, 1]]
    # ranked c first: c kept, b dropped by c, a kept.
    groups = witness_groups(3, np.array([0, 1]), np.array([1, 2]), np.array([2, 1, 0]))
    assert [groups.group(i).tolist() for i in range(len(groups))] == [[1, 2]]


def test_a_long_chain_ranked_along_it_is_finished_one_at_a_time(monkeypatch) -> None:
    called = []
    finish = witnesses._one_at_a_time

    def counted(*arguments: object) -> None:
        called.append(True)
        finish(*arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(witnesses, "_one_at_a_time", counted)
    n = 3000
    first, second = np.arange(n - 1), np.arange(1, n)
    rank = np.arange(n, dtype=np.int64)
    kept = greedy_kept(n, first, second, rank)
    assert called and np.array_equal(kept, np.arange(n) % 2 == 0)


def test_ranks_follow_the_keep_policy_live_documents_first() -> None:
    counts = np.array([10, 30, 20, 40])
    members = np.array([0, 1, 2, 3])
    live = np.array([True, True, True, False])
    ranks = keep_ranks(members, 5, "longest", counts, live=live)
    assert ranks[:4].tolist() == [2, 0, 1, 3] and ranks[4] >= 4  # 3 is longest but gone: last
    # The chain 0 ~ 1 ~ 2 ~ 3: 1 kept (longest live), 0 and 2 dropped beside it, 3 (gone) kept alone.
    groups = witness_groups(5, np.array([0, 1, 2]), np.array([1, 2, 3]), ranks)
    assert [groups.group(i).tolist() for i in range(len(groups))] == [[0, 1, 2]]
    assert representatives(groups, "longest", np.r_[counts, 0], live=np.r_[live, True]).tolist() == [1]
