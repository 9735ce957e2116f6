"""Tests for the estimators of dedup_cli.estimates.

Four kinds: hand-computed values; Table 1 of Li & König 2010; Monte-Carlo over true random
permutations of small universes (fixed seeds, statistical tolerances derived from the variance
formulas); hypothesis properties. Run with ``-s`` to see the measured Monte-Carlo figures.

Simulating permutations. A uniformly random permutation of the universe Omega = {0 .. D-1} is
the ranking of D iid Uniform(0, 1) keys, and the minwise hash of a set is the rank of its smallest
key: z_i = #{x in Omega : key(x) < min key over S_i}. ``brute_minima`` does exactly that over all
D keys. ``sample_minima`` draws the same joint law of (z_1, .., z_m) exactly, but at O(1) cost per
permutation: it draws each Venn region's minimum key (Beta(1, size)), and counts the keys below each
set's minimum with binomials (given its minimum, a region's other keys are iid uniform above it;
the keys outside the sets are iid uniform). No large-D approximation is made; the two samplers are
checked against each other in ``test_fast_sampler_matches_literal_random_ranks``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paper_formulas import expected_match_3way

from dedup_cli.estimates import dense
from dedup_cli.estimates.dense import estimate_3way_dense
from dedup_cli.estimates.exact import exact_resemblance
from dedup_cli.estimates.half_bit import estimate_half_bit, variance_half_bit
from dedup_cli.estimates.intervals import confidence_interval_2way, confidence_interval_3way, wilson_interval
from dedup_cli.estimates.three_way import estimate_3way, estimate_pairwise_sparse, variance_3way
from dedup_cli.estimates.two_way import (
    a_coefficient,
    coefficients_2way,
    estimate_2way,
    expected_match_2way,
    standard_error_2way,
    storage_factor,
    variance_2way,
)

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning (overflow, 0/0) anywhere

PROPERTY = settings(derandomize=True, deadline=None, max_examples=300)


def report(line: str) -> None:
    """Print one measured figure (visible with ``pytest -s``)."""
    print(f"\n[estimators] {line}", end="")


# ----------------------------------------------------------------------------------------------
# Simulation and exact-probability helpers
# ----------------------------------------------------------------------------------------------

Regions = tuple[tuple[int, int], ...]  # ((venn mask, element count), ...); bit i of mask = set i


def venn_sets(regions: Regions, n_sets: int) -> list[np.ndarray]:
    """Element ids of each set: every Venn region gets its own consecutive block of ids."""
    members: list[list[np.ndarray]] = [[] for _ in range(n_sets)]
    start = 0
    for mask, size in regions:
        block = np.arange(start, start + size)
        start += size
        for i in range(n_sets):
            if mask >> i & 1:
                members[i].append(block)
    return [np.concatenate(m) for m in members]


def brute_minima(regions: Regions, n_sets: int, D: int, n_perm: int, seed: int) -> np.ndarray:
    """z[perm, set] under literal random permutations: ranks of D iid uniform keys."""
    rng = np.random.default_rng(seed)
    sets = venn_sets(regions, n_sets)
    out = np.empty((n_perm, n_sets), dtype=np.int64)
    for start in range(0, n_perm, 1024):
        keys = rng.random((min(1024, n_perm - start), D))
        for i, members in enumerate(sets):
            smallest = keys[:, members].min(axis=1)
            out[start : start + len(keys), i] = np.count_nonzero(keys < smallest[:, None], axis=1)
    return out


def _counts_below(pool: int, lower: np.ndarray, thresholds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """How many of ``pool`` iid Uniform(lower, 1) keys fall below each threshold (jointly)."""
    order = np.argsort(thresholds, axis=1)
    ordered = np.take_along_axis(thresholds, order, axis=1)
    counts = np.empty(thresholds.shape, dtype=np.int64)
    previous = lower.copy()
    remaining = np.full(lower.shape, pool, dtype=np.int64)
    total = np.zeros(lower.shape, dtype=np.int64)
    for j in range(thresholds.shape[1]):
        probability = np.clip((ordered[:, j] - previous) / (1.0 - previous), 0.0, 1.0)
        step = rng.binomial(remaining, probability)
        total += step
        remaining -= step
        previous = np.maximum(previous, ordered[:, j])
        counts[:, j] = total
    out = np.empty_like(counts)
    np.put_along_axis(out, order, counts, axis=1)
    return out


def sample_minima(regions: Regions, n_sets: int, D: int, n_perm: int, seed: int) -> np.ndarray:
    """z[perm, set], exactly distributed as under uniformly random permutations of {0 .. D-1}.

    Chunked (2^16 permutations at a time) to keep memory bounded.
    """
    rng = np.random.default_rng(seed)
    sizes = {mask: size for mask, size in regions if size > 0}
    outside_sets = D - sum(sizes.values())
    out = np.empty((n_perm, n_sets), dtype=np.int64)
    for start in range(0, n_perm, 1 << 16):
        batch = min(1 << 16, n_perm - start)
        # minimum of `size` iid uniforms: Beta(1, size) = 1 - U^(1/size)
        region_min = {m: -np.expm1(np.log1p(-rng.random(batch)) / s) for m, s in sizes.items()}
        set_min = np.stack(
            [np.min([region_min[m] for m in sizes if m >> i & 1], axis=0) for i in range(n_sets)], axis=1
        )
        z = np.zeros((batch, n_sets), dtype=np.int64)
        for mask in [*sizes, 0]:
            others = [i for i in range(n_sets) if not mask >> i & 1]
            if not others or (mask == 0 and outside_sets == 0):
                continue
            thresholds = set_min[:, others]
            if mask == 0:  # elements in no set: keys iid uniform on (0, 1)
                z[:, others] += _counts_below(outside_sets, np.zeros(batch), thresholds, rng)
            else:  # the region's minimum, then its other keys iid uniform above that minimum
                lower = region_min[mask]
                first = (lower[:, None] < thresholds).astype(np.int64)
                z[:, others] += first + _counts_below(sizes[mask] - 1, lower, thresholds, rng)
        out[start : start + batch] = z
    return out


def matches(z_a: np.ndarray, z_b: np.ndarray, bits: int) -> np.ndarray:
    """Do the lowest ``bits`` bits agree? bits >= 63: the full-width comparison."""
    if bits >= 63:
        return z_a == z_b
    return ((z_a ^ z_b) & ((1 << bits) - 1)) == 0


def ratios(regions: Regions, n_sets: int, D: int) -> list[float]:
    return [sum(size for mask, size in regions if mask >> i & 1) / D for i in range(n_sets)]


def exact_match_probability(region_probs: dict[int, float], n_sets: int, bits: int) -> float:
    """Large-D Pr(all minima agree mod 2^b), from a Markov chain over one block of 2^b positions.

    Independent of the closed forms under test (docs/estimators.md, "Dense sets"): in the large-D limit
    each position holds an element of Venn region X with probability p_X, independently. The
    state is (which sets have found their minimum, residue of the first minimum mod 2^b); a block
    of 2^b positions is one transition matrix, summed as a geometric series.
    """
    n = 1 << bits
    full = (1 << n_sets) - 1
    partial = range(1, full)
    index = {(f, rho): 1 + (f - 1) * n + rho for f in partial for rho in range(n)}
    success = 1 + (full - 1) * n
    fail = success + 1
    p_none = 1.0 - sum(region_probs.values())
    block = np.eye(fail + 1)
    for t in range(n):
        step = np.zeros((fail + 1, fail + 1))
        step[success, success] = step[fail, fail] = 1.0
        step[0, 0] = p_none
        for x, p in region_probs.items():
            step[0, success if x == full else index[(x, t)]] += p
        for (found, rho), i in index.items():
            step[i, i] += p_none
            for x, p in region_probs.items():
                if x & ~found == 0:
                    step[i, i] += p
                elif t != rho:
                    step[i, fail] += p
                else:
                    step[i, success if found | x == full else index[(found | x, rho)]] += p
        block = block @ step
    transient = np.arange(success)
    absorbed = np.linalg.solve(np.eye(success) - block[np.ix_(transient, transient)], block[transient, success])
    return float(absorbed[0])


def three_way_region_probs(
    r1: float, r2: float, r3: float, s12: float, s13: float, s23: float, s: float
) -> dict[int, float]:
    """Venn-region masses of three sets from their r_i, s_ij and s (inclusion-exclusion)."""
    return {
        7: s,
        3: s12 - s,
        5: s13 - s,
        6: s23 - s,
        1: r1 - s12 - s13 + s,
        2: r2 - s12 - s23 + s,
        4: r3 - s13 - s23 + s,
    }


def pair_region_probs(region_probs: dict[int, float], i: int, j: int) -> dict[int, float]:
    out: dict[int, float] = {}
    for mask, p in region_probs.items():
        key = (mask >> i & 1) | (mask >> j & 1) << 1
        if key:
            out[key] = out.get(key, 0.0) + p
    return out


def reference_solve_3way_intersection(
    p123: Any, r1: Any, r2: Any, r3: Any, s12: Any, s13: Any, s23: Any, bits: Any
) -> np.ndarray:
    """Test stand-in for ``dense.solve_3way_intersection``: scalar bisection on the chain."""
    arrays = (p123, r1, r2, r3, s12, s13, s23, bits)
    args = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in arrays))
    out = np.empty(args[0].shape)
    for idx in np.ndindex(out.shape):
        target, a1, a2, a3, b12, b13, b23, b = (float(a[idx]) for a in args)
        low = max(0.0, b12 + b13 - a1, b12 + b23 - a2, b13 + b23 - a3)
        high = min(b12, b13, b23)
        for _ in range(55):
            middle = 0.5 * (low + high)
            probs = three_way_region_probs(a1, a2, a3, b12, b13, b23, middle)
            if exact_match_probability(probs, 3, int(b)) < target:
                low = middle
            else:
                high = middle
        out[idx] = 0.5 * (low + high)
    return out


# ----------------------------------------------------------------------------------------------
# A_{j,b} (Li & König 2010, eq. 7): values and numerical stability
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8, 16, 32, 63, 64])
@pytest.mark.parametrize("r", [0.0, 5e-324, 1e-300])
def test_a_coefficient_sparse_limit_is_one_over_two_to_the_b(r: float, bits: int) -> None:
    assert a_coefficient(r, bits) == 2.0**-bits


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 7, 8])
def test_a_coefficient_of_a_hashed_text_document_is_one_over_two_to_the_b(bits: int) -> None:
    # f / 2^64 for a document with ~2 million shingles; a naive (1 - r)^n gives 0/0 here
    assert a_coefficient(1e-19, bits) == 2.0**-bits


def test_a_coefficient_full_precision_at_moderate_b_and_tiny_r() -> None:
    # The exact value moves off 1/2^b only by ~2^b r / 2 relative
    for bits in (12, 16, 20):
        assert a_coefficient(1e-19, bits) * 2.0**bits == pytest.approx(1.0, rel=1e-15 * 2**bits, abs=0)


def test_a_coefficient_hand_values() -> None:
    assert a_coefficient(0.5, 1) == pytest.approx(1 / 3, rel=1e-15)  # 0.5*0.5 / (1 - 0.25)
    assert a_coefficient(0.5, 2) == pytest.approx(0.0625 / 0.9375, rel=1e-15)
    assert a_coefficient(1.0, 1) == 0.0
    assert a_coefficient(1.0, 64) == 0.0


@pytest.mark.parametrize("bits", [32, 48, 64])
def test_a_coefficient_vanishes_for_wide_values(bits: int) -> None:
    r = np.array([1e-6, 1e-3, 0.01, 0.5, 0.999, 1.0])
    a = a_coefficient(r, bits)
    assert np.all(np.isfinite(a))
    assert np.all(a < 1e-300)


def test_a_coefficient_broadcasts_r_against_bits() -> None:
    r = np.array([[0.0], [0.1], [0.5]])
    bits = np.arange(1, 65)
    a = a_coefficient(r, bits)
    assert a.shape == (3, 64) and a.dtype == np.float64
    assert np.array_equal(a[0], 2.0 ** -bits.astype(float))
    assert np.all(np.diff(a, axis=1) <= 0)  # decreasing in b (Theorem 1)
    assert np.all(a[1] <= a[0]) and np.all(a[2] <= a[1])  # decreasing in r
    assert isinstance(a_coefficient(0.1, 3), np.float64)  # scalars in, numpy scalar out


def test_a_coefficient_matches_direct_formula_where_that_is_accurate() -> None:
    r = np.linspace(0.01, 0.99, 99)
    for bits in (1, 2, 3, 4, 6):
        n = 2.0**bits
        direct = r * (1 - r) ** (n - 1) / (1 - (1 - r) ** n)
        np.testing.assert_allclose(a_coefficient(r, bits), direct, rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# 2-way estimator (Li & König 2010, eqs. 4-12)
# ----------------------------------------------------------------------------------------------


def test_coefficients_hand_worked_at_r1_0_2_r2_0_1() -> None:
    r1, r2 = Fraction(2, 10), Fraction(1, 10)
    for bits in (1, 2, 3):
        n = 2**bits
        a1 = r1 * (1 - r1) ** (n - 1) / (1 - (1 - r1) ** n)
        a2 = r2 * (1 - r2) ** (n - 1) / (1 - (1 - r2) ** n)
        c1 = a1 * r2 / (r1 + r2) + a2 * r1 / (r1 + r2)
        c2 = a1 * r1 / (r1 + r2) + a2 * r2 / (r1 + r2)
        if bits == 1:  # by hand: A1 = 0.16/0.36, A2 = 0.09/0.19
            assert (a1, a2, c1, c2) == (Fraction(4, 9), Fraction(9, 19), Fraction(238, 513), Fraction(233, 513))
        if bits == 2:  # A1 = 0.2*0.8^3/(1-0.8^4), A2 = 0.1*0.9^3/(1-0.9^4)
            assert (a1, a2) == (Fraction(64, 369), Fraction(729, 3439))
        got_c1, got_c2 = coefficients_2way(0.2, 0.1, bits)
        assert a_coefficient(0.2, bits) == pytest.approx(float(a1), rel=1e-14)
        assert a_coefficient(0.1, bits) == pytest.approx(float(a2), rel=1e-14)
        assert got_c1 == pytest.approx(float(c1), rel=1e-14)
        assert got_c2 == pytest.approx(float(c2), rel=1e-14)
        R = 0.4
        assert expected_match_2way(R, 0.2, 0.1, bits) == pytest.approx(float(c1 + (1 - c2) * Fraction(R)), rel=1e-14)


def test_coefficients_with_empty_sets_use_equal_weights() -> None:
    c1, c2 = coefficients_2way(0.0, 0.0, 2)
    assert c1 == c2 == 0.25


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8, 16])
def test_sparse_estimator_is_two_to_the_b_e_minus_one_over_two_to_the_b_minus_one(bits: int) -> None:
    e_hat = np.linspace(0, 1, 33)
    sparse = (2**bits * e_hat - 1) / (2**bits - 1)
    np.testing.assert_allclose(estimate_2way(e_hat, 0.0, 0.0, bits), sparse, rtol=0, atol=1e-15)
    np.testing.assert_allclose(estimate_pairwise_sparse(e_hat, bits), sparse, rtol=0, atol=1e-15)
    if bits <= 8:  # 64-bit shingle hashes: r = f / 2^64 is the sparse limit to double precision
        np.testing.assert_allclose(estimate_2way(e_hat, 1e-19, 3e-19, bits), sparse, rtol=0, atol=1e-15)


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 32, 64])
@pytest.mark.parametrize("r", [0.0, 1e-19, 0.01, 0.3, 0.9])
def test_identical_documents_estimate_one(r: float, bits: int) -> None:
    assert estimate_2way(1.0, r, r, bits) == pytest.approx(1.0, abs=1e-15)


def test_full_width_estimator_is_the_match_fraction() -> None:
    e_hat = np.linspace(0, 1, 11)
    for r in (0.0, 1e-19, 0.01, 0.5):
        np.testing.assert_allclose(estimate_2way(e_hat, r, r / 2, 64), e_hat, rtol=0, atol=1e-15)
        np.testing.assert_allclose(estimate_2way(e_hat, r, r / 2, 32), e_hat, rtol=0, atol=1e-9)
    R = np.linspace(0, 1, 11)
    np.testing.assert_allclose(variance_2way(R, 0.0, 0.0, 64, 100), R * (1 - R) / 100, rtol=1e-12, atol=1e-18)


def test_estimate_inverts_expected_match_and_is_unclipped() -> None:
    R = np.linspace(0, 1, 21)[:, None]
    r1, r2 = np.array([0.0, 0.01, 0.3, 0.6]), np.array([0.0, 0.02, 0.05, 0.55])
    for bits in (1, 2, 4, 64):
        e_b = expected_match_2way(R, r1, r2, bits)
        np.testing.assert_allclose(estimate_2way(e_b, r1, r2, bits), np.broadcast_to(R, e_b.shape), atol=1e-14)
    assert estimate_2way(0.0, 0.0, 0.0, 1) == -1.0  # below C1: negative, by design
    assert standard_error_2way(0.0, 0.0, 0.0, 1, 100) == pytest.approx(math.sqrt(0.25 / 100 / 0.25))


def test_variance_2way_hand_values() -> None:
    # b = 1, r -> 0: E = (1 + R)/2, Var = (1 + R)(1 - R)/k (Sec. 5.2 with r = 0)
    R = np.array([0.0, 0.3, 0.5, 0.9, 1.0])
    np.testing.assert_allclose(variance_2way(R, 0, 0, 1, 50), (1 + R) * (1 - R) / 50, rtol=1e-14, atol=1e-18)
    # Sec. 5.2 at r1 = r2 = r, b = 1: Var = (1 - r + R)(1 - R)/k
    for r in (0.1, 0.5):
        np.testing.assert_allclose(variance_2way(R, r, r, 1, 50), (1 - r + R) * (1 - R) / 50, rtol=1e-13, atol=1e-18)


def test_two_way_formula_matches_exact_markov_chain_on_dense_sets() -> None:
    # An independent derivation of Theorem 1 (eq. 4-7): the large-D chain of docs/estimators.md, "Dense sets".
    for r1, r2, R in [(0.57, 0.554, 0.771), (0.596, 0.035, 0.052), (0.2, 0.1, 0.3), (0.01, 0.005, 0.5)]:
        a = R / (1 + R) * (r1 + r2)
        for bits in (1, 2, 3, 4):
            chain = exact_match_probability({1: r1 - a, 2: r2 - a, 3: a}, 2, bits)
            assert expected_match_2way(R, r1, r2, bits) == pytest.approx(chain, abs=1e-13)


# ----------------------------------------------------------------------------------------------
# Storage factor, Table 1 of Li & König 2010
# ----------------------------------------------------------------------------------------------

# All ten rows read cleanly from b-bit-minwise-hashing_li-konig_www2010.txt:
# (word 1, word 2, r1, r2, R, printed B(32)/B(1), printed B(64)/B(1))
TABLE_1 = [
    ("KONG", "HONG", 0.0145, 0.0143, 0.925, 15.5, 31.0),
    ("RIGHTS", "RESERVED", 0.187, 0.172, 0.877, 16.6, 32.2),
    ("OF", "AND", 0.570, 0.554, 0.771, 20.4, 40.8),
    ("GAMBIA", "KIRIBATI", 0.0031, 0.0028, 0.712, 13.3, 26.6),
    ("UNITED", "STATES", 0.062, 0.061, 0.591, 12.4, 24.8),
    ("SAN", "FRANCISCO", 0.049, 0.025, 0.476, 10.7, 21.4),
    ("CREDIT", "CARD", 0.046, 0.041, 0.285, 7.3, 14.6),
    ("TIME", "JOB", 0.189, 0.05, 0.128, 4.3, 8.6),
    ("LOW", "PAY", 0.045, 0.043, 0.112, 3.4, 6.8),
    ("A", "TEST", 0.596, 0.035, 0.052, 3.1, 6.2),
]


@pytest.mark.parametrize("row", TABLE_1, ids=[f"{w1}-{w2}" for w1, w2, *_ in TABLE_1])
def test_table_1_storage_ratios(row: tuple[str, str, float, float, float, float, float]) -> None:
    word1, word2, r1, r2, R, printed_32, printed_64 = row
    b1 = float(storage_factor(R, r1, r2, 1))
    ratio_32 = float(storage_factor(R, r1, r2, 32)) / b1
    ratio_64 = float(storage_factor(R, r1, r2, 64)) / b1
    assert round(ratio_32, 1) == printed_32
    assert ratio_64 == pytest.approx(2 * ratio_32, rel=1e-12)  # A_32 = A_64 = 0 to double precision
    if (word1, word2) == ("RIGHTS", "RESERVED"):
        assert round(ratio_64, 1) == 33.2  # the paper prints 32.2: a misprint of 33.2 (docs/estimators.md, "Misprints")
    else:
        assert abs(ratio_64 - printed_64) <= 0.1 + 1e-9  # the paper doubled its rounded B(32) column


def test_table_1_unbalanced_rows_need_the_general_formula() -> None:
    # eq. 15 (r1 = r2 shortcut) with r1 for A-TEST would give 32 R/(R + 1 - r1) = 3.65, not 3.1
    r1, R = 0.596, 0.052
    assert round(32 * R / (R + 1 - r1), 2) == 3.65
    assert round(float(storage_factor(R, r1, 0.035, 32) / storage_factor(R, r1, 0.035, 1)), 1) == 3.1


def test_least_favourable_saving_is_64_over_3() -> None:
    ratio = float(storage_factor(0.5, 0.0, 0.0, 64) / storage_factor(0.5, 0.0, 0.0, 1))
    assert ratio == pytest.approx(64 / 3, rel=1e-15)
    assert round(ratio, 1) == 21.3
    assert round(float(storage_factor(0.5, 0.0, 0.0, 32) / storage_factor(0.5, 0.0, 0.0, 1)), 1) == 10.7


def test_storage_factor_matches_theorem_2_when_r1_equals_r2() -> None:
    for r in (0.0, 0.01, 0.3):
        for R in (0.1, 0.5, 0.9):
            a1, a2 = a_coefficient(r, 2), a_coefficient(r, 1)
            eq13 = 2 / 1 * (a1 * (1 - R) + R) / (a2 * (1 - R) + R) * (1 - a2) / (1 - a1)
            assert storage_factor(R, r, r, 2) / storage_factor(R, r, r, 1) == pytest.approx(eq13, rel=1e-13)


# ----------------------------------------------------------------------------------------------
# Combined bits, "b = 1/2" (Li & König 2010, eqs. 23-27)
# ----------------------------------------------------------------------------------------------


def test_half_bit_estimator_inverts_eq_23() -> None:
    for r1, r2 in ((0.0, 0.0), (0.01, 0.02), (0.3, 0.3)):
        R = np.linspace(0.6, 1.0, 9) if r1 == r2 else np.linspace(0.6, 0.6, 1)
        e1 = expected_match_2way(R, r1, r2, 1)
        t = e1**2 + (1 - e1) ** 2
        np.testing.assert_allclose(estimate_half_bit(t, r1, r2), R, atol=1e-12)
    # the truncation max(2T - 1, 0)
    assert estimate_half_bit(0.3, 0.0, 0.0) == 0.0


def test_half_bit_variance_limits() -> None:
    # eq. 27: Var(R_1)/Var(R_1/2) -> 2 as R -> 1; break-even at R = 0.5774 in the sparse limit
    R = 1 - 1e-7
    assert variance_2way(R, 0, 0, 1, 1) / variance_half_bit(R, 0, 0, 1) == pytest.approx(2.0, rel=1e-5)
    assert variance_half_bit(0.5, 0, 0, 1) > variance_2way(0.5, 0, 0, 1, 1)
    assert variance_half_bit(0.6, 0, 0, 1) < variance_2way(0.6, 0, 0, 1, 1)
    grid = np.linspace(0.5, 0.7, 20001)
    cross = grid[np.argmax(variance_half_bit(grid, 0, 0, 1) < variance_2way(grid, 0, 0, 1, 1))]
    assert cross == pytest.approx(1 / math.sqrt(3), abs=1e-4)
    assert variance_half_bit(0.0, 0, 0, 1) == np.inf  # E_1 = 1/2: no information


# ----------------------------------------------------------------------------------------------
# 3-way (Li, König & Gui 2010, eqs. 7-9)
# ----------------------------------------------------------------------------------------------


def test_three_way_with_one_bit_carries_no_information() -> None:
    R = np.linspace(0, 0.3, 4)[:, None]
    T = np.array([0.9, 1.5, 3.0])
    np.testing.assert_allclose(expected_match_3way(R, T, 1), np.broadcast_to((1 + T) / 4, (4, 3)), rtol=1e-15)


def test_three_way_probability_hand_values() -> None:
    R, T = 0.3, 1.4
    assert expected_match_3way(R, T, 2) == pytest.approx((6 * R + 3 * T + 1) / 16, rel=1e-15)
    assert expected_match_3way(R, T, 3) == pytest.approx((42 * R + 7 * T + 1) / 64, rel=1e-15)
    assert expected_match_3way(R, T, 64) == pytest.approx(R, rel=1e-15)


@pytest.mark.parametrize("k", [1, 50, 200])
def test_three_way_variance_b2_hand_formula(k: int) -> None:
    R = np.linspace(0, 1, 11)[:, None]
    T = np.linspace(0, 3, 7)
    np.testing.assert_allclose(variance_3way(R, T, 2, k), (1 + T + 2 * R - 6 * R**2) / (6 * k), rtol=1e-13, atol=1e-17)
    # eq. 9 as printed, b = 3
    eq9 = (1 + 5 * T + 26 * R - 42 * R**2) / (k * 42)
    np.testing.assert_allclose(variance_3way(R, T, 3, k), eq9, rtol=1e-13, atol=1e-17)
    full_width = np.broadcast_to(R * (1 - R) / k, eq9.shape)
    np.testing.assert_allclose(variance_3way(R, T, 64, k), full_width, rtol=1e-12, atol=1e-17)


def test_three_way_estimator_inverts_theorem_2() -> None:
    pair_r = np.array([[0.5, 0.6, 0.7], [0.1, 0.2, 0.05], [1.0, 1.0, 1.0]])
    R = np.array([0.4, 0.03, 1.0])
    T = pair_r.sum(axis=1)
    for bits in (2, 3, 4, 8, 64):
        p = expected_match_3way(R, T, bits)
        p12, p13, p23 = (expected_match_2way(pair_r[:, i], 0, 0, bits) for i in range(3))
        np.testing.assert_allclose(estimate_3way(p, p12, p13, p23, bits), R, atol=1e-13)
        pairs = np.stack([p12, p13, p23], axis=1)
        np.testing.assert_allclose(estimate_pairwise_sparse(pairs, bits), pair_r, atol=1e-13)
    assert estimate_3way(1.0, 1.0, 1.0, 1.0, 2) == pytest.approx(1.0, abs=1e-15)  # identical triple


@pytest.mark.parametrize(
    "call",
    [
        lambda: estimate_3way(0.5, 0.6, 0.6, 0.6, 1),
        lambda: variance_3way(0.5, 1.5, 1, 100),
        lambda: estimate_3way(0.5, 0.6, 0.6, 0.6, np.array([2, 1])),
        lambda: estimate_3way_dense(0.5, 0.6, 0.6, 0.6, 0.1, 0.1, 0.1, 1),
        lambda: confidence_interval_3way(50, 60, 60, 60, 100, 1),
    ],
    ids=["estimate", "variance", "array", "dense", "interval"],
)
def test_three_way_with_bits_below_two_is_refused(call: Any) -> None:
    with pytest.raises(ValueError, match="bits 2 or more") as caught:
        call()
    assert isinstance(caught.value, ValueError)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: a_coefficient(0.1, 0),
        lambda: a_coefficient(0.1, 65),
        lambda: a_coefficient(0.1, 2.5),
        lambda: a_coefficient(-0.1, 2),
        lambda: estimate_2way(0.5, 0.1, 1.5, 2),
        lambda: variance_2way(0.5, 0.1, 0.1, 2, 0),
        lambda: wilson_interval(11, 10),
        lambda: wilson_interval(5, 10, level=1.0),
    ],
)
def test_bad_parameters_are_refused(call: Any) -> None:
    with pytest.raises(ValueError):
        call()


def test_dense_estimator_recovers_exact_resemblance_with_reference_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plumbing of estimate_3way_dense (s_ij from eq. 9, the union, R = s/union), with exact inputs
    # and a test-local bisection standing in for dense.solve_3way_intersection.
    monkeypatch.setattr(dense, "solve_3way_intersection", reference_solve_3way_intersection)
    cases = [
        (0.08, 0.07, 0.02, 0.14, 0.02, 0.01, 0.33),  # r ~ 0.5: Li, König & Gui's OF/AND/OR-like
        (0.05, 0.10, 0.20, 0.05, 0.02, 0.03, 0.10),
        (0.002, 0.001, 0.003, 0.001, 0.0005, 0.001, 0.004),
    ]
    for bits in (2, 3):
        for only1, only2, only3, only12, only13, only23, all3 in cases:
            probs = {1: only1, 2: only2, 4: only3, 3: only12, 5: only13, 6: only23, 7: all3}
            r1, r2, r3 = (sum(p for m, p in probs.items() if m >> i & 1) for i in range(3))
            p123, p12, p13, p23 = exact_fractions(probs, bits)
            R = all3 / sum(probs.values())
            got = estimate_3way_dense(p123, p12, p13, p23, r1, r2, r3, bits)
            assert got == pytest.approx(R, abs=1e-9)


# ----------------------------------------------------------------------------------------------
# Confidence intervals
# ----------------------------------------------------------------------------------------------


def test_wilson_interval_hand_values() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(float(low), 4), round(float(high), 4)) == (0.4902, 0.9433)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(np.array([0, 5, 10]), 10, level=0.9)
    assert low.shape == (3,) and high[2] == 1.0 and low[1] == pytest.approx(1 - high[1])


def _binomial_pmf(k: int, p: float) -> np.ndarray:
    return np.array([math.comb(k, x) * p**x * (1 - p) ** (k - x) for x in range(k + 1)])


def test_wilson_interval_coverage() -> None:
    coverages = []
    for k in (16, 32, 64, 128, 256):
        x = np.arange(k + 1)
        low, high = wilson_interval(x, k)
        for p in np.linspace(0.05, 0.95, 19):
            coverages.append(float(_binomial_pmf(k, p)[(low <= p) & (p <= high)].sum()))
    report(
        f"Wilson 95% exact coverage over k in 16..256, p in .05..95: "
        f"mean {np.mean(coverages):.4f}, min {np.min(coverages):.4f}"
    )
    assert 0.94 <= np.mean(coverages) <= 0.96
    assert np.min(coverages) >= 0.90


def test_confidence_interval_2way_maps_wilson_through_eq_9() -> None:
    low, high = confidence_interval_2way(np.array([48, 64]), 64, 0.0, 0.0, 1)
    e_low, e_high = wilson_interval(48, 64)
    assert low[0] == pytest.approx(2 * e_low - 1) and high[0] == pytest.approx(2 * e_high - 1)
    assert high[1] == 1.0 and low[1] < 1.0
    low, high = confidence_interval_2way(10, 64, 0.0, 0.0, 2)  # E_hat below 1/4: clipped at 0
    assert low == 0.0 and 0.0 <= high < 0.2


# ----------------------------------------------------------------------------------------------
# Exact resemblance
# ----------------------------------------------------------------------------------------------


def test_exact_resemblance() -> None:
    assert exact_resemblance({1, 2, 3}, {2, 3, 4}) == 0.5
    assert exact_resemblance(np.array([1, 2, 3, 3]), np.array([2, 3, 4])) == 0.5
    assert exact_resemblance(set(), set()) == 0.0
    assert exact_resemblance(np.array([], dtype=np.uint64), np.array([], dtype=np.uint64)) == 0.0
    assert exact_resemblance({1, 2, 3, 4}, {2, 3, 4, 5}, {3, 4, 5, 6}) == pytest.approx(2 / 6)
    big = np.array([2**64 - 1, 2**64 - 2, 2**63], dtype=np.uint64)
    assert exact_resemblance(big, big[:2]) == pytest.approx(2 / 3)
    assert exact_resemblance(big, np.array([1, 2], dtype=np.int64)) == 0.0  # no float64 promotion
    assert exact_resemblance({2**64 - 1, 5}, big) == 0.25
    with pytest.raises(ValueError):
        exact_resemblance(np.zeros((2, 2), dtype=int), np.zeros(2, dtype=int))


# ----------------------------------------------------------------------------------------------
# Monte-Carlo with true random permutations
# ----------------------------------------------------------------------------------------------


def test_fast_sampler_matches_literal_random_ranks() -> None:
    regions: Regions = ((1, 200), (2, 150), (4, 300), (3, 250), (5, 100), (6, 150), (7, 1200))
    brute = brute_minima(regions, 3, 2**12, 12_000, seed=11)
    fast = sample_minima(regions, 3, 2**12, 200_000, seed=12)
    def statistics(z: np.ndarray, bits: int) -> list[np.ndarray]:
        m12, m23 = matches(z[:, 0], z[:, 1], bits), matches(z[:, 1], z[:, 2], bits)
        return [m12, m23, m12 & m23]

    worst = 0.0
    for bits in (1, 2, 3, 63):
        for from_brute, from_fast in zip(statistics(brute, bits), statistics(fast, bits), strict=True):
            a, b = from_brute.astype(float), from_fast.astype(float)
            se = math.sqrt(a.var() / a.size + b.var() / b.size)
            worst = max(worst, abs(a.mean() - b.mean()) / se)
    for i in range(3):
        a, b = brute[:, i].astype(float), fast[:, i].astype(float)
        worst = max(worst, abs(a.mean() - b.mean()) / math.sqrt(a.var() / a.size + b.var() / b.size))
        # same law of the marginal minimum: Pr(z_i >= t) for small t
        for t in (1, 2, 4):
            a, b = (brute[:, i] >= t).astype(float), (fast[:, i] >= t).astype(float)
            worst = max(worst, abs(a.mean() - b.mean()) / math.sqrt(a.var() / a.size + b.var() / b.size))
    report(f"fast sampler vs literal random ranks (D = 2^12): largest |z| over 24 statistics {worst:.2f}")
    assert worst < 4.0


# (D, regions, label): 2-way pairs at r ~ 0.01, r ~ 0.5 and unbalanced
TWO_WAY_CASES = [
    (2**16, ((1, 235), (2, 180), (3, 420)), "sparse r=0.010/0.009"),
    (2**12, ((1, 648), (2, 443), (3, 1400)), "dense r=0.50/0.45"),
    (2**14, ((1, 4315), (2, 219), (3, 600)), "unbalanced r=0.30/0.05"),
]
TWO_WAY_K = 32
TWO_WAY_REPS = 10_000
TWO_WAY_BITS = (1, 2, 4, 64)


@cache
def two_way_simulation(case: int) -> np.ndarray:
    D, regions, _ = TWO_WAY_CASES[case]
    z = sample_minima(regions, 2, D, TWO_WAY_K * TWO_WAY_REPS, seed=100 + case)
    return z.reshape(TWO_WAY_REPS, TWO_WAY_K, 2)


def two_way_truth(case: int) -> tuple[float, float, float]:
    D, regions, _ = TWO_WAY_CASES[case]
    sizes = dict(regions)
    r1, r2 = ratios(regions, 2, D)
    return sizes[3] / sum(sizes.values()), r1, r2


@pytest.mark.parametrize("case", range(len(TWO_WAY_CASES)), ids=[c[2] for c in TWO_WAY_CASES])
def test_two_way_unbiased_with_eq_11_variance(case: int) -> None:
    z = two_way_simulation(case)
    R, r1, r2 = two_way_truth(case)
    for bits in TWO_WAY_BITS:
        e_hat = matches(z[..., 0], z[..., 1], bits).mean(axis=1)
        r_hat = estimate_2way(e_hat, r1, r2, bits)
        variance = variance_2way(R, r1, r2, bits, TWO_WAY_K)
        z_score = (r_hat.mean() - R) / math.sqrt(variance / TWO_WAY_REPS)
        variance_ratio = r_hat.var(ddof=1) / variance
        report(
            f"2-way {TWO_WAY_CASES[case][2]} R={R:.4f} b={bits}: mean {r_hat.mean():.4f} "
            f"(bias {r_hat.mean() - R:+.5f}, {z_score:+.2f} SE), var/eq.11 = {variance_ratio:.3f}"
        )
        assert abs(z_score) < 3.0
        assert abs(variance_ratio - 1.0) < 0.10


@pytest.mark.parametrize("case", range(len(TWO_WAY_CASES)), ids=[c[2] for c in TWO_WAY_CASES])
def test_two_way_confidence_interval_coverage(case: int) -> None:
    z = two_way_simulation(case)
    R, r1, r2 = two_way_truth(case)
    for bits in TWO_WAY_BITS:
        count = matches(z[..., 0], z[..., 1], bits).sum(axis=1)
        low, high = confidence_interval_2way(count, TWO_WAY_K, r1, r2, bits)
        covered = float(np.mean((low <= R) & (R <= high)))
        # the exact coverage of the Wilson interval at p = E_b; k = 32 is coarse, so it is not 0.95
        e_b = float(expected_match_2way(R, r1, r2, bits))
        x = np.arange(TWO_WAY_K + 1)
        e_low, e_high = wilson_interval(x, TWO_WAY_K)
        exact = float(_binomial_pmf(TWO_WAY_K, e_b)[(e_low <= e_b) & (e_b <= e_high)].sum())
        se = math.sqrt(exact * (1 - exact) / TWO_WAY_REPS)
        report(f"2-way 95% CI {TWO_WAY_CASES[case][2]} b={bits}: coverage {covered:.4f} (binomial law: {exact:.4f})")
        assert abs(covered - exact) < 3.5 * se
        assert 0.92 <= covered <= 0.98


# 3 sets: (D, regions, label); masks 1, 2, 4 = one set only, 3, 5, 6 = two, 7 = all three
THREE_WAY_SPARSE = (2**16, ((1, 12), (2, 10), (4, 17), (3, 15), (5, 8), (6, 10), (7, 64)), "sparse r=0.0015")
THREE_WAY_DENSE = (
    2**16,
    tuple(
        (mask, round(p * 2**16))
        for mask, p in ((1, 0.08), (2, 0.07), (4, 0.02), (3, 0.14), (5, 0.02), (6, 0.01), (7, 0.33))
    ),
    "dense r=0.57/0.55/0.38",
)


@cache
def three_way_simulation(dense: bool, k: int, reps: int) -> np.ndarray:
    D, regions, _ = THREE_WAY_DENSE if dense else THREE_WAY_SPARSE
    return sample_minima(regions, 3, D, k * reps, seed=300 + dense).reshape(reps, k, 3)


def three_way_truth(dense: bool) -> tuple[float, float, list[float], dict[int, float]]:
    D, regions, _ = THREE_WAY_DENSE if dense else THREE_WAY_SPARSE
    sizes = dict(regions)
    union = sum(sizes.values())
    pair = [(sizes[3] + sizes[7]), (sizes[5] + sizes[7]), (sizes[6] + sizes[7])]
    r = ratios(regions, 3, D)
    f = [x * D for x in r]
    T = sum(a / (f[i] + f[j] - a) for a, (i, j) in zip(pair, ((0, 1), (0, 2), (1, 2)), strict=True))
    return sizes[7] / union, T, r, {m: s / D for m, s in sizes.items()}


def three_way_fractions(z: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m12 = matches(z[..., 0], z[..., 1], bits)
    m13 = matches(z[..., 0], z[..., 2], bits)
    m23 = matches(z[..., 1], z[..., 2], bits)
    return (m12 & m23).mean(axis=1), m12.mean(axis=1), m13.mean(axis=1), m23.mean(axis=1)


def exact_fractions(region_probs: dict[int, float], bits: int) -> tuple[float, float, float, float]:
    """Exact large-D (P_b, P_12, P_13, P_23) of three sets, from the chain."""
    p12, p13, p23 = (
        exact_match_probability(pair_region_probs(region_probs, i, j), 2, bits) for i, j in ((0, 1), (0, 2), (1, 2))
    )
    return exact_match_probability(region_probs, 3, bits), p12, p13, p23


def exact_sparse_estimator_mean(region_probs: dict[int, float], bits: int) -> float:
    """E[eq. 8] at finite r, from the exact large-D chain (eq. 8 is linear in the fractions)."""
    p123, p12, p13, p23 = exact_fractions(region_probs, bits)
    return float(estimate_3way(p123, p12, p13, p23, bits))


@pytest.mark.parametrize("bits", [2, 3])
def test_three_way_sparse_unbiased_with_theorem_3_variance(bits: int) -> None:
    k, reps = 64, 10_000
    z = three_way_simulation(False, k, reps)
    R, T, r, probs = three_way_truth(False)
    p123, p12, p13, p23 = three_way_fractions(z, bits)
    r_hat = estimate_3way(p123, p12, p13, p23, bits)
    variance = variance_3way(R, T, bits, k)
    z_score = (r_hat.mean() - R) / math.sqrt(variance / reps)
    variance_ratio = r_hat.var(ddof=1) / variance
    finite_r_bias = exact_sparse_estimator_mean(probs, bits) - R
    report(
        f"3-way {THREE_WAY_SPARSE[2]} R={R:.4f} T={T:.4f} b={bits}: mean {r_hat.mean():.4f} "
        f"(bias {r_hat.mean() - R:+.5f}, {z_score:+.2f} SE; exact O(r) bias {finite_r_bias:+.5f}), "
        f"var/Theorem 3 = {variance_ratio:.3f}"
    )
    assert abs(z_score) < 3.0
    assert abs(variance_ratio - 1.0) < 0.10


@pytest.mark.parametrize("bits", [2, 3])
def test_three_way_confidence_interval_is_conservative(bits: int) -> None:
    k, reps = 64, 10_000
    z = three_way_simulation(False, k, reps)
    R, *_ = three_way_truth(False)
    m123, m12, m13, m23 = (np.rint(f * k).astype(int) for f in three_way_fractions(z, bits))
    low, high = confidence_interval_3way(m123, m12, m13, m23, k, bits)
    covered = float(np.mean((low <= R) & (R <= high)))
    report(f"3-way 95% CI {THREE_WAY_SPARSE[2]} b={bits}: coverage {covered:.4f} (score interval on Theorem 3)")
    assert 0.93 <= covered <= 0.97


@pytest.mark.parametrize("bits", [2, 3])
def test_three_way_sparse_estimator_is_biased_on_dense_sets(bits: int) -> None:
    k, reps = 128, 4_000
    z = three_way_simulation(True, k, reps)
    R, _, _, probs = three_way_truth(True)
    p123, p12, p13, p23 = three_way_fractions(z, bits)
    r_hat = estimate_3way(p123, p12, p13, p23, bits)
    se = r_hat.std(ddof=1) / math.sqrt(reps)
    predicted = exact_sparse_estimator_mean(probs, bits)
    report(
        f"3-way {THREE_WAY_DENSE[2]} R={R:.4f} b={bits}: sparse eq. 8 mean {r_hat.mean():.4f} "
        f"(bias {r_hat.mean() - R:+.4f} = {(r_hat.mean() - R) / se:+.1f} SE; exact chain predicts {predicted - R:+.4f})"
    )
    assert abs(r_hat.mean() - predicted) < 3 * se  # the bias is what the exact P_b says
    assert r_hat.mean() - R < -20 * se  # and it is visible


@pytest.mark.parametrize("bits", [2, 3])
def test_three_way_dense_estimator_removes_the_bias_on_dense_sets(bits: int) -> None:
    # The precise procedure (Sec. 4) is consistent, not exactly unbiased: it plugs noisy s_ij into
    # nonlinear maps, which leaves a bias of order 1/k (about -0.45/k here). Check that the bias is
    # small, shrinks like 1/k (k = 32 -> 128), and is within 3 SE once that 1/k term is allowed.
    k, reps = 128, 4_000
    z = three_way_simulation(True, k, reps)
    R, _, r, _ = three_way_truth(True)
    p123, p12, p13, p23 = three_way_fractions(z, bits)
    sparse = estimate_3way(p123, p12, p13, p23, bits)
    bias = {}
    for positions in (32, k):
        p123, p12, p13, p23 = three_way_fractions(z[:, :positions], bits)
        dense = estimate_3way_dense(p123, p12, p13, p23, r[0], r[1], r[2], bits)
        se = dense.std(ddof=1) / math.sqrt(reps)
        bias[positions] = dense.mean() - R
        report(
            f"3-way {THREE_WAY_DENSE[2]} R={R:.4f} b={bits} k={positions}: precise (Sec. 4) "
            f"mean {dense.mean():.4f} (bias {bias[positions]:+.5f} = {bias[positions] / se:+.2f} SE, "
            f"k*bias {positions * bias[positions]:+.2f}), sd {dense.std():.4f}"
        )
        assert abs(bias[positions]) < 3 * se + 1.0 / positions
    assert abs(bias[k]) < 0.1 * abs(sparse.mean() - R)
    assert abs(bias[32]) > 2 * abs(bias[k])  # shrinks with k: a small-sample effect


def test_half_bit_beats_one_bit_at_high_resemblance() -> None:
    # R = 0.9, sparse; both use k = 128 stored bits: R_1 from 128 permutations, R_1/2 from 256
    k, reps, D = 128, 10_000, 2**16
    regions: Regions = ((1, 15), (2, 15), (3, 270))
    R, r = 0.9, 285 / D
    z = sample_minima(regions, 2, D, 3 * k * reps, seed=500).reshape(reps, 3 * k, 2)
    low_bit = z & 1
    one_bit = estimate_2way((low_bit[:, :k, 0] == low_bit[:, :k, 1]).mean(axis=1), r, r, 1)
    xor = low_bit[:, k::2] ^ low_bit[:, k + 1 :: 2]
    half_bit = estimate_half_bit((xor[..., 0] == xor[..., 1]).mean(axis=1), r, r)
    v1, v_half = one_bit.var(ddof=1), half_bit.var(ddof=1)
    eq26 = variance_half_bit(R, r, r, k)
    report(
        f"b=1/2 at R=0.9, k={k} bits: Var(R_1) {v1:.3e} (eq.11 {variance_2way(R, r, r, 1, k):.3e}), "
        f"Var(R_1/2) {v_half:.3e} (eq.26 {eq26:.3e}, ratio {v_half / eq26:.3f}), "
        f"mean R_1/2 {half_bit.mean():.4f}, mean R_1 {one_bit.mean():.4f}"
    )
    assert v_half < 0.7 * v1
    assert abs(v_half / eq26 - 1) < 0.10
    assert abs(half_bit.mean() - R) < 0.003  # biased at O(1/k) (eq. 25 is nonlinear), slightly


# ----------------------------------------------------------------------------------------------
# Properties (hypothesis)
# ----------------------------------------------------------------------------------------------

unit = st.floats(0.0, 1.0)
bits_strategy = st.integers(1, 64)


@PROPERTY
@given(unit, unit, unit, unit, bits_strategy)
def test_estimate_2way_is_increasing_in_match_fraction(e1: float, e2: float, r1: float, r2: float, bits: int) -> None:
    low, high = sorted((e1, e2))
    est_low, est_high = estimate_2way(np.array([low, high]), r1, r2, bits)
    assert est_low <= est_high
    if high - low > 1e-12:
        assert est_low < est_high


@PROPERTY
@given(unit, unit, unit, bits_strategy)
def test_estimate_2way_is_symmetric(e_hat: float, r1: float, r2: float, bits: int) -> None:
    assert estimate_2way(e_hat, r1, r2, bits) == estimate_2way(e_hat, r2, r1, bits)
    assert variance_2way(e_hat, r1, r2, bits, 10) == variance_2way(e_hat, r2, r1, bits, 10)


@PROPERTY
@given(unit, unit, bits_strategy)
def test_coefficients_lie_in_unit_interval(r1: float, r2: float, bits: int) -> None:
    c1, c2 = coefficients_2way(r1, r2, bits)
    bound = 2.0**-bits * (1 + 1e-12)
    assert 0.0 <= c1 <= bound and 0.0 <= c2 <= bound
    assert 0.0 <= a_coefficient(r1, bits) <= bound


@PROPERTY
@given(st.floats(0.0, 1.0, exclude_min=True), bits_strategy)
def test_identical_documents_always_estimate_one(r: float, bits: int) -> None:
    assert estimate_2way(1.0, r, r, bits) == pytest.approx(1.0, abs=1e-12)


@PROPERTY
@given(st.integers(1, 10_000), st.data())
def test_wilson_interval_contains_the_estimate(trials: int, data: st.DataObject) -> None:
    successes = data.draw(st.integers(0, trials))
    low, high = wilson_interval(successes, trials)
    assert 0.0 <= low <= successes / trials <= high <= 1.0
