"""``dedup eval --plot``'s figure is legible: no title runs into another, and no legend covers a panel (so none
covers a point or a line), an axis's labels, another legend or the figure's edge. Checked on the drawn figure's
own boxes, for a figure of four b (the sample corpora at the defaults) and one of two (a store of 2 bits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

import dedup_cli as dedup

pytest.importorskip("matplotlib", reason="eval --plot needs the plot extra")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from dedup_cli.api.plot import evaluation_figure  # noqa: E402


@pytest.fixture(scope="module", params=[8, 2], ids=["bits-8", "bits-2"])
def figure(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = tmp_path_factory.mktemp("plot") / f"sigs-{request.param}.parquet"
    dedup.sign([str(REPO / "sample_corpora" / "bible-editions")], store, dedup.SignOptions(bits=request.param))
    options = dedup.EvalOptions(dedup.FindOptions(threshold=0.5, bits=2), sample=300)
    drawn = evaluation_figure(dedup.evaluate(store, options))
    FigureCanvasAgg(drawn).draw()  # lays the figure out, as saving it does
    return drawn


def _overlap(one: Any, other: Any) -> bool:
    """Whether two boxes (display coordinates) share more than a pixel's width."""
    return (min(one.x1, other.x1) - max(one.x0, other.x0) > 1) and (min(one.y1, other.y1) - max(one.y0, other.y0) > 1)


def _renderer(figure: Any) -> Any:
    return figure.canvas.get_renderer()


def test_no_title_runs_into_another(figure: Any) -> None:
    renderer = _renderer(figure)
    titles = [(axes.get_title(), axes.title.get_window_extent(renderer)) for axes in figure.axes]
    titles.append((figure._suptitle.get_text(), figure._suptitle.get_window_extent(renderer)))
    assert all(text for text, _ in titles)
    for index, (text, box) in enumerate(titles):
        for other, other_box in titles[index + 1:]:
            assert not _overlap(box, other_box), f"title {text!r} runs into {other!r}"
    for axes in figure.axes:  # and no title runs into a panel
        for text, box in titles:
            assert not _overlap(box, axes.bbox), f"title {text!r} covers the panel {axes.get_title()!r}"


def test_no_legend_covers_a_panel_a_label_or_another_legend(figure: Any) -> None:
    renderer = _renderer(figure)
    edge = figure.bbox
    legends = []
    for axes in figure.axes:
        legend = axes.get_legend()
        assert legend is not None, axes.get_title()
        legends.append((axes.get_title(), legend.get_window_extent(renderer)))
    labels = [(axes.get_title(), part.get_window_extent(renderer)) for axes in figure.axes
              for part in (axes.xaxis.label, axes.yaxis.label, *axes.get_xticklabels(), *axes.get_yticklabels())
              if part.get_text()]
    for title, box in legends:
        assert edge.x0 <= box.x0 and box.x1 <= edge.x1 and edge.y0 <= box.y0, f"the legend of {title!r} is cut"
        for axes in figure.axes:
            assert not _overlap(box, axes.bbox), f"the legend of {title!r} covers the panel {axes.get_title()!r}"
        for other, label in labels:
            assert not _overlap(box, label), f"the legend of {title!r} covers a label of {other!r}"
        for other, other_box in legends:
            assert other == title or not _overlap(box, other_box), f"the legends of {title!r} and {other!r} meet"


def test_the_figure_is_written_as_a_png(figure: Any, tmp_path: Path) -> None:
    path = tmp_path / "eval.png"
    figure.savefig(path, format="png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
