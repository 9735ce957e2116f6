"""Triples: triangle enumeration, 3-way scoring, and finding planted triples.

Planted triples are integer shingle sets with an exact, known Venn layout, signed with the real hash family
(``HashFamily`` + ``min_hash_values``, k = 256), banded with ``choose_banding(..., recall=PAIR_RECALL_FOR_TRIPLES)``
and scored like ``dedup find`` does. Run with ``-s`` to see the measured recall figures.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pytest
from helpers import wedge_count
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.candidates import triangles as triangle_module
from dedup_cli.candidates.banding import choose_banding
from dedup_cli.candidates.buckets import candidate_pairs
from dedup_cli.candidates.candidate_triples import candidate_triples, pair_margin
from dedup_cli.candidates.triangles import WEDGE_BATCH, triangles
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine.stages import plan as find_plan
from dedup_cli.engine.stages.conclude import find_triples
from dedup_cli.estimates import dense, intervals, three_way, two_way
from dedup_cli.estimates import triple_scores as triple_scoring
from dedup_cli.estimates.exact import exact_resemblance, triple_resemblances
from dedup_cli.estimates.pairs import score_pairs
from dedup_cli.estimates.triple_scores import ScoredTriples, score_triples
from dedup_cli.minhash.kperm import HashFamily, min_hash_values
from dedup_cli.minhash.packing import lowest_bits

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning (overflow, 0/0) anywhere

PROPERTY = settings(derandomize=True, deadline=None, max_examples=200)
NUM_PERM = 256
PAIR_RECALL_FOR_TRIPLES = pair_recall_for_triples()  # per-pair recall for 0.99 of triples, margin z = 3: 0.998017
BAND_BITS = 8


def report(line: str) -> None:
    """Print one measured figure (visible with ``pytest -s``)."""
    print(f"\n[triples] {line}", end="")


def brute_force_triangles(first: np.ndarray, second: np.ndarray, num_docs: int) -> np.ndarray:
    edges = {(min(a, b), max(a, b)) for a, b in zip(first.tolist(), second.tolist(), strict=True) if a != b}
    found = [
        (a, b, c)
        for a, b, c in itertools.combinations(range(num_docs), 3)
        if (a, b) in edges and (a, c) in edges and (b, c) in edges
    ]
    return np.array(found, dtype=np.int64).reshape(-1, 3)


def clique_edges(members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    upper = np.triu_indices(members.size, 1)
    return members[upper[0]], members[upper[1]]


# ----------------------------------------------------------------------------------------------
# triangles
# ----------------------------------------------------------------------------------------------


@PROPERTY
@given(
    num_docs=st.integers(1, 18),
    data=st.data(),
    max_wedges=st.sampled_from([1, 2, 7, WEDGE_BATCH]),
)
def test_triangles_match_brute_force(num_docs: int, data: st.DataObject, max_wedges: int) -> None:
    edges = data.draw(st.lists(st.tuples(st.integers(0, num_docs - 1), st.integers(0, num_docs - 1)), max_size=90))
    first = np.array([a for a, _ in edges], dtype=np.int64)
    second = np.array([b for _, b in edges], dtype=np.int64)
    found = triangles(first, second, num_docs, max_wedges=max_wedges)
    assert found.dtype == np.int64 and found.shape[1] == 3
    np.testing.assert_array_equal(found, brute_force_triangles(first, second, num_docs))


def test_triangles_of_dense_random_graphs_match_brute_force() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        num_docs = int(rng.integers(10, 40))
        first, second = rng.integers(0, num_docs, (2, int(rng.integers(0, 400))))
        expected = brute_force_triangles(first, second, num_docs)
        for max_wedges in (3, 1 << 18):
            np.testing.assert_array_equal(triangles(first, second, num_docs, max_wedges=max_wedges), expected)


def test_triangles_of_empty_and_triangle_free_graphs() -> None:
    empty = np.empty(0, dtype=np.int64)
    for num_docs in (0, 1, 5):
        found = triangles(empty, empty, num_docs)
        assert found.shape == (0, 3) and found.dtype == np.int64
    # Self-loops, duplicates and both orientations of a path: still no triangle.
    first, second = np.array([0, 1, 1, 2, 3]), np.array([1, 0, 2, 2, 3])
    assert triangles(first, second, 4).shape == (0, 3)
    # A star has no triangle and, with degree ranking, costs no wedge either.
    leaves = np.arange(1, 5001)
    assert wedge_count(np.zeros_like(leaves), leaves, 5001) == 0
    assert triangles(np.zeros_like(leaves), leaves, 5001).shape == (0, 3)


@pytest.mark.parametrize("size", [3, 4, 10, 45])
@pytest.mark.parametrize("max_wedges", [1, 5, WEDGE_BATCH])
def test_clique_gives_every_triple(size: int, max_wedges: int) -> None:
    # Scatter the clique over a larger index range so that ranks and indices differ.
    members = np.sort(np.random.default_rng(size).choice(10 * size, size, replace=False))
    first, second = clique_edges(members)
    found = triangles(second, first, 10 * size, max_wedges=max_wedges)  # reversed orientation on purpose
    assert found.shape == (math.comb(size, 3), 3)
    np.testing.assert_array_equal(found, np.array(list(itertools.combinations(members.tolist(), 3))))
    assert wedge_count(first, second, 10 * size) == math.comb(size, 3)


def test_hub_with_many_near_duplicates_is_chunked_within_one_node() -> None:
    """A hub in a 60-clique plus a 3000-leaf star: max_wedges = 7 splits one node's wedges across batches."""
    hub = 0
    clique = np.arange(0, 60)
    leaves = np.arange(60, 3060)
    cf, cs = clique_edges(clique)
    # Leaves paired off (60–61, 62–63, …) make one extra triangle with the hub per pair.
    first = np.concatenate([cf, np.full(leaves.size, hub), leaves[0::2]])
    second = np.concatenate([cs, leaves, leaves[1::2]])
    expected_count = math.comb(60, 3) + leaves.size // 2
    found = triangles(first, second, 3060, max_wedges=7)
    assert found.shape == (expected_count, 3)
    np.testing.assert_array_equal(found, triangles(first, second, 3060))
    extra = found[found[:, 1] >= 60]
    np.testing.assert_array_equal(extra, np.stack([np.zeros(1500, np.int64), leaves[0::2], leaves[1::2]], axis=1))
    # Degree ranking keeps the wedge count near the output size: the hub's 3059 neighbours cost nothing extra.
    assert wedge_count(first, second, 3060) < 2 * expected_count


def test_pair_positions_are_exact_for_huge_lists() -> None:
    """The t-th pair of a forward list of degree d ~ 10^6 (t ~ 5·10^11) is recovered exactly."""
    y = np.array([1, 2, 3, 999_999, 1_000_000, 1_414_213], dtype=np.int64)
    x = np.array([0, 1, 0, 999_998, 0, 1_414_212], dtype=np.int64)
    got_x, got_y = triangle_module._pair_positions(y * (y - 1) // 2 + x)
    np.testing.assert_array_equal(got_x, x)
    np.testing.assert_array_equal(got_y, y)


def test_triangles_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="0..3"):
        triangles(np.array([0]), np.array([4]), 4)
    with pytest.raises(ValueError, match="aligned"):
        triangles(np.array([0, 1]), np.array([1]), 4)
    with pytest.raises(ValueError, match="max_wedges"):
        triangles(np.array([0]), np.array([1]), 4, max_wedges=0)


# ----------------------------------------------------------------------------------------------
# margin and recall budget
# ----------------------------------------------------------------------------------------------


def test_pair_margin_is_z_sparse_standard_errors_at_threshold() -> None:
    # b = 2, R0 = 0.5: E = 1/4 + 3/4 · 1/2 = 0.625; Var = E(1 − E) / (k (3/4)²) (eq. 11).
    expected = 3.0 * math.sqrt(0.625 * 0.375 / (256 * 0.5625))
    assert pair_margin(0.5, 256, 2) == pytest.approx(expected, rel=1e-12)
    assert pair_margin(0.5, 256, 2, z=0.0) == 0.0
    assert pair_margin(1.0, 256, 4) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        pair_margin(0.0, 256, 2)


def test_pair_recall_budget() -> None:
    # (1 − 0.99)/3 minus the margin's one-sided loss Φ(−3) = 0.0013499.
    assert PAIR_RECALL_FOR_TRIPLES == pytest.approx(1.0 - (0.01 / 3 - 0.0013498980316301), abs=1e-12)
    assert pair_recall_for_triples(0.9, z=4.0) == pytest.approx(1.0 - (0.1 / 3 - 3.167124183e-05), abs=1e-10)
    with pytest.raises(ValueError, match=r"recall 0\.999 is out of reach .* use recall 0\.9317 or lower"):
        pair_recall_for_triples(0.999, z=2.0)
    with pytest.raises(ValueError, match=r"use recall 0\.9959 or lower"):
        pair_recall_for_triples(0.9999)
    assert pair_recall_for_triples(0.9959) < 1.0  # the advice works
    with pytest.raises(ValueError):
        pair_recall_for_triples(1.0)


def test_dense_cutoff_matches_pipeline() -> None:
    assert triple_scoring.DENSE_R is dense.DENSE_R and find_plan.DENSE_R is dense.DENSE_R


# ----------------------------------------------------------------------------------------------
# score_triples
# ----------------------------------------------------------------------------------------------


def direct_score(values: np.ndarray, triple: tuple[int, int, int], r: np.ndarray, bits: int) -> dict[str, Any]:
    """One triple scored the slow, obvious way (as ``dedup estimate`` does)."""
    k = values.shape[1]
    a, b, c = (values[i] for i in triple)
    matches = int(np.sum((a == b) & (b == c)))
    m12, m13, m23 = int(np.sum(a == b)), int(np.sum(a == c)), int(np.sum(b == c))
    pair_matches = [m12, m13, m23]
    r1, r2, r3 = (float(r[i]) for i in triple)
    pairwise = [float(two_way.estimate_2way(m12 / k, r1, r2, bits)),
                float(two_way.estimate_2way(m13 / k, r1, r3, bits)),
                float(two_way.estimate_2way(m23 / k, r2, r3, bits))]
    p12, p13, p23 = m12 / k, m13 / k, m23 / k
    if max(r1, r2, r3) > 1e-4:
        estimate = float(dense.estimate_3way_dense(matches / k, p12, p13, p23, r1, r2, r3, bits))
        p_low, p_high = intervals.wilson_interval(matches, k)
        low, high = (float(np.clip(dense.estimate_3way_dense(p, p12, p13, p23, r1, r2, r3, bits), 0, 1))
                     for p in (p_low, p_high))
    else:
        estimate = float(three_way.estimate_3way(matches / k, p12, p13, p23, bits))
        low, high = (float(x) for x in intervals.confidence_interval_3way(matches, m12, m13, m23, k, bits))
    clipped = min(max(estimate, 0.0), 1.0)
    total = max(sum(min(max(p, 0.0), 1.0) for p in pairwise), 3 * clipped)
    stderr = math.sqrt(max(float(three_way.variance_3way(clipped, total, bits, k)), 0.0))
    return dict(matches=matches, pair_matches=pair_matches, pairwise=pairwise, estimate=estimate, stderr=stderr,
                ci_low=low, ci_high=high)


@pytest.mark.parametrize("bits", [2, 3, 8])
@pytest.mark.parametrize("dense", [False, True])
def test_score_triples_equals_direct_computation(bits: int, dense: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(bits)
    num_docs, k = 30, 64
    # Related rows: copy a base row and redraw some positions, so estimates spread over [0, 1].
    base = rng.integers(0, 1 << bits, k, dtype=np.uint64)
    values = np.tile(base, (num_docs, 1))
    redraw = rng.random((num_docs, k)) < rng.random((num_docs, 1))
    values[redraw] = rng.integers(0, 1 << bits, int(redraw.sum()), dtype=np.uint64)
    values = lowest_bits(values, bits)
    r = rng.uniform(0.05, 0.4, num_docs) if dense else np.full(num_docs, 300 / 2.0**64)
    docs = np.array(list(itertools.combinations(range(9), 3)), dtype=np.int64)
    monkeypatch.setattr(triple_scoring, "_COMPARISON_BYTES", 3000)  # several chunks
    scored = score_triples(values, docs, r, bits)
    assert len(scored) == docs.shape[0]
    np.testing.assert_array_equal(scored.docs, docs)
    for row, triple in enumerate(docs.tolist()):
        expected = direct_score(values, tuple(triple), r, bits)
        assert scored.matches[row] == expected["matches"]
        assert scored.pair_matches[row].tolist() == expected["pair_matches"]
        np.testing.assert_allclose(scored.pairwise[row], expected["pairwise"], rtol=1e-12, atol=1e-12)
        for name in ("estimate", "stderr", "ci_low", "ci_high"):
            assert getattr(scored, name)[row] == pytest.approx(expected[name], rel=1e-9, abs=1e-12), name
    assert scored.matches.dtype == np.int64 and scored.pair_matches.dtype == np.int64
    assert scored.estimate.dtype == np.float64 and scored.pairwise.shape == (docs.shape[0], 3)


@pytest.mark.parametrize("dense", [False, True])
def test_find_triples_equals_scoring_every_candidate(dense: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_triples scores only what it keeps, chunk by chunk; the result must not depend on that."""
    rng = np.random.default_rng(11)
    num_docs, k, bits, threshold = 40, 128, 2, 0.5
    base = rng.integers(0, 4, k, dtype=np.uint64)
    values = np.tile(base, (num_docs, 1))
    redraw = rng.random((num_docs, k)) < rng.uniform(0.0, 0.8, (num_docs, 1))
    values[redraw] = rng.integers(0, 4, int(redraw.sum()), dtype=np.uint64)
    values = lowest_bits(values, bits)
    r = rng.uniform(0.05, 0.4, num_docs) if dense else np.full(num_docs, 300 / 2.0**64)
    first, second = np.triu_indices(num_docs, 1)
    pairs = score_pairs(values, first.astype(np.int64), second.astype(np.int64), r, bits)
    monkeypatch.setattr(triple_scoring, "_COMPARISON_BYTES", 20_000)  # several chunks
    found = find_triples(values, pairs, r, threshold, bits)
    everything = score_triples(values, candidate_triples(pairs, num_docs, threshold, bits, k), r, bits)
    expected = everything.select(everything.estimate >= threshold)
    order = np.lexsort((expected.docs[:, 2], expected.docs[:, 1], expected.docs[:, 0], -expected.estimate))
    expected = expected.select(order)
    assert 20 < len(found) < len(everything)  # a real filter, on a real number of triples
    for name in ScoredTriples.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name), err_msg=name)


def test_score_triples_of_identical_documents_is_one() -> None:
    values = np.tile(np.arange(64, dtype=np.uint8) % 4, (3, 1))
    scored = score_triples(values, np.array([[0, 1, 2]]), np.zeros(3), 2)
    assert scored.estimate[0] == pytest.approx(1.0)
    np.testing.assert_allclose(scored.pairwise[0], 1.0)
    assert scored.ci_high[0] == 1.0 and scored.ci_low[0] > 0.9


def test_select_keeps_arrays_aligned() -> None:
    values = np.random.default_rng(1).integers(0, 4, (6, 32)).astype(np.uint8)
    scored = score_triples(values, np.array([[0, 1, 2], [1, 2, 3], [3, 4, 5]]), np.zeros(6), 2)
    picked = scored.select(np.array([False, True, True]))
    np.testing.assert_array_equal(picked.docs, [[1, 2, 3], [3, 4, 5]])
    for name in ScoredTriples.__dataclass_fields__:
        assert len(getattr(picked, name)) == 2
        np.testing.assert_array_equal(getattr(picked, name), getattr(scored, name)[1:])
    assert len(score_triples(values, np.empty((0, 3), np.int64), np.zeros(6), 2)) == 0


def test_one_bit_is_refused() -> None:
    values = np.zeros((3, 8), dtype=np.uint8)
    message = "3-way estimation needs bits 2 or more; 1-bit values carry no 3-way information"
    with pytest.raises(ValueError) as error:
        score_triples(values, np.array([[0, 1, 2]]), np.zeros(3), 1)
    assert str(error.value) == message
    pairs = score_pairs(values, np.array([0]), np.array([1]), np.zeros(3), 1)
    with pytest.raises(ValueError) as error:
        find_triples(values, pairs, np.zeros(3), 0.5, 1)
    assert str(error.value) == message


# ----------------------------------------------------------------------------------------------
# Planted triples, end to end
# ----------------------------------------------------------------------------------------------


@dataclass
class Planted:
    values: np.ndarray  # uint64[n_docs, 256] minwise values
    r: np.ndarray  # float64[n_docs]
    docs: np.ndarray  # int64[n_triples, 3], rows ascending
    resemblance: np.ndarray  # float64[n_triples], exact 3-way R
    pairwise: np.ndarray  # float64[n_triples, 3], exact R_12, R_13, R_23
    group: np.ndarray  # str[n_triples]: "near" (R0 ≤ R < R0 + 0.05), "clear" (R ≥ R0 + 0.12), "below" (≤ R0 − 0.15)


SHAPES = ("pairs", "singles", "nested", "lopsided", "mixed")


def region_sizes(rng: np.random.Generator, resemblance: float, union: int, shape: str) -> np.ndarray:
    """Venn region sizes [n_123, n_12, n_13, n_23, n_1, n_2, n_3] with n_123 / union ≈ ``resemblance``.

    "pairs" puts the rest in the pair-only regions (pairs well above R), "singles" in the single regions,
    "nested" makes S_3 the core so R_12 = R exactly, "lopsided" also makes S_2 the core plus one element so
    R_13 ≈ R too (the worst case: below R = 1, at most two pairs can sit at R), "mixed" spreads it at random.
    """
    core = int(round(resemblance * union))
    rest = union - core
    sizes = np.zeros(7, dtype=np.int64)
    sizes[0] = core
    if shape == "pairs":
        sizes[1:4] = rest // 3
        sizes[1 : 1 + rest % 3] += 1
    elif shape == "singles":
        sizes[4:7] = rest // 3
        sizes[4 : 4 + rest % 3] += 1
    elif shape == "nested":
        sizes[4], sizes[5] = rest // 2, rest - rest // 2
    elif shape == "lopsided":
        sizes[4], sizes[5] = max(rest - 1, 0), min(rest, 1)
    else:
        sizes[1:] = rng.multinomial(rest, rng.dirichlet(np.ones(6)))
    return sizes


def exact_resemblances(sizes: np.ndarray) -> tuple[float, list[float]]:
    n123, n12, n13, n23, n1, n2, n3 = sizes.tolist()
    union = sum(sizes.tolist())
    pairwise = [(n123 + n12) / (union - n3), (n123 + n13) / (union - n2), (n123 + n23) / (union - n1)]
    return n123 / union, pairwise


@cache
def planted(threshold: float) -> Planted:
    """300 "near", 300 "clear" and 100 "below" triples of shingle sets, shuffled among 2100 documents."""
    rng = np.random.default_rng(int(threshold * 1000))
    plan = (
        [("near", rng.uniform(threshold, threshold + 0.05)) for _ in range(300)]
        + [("clear", rng.uniform(threshold + 0.12, min(1.0, threshold + 0.2))) for _ in range(300)]
        # Below R0 (by ≥ 4 standard errors) with all the rest in pair-only regions: R_ij = R + (1 − R)/3 stays near
        # R0, so most become candidate triangles and only the 3-way estimate can reject them.
        + [("below", threshold - (0.18 if threshold < 0.7 else 0.15)) for _ in range(100)]
    )
    sets: list[np.ndarray] = []
    resemblance, pairwise = [], []
    for index, (_, target) in enumerate(plan):
        union = int(rng.integers(120, 200))
        sizes = region_sizes(rng, target, union, "pairs" if plan[index][0] == "below" else SHAPES[index % len(SHAPES)])
        exact, pairs = exact_resemblances(sizes)
        resemblance.append(exact)
        pairwise.append(pairs)
        elements = rng.integers(0, 1 << 64, union, dtype=np.uint64)
        regions = np.split(elements, np.cumsum(sizes)[:-1])
        members = ((0, 1, 2, 4), (0, 1, 3, 5), (0, 2, 3, 6))  # the regions each set is made of
        sets.extend(np.concatenate([regions[j] for j in member]) for member in members)
    # Documents in random order, so a triple's members are scattered over the store.
    placement = rng.permutation(len(sets))  # set s becomes document placement[s]
    ordered = [sets[s] for s in np.argsort(placement)]
    counts = np.array([s.size for s in ordered], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    values = min_hash_values(np.concatenate(ordered), offsets, HashFamily.from_seed(7, NUM_PERM))
    docs = placement.reshape(-1, 3)
    order = np.argsort(docs, axis=1)
    return Planted(
        values=values,
        r=counts / 2.0**64,
        docs=np.take_along_axis(docs, order, axis=1).astype(np.int64),
        resemblance=np.array(resemblance),
        # Exact pairwise resemblances, re-ordered to the ascending documents: column c of the sorted row.
        pairwise=_reorder_pairs(np.array(pairwise), order),
        group=np.array([label for label, _ in plan]),
    )


def _reorder_pairs(pairwise: np.ndarray, order: np.ndarray) -> np.ndarray:
    index = {(0, 1): 0, (0, 2): 1, (1, 2): 2}
    out = np.empty_like(pairwise)
    for row in range(order.shape[0]):
        for column, (i, j) in enumerate(((0, 1), (0, 2), (1, 2))):
            a, b = sorted((order[row, i], order[row, j]))
            out[row, column] = pairwise[row, index[(a, b)]]
    return out


def triple_codes(docs: np.ndarray, num_docs: int) -> np.ndarray:
    return (docs[:, 0] * num_docs + docs[:, 1]) * num_docs + docs[:, 2]


@pytest.mark.parametrize("threshold", [0.5, 0.8])
@pytest.mark.parametrize("bits", [2, 4])
def test_planted_triples_are_found(threshold: float, bits: int) -> None:
    data = planted(threshold)
    num_docs = data.values.shape[0]
    banding = choose_banding(threshold, NUM_PERM, BAND_BITS, recall=PAIR_RECALL_FOR_TRIPLES)
    lsh = candidate_pairs(lowest_bits(data.values, BAND_BITS), banding.bands, banding.rows)
    values = lowest_bits(data.values, bits)
    pairs = score_pairs(values, lsh.first, lsh.second, data.r, bits)
    candidates = candidate_triples(pairs, num_docs, threshold, bits, NUM_PERM)
    found = find_triples(values, pairs, data.r, threshold, bits)

    planted_codes = triple_codes(data.docs, num_docs)
    is_candidate = np.isin(planted_codes, triple_codes(candidates, num_docs))
    is_found = np.isin(planted_codes, triple_codes(found.docs, num_docs))
    near, clear, below = (data.group == name for name in ("near", "clear", "below"))
    report(
        f"R0 = {threshold}, b = {bits}, {banding.bands}×{banding.rows}: LSH pairs {lsh.first.size}, "
        f"candidate triples {len(candidates)}; near (R0 ≤ R < R0 + 0.05) candidates "
        f"{is_candidate[near].sum()}/{near.sum()}, found {is_found[near].sum()}; clear (R ≥ R0 + 0.12) found "
        f"{is_found[clear].sum()}/{clear.sum()}; below (R ≤ R0 − 0.15) candidates {is_candidate[below].sum()}, "
        f"found {is_found[below].sum()}; reported {len(found)}"
    )
    # The contract: ≥ 0.99 of triples with R ≥ R0 become candidates, and well-separated ones are reported.
    assert is_candidate[near].mean() >= 0.99
    assert is_candidate[clear].mean() >= 0.99
    assert is_found[clear].mean() >= 0.99
    # Triples below R0 reach the 3-way test (their pairs pass) and it rejects every one of them.
    assert is_candidate[below].mean() >= 0.5
    assert not is_found[below].any()
    # Nothing else is reported: every reported triple is a planted one at or above R0.
    assert np.isin(triple_codes(found.docs, num_docs), planted_codes[near | clear]).all()
    # Sorted by descending estimate, then documents; rows ascending; all ≥ R0.
    assert np.all(found.estimate >= threshold)
    assert np.all(np.diff(found.estimate) <= 0)
    assert np.all(np.diff(found.docs, axis=1) > 0)


@pytest.mark.parametrize("threshold", [0.5, 0.8])
@pytest.mark.parametrize("bits", [2, 4])
def test_planted_estimates_are_unbiased(threshold: float, bits: int) -> None:
    """Mean of R̂ − R over all 700 planted triples within 3 standard errors (Theorem 3 at the true R, T)."""
    data = planted(threshold)
    scored = score_triples(lowest_bits(data.values, bits), data.docs, data.r, bits)
    error = scored.estimate - data.resemblance
    variance = three_way.variance_3way(data.resemblance, data.pairwise.sum(axis=1), bits, NUM_PERM)
    standard_error = math.sqrt(float(np.sum(variance))) / error.size
    # The pairwise estimates are unbiased too (eq. 9).
    pair_error = (scored.pairwise - data.pairwise).mean()
    pair_variance = two_way.variance_2way(data.pairwise, 0.0, 0.0, bits, NUM_PERM)
    pair_standard_error = math.sqrt(float(np.sum(pair_variance))) / pair_variance.size
    # The reported standard errors match the spread, and the intervals cover the truth about 95 % of the time.
    spread = float(np.mean(error**2) / np.mean(scored.stderr**2))
    coverage = float(np.mean((scored.ci_low <= data.resemblance) & (data.resemblance <= scored.ci_high)))
    report(
        f"R0 = {threshold}, b = {bits}: mean error {error.mean():+.5f} ± {standard_error:.5f}, pairwise "
        f"{pair_error:+.5f} ± {pair_standard_error:.5f}, mean error² / mean stderr² {spread:.2f}, "
        f"95 % interval coverage {coverage:.3f}"
    )
    assert abs(error.mean()) < 3 * standard_error
    assert abs(pair_error) < 3 * pair_standard_error
    assert 0.8 < spread < 1.25
    assert coverage > 0.92


def test_exact_triple_resemblances_of_many_triples_at_once() -> None:
    """|A ∩ B ∩ C| / |A ∪ B ∪ C| of 500 triples at once is exact_resemblance's of each; NaN for an unknown set."""
    rng = np.random.default_rng(1)
    sets: list[np.ndarray | None] = [np.unique(rng.integers(0, 50, size=int(rng.integers(1, 30)))).astype(np.uint64)
                                     for _ in range(20)]
    sets[3] = None
    docs = np.sort(np.array([rng.choice(20, 3, replace=False) for _ in range(500)]), axis=1)
    found = triple_resemblances(sets, docs)
    for (a, b, c), value in zip(docs.tolist(), found.tolist(), strict=True):
        if 3 in (a, b, c):
            assert math.isnan(value)
        else:
            assert value == pytest.approx(exact_resemblance(sets[a], sets[b], sets[c]), abs=1e-12)


@pytest.mark.parametrize(("bits", "num_perm"), [(2, 64), (2, 256), (4, 128)])
def test_straddling_keeps_every_triple_whose_interval_reaches_the_threshold(bits: int, num_perm: int) -> None:
    # Triples of b-bit values agreeing at a spread of rates, R0 = 0.5: keeping those within reach_margin of R0
    # before their intervals are computed loses none whose interval reaches it.
    generator = np.random.default_rng(bits * num_perm)
    count = 600
    base = generator.integers(0, 1 << bits, size=(count, num_perm), dtype=np.uint64)
    values = np.concatenate([base, base.copy(), base.copy()])
    for copy in (1, 2):
        changed = generator.random((count, num_perm)) < generator.uniform(0.0, 0.9, size=(count, 1))
        block = values[copy * count:(copy + 1) * count]
        block[changed] = generator.integers(0, 1 << bits, size=int(changed.sum()), dtype=np.uint64)
    docs = np.stack([np.arange(count), np.arange(count) + count, np.arange(count) + 2 * count], axis=1)
    r = np.full(3 * count, 1e-12)
    every = score_triples(values, docs, r, bits)
    reaching = (every.estimate >= 0.5) | (every.ci_high >= 0.5)
    assert ((every.estimate < 0.5) & reaching).sum() > 10 and not reaching.all()
    kept = score_triples(values, docs, r, bits, threshold=0.5, straddling=True)
    np.testing.assert_array_equal(kept.docs, docs[reaching])
    np.testing.assert_array_equal(kept.ci_high, every.ci_high[reaching])
    assert (every.ci_high[~reaching] < 0.5).all()
    assert (np.clip(every.estimate, 0, 1) + triple_scoring.reach_margin(bits, num_perm, 0.95) >= every.ci_high).all()
    np.testing.assert_array_equal(score_triples(values, docs, r, bits, threshold=0.5).docs,
                                  docs[every.estimate >= 0.5])
