"""The "b = 1/2" estimator: 1-bit values of two permutations combined by XOR (Li & König 2010, Sec. 5.3).

Of two documents' lowest bits e_j at permutations j and j' the XOR x = e_j ⊕ e_j' is stored, one bit for two
permutations. The XOR bits of the two documents agree with probability T = E_1² + (1 − E_1)² (eq. 23), E_1 the
1-bit match probability of eq. 4; solving for E_1 ≥ 1/2 (the + root of eq. 24) gives R̂_1/2 (eq. 25), with the
asymptotic variance of eq. 26. Per stored bit it is more accurate than b = 1 above R ≈ 0.5774 (sparse limit)
and twice as accurate as R → 1 (eq. 27). See docs/estimators.md, "b = 1/2".

Notation: ``k`` is the number of XOR bits (half the permutations combined), ``r = f / D`` a set-size ratio.
Every function is vectorised.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_positive
from dedup_cli.estimates.two_way import coefficients_2way, expected_match_2way

# b = 1/2 wherever a b is passed along: half a stored bit per permutation. The command line spells it 1/2 or 0.5.
HALF_BIT = 0.5


def is_half_bit(bits: float | None) -> bool:
    """Whether ``bits`` is b = 1/2 (:data:`HALF_BIT`)."""
    return bits is not None and float(bits) == HALF_BIT


def expected_xor_match(R: ArrayLike, r1: ArrayLike, r2: ArrayLike) -> FloatArray:
    """T = Pr(the XOR bits agree) = E_1² + (1 − E_1)² (Li & König 2010, eq. 23), E_1 of eq. 4 with b = 1.

    The two permutations are independent, so the XOR bits agree when both 1-bit values agree or both differ.
    In the sparse limit T = (1 + R²)/2.

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.

    Returns:
        float64[...] T in [1/2, 1].
    """
    e1 = as_float(expected_match_2way(R, r1, r2, 1))
    return as_result(e1 * e1 + (1.0 - e1) ** 2)


def estimate_half_bit(match_fraction: ArrayLike, r1: ArrayLike, r2: ArrayLike) -> FloatArray:
    """R̂_1/2 = (sqrt(max(2 T̂ − 1, 0)) + 1 − 2 C_1,1) / (2 − 2 C_2,1) (Li & König 2010, eq. 25).

    T̂ is the fraction of the XOR bits that agree. The + root of eq. 24 assumes E_1 ≥ 1/2, which holds for
    every R ≥ 0 in the sparse limit; a T̂ below 1/2 (possible by chance) is truncated to 1/2, the estimate's
    floor. Unlike eq. 9 the estimator is biased, at O(1/k) (the square root is concave), and is not clipped
    above. It is non-decreasing in T̂, so a confidence interval for T maps to one for R.

    Args:
        match_fraction: float64[...] T̂, agreeing XOR bits over the k XOR bits.
        r1, r2: float64[...] set-size ratios f / D (0 for hashed text shingles).

    Returns:
        float64[...] R̂_1/2, at least (1 − 2 C_1,1)/(2 − 2 C_2,1) (0 in the sparse limit).
    """
    c1, c2 = coefficients_2way(r1, r2, 1)
    return half_bit_from_coefficients(match_fraction, c1, c2)


def half_bit_from_coefficients(match_fraction: ArrayLike, c1: ArrayLike, c2: ArrayLike) -> FloatArray:
    """Eq. 25 given C_1,1 and C_2,1 (:func:`dedup_cli.estimates.two_way.coefficients_2way` at b = 1), for callers
    that evaluate it at many T̂ for the same pairs."""
    root = np.sqrt(np.maximum(2.0 * as_float(match_fraction) - 1.0, 0.0))
    return as_result((root + 1.0 - 2.0 * as_float(c1)) / (2.0 - 2.0 * as_float(c2)))


def variance_half_bit(R: ArrayLike, r1: ArrayLike, r2: ArrayLike, k: ArrayLike) -> FloatArray:
    """Var(R̂_1/2) ≈ T (1 − T) / (4 k (1 − C_2,1)² (2T − 1)) (Li & König 2010, eq. 26).

    The delta method applied to eq. 25 with k T̂ ~ Binomial(k, T): exact as k → ∞, with an O(1/k²) error. It
    is infinite where 2T − 1 = 0 (E_1 = 1/2: R = 0 in the sparse limit) and poor near it, where the square
    root of eq. 25 is far from linear over T̂'s spread.

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.
        k: int or int[...] number of XOR bits (each combines two permutations).

    Returns:
        float64[...] variance.
    """
    _, c2 = coefficients_2way(r1, r2, 1)
    t = as_float(expected_xor_match(R, r1, r2))
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = t * (1.0 - t) / (4.0 * check_positive(k) * (1.0 - c2) ** 2 * (2.0 * t - 1.0))
    return as_result(np.where(2.0 * t - 1.0 > 0.0, variance, np.inf))


def standard_error_half_bit(match_fraction: ArrayLike, r1: ArrayLike, r2: ArrayLike, k: ArrayLike) -> FloatArray:
    """Plug-in standard error sqrt(Var(R̂_1/2)) at R = clip(R̂_1/2, 0, 1) (Li & König 2010, eqs. 25, 26).

    Args:
        match_fraction: float64[...] T̂.
        r1, r2: float64[...] set-size ratios f / D.
        k: int or int[...] number of XOR bits.

    Returns:
        float64[...] standard error; infinite where R̂_1/2 = 0 (T̂ ≤ 1/2 in the sparse limit).
    """
    estimate = np.clip(as_float(estimate_half_bit(match_fraction, r1, r2)), 0.0, 1.0)
    return as_result(np.sqrt(as_float(variance_half_bit(estimate, r1, r2, k))))


def storage_factor_half_bit(R: ArrayLike, r1: ArrayLike, r2: ArrayLike) -> FloatArray:
    """Storage factor of b = 1/2: (1/2) · (2k) · Var(R̂_1/2) with 2k permutations, i.e. k Var(R̂_1/2) for k
    stored bits (Li & König 2010, eq. 12 extended: bits a permutation times the variance at one permutation).

    Comparable with :func:`dedup_cli.estimates.two_way.storage_factor`: B(1)/B(1/2) > 1 means b = 1/2 stores
    less for the same accuracy; in the sparse limit that holds above R ≈ 0.5774 (eq. 27).

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.

    Returns:
        float64[...] B(1/2).
    """
    return as_result(as_float(variance_half_bit(R, r1, r2, 1)))
