"""A synthetic store of 10^5 documents (k = 256, 1 % in planted families): both engines write the same bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import REPO
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.options.engine_choice import EngineOptions

sys.path.insert(0, str(REPO / "bench"))
from find_scale import build_store  # noqa: E402 - the benchmark's generator of synthetic stores


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synthetic") / "store"
    build_store(100_000, path, seed=4)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("options", [{"bits": 2}, {"bits": 2, "ways": 3, "group": "strict", "threshold": 0.55}],
                         ids=["pairs", "triples-strict"])
def test_a_hundred_thousand_documents(synthetic: Path, engine: EngineOptions, options: dict) -> None:
    local = dedup.find(synthetic, dedup.FindOptions(**options))
    remote = dedup.find(synthetic, dedup.FindOptions(engine=engine, **options))
    assert local.candidates > 900 and local.pair_count > 500
    assert_same_answers(local, remote)
