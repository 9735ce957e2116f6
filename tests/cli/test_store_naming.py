"""One way to name the store (``-s/--store`` on every command that reads one), ``dedup info --ids``, and hints
that work when followed: each hint's command is run as written, and the command it leads to succeeds."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli

TEXT = " ".join(f"word{number}" for number in range(60))


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    previous = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None}, catch_exceptions=False)
    finally:
        os.chdir(previous)
    return result.exit_code, result.stdout, result.stderr


def hinted(stderr: str) -> list[str]:
    """The ``dedup ...`` command a one-line error suggests, split as a shell would."""
    found = re.search(r"\(dedup (.*?)\)", stderr)
    assert found, stderr
    return shlex.split(found.group(1))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    records = [{"id": "b", "text": TEXT}, {"id": "a", "text": TEXT}, {"id": "c", "text": TEXT + " more words here"},
               {"id": "d", "text": "something else entirely, nothing like the others at all"}]
    corpus.write_text("".join(json.dumps(record) + "\n" for record in records))
    path = tmp_path / "sigs.parquet"
    code, _, stderr = run("sign", str(corpus), "--id-field", "id", "-o", str(path), "-q")
    assert code == 0, stderr
    return path


# --- -s/--store ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["find", "-q"], ["info"], ["eval", "--sample", "100", "-q", "--format", "json"],
                                     ["info", "--ids"]])
def test_every_store_reading_command_takes_store_as_an_option(store: Path, command: list[str]) -> None:
    positional = run(command[0], str(store), *command[1:])
    named = run(command[0], "-s", str(store), *command[1:])
    long_named = run(command[0], *command[1:], "--store", str(store))
    assert positional[0] == 0, positional[2]
    assert named == long_named == positional or command[0] == "eval" and named[0] == long_named[0] == 0
    both = run(command[0], str(store), "-s", str(store) + "/", *command[1:])  # the same store, spelt twice
    assert both[0] == 0, both[2]


@pytest.mark.parametrize("command", [["find"], ["info"], ["eval"], ["info", "--ids"]])
def test_two_different_stores_are_a_one_line_usage_error(store: Path, tmp_path: Path, command: list[str]) -> None:
    code, stdout, stderr = run(command[0], str(store), "-s", str(tmp_path / "other"), *command[1:])
    assert code == 2 and stdout == ""
    assert stderr == f"Error: STORE {store} and --store {tmp_path / 'other'} name two stores; give one of them\n"


def test_estimate_takes_the_store_as_an_option_beside_three_ids(store: Path, tmp_path: Path) -> None:
    code, stdout, stderr = run("estimate", "-s", str(store), str(store), "a", "b", "c", "--format", "json")
    assert code == 0, stderr
    assert json.loads(stdout)["ids"] == ["a", "b", "c"]
    code, _, stderr = run("estimate", "-s", str(tmp_path / "other"), str(store), "a", "b", "c")
    assert code == 2 and "name two stores" in stderr and len(stderr.splitlines()) == 1


# --- dedup info --ids ------------------------------------------------------------------------------------------------


def test_info_ids_lists_the_live_ids_one_a_line_in_id_order(store: Path, tmp_path: Path) -> None:
    code, stdout, stderr = run("info", str(store), "--ids")
    assert (code, stdout, stderr) == (0, "a\nb\nc\nd\n", "")
    # a store of a directory whose second file is deleted, and a third added, between two runs
    corpus = tmp_path / "dir"
    corpus.mkdir()
    (corpus / "one.jsonl").write_text("".join(json.dumps({"id": name, "text": TEXT}) + "\n" for name in "bac"))
    (corpus / "two.jsonl").write_text(json.dumps({"id": "d", "text": "gone"}) + "\n")
    path = tmp_path / "dir-sigs.parquet"
    assert run("sign", str(corpus), "--id-field", "id", "-o", str(path), "-q")[0] == 0
    (corpus / "two.jsonl").unlink()
    (corpus / "three.jsonl").write_text("".join(json.dumps({"id": name, "text": "odd ids"}) + "\n"
                                                for name in ("g\nh", "e\tf")))
    assert run("sign", str(corpus), "--id-field", "id", "-o", str(path), "--prune", "-q")[0] == 0
    code, stdout, _ = run("info", "--ids", "-s", str(path), "-o", str(tmp_path / "ids.txt"))
    assert (code, stdout) == (0, "")
    assert (tmp_path / "ids.txt").read_text() == "a\nb\nc\ne\\tf\ng\\nh\n"
    assert json.loads(run("info", str(path))[1])["documents"] == 5


def test_info_ids_streams_its_batches(store: Path) -> None:
    from dedup_cli import open_store

    batches = list(open_store(store).live_ids(batch=3))
    assert batches == [["a", "b", "c"], ["d"]]


# --- hints that work ------------------------------------------------------------------------------------------------


def test_a_parquet_corpus_named_as_the_store_gets_a_hint_that_works(tmp_path: Path) -> None:
    pq.write_table(pa.table({"text": [TEXT, TEXT, "other words, not the same at all here"]}),
                   tmp_path / "corpus.parquet")
    code, _, stderr = run("find", "corpus.parquet", cwd=tmp_path)
    assert code == 1 and len(stderr.splitlines()) == 1 and "not a dedup store" in stderr
    suggested = hinted(stderr)
    assert suggested == ["sign", "corpus.parquet", "-o", "corpus-sigs.parquet"]
    code, _, stderr = run(*suggested, cwd=tmp_path)
    assert code == 0, stderr
    code, stdout, stderr = run("find", "corpus-sigs.parquet", "-q", cwd=tmp_path)
    assert code == 0, stderr
    assert json.loads(stdout)["members"] == ["corpus.parquet:0", "corpus.parquet:1"]
    assert pq.read_table(tmp_path / "corpus.parquet").num_rows == 3  # the corpus itself untouched


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus dir"])
def test_a_corpus_file_or_directory_named_as_the_store_gets_a_hint_that_works(tmp_path: Path, name: str) -> None:
    lines = "".join(json.dumps({"text": text}) + "\n" for text in (TEXT, TEXT))
    if name.endswith(".jsonl"):
        (tmp_path / name).write_text(lines)
    else:
        (tmp_path / name).mkdir()
        (tmp_path / name / "part.jsonl").write_text(lines)
    for command in (["find"], ["info"], ["eval"], ["estimate", "x", "y", "-s"]):
        code, _, stderr = run(*command, name, cwd=tmp_path)
        assert code == 1 and len(stderr.splitlines()) == 1, stderr
    suggested = hinted(stderr)
    assert suggested[:2] == ["sign", name] and suggested[3].endswith("-sigs.parquet")
    code, _, stderr = run(*suggested, cwd=tmp_path)
    assert code == 0, stderr
    code, stdout, stderr = run("find", "-s", suggested[3], "-q", cwd=tmp_path)
    assert code == 0 and stdout.count("\n") == 1, stderr


def test_signing_over_a_corpus_is_refused_naming_a_path_that_works(tmp_path: Path) -> None:
    pq.write_table(pa.table({"text": [TEXT]}), tmp_path / "corpus.parquet")
    before = (tmp_path / "corpus.parquet").read_bytes()
    code, _, stderr = run("sign", "corpus.parquet", "-o", "corpus.parquet", cwd=tmp_path)
    assert code == 1 and "refusing to overwrite corpus.parquet" in stderr
    suggested = stderr.strip().rsplit("e.g. ", 1)[1]
    assert suggested == "corpus-sigs.parquet"
    assert run("sign", "corpus.parquet", "-o", suggested, "-q", cwd=tmp_path)[0] == 0
    assert (tmp_path / "corpus.parquet").read_bytes() == before


def test_estimate_of_an_unknown_id_points_to_info_ids(store: Path) -> None:
    code, _, stderr = run("estimate", str(store), "a", "nobody")
    assert code == 2 and stderr.strip().endswith(f"list its ids with: dedup info {store} --ids")
    code, stdout, _ = run(*shlex.split(stderr.strip().rsplit("dedup ", 1)[1]))
    assert code == 0 and "nobody" not in stdout.split() and "a" in stdout.split()


def test_more_bits_than_stored_points_to_a_new_store_that_works(store: Path, tmp_path: Path) -> None:
    code, _, stderr = run("find", str(store), "--bits", "32")  # the store keeps 16
    assert code == 2 and "re-sign with --bits 32 or more into a new store" in stderr
    code, _, stderr = run("sign", str(tmp_path / "corpus.jsonl"), "--id-field", "id", "-o", str(store), "--bits",
                          "32")
    assert code == 2  # into the same store: refused (its parameters are pinned), as the hint says
    code, _, stderr = run("sign", str(tmp_path / "corpus.jsonl"), "--id-field", "id", "-o", str(tmp_path / "new"),
                          "--bits", "32", "-q")
    assert code == 0, stderr
    assert run("find", str(tmp_path / "new"), "--bits", "32", "-q")[0] == 0


def test_filter_hints_work_when_followed(store: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "--id-field", "id", "-o", str(tmp_path / "out"),
                          "--members", str(tmp_path / "m.tsv"))
    assert code == 1 and len(stderr.splitlines()) == 1
    suggested = shlex.split(stderr.strip().split("write it with dedup ", 1)[1])
    assert suggested == ["find", str(store), "--output", "members", "-o", str(tmp_path / "m.tsv")]
    assert run(*suggested, "-q")[0] == 0
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "--id-field", "id", "-o", str(tmp_path / "out"),
                          "--members", str(tmp_path / "m.tsv"), "-q")
    assert code == 0, stderr
    # an input the store never read: the hint signs it into that store, and filter then reads it
    other = tmp_path / "other file.jsonl"
    other.write_text(json.dumps({"id": "z", "text": TEXT}) + "\n")
    code, _, stderr = run("filter", str(other), "-s", str(store), "--id-field", "id", "-o", str(tmp_path / "o.jsonl"))
    assert code == 1
    assert hinted(stderr) == ["sign", str(other), "-o", str(store), "--id-field", "id"]  # as the store's runs read
    assert run(*hinted(stderr), "-q")[0] == 0
    code, _, stderr = run("filter", str(other), "-s", str(store), "--id-field", "id", "-o", str(tmp_path / "o.jsonl"),
                          "-q")
    assert code == 0, stderr
