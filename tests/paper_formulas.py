"""Formulas of the papers that dedup's pipeline does not use, kept to check the ones it does against them.

- the sparse 3-way match probability P_b (Li, König & Gui 2010, eq. 7);
- the 2-way collision probability of two sets of any density (Li & König 2010, Theorem 1), the 2-way
  counterpart of :func:`dedup_cli.estimates.dense.collision_probability_3way`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits
from dedup_cli.estimates.two_way import a_coefficient


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
    q = np.ldexp(1.0, -check_bits(bits))
    return as_result((1.0 - q) * (1.0 - 2.0 * q) * as_float(R) + q * (1.0 - q) * as_float(T) + q * q)


def collision_probability_2way(r1: ArrayLike, r2: ArrayLike, s12: ArrayLike, bits: ArrayLike) -> np.ndarray:
    """Pr(lowest b bits of z_1 and z_2 equal) for two sets of any density (large D).

    Equals Li & König 2010, Theorem 1: E_b = C_{1,b} + (1 − C_{2,b}) R (eqs. 4–7), written as
    E_b = [s_12 + (r_1 − s_12) A_{2,b} + (r_2 − s_12) A_{1,b}] / (r_1 + r_2 − s_12): the first minimum of
    S_1 ∪ S_2 lies in both sets, or in one of them and the other set's minimum follows it.
    """
    rate1, rate2, shared = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (r1, r2, s12)))
    union = rate1 + rate2 - shared
    first_only = (rate1 - shared) * a_coefficient(rate2, bits)
    second_only = (rate2 - shared) * a_coefficient(rate1, bits)
    return (shared + first_only + second_only) / union
