"""Confidence intervals from the binomial law of the match count (Dembele & Lo 2017).

k·Ê_b ~ Binomial(k, E_b): a Wilson interval for E_b mapped through the 2-way estimator (Li & König 2010,
eq. 9) bounds R, and a Wilson interval for T mapped through eq. 25 does for b = 1/2; for three documents a score
interval on the variance of Theorem 3 of Li, König & Gui 2010. On densified one permutation hashing the count
varies φ times as much as a binomial's (:mod:`dedup_cli.estimates.densified`, eqs. D4–D6), and each end is the
score interval's with that variance: Wilson's with k/φ trials, φ taken at the end itself. See docs/estimators.md,
"Intervals".
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dedup_cli.estimates.densified import Densification, inflation_2way, inflation_half_bit
from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits, check_level, check_positive
from dedup_cli.estimates.half_bit import estimate_half_bit, half_bit_from_coefficients
from dedup_cli.estimates.three_way import estimate_3way, estimate_pairwise_sparse, variance_3way
from dedup_cli.estimates.two_way import coefficients_2way, estimate_2way


def wilson_interval(successes: ArrayLike, trials: ArrayLike, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval for a binomial proportion.

    p_hat = x/n, z = the (1 + level)/2 normal quantile;
    centre = (p_hat + z^2/(2n)) / (1 + z^2/n),
    half-width = z / (1 + z^2/n) * sqrt(p_hat (1 - p_hat)/n + z^2/(4 n^2)).

    Args:
        successes: int[...] x, 0 <= x <= n.
        trials: int[...] n > 0.
        level: confidence level in (0, 1).

    Returns:
        (low, high), float64[...] within [0, 1].
    """
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
    x = as_float(successes)
    n = check_positive(trials, "trials")
    if np.any(x < 0) or np.any(x > n):
        raise ValueError("successes must lie in [0, trials]; pass match counts, not fractions")
    low, high = _wilson_ends(x / n, n, z)
    return as_result(low), as_result(high)


def _wilson_ends(p_hat: np.ndarray, n: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's interval of a proportion ``p_hat`` observed in ``n`` trials (n real: an effective number)."""
    z2n = z * z / n
    centre = (p_hat + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * np.sqrt(p_hat * (1.0 - p_hat) / n + z2n / (4.0 * n))
    # exactly 0 (1) at p̂ = 0 (p̂ = 1), where centre - half cancels only up to rounding
    low = np.where(p_hat <= 0.0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(p_hat >= 1.0, 1.0, np.clip(centre + half, 0.0, 1.0))
    return low, high


def confidence_interval_2way(
    matches: ArrayLike,
    k: ArrayLike,
    r1: ArrayLike,
    r2: ArrayLike,
    bits: ArrayLike,
    level: float = 0.95,
    densification: Densification | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Confidence interval for the 2-way resemblance R from the match count.

    The count is binomial, matches ~ Binomial(k, E_b) (Dembele & Lo 2017); a Wilson interval for
    E_b is mapped through eq. 9 of Li & König 2010 (increasing in E_b), then clipped to [0, 1]. On densified
    one permutation hashing (``densification``) the count's variance is φ(R) times the binomial's (eq. D4,
    :func:`dedup_cli.estimates.densified.inflation_2way`, φ from the documents' sizes f = r·D), and each end is
    Wilson's with k/φ trials, φ at that end: the score interval of the variance of eq. D4.

    Args:
        matches: int[...] number of the k positions whose b-bit values agree.
        k: int[...] number of positions.
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.
        level: confidence level in (0, 1).
        densification: the bins the values come from, when made by one permutation hashing; None for k
            independent permutations.

    Returns:
        (low, high), float64[...] within [0, 1].
    """
    if densification is None:
        return _mapped_wilson(matches, k, level, lambda p: estimate_2way(p, r1, r2, bits))
    c1, c2 = (as_float(c) for c in coefficients_2way(r1, r2, bits))

    def estimator(p: FloatArray) -> FloatArray:
        return (p - c1) / (1.0 - c2)  # eq. 9, its coefficients computed once for every round

    f1, f2 = densification.set_sizes(r1), densification.set_sizes(r2)
    return _densified_wilson(matches, k, level, estimator,
                             lambda R: inflation_2way(R, f1, f2, bits, densification.bins))


def confidence_interval_half_bit(
    matches: ArrayLike,
    k: ArrayLike,
    r1: ArrayLike,
    r2: ArrayLike,
    level: float = 0.95,
    densification: Densification | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Confidence interval for R from the number of agreeing XOR bits (b = 1/2).

    As for the other 2-way estimators: the count is binomial, matches ~ Binomial(k, T) with T of eq. 23 of
    Li & König 2010, so a Wilson interval for T is mapped through eq. 25 (non-decreasing in T̂), then clipped
    to [0, 1]. No delta method is involved, so it keeps its coverage where eq. 26 is poor (T near 1/2, small
    k); an upper end T ≤ 1/2 maps to the estimator's floor.

    Args:
        matches: int[...] agreeing XOR bits.
        k: int[...] number of XOR bits.
        r1, r2: float64[...] set-size ratios f / D.
        level: confidence level in (0, 1).
        densification: the bins whose lowest bits were paired, when made by one permutation hashing: then T̂
            varies φ_T times as much (eq. D5) and each end is Wilson's with k/φ_T trials, φ_T at that end.

    Returns:
        (low, high), float64[...] within [0, 1].
    """
    if densification is None:
        return _mapped_wilson(matches, k, level, lambda p: estimate_half_bit(p, r1, r2))
    c1, c2 = coefficients_2way(r1, r2, 1)

    def estimator(p: FloatArray) -> FloatArray:
        return half_bit_from_coefficients(p, c1, c2)  # eq. 25, its coefficients computed once for every round

    f1, f2 = densification.set_sizes(r1), densification.set_sizes(r2)
    return _densified_wilson(matches, k, level, estimator,
                             lambda R: inflation_half_bit(R, f1, f2, densification.bins))


def _mapped_wilson(matches: ArrayLike, k: ArrayLike, level: float,
                   estimator: Callable[[FloatArray], ArrayLike]) -> tuple[FloatArray, FloatArray]:
    """The Wilson interval of a binomial match fraction mapped through a non-decreasing ``estimator`` of R, and
    clipped to [0, 1]: the interval of both 2-way estimators (b-bit and b = 1/2)."""
    low, high = wilson_interval(matches, k, level)
    r_low = np.clip(as_float(estimator(low)), 0.0, 1.0)
    r_high = np.clip(as_float(estimator(high)), 0.0, 1.0)
    return as_result(r_low), as_result(r_high)


# Rounds of the fixed point of :func:`_densified_wilson`, from the binomial interval: each round brings the ends
# about ten times closer to the score interval's (φ changes little over an interval); after four they are within
# 10^-4 of it for any count, k = 128 and documents of 1 to 400 shingles (tests/estimates/test_densified.py).
_FIXED_POINT_ROUNDS = 4


def _densified_wilson(matches: ArrayLike, k: ArrayLike, level: float, estimator: Callable[[FloatArray], ArrayLike],
                      inflation: Callable[[FloatArray], ArrayLike]) -> tuple[FloatArray, FloatArray]:
    """Each end of the interval of R for a match count whose variance is φ(R) times the binomial's: the R where the
    observed fraction lies z standard deviations from E(R), i.e. Wilson's end with k/φ trials at φ of that end
    (a fixed point, reached from the binomial interval in :data:`_FIXED_POINT_ROUNDS` rounds), mapped through the
    non-decreasing ``estimator`` and clipped to [0, 1]."""
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
    x = as_float(matches)
    n = check_positive(k)
    if np.any(x < 0) or np.any(x > n):
        raise ValueError("successes must lie in [0, trials]; pass match counts, not fractions")
    fraction = np.broadcast_to(x / n, np.broadcast_shapes(np.shape(x), np.shape(n)))
    low, high = _wilson_ends(fraction, n, z)
    for _ in range(_FIXED_POINT_ROUNDS):
        at_low = as_float(inflation(np.clip(as_float(estimator(low)), 0.0, 1.0)))
        at_high = as_float(inflation(np.clip(as_float(estimator(high)), 0.0, 1.0)))
        low = _wilson_ends(fraction, n / at_low, z)[0]
        high = _wilson_ends(fraction, n / at_high, z)[1]
    r_low = np.clip(as_float(estimator(low)), 0.0, 1.0)
    r_high = np.clip(as_float(estimator(high)), 0.0, 1.0)
    return as_result(r_low), as_result(r_high)


def confidence_interval_3way(
    matches123: ArrayLike,
    matches12: ArrayLike,
    matches13: ArrayLike,
    matches23: ArrayLike,
    k: ArrayLike,
    bits: ArrayLike,
    level: float = 0.95,
    sharing: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Confidence interval for the sparse 3-way resemblance R from the match counts.

    A score interval on Theorem 3 of Li, König & Gui 2010 (eq. 9): the set of R for which the observed
    R̂_b (eq. 8) lies within z standard deviations, {R : (R̂ − R)² ≤ z² Var(R, T̂)}, with T̂ the sum of the
    pairwise estimates (kept ≥ 3R, since every R_ij ≥ R). Unlike a plug-in (Wald) interval it does not
    collapse to a point at R̂ = 0 or 1, and unlike a binomial interval for P_b alone it accounts for the
    pairwise fractions' noise, which partly cancels in eq. 8. Each end is found by vectorised bisection.

    Args:
        matches123: int[...] positions where all three b-bit values agree.
        matches12, matches13, matches23: int[...] pairwise agreements over the same positions.
        k: int[...] number of positions.
        bits: int or int[...] b, 2..64.
        level: confidence level in (0, 1).
        sharing: float64[...] ψ(n_123, k) of each triple's union when the values come from densified one
            permutation hashing: the variance is then eq. 9 + (ψ − 1) R (1 − R)/k (eq. D6,
            :mod:`dedup_cli.estimates.densified`); None for k independent permutations.

    Returns:
        (low, high), float64[...] within [0, 1].

    Raises:
        ValueError: if any ``bits`` < 2.
    """
    b = check_bits(bits, minimum=2)
    n = check_positive(k)
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
    p123 = as_float(matches123) / n
    p12, p13, p23 = as_float(matches12) / n, as_float(matches13) / n, as_float(matches23) / n
    centre = np.clip(as_float(estimate_3way(p123, p12, p13, p23, b)), 0.0, 1.0)
    total = np.clip(sum(as_float(estimate_pairwise_sparse(p, b)) for p in (p12, p13, p23)), 0.0, 3.0)

    shared = 0.0 if sharing is None else as_float(sharing) - 1.0

    def outside(resemblance: FloatArray) -> NDArray[np.bool_]:
        spread = as_float(variance_3way(resemblance, np.maximum(total, 3.0 * resemblance), b, n))
        spread = spread + shared * resemblance * (1.0 - resemblance) / n
        return (centre - resemblance) ** 2 > z * z * np.maximum(spread, 0.0)

    def boundary(inside: FloatArray, far: FloatArray) -> FloatArray:
        # Bisection between a point inside the interval (the estimate) and one beyond it (0 or 1).
        for _ in range(50):
            middle = 0.5 * (inside + far)
            is_outside = outside(middle)
            far = np.where(is_outside, middle, far)
            inside = np.where(is_outside, inside, middle)
        return inside

    zeros, ones = np.zeros_like(centre), np.ones_like(centre)
    r_low = np.where(outside(zeros), boundary(centre.copy(), zeros), zeros)
    r_high = np.where(outside(ones), boundary(centre.copy(), ones), ones)
    return as_result(r_low), as_result(r_high)

