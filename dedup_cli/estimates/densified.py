"""Variances of the estimators on one permutation hashing with densification, where bins share minima.

With ``--scheme oph`` a document's shingles fall into k bins and an empty bin takes the minimum of a bin that its
seeded order reaches first (Li, Owen & Zhang 2012; Shrivastava 2017). For a pair, let n = |S_1 ∪ S_2| and
a = |S_1 ∩ S_2|, and call a bin occupied when the union has an element in it; m bins are occupied. Position j
agrees on all bits exactly when the union's minimum of its source bin (j itself if occupied, else the first
occupied bin of j's order) lies in the intersection. Each empty bin's source is uniform over the m occupied bins,
independently of the others, and the m minima are m distinct elements of the union, drawn without replacement. So
with c_i the positions whose source is bin i (Σ c_i = k) and S = E[Σ c_i²]:

    S = k + 1 − E[m] + k (k − 1) E[1/m]                                               (eq. D1)
    E[m] = k (1 − (1 − 1/k)^n),   E[1/m] = (1/k) Σ_{i=1..k} (i/k)^(n − 1)              (eq. D2)

(the second from E[1/m] = ∫_0^1 E[x^(m − 1)] dx and the binomial moments of the empty bins,
E[C(e, j)] = C(k, j) (1 − j/k)^n; exact, with no cancelling terms). A statistic that is a sum over positions of
a term whose mean depends on whether the source's minimum lies in a set of probability p (the intersection:
p = R), plus chance bits independent across positions, has the variance it would have with k independent
permutations plus (ψ − 1) p (1 − p)/k, where

    ψ(n, k) = (n S − k²) / (k (n − 1))                                                  (eq. D3)

(the sources' minima contribute Var(Σ c_i X_i) = p (1 − p)(n S − k²)/(n − 1) for X_i drawn without replacement,
against k p (1 − p) for independent positions). ψ < 1 when the documents have many more shingles than k (every bin
occupied: sampling without replacement, ψ = (n − k)/(n − 1)), and up to about 2 when they have a few (the
empty bins copy a handful of minima, and two elements in one bin leave one unseen). Hence, in the sparse limit:

- b-bit 2-way (Li & König 2010, eq. 9): Var(R̂_b) = eq. 11 + (ψ − 1) R (1 − R)/k                (eq. D4)
- b = 1/2: the XOR bits agree with probability T = (1 + R²)/2 as before (the copies cancel in the mean), and
  Var(T̂) = (1 − R²)(1 + ψ R²)/(4 k_x), k_x XOR bits of k = 2 k_x bins, against (1 − R²)(1 + R²)/(4 k_x)      (eq. D5)
- 3-way (Li, König & Gui 2010, eq. 8): Var(R̂_b) ≈ eq. 9 + (ψ(n_123) − 1) R (1 − R)/k, n_123 the union of the
  three sets                                                                                   (eq. D6)

D4 is exact for this model; D5 and D6 treat the part of the noise that is not the sources' first-order one as
eq. 26 and eq. 9 do. The tests measure all three on signatures made by ``minhash.oph`` (docs/estimators.md,
"One permutation hashing").

ψ depends on n and k alone. It is tabulated once per k over log n (:func:`sharing_factor`), exactly from D1–D3,
and interpolated: the intervals evaluate it at many n per pair.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.guards import FloatArray, as_float, as_result, check_bits, check_positive

TEXT_UNIVERSE = 1 << 64

# ψ is tabulated at this many points of log n from n = 1 to the n beyond which every bin is occupied.
_TABLE_POINTS = 4097
# Terms (i/k)^(n − 1) of E[1/m] below e^-44 ≈ 1e-19 of the largest are left out.
_NEGLIGIBLE_LOG = 44.0
# Bounds the [table points, bins] temporaries of building a table.
_TABLE_ELEMENTS = 1 << 22
# Below this union ψ is evaluated at it: n < 2 only when both sets have one element, where R is 0 or 1.
_SMALLEST_UNION = 1.0 + 1e-6


@dataclass(frozen=True)
class Densification:
    """Signatures made by one permutation hashing with densification: ``bins`` bins over a universe of ``universe``.

    ``bins`` is the number of bins the values came from: k, or 2·k for a store of k XOR bits. A document's set size
    is f = r·D (r = f/D is what the estimators carry; D is a power of two for text, so the product is exact).
    """

    bins: int
    universe: int = TEXT_UNIVERSE

    def set_sizes(self, ratios: ArrayLike) -> FloatArray:
        """f = r·D: float64[...] set sizes from the ratios r = f/D."""
        return as_result(as_float(ratios) * float(self.universe))


def mean_occupied(union: ArrayLike, bins: int) -> FloatArray:
    """E[m] = k (1 − (1 − 1/k)^n): the expected number of the k bins that n hashed elements occupy (eq. D2)."""
    n = as_float(union)
    return as_result(bins * -np.expm1(n * math.log1p(-1.0 / bins)) if bins > 1 else np.ones_like(n))


def mean_inverse_occupied(union: ArrayLike, bins: int) -> FloatArray:
    """E[1/m] = (1/k) Σ_{i=1..k} (i/k)^(n − 1) for n ≥ 1 elements hashed into k bins (eq. D2).

    Exact (no occupancy distribution is summed), a sum of positive terms. Vectorised over ``union``; the terms below
    e^-44 of the largest are left out, so the cost is k terms per n for n up to about 44 and fewer beyond.

    Args:
        union: float64[...] n ≥ 1 (a real n interpolates smoothly between whole ones).
        bins: k ≥ 1.
    """
    n = np.maximum(as_float(union), 1.0)
    flat = n.ravel()
    out = np.empty(flat.size)
    k = int(bins)
    per_call = max(1, _TABLE_ELEMENTS // k)
    for start in range(0, flat.size, per_call):
        power = flat[start : start + per_call, None] - 1.0
        # only the i with (i/k)^(n − 1) ≥ e^-44: i ≥ k·exp(−44/(n − 1))
        smallest = float(power.min())  # the flattest terms of the chunk decide how many are needed
        lowest = int(k * math.exp(-_NEGLIGIBLE_LOG / smallest)) if smallest > 0 else 0
        lowest = max(1, min(k, lowest))
        shares = np.arange(lowest, k + 1, dtype=np.float64) / k
        out[start : start + per_call] = np.exp(power * np.log(shares)[None, :]).sum(axis=1) / k
    return as_result(out.reshape(n.shape))


def _sharing_factor_exact(union: np.ndarray, bins: int) -> np.ndarray:
    """ψ(n, k) of eq. D3 from D1 and D2, for float64[...] n > 1."""
    k = float(bins)
    occupied = as_float(mean_occupied(union, bins))
    squares = k + 1.0 - occupied + k * (k - 1.0) * as_float(mean_inverse_occupied(union, bins))
    return (union * squares - k * k) / (k * (union - 1.0))


def _full_union(bins: int) -> float:
    """The n beyond which all k bins are occupied but for a chance below e^-30: k (1 − 1/k)^n ≤ e^-30."""
    if bins <= 1:
        return 2.0
    return max(2.0, (math.log(bins) + 30.0) / -math.log1p(-1.0 / bins))


@functools.lru_cache(maxsize=16)
def _sharing_table(bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(log n, ψ): ψ(n, k) at :data:`_TABLE_POINTS` points of log n from :data:`_SMALLEST_UNION` to
    :func:`_full_union` (built once per k, in O(k) per point for small n)."""
    logs = np.linspace(math.log(_SMALLEST_UNION), math.log(_full_union(bins)), _TABLE_POINTS)
    return logs, _sharing_factor_exact(np.exp(logs), bins)


def sharing_factor(union: ArrayLike, bins: int) -> FloatArray:
    """ψ(n, k) = (n S − k²)/(k (n − 1)) (eq. D3): how much the sources' share of the variance grows (ψ > 1) or
    shrinks (ψ < 1) because one permutation hashing's k positions copy m ≤ k distinct minima.

    Interpolated in log n from an exact table (:func:`_sharing_table`); beyond the table every bin is occupied and
    ψ = (n − k)/(n − 1) exactly (S = k). With one bin, ψ = 1 (nothing is shared). Unions below 1 + 10^-6 take
    that value (a union that small is one element: R is 0 or 1 and the factor multiplies R (1 − R) = 0).

    Args:
        union: float64[...] n = |S_1 ∪ S_2| (or of three sets), real-valued.
        bins: k, the bins of the signatures.

    Returns:
        float64[...] ψ.
    """
    n = np.maximum(as_float(union), _SMALLEST_UNION)
    if bins <= 1:
        return as_result(np.ones_like(n))
    logs, table = _sharing_table(int(bins))
    # The table's points are evenly spaced in log n: the interval of each n is found by arithmetic, not searched.
    position = (np.log(n) - logs[0]) * ((logs.size - 1) / (logs[-1] - logs[0]))
    index = np.clip(position.astype(np.int64), 0, logs.size - 2)
    share = np.clip(position - index, 0.0, 1.0)
    inside = table[index] + share * (table[index + 1] - table[index])
    beyond = (n - bins) / (n - 1.0)
    return as_result(np.where(n > math.exp(logs[-1]), beyond, inside))


def union_size(R: ArrayLike, f1: ArrayLike, f2: ArrayLike) -> FloatArray:
    """n = |S_1 ∪ S_2| = (f_1 + f_2)/(1 + R) (from R = a/(f_1 + f_2 − a))."""
    return as_result((as_float(f1) + as_float(f2)) / (1.0 + np.clip(as_float(R), 0.0, 1.0)))


def densified_variance_2way(R: ArrayLike, f1: ArrayLike, f2: ArrayLike, bits: ArrayLike, bins: int) -> FloatArray:
    """Var(R̂_b) of the sparse 2-way estimator on densified one permutation hashing (eq. D4):
    E_b (1 − E_b)/(k (1 − 2^-b)²) (Li & König 2010, eq. 11, r → 0) + (ψ(n, k) − 1) R (1 − R)/k, n = (f_1 + f_2)/(1 + R).

    Args:
        R: float64[...] resemblance.
        f1, f2: float64[...] the documents' shingle counts.
        bits: int or int[...] b, 1..64.
        bins: k.

    Returns:
        float64[...] variance, never negative.
    """
    resemblance = np.clip(as_float(R), 0.0, 1.0)
    chance = np.ldexp(1.0, -check_bits(bits))
    k = float(check_positive(bins, "bins"))
    expected = chance + (1.0 - chance) * resemblance
    independent = expected * (1.0 - expected) / (k * (1.0 - chance) ** 2)
    extra = (as_float(sharing_factor(union_size(resemblance, f1, f2), bins)) - 1.0) * resemblance * (1.0 - resemblance)
    return as_result(np.maximum(independent + extra / k, 0.0))


def inflation_2way(R: ArrayLike, f1: ArrayLike, f2: ArrayLike, bits: ArrayLike, bins: int) -> FloatArray:
    """φ = Var(Ê_b) on densified bins over the binomial E_b (1 − E_b)/k: eq. D4 over eq. 11 (sparse limit), 1 where
    both vanish (b ≥ 53 at R = 0 or 1). The match count behaves as a binomial of k/φ trials."""
    resemblance = np.clip(as_float(R), 0.0, 1.0)
    chance = np.ldexp(1.0, -check_bits(bits))
    expected = chance + (1.0 - chance) * resemblance
    binomial = expected * (1.0 - expected)
    extra = (1.0 - chance) ** 2 * (as_float(sharing_factor(union_size(resemblance, f1, f2), bins)) - 1.0) \
        * resemblance * (1.0 - resemblance)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(binomial > 0, (binomial + extra) / np.where(binomial > 0, binomial, 1.0), 1.0)
    return as_result(np.maximum(ratio, 1e-3))


def inflation_half_bit(R: ArrayLike, f1: ArrayLike, f2: ArrayLike, bins: int) -> FloatArray:
    """φ_T = Var(T̂)/(T (1 − T)/k_x) = (1 + ψ R²)/(1 + R²) for the XOR bits of densified bins (eq. D5), ψ at
    n = (f_1 + f_2)/(1 + R) and k = ``bins`` (the bins whose lowest bits were paired)."""
    resemblance = np.clip(as_float(R), 0.0, 1.0)
    squared = resemblance * resemblance
    psi = as_float(sharing_factor(union_size(resemblance, f1, f2), bins))
    return as_result(np.maximum((1.0 + psi * squared) / (1.0 + squared), 1e-3))


def densified_variance_half_bit(R: ArrayLike, f1: ArrayLike, f2: ArrayLike, bins: int) -> FloatArray:
    """Var(R̂_1/2) ≈ (1 − R⁴)(1 + ψ R²)/((1 + R²)·4 k_x R²), k_x = bins/2 XOR bits: eq. 26 (sparse limit) times
    :func:`inflation_half_bit` (eq. D5); infinite at R = 0 as eq. 26 is."""
    resemblance = np.clip(as_float(R), 0.0, 1.0)
    squared = resemblance * resemblance
    xor_bits = float(bins) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        plain = (1.0 - squared * squared) / (4.0 * xor_bits * squared)
    return as_result(np.where(squared > 0, plain * as_float(inflation_half_bit(R, f1, f2, bins)), np.inf))


def largest_sharing_factor(bins: int) -> float:
    """max ψ(n, k) over the unions n ≥ 2 (every union that holds an R strictly between 0 and 1): ψ decreases in n
    from about 2 at n = 2, so this is ψ(2, k). What bounds the noise of any pair, for margins fixed in advance."""
    return max(1.0, float(sharing_factor(2.0, bins)))
