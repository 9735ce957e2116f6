"""FindResult speaks document ids: its groups(), pairs(), triples(), members() and to_arrow() give exactly the
records ``dedup find`` writes, for a plain result and for a result streamed in chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import SAMPLE_CORPORA

import dedup_cli as dedup
from dedup_cli.cli.main import cli


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("results") / "sigs.parquet"
    corpus = SAMPLE_CORPORA / "bible-editions"
    dedup.sign([str(corpus)], str(store), dedup.SignOptions(jobs=1))
    return store


def _written(store: Path, *flags: str) -> list[dict]:
    got = CliRunner().invoke(cli, ["find", str(store), "--threshold", "0.5", "-q", *flags])
    assert got.exit_code == 0, got.output
    return [json.loads(line) for line in got.stdout.splitlines()]


@pytest.mark.parametrize("kind", ["groups", "pairs", "members"])
def test_records_in_ids_are_the_command_lines(signed: Path, kind: str) -> None:
    result = dedup.find(str(signed), dedup.FindOptions(threshold=0.5))
    written = _written(signed, "--output", kind)
    assert written, "the sample corpus has near-duplicates"
    got = {"groups": result.groups, "pairs": result.pairs, "members": result.members}[kind]()
    rows = [item._asdict() for item in got]
    if kind == "groups":
        assert [(row["number"], list(row["ids"]), row["representative"]) for row in rows] == \
               [(record["group"], record["members"], record["representative"]) for record in written]
        assert all(isinstance(member, str) for row in rows for member in row["ids"])
    elif kind == "pairs":
        assert [(row["id_a"], row["id_b"], row["estimate"], row["exact"]) for row in rows] == \
               [(record["id_a"], record["id_b"], record["estimate"], record["exact"]) for record in written]
    else:
        assert [(row["id"], row["group"], row["action"]) for row in rows] == \
               [(record["id"], record["group"], record["action"]) for record in written]


def test_triples_in_ids(signed: Path) -> None:
    result = dedup.find(str(signed), dedup.FindOptions(threshold=0.5, ways=3, bits=2))
    written = _written(signed, "--output", "triples", "--ways", "3", "--bits", "2")
    assert [(t.id_a, t.id_b, t.id_c, t.estimate) for t in result.triples()] == \
           [(r["id_a"], r["id_b"], r["id_c"], r["estimate"]) for r in written]


def test_to_arrow_is_the_parquet_output(signed: Path, tmp_path: Path) -> None:
    result = dedup.find(str(signed), dedup.FindOptions(threshold=0.5))
    out = tmp_path / "groups.parquet"
    got = CliRunner().invoke(cli, ["find", str(signed), "--threshold", "0.5", "-q", "--format", "parquet",
                                   "-o", str(out)])
    assert got.exit_code == 0, got.output
    assert result.to_arrow("groups").to_pylist() == pq.read_table(out).to_pylist()
    with pytest.raises(ValueError, match="choose one of"):
        result.to_arrow("clusters")
