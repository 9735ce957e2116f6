"""Tests for exact b-bit collision probabilities of dense sets (docs/estimators.md, "Dense sets")."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import markov_chain_collision_probability
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from paper_formulas import collision_probability_2way

from dedup_cli.estimates import three_way, two_way
from dedup_cli.estimates.dense import (
    collision_probability_3way,
    estimate_3way_dense,
    intersection_bounds,
    solve_3way_intersection,
)
from dedup_cli.estimates.two_way import a_coefficient

# Venn regions are indexed by bit mask (bit i−1 set ⇔ the element is in S_i); index 0 is "in no set".
MASKS = np.arange(1, 8)
# (r1, r2, r3, s12, s13, s23, s)
Masses = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def summaries(regions: np.ndarray) -> Masses:
    """(r1, r2, r3, s12, s13, s23, s) from region masses float[..., 8] indexed by mask."""

    def mass(condition: np.ndarray) -> np.ndarray:
        return regions[..., 1:][..., condition].sum(axis=-1)

    in_set = [(MASKS >> i) & 1 == 1 for i in range(3)]
    r1, r2, r3 = (mass(member) for member in in_set)
    s12, s13, s23 = (mass(in_set[i] & in_set[j]) for i, j in ((0, 1), (0, 2), (1, 2)))
    s = mass(in_set[0] & in_set[1] & in_set[2])
    return r1, r2, r3, s12, s13, s23, s


def random_regions(rng: np.random.Generator, n: int, concentration: float = 0.7) -> np.ndarray:
    """float[n, 8] random Venn-region masses (index = mask, 0 = no set), summing to 1."""
    return rng.dirichlet(np.full(8, concentration), size=n)


def resemblances(
    r1: np.ndarray, r2: np.ndarray, r3: np.ndarray, s12: np.ndarray, s13: np.ndarray, s23: np.ndarray, s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(R, T, [R12, R13, R23])."""
    union = r1 + r2 + r3 - s12 - s13 - s23 + s
    pairs = [s12 / (r1 + r2 - s12), s13 / (r1 + r3 - s13), s23 / (r2 + r3 - s23)]
    return s / union, sum(pairs), pairs


def li_konig_theorem_1(r1: np.ndarray, r2: np.ndarray, s12: np.ndarray, bits: int) -> np.ndarray:
    """E_b = C1 + (1 − C2) R written out from Li & König 2010, eqs. 4–7, independently of the module."""
    m = 2.0**bits
    a1 = r1 * (1 - r1) ** (m - 1) / (1 - (1 - r1) ** m)
    a2 = r2 * (1 - r2) ** (m - 1) / (1 - (1 - r2) ** m)
    c1 = a1 * r2 / (r1 + r2) + a2 * r1 / (r1 + r2)
    c2 = a1 * r1 / (r1 + r2) + a2 * r2 / (r1 + r2)
    resemblance = s12 / (r1 + r2 - s12)
    return c1 + (1 - c2) * resemblance


# --------------------------------------------------------------------------------------------------
# Exactness: the closed form against the uncollapsed chain and against Li & König's Theorem 1
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bits", "count"), [(1, 60), (2, 60), (3, 60), (4, 20), (5, 2)])
def test_closed_form_equals_markov_chain_3way(bits: int, count: int) -> None:
    # The chain has 2 + 6·2^b states and multiplies 2^b matrices per configuration: fewer at b = 5.
    rng = np.random.default_rng(11 + bits)
    # Generic configurations, plus corners: some regions near 0 (concentration 0.2) and sets covering the
    # whole universe (no "in no set" mass).
    generic = random_regions(rng, count)
    corners = random_regions(rng, count, concentration=0.2)
    corners[: count // 2, 0] = 0.0
    regions = np.concatenate([generic, corners / corners.sum(axis=1, keepdims=True)])
    chain = markov_chain_collision_probability(regions[:, 1:], bits)
    closed = collision_probability_3way(*summaries(regions), bits)
    np.testing.assert_allclose(closed, chain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5])
def test_closed_form_equals_markov_chain_2way(bits: int) -> None:
    rng = np.random.default_rng(12)
    weights = rng.dirichlet(np.full(4, 0.7), size=50)  # [nothing, S1 only, S2 only, both]
    chain = markov_chain_collision_probability(weights[:, 1:], bits)
    r1 = weights[:, 1] + weights[:, 3]
    r2 = weights[:, 2] + weights[:, 3]
    np.testing.assert_allclose(collision_probability_2way(r1, r2, weights[:, 3], bits), chain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
def test_reproduces_li_konig_theorem_1(bits: int) -> None:
    grid = np.linspace(0.02, 0.98, 25)
    r1, r2, fraction = np.meshgrid(grid, grid, np.linspace(0.0, 1.0, 11), indexing="ij")
    # s12 from 0 to its largest value min(r1, r2), keeping the union within the universe.
    lowest = np.maximum(0.0, r1 + r2 - 1.0)
    s12 = lowest + fraction * (np.minimum(r1, r2) - lowest)
    np.testing.assert_allclose(
        collision_probability_2way(r1, r2, s12, bits), li_konig_theorem_1(r1, r2, s12, bits), rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_agrees_with_the_2way_expected_match(bits: int) -> None:
    rng = np.random.default_rng(13)
    r1, r2 = rng.uniform(0.01, 0.99, size=(2, 200))
    s12 = rng.uniform(0, 1, 200) * (np.minimum(r1, r2) - np.maximum(0, r1 + r2 - 1)) + np.maximum(0, r1 + r2 - 1)
    resemblance = s12 / (r1 + r2 - s12)
    np.testing.assert_allclose(
        collision_probability_2way(r1, r2, s12, bits),
        two_way.expected_match_2way(resemblance, r1, r2, bits),
        rtol=0,
        atol=1e-12,
    )


def test_first_hit_multiple_limits() -> None:
    # x → 0 is the sparse 1/2^b, with full precision down to hashed-text rates (f / 2^64).
    for bits in (1, 2, 8, 64):
        assert a_coefficient(0.0, bits) == 2.0**-bits
        tiny = 1e-12 * 2.0**-bits  # 2^b x ≪ 1; f / 2^64 is that small for b ≤ 24
        np.testing.assert_allclose(a_coefficient(tiny, bits), 2.0**-bits, rtol=1e-9)
    # x = 1: the next position always hits, one step later, never a multiple of 2^b ≥ 2.
    assert a_coefficient(1.0, 3) == 0.0
    # Hand value: b = 1, x = 1/2: Σ_{j≥1} (1/2)^{2j} = 1/3.
    np.testing.assert_allclose(a_coefficient(0.5, 1), 1 / 3, rtol=1e-15)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6, 8])
def test_sparse_limit_is_eq_7(bits: int) -> None:
    rng = np.random.default_rng(14)
    regions = random_regions(rng, 100)
    scale = 1e-9  # r_i ~ 1e-9: the dense terms differ from 1/2^b by O(2^b r)
    regions[:, 1:] *= scale
    regions[:, 0] = 1.0 - regions[:, 1:].sum(axis=1)
    masses = summaries(regions)
    resemblance, total, _ = resemblances(*masses)
    m = 2.0**bits
    eq_7 = ((m - 1) * (m - 2) * resemblance + (m - 1) * total + 1) / m**2
    np.testing.assert_allclose(collision_probability_3way(*masses, bits), eq_7, rtol=0, atol=1e-12 + 10 * m * scale)


def test_full_width_bits_give_resemblance() -> None:
    # With b = 64 the low bits are the whole minimum: P_b is the 3-way resemblance R (eq. 5).
    masses = summaries(random_regions(np.random.default_rng(15), 50))
    resemblance, _, pairs = resemblances(*masses)
    np.testing.assert_allclose(collision_probability_3way(*masses, 64), resemblance, rtol=1e-12)
    r1, r2, _, s12, *_ = masses
    np.testing.assert_allclose(collision_probability_2way(r1, r2, s12, 64), pairs[0], rtol=1e-12)


# --------------------------------------------------------------------------------------------------
# Monte Carlo with true random permutations of a finite universe
# --------------------------------------------------------------------------------------------------

UNIVERSE = 1 << 12
# Region sizes by mask; r ≈ 0.50, 0.45, 0.37: dense enough that the sparse formulas are far off.
REGION_SIZES = {1: 650, 2: 400, 3: 300, 4: 150, 5: 200, 6: 250, 7: 900}


def region_counts(sizes: dict[int, int], universe: int) -> np.ndarray:
    counts = np.zeros(8, dtype=np.int64)
    for mask, size in sizes.items():
        counts[mask] = size
    counts[0] = universe - counts.sum()
    return counts


def minima_by_shuffling(counts: np.ndarray, num_perm: int, rng: np.random.Generator) -> np.ndarray:
    """int64[num_perm, 3]: z_i = min π(S_i) for uniformly random permutations π, by shuffling Ω."""
    labels = np.repeat(np.arange(8, dtype=np.uint8), counts)  # the region of each element of Ω
    minima = []
    for start in range(0, num_perm, 2000):  # bounded memory: 2000 × D bytes at a time
        rows = min(2000, num_perm - start)
        # Row j lists the regions of π^{-1}(0), π^{-1}(1), …: the first position of S_i's label is min π(S_i).
        shuffled = rng.permuted(np.broadcast_to(labels, (rows, labels.size)), axis=1)
        minima.append(np.stack([np.argmax(shuffled & (1 << i) != 0, axis=1) for i in range(3)], axis=1))
    return np.concatenate(minima)


def minima_by_sequential_draws(counts: np.ndarray, num_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Same law as :func:`minima_by_shuffling`, drawing only a prefix of each permutation.

    Position t of a uniformly random permutation holds an element of region v with probability
    (remaining elements of v)/(D − t): drawing without replacement until all three sets are hit.
    """
    remaining = np.broadcast_to(counts, (num_perm, counts.size)).copy()
    minima = np.full((num_perm, 3), -1, dtype=np.int64)
    rows = np.arange(num_perm)
    position = 0
    while np.any(minima < 0):
        cumulative = remaining.cumsum(axis=1)
        draw = rng.integers(0, cumulative[:, -1])
        label = (draw[:, None] >= cumulative).sum(axis=1)
        remaining[rows, label] -= 1
        for i in range(3):
            minima[((label >> i) & 1 == 1) & (minima[:, i] < 0), i] = position
        position += 1
    return minima


def match_fractions(minima: np.ndarray, bits: int) -> dict[str, np.ndarray]:
    """Fractions of positions (last-but-one axis) whose b-bit values agree, for each pair and all three."""
    low = minima & ((1 << bits) - 1)
    equal = {
        "12": low[..., 0] == low[..., 1],
        "13": low[..., 0] == low[..., 2],
        "23": low[..., 1] == low[..., 2],
    }
    equal["123"] = equal["12"] & equal["13"]
    return {key: value.mean(axis=-1) for key, value in equal.items()}


def test_monte_carlo_true_permutations_match_exact_probabilities() -> None:
    """4 standard errors, with 2·10^4 true permutations of D = 2^12.

    The exact values are the large-D limit. At D = 2^12 the finite-universe law differs by about
    2–4·10^-4 (≈ 1/D; measured once with 4·10^6 permutations), a tenth of the standard error (≈ 3.4·10^-3)
    here, so the 4-SE band needs no widening.
    """
    counts = region_counts(REGION_SIZES, UNIVERSE)
    masses = summaries(counts / UNIVERSE)
    r1, r2, r3, s12, s13, s23, s = masses
    num_perm = 20_000
    minima = minima_by_shuffling(counts, num_perm, np.random.default_rng(2010))
    resemblance, total, pairs = resemblances(*masses)
    for bits in (1, 2, 3):
        observed = match_fractions(minima, bits)
        exact = {
            "12": collision_probability_2way(r1, r2, s12, bits),
            "13": collision_probability_2way(r1, r3, s13, bits),
            "23": collision_probability_2way(r2, r3, s23, bits),
            "123": collision_probability_3way(*masses, bits),
        }
        for key, probability in exact.items():
            standard_error = np.sqrt(probability * (1 - probability) / num_perm)
            assert abs(observed[key] - probability) < 4 * standard_error, (bits, key, observed[key], probability)
        # The check has power: the sparse formula (eq. 7) is rejected by a wide margin at this density.
        m = 2.0**bits
        sparse = ((m - 1) * (m - 2) * resemblance + (m - 1) * total + 1) / m**2
        standard_error = np.sqrt(exact["123"] * (1 - exact["123"]) / num_perm)
        assert abs(observed["123"] - sparse) > 8 * standard_error


def test_sequential_draws_match_shuffling() -> None:
    """The fast sampler used below has the law of true shuffles (checked on its b-bit collision rates)."""
    counts = region_counts(REGION_SIZES, UNIVERSE)
    num_perm = 20_000
    shuffled = match_fractions(minima_by_shuffling(counts, num_perm, np.random.default_rng(1)), 2)
    drawn = match_fractions(minima_by_sequential_draws(counts, num_perm, np.random.default_rng(2)), 2)
    for key in shuffled:
        p = 0.5 * (shuffled[key] + drawn[key])
        assert abs(shuffled[key] - drawn[key]) < 4 * np.sqrt(2 * p * (1 - p) / num_perm), key


def test_dense_3way_estimate_is_nearly_unbiased_where_sparse_is_not() -> None:
    """Li, König & Gui 2010, Sec. 4 / Fig. 5: at r ≈ 0.5 the precise procedure is unbiased, eq. 8 is not."""
    sizes = {1: 300, 2: 350, 3: 300, 4: 400, 5: 250, 6: 200, 7: 1200}  # r_i = 2050/4096 ≈ 0.5, R = 0.4
    counts = region_counts(sizes, UNIVERSE)
    r1, r2, r3, s12, s13, s23, s = summaries(counts / UNIVERSE)
    resemblance = s / (r1 + r2 + r3 - s12 - s13 - s23 + s)
    bits, num_perm, repetitions = 2, 256, 1000
    minima = minima_by_sequential_draws(counts, num_perm * repetitions, np.random.default_rng(2017))
    observed = match_fractions(minima.reshape(repetitions, num_perm, 3), bits)
    # Precise 2-way estimates of s_ij (Li & König eq. 9), then the exact inversion of P_b.
    pairwise = {
        key: np.clip(two_way.estimate_2way(observed[key], ri, rj, bits), 0.0, 1.0)
        for key, ri, rj in (("12", r1, r2), ("13", r1, r3), ("23", r2, r3))
    }
    s_hat = {
        key: pairwise[key] / (1 + pairwise[key]) * (ri + rj)
        for key, ri, rj in (("12", r1, r2), ("13", r1, r3), ("23", r2, r3))
    }
    s_dense = solve_3way_intersection(observed["123"], r1, r2, r3, s_hat["12"], s_hat["13"], s_hat["23"], bits)
    dense = s_dense / (r1 + r2 + r3 - s_hat["12"] - s_hat["13"] - s_hat["23"] + s_dense)
    sparse = three_way.estimate_3way(observed["123"], observed["12"], observed["13"], observed["23"], bits)
    dense_error = dense.std() / np.sqrt(repetitions)
    assert np.all(np.isfinite(dense))
    assert abs(dense.mean() - resemblance) < 4 * dense_error, (dense.mean(), resemblance, dense_error)
    # The sparse estimator is off by about 0.095 here, over 50 of its standard errors.
    assert resemblance - sparse.mean() > 0.05
    # dense.estimate_3way_dense is this same procedure.
    np.testing.assert_allclose(
        estimate_3way_dense(
            observed["123"], observed["12"], observed["13"], observed["23"], r1, r2, r3, bits
        ),
        dense,
        rtol=0,
        atol=1e-12,
    )


# --------------------------------------------------------------------------------------------------
# Monotonicity and inversion
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_probability_increases_with_s(bits: int) -> None:
    masses = summaries(random_regions(np.random.default_rng(16), 300))
    r1, r2, r3, s12, s13, s23, _ = masses
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    grid = lower + np.linspace(0, 1, 21)[:, None] * (upper - lower)
    probabilities = collision_probability_3way(r1, r2, r3, s12, s13, s23, grid, bits)
    wide = (upper - lower) > 1e-6
    assert np.all(np.diff(probabilities[:, wide], axis=0) > 0)


def test_one_bit_probability_is_fixed_by_the_pairs() -> None:
    # Of three one-bit values either all agree or exactly one pair does: P_1 = (P_12 + P_13 + P_23 − 1)/2 at
    # any density, so P_1 carries no 3-way information (the dense counterpart of "P_1 = (1 + T)/4").
    masses = summaries(random_regions(np.random.default_rng(17), 300))
    r1, r2, r3, s12, s13, s23, _ = masses
    pairs = (
        collision_probability_2way(r1, r2, s12, 1)
        + collision_probability_2way(r1, r3, s13, 1)
        + collision_probability_2way(r2, r3, s23, 1)
    )
    np.testing.assert_allclose(collision_probability_3way(*masses, 1), (pairs - 1) / 2, rtol=0, atol=1e-14)
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    at_lower = collision_probability_3way(r1, r2, r3, s12, s13, s23, lower, 1)
    at_upper = collision_probability_3way(r1, r2, r3, s12, s13, s23, upper, 1)
    np.testing.assert_allclose(at_lower, at_upper, rtol=0, atol=1e-14)


def bisection(
    p123: np.ndarray,
    r1: np.ndarray,
    r2: np.ndarray,
    r3: np.ndarray,
    s12: np.ndarray,
    s13: np.ndarray,
    s23: np.ndarray,
    bits: int,
    iterations: int = 60,
) -> np.ndarray:
    """Reference: vectorised bisection on the bracket of docs/estimators.md, P_b increasing in s."""
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    for _ in range(iterations):
        middle = 0.5 * (lower + upper)
        below = collision_probability_3way(r1, r2, r3, s12, s13, s23, middle, bits) < p123
        lower = np.where(below, middle, lower)
        upper = np.where(below, upper, middle)
    return 0.5 * (lower + upper)


@pytest.mark.parametrize("bits", [2, 3, 8])
def test_solve_agrees_with_bisection(bits: int) -> None:
    rng = np.random.default_rng(18)
    masses = summaries(random_regions(rng, 500))
    r1, r2, r3, s12, s13, s23, s = masses
    exact = collision_probability_3way(*masses, bits)
    # Observed fractions scatter around the truth, some beyond the achievable range.
    observed = np.clip(exact + rng.normal(0, 0.05, exact.size), 0, 1)
    solved = solve_3way_intersection(observed, r1, r2, r3, s12, s13, s23, bits)
    np.testing.assert_allclose(solved, bisection(observed, r1, r2, r3, s12, s13, s23, bits), rtol=0, atol=1e-12)


@st.composite
def venn_masses(draw: st.DrawFn) -> Masses:
    """Seven region masses at a scale from dense (≈ 1) to hashed-text sparse (≈ 1e-15), sets non-empty."""
    weights = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7)))
    empty = draw(st.floats(0.0, 1.0))
    scale = 10.0 ** -draw(st.integers(0, 15))
    total = weights.sum() + empty
    assume(total > 0.01)
    regions = np.concatenate([[0.0], weights / total * scale])
    regions[0] = 1.0 - regions[1:].sum()
    masses = summaries(regions)
    assume(min(masses[:3]) > 1e-3 * scale)  # each set non-empty, not vanishingly small next to the others
    return masses


@settings(max_examples=300, deadline=None, derandomize=True)
@given(venn_masses(), st.integers(2, 8))
def test_solve_inverts_collision_probability(masses: Masses, bits: int) -> None:
    r1, r2, r3, s12, s13, s23, s = masses
    probability = collision_probability_3way(*masses, bits)
    solved = solve_3way_intersection(probability, r1, r2, r3, s12, s13, s23, bits)
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    assert lower - 1e-15 <= solved <= upper + 1e-15
    scale = max(r1, r2, r3)
    # The inverse is exact to rounding: forward residual at machine precision, s to ~1e-9 of the scale.
    again = collision_probability_3way(r1, r2, r3, s12, s13, s23, np.clip(solved, lower, upper), bits)
    assert abs(again - probability) < 1e-12
    assert abs(solved - s) <= 1e-9 * scale


def test_solve_clips_unachievable_probabilities_to_the_bracket() -> None:
    masses = summaries(random_regions(np.random.default_rng(19), 100))
    r1, r2, r3, s12, s13, s23, _ = masses
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    np.testing.assert_allclose(solve_3way_intersection(0.0, r1, r2, r3, s12, s13, s23, 2), lower, atol=1e-15)
    np.testing.assert_allclose(solve_3way_intersection(1.0, r1, r2, r3, s12, s13, s23, 2), upper, atol=1e-15)


def test_bracket_includes_the_universe_constraint() -> None:
    # r_i = 0.5 and s_ij = 0.2: the union 0.9 + s must fit in the universe, so s ≤ 0.1 (not min s_ij = 0.2).
    lower, upper = intersection_bounds(0.5, 0.5, 0.5, 0.2, 0.2, 0.2)
    assert lower == 0.0 and upper == pytest.approx(0.1)
    assert solve_3way_intersection(1.0, 0.5, 0.5, 0.5, 0.2, 0.2, 0.2, 2) == pytest.approx(0.1)


def test_solve_stays_finite_for_jointly_inconsistent_estimates() -> None:
    # Noisy estimates for three nearly identical sets: s12 + s13 − r1 = 0.3 > s23 = 0.29, no valid s exists.
    solved = solve_3way_intersection([0.0, 0.5, 1.0], 0.3, 0.3, 0.3, 0.3, 0.3, 0.29, 2)
    assert np.all(np.isfinite(solved))
    assert np.all((solved >= 0.29) & (solved <= 0.3))


def test_broadcasting_and_shapes() -> None:
    r = np.full((4, 1), 0.3)
    bits = np.array([2, 3, 4])
    probability = collision_probability_3way(r, 0.3, 0.3, 0.2, 0.2, 0.2, 0.15, bits)
    assert probability.shape == (4, 3)
    assert np.all(probability == probability[0])
    assert collision_probability_2way(0.3, 0.3, 0.2, 2).shape == ()
    solved = solve_3way_intersection(probability, r, 0.3, 0.3, 0.2, 0.2, 0.2, bits)
    np.testing.assert_allclose(solved, 0.15, rtol=0, atol=1e-14)


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------


def test_negative_region_is_refused() -> None:
    # s12 + s13 − r1 + s < 0: "S1 only" would be negative.
    with pytest.raises(ValueError, match=r"r1 - s12 - s13 \+ s"):
        collision_probability_3way(0.3, 0.4, 0.4, 0.2, 0.2, 0.2, 0.05, 2)
    with pytest.raises(ValueError, match="s12 - s"):
        collision_probability_3way(0.3, 0.3, 0.3, 0.1, 0.2, 0.2, 0.15, 2)
    with pytest.raises(ValueError, match="1 - "):
        collision_probability_3way(0.6, 0.6, 0.6, 0.1, 0.1, 0.1, 0.0, 2)


def test_rounding_is_not_an_error() -> None:
    # Identical sets: the S_i-only regions are 0 up to rounding.
    r = 0.1 + 0.2
    assert collision_probability_3way(r, r, r, 0.3, 0.3, 0.3, 0.3, 2) == pytest.approx(1.0)


def test_relative_tolerance_at_text_scale() -> None:
    # At hashed-text scale (r ~ 1e-17) an absolute tolerance would accept a region of −100 % of a set.
    with pytest.raises(ValueError):
        collision_probability_3way(1e-17, 1e-17, 1e-17, 2e-17, 0.0, 0.0, 0.0, 2)


@pytest.mark.parametrize("r1", [0.0, -0.1, 1.5, np.nan])
def test_rates_outside_unit_interval(r1: float) -> None:
    with pytest.raises(ValueError, match=r"r1 = .* must be in \(0, 1\]"):
        collision_probability_3way(r1, 0.3, 0.3, 0.0, 0.0, 0.0, 0.0, 2)
    with pytest.raises(ValueError, match="r1"):
        solve_3way_intersection(0.3, r1, 0.3, 0.3, 0.0, 0.0, 0.0, 2)


def test_bits_validation() -> None:
    with pytest.raises(ValueError, match="bits >= 2"):
        solve_3way_intersection(0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1, 1)
    with pytest.raises(ValueError, match="out of range"):
        collision_probability_3way(0.3, 0.3, 0.3, 0.1, 0.1, 0.1, 0.05, 0)
    with pytest.raises(ValueError, match="integer"):
        collision_probability_3way(0.3, 0.3, 0.3, 0.1, 0.1, 0.1, 0.05, 2.5)
