"""Exact b-bit collision probabilities of two and three dense sets (large-D limit), and their inversion.

Model (SPEC, 3-way "Dense data"): positions 0, 1, 2, … of the permuted universe are independent draws;
each holds an element of one Venn region of S_1, S_2 (, S_3) with probability (region size)/D, or nothing.
z_i is the first position holding an element of S_i; sets whose minimum is the same element share it.
We want Pr(z_1 ≡ z_2 mod 2^b) and Pr(z_1 ≡ z_2 ≡ z_3 mod 2^b).

SPEC describes a Markov chain over (sets that have found their minimum, residue of the first minimum) run
over blocks of 2^b positions and summed as (I − M)^{-1}. Because positions are memoryless, only two facts
about a later minimum matter: which sets it covers, and whether its distance from the first minimum is a
multiple of 2^b. The chain therefore collapses to a closed form built from one function,

    G_b(x) = x (1 − x)^{2^b − 1} / (1 − (1 − x)^{2^b})                               (SPEC 2-way eq. 7)

the probability that the first hit of a rate-x process started just after a minimum lands a multiple of
2^b positions later (G_b(r_j) is Li & König's A_{j,b}). Writing u_X for the mass of the union of the sets
in X and E_ij for the pair probability:

    E_ij = [s_ij + (r_i − s_ij) G_b(r_j) + (r_j − s_ij) G_b(r_i)] / u_ij              (= Li & König eq. 4)
    P_b  = [s + Σ_{ij} (s_ij − s) G_b(r_k) + Σ_i q_i G_b(u_jk) E_jk] / u_123

(k the third set, q_i = r_i − s_ij − s_ik + s the mass of S_i alone): the first minimum of the union
covers region v with probability q_v / u_123; then the sets it missed must all find theirs a multiple of
2^b later. :func:`markov_chain_collision_probability` is the uncollapsed chain of SPEC, kept as the
reference the closed form is tested against.

P_b is a ratio of two affine functions of s (every G_b term depends on r_i, s_ij only), so the 3-way
intersection that produces an observed P̂_b follows exactly, without iterating (SPEC, Dense data).
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.errors import UsageError
from dedup_cli.estimators import a_coefficient

# Venn-region masses come from inclusion–exclusion of a few inputs, so rounding leaves errors of a few ulp
# of the largest input; more negative than this fraction of it is an inconsistent input. Relative, because
# hashed text has r ≈ 1e-17 and an absolute tolerance would accept nonsense there.
_ROUNDING_TOLERANCE = 1e-12


def _modulus(bits: ArrayLike) -> np.ndarray:
    """2^b as float64, after checking that b is an integer ≥ 1 (b = 64 is the full-width value)."""
    bits_array = np.asarray(bits)
    if bits_array.dtype.kind not in "iu" and not (
        bits_array.dtype.kind == "f" and np.all(np.isfinite(bits_array)) and np.all(bits_array == np.round(bits_array))
    ):
        raise UsageError(f"bits must be an integer, got {bits!r}")
    if np.any(bits_array < 1) or np.any(bits_array > 64):
        raise UsageError(f"bits {bits!r} is out of range; use 1 to 64")
    return np.exp2(bits_array.astype(np.float64))


def first_hit_multiple(rate: ArrayLike, bits: ArrayLike) -> np.ndarray:
    """Probability that a memoryless first hit lands a multiple of 2^b positions after the start.

    G_b(x) = x (1 − x)^{2^b − 1} / (1 − (1 − x)^{2^b}) = Pr(d ≡ 0 mod 2^b) for d ≥ 1 with
    Pr(d) = x (1 − x)^{d − 1}. G_b(r_j) is A_{j,b} of Li & König 2010, eq. 7 (SPEC 2-way); the limit at
    x → 0 is 1/2^b (the sparse case).

    Args:
        rate: float64[...] in [0, 1], the per-position hit probability x.
        bits: int or int[...] ≥ 1, broadcast with ``rate``.

    Returns:
        float64[...].
    """
    _modulus(bits)
    # Unions such as r1 + r2 − s12 may round a hair above 1 when the sets cover the universe.
    x = np.clip(np.asarray(rate, dtype=np.float64), 0.0, 1.0)
    return np.asarray(a_coefficient(x, bits), dtype=np.float64)


def _check_rates(**rates: np.ndarray) -> None:
    for name, value in rates.items():
        bad = ~((value > 0.0) & (value <= 1.0))
        if np.any(bad):
            index = np.argwhere(bad)[0]
            raise UsageError(
                f"{name} = {value[tuple(index)]!r} (at index {tuple(int(i) for i in index)}) must be in (0, 1]: "
                "r_i = f_i / D of a non-empty set; for the sparse limit (r = 0) use the sparse estimators"
            )


def _check_masses(masses: dict[str, np.ndarray], scale: np.ndarray) -> None:
    """Raise UsageError if a Venn-region mass is negative beyond rounding of inputs of size ``scale``.

    The complement of the union (named ``1 - …``) is a difference from 1, so its tolerance is absolute.
    """
    for name, mass in masses.items():
        tolerance = _ROUNDING_TOLERANCE * (1.0 if name.startswith("1 - ") else scale)
        bad = mass < -tolerance
        if np.any(bad):
            index = np.argwhere(bad)[0]
            raise UsageError(
                f"inconsistent set sizes: {name} = {mass[tuple(index)]!r} < 0 at index "
                f"{tuple(int(i) for i in index)}; the r_i, s_ij and s must be sizes of real sets over one "
                "universe divided by D (each Venn region and the complement of the union non-negative)"
            )


def _pair_probability(r_i: np.ndarray, r_j: np.ndarray, s_ij: np.ndarray, bits: ArrayLike) -> np.ndarray:
    """E_ij without validation: the first minimum of S_i ∪ S_j covers both, or the other set follows it."""
    union = r_i + r_j - s_ij
    only_i = np.maximum(r_i - s_ij, 0.0)
    only_j = np.maximum(r_j - s_ij, 0.0)
    return (s_ij + only_i * first_hit_multiple(r_j, bits) + only_j * first_hit_multiple(r_i, bits)) / union


def collision_probability_2way(r1: ArrayLike, r2: ArrayLike, s12: ArrayLike, bits: ArrayLike) -> np.ndarray:
    """Pr(lowest b bits of z_1 and z_2 equal) for two sets of any density (large D).

    Equals Li & König 2010, Theorem 1: E_b = C_{1,b} + (1 − C_{2,b}) R (SPEC 2-way eqs. 4–7), written as
    E_b = [s_12 + (r_1 − s_12) A_{2,b} + (r_2 − s_12) A_{1,b}] / (r_1 + r_2 − s_12).

    Args:
        r1, r2: float64[...] in (0, 1], f_i / D.
        s12: float64[...], |S_1 ∩ S_2| / D.
        bits: int or int[...] ≥ 1. All arguments broadcast together.

    Returns:
        float64[...] of the broadcast shape.

    Raises:
        UsageError: a rate outside (0, 1], or sizes no two sets can have (negative region or union > 1).
    """
    rate1, rate2, shared = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (r1, r2, s12)))
    _check_rates(r1=rate1, r2=rate2)
    _check_masses(
        {
            "s12": shared,
            "r1 - s12": rate1 - shared,
            "r2 - s12": rate2 - shared,
            "1 - (r1 + r2 - s12)": 1.0 - (rate1 + rate2 - shared),
        },
        scale=np.maximum(rate1, rate2),
    )
    shared = np.clip(shared, 0.0, np.minimum(rate1, rate2))
    return _pair_probability(rate1, rate2, shared, bits)


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
    g1, g2, g3 = (first_hit_multiple(r, bits) for r in (r1, r2, r3))
    # After a first minimum in S_i alone, S_j and S_k must first be hit a multiple of 2^b later
    # (G_b of their union's rate) and then agree with each other (E_jk).
    follow23 = first_hit_multiple(r2 + r3 - s23, bits) * _pair_probability(r2, r3, s23, bits)
    follow13 = first_hit_multiple(r1 + r3 - s13, bits) * _pair_probability(r1, r3, s13, bits)
    follow12 = first_hit_multiple(r1 + r2 - s12, bits) * _pair_probability(r1, r2, s12, bits)
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

    The exact value of the Markov chain in SPEC 3-way "Dense data" (Li, König & Gui 2010, Theorem 1), in the
    closed form of the module docstring. As all r_i → 0 it tends to SPEC 3-way eq. 7.

    Args:
        r1, r2, r3: float64[...] in (0, 1], f_i / D.
        s12, s13, s23: float64[...], |S_i ∩ S_j| / D.
        s: float64[...], |S_1 ∩ S_2 ∩ S_3| / D.
        bits: int or int[...] ≥ 1. All arguments broadcast together.

    Returns:
        float64[...] of the broadcast shape.

    Raises:
        UsageError: a rate outside (0, 1], or a Venn region (or the complement of the union) whose mass,
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
    (the last term: the union cannot exceed the universe; SPEC's bracket omits it, and it binds for dense
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

    The precise dense procedure of Li, König & Gui 2010, Sec. 4 (SPEC 3-way "Dense data"): with s_ij from
    the precise 2-way estimator, solve P_b(s) = P̂_b for s. P_b(s) = (N_0 + N_1 s)/(u_0 + s) is a ratio of
    affine functions of s, so s = (P̂_b u_0 − N_0)/(N_1 − P̂_b) exactly; this replaces the iteration of the
    paper (and the bisection of SPEC) and agrees with bisection to rounding. P_b is monotone in s
    (dP_b/ds has the sign of N_1 u_0 − N_0 for every s; positive for b ≥ 2 in every valid configuration we
    checked, and exactly 0 at b = 1: of three one-bit values either all agree or exactly one pair does, so
    P_1 = (P_12 + P_13 + P_23 − 1)/2 at any density), so values of
    ``p123`` outside the achievable range give the nearer end of the bracket of :func:`intersection_bounds`.

    The 3-way resemblance follows as R = s / (r1 + r2 + r3 − s12 − s13 − s23 + s).

    Args:
        p123: float64[...], the observed fraction P̂_b of positions where all three b-bit values agree.
        r1, r2, r3: float64[...] in (0, 1], f_i / D (exact: the set sizes are known).
        s12, s13, s23: float64[...], pairwise intersections / D (usually estimates).
        bits: int or int[...] ≥ 2 (3-way needs b ≥ 2: P_1 does not depend on s; SPEC eq. 7).
        All arguments broadcast together.

    Returns:
        float64[...] of the broadcast shape: s in [lower, upper]. Where noisy pairwise estimates are jointly
        inconsistent (lower > upper, e.g. s12 + s13 − r1 > s23 for nearly identical sets) no s is valid;
        the answer is then taken in the gap [upper, lower] (the same inversion, clipped there), so it stays
        finite and as close to every constraint as the estimates allow, rather than NaN.

    Raises:
        UsageError: bits < 2, or a rate outside (0, 1].
    """
    if np.any(np.asarray(bits) < 2):
        raise UsageError(
            f"3-way estimation needs bits >= 2, got {bits!r}: one-bit values carry no information about the "
            "3-way intersection at any density; sign and compare with --bits 2 or more"
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


def markov_chain_collision_probability(region_masses: ArrayLike, bits: int) -> np.ndarray:
    """Pr(all n sets' b-bit minima equal) from the uncollapsed Markov chain of SPEC (reference, slow).

    States: (subset F of sets whose minimum has been found, residue mod 2^b of the first minimum found),
    plus "all found at one residue" (success) and "a minimum at another residue" (failure). The chain is
    run over one block of 2^b positions (the product of the 2^b per-position transition matrices, the
    position's residue being fixed within the block), and the absorption probability is summed over blocks
    as a geometric series, success = e_start^T (I − Q)^{-1} s_block. About 2 + (2^n − 2) 2^b states: use it
    to check :func:`collision_probability_2way` / :func:`collision_probability_3way` for b ≤ 5, not in
    production.

    Args:
        region_masses: float64[..., 2^n − 1], the mass of each Venn region; entry ``mask − 1`` holds the
            region of elements in exactly the sets whose bits are set in ``mask`` (bit i−1 for S_i), e.g.
            for n = 2: [r1 − s12, r2 − s12, s12]. The rest of the mass is "no element".
        bits: int ≥ 1.

    Returns:
        float64[...].
    """
    masses = np.asarray(region_masses, dtype=np.float64)
    num_regions = masses.shape[-1]
    num_sets = int(num_regions + 1).bit_length() - 1
    if (1 << num_sets) - 1 != num_regions:
        raise UsageError(f"region_masses has {num_regions} columns; expected 2^n − 1 (3 or 7)")
    batch_shape = masses.shape[:-1]
    masses = masses.reshape(-1, num_regions)
    batch = masses.shape[0]
    modulus = 1 << bits
    full = (1 << num_sets) - 1
    partial_subsets = list(range(1, full))
    # State indices: 0 = nothing found; then (F, residue) for each proper non-empty F; then success, failure.
    index = {state: 1 + i for i, state in enumerate(itertools.product(partial_subsets, range(modulus)))}
    success = 1 + len(index)
    failure = success + 1
    num_states = failure + 1
    # Column 0: "no element here"; column v: an element of the region with mask v.
    weights = np.concatenate([1.0 - masses.sum(axis=1, keepdims=True), masses], axis=1)
    # (state index, sets found, residue of the first minimum; unused while nothing is found)
    states = [(0, 0, 0)] + [(idx, f, rho) for (f, rho), idx in index.items()]

    def step(position: int) -> np.ndarray:
        """Transition matrix (batch, from, to) for one position of residue ``position``."""
        # Which region moves which state where is the same for every configuration: a 0/1 table
        # [from·to, region] that the region masses turn into the batch of matrices in one product.
        structure = np.zeros((num_states * num_states, num_regions + 1))
        structure[success * num_states + success, :] = 1.0
        structure[failure * num_states + failure, :] = 1.0
        for source, found, rho in states:
            structure[source * num_states + source, 0] += 1.0
            for mask in range(1, full + 1):
                new = mask & ~found
                if new == 0:
                    target = source  # the element belongs only to sets already found
                elif found and rho != position:
                    target = failure  # a later minimum at another residue
                elif found | mask == full:
                    target = success
                else:
                    target = index[(found | mask, rho if found else position)]
                structure[source * num_states + target, mask] += 1.0
        return (weights @ structure.T).reshape(batch, num_states, num_states)

    block = np.broadcast_to(np.eye(num_states), (batch, num_states, num_states)).copy()
    for position in range(modulus):
        block = block @ step(position)
    transient = slice(0, success)
    q = block[:, transient, transient]
    to_success = block[:, transient, success]
    identity = np.eye(success)
    absorbed = np.linalg.solve(identity - q, to_success[..., None])[..., 0]
    return absorbed[:, 0].reshape(batch_shape)
