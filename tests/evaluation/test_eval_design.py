"""The sampling design and the survey estimators of ``eval``: hand-computed values, and repeated sampling from
populations whose totals are known (fixed seeds), where an estimator that ignored the weights would fail."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dedup_cli.array_primitives import among, pair_codes
from dedup_cli.candidates.banding import Banding, candidate_probability
from dedup_cli.evaluation import design
from dedup_cli.evaluation.design import (
    allocate,
    draw_pairs,
    frame_banding,
    reach,
    resemblance_bins,
    unbanded_pairs,
)
from dedup_cli.evaluation.survey import Estimate, StratifiedSample, normal_quantile, root_of

# --- the estimators, by hand ----------------------------------------------------------------------------------


def test_total_and_its_variance_by_hand() -> None:
    # Stratum 0: N = 10, sampled y = 1, 3 (mean 2, s² = 2); stratum 1: N = 4, sampled y = 5, 5, 8 (mean 6, s² = 3).
    sample = StratifiedSample(np.array([0, 0, 1, 1, 1]), np.array([10, 4]))
    estimate = sample.total(np.array([1.0, 3.0, 5.0, 5.0, 8.0]))
    assert estimate.value == pytest.approx(10 * 2 + 4 * 6)
    variance = 10**2 * (1 - 2 / 10) * 2 / 2 + 4**2 * (1 - 3 / 4) * 3 / 3
    assert estimate.stderr == pytest.approx(math.sqrt(variance))
    z = normal_quantile(0.95)
    assert (estimate.ci_low, estimate.ci_high) == pytest.approx((44 - z * math.sqrt(variance),
                                                                44 + z * math.sqrt(variance)))
    assert list(sample.weights) == pytest.approx([5, 5, 4 / 3, 4 / 3, 4 / 3])
    assert list(sample.measured) == [2, 3]


def test_ratio_and_its_linearised_variance_by_hand() -> None:
    sample = StratifiedSample(np.array([0, 0, 1, 1]), np.array([6, 2]))
    y, x = np.array([1.0, 0.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0, 0.0])
    ratio = sample.ratio(y, x, low=0.0, high=1.0)
    assert ratio is not None
    # Ŷ = 3·1 + 1·2 = 5, X̂ = 3·2 + 1·1 = 7.
    assert ratio.value == pytest.approx(5 / 7)
    residuals = y - 5 / 7 * x
    spread0 = np.var(residuals[:2], ddof=1)  # stratum 1 is a census: no variance
    assert ratio.stderr == pytest.approx(math.sqrt(6**2 * (1 - 2 / 6) * spread0 / 2) / 7)
    assert 0.0 <= ratio.ci_low <= ratio.value <= ratio.ci_high <= 1.0


def test_a_ratio_with_an_empty_denominator_is_not_estimable() -> None:
    sample = StratifiedSample(np.array([0, 0]), np.array([5]))
    assert sample.ratio(np.zeros(2), np.zeros(2)) is None


def test_a_census_has_no_sampling_error() -> None:
    sample = StratifiedSample(np.array([0, 0, 1]), np.array([2, 1]))
    assert sample.total(np.array([3.0, 4.0, 9.0])) == Estimate.exact(16.0)
    assert sample.ratio(np.array([1.0, 0.0, 1.0]), np.ones(3)) == Estimate.exact(2 / 3)


def test_a_proportion_has_a_wilson_interval_that_does_not_collapse() -> None:
    # Stratum 0 (N = 100) sampled in part, every sampled unit a success; stratum 1 (N = 3) taken whole.
    sample = StratifiedSample(np.array([0, 0, 0, 0, 1, 1, 1]), np.array([100, 3]))
    y = np.array([1, 1, 1, 1, 0, 1, 0], dtype=bool)
    x = np.ones(7, dtype=bool)
    share = sample.proportion(y, x)
    assert share is not None
    assert share.value == pytest.approx(101 / 103)
    ratio = sample.ratio(y, x)
    assert ratio is not None and share.stderr == ratio.stderr == 0.0  # every sampled unit of stratum 0 agrees …
    z = normal_quantile(0.95)
    n = 4.0  # … so the interval is Wilson's for the 4 units sampled in part, not a point
    centre = (share.value + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share.value * (1 - share.value) / n + z * z / (4 * n * n))
    assert (share.ci_low, share.ci_high) == pytest.approx((centre - half, min(centre + half, 1.0)))
    assert share.ci_low < 0.7
    census = StratifiedSample(np.array([0, 0]), np.array([2]))
    assert census.proportion(np.array([1.0, 0.0]), np.ones(2)) == Estimate.exact(0.5)
    assert census.proportion(np.zeros(2), np.zeros(2)) is None


def test_root_of_a_mean_square() -> None:
    root = root_of(Estimate(0.04, 0.01, 0.02, 0.06))
    assert root.value == pytest.approx(0.2)
    assert root.stderr == pytest.approx(0.01 / (2 * 0.2))  # delta method
    assert (root.ci_low, root.ci_high) == pytest.approx((math.sqrt(0.02), math.sqrt(0.06)))
    assert root_of(Estimate(0.0, 0.0, -0.1, 0.0)) == Estimate(0.0, 0.0, 0.0, 0.0)


def test_units_must_belong_to_a_stratum() -> None:
    with pytest.raises(ValueError, match="stratum"):
        StratifiedSample(np.array([0, 2]), np.array([3, 3]))


# --- repeated sampling from a known population ----------------------------------------------------------------


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three strata unlike each other: a huge one of few positives, a middle one, a small one of many positives.

    Returns the stratum of every unit, and binary y ⊆ x (think: true and reported pairs). The big stratum's
    positives are few but not so rare that a sample of 400 usually misses them all (docs/evaluation.md says why the
    normal interval cannot cover that case).
    """
    sizes = [20_000, 600, 60]
    stratum = np.repeat(np.arange(3), sizes)
    share_x = np.repeat([0.1, 0.4, 0.9], sizes)
    x = rng.random(stratum.size) < share_x
    y = x & (rng.random(stratum.size) < np.repeat([0.5, 0.6, 0.95], sizes))
    return stratum, x.astype(float), y.astype(float)


def _draw(stratum: np.ndarray, counts: list[int], rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([rng.choice(np.flatnonzero(stratum == h), size=count, replace=False)
                           for h, count in enumerate(counts)])


@pytest.mark.slow
def test_weighted_totals_and_ratios_are_unbiased_with_honest_intervals() -> None:
    rng = np.random.default_rng(7)
    stratum, x, y = _population(rng)
    population = np.bincount(stratum)
    counts = [400, 100, 30]
    true_total, true_ratio = y.sum(), y.sum() / x.sum()
    totals, variances, ratios, ratio_covered, total_covered, naive, share_covered = [], [], [], [], [], [], []
    repetitions = 2000
    for _ in range(repetitions):
        units = _draw(stratum, counts, rng)
        sample = StratifiedSample(stratum[units], population)
        total = sample.total(y[units])
        ratio = sample.ratio(y[units], x[units], low=0.0, high=1.0)
        assert ratio is not None
        totals.append(total.value)
        variances.append(total.stderr**2)
        total_covered.append(total.ci_low <= true_total <= total.ci_high)
        ratios.append(ratio.value)
        ratio_covered.append(ratio.ci_low <= true_ratio <= ratio.ci_high)
        share = sample.proportion(y[units], x[units])
        assert share is not None and share.value == ratio.value
        share_covered.append(share.ci_low <= true_ratio <= share.ci_high)
        naive.append(y[units].sum() / x[units].sum())  # what ignoring the weights would report
    totals_array = np.array(totals)
    mean_error = totals_array.mean() - true_total
    assert abs(mean_error) < 4 * totals_array.std() / math.sqrt(repetitions)  # Horvitz–Thompson: unbiased
    assert np.mean(variances) == pytest.approx(totals_array.var(), rel=0.1)  # the variance estimate too
    # Normal intervals on skewed binary data cover a little less than they say (0.93 here), never much less.
    assert 0.92 <= np.mean(total_covered) <= 0.975
    ratio_spread = np.std(ratios) / math.sqrt(repetitions)
    assert abs(np.mean(ratios) - true_ratio) < 4 * ratio_spread + 0.01 * np.std(ratios)  # bias O(1/n) only
    assert 0.92 <= np.mean(ratio_covered) <= 0.975
    assert 0.92 <= np.mean(share_covered) <= 0.975
    # The same check fails for the unweighted ratio: the test can tell a biased estimator.
    assert abs(np.mean(naive) - true_ratio) > 20 * ratio_spread


# --- allocation and the draw ----------------------------------------------------------------------------------


def test_allocation_is_equal_and_capped_at_each_stratum() -> None:
    assert allocate(np.array([5, 100, 1000]), 60).tolist() == [5, 27, 28]  # 5 whole, the rest shared equally
    assert allocate(np.array([3, 4]), 100).tolist() == [3, 4]  # a census
    assert allocate(np.array([1000, 1000, 1000]), 10).tolist() == [3, 3, 4]
    assert allocate(np.array([1000, 1, 1000]), 3).tolist() == [2, 1, 2]  # at least two where there are two


def test_bins_clip_and_close_the_last_one() -> None:
    assert resemblance_bins(np.array([-0.2, 0.0, 0.09999, 0.1, 0.95, 1.0, 1.3]), 10).tolist() == [0, 0, 0, 1, 9, 9, 9]


@pytest.mark.parametrize("enumerate_below", [design.ENUMERATE_PAIRS, 0], ids=["listed", "rejection"])
def test_unbanded_pairs_are_a_uniform_sample_without_replacement(monkeypatch: pytest.MonkeyPatch,
                                                                 enumerate_below: int) -> None:
    monkeypatch.setattr(design, "ENUMERATE_PAIRS", enumerate_below)
    documents = np.array([0, 1, 2, 4, 5, 6, 7, 9])  # 3 and 8 are not eligible
    num_docs = 10
    banded = np.sort(pair_codes(np.array([0, 1, 4, 5, 2]), np.array([1, 2, 9, 6, 7]), num_docs))
    rng = np.random.default_rng(3)
    counts: dict[int, int] = {}
    repetitions, per_draw = 3000, 5
    for _ in range(repetitions):
        first, second = unbanded_pairs(documents, banded, per_draw, num_docs, rng)
        assert np.all(first < second)
        assert np.isin(first, documents).all() and np.isin(second, documents).all()
        codes = pair_codes(first, second, num_docs)
        assert np.unique(codes).size == per_draw  # without replacement
        assert not among(codes, banded)[0].any()
        for code in codes.tolist():
            counts[code] = counts.get(code, 0) + 1
    population = math.comb(documents.size, 2) - banded.size
    assert len(counts) == population  # every unbanded pair can be drawn …
    expected = repetitions * per_draw / population  # … and each equally often
    assert max(abs(count - expected) for count in counts.values()) < 5 * math.sqrt(expected)


def test_draw_stratifies_by_estimate_and_keeps_every_bin() -> None:
    eligible = np.ones(30, dtype=bool)
    eligible[7] = False
    first = np.array([0, 0, 1, 2, 3, 4, 5])
    second = np.array([1, 2, 2, 3, 4, 5, 6])
    codes = pair_codes(first, second, 30)
    estimate = np.array([0.95, 0.55, 0.51, 0.05, 0.99, 0.12, 0.58])
    candidate = np.array([True, True, True, False, True, False, True])
    drawn = draw_pairs(codes, estimate, candidate, eligible, sample=60, seed=1, bins=10)
    assert drawn.population == math.comb(29, 2)
    banded = [stratum for stratum in drawn.strata if stratum.banded]
    assert [(s.low, s.population) for s in banded] == [(0.0, 1), (0.1, 1), (0.5, 3), (0.9, 2)]
    assert all(s.drawn == s.population for s in banded)  # small strata are taken whole
    rest = drawn.strata[-1]
    assert not rest.banded and rest.population == math.comb(29, 2) - 7 and rest.drawn == 60 - 7
    assert drawn.first.size == 60
    drawn_codes = pair_codes(drawn.first, drawn.second, 30)
    assert np.array_equal(drawn.candidate, np.isin(drawn_codes, codes[candidate]))
    assert not np.isin(drawn.first, [7]).any() and not np.isin(drawn.second, [7]).any()
    again = draw_pairs(codes, estimate, candidate, eligible, sample=60, seed=1, bins=10)
    assert np.array_equal(again.first, drawn.first) and np.array_equal(again.second, drawn.second)  # seeded
    other = draw_pairs(codes, estimate, candidate, eligible, sample=60, seed=2, bins=10)
    assert not np.array_equal(pair_codes(other.first, other.second, 30), drawn_codes)


def test_reach_is_where_the_banded_strata_hold_99_percent() -> None:
    find = Banding(35, 3, 8)
    below, at = (float(candidate_probability(r, 35, 3, 8)) for r in (0.49, 0.5))
    assert below < 0.99 <= at and reach([find]) == 0.5
    assert reach([find, Banding(128, 2, 8)]) == 0.19  # the looser banding reaches further down
    assert reach([Banding(1, 256, 8)]) == 1.0


def test_the_frame_banding_is_the_loosest_within_its_chance_budget() -> None:
    banding = frame_banding(1_000, 256, 8)
    assert banding is not None and (banding.bands, banding.rows) == (128, 2)
    pairs = math.comb(1_000, 2)
    assert pairs * float(candidate_probability(0.0, 128, 2, 8)) <= design.FRAME_CHANCE_PAIRS
    assert pairs * float(candidate_probability(0.0, 256, 1, 8)) > design.FRAME_CHANCE_PAIRS  # one row is too loose
    bigger = frame_banding(100_000, 256, 8)
    assert bigger is not None and bigger.rows == 3  # more documents, more rows
    assert frame_banding(10**9, 4, 1) is None  # nothing fits
