"""The bound for all candidates at once: its level, and chance accepts among a million pairs below R0."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_cli.estimates.half_bit import HALF_BIT, expected_xor_match
from dedup_cli.estimates.intervals import confidence_interval_2way, confidence_interval_half_bit
from dedup_cli.estimates.simultaneous import (
    DECISION_LEVEL,
    SimultaneousBound,
    rescue_level,
    rescue_upper_bound,
    simultaneous_level,
    simultaneous_lower_bound,
)
from dedup_cli.estimates.two_way import estimate_2way, expected_match_2way


def test_the_level_widens_with_the_candidates() -> None:
    assert simultaneous_level(0.95, 1) == 0.95
    assert simultaneous_level(0.95, 0) == 0.95
    assert simultaneous_level(0.95, 1000) == pytest.approx(1 - 5e-5)
    with pytest.raises(ValueError, match="confidence level"):
        simultaneous_level(1.0, 10)


@pytest.mark.parametrize("bits", [HALF_BIT, 1, 2, 8])
def test_a_million_pairs_below_r0_clear_it_by_chance_per_pair_not_at_once(bits: float) -> None:
    """A million simulated candidates at R = R0 − 0.1 (match counts drawn from their binomial law, k = 64): the
    per-pair 95 % lower end clears R0 = 0.5 for hundreds of them, the bound for the million at once for none
    (it expects at most 0.025)."""
    rng = np.random.default_rng(7)
    m, k, threshold = 1_000_000, 64, 0.5
    zero = np.zeros(m)
    if bits == HALF_BIT:
        probability = float(expected_xor_match(threshold - 0.1, 0.0, 0.0))
        matches = rng.binomial(k, probability, size=m)
        per_pair, _ = confidence_interval_half_bit(matches, k, zero, zero)
    else:
        probability = float(expected_match_2way(threshold - 0.1, 0.0, 0.0, bits))
        matches = rng.binomial(k, probability, size=m)
        per_pair, _ = confidence_interval_2way(matches, k, zero, zero, bits)
    assert np.count_nonzero(per_pair >= threshold) > 100
    at_once = simultaneous_lower_bound(matches, k, zero, zero, bits, m)
    assert np.all(at_once <= per_pair)
    assert np.count_nonzero(at_once >= threshold) == 0


def test_only_pairs_accepted_by_their_own_interval_are_bounded_again() -> None:
    """A pair below R0 is left to the per-pair rule, a sure one (R̂ = 1) stays sure among a billion candidates, and
    one at R̂ ≈ 0.7 (its own lower end ≈ 0.63) is sure alone but not among a billion."""
    k = 256
    matches = np.array([100, 198, 256])
    zero = np.zeros(3)
    estimate = np.asarray(estimate_2way(matches / k, zero, zero, 2))
    low, _ = confidence_interval_2way(matches, k, zero, zero, 2)
    assert low[1] >= 0.5
    alone = SimultaneousBound(2, k, 1).unsure(0.5, estimate, low, matches, zero, zero)
    among_many = SimultaneousBound(2, k, 10**9).unsure(0.5, estimate, low, matches, zero, zero)
    assert alone.tolist() == [False, False, False]
    assert among_many.tolist() == [False, True, False]


def test_the_rescue_level_scales_the_estimates_misses_with_the_bandings() -> None:
    # At the default recall the per-pair level stands; above it, the chance that a pair at R0 is put below R0 by
    # its upper bound, (1 − level)/2, shrinks with 1 − recall: ten times fewer misses at 0.999 (2.81 σ).
    assert rescue_level(0.99) == DECISION_LEVEL and rescue_level(0.5) == DECISION_LEVEL
    assert rescue_level(0.999) == pytest.approx(0.995)
    assert rescue_level(0.9999) == pytest.approx(0.9995)
    assert DECISION_LEVEL < rescue_level(0.999999) < 1.0
    matches = np.arange(0, 65)
    r = np.zeros(matches.size)
    _, per_pair = confidence_interval_2way(matches, 64, r, r, 1, level=DECISION_LEVEL)
    wide = rescue_upper_bound(matches, 64, r, r, 1, 0.999)
    assert np.all(wide >= per_pair - 1e-12) and np.any(wide > per_pair)


def test_above_099_pairs_just_below_r0_are_checked_and_at_099_none() -> None:
    matches = np.array([30, 36, 38, 40, 42, 44])  # of k = 64 one-bit values: R̂ = 2·m/64 − 1 from −0.06 to 0.375
    r = np.zeros(matches.size)
    estimate = 2 * matches / 64 - 1
    low, high = confidence_interval_2way(matches, 64, r, r, 1, level=DECISION_LEVEL)
    threshold = 0.5
    default = SimultaneousBound(1, 64, 100).unsure(threshold, estimate, low, matches, r, r, high)
    higher = SimultaneousBound(1, 64, 100, recall=0.999).unsure(threshold, estimate, low, matches, r, r, high)
    assert not default.any()
    _, wide = confidence_interval_2way(matches, 64, r, r, 1, level=0.995)
    assert higher.tolist() == ((high < threshold) & (wide >= threshold)).tolist() and higher.any()
