"""Resemblance estimators for b-bit minwise hashing: 2-way, 3-way, variances and intervals.

Everything here is pure numpy and vectorised: each function takes array-likes, broadcasts them
against each other and returns float64 (a numpy float64 scalar when every input is a scalar, as
numpy's own ufuncs do). No loop runs over pairs or triples.

Notation follows the SPEC and the papers: ``r = f / D`` is a set's size over the universe size
(``f / 2**64`` for hashed text shingles, so effectively 0), ``bits`` is b, ``k`` the number of
permutations (signature positions), ``R`` a resemblance, ``T = R12 + R13 + R23``.

- Li & König, "b-Bit Minwise Hashing", WWW 2010: 2-way, eqs. 4-12 and 25-26.
- Li, König & Gui, "b-Bit Minwise Hashing for Estimating Three-Way Similarities", NIPS 2010:
  3-way, eqs. 7-9 (Theorems 2 and 3) and the dense-data procedure of its Sec. 4.
- Dembele & Lo 2017: the match count is binomial, ``k * E_hat ~ Binomial(k, E_b)``, which gives
  the confidence intervals.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import UsageError

FloatArray = NDArray[np.float64]

__all__ = [
    "a_coefficient",
    "coefficients_2way",
    "expected_match_2way",
    "estimate_2way",
    "variance_2way",
    "standard_error_2way",
    "storage_factor",
    "estimate_half_bit",
    "variance_half_bit",
    "expected_match_3way",
    "estimate_3way",
    "variance_3way",
    "estimate_pairwise_sparse",
    "estimate_3way_dense",
    "wilson_interval",
    "confidence_interval_2way",
    "confidence_interval_3way",
    "exact_resemblance",
]

MAX_BITS = 64


def _float(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def _result(x: ArrayLike) -> FloatArray:
    # A float64 array, or a numpy float64 scalar for 0-d results (the ufunc convention).
    return np.asarray(x, dtype=np.float64)[()]


def _bits(bits: ArrayLike, minimum: int = 1) -> NDArray[np.int64]:
    """Validate ``bits`` (int or array of ints) and return it as int64."""
    array = np.asarray(bits)
    if array.dtype.kind not in "iu":
        as_float = np.asarray(array, dtype=np.float64)
        if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise UsageError(f"bits must be whole numbers, got {bits!r}; pass --bits as an integer")
        array = as_float
    array = array.astype(np.int64)
    if np.any(array < minimum) or np.any(array > MAX_BITS):
        if minimum >= 2 and np.any(array < 2):
            raise UsageError(
                "3-way estimation needs --bits 2 or more; 1-bit values carry no 3-way information"
            )
        raise UsageError(f"bits must lie in {minimum}..{MAX_BITS}, got {bits!r}; choose --bits in that range")
    return array


def _ratio(r: ArrayLike, name: str = "r") -> FloatArray:
    """Validate a set-size ratio ``r = f / D`` in [0, 1] (NaN passes through)."""
    array = _float(r)
    if np.any(array < 0.0) or np.any(array > 1.0):
        raise UsageError(f"{name} = f / D must lie in [0, 1]; pass the set size divided by the universe size")
    return array


def _positive(k: ArrayLike, name: str = "k") -> FloatArray:
    array = _float(k)
    if np.any(array <= 0):
        raise UsageError(f"{name} must be positive; pass the number of signature positions (--num-perm)")
    return array


def _level(level: float) -> float:
    if not 0.0 < float(level) < 1.0:
        raise UsageError(f"confidence level must lie strictly between 0 and 1, got {level!r}; e.g. 0.95")
    return float(level)


# ----------------------------------------------------------------------------------------------
# 2-way, Li & König 2010
# ----------------------------------------------------------------------------------------------


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
    ratio = _ratio(r)
    b = _bits(bits)
    n = np.ldexp(1.0, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        x = -np.log1p(-ratio)  # +inf at r = 1
        r_over_x = np.where(x > 0, ratio / x, 1.0)  # -> 1 as r -> 0
        nx = n * x
        nx_over_expm1 = np.where(nx > 0, nx / -np.expm1(-nx), 1.0)  # -> 1 as n x -> 0
        power = np.exp(-(n - 1.0) * x)  # (1 - r)^(n - 1)
        a = r_over_x * power * nx_over_expm1 / n
        a = np.where(np.isinf(x), 0.0, a)  # r = 1: (1 - r)^(n - 1) = 0 for n >= 2
    return _result(a)


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
    ratio1 = _ratio(r1, "r1")
    ratio2 = _ratio(r2, "r2")
    a1 = _float(a_coefficient(ratio1, bits))
    a2 = _float(a_coefficient(ratio2, bits))
    total = ratio1 + ratio2
    safe_total = np.where(total > 0, total, 1.0)
    weight1 = np.where(total > 0, ratio1 / safe_total, 0.5)
    weight2 = np.where(total > 0, ratio2 / safe_total, 0.5)
    c1 = a1 * weight2 + a2 * weight1
    c2 = a1 * weight1 + a2 * weight2
    return _result(c1), _result(c2)


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
    return _result(c1 + (1.0 - c2) * _float(R))


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
    return _result((_float(match_fraction) - c1) / (1.0 - c2))


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
    expected = c1 + (1.0 - c2) * _float(R)
    return _result(expected * (1.0 - expected) / (_positive(k) * (1.0 - c2) ** 2))


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
    estimate = np.clip(_float(estimate_2way(match_fraction, r1, r2, bits)), 0.0, 1.0)
    return _result(np.sqrt(_float(variance_2way(estimate, r1, r2, bits, k))))


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
    b = _bits(bits)
    return _result(b * _float(variance_2way(R, r1, r2, b, 1)))


def estimate_half_bit(match_fraction: ArrayLike, r1: ArrayLike, r2: ArrayLike) -> FloatArray:
    """The "b = 1/2" estimator from XOR-combined 1-bit values (Li & König 2010, eq. 25).

    R_hat_1/2 = (sqrt(max(2 T_hat - 1, 0)) + 1 - 2 C_{1,1}) / (2 - 2 C_{2,1}), where T_hat is the
    fraction of equal x = e(pi_1) XOR e(pi_2). It takes the + root of eq. 24, which assumes
    E_1 >= 1/2, and is biased at small k (truncation and nonlinearity). Worth it only for high R
    (R > 0.5774 in the sparse limit).

    Args:
        match_fraction: float64[...] T_hat.
        r1, r2: float64[...] set-size ratios f / D.

    Returns:
        float64[...] R_hat_1/2 (not clipped above; at least (1 - 2 C1)/(2 - 2 C2)).
    """
    c1, c2 = coefficients_2way(r1, r2, 1)
    root = np.sqrt(np.maximum(2.0 * _float(match_fraction) - 1.0, 0.0))
    return _result((root + 1.0 - 2.0 * c1) / (2.0 - 2.0 * c2))


def variance_half_bit(R: ArrayLike, r1: ArrayLike, r2: ArrayLike, k: ArrayLike) -> FloatArray:
    """Asymptotic Var(R_hat_1/2) = T (1 - T) / (4 k (1 - C_{2,1})^2 (2T - 1)) (Li & König 2010, eq. 26).

    T = E_1^2 + (1 - E_1)^2 (eq. 23). Here ``k`` is the number of stored bits (each uses two
    permutations). Delta method, O(1/k^2) error; infinite where E_1 = 1/2.

    Args:
        R: float64[...] resemblance.
        r1, r2: float64[...] set-size ratios f / D.
        k: int or int[...] number of stored XOR bits.

    Returns:
        float64[...] variance.
    """
    _, c2 = coefficients_2way(r1, r2, 1)
    e1 = _float(expected_match_2way(R, r1, r2, 1))
    t = e1**2 + (1.0 - e1) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = t * (1.0 - t) / (4.0 * _positive(k) * (1.0 - c2) ** 2 * (2.0 * t - 1.0))
    return _result(variance)


# ----------------------------------------------------------------------------------------------
# 3-way, Li, König & Gui 2010 (sparse data, r_i -> 0, unless stated)
# ----------------------------------------------------------------------------------------------


def expected_match_3way(R: ArrayLike, T: ArrayLike, bits: ArrayLike) -> FloatArray:
    """P_b = [(2^b - 1)(2^b - 2) R + (2^b - 1) T + 1] / 4^b (Li, König & Gui 2010, eq. 7).

    Sparse limit (Theorem 2). Evaluated with q = 2^-b as (1-q)(1-2q) R + q(1-q) T + q^2, which is
    exact in floating point up to b = 64. b = 1 is allowed here and gives (1 + T)/4, which does not
    depend on R: that is why the 3-way estimators need bits >= 2.

    Args:
        R: float64[...] 3-way resemblance.
        T: float64[...] R12 + R13 + R23.
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] Pr(all three b-bit values agree).
    """
    q = np.ldexp(1.0, -_bits(bits))
    return _result((1.0 - q) * (1.0 - 2.0 * q) * _float(R) + q * (1.0 - q) * _float(T) + q * q)


def estimate_3way(
    p123: ArrayLike, p12: ArrayLike, p13: ArrayLike, p23: ArrayLike, bits: ArrayLike
) -> FloatArray:
    """Sparse 3-way estimate R_hat_b = (4^b P_b - 2^b (P12 + P13 + P23) + 2) / ((2^b-1)(2^b-2)).

    Li, König & Gui 2010, eq. 8 (Alg. 1), unbiased as r_i -> 0 (Theorem 3); biased for dense
    sets (r ~ 0.5), where ``estimate_3way_dense`` is the right tool. Not clipped.

    Args:
        p123: float64[...] fraction of positions where all three b-bit values agree.
        p12, p13, p23: float64[...] pairwise match fractions from the same positions.
        bits: int or int[...] b, 2..64.

    Returns:
        float64[...] R_hat_b.

    Raises:
        UsageError: if any ``bits`` < 2.
    """
    q = np.ldexp(1.0, -_bits(bits, minimum=2))
    pairs = _float(p12) + _float(p13) + _float(p23)
    numerator = _float(p123) - q * pairs + 2.0 * q * q
    return _result(numerator / ((1.0 - q) * (1.0 - 2.0 * q)))


def variance_3way(R: ArrayLike, T: ArrayLike, bits: ArrayLike, k: ArrayLike) -> FloatArray:
    """Var(R_hat_b) of the sparse 3-way estimator (Li, König & Gui 2010, Theorem 3, eq. 9).

    [1 + (2^b - 3) T + (4^b - 6 2^b + 10) R - (2^b - 1)(2^b - 2) R^2] / (k (2^b - 1)(2^b - 2));
    b = 2 gives (1 + T + 2R - 6R^2)/(6k), b -> infinity gives R(1 - R)/k.

    Args:
        R: float64[...] 3-way resemblance.
        T: float64[...] R12 + R13 + R23.
        bits: int or int[...] b, 2..64.
        k: int or int[...] number of positions.

    Returns:
        float64[...] variance.

    Raises:
        UsageError: if any ``bits`` < 2.
    """
    q = np.ldexp(1.0, -_bits(bits, minimum=2))
    resemblance = _float(R)
    denominator = (1.0 - q) * (1.0 - 2.0 * q)
    numerator = (
        q * q
        + (q - 3.0 * q * q) * _float(T)
        + (1.0 - 6.0 * q + 10.0 * q * q) * resemblance
        - denominator * resemblance**2
    )
    return _result(numerator / (_positive(k) * denominator))


def estimate_pairwise_sparse(p_ij: ArrayLike, bits: ArrayLike) -> FloatArray:
    """Sparse pairwise estimate R_hat_ij = (2^b P_ij - 1) / (2^b - 1) (Li, König & Gui 2010, Alg. 1 step 4).

    The r -> 0 limit of Li & König 2010, eq. 9 (C1 = C2 = 1/2^b); any b >= 1 is valid.

    Args:
        p_ij: float64[...] pairwise match fraction.
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] R_hat_ij, not clipped.
    """
    q = np.ldexp(1.0, -_bits(bits))
    return _result((_float(p_ij) - q) / (1.0 - q))


def estimate_3way_dense(
    p123: ArrayLike,
    p12: ArrayLike,
    p13: ArrayLike,
    p23: ArrayLike,
    r1: ArrayLike,
    r2: ArrayLike,
    r3: ArrayLike,
    bits: ArrayLike,
) -> FloatArray:
    """3-way resemblance for dense sets by the precise procedure (Li, König & Gui 2010, Sec. 4).

    1. Each pair: R_hat_ij from the precise 2-way estimator (Li & König 2010, eq. 9), clipped to
       [0, 1], converted to s_ij = a_ij / D = R_hat_ij / (1 + R_hat_ij) (r_i + r_j) and clipped to
       the feasible [max(0, r_i + r_j - 1), min(r_i, r_j)].
    2. s = a / D solves P_b(r1, r2, r3, s12, s13, s23, s) = p123, with P_b the exact large-D
       probability (SPEC, 3-way "Dense data"), by ``collisions.solve_3way_intersection``.
    3. R_hat = s / (r1 + r2 + r3 - s12 - s13 - s23 + s), 0 where that union is empty.

    Returns R_hat (not s). Consistent, asymptotically unbiased (the plug-in s_ij make it biased at
    O(1/k)); for r_i -> 0 it agrees with ``estimate_3way``.

    Args:
        p123: float64[...] fraction of positions where all three b-bit values agree.
        p12, p13, p23: float64[...] pairwise match fractions.
        r1, r2, r3: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 2..64.

    Returns:
        float64[...] R_hat, the 3-way resemblance estimate.

    Raises:
        UsageError: if any ``bits`` < 2.
    """
    b = _bits(bits, minimum=2)  # validate before the import: a bad --bits is the user's error

    from .collisions import solve_3way_intersection  # imported lazily: a sibling module

    ratio1, ratio2, ratio3 = _ratio(r1, "r1"), _ratio(r2, "r2"), _ratio(r3, "r3")

    def intersection(p_ij: ArrayLike, ri: FloatArray, rj: FloatArray) -> FloatArray:
        resemblance = np.clip(_float(estimate_2way(p_ij, ri, rj, b)), 0.0, 1.0)
        s_ij = resemblance / (1.0 + resemblance) * (ri + rj)
        return np.clip(s_ij, np.maximum(0.0, ri + rj - 1.0), np.minimum(ri, rj))

    s12 = intersection(p12, ratio1, ratio2)
    s13 = intersection(p13, ratio1, ratio3)
    s23 = intersection(p23, ratio2, ratio3)
    s = _float(solve_3way_intersection(_float(p123), ratio1, ratio2, ratio3, s12, s13, s23, b))
    union = ratio1 + ratio2 + ratio3 - s12 - s13 - s23 + s
    with np.errstate(divide="ignore", invalid="ignore"):
        resemblance = np.where(union > 0, s / np.where(union > 0, union, 1.0), 0.0)
    return _result(resemblance)


# ----------------------------------------------------------------------------------------------
# Confidence intervals from the binomial law of the match count (Dembele & Lo 2017)
# ----------------------------------------------------------------------------------------------


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
    z = NormalDist().inv_cdf(0.5 + _level(level) / 2.0)
    x = _float(successes)
    n = _positive(trials, "trials")
    if np.any(x < 0) or np.any(x > n):
        raise UsageError("successes must lie in [0, trials]; pass match counts, not fractions")
    p_hat = x / n
    z2n = z * z / n
    centre = (p_hat + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * np.sqrt(p_hat * (1.0 - p_hat) / n + z2n / (4.0 * n))
    # exactly 0 (1) at x = 0 (x = n), where centre - half cancels only up to rounding
    low = np.where(x == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    high = np.where(x == n, 1.0, np.clip(centre + half, 0.0, 1.0))
    return _result(low), _result(high)


def confidence_interval_2way(
    matches: ArrayLike,
    k: ArrayLike,
    r1: ArrayLike,
    r2: ArrayLike,
    bits: ArrayLike,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray]:
    """Confidence interval for the 2-way resemblance R from the match count.

    The count is binomial, matches ~ Binomial(k, E_b) (Dembele & Lo 2017); a Wilson interval for
    E_b is mapped through eq. 9 of Li & König 2010 (increasing in E_b), then clipped to [0, 1].

    Args:
        matches: int[...] number of the k positions whose b-bit values agree.
        k: int[...] number of positions.
        r1, r2: float64[...] set-size ratios f / D.
        bits: int or int[...] b, 1..64.
        level: confidence level in (0, 1).

    Returns:
        (low, high), float64[...] within [0, 1].
    """
    low, high = wilson_interval(matches, k, level)
    r_low = np.clip(_float(estimate_2way(low, r1, r2, bits)), 0.0, 1.0)
    r_high = np.clip(_float(estimate_2way(high, r1, r2, bits)), 0.0, 1.0)
    return _result(r_low), _result(r_high)


def confidence_interval_3way(
    matches123: ArrayLike,
    matches12: ArrayLike,
    matches13: ArrayLike,
    matches23: ArrayLike,
    k: ArrayLike,
    bits: ArrayLike,
    level: float = 0.95,
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

    Returns:
        (low, high), float64[...] within [0, 1].

    Raises:
        UsageError: if any ``bits`` < 2.
    """
    b = _bits(bits, minimum=2)
    n = _positive(k)
    z = NormalDist().inv_cdf(0.5 + _level(level) / 2.0)
    p123 = _float(matches123) / n
    p12, p13, p23 = _float(matches12) / n, _float(matches13) / n, _float(matches23) / n
    centre = np.clip(_float(estimate_3way(p123, p12, p13, p23, b)), 0.0, 1.0)
    total = np.clip(sum(_float(estimate_pairwise_sparse(p, b)) for p in (p12, p13, p23)), 0.0, 3.0)

    def outside(resemblance: FloatArray) -> NDArray[np.bool_]:
        spread = _float(variance_3way(resemblance, np.maximum(total, 3.0 * resemblance), b, n))
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
    return _result(r_low), _result(r_high)


# ----------------------------------------------------------------------------------------------
# Exact resemblance, for checks of candidate pairs and for tests
# ----------------------------------------------------------------------------------------------


def _as_unique_array(values: Any) -> NDArray[Any]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise UsageError(f"sets must be 1-D arrays of ints or Python sets, got shape {array.shape}")
    return np.unique(array)


def exact_resemblance(set_a: Any, set_b: Any, set_c: Any = None) -> float:
    """Exact resemblance R = |A ∩ B| / |A ∪ B|, or |A ∩ B ∩ C| / |A ∪ B ∪ C| with a third set.

    Li & König 2010, Sec. 1 (2-way); Li, König & Gui 2010, eq. 3 (3-way). Both (all) empty gives
    0.0.

    Args:
        set_a, set_b, set_c: Python sets (or frozensets) or 1-D integer arrays (e.g. uint64 shingle
            hashes); duplicates in arrays are ignored.

    Returns:
        float resemblance in [0, 1].
    """
    sets = [set_a, set_b] if set_c is None else [set_a, set_b, set_c]
    arrays = None
    if not any(isinstance(s, (set, frozenset)) for s in sets):
        arrays = [_as_unique_array(s) for s in sets]
        if len({a.dtype for a in arrays if a.size}) > 1:
            arrays = None  # mixed int64/uint64 would promote to float64 and lose bits
    if arrays is None:
        python_sets = [
            set(s) if isinstance(s, (set, frozenset)) else set(_as_unique_array(s).tolist()) for s in sets
        ]
        intersection = len(set.intersection(*python_sets))
        union = len(set.union(*python_sets))
    else:
        common = arrays[0]
        every = arrays[0]
        for array in arrays[1:]:
            common = np.intersect1d(common, array, assume_unique=True)
            every = np.union1d(every, array)
        intersection, union = common.size, every.size
    return intersection / union if union else 0.0
