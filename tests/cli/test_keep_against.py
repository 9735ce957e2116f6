"""Keep policies (oldest, newest, --keep-field) and find --against a reference store, end to end and as properties."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.groups.components import Groups
from dedup_cli.groups.representatives import representatives

WORDS = [f"w{i}" for i in range(400)]


def text(variant: int, length: int = 200) -> str:
    """Near-duplicates of one text: word ``variant`` (if any) replaced; R ≈ 0.97 between variants."""
    words = WORDS[:length]
    return " ".join("changed" if i == variant else word for i, word in enumerate(words))


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def sign(*args: str) -> None:
    code, _, stderr = run("sign", *args, "-k", "64", "-q")
    assert code == 0, stderr


def kept_by(store: Path, *options: str) -> list[str]:
    code, stdout, stderr = run("find", str(store), "--output", "groups", "-q", *options)
    assert code == 0, stderr
    return [record["representative"] for record in records(stdout)]


# --- representatives, by hand and as properties ---------------------------------------------------------------


def test_oldest_and_newest_by_run_then_mtime_then_id() -> None:
    groups = Groups(members=np.array([0, 1, 2, 3, 4], np.int64), offsets=np.array([0, 3, 5], np.int64))
    runs = np.array([2, 1, 1, 3, 3])
    mtimes = np.array([5, 9, 7, 1, 1])
    assert representatives(groups, "oldest", np.ones(5), runs, mtimes).tolist() == [2, 3]  # run 1, earlier; tie → id
    assert representatives(groups, "newest", np.ones(5), runs, mtimes).tolist() == [0, 3]


def test_field_policy_ranks_missing_values_lowest_and_prefers_reference() -> None:
    groups = Groups(members=np.array([0, 1, 2, 3, 4], np.int64), offsets=np.array([0, 3, 5], np.int64))
    scores = np.array([np.nan, 0.5, 0.5, np.nan, np.nan])
    assert representatives(groups, "field", np.ones(5), scores=scores).tolist() == [1, 3]
    preferred = np.array([False, False, True, False, True])
    assert representatives(groups, "first", np.ones(5), preferred=preferred).tolist() == [2, 4]
    assert representatives(groups, "longest", np.array([9, 9, 1, 9, 1]), preferred=preferred).tolist() == [2, 4]


@given(st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.integers(-3, 3)), st.booleans()),
                min_size=1, max_size=30))
def test_kept_member_is_the_best_of_its_group(documents: list[tuple[int, int | None, bool]]) -> None:
    labels = np.array([label for label, _, _ in documents])
    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(labels[order]) != 0])
    groups = Groups(members=order.astype(np.int64), offsets=np.r_[starts, order.size].astype(np.int64))
    scores = np.array([np.nan if score is None else float(score) for _, score, _ in documents])
    preferred = np.array([flag for _, _, flag in documents])
    kept = representatives(groups, "field", np.ones(len(documents)), scores=scores, preferred=preferred)
    for index in range(len(groups)):
        members = groups.group(index).tolist()
        if preferred[members].any():
            members = [m for m in members if preferred[m]]
        rank = {m: (-np.inf if np.isnan(scores[m]) else scores[m], -m) for m in members}
        assert kept[index] == max(members, key=rank.__getitem__)


# --- oldest, newest, --keep-field end to end ------------------------------------------------------------------


def test_oldest_and_newest_follow_sign_runs_and_modification_times(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    store = tmp_path / "s.parquet"
    (corpus / "b.txt").write_text(text(3))
    sign(str(corpus), "-o", str(store))
    (corpus / "a.txt").write_text(text(5))
    (corpus / "c.txt").write_text(text(7))
    os.utime(corpus / "c.txt", ns=(1, 1))  # older than a.txt, in the same run
    sign(str(corpus), "-o", str(store))
    assert kept_by(store) == ["a.txt"]
    assert kept_by(store, "--keep", "oldest") == ["b.txt"]  # the first run
    assert kept_by(store, "--keep", "newest") == ["a.txt"]  # run 2, and newer than c.txt


def test_keep_field_keeps_the_highest_value_and_reports_missing_ones(tmp_path: Path) -> None:
    lines = [{"id": "x", "text": text(1), "quality": 0.2}, {"id": "y", "text": text(2), "quality": 0.9},
             {"id": "z", "text": text(3)}, {"id": "u", "text": text(4), "quality": "high"},
             {"id": "v", "text": text(5), "quality": 0.9}]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = tmp_path / "s.parquet"
    sign(str(corpus), "--id-field", "id", "-o", str(store))
    code, stdout, stderr = run("find", str(store), "--keep-field", "quality", "--output", "members")
    assert code == 0
    # y and v tie at 0.9: the smaller id wins.
    assert {r["id"]: r["action"] for r in records(stdout)} == {"u": "drop", "v": "keep", "x": "drop", "y": "drop",
                                                               "z": "drop"}
    assert "2 grouped documents have no value to keep by and rank lowest" in stderr
    assert kept_by(store, "--keep-field", "missing") == ["u"]  # nobody has it: ties by id


def test_keep_field_reads_a_parquet_column_of_grouped_rows(tmp_path: Path) -> None:
    table = pa.table({"text": [text(1), text(2), "something else entirely " * 20], "score": [3, 7, 100]})
    pq.write_table(table, tmp_path / "c.parquet")
    store = tmp_path / "s.parquet"
    sign(str(tmp_path / "c.parquet"), "-o", str(store))
    assert kept_by(store, "--keep-field", "score") == ["c.parquet:1"]


def test_keep_field_refuses_contradictions(tmp_path: Path) -> None:
    code, _, stderr = run("find", str(tmp_path / "none.parquet"), "--keep-field", "q", "--keep", "longest")
    assert code == 2 and "--keep-field chooses the kept member by its value; leave out --keep longest" in stderr
    with pytest.raises(dedup.OptionError, match="keep_field must name"):
        dedup.FindOptions(keep_field="")


def test_changed_record_has_no_value_to_keep_by(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": text(1), "q": 1}) + "\n" + json.dumps({"text": text(2), "q": 2}) + "\n")
    store = tmp_path / "s.parquet"
    sign(str(corpus), "-o", str(store))
    corpus.write_text(json.dumps({"text": text(1), "q": 1}) + "\n" + json.dumps({"text": text(9), "q": 2}) + "\n")
    result = dedup.find(store, dedup.FindOptions(keep_field="q"))
    assert result.store.ids[result.kept[0]] == "c.jsonl:1"
    assert result.keep_field_problems == [("c.jsonl:2", "changed since it was signed")]


# --- find --against ---------------------------------------------------------------------------------------------


@pytest.fixture
def two_stores(tmp_path: Path) -> tuple[Path, Path]:
    """NEW: n1 ~ n2 ~ r1 (a copy of REF's r1), n3 alone; REF: r1 ~ r2, r3 alone."""
    new, ref = tmp_path / "new", tmp_path / "ref"
    new.mkdir()
    ref.mkdir()
    (new / "n1.txt").write_text(text(1))
    (new / "n2.txt").write_text(text(2))
    (new / "n3.txt").write_text(" ".join(f"n{i}" for i in range(200)))
    (ref / "r1.txt").write_text(text(3))
    (ref / "r2.txt").write_text(text(4))
    (ref / "r3.txt").write_text(" ".join(f"r{i}" for i in range(200)))
    sign(str(new), "-o", str(tmp_path / "new.parquet"))
    sign(str(ref), "-o", str(tmp_path / "ref.parquet"))
    return tmp_path / "new.parquet", tmp_path / "ref.parquet"


def test_against_pairs_across_and_within_new_but_not_within_reference(two_stores: tuple[Path, Path]) -> None:
    new, ref = two_stores
    code, stdout, stderr = run("find", str(new), "--against", str(ref), "--output", "pairs")
    assert code == 0, stderr
    pairs = {(r["id_a"], r["store_a"], r["id_b"], r["store_b"]) for r in records(stdout)}
    assert pairs == {("n1.txt", "new", "n2.txt", "new"), ("n1.txt", "new", "r1.txt", "reference"),
                     ("n1.txt", "new", "r2.txt", "reference"), ("n2.txt", "new", "r1.txt", "reference"),
                     ("n2.txt", "new", "r2.txt", "reference")}
    assert f"3 documents against 3 in {ref}" in stderr
    code, stdout, _ = run("find", str(new), "--against", str(ref), "--only-across", "--output", "pairs", "-q")
    assert {(r["id_a"], r["id_b"]) for r in records(stdout)} == {(a, b) for a, _, b, _ in pairs if b[0] == "r"}


def test_against_members_keep_the_reference_copy(two_stores: tuple[Path, Path]) -> None:
    new, ref = two_stores
    code, stdout, _ = run("find", str(new), "--against", str(ref), "--output", "members", "--keep", "longest", "-q")
    assert code == 0
    members = {(r["id"], r["store"]): (r["action"], r["representative"], r["representative_store"])
               for r in records(stdout)}
    assert members == {("n1.txt", "new"): ("drop", "r1.txt", "reference"),
                       ("n2.txt", "new"): ("drop", "r1.txt", "reference"),
                       ("r1.txt", "reference"): ("keep", "r1.txt", "reference"),
                       ("r2.txt", "reference"): ("keep", "r1.txt", "reference")}
    code, stdout, _ = run("find", str(new), "--against", str(ref), "--format", "tsv", "-q")
    assert stdout.splitlines()[0] == "group\tsize\tid\tstore"
    assert "n1.txt\tnew" in stdout and "r2.txt\treference" in stdout
    code, stdout, _ = run("find", str(new), "--against", str(ref), "-q")
    assert records(stdout)[0]["stores"] == ["new", "new", "reference", "reference"]


def test_against_leaves_the_reference_unchanged_and_output_without_it_alone(two_stores: tuple[Path, Path]) -> None:
    new, ref = two_stores
    before = {path.name: path.read_bytes() for path in ref.iterdir()}
    plain = run("find", str(new), "--output", "members", "-q")
    run("find", str(new), "--against", str(ref), "-q")
    assert {path.name: path.read_bytes() for path in ref.iterdir()} == before
    assert plain == run("find", str(new), "--output", "members", "-q")
    assert "store" not in records(plain[1])[0]


def test_against_refuses_other_parameters_and_itself(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    new, _ = two_stores
    other = tmp_path / "other.parquet"
    sign(str(tmp_path / "ref"), "-o", str(other), "-b", "4", "--seed", "9")
    code, _, stderr = run("find", str(new), "--against", str(other))
    assert code == 2
    # NEW has a new store's 16 bits; both have its 128 values
    assert stderr.count("\n") == 1 and "(bits: 16 vs 4; seed: 1 vs 9, new vs reference)" in stderr
    code, _, stderr = run("find", str(new), "--against", str(new))
    assert code == 2 and f"--against {new} is the store itself" in stderr
    code, _, stderr = run("find", str(new), "--only-across")
    assert code == 2 and "--only-across needs --against REF" in stderr
