"""Strict groups (every pair, optionally every triple, accepted), weakest links and kept representatives.

Unit tests use hand-made pair sets whose groups are worked out by hand; property tests (hypothesis) check the
guarantees on random accepted-pair sets against a plain-Python reference of the same greedy rule.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.groups import strict
from dedup_cli.groups.components import Groups, connected_components, group_components
from dedup_cli.groups.representatives import representatives, weakest_estimates
from dedup_cli.groups.strict import strict_groups
from dedup_cli.options.vocabulary import GROUP_METHODS, KEEP_CHOICES


def as_sets(groups: Groups) -> list[list[int]]:
    return [groups.group(g).tolist() for g in range(len(groups))]


def pairs(*triples: tuple[int, int, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, estimate) arrays from (i, j, estimate) tuples; empty arrays from none."""
    first = np.array([t[0] for t in triples], np.int64)
    second = np.array([t[1] for t in triples], np.int64)
    return first, second, np.array([t[2] for t in triples], np.float64)


def reference_strict(
    num_docs: int, edges: list[tuple[int, int, float]], bad_triples: frozenset[tuple[int, int, int]] = frozenset()
) -> list[list[int]]:
    """The greedy rule written plainly with Python sets: most similar pair first, merge if the union stays clean."""
    accepted = {(i, j) for i, j, _ in edges}
    group_of = {d: frozenset([d]) for d in range(num_docs)}
    for i, j, _ in sorted(edges, key=lambda edge: (-edge[2], edge[0], edge[1])):
        union = group_of[i] | group_of[j]
        if group_of[i] == group_of[j]:
            continue
        if all((a, b) in accepted for a, b in itertools.combinations(sorted(union), 2)) and not any(
            t in bad_triples for t in itertools.combinations(sorted(union), 3)
        ):
            for d in union:
                group_of[d] = union
    found = {tuple(sorted(g)) for g in group_of.values() if len(g) >= 2}
    return [list(g) for g in sorted(found)]


# ---------------------------------------------------------------------------------------------------------------------
# Hand-made cases
# ---------------------------------------------------------------------------------------------------------------------


def test_choices_are_exported() -> None:
    assert GROUP_METHODS == ("components", "strict", "witness")
    assert KEEP_CHOICES == ("first", "longest", "shortest", "id", "oldest", "newest")


@pytest.mark.parametrize(
    ("estimate_ab", "estimate_bc", "expected"),
    [(0.9, 0.8, [[0, 1]]), (0.8, 0.9, [[1, 2]]), (0.85, 0.85, [[0, 1]])],  # a tie goes to the smaller (first, second)
)
def test_chain_is_split_by_similarity(estimate_ab: float, estimate_bc: float, expected: list[list[int]]) -> None:
    # A~B and B~C accepted, A and C not: components chain them, strict never does.
    first, second, estimate = pairs((0, 1, estimate_ab), (1, 2, estimate_bc))
    assert as_sets(group_components(3, first, second)) == [[0, 1, 2]]
    assert as_sets(strict_groups(3, first, second, estimate)) == expected


def test_clique_becomes_one_group() -> None:
    members = [2, 5, 7, 11]
    edges = [(i, j, 0.6 + 0.01 * k) for k, (i, j) in enumerate(itertools.combinations(members, 2))]
    assert as_sets(strict_groups(12, *pairs(*edges))) == [members]


def test_groups_ordered_by_first_member_and_singletons_dropped() -> None:
    first, second, estimate = pairs((5, 6, 0.99), (0, 3, 0.7), (3, 4, 0.8), (0, 4, 0.75), (1, 8, 0.6))
    groups = strict_groups(10, first, second, estimate)
    assert as_sets(groups) == [[0, 3, 4], [1, 8], [5, 6]]
    assert groups.members.dtype == np.int64 and groups.offsets.dtype == np.int64


def test_no_pairs_gives_no_groups() -> None:
    groups = strict_groups(4, *pairs())
    assert len(groups) == 0 and groups.offsets.tolist() == [0]


def test_other_dtypes_accepted_and_shapes_checked() -> None:
    narrow = strict_groups(3, np.array([0], np.int32), np.array([2], np.uint16), np.array([0.9], np.float32))
    assert as_sets(narrow) == [[0, 2]]
    with pytest.raises(ValueError, match="one length"):
        strict_groups(3, np.array([0, 1]), np.array([2]), np.array([0.9]))


def test_weaker_link_cannot_pull_a_member_away() -> None:
    # {0,1,2} is a clique formed first; 3 is accepted with 2 only, strongly, but that cannot break the clique
    # nor join it. 3 stays alone because 2 is taken.
    first, second, estimate = pairs((0, 1, 0.9), (0, 2, 0.9), (1, 2, 0.9), (2, 3, 0.95))
    # (2, 3) is the most similar pair, so it forms first and the clique cannot absorb it: {2,3} then {0,1}.
    assert as_sets(strict_groups(4, first, second, estimate)) == [[0, 1], [2, 3]]
    first, second, estimate = pairs((0, 1, 0.9), (0, 2, 0.9), (1, 2, 0.9), (2, 3, 0.85))
    assert as_sets(strict_groups(4, first, second, estimate)) == [[0, 1, 2]]


# ---------------------------------------------------------------------------------------------------------------------
# Triples
# ---------------------------------------------------------------------------------------------------------------------


def test_rejected_triple_splits_the_clique() -> None:
    edges = [(0, 1, 0.9), (0, 2, 0.8), (1, 2, 0.7), (0, 3, 0.6), (1, 3, 0.6), (2, 3, 0.6)]
    seen: list[np.ndarray] = []

    def triple_ok(triples: np.ndarray) -> np.ndarray:
        seen.append(triples)
        return ~np.all(triples == np.array([0, 1, 2]), axis=1)

    assert as_sets(strict_groups(4, *pairs(*edges))) == [[0, 1, 2, 3]]
    groups = strict_groups(4, *pairs(*edges), triple_ok=triple_ok)
    # {0,1} forms; adding 2 needs (0,1,2), refused; 3 joins {0,1} (triples (0,1,3) pass); 2 stays alone.
    assert as_sets(groups) == [[0, 1, 3]]
    for triples in seen:
        assert triples.dtype == np.int64 and triples.ndim == 2 and triples.shape[1] == 3
        assert np.all(triples[:, 0] < triples[:, 1]) and np.all(triples[:, 1] < triples[:, 2])


def test_triples_are_batched_and_all_spanning_triples_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strict, "TRIPLE_BATCH", 4)
    size = 8
    edges = [(i, j, 0.9) for i, j in itertools.combinations(range(size), 2)]
    checked: set[tuple[int, int, int]] = set()
    batch_sizes: list[int] = []

    def triple_ok(triples: np.ndarray) -> np.ndarray:
        batch_sizes.append(len(triples))
        checked.update(map(tuple, triples.tolist()))
        return np.ones(len(triples), dtype=bool)

    assert as_sets(strict_groups(size, *pairs(*edges), triple_ok=triple_ok)) == [list(range(size))]
    assert checked == set(itertools.combinations(range(size), 3))
    # A batch holds whole rows of inner pairs: at most max(TRIPLE_BATCH, size of the other part) triples.
    assert max(batch_sizes) <= size


def test_triple_ok_not_called_for_a_merge_whose_pairs_fail() -> None:
    # Only (0,1) and (1,2) accepted: the merge of {0,1} with 2 fails on pair (0,2) before any triple is formed.
    def triple_ok(triples: np.ndarray) -> np.ndarray:
        raise AssertionError(f"called with {triples.tolist()}")

    assert as_sets(strict_groups(3, *pairs((0, 1, 0.9), (1, 2, 0.8)), triple_ok=triple_ok)) == [[0, 1]]


# ---------------------------------------------------------------------------------------------------------------------
# Properties on random accepted-pair sets
# ---------------------------------------------------------------------------------------------------------------------


@st.composite
def accepted_pairs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, float]]]:
    """A document count and distinct accepted pairs (i < j) with estimates from a coarse grid, so ties happen."""
    num_docs = draw(st.integers(2, 12))
    all_pairs = list(itertools.combinations(range(num_docs), 2))
    chosen = draw(st.lists(st.sampled_from(all_pairs), unique=True, max_size=len(all_pairs)))
    estimates = draw(st.lists(st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9, 1.0]), min_size=len(chosen),
                              max_size=len(chosen)))
    return num_docs, [(i, j, e) for (i, j), e in zip(chosen, estimates, strict=True)]


@settings(max_examples=300, deadline=None)
@given(accepted_pairs(), st.randoms(use_true_random=False))
def test_strict_group_properties(case: tuple[int, list[tuple[int, int, float]]], random: object) -> None:
    num_docs, edges = case
    accepted = {(i, j) for i, j, _ in edges}
    groups = strict_groups(num_docs, *pairs(*edges))
    found = as_sets(groups)

    # Same greedy rule as the plain reference.
    assert found == reference_strict(num_docs, edges)
    # Every pair inside every group is accepted; sizes ≥ 2; members ascending; groups ordered by first member.
    for members in found:
        assert len(members) >= 2 and members == sorted(members)
        assert all(pair in accepted for pair in itertools.combinations(members, 2))
    assert [g[0] for g in found] == sorted(g[0] for g in found)
    # Disjoint.
    flat = [d for g in found for d in g]
    assert len(flat) == len(set(flat))
    # Each strict group lies inside one connected component.
    labels = connected_components(num_docs, *pairs(*edges)[:2])
    for members in found:
        assert len(set(labels[members].tolist())) == 1
    # Maximal: no two clusters (singletons included) could still merge into one clean group.
    cluster_of: dict[int, tuple[int, ...]] = {d: (d,) for d in range(num_docs)}
    for members in found:
        for d in members:
            cluster_of[d] = tuple(members)
    clusters = sorted(set(cluster_of.values()))
    for left, right in itertools.combinations(clusters, 2):
        assert not all(tuple(sorted((a, b))) in accepted for a in left for b in right)
    # Independent of the order of the input pairs.
    shuffled = list(edges)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    assert as_sets(strict_groups(num_docs, *pairs(*shuffled))) == found


@settings(max_examples=200, deadline=None)
@given(accepted_pairs(), st.data())
def test_strict_groups_with_triples_match_reference(
    case: tuple[int, list[tuple[int, int, float]]], data: st.DataObject
) -> None:
    num_docs, edges = case
    all_triples = list(itertools.combinations(range(num_docs), 3))
    bad = frozenset(data.draw(st.lists(st.sampled_from(all_triples), max_size=6))) if all_triples else frozenset()

    def triple_ok(triples: np.ndarray) -> np.ndarray:
        return np.array([tuple(t) not in bad for t in triples.tolist()], dtype=bool)

    found = as_sets(strict_groups(num_docs, *pairs(*edges), triple_ok=triple_ok))
    assert found == reference_strict(num_docs, edges, bad)
    for members in found:
        assert not any(t in bad for t in itertools.combinations(members, 3))


# ---------------------------------------------------------------------------------------------------------------------
# Weakest estimates and representatives
# ---------------------------------------------------------------------------------------------------------------------


def test_weakest_estimates_strict_and_components() -> None:
    # Chain 0~1~2 (0,2 unknown) plus a triangle 4,5,6 and an isolated pair 7~8.
    first, second, estimate = pairs(
        (0, 1, 0.9), (1, 2, 0.7), (4, 5, 0.8), (4, 6, 0.65), (5, 6, 0.95), (7, 8, 0.75)
    )
    components = group_components(9, first, second)
    assert as_sets(components) == [[0, 1, 2], [4, 5, 6], [7, 8]]
    # For the chain only accepted pairs count: min(0.9, 0.7), the unknown (0,2) is left out.
    np.testing.assert_array_equal(weakest_estimates(components, first, second, estimate), [0.7, 0.65, 0.75])
    strict = strict_groups(9, first, second, estimate)
    assert as_sets(strict) == [[0, 1], [4, 5, 6], [7, 8]]
    weakest = weakest_estimates(strict, first, second, estimate)
    assert weakest.dtype == np.float64
    np.testing.assert_array_equal(weakest, [0.9, 0.65, 0.75])


def test_weakest_estimates_group_without_known_pair_is_nan() -> None:
    groups = Groups(members=np.array([0, 1, 2, 3], np.int64), offsets=np.array([0, 2, 4], np.int64))
    weakest = weakest_estimates(groups, *pairs((2, 3, 0.6), (1, 2, 0.99)))  # (1,2) crosses groups: ignored
    assert np.isnan(weakest[0]) and weakest[1] == 0.6
    assert np.isnan(weakest_estimates(groups, *pairs())).all()


@pytest.fixture
def three_groups() -> Groups:
    return Groups(members=np.array([0, 3, 5, 1, 2, 4, 6, 7], np.int64), offsets=np.array([0, 3, 6, 8], np.int64))


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        ("first", [0, 1, 6]),
        ("id", [0, 1, 6]),
        # counts: group [0,3,5] → 10, 30, 30 (tie: 3); [1,2,4] → 7, 7, 7 (tie: 1); [6,7] → 2, 9.
        ("longest", [3, 1, 7]),
        ("shortest", [0, 1, 6]),
    ],
)
def test_representatives(three_groups: Groups, keep: str, expected: list[int]) -> None:
    shingle_counts = np.array([10, 7, 7, 30, 7, 30, 2, 9])
    kept = representatives(three_groups, keep, shingle_counts)
    assert kept.dtype == np.int64
    assert kept.tolist() == expected


def test_representatives_shortest_tie() -> None:
    groups = Groups(members=np.array([2, 4, 9], np.int64), offsets=np.array([0, 3], np.int64))
    counts = np.zeros(10, np.int64)
    counts[[2, 4, 9]] = [8, 5, 5]
    assert representatives(groups, "shortest", counts).tolist() == [4]
    assert representatives(groups, "longest", counts).tolist() == [2]


@pytest.mark.parametrize("keep", [*KEEP_CHOICES, "field"])
def test_a_live_member_is_kept_before_a_gone_one_under_every_policy(keep: str) -> None:
    """Document 0 wins every policy (smallest id, most and fewest shingles: all tie, earliest and latest run and
    time, highest value, and it is the preferred one) but is gone: its group keeps the best live member. A group
    whose members are all gone keeps one of them."""
    groups = Groups(members=np.array([0, 1, 2, 3, 4], np.int64), offsets=np.array([0, 3, 5], np.int64))
    counts = np.full(5, 7, np.int64)
    runs, times = np.array([1, 2, 2, 1, 1]), np.zeros(5, np.int64)
    if keep == "newest":
        runs = np.array([3, 2, 2, 1, 1])
    scores = np.array([9.0, 1.0, 1.0, 1.0, 1.0])
    preferred = np.array([True, False, False, False, False])
    live = np.array([False, True, True, False, False])
    kept = representatives(groups, keep, counts, runs, times, scores, preferred, live)
    assert kept.tolist() == [1, 3]
    assert representatives(groups, keep, counts, runs, times, scores, preferred).tolist()[0] == 0


def test_representatives_of_no_groups() -> None:
    none = Groups(members=np.array([], np.int64), offsets=np.array([0], np.int64))
    for keep in KEEP_CHOICES:
        assert representatives(none, keep, np.array([], np.int64)).tolist() == []


def test_unknown_keep_names_option_and_choices(three_groups: Groups) -> None:
    with pytest.raises(ValueError) as raised:
        representatives(three_groups, "largest", np.ones(8))
    message = str(raised.value)
    assert "keep" in message and "largest" in message
    assert all(choice in message for choice in KEEP_CHOICES)


# ---------------------------------------------------------------------------------------------------------------------
# Timing (reported, not asserted)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_timing_many_small_cliques_plus_noise(capsys: pytest.CaptureFixture[str]) -> None:
    """~10^5 accepted pairs over 5·10^4 documents: cliques of 2 to 8 documents plus 10% random noise pairs."""
    rng = np.random.default_rng(20240607)
    num_docs, clique_pairs = 50_000, 90_000
    order = rng.permutation(num_docs)
    chunks, made, used = [], 0, 0
    while made < clique_pairs:
        size = int(rng.integers(2, 9))
        members = order[used : used + size]
        used += size
        i, j = np.triu_indices(size, k=1)
        chunks.append(np.stack([members[i], members[j]], axis=1))
        made += i.size
    clique = np.sort(np.concatenate(chunks), axis=1)
    noise = np.sort(rng.integers(0, num_docs, size=(10_000, 2)), axis=1)
    noise = noise[noise[:, 0] != noise[:, 1]]
    both = np.unique(np.concatenate([clique, noise]), axis=0)
    # Clique pairs are more similar than noise pairs, as near-duplicates are than chance matches.
    in_clique = np.isin(both[:, 0] * num_docs + both[:, 1], clique[:, 0] * num_docs + clique[:, 1])
    estimate = np.where(in_clique, rng.uniform(0.7, 1.0, len(both)), rng.uniform(0.5, 0.7, len(both)))
    first, second = both[:, 0].copy(), both[:, 1].copy()

    start = time.perf_counter()
    groups = strict_groups(num_docs, first, second, estimate)
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    components = group_components(num_docs, first, second)
    components_elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nstrict_groups: {len(first)} pairs over {num_docs} documents in {elapsed:.3f} s "
              f"({len(groups)} groups); components: {components_elapsed:.3f} s ({len(components)} groups)")
    # Sanity only: every strict group is a clique of accepted pairs.
    codes = np.sort(first * num_docs + second)
    sizes = np.diff(groups.offsets)
    for g in np.flatnonzero(sizes >= 3)[:200]:
        i, j = np.triu_indices(int(sizes[g]), k=1)
        members = groups.group(int(g))
        wanted = members[i] * num_docs + members[j]
        assert np.all(codes[np.minimum(np.searchsorted(codes, wanted), codes.size - 1)] == wanted)
