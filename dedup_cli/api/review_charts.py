"""The two pictures at the top of ``review``'s page, as inline SVG (no image file, no script, nothing fetched): the
banding's S-curve with R0 marked, and the histogram of the reported pairs' estimates.

The S-curve is the one ``plan`` tabulates, Pr(candidate) = 1 − (1 − E_B^rows)^bands (Mining of Massive Datasets
§3.4.2, E_B the per-row agreement of B-bit band values), drawn from the result's banding. The histogram counts the
accepted pairs by R̂ in bins of :data:`BIN_WIDTH`, those ``find`` decided by their exact resemblance stacked on the
others.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dedup_cli.candidates.banding import Banding, candidate_probability
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.options.vocabulary import band_bits_label

WIDTH, HEIGHT = 380, 230
LEFT, RIGHT, TOP, BOTTOM = 46, 14, 30, 40  # the plot area's margins
BIN_WIDTH = 0.02


@dataclass
class Histogram:
    """Reported pairs by R̂: bins [edges[i], edges[i + 1]) (the last one closed), and how many of each were checked
    exactly."""

    edges: np.ndarray  # float64[n + 1]
    counts: np.ndarray  # int64[n]
    checked: np.ndarray  # int64[n]

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def estimate_histogram(result: FindResult) -> Histogram:
    """The histogram of the accepted pairs' R̂ (of every chunk, for a streamed result)."""
    chunks = [result] if result.streamed is None else result.streamed.chunks("pairs")
    estimates, checked = [], []
    for chunk in chunks:
        estimates.append(chunk.accepted.estimate)
        checked.append(~np.isnan(chunk.exact))
    values = np.clip(np.concatenate(estimates) if estimates else np.empty(0), 0.0, 1.0)
    exact = np.concatenate(checked) if checked else np.empty(0, bool)
    low = min(result.threshold, float(values.min()) if values.size else result.threshold)
    start = math.floor(round(low / BIN_WIDTH, 9)) * BIN_WIDTH
    edges = np.round(np.arange(start, 1.0 + BIN_WIDTH / 2, BIN_WIDTH), 10)
    if edges.size < 2:
        edges = np.array([max(0.0, 1.0 - BIN_WIDTH), 1.0])
    counts, _ = np.histogram(values, bins=edges)
    checked_counts, _ = np.histogram(values[exact], bins=edges)
    return Histogram(edges, counts.astype(np.int64), checked_counts.astype(np.int64))


def _x(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - RIGHT)


def _y(value: float, high: float = 1.0) -> float:
    return HEIGHT - BOTTOM - value / high * (HEIGHT - TOP - BOTTOM)


def _text(x: float, y: float, words: str, anchor: str = "middle", kind: str = "") -> str:
    extra = f' class="{kind}"' if kind else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{html.escape(words)}</text>'


def _frame(title: str, x_label: str, y_label: str, x_ticks: Sequence[tuple[float, str]],
           y_ticks: Sequence[tuple[float, str]], label: str) -> Iterator[str]:
    """The SVG element's start, title, axes, ticks and grid (positions already in pixels)."""
    yield (f'<svg class="chart" role="img" aria-label="{html.escape(label)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">')
    yield _text(WIDTH / 2, 16, title, kind="title")
    bottom, top = HEIGHT - BOTTOM, TOP
    for x, words in x_ticks:
        yield f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}"/>'
        yield _text(x, bottom + 14, words)
    for y, words in y_ticks:
        yield f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>'
        yield _text(LEFT - 5, y + 4, words, "end")
    yield f'<rect class="axes" x="{LEFT}" y="{top}" width="{WIDTH - LEFT - RIGHT}" height="{bottom - top}"/>'
    yield _text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 6, x_label)
    yield (f'<text x="12" y="{(top + bottom) / 2:.1f}" text-anchor="middle" '
           f'transform="rotate(-90 12 {(top + bottom) / 2:.1f})">{html.escape(y_label)}</text>')


def s_curve_svg(banding: Banding | None, threshold: float) -> str:
    """The banding's S-curve, Pr(candidate) against R, with R0 and the recall there marked; for a find that
    compared every pair, a panel that says so."""
    tenths = [(_x(value), f"{value:g}") for value in np.round(np.linspace(0, 1, 6), 1)]
    quarters = [(_y(value), f"{value:g}") for value in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if banding is None:
        parts = list(_frame("Every pair compared: no banding", "resemblance R", "Pr(candidate)", tenths, quarters,
                            "every pair was compared, so every pair was a candidate"))
        parts.append(f'<polyline class="curve" points="{_x(0):.1f},{_y(1):.1f} {_x(1):.1f},{_y(1):.1f}"/>')
        return "".join(parts) + "</svg>"
    grid = np.linspace(0.0, 1.0, 101)
    curve = candidate_probability(grid, banding.bands, banding.rows, banding.band_bits)
    at = float(banding.recall_at(threshold))
    title = f"Banding: {banding.bands}×{banding.rows} bands on {band_bits_label(banding.band_bits)}"
    parts = list(_frame(title, "resemblance R", "Pr(candidate)", tenths, quarters,
                        f"S-curve of {banding.bands} bands of {banding.rows} rows; recall {at:.3f} at R0 "
                        f"{threshold:g}"))
    points = " ".join(f"{_x(r):.1f},{_y(p):.1f}" for r, p in zip(grid.tolist(), curve.tolist(), strict=True))
    parts.append(f'<polyline class="curve" points="{points}"/>')
    x0 = _x(threshold)
    parts.append(f'<line class="threshold" x1="{x0:.1f}" y1="{TOP}" x2="{x0:.1f}" y2="{HEIGHT - BOTTOM}"/>')
    parts.append(f'<circle class="mark" cx="{x0:.1f}" cy="{_y(at):.1f}" r="4"/>')
    anchor, shift = ("end", -7) if threshold > 0.6 else ("start", 7)
    parts.append(_text(x0 + shift, _y(at) + 16, f"R0 = {threshold:g}: recall {at:.3f}", anchor, "note"))
    return "".join(parts) + "</svg>"


def histogram_svg(histogram: Histogram, threshold: float) -> str:
    """Bars of the reported pairs by R̂, the checked ones darker at the bottom of each bar, R0 marked."""
    low, high = float(histogram.edges[0]), float(histogram.edges[-1])
    most = max(int(histogram.counts.max()) if histogram.counts.size else 0, 1)
    step = _tick_step(most)
    y_ticks = [(_y(value, most), f"{value:,}") for value in range(0, most + 1, step)]
    x_values = _x_ticks(low, high)
    x_ticks = [(_x(value, low, high), f"{value:g}") for value in x_values]
    total, checked = histogram.total, int(histogram.checked.sum())
    title = f"R̂ of the {total:,} reported pairs ({checked:,} checked exactly)"
    parts = list(_frame(title, "estimate R̂", "pairs", x_ticks, y_ticks,
                        f"histogram of the estimates of {total} reported pairs, {checked} checked exactly"))
    for index in range(histogram.counts.size):
        count, exact = int(histogram.counts[index]), int(histogram.checked[index])
        if not count:
            continue
        left = _x(float(histogram.edges[index]), low, high) + 0.5
        width = max(_x(float(histogram.edges[index + 1]), low, high) - left - 0.5, 1.0)
        words = f"{count:,} pairs with R̂ in [{histogram.edges[index]:g}, {histogram.edges[index + 1]:g})"
        parts.append(f'<rect class="bar" x="{left:.1f}" y="{_y(count, most):.1f}" width="{width:.1f}" '
                     f'height="{_y(0, most) - _y(count, most):.1f}"><title>{html.escape(words)}</title></rect>')
        if exact:
            parts.append(f'<rect class="bar checked" x="{left:.1f}" y="{_y(exact, most):.1f}" width="{width:.1f}" '
                         f'height="{_y(0, most) - _y(exact, most):.1f}"/>')
    if low <= threshold <= high:
        x0 = _x(threshold, low, high)
        parts.append(f'<line class="threshold" x1="{x0:.1f}" y1="{TOP}" x2="{x0:.1f}" y2="{HEIGHT - BOTTOM}"/>')
        parts.append(_text(x0 + 4, TOP + 12, f"R0 = {threshold:g}", "start", "note"))
    return "".join(parts) + "</svg>"


def _tick_step(most: int) -> int:
    """A step of 1, 2 or 5 times a power of ten that gives 2 to 5 ticks up to ``most``."""
    for power in range(12):
        for factor in (1, 2, 5):
            step = factor * 10**power
            if most / step <= 5:
                return step
    return 10**12


def _x_ticks(low: float, high: float) -> list[float]:
    """Ticks at tenths (or twentieths on a narrow range) from ``low`` to ``high``."""
    step = 0.1 if high - low > 0.3 else 0.05
    first = math.ceil(round(low / step, 9)) * step
    return [float(value) for value in np.round(np.arange(first, high + step / 2, step), 10)]
