"""The 2-way b-bit estimator (Li & König, "b-Bit Minwise Hashing", WWW 2010, eqs. 4-12 and 25-26).

E_b = C_1,b + (1 − C_2,b) R is the probability that the lowest b bits of two minima agree (Theorem 1);
inverting it gives the unbiased estimate R̂_b of eq. 9 with the variance of eq. 11. See docs/estimators.md.

Notation: ``r = f / D`` is a set's size over the universe size (``f / 2**64`` for hashed text shingles, so
effectively 0), ``bits`` is b, ``k`` the number of permutations (signature positions), ``R`` a resemblance.
Every function is vectorised (:mod:`dedup_cli.estimates.guards`): no loop runs over pairs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits, check_positive, check_ratio


def a_coefficient(r: ArrayLike, bits: ArrayLike) -> FloatArray:
    """A_{j,b} = r (1 - r)^(2^b - 1) / (1 - (1 - r)^(2^b))  (Li & König 2010, eq. 7).

    Args:
        r: float64[...] set-size ratio f / D in [0, 1].
        bits: int or int[...] b, 1..64; broadcasts against ``r``.

    Returns:
        float64[...] A_{j,b} in [0, 1/2^b]. The limit r -> 0 is 1/2^b (eq. 8) and r = 0 gives it
        exactly; A -> 0 for large b at any non-negligible r, so b >= 32 behaves as the full-width
        estimator.

    With x = -log1p(-r) (so 1 - r = e^-x) and n = 2^b this is evaluated as
    ``(1/n) * (r/x) * exp(-(n-1) x) * (n x) / -expm1(-n x)``: every factor is 1 at r = 0 and none
    cancels catastrophically, so r = 1e-19 (a shingle set over D = 2^64) gives 1/2^b to full
    precision and n = 2^64 neither overflows nor warns.
    """
    ratio = check_ratio(r)
    b = check_bits(bits)
    n = np.ldexp(1.0, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        x = -np.log1p(-ratio)  # +inf at r = 1
        r_over_x = np.where(x > 0, ratio / x, 1.0)  # -> 1 as r -> 0
        nx = n * x
        nx_over_expm1 = np.where(nx > 0, nx / -np.expm1(-nx), 1.0)  # -> 1 as n x -> 0
        power = np.exp(-(n - 1.0) * x)  # (1 - r)^(n - 1)
        a = r_over_x * power * nx_over_expm1 / n
        a = np.where(np.isinf(x), 0.0, a)  # r = 1: (1 - r)^(n - 1) = 0 for n >= 2
    return as_result(a)


def coefficients_2way(r1: ArrayLike, r2: ArrayLike, bits: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """C_{1,b} and C_{2,b} of Theorem 1 (Li & König 2010, eqs. 5 and 6; eq. 6 as in Appendix A).

    C1 = A1 r2/(r1 + r2) + A2 r1/(r1 + r2),  C2 = A1 r1/(r1 + r2) + A2 r2/(r1 + r2),
    with A_j = ``a_coefficient(r_j, bits)``; when r1 + r2 = 0 both weights are 1/2.

    Args:
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.

    Returns:
        (C1, C2), each float64[...] in [0, 1/2^b].
    """
    ratio1 = check_ratio(r1, "r1")
    ratio2 = check_ratio(r2, "r2")
    a1 = as_float(a_coefficient(ratio1, bits))
    a2 = as_float(a_coefficient(ratio2, bits))
    total = ratio1 + ratio2
    safe_total = np.where(total > 0, total, 1.0)
    weight1 = np.where(total > 0, ratio1 / safe_total, 0.5)
    weight2 = np.where(total > 0, ratio2 / safe_total, 0.5)
    c1 = a1 * weight2 + a2 * weight1
    c2 = a1 * weight1 + a2 * weight2
    return as_result(c1), as_result(c2)


def expected_match_2way(R: ArrayLike, r1: ArrayLike, r2: ArrayLike, bits: ArrayLike) -> FloatArray:
    """E_b = Pr(the b low bits of the two minima agree) = C1 + (1 - C2) R (Li & König 2010, eq. 4).

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] E_b.
    """
    c1, c2 = coefficients_2way(r1, r2, bits)
    return as_result(c1 + (1.0 - c2) * as_float(R))


def estimate_2way(match_fraction: ArrayLike, r1: ArrayLike, r2: ArrayLike, bits: ArrayLike) -> FloatArray:
    """Unbiased resemblance estimate R_hat_b = (E_hat_b - C1) / (1 - C2) (Li & König 2010, eq. 9).

    The estimate is NOT clipped: a match fraction below C1 gives R_hat < 0 (and above
    C1 + 1 - C2 gives R_hat > 1). Clipping would bias it; clip for display, not for averaging.
    It is strictly increasing in ``match_fraction`` (1 - C2 >= 1/2) and symmetric in (r1, r2).
    With r1 = r2 = 0 it is the sparse estimator (2^b E_hat - 1) / (2^b - 1); with bits >= 32 it is
    E_hat itself to double precision (the full-width estimator, eq. 2).

    Args:
        match_fraction: float64[...] E_hat_b, the fraction of the k positions whose b-bit values
            are equal (eq. 10).
        r1, r2: float64[...] set-size ratios f / D (0 for hashed text shingles).
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] R_hat_b.
    """
    c1, c2 = coefficients_2way(r1, r2, bits)
    return as_result((as_float(match_fraction) - c1) / (1.0 - c2))


def variance_2way(R: ArrayLike, r1: ArrayLike, r2: ArrayLike, bits: ArrayLike, k: ArrayLike) -> FloatArray:
    """Var(R_hat_b) = E_b (1 - E_b) / (k (1 - C2)^2) (Li & König 2010, eq. 11).

    Args:
        R: float64[...] resemblance (the true one; see ``standard_error_2way`` for a plug-in).
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.
        k: int or int[...] number of positions (permutations).

    Returns:
        float64[...] variance; R(1 - R)/k for bits >= 32 (eq. 3).
    """
    c1, c2 = coefficients_2way(r1, r2, bits)
    expected = c1 + (1.0 - c2) * as_float(R)
    return as_result(expected * (1.0 - expected) / (check_positive(k) * (1.0 - c2) ** 2))


def standard_error_2way(
    match_fraction: ArrayLike, r1: ArrayLike, r2: ArrayLike, bits: ArrayLike, k: ArrayLike
) -> FloatArray:
    """Plug-in standard error sqrt(Var(R_hat_b)) at R = clip(R_hat_b, 0, 1) (Li & König 2010, eqs. 9, 11).

    Args:
        match_fraction: float64[...] E_hat_b.
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.
        k: int or int[...] number of positions.

    Returns:
        float64[...] standard error of R_hat_b.
    """
    estimate = np.clip(as_float(estimate_2way(match_fraction, r1, r2, bits)), 0.0, 1.0)
    return as_result(np.sqrt(as_float(variance_2way(estimate, r1, r2, bits, k))))


def storage_factor(R: ArrayLike, r1: ArrayLike, r2: ArrayLike, bits: ArrayLike) -> FloatArray:
    """Storage factor B(b; R, r1, r2) = b k Var(R_hat_b) (Li & König 2010, eq. 12; k cancels).

    B(b1)/B(b2) is the space saved by storing b2 bits instead of b1 at equal accuracy, e.g.
    B(64)/B(1) = 64/3 = 21.3 at r -> 0, R = 0.5. The general form is used, so unbalanced pairs
    (r1 != r2) are right, unlike the r1 = r2 shortcut of eq. 15.

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] B(b).
    """
    b = check_bits(bits)
    return as_result(b * as_float(variance_2way(R, r1, r2, b, 1)))
