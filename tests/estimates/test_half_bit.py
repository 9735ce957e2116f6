"""b = 1/2 (Li & König 2010, Sec. 5.3): the XOR estimator against hand-computed values, a Monte Carlo on random
sets signed by the package, the interval's coverage, the XOR pairing and the count bound of every-pair search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dedup_cli.candidates.banding import required_num_perm, resolve_banding, row_agreement_probability
from dedup_cli.candidates.candidate_triples import pair_margin
from dedup_cli.candidates.match_bounds import min_xor_matches_for_threshold
from dedup_cli.estimates.half_bit import (
    HALF_BIT,
    estimate_half_bit,
    expected_xor_match,
    is_half_bit,
    standard_error_half_bit,
    storage_factor_half_bit,
    variance_half_bit,
)
from dedup_cli.estimates.intervals import confidence_interval_half_bit
from dedup_cli.estimates.pairs import score_matches, score_pairs
from dedup_cli.estimates.two_way import storage_factor
from dedup_cli.minhash.kperm import HashFamily, min_hash_values
from dedup_cli.minhash.packing import estimator_values, xor_bits
from dedup_cli.options.vocabulary import HALF_BIT as OPTIONS_HALF_BIT


def test_the_options_and_the_estimators_spell_b_one_half_alike() -> None:
    assert HALF_BIT == OPTIONS_HALF_BIT == 0.5
    assert is_half_bit(0.5) and not is_half_bit(1) and not is_half_bit(None)


def test_hand_computed_sparse_values() -> None:
    # Sparse limit: C_1 = C_2 = 1/2, T = (1 + R²)/2, R̂ = sqrt(2T̂ − 1).
    assert float(expected_xor_match(0.8, 0.0, 0.0)) == pytest.approx(0.82)
    assert float(estimate_half_bit(0.82, 0.0, 0.0)) == pytest.approx(0.8)
    assert float(estimate_half_bit(0.625, 0.0, 0.0)) == pytest.approx(0.5)
    # T̂ below 1/2 is truncated to the floor, 0 here
    assert float(estimate_half_bit(0.45, 0.0, 0.0)) == 0.0
    # eq. 26 at R = 0.8, k = 100: T (1 − T)/(k R²) = 0.82 · 0.18 / 64
    assert float(variance_half_bit(0.8, 0.0, 0.0, 100)) == pytest.approx(0.1476 / 64)
    assert float(standard_error_half_bit(0.82, 0.0, 0.0, 100)) == pytest.approx(math.sqrt(0.1476 / 64))
    assert float(variance_half_bit(0.0, 0.0, 0.0, 100)) == math.inf


def test_hand_computed_dense_values() -> None:
    # r1 = r2 = 1/2, b = 1: A = r (1 − r)/(1 − (1 − r)²) = 1/3 = C_1 = C_2; E_1 = 1/3 + 2R/3.
    # At R = 1/2: E_1 = 2/3, T = 4/9 + 1/9 = 5/9, R̂(5/9) = (1/3 + 1 − 2/3)/(2 − 2/3) = 1/2.
    assert float(expected_xor_match(0.5, 0.5, 0.5)) == pytest.approx(5 / 9)
    assert float(estimate_half_bit(5 / 9, 0.5, 0.5)) == pytest.approx(0.5)
    # eq. 26: T(1 − T)/(4k (2/3)² (2T − 1)) = (20/81)/(4k · 4/9 · 1/9) = (20/81)/(16k/81) = 5/(4k)
    assert float(variance_half_bit(0.5, 0.5, 0.5, 10)) == pytest.approx(5 / 40)


def test_storage_factor_of_b_one_half_against_b_one() -> None:
    # Per stored bit b = 1/2 wins above R = 1/sqrt(3) and halves the variance as R → 1 (eqs. 12, 27).
    assert float(storage_factor(0.5, 0, 0, 1) / storage_factor_half_bit(0.5, 0, 0)) < 1
    assert float(storage_factor(0.8, 0, 0, 1) / storage_factor_half_bit(0.8, 0, 0)) > 1
    assert float(storage_factor(1 - 1e-7, 0, 0, 1) / storage_factor_half_bit(1 - 1e-7, 0, 0)) == pytest.approx(
        2.0, rel=1e-5)


def test_xor_bits_pair_position_j_with_j_plus_half_k() -> None:
    values = np.array([[0b10, 0b11, 0b01, 0b00, 0b111], [1, 0, 1, 1, 0]], dtype=np.uint8)
    # k = 5: pairs (0, 2), (1, 3); position 4 is left out
    np.testing.assert_array_equal(xor_bits(values), [[0 ^ 1, 1 ^ 0], [1 ^ 1, 0 ^ 1]])
    np.testing.assert_array_equal(estimator_values(values, HALF_BIT), xor_bits(values))
    np.testing.assert_array_equal(estimator_values(values, 1), values & 1)


def _signed_pairs(resemblance: float, reps: int, k: int, seed: int) -> np.ndarray:
    """uint64[2·reps, k]: minwise values of ``reps`` random pairs of sets with exactly this resemblance, hashed
    by the package's k hash functions (rows 2i and 2i + 1 are pair i)."""
    shared = round(100 * resemblance)  # of 100 elements in the union; the rest split between the two sets
    only_a = (100 - shared) // 2
    rng = np.random.default_rng(seed)
    elements = rng.integers(0, 2**63, size=(reps, 100), dtype=np.int64).astype(np.uint64)
    first = elements[:, : shared + only_a]
    second = np.concatenate([elements[:, :shared], elements[:, shared + only_a :]], axis=1)
    sets = [row for pair in zip(first, second, strict=True) for row in pair]
    offsets = np.concatenate([[0], np.cumsum([len(row) for row in sets])]).astype(np.int64)
    return min_hash_values(np.concatenate(sets), offsets, HashFamily.from_seed(seed, k))


@pytest.mark.parametrize(("resemblance", "seed"), [(0.6, 11), (0.8, 12), (0.95, 13)])
def test_monte_carlo_of_t_on_random_sets(resemblance: float, seed: int) -> None:
    reps, k = 600, 256
    xor = xor_bits(_signed_pairs(resemblance, reps, k, seed))
    xor_count = xor.shape[1]
    assert xor_count == k // 2
    fractions = (xor[0::2] == xor[1::2]).mean(axis=1)
    t = float(expected_xor_match(resemblance, 0.0, 0.0))
    t_variance = t * (1 - t) / xor_count
    # the mean of T̂ within 4 standard errors of T (eq. 23)
    assert abs(fractions.mean() - t) < 4 * math.sqrt(t_variance / reps)
    # the variance of T̂ within 4 standard errors of T (1 − T)/k (the binomial law; s²/σ² has sd sqrt(2/(n − 1)))
    assert abs(fractions.var(ddof=1) / t_variance - 1) < 4 * math.sqrt(2 / (reps - 1))
    estimates = np.asarray(estimate_half_bit(fractions, 0.0, 0.0))
    eq26 = float(variance_half_bit(resemblance, 0.0, 0.0, xor_count))
    # R̂_1/2 is biased at O(1/k); its variance within 25 % of eq. 26 (the delta method) at this k
    assert abs(estimates.mean() - resemblance) < 4 * math.sqrt(eq26 / reps) + 2.0 / xor_count
    assert abs(estimates.var(ddof=1) / eq26 - 1) < 0.25
    # the interval (Wilson for T through eq. 25) covers R about 95 % of the time
    matches = (xor[0::2] == xor[1::2]).sum(axis=1)
    low, high = confidence_interval_half_bit(matches, xor_count, 0.0, 0.0)
    coverage = float(np.mean((low <= resemblance) & (resemblance <= high)))
    assert 0.90 <= coverage <= 0.99


def test_scoring_pairs_with_xor_bits_matches_the_formulas() -> None:
    values = _signed_pairs(0.8, 4, 256, 5)
    xor = estimator_values(values, HALF_BIT)
    first, second = np.array([0, 2, 4, 6]), np.array([1, 3, 5, 7])
    scored = score_pairs(xor, first, second, np.zeros(8), HALF_BIT)
    fraction = scored.matches / 128
    np.testing.assert_array_equal(scored.matches, (xor[first] == xor[second]).sum(axis=1))
    np.testing.assert_allclose(scored.estimate, estimate_half_bit(fraction, 0.0, 0.0))
    np.testing.assert_allclose(scored.stderr, standard_error_half_bit(fraction, 0.0, 0.0, 128))
    assert np.all(scored.ci_low <= scored.estimate) and np.all(scored.estimate <= scored.ci_high)
    again = score_matches(first, second, scored.matches, np.zeros(4), np.zeros(4), 128, HALF_BIT)
    np.testing.assert_array_equal(again.ci_low, scored.ci_low)


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
@pytest.mark.parametrize("r", [0.0, 1e-17, np.array([0.0, 1e-3, 0.2, 0.5])])
def test_the_xor_count_bound_never_loses_a_pair(threshold: float, r: float | np.ndarray) -> None:
    k = 128
    needed = np.asarray(min_xor_matches_for_threshold(threshold, k, r))
    counts = np.arange(k + 1)
    ratios = np.atleast_1d(np.asarray(r, dtype=np.float64))
    for own, bound in zip(ratios, np.broadcast_to(needed, ratios.shape), strict=True):
        for partner in ratios:
            passing = counts[np.asarray(estimate_half_bit(counts / k, own, partner)) >= threshold]
            if passing.size:
                assert bound <= passing.min()  # a lower bound: no count that reaches R0 is skipped
    if np.ndim(r) == 0 and r == 0.0:
        # and a tight one in the sparse limit: at most two counts low
        passing = counts[np.asarray(estimate_half_bit(counts / k, 0.0, 0.0)) >= threshold]
        assert passing.min() - int(needed) <= 2


def test_pair_margin_of_b_one_half_is_eq_26() -> None:
    assert pair_margin(0.8, 128, HALF_BIT, z=3) == pytest.approx(3 * math.sqrt(float(variance_half_bit(
        0.8, 0, 0, 128))))


def test_rows_of_xor_bits_agree_with_probability_t() -> None:
    grid = np.linspace(0, 1, 11)
    np.testing.assert_allclose(row_agreement_probability(grid, HALF_BIT), expected_xor_match(grid, 0.0, 0.0))
    np.testing.assert_allclose(row_agreement_probability(grid, 1), 0.5 + grid / 2)  # E_1, not T
    # T < E_1 inside (0, 1): XOR rows need fewer rows a band than 1-bit rows for the same S-curve
    banding = resolve_banding(0.8, 128, HALF_BIT, 0.99).banding
    assert banding.band_bits == HALF_BIT
    assert banding.recall_at(0.8) >= 0.99
    t_rows = float(row_agreement_probability(0.8, HALF_BIT)) ** banding.rows
    assert banding.recall_at(0.8) == pytest.approx(1 - (1 - t_rows) ** banding.bands)


def test_required_k_of_xor_rows_counts_permutations() -> None:
    for documents in (1_000, 10_000):
        xor_rows = required_num_perm(0.8, HALF_BIT, 0.99, documents)
        choice = resolve_banding(0.8, 128, HALF_BIT, 0.99, documents=documents)
        assert xor_rows is not None and choice.required_num_perm == 2 * xor_rows
