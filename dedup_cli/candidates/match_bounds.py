"""The fewest b-bit matches a pair needs for its estimate to reach a threshold, so that ``all_pairs`` can stop
early: Li & König 2010, eq. 9 solved for the match count, exactly (sparse) or as a safe bound (dense sets).
"""

from __future__ import annotations

import math

import numpy as np

from dedup_cli.estimates.guards import whole_bits
from dedup_cli.estimates.two_way import a_coefficient, coefficients_2way, estimate_2way

# Partner documents are grouped into at most this many runs of similar r when bounding the match count a
# dense document needs (exact when there are no more distinct r values than this).
_PARTNER_GROUPS = 256
# Safety margin on the match fraction for r > 0 (see min_matches_for_threshold): far above floating-point
# noise (~1e-16), far below one count (1/k ≥ 1.5e-5).
_FRACTION_SLACK = 1e-9


def min_matches_for_threshold(
    threshold: float, k: int, bits: int, r: np.ndarray | float = 0.0
) -> np.ndarray | int:
    """Smallest match count m with R̂_b = estimate_2way(m/k, r, r', bits) ≥ threshold (Li & König 2010, eq. 9).

    R̂_b ≥ R0 ⇔ m/k ≥ C_1,b + (1 − C_2,b) R0 (eq. 9 solved for Ê_b; 1 − C_2,b ≥ 1/2 > 0), so
    m = ceil(k (C_1,b + (1 − C_2,b) R0)); in the sparse limit C_1 = C_2 = 2^-b (eq. 8).

    Scalar ``r`` (every document has this r; 0 for hashed text shingles): the exact smallest m for
    floating-point ``estimate_2way(m / k, r, r, bits) >= threshold``, the very test of the re-scoring, so
    m − 1 fails it and m passes. For r > 0 the test is made at ``threshold − 1e-9``: numpy's vector and scalar
    exp/log1p may differ in the last bit, and a pair must not be lost to that (at most one extra count, only
    when the threshold lies within 1e-9 of an attainable estimate).

    Per-document ``r`` (float64[n_docs], dense sets): the returned m_i is a lower bound on the count that
    document i needs with ANY partner j among the documents of ``r``; ``all_pairs`` uses
    max(m_i, m_j) ≤ m(r_i, r_j), so no pair is lost, and the exact test is left to the re-scoring. Why not
    simply m(r_i, max r): R̂_b at a fixed count is increasing in r when r_1 = r_2 = r (C_1 = C_2 = A_b(r),
    dR̂/dA = (Ê − 1)/(1 − A)² ≤ 0, A_b decreasing), but NOT monotone in the partner's r alone: with b = 1,
    k = 256, R0 = 0.5, r_i = 1e-4 needs 192 matches beside r_j = 2.7e-5 but all 256 beside r_j = 1 (a small
    set cannot resemble the whole universe), so the needed count is minimised by a partner of similar r.
    Instead, with w = r_i / (r_i + r_j) (1/2 if both are 0), α = A_b(r_i), β = A_b(r_j), eqs. 5, 6 and 9
    give the needed fraction

        E*(r_i, r_j) = R0 + w (β − R0 α) + (1 − w)(α − R0 β),

    which is bilinear in (w, β). Partners are grouped into at most 256 runs of adjacent r values; over a
    run, w and β lie in intervals (w is monotone in r_j; β's range is taken from the run's values), so the
    minimum of E* over the run is at least its minimum over the four corners of that box. m_i is
    ceil(k (min over runs − 1e-9)): exact (up to that margin) when there are at most 256 distinct r values,
    otherwise low by at most a count in the tests (runs of 400 distinct values). Pass the r of the
    documents that can be partners (e.g. the eligible ones).

    Args:
        threshold: R0, the resemblance a pair's estimate must reach.
        k: number of positions (num_perm).
        bits: b, 1..64.
        r: float or float64[n_docs], r = f / D in [0, 1].

    Returns:
        int (scalar ``r``) or int64[n_docs], in 0..k + 1; k + 1 means no count reaches the threshold.
    """
    bits = whole_bits(bits)
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number of positions, got {k!r}")
    k = int(k)
    threshold = float(threshold)
    if np.any(np.isnan(r)):
        raise ValueError("r = f / D must not be NaN; pass each document's set size over the universe size")
    if np.ndim(r) == 0:
        return _min_matches_scalar(threshold, k, bits, float(r))
    return _min_matches_per_document(threshold, k, bits, np.asarray(r, dtype=np.float64))


def _min_matches_scalar(threshold: float, k: int, bits: int, r: float) -> int:
    target = threshold if r == 0.0 else threshold - _FRACTION_SLACK
    c1, c2 = coefficients_2way(r, r, bits)
    if math.isnan(target) or math.isinf(target):
        return k + 1 if not target < 0 else 0
    count = min(max(math.ceil(k * (float(c1) + (1.0 - float(c2)) * target)), 0), k + 1)

    def passes(matches: int) -> bool:
        # The re-scoring's own test: fraction = matches / k (both exact integers, one rounding), eq. 9.
        return bool(estimate_2way(matches / k, r, r, bits) >= target)

    # The closed form can be one off where k·E* lands within rounding of an integer; R̂ is non-decreasing in
    # m in floating point too (a rounded division, a subtraction and a division by a positive constant).
    while count > 0 and passes(count - 1):
        count -= 1
    while count <= k and not passes(count):
        count += 1
    return count


def _min_matches_per_document(threshold: float, k: int, bits: int, r: np.ndarray) -> np.ndarray:
    if r.ndim != 1:
        raise ValueError(f"r must be a float64[n_docs] array, got shape {r.shape}")
    if r.size == 0:
        return np.zeros(0, dtype=np.int64)
    distinct, inverse = np.unique(r, return_inverse=True)  # sorted, so runs hold adjacent r values
    alpha = np.asarray(a_coefficient(distinct, bits), dtype=np.float64)  # validates r ∈ [0, 1]
    n_groups = min(distinct.size, _PARTNER_GROUPS)
    starts = np.linspace(0, distinct.size, n_groups + 1).astype(np.int64)[:-1]
    starts = np.unique(starts)
    ends = np.append(starts[1:], distinct.size) - 1
    r_low, r_high = distinct[starts], distinct[ends]  # [groups]
    # β's range over a run from its members' values, so no monotonicity of A_b in floating point is assumed.
    beta_low = np.minimum.reduceat(alpha, starts)
    beta_high = np.maximum.reduceat(alpha, starts)
    needed = np.empty(distinct.size, dtype=np.float64)
    chunk = max(1, (1 << 20) // starts.size)
    for start in range(0, distinct.size, chunk):
        u = distinct[start : start + chunk, None]  # [chunk, 1]
        a = alpha[start : start + chunk, None]
        lowest = np.full(u.shape[0], np.inf)
        for partner_r in (r_low, r_high):
            total = u + partner_r
            w = np.where(total > 0, u / np.where(total > 0, total, 1.0), 0.5)  # r_i/(r_i + r_j), eqs. 5-6
            for beta in (beta_low, beta_high):
                corner = w * (beta - threshold * a) + (1.0 - w) * (a - threshold * beta)
                lowest = np.minimum(lowest, corner.min(axis=1))
        needed[start : start + chunk] = threshold + lowest
    counts = np.ceil(k * (needed - _FRACTION_SLACK))
    return np.clip(np.nan_to_num(counts, nan=k + 1.0), 0, k + 1).astype(np.int64)[inverse]


# The grid on which the b = 1 bound of :func:`min_xor_matches_for_threshold` is found: 2^-20 of a fraction.
_XOR_GRID = 1 << 20


def min_xor_matches_for_threshold(threshold: float, k: int, r: np.ndarray | float = 0.0) -> np.ndarray | int:
    """A lower bound on the agreeing XOR bits (of ``k``) that R̂_1/2 ≥ threshold needs (Li & König 2010, eq. 25).

    R̂_1/2(T̂) is the 1-bit estimate of eq. 9 at Ê_1 = (1 + sqrt(max(2T̂ − 1, 0)))/2 (eq. 24's + root), so the
    needed Ê_1 is the 1-bit bound of :func:`min_matches_for_threshold` (found here on a grid of 2^-20 and taken
    one step low), and the needed T̂ is E² + (1 − E)² of it, increasing for E ≥ 1/2 (eq. 23). The count is
    taken one lower still, so floating-point rounding never loses a pair: the exact test is the re-scoring's.

    Args:
        threshold: R0.
        k: number of XOR bits.
        r: float or float64[n_docs], r = f / D (per document: a bound for any partner among them).

    Returns:
        int (scalar ``r``) or int64[n_docs], in 0..k + 1; k + 1 means no count reaches the threshold.
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive whole number of XOR bits, got {k!r}")
    one_bit = np.asarray(min_matches_for_threshold(threshold, _XOR_GRID, 1, r), dtype=np.int64)
    e1 = np.maximum((one_bit - 1) / _XOR_GRID, 0.5)
    agree = e1 * e1 + (1.0 - e1) ** 2
    needed = np.maximum(np.ceil(int(k) * agree) - 1.0, 0.0).astype(np.int64)
    needed = np.where(one_bit > _XOR_GRID, int(k) + 1, needed)
    return int(needed) if np.ndim(r) == 0 else needed
