"""The S-curve of one permutation hashing for short documents (docs/estimators.md, "One permutation hashing"): the
three-point model of :func:`candidate_probability` against the exact curve of the exchangeable model and against a
simulated banding of real oph signatures, and the banding ``plan`` and ``find`` choose from it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import dedup_cli as dedup
from dedup_cli.candidates.banding import (
    Banding,
    PairSizes,
    candidate_probability,
    choose_banding_for_corpus,
    resolve_banding,
    row_spread,
)
from dedup_cli.engine.stages.plan import find_banding, plan_find, shortest_sizes
from dedup_cli.estimates.densified import densified_variance_2way
from dedup_cli.minhash.oph import min_hash_values_oph
from dedup_cli.params import SignatureParams


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _binomial(n: int, p: float) -> np.ndarray:
    x = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        return (x == (0 if p <= 0.0 else n)).astype(float)
    logs = np.array([_log_choose(n, i) for i in x]) + x * math.log(p) + (n - x) * math.log1p(-p)
    return np.exp(logs)


def _hypergeometric(total: int, good: int, drawn: int) -> np.ndarray:
    out = np.zeros(drawn + 1)
    for i in range(drawn + 1):
        if i <= good and drawn - i <= total - good:
            out[i] = math.exp(_log_choose(good, i) + _log_choose(total - good, drawn - i) - _log_choose(total, drawn))
    return out


def exact_curve(union: int, shared: int, k: int, band_bits: int, bands: int, rows: int) -> float:
    """The S-curve of the exchangeable model, exactly: the k positions' agreements are exchangeable, so
    Pr(candidate) = Σ_x Pr(X = x) Pr(some band agrees | x agreeing positions placed at random), with X the
    occupied bins' good minima g (hypergeometric among the m occupied) plus the empty bins' copies,
    Binomial(k − m, g/m), plus chance agreements of the B-bit values."""
    occupied = np.zeros(k + 1)
    occupied[0] = 1.0
    bins = np.arange(k + 1)
    for _ in range(union):
        step = occupied * bins / k
        step[1:] += occupied[:-1] * (k - bins[:-1]) / k
        occupied = step
    agreeing = np.zeros(k + 1)
    for m in range(1, min(union, k) + 1):
        for g, weight in enumerate(_hypergeometric(union, shared, m)):
            if occupied[m] * weight > 1e-14:
                agreeing[g : g + k - m + 1] += occupied[m] * weight * _binomial(k - m, g / m)
    chance = 2.0**-band_bits
    with_chance = np.zeros(k + 1)
    for x, weight in enumerate(agreeing):
        if weight > 1e-15:
            with_chance[x:] += weight * _binomial(k - x, chance)
    # none[y]: no band wholly agreeing when y agreeing positions lie among the positions left, band by band
    none = np.ones(k + 1)
    for band in reversed(range(bands)):
        left = k - band * rows
        step = np.zeros(k + 1)
        for y in range(left + 1):
            for t in range(min(rows - 1, y) + 1):
                if rows - t <= left - y:
                    step[y] += math.exp(_log_choose(y, t) + _log_choose(left - y, rows - t)
                                        - _log_choose(left, rows)) * none[y - t]
        none = step
    return float(1.0 - with_chance @ none)


# (union, shared, bands, rows) at k = 64, 16-bit rows
CASES = [(6, 3, 19, 3), (10, 8, 10, 5), (20, 15, 10, 5), (40, 30, 10, 5), (30, 18, 19, 3), (200, 120, 19, 3)]


@pytest.mark.parametrize(("union", "shared", "bands", "rows"), CASES)
def test_the_three_point_curve_follows_the_exchangeable_model(union: int, shared: int, bands: int, rows: int) -> None:
    k = 64
    R = shared / union
    size = (union + shared) / 2.0  # two documents of equal size with this union and intersection
    model = float(candidate_probability(R, bands, rows, 16, PairSizes(k, size, size)))
    assert model == pytest.approx(exact_curve(union, shared, k, 16, bands, rows), abs=0.006)


def test_the_spread_is_that_of_the_densified_count() -> None:
    """σ² makes a mixture of binomials vary as eq. D4 says: Var(X) = k E(1 − E) + k (k − 1) σ²; none where
    densification makes the count vary less than a binomial (documents with many more shingles than k)."""
    k, R, size, bits = 128, 0.6, 12.0, 16
    sizes = PairSizes(k, size, size)
    spread = float(row_spread(R, bits, sizes))
    chance = 2.0**-bits
    E = chance + (1 - chance) * R
    count_variance = k * E * (1 - E) + k * (k - 1) * spread
    assert count_variance == pytest.approx(k * k * (1 - chance) ** 2
                                           * float(densified_variance_2way(R, size, size, bits, k)), rel=1e-9)
    assert float(row_spread(R, bits, PairSizes(k, 2000.0, 2000.0))) == 0.0
    assert float(row_spread(0.0, bits, sizes)) == float(row_spread(1.0, bits, sizes)) == 0.0
    long = candidate_probability(np.linspace(0, 1, 11), 16, 6, bits, PairSizes(k, 5000.0, 5000.0))
    np.testing.assert_allclose(long, candidate_probability(np.linspace(0, 1, 11), 16, 6, bits))


@pytest.mark.slow
@pytest.mark.parametrize(("size", "shared"), [(12, 7), (20, 13), (20, 15), (5, 4)])
def test_the_curve_against_a_simulated_banding(size: int, shared: int) -> None:
    """Pairs of random documents signed by one permutation hashing and banded 16 × 6 at k = 128 (find's banding
    for R0 = 0.8), under 160 seeds (so 160 sets of bin orders, which the model averages over): the share that
    shares a band is the model's within four standard errors; the independent curve is off by up to 0.02 here."""
    k, bands, rows, bits = 128, 16, 6, 16
    per_seed, seeds = 75, 160
    rng = np.random.default_rng(size * 100 + shared)
    union = 2 * size - shared
    hits = 0
    for seed in range(seeds):
        elements = rng.integers(0, 2**64, size=(per_seed, union), dtype=np.uint64)
        sets = np.concatenate([elements[:, :size], elements[:, size - shared:]], axis=1)
        values = min_hash_values_oph(sets.ravel(), np.arange(0, 2 * per_seed * size + 1, size, dtype=np.int64), k,
                                     seed + 2) & np.uint64((1 << bits) - 1)
        agree = (values[0::2] == values[1::2])[:, : bands * rows].reshape(per_seed, bands, rows)
        hits += int(agree.all(axis=2).any(axis=1).sum())
    measured = hits / (per_seed * seeds)
    R = shared / union
    model = float(candidate_probability(R, bands, rows, bits, PairSizes(k, float(size), float(size))))
    error = math.sqrt(model * (1 - model) / (per_seed * seeds))
    assert abs(measured - model) < 4 * error


def test_the_banding_reaches_the_recall_for_the_shortest_documents() -> None:
    k, bits = 128, 16
    for threshold in (0.5, 0.8):
        plain = choose_banding_for_corpus(threshold, k, bits, 10_000)
        for shingles in (1, 4, 20, 100, 5000):
            sizes = PairSizes(k, float(shingles), float(shingles))
            banding = choose_banding_for_corpus(threshold, k, bits, 10_000, sizes=sizes)
            assert banding.recall_at(threshold, sizes) >= 0.99
            if shingles < 20:  # flatter curves ask for more bands of as many rows
                assert banding.bands > plain.bands and plain.recall_at(threshold, sizes) < 0.99
            if shingles >= 100:  # documents long enough: the independent permutations' banding
                assert banding == plain
        choice = resolve_banding(threshold, k, bits, 0.99, documents=10_000, sizes=PairSizes(k, 4.0, 4.0))
        assert choice.recall >= 0.99 and choice.sizes is not None


def test_find_chooses_its_banding_for_the_stores_shortest_documents() -> None:
    params = SignatureParams(num_perm=128, bits=16)
    options = dedup.FindOptions(threshold=0.8)
    assert shortest_sizes(params, 4) == PairSizes(128, 4.0, 4.0)
    assert shortest_sizes(dataclasses.replace(params, scheme="kperm"), 4) is None
    assert shortest_sizes(params, 0) is None  # not known: the documents' shingles were not counted
    xor = SignatureParams(num_perm=128, bits=1, xor_pairs=True)
    assert shortest_sizes(xor, 4) == PairSizes(256, 4.0, 4.0)  # 128 XOR bits of 256 bins
    short = find_banding(options, 0.8, params, 10_000, shortest=4)
    long = find_banding(options, 0.8, params, 10_000, shortest=500)
    assert short.banding.bands > long.banding.bands and short.recall >= 0.99
    plan = plan_find(options, params, 10_000, 10_000, None, 900, None, (), min_shingle_count=4)
    assert plan.banding == short.banding and plan.densification is not None and plan.densification.bins == 128


def test_plan_for_short_documents() -> None:
    base = dedup.plan(dedup.PlanOptions(threshold=0.8, bits=2))
    short = dedup.plan(dedup.PlanOptions(threshold=0.8, bits=2, shingles=5))
    kperm = dedup.plan(dedup.PlanOptions(threshold=0.8, bits=2, shingles=5, scheme="kperm"))
    assert (kperm.bands, kperm.rows, kperm.standard_error) == (base.bands, base.rows, base.standard_error)
    assert short.bands > base.bands and short.recall_at_threshold >= 0.99
    assert short.standard_error == pytest.approx(math.sqrt(float(densified_variance_2way(0.8, 5, 5, 2, 128))))
    assert short.standard_error > base.standard_error
    sizes = PairSizes(128, 5.0, 5.0)
    for resemblance, probability in short.curve:
        assert probability == pytest.approx(Banding(short.bands, short.rows, 16).recall_at(resemblance, sizes))
    assert base.pair_sizes is None and kperm.pair_sizes is None and short.pair_sizes == sizes
