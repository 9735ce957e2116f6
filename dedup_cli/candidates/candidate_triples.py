"""Candidate triples: the triangles of the candidate pairs whose 2-way estimate is at least R0 − margin.

A triple can reach 3-way resemblance R ≥ R0 only if each of its pairs can, since R ≤ min(R_12, R_13, R_23)
(docs/estimators.md, "Three-way"). So the candidate triples are the triangles of the graph whose edges are the
LSH candidate pairs with a 2-way estimate R̂_ij ≥ R0 − margin, the margin absorbing the estimation noise of a
pair that truly sits at R0 (:func:`pair_margin`). Three documents sharing an LSH bucket are pairwise
candidates, so bucket triples are among these triangles automatically. The banding is chosen for the per-pair
recall of :mod:`dedup_cli.candidates.triple_recall`, so that enough qualifying triples become candidates.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from dedup_cli.candidates.triangles import WEDGE_BATCH, triangles
from dedup_cli.candidates.triple_recall import TRIPLE_MARGIN_Z
from dedup_cli.estimates.half_bit import is_half_bit, variance_half_bit
from dedup_cli.estimates.two_way import variance_2way


class EstimatedPairs(Protocol):
    """Pairs with a 2-way estimate each (e.g. ``dedup_cli.estimates.pairs.ScoredPairs``)."""

    first: np.ndarray  # int64[n]
    second: np.ndarray  # int64[n]
    estimate: np.ndarray  # float64[n]


def pair_margin(threshold: float, num_perm: int, bits: float, z: float = TRIPLE_MARGIN_Z,
                sharing: float = 1.0) -> float:
    """How far below R0 a pair's 2-way estimate may fall and the pair still be kept for triples.

    z times the sparse-limit standard error of R̂_b at R = R0 (Li & König 2010, eq. 11 with
    C_1 = C_2 = 2^-b): z · sqrt(E_b (1 − E_b) / k) / (1 − 2^-b), E_b = 2^-b + (1 − 2^-b) R0. A pair whose
    true resemblance is R0 has its estimate below R0 − margin with probability about Φ(−z) (0.00135 at
    z = 3); a pair above R0 even less, because its estimate is centred higher. On densified one permutation
    hashing the variance is that of eq. D4 (b = 1/2: eq. D5) at the largest sharing factor ψ of any pair
    (``sharing``, :func:`dedup_cli.estimates.densified.largest_sharing_factor`): the margin of the noisiest pair.

    Args:
        threshold: R0 in (0, 1].
        num_perm: k, the number of positions the pair estimates use (XOR bits with b = 1/2).
        bits: b of the pair estimates, 1..64, or 0.5 for b = 1/2 (then the variance is eq. 26's).
        z: normal quantile; 3 keeps about 99.87 % of pairs at R0.
        sharing: ψ, 1 for k independent permutations.

    Returns:
        The margin, a float ≥ 0 (0 at R0 = 1, where the estimate has no spread).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold {threshold} must be in (0, 1]")
    if z < 0:
        raise ValueError(f"margin quantile z = {z} must be ≥ 0; 3 is the usual choice")
    squared = threshold * threshold
    if is_half_bit(bits):
        variance = float(variance_half_bit(threshold, 0.0, 0.0, num_perm)) * (1.0 + sharing * squared) / (
            1.0 + squared)
    else:
        variance = float(variance_2way(threshold, 0.0, 0.0, bits, num_perm)) + (
            sharing - 1.0) * threshold * (1.0 - threshold) / num_perm
    return z * math.sqrt(max(variance, 0.0))


def pair_floor(threshold: float, num_perm: int, bits: float, z: float = TRIPLE_MARGIN_Z,
               sharing: float = 1.0) -> float:
    """R0 − :func:`pair_margin`: the lowest 2-way estimate a pair may have and still be an edge of a candidate
    triple (arguments as :func:`pair_margin`'s). ``find`` computes it once, in its plan
    (:mod:`dedup_cli.engine.stages.plan`), for every stage that needs it."""
    return threshold - pair_margin(threshold, num_perm, bits, z, sharing)


def candidate_triples(
    pairs: EstimatedPairs, num_docs: int, threshold: float, bits: int, num_perm: int, z: float = TRIPLE_MARGIN_Z,
    max_wedges: int = WEDGE_BATCH, floor: float | None = None,
) -> np.ndarray:
    """Candidate triples: triangles of the LSH candidate pairs whose estimate is ≥ R0 − :func:`pair_margin`.

    Args:
        pairs: every LSH candidate pair, scored with ``bits``-bit values (not only the accepted ones).
        num_docs: documents in the store.
        threshold: R0.
        bits: b of ``pairs.estimate`` (the margin is that estimate's standard error).
        num_perm: k.
        z: the margin in standard errors.
        max_wedges: wedges per batch of :func:`triangles`.
        floor: R0 − margin when already known (:func:`pair_floor` of these arguments, as ``find``'s plan holds
            it); None computes it here.

    Returns:
        int64[n_candidates, 3], rows ascending, sorted.
    """
    if floor is None:
        floor = pair_floor(threshold, num_perm, bits, z)
    kept = pairs.estimate >= floor
    return triangles(pairs.first[kept], pairs.second[kept], num_docs, max_wedges=max_wedges)
