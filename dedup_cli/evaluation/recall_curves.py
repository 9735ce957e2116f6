"""Measured recall against similarity for two recalls side by side: what ``find --recall`` buys on this store.

For each compared recall (:func:`dedup_cli.candidates.recall_costs.compared_recalls`: the default 0.99 and the one
asked for, or 0.99 and 0.999), the banding ``find`` would choose for it, and over the sampled pairs whose exact
resemblance R is at least R0 the share that the banding makes candidates, overall and per slice of [R0, 1]: the
recall of banding against R. Pairs just above R0 are the ones a higher recall rescues; the predicted S-curve
1 − (1 − E^rows)^bands (Mining of Massive Datasets §3.4.2) is averaged over the same pairs beside it. Each share is
a ratio of two design-weighted totals (:mod:`dedup_cli.evaluation.survey`), so it speaks for every pair of the
store, not only for those sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.candidates.banding import Banding, PairSizes
from dedup_cli.evaluation.retrieval import CurvePoint, curve_points
from dedup_cli.evaluation.survey import Estimate, StratifiedSample

RECALL_SLICES = 5
"""Equal slices of [R0, 1] the recall is measured in: a fifth of the way from R0 to identical each."""


@dataclass(frozen=True)
class RecallCurve:
    """The recall of one banding over the sampled pairs at or above R0, overall and per slice of R."""

    recall: float  # the recall at R0 the banding was chosen for
    banding: Banding
    overall: Estimate | None  # the share of pairs with R ≥ R0 that are candidates (None: no such pair)
    points: list[CurvePoint]  # per slice of [R0, 1]: that share, and the S-curve's mean


def recall_curve(design: StratifiedSample, exact: np.ndarray, candidate: np.ndarray, recall: float,
                 banding: Banding, threshold: float, slices: int = RECALL_SLICES,
                 sizes: PairSizes | None = None) -> RecallCurve:
    """The measured recall of ``banding`` against the exact resemblance, over the pairs with R ≥ R0.

    Args:
        design: the stratified sample the pairs were drawn by.
        exact: float64[n], each sampled pair's exact resemblance.
        candidate: bool[n], whether ``banding`` makes it a candidate.
        recall: the recall ``banding`` was chosen for.
        banding: bands × rows of B-bit values.
        threshold: R0.
        slices: equal slices of [R0, 1].
        sizes: the pairs' shingle counts, for values of one permutation hashing (each pair's own S-curve).
    """
    true = (exact >= threshold).astype(np.float64)
    width = (1.0 - threshold) / slices
    # the slice of each pair at or above R0 (R = 1 in the last); -1 below R0
    index = np.where(exact >= threshold,
                     np.minimum(((exact - threshold) / width).astype(np.int64) if width > 0 else 0, slices - 1), -1)
    edges = [threshold + slice_ * width for slice_ in range(slices + 1)]
    points = curve_points(design, exact, candidate, banding, index, edges, sizes)
    hits = candidate.astype(np.float64)
    return RecallCurve(recall, banding, design.proportion(hits * true, true), points)
