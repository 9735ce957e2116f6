"""Lower bounds that hold for every candidate pair at once: the level that keeps chance accepts rare at any count.

``find`` accepts a pair without an exact check when its lower bound on R is at least R0. A per-pair 95 % interval
leaves each pair whose true R is below R0 a chance of up to 2.5 % (one side) to clear R0; over m scored candidates
the expected number of such chance accepts is up to 0.025 · m: a few among millions of unrelated candidates
(docs/estimators.md, "Many candidates"). Bonferroni's inequality bounds that expectation by widening each pair's
interval to the level 1 − (1 − level)/m: the expected number of pairs below R0 that clear R0 by chance, summed over
all m candidates, is then at most (1 − level)/2, whatever m is. The bound is the pair's own interval
(:func:`dedup_cli.estimates.intervals.confidence_interval_2way`, ``confidence_interval_half_bit``: a Wilson interval
of the binomial match count mapped through the estimator) at that level, so it needs only the pair's match count,
k, r1, r2 and b (and, for one permutation hashing, its bins: :mod:`dedup_cli.estimates.densified`), and gives the
same floats in every engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.densified import Densification
from dedup_cli.estimates.guards import FloatArray, as_float, check_level
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.estimates.intervals import confidence_interval_2way, confidence_interval_half_bit

DECISION_LEVEL = 0.95
"""The level whose error ``find``'s decisions keep for the whole run: (1 − 0.95)/2 expected chance accepts."""

DEFAULT_RECALL = 0.99
"""The recall at R0 the banding is chosen for by default; the per-pair interval at :data:`DECISION_LEVEL` goes with
it, and a higher recall widens the interval's upper end in proportion (:func:`rescue_level`)."""


def simultaneous_level(level: float, candidates: int) -> float:
    """The per-pair level 1 − (1 − level)/m that keeps the expected chance accepts among m candidates below
    (1 − level)/2 (Bonferroni's inequality; m ≤ 1 keeps ``level``).

    Args:
        level: the level for the whole run, in (0, 1).
        candidates: m, the candidate pairs scored.

    Returns:
        A level in [``level``, 1).
    """
    level = check_level(level)
    return 1.0 - (1.0 - level) / max(int(candidates), 1)


def simultaneous_lower_bound(matches: ArrayLike, num_perm: int, r1: ArrayLike, r2: ArrayLike, bits: float,
                             candidates: int, level: float = DECISION_LEVEL,
                             densification: Densification | None = None) -> FloatArray:
    """Each pair's lower bound on R at :func:`simultaneous_level` for ``candidates`` pairs: float64[n].

    The lower end of the 2-way interval (b-bit: Li & König 2010, eq. 9; b = 1/2: eq. 25) at the widened level,
    so never above the per-pair one at ``level``.

    Args:
        matches: int64[n], agreeing positions (XOR bits with b = 1/2).
        num_perm: k, the positions compared.
        r1, r2: float64[n], r = f/D of each pair's documents.
        bits: b, or :data:`dedup_cli.estimates.half_bit.HALF_BIT`.
        candidates: m, the candidate pairs scored in this run.
        level: the level for the whole run.
        densification: the bins of one permutation hashing the values come from (None: k permutations).
    """
    low, _ = _interval(matches, num_perm, r1, r2, bits, simultaneous_level(level, candidates), densification)
    return low


def rescue_level(recall: float, level: float = DECISION_LEVEL) -> float:
    """The level of the upper bound below which a pair estimated < R0 is rejected without an exact check, for a
    banding chosen for ``recall`` at R0.

    A pair at exactly R0 has its per-pair upper bound (at ``level``) below R0 with probability (1 − level)/2: 2.5 %
    beside the 1 % the banding misses at the default recall 0.99. A higher recall scales that chance with the
    banding's, (1 − level)/2 · (1 − recall)/(1 − 0.99), so that a recall of 0.999 loses ten times fewer pairs to
    the estimate too (level 0.995, 2.81 standard errors); a recall of 0.99 or less keeps ``level``.

    Args:
        recall: the banding's recall at R0, in (0, 1).
        level: the per-pair level at the default recall.

    Returns:
        A level in [``level``, 1).
    """
    level = check_level(level)
    if recall <= DEFAULT_RECALL:
        return level
    return 1.0 - (1.0 - level) * (1.0 - recall) / (1.0 - DEFAULT_RECALL)


def rescue_upper_bound(matches: ArrayLike, num_perm: int, r1: ArrayLike, r2: ArrayLike, bits: float,
                       recall: float, level: float = DECISION_LEVEL,
                       densification: Densification | None = None) -> FloatArray:
    """Each pair's upper bound on R at :func:`rescue_level` for ``recall``: float64[n] (the upper end of the 2-way
    interval, Li & König 2010, eq. 9; b = 1/2: eq. 25), never below the per-pair one at ``level``."""
    _, high = _interval(matches, num_perm, r1, r2, bits, rescue_level(recall, level), densification)
    return high


def _interval(matches: ArrayLike, num_perm: int, r1: ArrayLike, r2: ArrayLike, bits: float, level: float,
              densification: Densification | None = None) -> tuple[FloatArray, FloatArray]:
    """Each pair's 2-way interval at ``level`` (b = 1/2: its XOR-bit interval), as float64[n] arrays."""
    if is_half_bit(bits):
        low, high = confidence_interval_half_bit(matches, num_perm, r1, r2, level=level, densification=densification)
    else:
        low, high = confidence_interval_2way(matches, num_perm, r1, r2, bits, level=level,
                                             densification=densification)
    shape = np.shape(matches)
    return (np.asarray(as_float(low), dtype=np.float64).reshape(shape),
            np.asarray(as_float(high), dtype=np.float64).reshape(shape))


@dataclass(frozen=True)
class SimultaneousBound:
    """The bound ``find`` decides with: b, k and the number m of candidate pairs scored in the run (and the bins
    of one permutation hashing, whose intervals the pairs' own are)."""

    bits: float
    num_perm: int
    candidates: int
    level: float = DECISION_LEVEL
    recall: float = DEFAULT_RECALL  # the banding's recall at R0: above 0.99, pairs just below R0 are checked too
    densification: Densification | None = None

    def unsure(self, threshold: float, estimate: np.ndarray, ci_low: np.ndarray, matches: np.ndarray,
               r1: np.ndarray, r2: np.ndarray, ci_high: np.ndarray | None = None) -> np.ndarray:
        """bool[n]: the pairs estimated ≥ R0 whose per-pair lower bound clears R0 but whose simultaneous one
        (:func:`simultaneous_lower_bound`) does not: accepted by their estimate, they could be chance accepts.
        With ``ci_high`` and a recall above 0.99, also the pairs whose per-pair upper bound is below R0 but whose
        upper bound at :func:`rescue_level` is not: rejected by their estimate, they could be the misses of a
        true pair that the recall asked for is meant to keep.

        Only those pairs are bounded again (the others are decided by their per-pair interval already), so the
        cost follows the pairs estimated ≥ R0 (and those just below it), not the candidates.
        """
        unsure = np.zeros(np.shape(estimate), dtype=bool)
        clear = np.flatnonzero((np.asarray(estimate) >= threshold) & (np.asarray(ci_low) >= threshold))
        if clear.size:
            low = simultaneous_lower_bound(np.asarray(matches)[clear], self.num_perm, np.asarray(r1)[clear],
                                           np.asarray(r2)[clear], self.bits, self.candidates, self.level,
                                           self.densification)
            unsure[clear] = low < threshold
        if ci_high is not None and rescue_level(self.recall, self.level) > self.level:
            below = np.flatnonzero(np.asarray(ci_high) < threshold)
            if below.size:
                high = rescue_upper_bound(np.asarray(matches)[below], self.num_perm, np.asarray(r1)[below],
                                          np.asarray(r2)[below], self.bits, self.recall, self.level,
                                          self.densification)
                unsure[below] = high >= threshold
        return unsure
