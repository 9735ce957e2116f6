"""Exact b-bit collision probabilities of two and three dense sets (large-D limit), and their inversion.

Model (docs/estimators.md, "Dense sets"): positions 0, 1, 2, … of the permuted universe are independent draws;
each holds an element of one Venn region of S_1, S_2 (, S_3) with probability (region size)/D, or nothing.
z_i is the first position holding an element of S_i; sets whose minimum is the same element share it.
We want Pr(z_1 ≡ z_2 mod 2^b) and Pr(z_1 ≡ z_2 ≡ z_3 mod 2^b).

The direct computation is a Markov chain over (sets that have found their minimum, residue of the first minimum) run
over blocks of 2^b positions and summed as (I − M)^{-1}. Because positions are memoryless, only two facts
about a later minimum matter: which sets it covers, and whether its distance from the first minimum is a
multiple of 2^b. The chain therefore collapses to a closed form built from one function,

    G_b(x) = x (1 − x)^{2^b − 1} / (1 − (1 − x)^{2^b})                               (Li & König eq. 7)

the probability that the first hit of a rate-x process started just after a minimum lands a multiple of
2^b positions later (G_b(r_j) is Li & König's A_{j,b}). Writing u_X for the mass of the union of the sets
in X and E_ij for the pair probability:

    E_ij = [s_ij + (r_i − s_ij) G_b(r_j) + (r_j − s_ij) G_b(r_i)] / u_ij              (= Li & König eq. 4)
    P_b  = [s + Σ_{ij} (s_ij − s) G_b(r_k) + Σ_i q_i G_b(u_jk) E_jk] / u_123

(k the third set, q_i = r_i − s_ij − s_ik + s the mass of S_i alone): the first minimum of the union
covers region v with probability q_v / u_123; then the sets it missed must all find theirs a multiple of
2^b later. The uncollapsed chain is kept in the tests (``tests/helpers.py``) as the reference the closed
form is checked against.

P_b is a ratio of two affine functions of s (every G_b term depends on r_i, s_ij only), so the 3-way
intersection that produces an observed P̂_b follows exactly, without iterating.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits, check_ratio
from dedup_cli.estimates.two_way import a_coefficient, estimate_2way

# Venn-region masses come from inclusion–exclusion of a few inputs, so rounding leaves errors of a few ulp
# of the largest input; more negative than this fraction of it is an inconsistent input. Relative, because
# hashed text has r ≈ 1e-17 and an absolute tolerance would accept nonsense there.
_ROUNDING_TOLERANCE = 1e-12

DENSE_R = 1e-4
"""Above this r = f/D the sparse-limit coefficients are visibly off and the sparse 3-way estimator is biased:
the scorers use the precise coefficients and the dense 3-way procedure (:func:`estimate_3way_dense`)."""


def _union_coefficient(rate: np.ndarray, bits: ArrayLike) -> np.ndarray:
    """G_b (:func:`a_coefficient`) of a union's rate, which rounding may put a hair above 1 when the sets
    cover the universe."""
    return np.asarray(a_coefficient(np.minimum(rate, 1.0), bits), dtype=np.float64)


def _check_rates(**rates: np.ndarray) -> None:
    for name, value in rates.items():
        bad = ~((value > 0.0) & (value <= 1.0))
        if np.any(bad):
            index = np.argwhere(bad)[0]
            raise ValueError(
                f"{name} = {value[tuple(index)]!r} (at index {tuple(int(i) for i in index)}) must be in (0, 1]: "
                "r_i = f_i / D of a non-empty set; for the sparse limit (r = 0) use the sparse estimators"
            )


def _check_masses(masses: dict[str, np.ndarray], scale: np.ndarray) -> None:
    """Raise ValueError if a Venn-region mass is negative beyond rounding of inputs of size ``scale``.

    The complement of the union (named ``1 - …``) is a difference from 1, so its tolerance is absolute.
    """
    for name, mass in masses.items():
        tolerance = _ROUNDING_TOLERANCE * (1.0 if name.startswith("1 - ") else scale)
        bad = mass < -tolerance
        if np.any(bad):
            index = np.argwhere(bad)[0]
            raise ValueError(
                f"inconsistent set sizes: {name} = {mass[tuple(index)]!r} < 0 at index "
                f"{tuple(int(i) for i in index)}; the r_i, s_ij and s must be sizes of real sets over one "
                "universe divided by D (each Venn region and the complement of the union non-negative)"
            )


def _pair_probability(r_i: np.ndarray, r_j: np.ndarray, s_ij: np.ndarray, bits: ArrayLike) -> np.ndarray:
    """E_ij without validation: the first minimum of S_i ∪ S_j covers both, or the other set follows it."""
    union = r_i + r_j - s_ij
    only_i = np.maximum(r_i - s_ij, 0.0)
    only_j = np.maximum(r_j - s_ij, 0.0)
    return (s_ij + only_i * a_coefficient(r_j, bits) + only_j * a_coefficient(r_i, bits)) / union


def _region_masses_3way(
    r1: np.ndarray, r2: np.ndarray, r3: np.ndarray, s12: np.ndarray, s13: np.ndarray, s23: np.ndarray, s: np.ndarray
) -> dict[str, np.ndarray]:
    """The 7 Venn-region masses and the complement of the union, by inclusion–exclusion."""
    return {
        "s (S1 ∩ S2 ∩ S3)": s,
        "s12 - s": s12 - s,
        "s13 - s": s13 - s,
        "s23 - s": s23 - s,
        "r1 - s12 - s13 + s": r1 - s12 - s13 + s,
        "r2 - s12 - s23 + s": r2 - s12 - s23 + s,
        "r3 - s13 - s23 + s": r3 - s13 - s23 + s,
        "1 - |S1 ∪ S2 ∪ S3|/D": 1.0 - (r1 + r2 + r3 - s12 - s13 - s23 + s),
    }


def _affine_parts_3way(
    r1: np.ndarray, r2: np.ndarray, r3: np.ndarray, s12: np.ndarray, s13: np.ndarray, s23: np.ndarray, bits: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N_0, N_1, u_0) with P_b(s) = (N_0 + N_1 s) / (u_0 + s); the G_b terms do not depend on s."""
    g1, g2, g3 = (a_coefficient(r, bits) for r in (r1, r2, r3))
    # After a first minimum in S_i alone, S_j and S_k must first be hit a multiple of 2^b later
    # (G_b of their union's rate) and then agree with each other (E_jk).
    follow23 = _union_coefficient(r2 + r3 - s23, bits) * _pair_probability(r2, r3, s23, bits)
    follow13 = _union_coefficient(r1 + r3 - s13, bits) * _pair_probability(r1, r3, s13, bits)
    follow12 = _union_coefficient(r1 + r2 - s12, bits) * _pair_probability(r1, r2, s12, bits)
    constant = (
        s12 * g3
        + s13 * g2
        + s23 * g1
        + (r1 - s12 - s13) * follow23
        + (r2 - s12 - s23) * follow13
        + (r3 - s13 - s23) * follow12
    )
    slope = 1.0 - g1 - g2 - g3 + follow23 + follow13 + follow12
    union_without_s = r1 + r2 + r3 - s12 - s13 - s23
    return constant, slope, union_without_s


def collision_probability_3way(
    r1: ArrayLike,
    r2: ArrayLike,
    r3: ArrayLike,
    s12: ArrayLike,
    s13: ArrayLike,
    s23: ArrayLike,
    s: ArrayLike,
    bits: ArrayLike,
) -> np.ndarray:
    """P_b = Pr(lowest b bits of z_1, z_2, z_3 all equal) for three sets of any density (large D).

    The exact value of the block Markov chain of docs/estimators.md, "Dense sets" (Li, König & Gui 2010,
    Theorem 1), in the closed form of the module docstring. As all r_i → 0 it tends to their eq. 7.

    Args:
        r1, r2, r3: float64[...] in (0, 1], f_i / D.
        s12, s13, s23: float64[...], |S_i ∩ S_j| / D.
        s: float64[...], |S_1 ∩ S_2 ∩ S_3| / D.
        bits: int or int[...] ≥ 1. All arguments broadcast together.

    Returns:
        float64[...] of the broadcast shape.

    Raises:
        ValueError: a rate outside (0, 1], or a Venn region (or the complement of the union) whose mass,
            by inclusion–exclusion, is negative beyond rounding.
    """
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (r1, r2, r3, s12, s13, s23, s)))
    r1, r2, r3, s12, s13, s23, s = arrays
    _check_rates(r1=r1, r2=r2, r3=r3)
    _check_masses(_region_masses_3way(r1, r2, r3, s12, s13, s23, s), scale=np.maximum.reduce([r1, r2, r3]))
    constant, slope, union_without_s = _affine_parts_3way(r1, r2, r3, s12, s13, s23, bits)
    return (constant + slope * s) / (union_without_s + s)


def intersection_bounds(
    r1: ArrayLike, r2: ArrayLike, r3: ArrayLike, s12: ArrayLike, s13: ArrayLike, s23: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """The range of s = |S_1 ∩ S_2 ∩ S_3| / D that keeps all 7 Venn regions and the complement non-negative.

    lower = max(0, s12 + s13 − r1, s12 + s23 − r2, s13 + s23 − r3),
    upper = min(s12, s13, s23, 1 − r1 − r2 − r3 + s12 + s13 + s23)
    (the last term: the union cannot exceed the universe; the usual bracket omits it, and it binds for dense
    sets, e.g. r_i = 0.5, s_ij = 0.2 allows s ≤ 0.1 only). lower > upper means the pairwise values are
    jointly inconsistent: no three sets have them (noisy estimates of nearly identical sets do this).

    Returns:
        (lower, upper): float64[...] each, of the broadcast shape.
    """
    r1, r2, r3, s12, s13, s23 = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (r1, r2, r3, s12, s13, s23))
    )
    lower = np.maximum.reduce([np.zeros_like(r1), s12 + s13 - r1, s12 + s23 - r2, s13 + s23 - r3])
    upper = np.minimum.reduce([s12, s13, s23, 1.0 - (r1 + r2 + r3) + s12 + s13 + s23])
    return lower, upper


def solve_3way_intersection(
    p123: ArrayLike,
    r1: ArrayLike,
    r2: ArrayLike,
    r3: ArrayLike,
    s12: ArrayLike,
    s13: ArrayLike,
    s23: ArrayLike,
    bits: ArrayLike,
) -> np.ndarray:
    """The 3-way intersection s at which :func:`collision_probability_3way` equals ``p123``.

    The precise dense procedure of Li, König & Gui 2010, Sec. 4 (docs/estimators.md, "Dense sets"): with s_ij from
    the precise 2-way estimator, solve P_b(s) = P̂_b for s. P_b(s) = (N_0 + N_1 s)/(u_0 + s) is a ratio of
    affine functions of s, so s = (P̂_b u_0 − N_0)/(N_1 − P̂_b) exactly; this replaces the iteration of the
    paper (or a bisection on s) and agrees with bisection to rounding. P_b is monotone in s
    (dP_b/ds has the sign of N_1 u_0 − N_0 for every s; positive for b ≥ 2 in every valid configuration we
    checked, and exactly 0 at b = 1: of three one-bit values either all agree or exactly one pair does, so
    P_1 = (P_12 + P_13 + P_23 − 1)/2 at any density), so values of
    ``p123`` outside the achievable range give the nearer end of the bracket of :func:`intersection_bounds`.

    The 3-way resemblance follows as R = s / (r1 + r2 + r3 − s12 − s13 − s23 + s).

    Args:
        p123: float64[...], the observed fraction P̂_b of positions where all three b-bit values agree.
        r1, r2, r3: float64[...] in (0, 1], f_i / D (exact: the set sizes are known).
        s12, s13, s23: float64[...], pairwise intersections / D (usually estimates).
        bits: int or int[...] ≥ 2 (3-way needs b ≥ 2: P_1 does not depend on s; Li, König & Gui eq. 7).
        All arguments broadcast together.

    Returns:
        float64[...] of the broadcast shape: s in [lower, upper]. Where noisy pairwise estimates are jointly
        inconsistent (lower > upper, e.g. s12 + s13 − r1 > s23 for nearly identical sets) no s is valid;
        the answer is then taken in the gap [upper, lower] (the same inversion, clipped there), so it stays
        finite and as close to every constraint as the estimates allow, rather than NaN.

    Raises:
        ValueError: bits < 2, or a rate outside (0, 1].
    """
    if np.any(np.asarray(bits) < 2):
        raise ValueError(
            f"3-way estimation needs bits >= 2, got {bits!r}: one-bit values carry no information about the "
            "3-way intersection at any density"
        )
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (p123, r1, r2, r3, s12, s13, s23)))
    p123, r1, r2, r3, s12, s13, s23 = arrays
    _check_rates(r1=r1, r2=r2, r3=r3)
    lower, upper = intersection_bounds(r1, r2, r3, s12, s13, s23)
    lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    constant, slope, union_without_s = _affine_parts_3way(r1, r2, r3, s12, s13, s23, bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        at_lower = (constant + slope * lower) / (union_without_s + lower)
        at_upper = (constant + slope * upper) / (union_without_s + upper)
        # Clip in probability space, then invert; P_b is monotone, so this is clipping s to the bracket.
        target = np.clip(p123, np.minimum(at_lower, at_upper), np.maximum(at_lower, at_upper))
        solution = (target * union_without_s - constant) / (slope - target)
    # A flat P_b (slope·u_0 = N_0: every s gives the same P_b) leaves s undetermined; take the midpoint.
    solution = np.where(np.isfinite(solution), solution, 0.5 * (lower + upper))
    return np.clip(solution, lower, upper)


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
       probability (docs/estimators.md, "Dense sets"), by :func:`solve_3way_intersection`.
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
        ValueError: if any ``bits`` < 2.
    """
    b = check_bits(bits, minimum=2)
    ratio1, ratio2, ratio3 = check_ratio(r1, "r1"), check_ratio(r2, "r2"), check_ratio(r3, "r3")

    def intersection(p_ij: ArrayLike, ri: FloatArray, rj: FloatArray) -> FloatArray:
        resemblance = np.clip(as_float(estimate_2way(p_ij, ri, rj, b)), 0.0, 1.0)
        s_ij = resemblance / (1.0 + resemblance) * (ri + rj)
        return np.clip(s_ij, np.maximum(0.0, ri + rj - 1.0), np.minimum(ri, rj))

    s12 = intersection(p12, ratio1, ratio2)
    s13 = intersection(p13, ratio1, ratio3)
    s23 = intersection(p23, ratio2, ratio3)
    s = as_float(solve_3way_intersection(as_float(p123), ratio1, ratio2, ratio3, s12, s13, s23, b))
    union = ratio1 + ratio2 + ratio3 - s12 - s13 - s23 + s
    with np.errstate(divide="ignore", invalid="ignore"):
        resemblance = np.where(union > 0, s / np.where(union > 0, union, 1.0), 0.0)
    return as_result(resemblance)

