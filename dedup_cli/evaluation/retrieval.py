"""What the banding and ``find`` get right: the measured S-curve, precision and recall, over the pair population.

- **S-curve.** Per bin of the exact resemblance R, the share of pairs that are candidates, against the banding's
  predicted 1 − (1 − E^rows)^bands with E the per-row agreement probability (Mining of Massive Datasets §3.4.2;
  E = 2^-B + (1 − 2^-B) R for B-bit rows, Li & König 2010 eq. 4), averaged over the same pairs; for one
  permutation hashing each pair's curve is that of its documents' sizes
  (:func:`dedup_cli.candidates.banding.candidate_probability`).
- **Precision and recall** of the pairs ``find`` reports at a threshold t, a pair being a true one when R ≥ t:
  precision = #(reported and true) / #reported, recall = #(reported and true) / #true, each a ratio of two
  design-weighted totals with a linearised interval (:mod:`dedup_cli.evaluation.survey`), or counted exactly
  against a truth file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.candidates.banding import Banding, PairSizes, candidate_probability
from dedup_cli.candidates.buckets import band_keys
from dedup_cli.evaluation.design import resemblance_bins
from dedup_cli.evaluation.survey import Estimate, StratifiedSample


@dataclass(frozen=True)
class CurvePoint:
    """The candidate probability over the pairs whose exact resemblance lies in [low, high)."""

    low: float
    high: float
    pairs: int  # sampled pairs in the bin
    resemblance: float | None  # their (design-weighted) mean exact resemblance
    measured: Estimate | None  # the share that are candidates
    predicted: float | None  # the S-curve's mean over the same pairs


def s_curve(design: StratifiedSample, exact: np.ndarray, candidate: np.ndarray, banding: Banding, bins: int,
            sizes: PairSizes | None = None) -> list[CurvePoint]:
    """Measured and predicted candidate probability per bin of the exact resemblance (float64[n] ``exact``,
    bool[n] ``candidate``; ``sizes``: the pairs' shingle counts, for values of one permutation hashing)."""
    edges = [index / bins for index in range(bins + 1)]
    return curve_points(design, exact, candidate, banding, resemblance_bins(exact, bins), edges, sizes)


def curve_points(design: StratifiedSample, exact: np.ndarray, candidate: np.ndarray, banding: Banding,
                 binned: np.ndarray, edges: list[float], sizes: PairSizes | None = None) -> list[CurvePoint]:
    """Measured and predicted candidate probability of the pairs in each bin: int64[n] ``binned`` (-1: in none),
    bin i spanning ``edges[i]`` to ``edges[i + 1]``; ``sizes``: the pairs' shingle counts (one permutation
    hashing), each pair's S-curve that of its sizes."""
    predicted = candidate_probability(exact, banding.bands, banding.rows, banding.band_bits, sizes)
    hits = candidate.astype(np.float64)
    points = []
    for index in range(len(edges) - 1):
        inside = (binned == index).astype(np.float64)
        mean = design.ratio(exact * inside, inside)
        curve = design.ratio(predicted * inside, inside)
        points.append(CurvePoint(
            low=edges[index], high=edges[index + 1], pairs=int(np.count_nonzero(inside)),
            resemblance=None if mean is None else mean.value,
            measured=design.proportion(hits * inside, inside),
            predicted=None if curve is None else curve.value,
        ))
    return points


def share_a_band(first_values: np.ndarray, second_values: np.ndarray, banding: Banding) -> np.ndarray:
    """bool[n]: whether each pair agrees on every row of some band, i.e. is a candidate of ``banding``.

    ``first_values``, ``second_values``: uint[n, k], the stored B-bit values of each pair's documents. The band keys
    are :func:`dedup_cli.candidates.buckets.band_keys`, so the answer is the banding's own (buckets too large to
    keep whole are not cut here).
    """
    first_keys = band_keys(first_values, banding.bands, banding.rows)
    second_keys = band_keys(second_values, banding.bands, banding.rows)
    return np.asarray((first_keys == second_keys).any(axis=0), dtype=bool)


@dataclass(frozen=True)
class Retrieval:
    """Precision and recall of the pairs ``find`` reports at ``threshold`` with b = ``bits`` and ``verify``."""

    threshold: float
    bits: float  # b, or 0.5 for b = 1/2
    verify: str
    precision: Estimate | None  # None: nothing reported
    recall: Estimate | None  # None: no true pair
    reported: Estimate  # how many pairs find reports
    true: Estimate  # how many pairs have R ≥ threshold
    outside_truth: int | None = None  # against a truth file: reported pairs it does not list (judged exactly)


def sampled_retrieval(design: StratifiedSample, reported: np.ndarray, true: np.ndarray, threshold: float,
                      bits: float, verify: str) -> Retrieval:
    """Precision and recall estimated from the sample (bool[n] ``reported`` and ``true``)."""
    hits = (reported & true).astype(np.float64)
    return Retrieval(
        threshold=threshold, bits=bits, verify=verify,
        precision=design.proportion(hits, reported),
        recall=design.proportion(hits, true),
        reported=design.total(reported.astype(np.float64)),
        true=design.total(true.astype(np.float64)),
    )


def counted_retrieval(reported: int, true: int, hits: int, outside: int, threshold: float, bits: float,
                      verify: str) -> Retrieval:
    """Precision and recall counted exactly, against a truth file."""
    return Retrieval(
        threshold=threshold, bits=bits, verify=verify,
        precision=Estimate.exact(hits / reported) if reported else None,
        recall=Estimate.exact(hits / true) if true else None,
        reported=Estimate.exact(float(reported)), true=Estimate.exact(float(true)), outside_truth=outside,
    )
