"""Exact copies are found whatever their length: a document of fewer words than a shingle has one shingle, its
whole token sequence, in every store signed now; a store signed before keeps its rule (no shingle), and find says
how many documents it could not compare and how to compare them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import create_store_signed_before_short_documents, forget_short_document_rule

from dedup_cli.cli.main import cli

FOUR_WORDS = "The quick brown fox"
LONG = " ".join(f"filler{number}" for number in range(60))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Three identical four-word files (one spelt differently: case and punctuation), a long document that holds
    those four words, an empty one and one of punctuation only."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text(FOUR_WORDS)
    (folder / "b.txt").write_text(FOUR_WORDS + "\n")
    (folder / "c.txt").write_text("the QUICK, brown fox!")
    (folder / "long.txt").write_text(f"{LONG} {FOUR_WORDS} {LONG}")
    (folder / "empty.txt").write_text("")
    (folder / "marks.txt").write_text("!!! ... ???")
    return folder


def test_three_identical_four_word_files_are_one_group(corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "sigs"
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and "; 2 with no shingle;" in stderr, stderr  # the empty and the punctuation-only file
    code, stdout, stderr = run("find", str(store), "--verify", "all")
    assert code == 0 and "warning" not in stderr, stderr
    groups = [json.loads(line) for line in stdout.splitlines()]
    assert [group["members"] for group in groups] == [["a.txt", "b.txt", "c.txt"]]
    assert groups[0]["weakest"] == 1.0
    assert json.loads(run("info", str(store))[1])["empty"] == 2


def test_a_real_process_finds_them_too(corpus: Path, tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    for args in (["sign", str(corpus), "-o", "sigs", "-q"], ["find", "sigs", "-q", "--output", "members",
                                                              "--format", "tsv", "--no-header"]):
        done = subprocess.run([sys.executable, "-m", "dedup_cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, env=environment, timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["a.txt", "b.txt", "c.txt"]


def test_a_short_document_never_pairs_with_a_long_one_holding_its_words(corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "sigs"
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    code, stdout, stderr = run("find", str(store), "--candidates", "all", "--threshold", "0.01", "--output", "pairs",
                               "--verify", "all", "-q")
    assert code == 0, stderr
    pairs = {(pair["id_a"], pair["id_b"]): pair["exact"] for pair in map(json.loads, stdout.splitlines())}
    assert pairs == {("a.txt", "b.txt"): 1.0, ("a.txt", "c.txt"): 1.0, ("b.txt", "c.txt"): 1.0}
    code, stdout, _ = run("estimate", str(store), "a.txt", "long.txt", "--exact", "--format", "json")
    assert code == 0 and json.loads(stdout)["exact"] == 0.0


def test_a_store_signed_before_keeps_its_rule_and_find_says_what_to_do(corpus: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    create_store_signed_before_short_documents(old)
    code, _, stderr = run("sign", str(corpus), "-o", str(old))
    assert code == 0 and "; 5 with no shingle;" in stderr, stderr  # three short, one empty, one of marks
    forget_short_document_rule(old)  # as that version wrote its manifest
    (corpus / "d.txt").write_text(FOUR_WORDS)
    code, _, stderr = run("sign", str(corpus), "-o", str(old))  # a later run keeps the store's rule
    assert code == 0 and "; 1 with no shingle;" in stderr, stderr
    assert json.loads(run("info", str(old))[1])["params"]["short_documents"] == "none"
    code, stdout, stderr = run("find", str(old))
    assert code == 0 and stdout == ""
    warning = (f"warning: 6 documents have no shingle and were not compared: {old} was signed before documents "
               "of fewer than 5 words had one, so identical short documents are not found; to compare them, sign "
               "the corpus into a new store (dedup sign INPUT -o NEW)")
    assert stderr.splitlines()[0] == warning
    assert "(6 with no shingle)" in stderr
    # Following the hint: a new store compares them.
    assert run("sign", str(corpus), "-o", str(tmp_path / "new"), "-q")[0] == 0
    code, stdout, stderr = run("find", str(tmp_path / "new"), "-q")
    assert code == 0 and stderr == ""
    assert json.loads(stdout)["members"] == ["a.txt", "b.txt", "c.txt", "d.txt"]


def test_a_store_signed_before_without_short_documents_gets_no_warning(tmp_path: Path) -> None:
    old = tmp_path / "old"
    create_store_signed_before_short_documents(old)
    (tmp_path / "long.txt").write_text(LONG)
    assert run("sign", str(tmp_path / "long.txt"), "-o", str(old), "-q")[0] == 0
    code, _, stderr = run("find", str(old))
    assert code == 0 and "warning" not in stderr and "(0 with no shingle)" in stderr


def test_a_single_file_store_of_the_first_format_is_read_with_the_old_rule(tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from helpers import StoreWriter

    from dedup_cli.engine.stages.sign import sign_batch
    from dedup_cli.inputs.records import Document
    from dedup_cli.params import SignatureParams

    params = SignatureParams(short_documents="none")
    texts = [FOUR_WORDS, FOUR_WORDS, LONG, LONG + " and a little more"]
    documents = [Document(f"d{index}", f"d{index}", text, len(text), 0, 0) for index, text in enumerate(texts)]
    path = tmp_path / "first.parquet"
    with StoreWriter(path, params) as writer:
        writer.write(sign_batch(documents, params))
    table = pq.read_table(path)  # its footer as that version wrote it: no rule for short documents
    header = json.loads(table.schema.metadata[b"dedup"])
    del header["params"]["short_documents"]
    pq.write_table(table.replace_schema_metadata({b"dedup": json.dumps(header).encode()}), path)
    code, stdout, stderr = run("find", str(path))
    assert code == 0 and json.loads(stdout)["members"] == ["d2", "d3"]
    assert stderr.startswith("warning: 2 documents have no shingle and were not compared: ")
    assert stderr.splitlines()[0].endswith("sign the corpus into a new store (dedup sign INPUT -o NEW)")
