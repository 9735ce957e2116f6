"""``eval``'s report: a JSON-ready record holding every number it measured, and the text summary for stderr.

Numbers are rounded to 6 significant digits; an estimate is ``{"value", "stderr", "ci_low", "ci_high"}`` (a 95 %
interval), and ``null`` where nothing could be estimated (no sampled pair in a bin, nothing reported).
"""

from __future__ import annotations

from typing import Any

from dedup_cli.candidates.banding import Banding
from dedup_cli.engine.stages.results import EvalResult
from dedup_cli.evaluation.accuracy import DomainAccuracy
from dedup_cli.evaluation.retrieval import Retrieval
from dedup_cli.evaluation.survey import Estimate
from dedup_cli.options import checks  # checks.counted: eval_summary's own `counted` is a flag
from dedup_cli.options.vocabulary import band_bits_label, bits_label


def number(value: float | None) -> float | None:
    """6 significant digits (a probability of 2e-6 keeps its digits, unlike rounding to 6 places)."""
    return None if value is None else float(f"{value:.6g}")


def estimate_record(estimate: Estimate | None) -> dict[str, float | None] | None:
    if estimate is None:
        return None
    return {name: number(value) for name, value in estimate.record().items()}


def _banding(banding: Banding | None) -> dict[str, float] | None:
    if banding is None:
        return None
    return {"bands": banding.bands, "rows": banding.rows, "band_bits": banding.band_bits}


def _domain(domain: DomainAccuracy) -> dict[str, Any]:
    return {"low": domain.low, "high": domain.high, "pairs": domain.pairs,
            "population": estimate_record(domain.population), "bias": estimate_record(domain.bias),
            "rmse": estimate_record(domain.rmse), "variance_ratio": estimate_record(domain.variance_ratio),
            "coverage": estimate_record(domain.coverage)}


def _retrieval(retrieval: Retrieval) -> dict[str, Any]:
    return {"threshold": retrieval.threshold, "bits": retrieval.bits, "verify": retrieval.verify,
            "precision": estimate_record(retrieval.precision), "recall": estimate_record(retrieval.recall),
            "reported": estimate_record(retrieval.reported), "true": estimate_record(retrieval.true),
            "outside_truth": retrieval.outside_truth}


def eval_record(result: EvalResult) -> dict[str, Any]:
    """Every number ``eval`` measured, as one JSON-ready object (docs/evaluation.md lists the fields)."""
    strata = [{"name": stratum.name, "banded": stratum.banded, "low": stratum.low, "high": stratum.high,
               "population": stratum.population, "drawn": stratum.drawn, "measured": int(measured),
               "weight": number(stratum.population / measured) if measured else None}
              for stratum, measured in zip(result.strata, result.measured.tolist(), strict=True)]
    truth = result.truth
    return {
        "store": result.store, "documents": result.documents, "eligible": result.eligible,
        "pairs": result.population, "num_perm": result.num_perm, "stored_bits": result.stored_bits,
        "threshold": result.threshold, "bits": result.bits, "evaluated_bits": result.evaluated_bits,
        "banding": _banding(result.banding), "frame": _banding(result.frame), "reach": result.reach,
        "candidates": result.candidates,
        "banded": result.banded, "oversized_buckets": result.oversized_buckets,
        "sample": {"requested": result.sample, "seed": result.seed,
                   "drawn": sum(stratum.drawn for stratum in result.strata), "measured": int(result.measured.sum()),
                   "unverifiable_documents": result.unverifiable, "strata": strata},
        "estimators": [{"bits": accuracy.bits, "overall": _domain(accuracy.overall),
                        "bins": [_domain(domain) for domain in accuracy.bins]} for accuracy in result.estimators],
        "s_curve": [{"low": point.low, "high": point.high, "pairs": point.pairs,
                     "resemblance": number(point.resemblance), "measured": estimate_record(point.measured),
                     "predicted": number(point.predicted)} for point in result.s_curve],
        "accuracy": {
            "source": result.accuracy_source,
            "truth": None if truth is None else {"path": truth.path, "pairs": int(truth.resemblance.size),
                                                 "ignored": truth.ignored, "floor": number(truth.floor)},
            "at_threshold": [_retrieval(retrieval) for retrieval in result.at_threshold],
            "sweep": [_retrieval(retrieval) for retrieval in result.sweep],
        },
        "storage": {
            "low": number(result.storage.low), "high": number(result.storage.high), "pairs": result.storage.pairs,
            "lines": [{"bits": line.bits, "storage_factor": number(line.storage_factor),
                       "points": [{"num_perm": k, "bytes": size, "stderr": number(error)} for k, size, error
                                  in zip(line.num_perms, line.bytes, line.stderr, strict=True)]}
                      for line in result.storage.lines],
            "measured": [{"bits": point.bits, "num_perm": point.num_perm, "bytes": point.bytes,
                          "rmse": estimate_record(point.rmse)} for point in result.storage.measured],
        },
        "recall_curves": [{"recall": curve.recall, "banding": _banding(curve.banding),
                           "recall_above_threshold": estimate_record(curve.overall),
                           "points": [{"low": number(point.low), "high": number(point.high), "pairs": point.pairs,
                                       "resemblance": number(point.resemblance),
                                       "measured": estimate_record(point.measured),
                                       "predicted": number(point.predicted)} for point in curve.points]}
                          for curve in result.recall_curves],
        "seconds": number(result.seconds),
    }


def _value(estimate: Estimate | None, digits: int = 3, signed: bool = False) -> str:
    if estimate is None:
        return "–"
    return f"{estimate.value:+.{digits}f}" if signed else f"{estimate.value:.{digits}f}"


def _with_interval(estimate: Estimate | None, counted: bool) -> str:
    if estimate is None:
        return "–"
    if counted:
        return f"{estimate.value:.3f}"
    if estimate.ci_low == estimate.ci_high:
        return f"{estimate.value:.3f} (census)"  # every pair that could count was sampled
    return f"{estimate.value:.3f} [{estimate.ci_low:.3f}, {estimate.ci_high:.3f}]"


def eval_summary(result: EvalResult, written: str = "") -> list[str]:
    """The text summary ``dedup eval`` prints on stderr; its second line ends with ``written``, the files the run
    wrote as :func:`dedup_cli.cli.summaries.written` words them."""
    banding = result.banding
    excluded = sum(stratum.drawn for stratum in result.strata) - int(result.measured.sum())
    frame = "" if result.frame is None else f" and of {result.frame.bands}×{result.frame.rows} bands"
    lines = [
        f"{result.store}: {result.documents:,} documents ({result.eligible:,} with shingles), {result.population:,} "
        f"pairs; find at R0 = {result.threshold:g}, b = {bits_label(result.bits)}: {banding.bands}×{banding.rows} "
        f"bands on {band_bits_label(banding.band_bits)}, {result.candidates:,} candidates",
        f"sample: {sum(s.drawn for s in result.strata):,} pairs in {len(result.strata)} strata (seed {result.seed}; "
        f"{result.banded:,} banded pairs: candidates of find's banding{frame}), {int(result.measured.sum()):,} "
        f"re-read, {excluded} excluded ({len(result.unverifiable)} documents unreadable or changed) in "
        f"{result.seconds:.2f} s{written}",
        f"R̂ against the exact R over all pairs (k = {result.num_perm}; weighted by the design):",
        " " * 16 + "".join(f"{'b = ' + bits_label(accuracy.bits):>10}" for accuracy in result.estimators),
    ]
    rows = (("bias", lambda d: _value(d.bias, 4, signed=True)), ("RMSE", lambda d: _value(d.rmse, 4)),
            ("MSE / Var", lambda d: _value(d.variance_ratio, 3)), ("95 % coverage", lambda d: _value(d.coverage)))
    for name, show in rows:
        lines.append(f"  {name:14}" + "".join(f"{show(accuracy.overall):>10}" for accuracy in result.estimators))
    curve = [point for point in result.s_curve if point.measured is not None]
    lines.append("S-curve, Pr(candidate) by exact R:   " + "  ".join(f"{point.low:.1f}+" for point in curve))
    lines.append("  measured                          " + "".join(f"{_value(point.measured, 2):>6}" for point in curve))
    lines.append("  predicted                         " + "".join(f"{point.predicted or 0:>6.2f}" for point in curve))
    if result.reach > 0:
        lines.append(f"  (below R = {result.reach:g} the banded strata hold under 99 % of the pairs: the measured "
                     "share, and recall below that threshold, can be too high)")
    source = (f"counted against {result.truth.path}" if result.truth is not None
              else "estimated from the sample, 95 % intervals")
    lines.append(f"find at R0 = {result.threshold:g}, precision and recall ({source}):")
    counted = result.truth is not None
    for retrieval in result.at_threshold:
        lines.append(f"  b = {bits_label(retrieval.bits)}, verify {retrieval.verify:10} precision "
                     f"{_with_interval(retrieval.precision, counted)}  recall "
                     f"{_with_interval(retrieval.recall, counted)}")
    lines += _recall_curve_lines(result)
    storage = ", ".join(f"b = {bits_label(line.bits)}: {line.storage_factor:.3g}" for line in result.storage.lines)
    lines.append(f"storage factor B(b) = b·k·Var near R0 (Li & König eq. 12): {storage}")
    return lines


def _recall_curve_lines(result: EvalResult) -> list[str]:
    """Measured recall of banding against the exact R above R0, for the default recall and the chosen one."""
    if not result.recall_curves:
        return []
    points = result.recall_curves[0].points
    lines = ["recall of banding above R0 by exact R, for the banding each --recall chooses (measured; predicted):",
             "  --recall  banding  R ≥ R0  " + "".join(f"{point.low:>6.2f}+" for point in points)]
    for curve in result.recall_curves:
        shape = f"{curve.banding.bands}×{curve.banding.rows}"
        lines.append(f"  {curve.recall:<8g}  {shape:<7}  {_value(curve.overall):>6}  "
                     + "".join(f"{_value(point.measured):>7}" for point in curve.points))
        lines.append(" " * 29 + "".join(f"{'–' if point.predicted is None else f'{point.predicted:.3f}':>7}"
                                        for point in curve.points))
    return lines


def eval_warnings(result: EvalResult) -> list[str]:
    """What changes the meaning of ``dedup eval``'s measures: documents of the sample that could not be re-read."""
    if not result.unverifiable:
        return []
    are = "is" if len(result.unverifiable) == 1 else "are"
    return [f"{checks.counted(len(result.unverifiable), 'document')} {are} gone or changed since signing (e.g. "
            f"{result.unverifiable[0]}); their sampled pairs were left out and the others of their stratum weigh more"]
