"""``review`` on the Dask engine shows what it shows on the local engine: the same groups, members, similarities,
texts and differences, whether find's result was gathered into the driver or streamed from the cluster in chunks
(whose stores hold ids only: the shown members' rows are read from the store), with ``--against`` too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import review_data

import dedup_cli as dedup
from dedup_cli.engine.dask import end_on_workers
from dedup_cli.options.engine_choice import EngineOptions


def _page(store: Path, out: Path, streamed: bool = False, **options: Any) -> dict[str, Any]:
    report = dedup.review(store, out, dedup.ReviewOptions(dedup.FindOptions(threshold=0.5, bits=2, **options),
                                                          groups=6, sample=6, members=4))
    assert (report.result.streamed is not None) == streamed
    return review_data(out.read_text("utf-8"))


@pytest.mark.parametrize("against", [False, True], ids=["store", "against"])
def test_the_dask_engine_gathered_or_streamed_shows_the_local_page(stores: dict[str, Path], engine: EngineOptions,
                                                                   tmp_path: Path, against: bool) -> None:
    extra: dict[str, Any] = {"against": str(stores["reference"])} if against else {}
    local = _page(stores["sample"], tmp_path / "local.html", **extra)
    assert len(local["groups"]) == 12 and any(group["members"][1:] for group in local["groups"])
    assert {member["similarity"]["kind"] for group in local["groups"] for member in group["members"]} >= {
        "self", "accepted"}
    gathered = _page(stores["sample"], tmp_path / "gathered.html", engine=engine, **extra)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(end_on_workers, "MIN_PAIRS_PER_PARTITION", 1)
        streamed = _page(stores["sample"], tmp_path / "streamed.html", True, engine=engine, gather_limit=10,
                         **extra)
    assert gathered == local
    assert streamed == local
