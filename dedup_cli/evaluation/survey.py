"""Design-based estimators for a stratified simple random sample: totals, ratios and their variances.

The population is split into H strata of N_h units; n_h units are drawn from stratum h by simple random sampling
without replacement, independently across strata. Unit i of stratum h then carries the weight w_i = N_h / n_h, the
inverse of its inclusion probability, and

- the Horvitz–Thompson total Ŷ = Σ w_i y_i is unbiased for Y = Σ over the population of y (Horvitz & Thompson
  1952; Cochran, *Sampling Techniques*, 1977, eq. 5.3), with the unbiased variance estimate
  v(Ŷ) = Σ_h N_h² (1 − n_h/N_h) s²_h / n_h, s²_h the sample variance of y in stratum h (Cochran eq. 5.10);
- a ratio R = Y / X (a precision, a recall, a mean over a domain: x its indicator) is estimated by Ŷ / X̂,
  consistent with a bias of order 1/n, with the linearised (Taylor) variance v(Ŷ − R̂ X̂) / X̂², i.e. the formula
  above applied to the residuals e_i = y_i − R̂ x_i (Cochran §6.11; Särndal, Swensson & Wretman, *Model Assisted
  Survey Sampling*, 1992, §5.6).

Intervals are the normal ones, estimate ± z·stderr, clipped to the range the quantity can take, except for
proportions (a share of binary y ⊆ x: precision, recall, coverage, the candidate share of a bin), whose interval is
Wilson's at the effective sample size n_eff = p̂(1 − p̂)/v(p̂) (Korn & Graubard 1998): it stays inside [0, 1] and does
not collapse to a point when every sampled unit agrees (p̂ = 0 or 1, v = 0), where n_eff is then the number of
sampled units of the domain in strata that were not taken whole. docs/evaluation.md says why the weights make
these unbiased, and what no interval from a sample can show (units of a kind the sample never met).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from dedup_cli.estimates.intervals import wilson_interval


@dataclass(frozen=True)
class Estimate:
    """An estimate with its standard error and confidence interval."""

    value: float
    stderr: float
    ci_low: float
    ci_high: float

    def record(self) -> dict[str, Any]:
        return {"value": self.value, "stderr": self.stderr, "ci_low": self.ci_low, "ci_high": self.ci_high}

    @classmethod
    def exact(cls, value: float) -> Estimate:
        """A number known exactly (from a census or a truth file): no error, a point interval."""
        return cls(value, 0.0, value, value)


def normal_quantile(level: float) -> float:
    """z with Pr(|Z| ≤ z) = ``level`` for a standard normal Z."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


@dataclass(frozen=True)
class StratifiedSample:
    """The design a sample was drawn with, and the stratum of each measured unit.

    Attributes:
        stratum: int64[n], the stratum of each measured unit (0 … H − 1).
        population: int64[H], N_h, the units of each stratum.
        level: the confidence level of the intervals.

    n_h (:attr:`measured`) counts the units measured in stratum h. When some drawn units could not be measured,
    the others stand for them (their weight rises to N_h / n_h): the missing ones are taken to be missing at random
    within their stratum (docs/evaluation.md, "Documents that cannot be re-read").
    """

    stratum: np.ndarray
    population: np.ndarray
    level: float = 0.95

    def __post_init__(self) -> None:
        stratum = np.asarray(self.stratum, dtype=np.int64)
        population = np.asarray(self.population, dtype=np.int64)
        if stratum.size and (stratum.min() < 0 or stratum.max() >= population.size):
            raise ValueError("every unit's stratum must be one of the strata")
        object.__setattr__(self, "stratum", stratum)
        object.__setattr__(self, "population", population)

    @property
    def measured(self) -> np.ndarray:
        """int64[H]: n_h, the measured units of each stratum."""
        return np.bincount(self.stratum, minlength=self.population.size).astype(np.int64)

    @property
    def weights(self) -> np.ndarray:
        """float64[n]: w_i = N_h / n_h of each measured unit, the inverse of its inclusion probability."""
        measured = self.measured
        per_stratum = self.population / np.maximum(measured, 1)
        return per_stratum[self.stratum]

    def _variance_of_total(self, values: np.ndarray) -> float:
        """v(Ŷ) = Σ_h N_h² (1 − n_h/N_h) s²_h / n_h (Cochran 1977, eq. 5.10); s²_h = 0 where n_h < 2."""
        measured = self.measured
        sums = np.bincount(self.stratum, weights=values, minlength=self.population.size)
        means = sums / np.maximum(measured, 1)
        deviations = values - means[self.stratum]
        squares = np.bincount(self.stratum, weights=deviations * deviations, minlength=self.population.size)
        spread = np.where(measured > 1, squares / np.maximum(measured - 1, 1), 0.0)
        population = self.population.astype(np.float64)
        finite = np.where(measured > 0, 1.0 - measured / np.maximum(population, 1.0), 0.0)
        return float(np.sum(population**2 * finite * spread / np.maximum(measured, 1)))

    def _interval(self, value: float, variance: float, low: float | None, high: float | None) -> Estimate:
        stderr = float(np.sqrt(max(variance, 0.0)))
        z = normal_quantile(self.level)
        ci_low, ci_high = value - z * stderr, value + z * stderr
        if low is not None:
            ci_low, ci_high = max(ci_low, low), max(ci_high, low)
        if high is not None:
            ci_low, ci_high = min(ci_low, high), min(ci_high, high)
        return Estimate(float(value), stderr, float(ci_low), float(ci_high))

    def total(self, y: np.ndarray) -> Estimate:
        """The Horvitz–Thompson total Ŷ = Σ w_i y_i of y (float64[n]) and its interval (Cochran eq. 5.3, 5.10)."""
        values = np.asarray(y, dtype=np.float64)
        return self._interval(float(np.sum(self.weights * values)), self._variance_of_total(values), None, None)

    def ratio(self, y: np.ndarray, x: np.ndarray, low: float | None = None, high: float | None = None
              ) -> Estimate | None:
        """R̂ = Ŷ / X̂ with its linearised variance v(Σ w e) / X̂², e_i = y_i − R̂ x_i (Cochran §6.11).

        Args:
            y, x: float64[n] (or bool) per measured unit; a domain mean has x = the domain's indicator.
            low, high: the range of the ratio (0 and 1 for a proportion), to clip the interval to.

        Returns:
            The estimate, or None when X̂ = 0 (no measured unit has x ≠ 0: the ratio is not estimable).
        """
        numerator = np.asarray(y, dtype=np.float64)
        denominator = np.asarray(x, dtype=np.float64)
        weights = self.weights
        x_total = float(np.sum(weights * denominator))
        if x_total == 0.0:
            return None
        value = float(np.sum(weights * numerator)) / x_total
        residuals = numerator - value * denominator
        return self._interval(value, self._variance_of_total(residuals) / x_total**2, low, high)


    def proportion(self, y: np.ndarray, x: np.ndarray) -> Estimate | None:
        """p̂ = Ŷ / X̂ for binary y ⊆ x (0/1 or bool[n]), with a Wilson interval at the effective sample size.

        The point estimate and standard error are :meth:`ratio`'s; the interval is Wilson's for p̂ with
        n_eff = p̂(1 − p̂)/v(p̂) (Korn & Graubard 1998), or, when v(p̂) = 0, n_eff = the sampled units with x = 1 in
        strata sampled in part (none: p̂ is exact, a census of the domain). None when X̂ = 0.
        """
        estimate = self.ratio(y, x, low=0.0, high=1.0)
        if estimate is None:
            return None
        value, variance = estimate.value, estimate.stderr**2
        if variance > 0.0 and 0.0 < value < 1.0:
            effective = value * (1.0 - value) / variance
        else:
            partial = self.measured < self.population
            effective = float(np.count_nonzero((np.asarray(x) != 0) & partial[self.stratum]))
            if effective == 0.0:
                return Estimate.exact(value)
        low, high = wilson_interval(value * effective, effective, self.level)
        return Estimate(value, estimate.stderr, float(low), float(high))


def root_of(mean_square: Estimate) -> Estimate:
    """√ of a mean square (an RMSE from an MSE): the interval's ends map through √, the standard error by the delta
    method, se(√m) = se(m) / (2 √m)."""
    root = float(np.sqrt(max(mean_square.value, 0.0)))
    stderr = mean_square.stderr / (2.0 * root) if root > 0 else 0.0
    return Estimate(root, stderr, float(np.sqrt(max(mean_square.ci_low, 0.0))),
                    float(np.sqrt(max(mean_square.ci_high, 0.0))))
