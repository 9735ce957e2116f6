"""`dedup estimate` and integer-set input over a stated universe (dense data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def dense_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three sets over D = 4096 with r ≈ 0.4: R_ab = 0.6, R_ac = R_bc = 0.55, R_abc = 0.35."""
    folder = tmp_path_factory.mktemp("sets")
    base = np.random.default_rng(3).choice(4096, 2000, replace=False)
    sets = {"a": base[:1600], "b": base[400:2000], "c": np.concatenate([base[:1000], base[1500:2000]])}
    source = folder / "sets.jsonl"
    with source.open("w") as handle:
        for name, elements in sets.items():
            handle.write(json.dumps({"id": name, "elements": sorted(map(int, elements))}) + "\n")
        handle.write("{not json\n")
        handle.write(json.dumps({"id": "far", "elements": [1, 5000]}) + "\n")
        handle.write(json.dumps({"id": "a", "elements": [1, 2]}) + "\n")
        handle.write("tsv-set\t1 2 3 4\n")
    store = folder / "sets.parquet"
    code, _, stderr = run("sign", "--input-format", "sets", str(source), "--universe", "4096", "-o", str(store),
                          "-k", "1024")
    assert code == 0, stderr
    assert f"skipped {source}:4" in stderr and f"skipped {source}:5: element 5000 outside" in stderr
    assert f"skipped {source}:6: id 'a' was already read" in stderr
    assert "signed 4 documents" in stderr and "3 inputs skipped" in stderr
    return store


def test_dense_pair_uses_precise_estimator_and_covers_exact(dense_store: Path) -> None:
    code, stdout, _ = run("estimate", str(dense_store), "a", "b", "--bits", "2", "--exact", "--format", "json")
    assert code == 0
    record = json.loads(stdout)
    assert "precise" in record["estimator"]
    assert record["exact"] == pytest.approx(0.6)
    assert abs(record["estimate"] - 0.6) < 4 * record["stderr"]
    assert record["ci_low"] <= record["estimate"] <= record["ci_high"]


def test_dense_triple_uses_dense_procedure(dense_store: Path) -> None:
    code, stdout, _ = run("estimate", str(dense_store), "a", "b", "c", "--bits", "2", "--exact", "--format", "json")
    assert code == 0
    record = json.loads(stdout)
    assert "dense" in record["estimator"]
    assert record["exact"] == pytest.approx(0.35)
    assert record["exact_pairwise"] == pytest.approx([0.6, 0.55, 0.55])
    assert abs(record["estimate"] - 0.35) < 0.06


def test_find_on_dense_store_says_which_estimator(dense_store: Path) -> None:
    code, stdout, stderr = run("find", str(dense_store), "--threshold", "0.45", "--bits", "2", "--output", "pairs")
    assert code == 0
    assert "precise r = f/D" in stderr
    pairs = {(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())}
    assert pairs == {("a", "b"), ("a", "c"), ("b", "c")}


def test_text_estimate_reports_exact_and_sparse(tmp_path: Path, small_corpus: Path) -> None:
    store = tmp_path / "s.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    code, stdout, _ = run("estimate", str(store), "a.txt", "b.txt", "--exact")
    assert code == 0
    lines = dict(line.split(None, 1) for line in stdout.splitlines())
    assert "sparse limit" in lines["estimator"]
    assert float(lines["exact"]) == pytest.approx(191 / 201)
    code, stdout, _ = run("estimate", str(store), "a.txt", "empty.txt", "--format", "json")
    assert json.loads(stdout)["estimate"] == 0.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["a", "b", "c", "--bits", "1"], "3-way estimation needs --bits 2 or more"),
        (["a", "nope"], "no document 'nope'"),
        (["a"], "name two or three different document ids"),
        (["a", "b", "--bits", "17"], "--bits 17 exceeds the 16 bits stored"),
    ],
)
def test_estimate_usage_errors(dense_store: Path, arguments: list[str], message: str) -> None:
    code, _, stderr = run("estimate", str(dense_store), *arguments)
    assert code == 2 and message in stderr and "Traceback" not in stderr


def test_sets_need_a_universe_and_text_refuses_one(tmp_path: Path, small_corpus: Path) -> None:
    source = tmp_path / "s.tsv"
    source.write_text("x\t1 2 3\n")
    code, _, stderr = run("sign", "--input-format", "sets", str(source), "-o", str(tmp_path / "o.parquet"))
    assert code == 2 and "needs --universe" in stderr
    code, _, stderr = run("sign", str(small_corpus), "--universe", "100", "-o", str(tmp_path / "o.parquet"))
    assert code == 2 and "--universe applies only to --input-format sets" in stderr
