"""How close R̂ comes to the exact resemblance on a sample of pairs, and what storing fewer bits costs.

For each b, over the sampled pairs weighted by the design (:mod:`dedup_cli.evaluation.survey`), per bin of the exact
resemblance R and over all pairs:

- bias, the mean of R̂_b − R (Li & König 2010 prove R̂_b unbiased, eq. 9);
- RMSE, √ of the mean of (R̂_b − R)²;
- the variance ratio, mean (R̂_b − R)² over the mean of Var(R̂_b) of eq. 11 at each pair's exact R: 1 when eq. 11
  describes the errors (it is the ratio of measured to predicted variance, the bias being negligible);
- coverage, the share of pairs whose 95 % interval (Wilson on the match count mapped through eq. 9, Dembele & Lo
  2017) contains R.

Each is a ratio of two design-weighted totals, with a linearised standard error: these describe the errors of this
store's signatures, a finite-population quantity that the sample estimates without a model.

The storage trade-off (Li & König eq. 12, B(b) = b·k·Var(R̂_b)): the standard error √(Var/k) against the bytes per
document k·b/8, as lines for several b and k, and as points measured on the sampled pairs near R0 from the first k'
positions of their stored signatures. b = 1/2 (eqs. 25–26) is measured the same way: its k' positions give k'/2
XOR bits, k'/16 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.estimates.densified import Densification, densified_variance_2way, densified_variance_half_bit
from dedup_cli.estimates.half_bit import estimate_half_bit, is_half_bit, variance_half_bit
from dedup_cli.estimates.two_way import estimate_2way, variance_2way
from dedup_cli.evaluation.design import resemblance_bins
from dedup_cli.evaluation.survey import Estimate, StratifiedSample, root_of

STORAGE_NUM_PERMS = (16, 32, 64, 128, 256, 512, 1024, 2048)  # k of the formula's lines
STORAGE_BITS = (1, 2, 4, 8, 32)  # b of the formula's lines, besides the evaluated ones; 32 is full width
STORAGE_HALF_WIDTH = 0.1  # the measured points use the sampled pairs with |R − R0| ≤ this


def pair_variance(R: np.ndarray | float, r1: np.ndarray | float, r2: np.ndarray | float, bits: float,
                  num_perm: int, densification: Densification | None = None) -> np.ndarray:
    """Var(R̂_b) from k = ``num_perm`` positions: eq. 11, or with b = 1/2 eq. 26 of their k/2 XOR bits; on the
    bins of one permutation hashing (``densification``), eq. D4 or D5 at each pair's sizes f = r·D."""
    if densification is not None:
        f1, f2 = densification.set_sizes(r1), densification.set_sizes(r2)
        if is_half_bit(bits):
            return np.asarray(densified_variance_half_bit(R, f1, f2, num_perm), dtype=np.float64)
        return np.asarray(densified_variance_2way(R, f1, f2, int(bits), num_perm), dtype=np.float64)
    if is_half_bit(bits):
        return np.asarray(variance_half_bit(R, r1, r2, num_perm / 2), dtype=np.float64)
    return np.asarray(variance_2way(R, r1, r2, int(bits), num_perm), dtype=np.float64)


def pair_estimate(fraction: np.ndarray, r1: np.ndarray, r2: np.ndarray, bits: float) -> np.ndarray:
    """R̂_b from the fraction of agreeing values: eq. 9, or with b = 1/2 eq. 25 of the agreeing XOR bits."""
    if is_half_bit(bits):
        return np.asarray(estimate_half_bit(fraction, r1, r2), dtype=np.float64)
    return np.asarray(estimate_2way(fraction, r1, r2, int(bits)), dtype=np.float64)


@dataclass(frozen=True)
class DomainAccuracy:
    """The errors of R̂_b over the pairs whose exact resemblance lies in [low, high) (the last bin includes 1)."""

    low: float
    high: float
    pairs: int  # sampled pairs in the domain
    population: Estimate  # pairs of the store in the domain
    bias: Estimate | None  # None: no sampled pair in the domain
    rmse: Estimate | None
    variance_ratio: Estimate | None
    coverage: Estimate | None


@dataclass(frozen=True)
class EstimatorAccuracy:
    """The errors of the b-bit estimator over all pairs and per bin of the exact resemblance."""

    bits: float  # b, or 0.5 for b = 1/2
    overall: DomainAccuracy
    bins: list[DomainAccuracy]


def domain_accuracy(design: StratifiedSample, inside: np.ndarray, error: np.ndarray, variance: np.ndarray,
                    covered: np.ndarray, low: float, high: float) -> DomainAccuracy:
    """Bias, RMSE, variance ratio and coverage over one domain (bool[n] ``inside``) of the sampled pairs.

    Args:
        error: float64[n], R̂_b − R.
        variance: float64[n], Var(R̂_b) by eq. 11 (eq. 26 for b = 1/2) at the exact R; pairs where it is 0 (R = 1)
            or infinite (b = 1/2 at R = 0) are left out of the ratio.
        covered: bool[n], the pair's interval contains R.
    """
    indicator = inside.astype(np.float64)
    squares = error * error
    # eq. 26 (b = 1/2) is infinite at R = 0 in the sparse limit: no finite variance to compare there either
    usable = (variance > 0) & np.isfinite(variance)
    variance = np.where(usable, variance, 0.0)
    positive = indicator * usable
    mean_square = design.ratio(squares * indicator, indicator, low=0.0)
    return DomainAccuracy(
        low=low, high=high, pairs=int(np.count_nonzero(inside)), population=design.total(indicator),
        bias=design.ratio(error * indicator, indicator),
        rmse=None if mean_square is None else root_of(mean_square),
        variance_ratio=design.ratio(squares * positive, variance * positive, low=0.0),
        coverage=design.proportion(covered & inside, inside),
    )


def estimator_accuracy(design: StratifiedSample, bits: float, exact: np.ndarray, estimate: np.ndarray,
                       ci_low: np.ndarray, ci_high: np.ndarray, variance: np.ndarray, bins: int
                       ) -> EstimatorAccuracy:
    """The errors of R̂_b (float64[n] ``estimate``, its interval and eq. 11's ``variance``) against ``exact``."""
    error = estimate - exact
    covered = (ci_low <= exact) & (exact <= ci_high)
    binned = resemblance_bins(exact, bins)
    everything = np.ones(exact.size, dtype=bool)
    return EstimatorAccuracy(
        bits=bits,
        overall=domain_accuracy(design, everything, error, variance, covered, 0.0, 1.0),
        bins=[domain_accuracy(design, binned == index, error, variance, covered, index / bins, (index + 1) / bins)
              for index in range(bins)],
    )


def prefix_matches(first_values: np.ndarray, second_values: np.ndarray, num_perms: np.ndarray) -> np.ndarray:
    """int64[n, len(num_perms)]: matches of each pair among the first k' positions, for each k' in ``num_perms``.

    ``first_values``, ``second_values``: uint[n, k], the b-bit values of each pair's two documents (the XOR bits
    with b = 1/2: then k' counts XOR bits).
    """
    agree = np.cumsum(first_values == second_values, axis=1, dtype=np.int64)
    return agree[:, np.asarray(num_perms) - 1]


@dataclass(frozen=True)
class StorageLine:
    """Li & König eq. 12 for one b: the storage factor B(b) and the standard error it gives at each k."""

    bits: float  # b, or 0.5 for b = 1/2
    storage_factor: float  # B(b) = b·Var(R̂_b) at k = 1, the mean over the domain's pairs
    num_perms: list[int]
    bytes: list[float]  # k·b/8
    stderr: list[float]  # √(Var(R̂_b)/k)


@dataclass(frozen=True)
class StoragePoint:
    """The measured RMSE of R̂_b from the first k' positions of the stored signatures."""

    bits: float
    num_perm: int  # k' positions (with b = 1/2, k'/2 XOR bits)
    bytes: float
    rmse: Estimate | None


@dataclass(frozen=True)
class StorageTradeoff:
    """Error against bytes per document near R0 (|R − R0| ≤ :data:`STORAGE_HALF_WIDTH`)."""

    low: float
    high: float
    pairs: int  # sampled pairs in the domain; with none, the lines are at R = R0 exactly
    lines: list[StorageLine]
    measured: list[StoragePoint]


def storage_tradeoff(design: StratifiedSample, exact: np.ndarray, r1: np.ndarray, r2: np.ndarray,
                     matches: dict[float, np.ndarray], num_perms: list[int], threshold: float,
                     line_bits: list[float]) -> StorageTradeoff:
    """Eq. 12's lines and the measured points (see the module docstring).

    Args:
        exact: float64[n], the sampled pairs' exact resemblance; r1, r2: float64[n], their r = f/D.
        matches: for each measured b, int64[n, len(num_perms)] (:func:`prefix_matches`; with b = 1/2 the agreeing
            XOR bits among the k'/2 of the first k' positions).
        num_perms: the k' of the measured points.
        threshold: R0, the centre of the domain.
        line_bits: the b of the lines.
    """
    low, high = max(threshold - STORAGE_HALF_WIDTH, 0.0), min(threshold + STORAGE_HALF_WIDTH, 1.0)
    inside = (exact >= low) & (exact <= high)
    indicator = inside.astype(np.float64)
    pairs = int(np.count_nonzero(inside))
    lines = []
    for bits in line_bits:
        if pairs:
            unit = design.ratio(np.where(inside, pair_variance(exact, r1, r2, bits, 1), 0.0), indicator)
            unit_variance = 0.0 if unit is None else unit.value
        else:
            unit_variance = float(pair_variance(threshold, 0.0, 0.0, bits, 1))
        lines.append(StorageLine(bits, bits * unit_variance, list(STORAGE_NUM_PERMS),
                                 [k * bits / 8 for k in STORAGE_NUM_PERMS],
                                 [float(np.sqrt(unit_variance / k)) for k in STORAGE_NUM_PERMS]))
    measured = []
    for bits, counts in sorted(matches.items()):
        for column, num_perm in enumerate(num_perms):
            compared = num_perm // 2 if is_half_bit(bits) else num_perm
            error = pair_estimate(counts[:, column] / compared, r1, r2, bits) - exact
            mean_square = design.ratio(error * error * indicator, indicator, low=0.0) if pairs else None
            measured.append(StoragePoint(bits, num_perm, num_perm * bits / 8,
                                         None if mean_square is None else root_of(mean_square)))
    return StorageTradeoff(low, high, pairs, lines, measured)
