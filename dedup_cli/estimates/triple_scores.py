"""Scoring candidate triples: count the positions where all three b-bit values agree, then the 3-way estimate.

Per triple (Li, König & Gui 2010, Alg. 1): P̂_b, the fraction of the k positions where all three b-bit values
agree, and the pairwise fractions P̂_ij over the same positions give the sparse estimate of eq. 8, or for dense
sets the procedure of Sec. 4 (:func:`dedup_cli.estimates.dense.estimate_3way_dense`); Theorem 3 gives the
variance, with the term of eq. D6 (:mod:`dedup_cli.estimates.densified`) when one permutation hashing made the
values. See docs/estimators.md, "Three-way".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dedup_cli.estimates.dense import DENSE_R, estimate_3way_dense
from dedup_cli.estimates.densified import Densification, largest_sharing_factor, sharing_factor
from dedup_cli.estimates.guards import THREE_WAY_BITS_MESSAGE
from dedup_cli.estimates.intervals import confidence_interval_3way, wilson_interval
from dedup_cli.estimates.three_way import estimate_3way, variance_3way
from dedup_cli.estimates.two_way import estimate_2way

# Bounds the [triples, k] comparison temporaries of ``score_triples`` to about 32 MB.
_COMPARISON_BYTES = 1 << 25


@dataclass
class ScoredTriples:
    """Triples with their b-bit match counts and 3-way estimates; arrays aligned by triple."""

    docs: np.ndarray  # int64[n, 3], each row ascending
    matches: np.ndarray  # int64[n], positions where all three b-bit values agree (k · P̂_b)
    pair_matches: np.ndarray  # int64[n, 3], pairwise agreements of (1, 2), (1, 3), (2, 3)
    estimate: np.ndarray  # float64[n], eq. 8 (sparse) or the Sec. 4 dense procedure; not clipped
    stderr: np.ndarray  # float64[n], Theorem 3 (eq. 9) at the clipped estimate
    ci_low: np.ndarray  # float64[n]
    ci_high: np.ndarray  # float64[n]
    pairwise: np.ndarray  # float64[n, 3], 2-way estimates R̂_12, R̂_13, R̂_23 (Li & König eq. 9)
    exact: np.ndarray  # float64[n], exact 3-way resemblance where ``find`` checked it (re-read), NaN elsewhere

    def __len__(self) -> int:
        return int(self.estimate.size)

    def select(self, keep: np.ndarray) -> ScoredTriples:
        """The rows picked by a boolean mask or an index array, in that order."""
        return ScoredTriples(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})

    @classmethod
    def empty(cls) -> ScoredTriples:
        """No triple: what ``find`` holds with ``ways=3`` when nothing is accepted."""
        return cls(
            docs=np.empty((0, 3), dtype=np.int64),
            matches=np.empty(0, dtype=np.int64),
            pair_matches=np.empty((0, 3), dtype=np.int64),
            estimate=np.empty(0),
            stderr=np.empty(0),
            ci_low=np.empty(0),
            ci_high=np.empty(0),
            pairwise=np.empty((0, 3)),
            exact=np.empty(0),
        )


def _count_triple_matches(values: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """k·P̂_b and k·P̂_ij for a chunk of triples: int64[t] and int64[t, 3]."""
    first, second, third = values[docs[:, 0]], values[docs[:, 1]], values[docs[:, 2]]
    equal_12 = first == second
    equal_13 = first == third
    equal_23 = second == third
    pair_matches = np.stack(
        [np.count_nonzero(equal_12, axis=1), np.count_nonzero(equal_13, axis=1), np.count_nonzero(equal_23, axis=1)],
        axis=1,
    ).astype(np.int64)
    # 1 = 2 and 1 = 3 imply 2 = 3, so two comparisons decide "all three agree".
    matches = np.count_nonzero(equal_12 & equal_13, axis=1).astype(np.int64)
    return matches, pair_matches


def reach_margin(bits: int, k: int, level: float, densification: Densification | None = None) -> float:
    """How far below R0 a sparse triple's clipped estimate may lie and its interval's upper end still reach R0.

    The score interval's ends satisfy (R̂ − R)² ≤ z² Var(R, T) (:func:`dedup_cli.estimates.intervals.
    confidence_interval_3way`), so no end is farther from R̂ than z·sqrt(max Var), and by Theorem 3 (Li, König &
    Gui 2010, eq. 9) Var ≤ [1 + 3(2^b − 3) + max(0, 4^b − 6·2^b + 10)] / (k (2^b − 1)(2^b − 2)) for T ≤ 3 and
    R ∈ [0, 1] (about 1/k): the upper end of a triple estimated farther below R0 never reaches it. On densified
    bins eq. D6 adds at most (ψ_max − 1)/(4k), ψ_max the largest sharing factor (about 2).
    """
    scale = 2.0 ** bits
    largest = (1.0 + 3.0 * (scale - 3.0) + max(0.0, scale * scale - 6.0 * scale + 10.0)) / (
        k * (scale - 1.0) * (scale - 2.0))
    if densification is not None:
        largest += (largest_sharing_factor(densification.bins) - 1.0) / (4.0 * k)
    return NormalDist().inv_cdf(0.5 + level / 2.0) * math.sqrt(largest)


def score_triples(
    values: np.ndarray, docs: np.ndarray, r: np.ndarray, bits: int, level: float = 0.95,
    threshold: float | None = None, straddling: bool = False, densification: Densification | None = None,
) -> ScoredTriples:
    """Estimate the 3-way resemblance of each triple from b-bit values.

    Per triple (Li, König & Gui 2010, Alg. 1): P̂_b = fraction of the k positions where all three b-bit
    values agree, P̂_ij the pairwise fractions over the same positions, then

    - estimate: R̂_b = (4^b P̂_b − 2^b (P̂_12 + P̂_13 + P̂_23) + 2) / ((2^b − 1)(2^b − 2)) (eq. 8) when every
      r ≤ DENSE_R; otherwise the dense procedure of Sec. 4 (:func:`dedup_cli.estimates.dense.estimate_3way_dense`),
      as the sparse one is biased there. Not clipped.
    - pairwise: R̂_ij = (P̂_ij − C_1) / (1 − C_2) with the precise r (Li & König 2010, eq. 9).
    - stderr: sqrt of Theorem 3 (eq. 9) at R = clip(R̂, 0, 1) and T = Σ clip(R̂_ij, 0, 1), T kept ≥ 3R
      because every R_ij ≥ R (otherwise the variance can come out negative near R = 1).
    - ci_low, ci_high: the score interval of :func:`dedup_cli.estimates.intervals.confidence_interval_3way`
      for sparse rows; for dense rows the Wilson interval of P_b mapped through the dense procedure.

    Documents without shingles (r = 0 because f = 0) must be left out beforehand, as ``find`` does: their
    all-zero values agree with each other everywhere.

    Args:
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value.
        docs: int[n, 3] document indices; the rows are returned as given (usually ascending).
        r: float64[n_docs], r = f/D per document.
        bits: b ≥ 2.
        level: confidence level of the interval.
        threshold: keep only the rows with R̂ ≥ this (None: every row). Filtering inside the chunk loop
            spares the interval (a 100-step bisection) for rejected candidates, about half the scoring time,
            and keeps memory proportional to the accepted triples.
        straddling: with ``threshold``, also keep the rows estimated below it whose interval reaches it
            (``ci_high`` ≥ threshold), the ones an exact check may find above it; their intervals are computed
            only for estimates within :func:`reach_margin` of it (and for dense rows).
        densification: the bins of one permutation hashing the values come from: the standard error and interval
            of sparse rows then add eq. D6's term, at the triple's union n_123 as its estimates give it
            (:func:`triple_union`). None: k independent permutations.

    Returns:
        ScoredTriples aligned with ``docs`` (the rows kept, in order).

    Raises:
        ValueError: bits < 2.
    """
    if bits < 2:
        raise ValueError(THREE_WAY_BITS_MESSAGE)
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    r = np.asarray(r, dtype=np.float64)
    n, k = docs.shape[0], values.shape[1]
    if n == 0:
        return ScoredTriples.empty()
    # Three gathered [chunk, k] copies and three boolean [chunk, k] masks live at once.
    chunk = max(1, _COMPARISON_BYTES // max(1, k * (3 * values.dtype.itemsize + 4)))
    parts: list[ScoredTriples] = []
    for start in range(0, n, chunk):
        rows = docs[start : start + chunk]
        matches, pair_matches = _count_triple_matches(values, rows)
        parts.append(_estimate_chunk(rows, matches, pair_matches, r, bits, k, level, threshold, straddling,
                                     densification))
    if len(parts) == 1:
        return parts[0]
    return ScoredTriples(
        **{name: np.concatenate([getattr(p, name) for p in parts]) for name in ScoredTriples.__dataclass_fields__}
    )


def _dense_estimate(p123: np.ndarray, p_pair: np.ndarray, ratios: np.ndarray, bits: int) -> np.ndarray:
    """The Sec. 4 dense procedure: p123 float64[t], p_pair float64[t, 3] (12, 13, 23), ratios float64[t, 3]."""
    return np.asarray(
        estimate_3way_dense(
            p123, p_pair[:, 0], p_pair[:, 1], p_pair[:, 2], ratios[:, 0], ratios[:, 1], ratios[:, 2], bits
        ),
        dtype=np.float64,
    )


def _estimate_chunk(
    docs: np.ndarray,
    matches: np.ndarray,
    pair_matches: np.ndarray,
    r: np.ndarray,
    bits: int,
    k: int,
    level: float,
    threshold: float | None,
    straddling: bool = False,
    densification: Densification | None = None,
) -> ScoredTriples:
    """Estimates, standard errors, intervals and pairwise estimates for one chunk of counted triples."""
    ratios = r[docs]  # float64[t, 3]
    p123 = matches / k
    p_pair = pair_matches / k  # columns 12, 13, 23
    pair_index = ((0, 1), (0, 2), (1, 2))
    pairwise = np.stack(
        [
            estimate_2way(p_pair[:, column], ratios[:, i], ratios[:, j], bits)
            for column, (i, j) in enumerate(pair_index)
        ],
        axis=1,
    ).astype(np.float64)
    estimate = np.array(
        estimate_3way(p123, p_pair[:, 0], p_pair[:, 1], p_pair[:, 2], bits), dtype=np.float64
    )
    dense = ratios.max(axis=1) > DENSE_R
    if np.any(dense):
        estimate[dense] = _dense_estimate(p123[dense], p_pair[dense], ratios[dense], bits)
    if threshold is not None:
        keep = estimate >= threshold
        if straddling:
            keep |= dense | (np.clip(estimate, 0.0, 1.0) >= threshold - reach_margin(bits, k, level, densification))
        docs, matches, pair_matches, ratios = docs[keep], matches[keep], pair_matches[keep], ratios[keep]
        p_pair, pairwise, estimate, dense = p_pair[keep], pairwise[keep], estimate[keep], dense[keep]
    sharing = (np.ones(estimate.size) if densification is None
               else np.asarray(sharing_factor(triple_union(estimate, pairwise, densification.set_sizes(ratios)),
                                              densification.bins), dtype=np.float64))
    low, high = np.empty(estimate.size), np.empty(estimate.size)
    sparse = ~dense
    if np.any(sparse):
        m12, m13, m23 = pair_matches[sparse, 0], pair_matches[sparse, 1], pair_matches[sparse, 2]
        low[sparse], high[sparse] = confidence_interval_3way(
            matches[sparse], m12, m13, m23, k, bits, level=level, sharing=sharing[sparse]
        )
    if np.any(dense):
        # The same monotone map as the estimate, applied to the Wilson interval of P_b (the count is binomial).
        p_low, p_high = wilson_interval(matches[dense], k, level)
        low[dense] = np.clip(_dense_estimate(p_low, p_pair[dense], ratios[dense], bits), 0.0, 1.0)
        high[dense] = np.clip(_dense_estimate(p_high, p_pair[dense], ratios[dense], bits), 0.0, 1.0)
    if threshold is not None and straddling:
        keep = (estimate >= threshold) | (high >= threshold)
        docs, matches, pair_matches, pairwise, estimate = docs[keep], matches[keep], pair_matches[keep], \
            pairwise[keep], estimate[keep]
        low, high, sharing = low[keep], high[keep], sharing[keep]
    clipped = np.clip(estimate, 0.0, 1.0)
    total = np.maximum(np.clip(pairwise, 0.0, 1.0).sum(axis=1), 3.0 * clipped)
    variance = np.asarray(variance_3way(clipped, total, bits, k), dtype=np.float64)
    variance += (sharing - 1.0) * clipped * (1.0 - clipped) / k  # eq. D6 (0 without densification)
    return ScoredTriples(
        docs=docs,
        matches=matches,
        pair_matches=pair_matches,
        estimate=estimate,
        stderr=np.sqrt(np.maximum(variance, 0.0)),
        ci_low=low,
        ci_high=high,
        pairwise=pairwise,
        exact=np.full(estimate.size, np.nan),
    )


def triple_union(estimate: np.ndarray, pairwise: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """n_123 = |S_1 ∪ S_2 ∪ S_3| as the estimates give it: float64[t].

    By inclusion–exclusion n_123 = Σ f_i − Σ a_ij + a with a = R n_123 and a_ij = R_ij/(1 + R_ij)(f_i + f_j) (the
    2-way conversion), so n_123 = (Σ f_i − Σ a_ij)/(1 − R), the estimates clipped to [0, 1] and the result kept
    within [max f_i, Σ f_i] (what any three sets allow): ψ varies slowly with n, so a rough n serves eq. D6.

    Args:
        estimate: float64[t] R̂ of each triple; pairwise: float64[t, 3] R̂_12, R̂_13, R̂_23; sizes: float64[t, 3] f_i.
    """
    resemblance = np.clip(estimate, 0.0, 1.0)
    pairs = np.clip(pairwise, 0.0, 1.0)
    pair_sums = sizes[:, [0, 0, 1]] + sizes[:, [1, 2, 2]]
    intersections = (pairs / (1.0 + pairs) * pair_sums).sum(axis=1)
    total = sizes.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        union = (total - intersections) / (1.0 - resemblance)
    return np.clip(np.nan_to_num(union, nan=total, posinf=total), sizes.max(axis=1), total)
