"""The sparse 3-way b-bit estimator (Li, König & Gui, "b-Bit Minwise Hashing for Estimating Three-Way
Similarities", NIPS 2010: eqs. 7-9, Theorems 2 and 3), valid as every r_i → 0. ``T = R12 + R13 + R23``.

For dense sets (r not negligible) see :mod:`dedup_cli.estimates.dense`. See docs/estimators.md.

Notation: ``r = f / D`` is a set's size over the universe size (``f / 2**64`` for hashed text shingles, so
effectively 0), ``bits`` is b, ``k`` the number of permutations (signature positions), ``R`` a resemblance.
Every function is vectorised (:mod:`dedup_cli.estimates.guards`): no loop runs over pairs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits, check_positive


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
        ValueError: if any ``bits`` < 2.
    """
    q = np.ldexp(1.0, -check_bits(bits, minimum=2))
    pairs = as_float(p12) + as_float(p13) + as_float(p23)
    numerator = as_float(p123) - q * pairs + 2.0 * q * q
    return as_result(numerator / ((1.0 - q) * (1.0 - 2.0 * q)))


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
        ValueError: if any ``bits`` < 2.
    """
    q = np.ldexp(1.0, -check_bits(bits, minimum=2))
    resemblance = as_float(R)
    denominator = (1.0 - q) * (1.0 - 2.0 * q)
    numerator = (
        q * q
        + (q - 3.0 * q * q) * as_float(T)
        + (1.0 - 6.0 * q + 10.0 * q * q) * resemblance
        - denominator * resemblance**2
    )
    return as_result(numerator / (check_positive(k) * denominator))


def estimate_pairwise_sparse(p_ij: ArrayLike, bits: ArrayLike) -> FloatArray:
    """Sparse pairwise estimate R_hat_ij = (2^b P_ij - 1) / (2^b - 1) (Li, König & Gui 2010, Alg. 1 step 4).

    The r -> 0 limit of Li & König 2010, eq. 9 (C1 = C2 = 1/2^b); any b >= 1 is valid.

    Args:
        p_ij: float64[...] pairwise match fraction.
        bits: int or int[...] b, 1..64.

    Returns:
        float64[...] R_hat_ij, not clipped.
    """
    q = np.ldexp(1.0, -check_bits(bits))
    return as_result((as_float(p_ij) - q) / (1.0 - q))

