"""``eval --plot FILE.png``: the pictures of what ``eval`` measured, drawn with matplotlib (the ``plot`` extra).

Top row, one panel per evaluated b: each sampled pair's estimate R̂_b against its exact resemblance R, with the band
R ± 2σ of Li & König 2010, eq. 11 (sparse limit); about 95 % of the pairs should fall inside it. Bottom row: the
banding's predicted S-curve (Mining of Massive Datasets §3.4.2, rows agreeing with probability E_B) with the
measured candidate probability per bin of R; precision and recall of ``find`` against the threshold, with and
without ``--verify borderline``; the standard error near R0 against the bytes a document takes (k·b/8), the storage
trade-off of eq. 12, as lines from the formula and points measured on the sample; and, beside them, the recall of
banding against R above R0 for the default recall's banding and the chosen one (or 0.99 and 0.999), predicted and
measured: what ``--recall`` buys. The figure is drawn on a
:class:`matplotlib.figure.Figure` (Agg), without pyplot's global state.
"""

from __future__ import annotations

import io
import os
import textwrap
from typing import Any

import numpy as np

from dedup_cli.atomic_files import open_output
from dedup_cli.candidates.banding import candidate_probability
from dedup_cli.engine.stages.results import EvalResult
from dedup_cli.errors import DedupError
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.evaluation.accuracy import pair_variance
from dedup_cli.options.vocabulary import band_bits_label, bits_label

INSTALL_HINT = "pip install 'dedup-cli[plot]'"


def require_matplotlib() -> None:
    """Fail early, before any work, when matplotlib is missing: a one-line error saying how to install it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise DedupError(f"{{plot}} needs matplotlib, which is not installed; install it with: {INSTALL_HINT}",
                         options=True) from None


def _colours(bits: list[float]) -> dict[float, Any]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    return {b: palette[index % len(palette)] for index, b in enumerate(sorted(bits))}


TITLE_CHARACTERS = 36
"""The longest line of a panel's title: a panel is about 3.7 inches wide, and a longer title would run into the
title of the panel beside it (a figure's layout places titles but never wraps them)."""

LEGEND_GAP_POINTS = 50
"""How far below its panel's bottom edge a legend starts: below the tick labels and the axis label (two lines of
10-point text and their padding; a log axis's 2^n labels are the tallest)."""


def _title(text: str) -> str:
    """``text`` wrapped at :data:`TITLE_CHARACTERS`, its own line breaks kept."""
    return "\n".join(textwrap.fill(line, TITLE_CHARACTERS) for line in text.split("\n"))


def _label(axes: Any, title: str, x: str, y: str, columns: int = 1, xlim: tuple[float, float] | None = None,
           ylim: tuple[float, float] | None = None) -> None:
    """Title, axis labels and limits, a light grid and the legend: what every panel ends with. The legend goes
    below the panel, outside it, so that it covers no point or line whatever the data (the figure's constrained
    layout leaves room for it)."""
    from matplotlib.transforms import offset_copy

    axes.set_title(_title(title), fontsize=10)
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    if xlim is not None:
        axes.set_xlim(*xlim)
    if ylim is not None:
        axes.set_ylim(*ylim)
    axes.grid(alpha=0.3, which="both")
    below = offset_copy(axes.transAxes, fig=axes.figure, y=-LEGEND_GAP_POINTS, units="points")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, fontsize=8, markerscale=1.5,
                ncol=columns, frameon=False)


def _estimates_panel(axes: Any, result: EvalResult, bits: float, colour: Any) -> None:
    sample = result.pairs
    scores = sample.scores[bits]
    grid = np.linspace(0.0, 1.0, 201)
    sigma = np.sqrt(pair_variance(grid, 0.0, 0.0, bits, result.num_perm))
    axes.fill_between(grid, grid - 2 * sigma, grid + 2 * sigma, color=colour, alpha=0.18,
                      label=f"R ± 2σ, Li & König eq. {26 if is_half_bit(bits) else 11}")
    axes.plot(grid, grid, color="black", linewidth=0.8, label="R̂ = R")
    candidate = sample.candidate
    axes.scatter(sample.exact[~candidate], scores.estimate[~candidate], s=6, color="0.55", alpha=0.5,
                 linewidths=0, label="sampled pair, not a candidate")
    axes.scatter(sample.exact[candidate], scores.estimate[candidate], s=8, color=colour, alpha=0.8, linewidths=0,
                 label="sampled pair, candidate")
    accuracy = next(item for item in result.estimators if item.bits == bits)
    coverage = accuracy.overall.coverage
    note = f"coverage of 95 % intervals: {coverage.value:.3f}" if coverage is not None else ""
    _label(axes, f"b = {bits_label(bits)}: estimate against exact R\n{note}", "exact resemblance R",
           f"estimate R̂ (b = {bits_label(bits)}, k = {result.num_perm})", 1, (0, 1), (-0.2, 1.05))


def _shade_unreached(axes: Any, result: EvalResult) -> None:
    if result.reach > 0:
        axes.axvspan(0, result.reach, color="0.85", alpha=0.5, linewidth=0,
                     label=f"R < {result.reach:g}: pairs mostly outside the\n"
                           "sampled strata, measured values can be high")


def _s_curve_panel(axes: Any, result: EvalResult) -> None:
    _shade_unreached(axes, result)
    banding = result.banding
    grid = np.linspace(0.0, 1.0, 201)
    axes.plot(grid, candidate_probability(grid, banding.bands, banding.rows, banding.band_bits), color="#1f77b4",
              label=f"predicted, {banding.bands}×{banding.rows} bands on {band_bits_label(banding.band_bits)}")
    points = [point for point in result.s_curve if point.measured is not None and point.resemblance is not None]
    x = np.array([point.resemblance for point in points])
    y = np.array([point.measured.value for point in points if point.measured is not None])
    low = np.array([point.measured.ci_low for point in points if point.measured is not None])
    high = np.array([point.measured.ci_high for point in points if point.measured is not None])
    axes.errorbar(x, y, yerr=[y - low, high - y], fmt="o", color="#d62728", capsize=3, markersize=4,
                  label="measured per 0.1 bin of R (95 % interval)")
    axes.axvline(result.threshold, color="0.4", linestyle=":", label=f"R0 = {result.threshold:g}")
    _label(axes, "Banding: Pr(candidate) by exact R", "exact resemblance R",
           "probability of being a candidate pair", 1, (0, 1), (-0.03, 1.03))


def _sweep_panel(axes: Any, result: EvalResult) -> None:
    if result.accuracy_source == "sample":
        _shade_unreached(axes, result)
    styles = {"none": "-", "borderline": "--"}
    for verify, style in styles.items():
        rows = [item for item in result.sweep if item.verify == verify]
        for measure, colour in (("precision", "#1f77b4"), ("recall", "#ff7f0e")):
            kept = [(item.threshold, getattr(item, measure)) for item in rows if getattr(item, measure) is not None]
            if not kept:
                continue
            x = np.array([threshold for threshold, _ in kept])
            axes.plot(x, [e.value for _, e in kept], style, color=colour, marker="o", markersize=3,
                      label=f"{measure}, verify {verify}")
            axes.fill_between(x, [e.ci_low for _, e in kept], [e.ci_high for _, e in kept], color=colour, alpha=0.12)
    axes.axvline(result.threshold, color="0.4", linestyle=":", label=f"R0 = {result.threshold:g}")
    source = "against the truth file" if result.accuracy_source == "truth" else "estimated from the sample"
    _label(axes, f"find (b = {bits_label(result.bits)}): precision, recall\n{source}\n(shaded: 95 % intervals)",
           "threshold R0 (each with its own banding)", "precision, recall", 1, (0.05, 1.0), (-0.03, 1.03))


def _recall_panel(axes: Any, result: EvalResult) -> None:
    """Recall of banding against exact R above R0 for the two compared recalls: predicted curves and measured
    points per slice of [R0, 1] (docs/evaluation.md, "What --recall buys")."""
    grid = np.linspace(result.threshold, 1.0, 101)
    lowest = 1.0
    # the two recalls are measured on the same pairs: their points are set a little apart so both show
    dodge = (1.0 - result.threshold) * 0.012
    for index, (curve, colour) in enumerate(zip(result.recall_curves, ("#1f77b4", "#d62728"), strict=False)):
        banding = curve.banding
        predicted = candidate_probability(grid, banding.bands, banding.rows, banding.band_bits)
        lowest = min(lowest, float(predicted.min()))
        axes.plot(grid, predicted, color=colour, label=f"--recall {curve.recall:g}: {banding.bands}×{banding.rows} "
                                                       "bands, predicted")
        points = [point for point in curve.points if point.measured is not None and point.resemblance is not None]
        if points:
            x = np.array([point.resemblance for point in points]) + (index - 0.5) * dodge
            y = np.array([point.measured.value for point in points if point.measured is not None])
            low = np.array([point.measured.ci_low for point in points if point.measured is not None])
            high = np.array([point.measured.ci_high for point in points if point.measured is not None])
            lowest = min(lowest, float(y.min()))  # the scale follows the values; a wide interval may leave it
            axes.errorbar(x, y, yerr=[y - low, high - y], fmt="o", color=colour, capsize=3, markersize=4,
                          label=f"--recall {curve.recall:g}, measured (95 % interval)")
    margin = max(1.0 - lowest, 0.01) * 0.1
    _label(axes, "What --recall buys:\nrecall of banding above R0", "exact resemblance R (≥ R0)",
           "share of pairs that are candidates", 1, (result.threshold, 1.0), (max(lowest - margin, 0.0), 1.0 + margin))


def _storage_panel(axes: Any, result: EvalResult, colours: dict[float, Any]) -> None:
    storage = result.storage
    for line in storage.lines:
        colour = colours.get(line.bits, "0.3")
        axes.plot(line.bytes, line.stderr, "-", color=colour, linewidth=1.2,
                  label=f"b = {bits_label(line.bits)}, eq. 11–12")
    for bits in sorted({point.bits for point in storage.measured}):
        points = [point for point in storage.measured if point.bits == bits and point.rmse is not None]
        if points:
            axes.plot([point.bytes for point in points], [point.rmse.value for point in points if point.rmse],
                      "o", color=colours.get(bits, "0.3"), markersize=5, markeredgecolor="black", markeredgewidth=0.5)
    axes.plot([], [], "o", color="0.6", markeredgecolor="black", markeredgewidth=0.5,
              label="measured (first k' of the k positions)")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    _label(axes, f"Error against storage,\npairs with R in [{storage.low:.2g}, {storage.high:.2g}]",
           "bytes per document, k·b/8 (k from 16 to 2048)", "standard error of R̂", 2)


def evaluation_figure(result: EvalResult) -> Any:
    """The pictures of ``result`` on a :class:`matplotlib.figure.Figure` (Agg, no pyplot state), laid out: each
    panel's legend below it, titles wrapped to their panel's width."""
    from matplotlib.figure import Figure
    from matplotlib.gridspec import GridSpec

    bits = result.evaluated_bits
    colours = _colours(sorted(set(bits) | {line.bits for line in result.storage.lines}))
    # the bottom row: 3 panels, or 4 with the recalls compared; each top panel spans as many columns as there are
    # bottom panels, each bottom one as many as there are b
    bottom = 4 if result.recall_curves else 3
    figure = Figure(figsize=(3.7 * max(len(bits), bottom), 11.5), dpi=90, layout="constrained")
    grid = GridSpec(2, len(bits) * bottom, figure=figure)
    for index, b in enumerate(bits):
        _estimates_panel(figure.add_subplot(grid[0, index * bottom : (index + 1) * bottom]), result, b, colours[b])
    span = len(bits)
    _s_curve_panel(figure.add_subplot(grid[1, :span]), result)
    _sweep_panel(figure.add_subplot(grid[1, span : 2 * span]), result)
    _storage_panel(figure.add_subplot(grid[1, 2 * span : 3 * span]), result, colours)
    if result.recall_curves:
        _recall_panel(figure.add_subplot(grid[1, 3 * span :]), result)
    figure.suptitle(f"dedup eval {os.path.basename(result.store)}: {result.eligible:,} documents, "
                    f"{sum(s.drawn for s in result.strata):,} sampled pairs (seed {result.seed}), "
                    f"R0 = {result.threshold:g}", fontsize=12)
    return figure


def plot_evaluation(result: EvalResult, path: str | os.PathLike[str]) -> None:
    """Draw ``result`` into the PNG file ``path`` (written whole or not at all).

    Raises:
        dedup_cli.errors.DedupError: matplotlib is not installed, or the file cannot be written.
    """
    require_matplotlib()
    rendered = io.BytesIO()
    evaluation_figure(result).savefig(rendered, format="png")
    rendered.seek(0)
    # 256 colours lose nothing visible in a chart and make the file a quarter of the size (Pillow comes with
    # matplotlib).
    from PIL import Image

    with Image.open(rendered) as image:
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    encoded = io.BytesIO()
    palette.save(encoded, format="PNG", optimize=True)
    # a file replaced atomically; a device or FIFO written in place (the view released even when the write fails)
    with open_output(path) as stream, encoded.getbuffer() as view:
        stream.write(view)
