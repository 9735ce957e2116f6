"""A .json file holding an array of records, through the command line: signed as records, its pairs verified by
re-reading the elements, its records ranked by --keep-field, and filtered into a JSON array of the kept elements
(byte for byte), annotated as valid JSON; a .json file holding one object stays a text document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

BASE = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat near the door "
        "and the birds sing in the tall green trees").split()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def text(variant: int, changed: int = 0) -> str:
    words = [f"{word}{variant}" for word in BASE]
    for position in range(changed):
        words[position * 3] = f"other{position}"
    return " ".join(words)


@pytest.fixture
def crawl(tmp_path: Path) -> Path:
    """A pretty-printed array: records 1, 3 and 5 are near-duplicates, 2 and 4 stand alone; quality ranks them."""
    records = [{"url": "u1", "text": text(1), "quality": 1},
               {"url": "u2", "text": text(2), "quality": 5},
               {"url": "u3", "text": text(1, 1), "quality": 9},
               {"url": "u4", "text": text(4), "quality": 1},
               {"url": "u5", "text": text(1, 2), "quality": 3}]
    path = tmp_path / "crawl.json"
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    return path


def test_an_array_is_signed_verified_and_filtered_into_an_array_of_the_kept_elements(crawl: Path,
                                                                                    tmp_path: Path) -> None:
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(crawl), "-o", str(store))
    assert code == 0 and "signed 5 documents" in stderr and "0 inputs skipped" in stderr
    assert read_store(store).ids == [f"crawl.json:{n}" for n in range(1, 6)]
    code, stdout, stderr = run("find", str(store), "-t", "0.5", "--verify", "all", "--output", "pairs", "-q")
    assert code == 0 and stderr == ""
    pairs = [json.loads(line) for line in stdout.splitlines()]
    assert {(p["id_a"], p["id_b"]) for p in pairs} == {("crawl.json:1", "crawl.json:3"),
                                                        ("crawl.json:1", "crawl.json:5"),
                                                        ("crawl.json:3", "crawl.json:5")}
    assert all(p["exact"] is not None for p in pairs)  # every element was re-read
    code, stdout, _ = run("estimate", str(store), "crawl.json:1", "crawl.json:3", "--exact")
    assert code == 0 and "exact" in stdout
    out = tmp_path / "clean.json"
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "-t", "0.5")
    assert code == 0, stderr
    assert "5 records" in stderr and "3 kept, 2 dropped" in stderr
    original, kept = crawl.read_text(), json.loads(out.read_text())
    assert [record["url"] for record in kept] == ["u1", "u2", "u4"]
    # Each kept element is written as it was (the indentation of json.dumps(indent=2) included).
    for record in kept:
        assert json.dumps(record, indent=2, ensure_ascii=False).replace("\n", "\n  ") in original
    # The best by a field: the near-duplicates keep u3, whose quality is highest.
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "-t", "0.5", "--keep-field",
                          "quality")
    assert code == 0, stderr
    assert [record["url"] for record in json.loads(out.read_text())] == ["u2", "u3", "u4"]


def test_nothing_to_drop_copies_the_array_byte_for_byte_and_annotate_stays_json(crawl: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(crawl), "-o", str(store), "--id-field", "url", "-q")[0] == 0
    out = tmp_path / "clean.json"
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "-t", "0.99")
    assert code == 0, stderr
    assert out.read_bytes() == crawl.read_bytes()
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "-t", "0.5", "--annotate")
    assert code == 0, stderr
    annotated = json.loads(out.read_text())
    assert [(r["url"], r["dedup_group"], r["dedup_keep"]) for r in annotated] == [
        ("u1", 1, True), ("u2", None, True), ("u3", 1, False), ("u4", None, True), ("u5", 1, False)]
    assert all(r["dedup_representative"] in ("u1", None) for r in annotated)


def test_an_array_of_other_things_stops_the_run_and_an_object_file_is_a_text(tmp_path: Path) -> None:
    numbers = tmp_path / "numbers.json"
    numbers.write_text("[1, 2, 3]")
    store = tmp_path / "s"
    code, _, stderr = run("sign", str(numbers), "-o", str(store))
    assert code == 1
    assert stderr == (f"Error: every record of {numbers} was skipped: 3 records, e.g. {numbers} element 1: expected "
                      "a JSON object, found a number; nothing was stored\n")
    assert read_store(store).ids == []
    (tmp_path / "object.json").write_text(json.dumps({"text": text(7)}))
    code, _, stderr = run("sign", str(tmp_path / "object.json"), "-o", str(store))
    assert code == 0 and read_store(store).ids == ["object.json"]
    code, _, stderr = run("sign", str(tmp_path / "object.json"), "-o", str(tmp_path / "t"), "--input-format", "json")
    assert code == 1 and "expected a JSON array of records" in stderr and "--input-format auto" in stderr


def test_an_id_field_no_element_has_names_the_fields_of_the_first(crawl: Path, tmp_path: Path) -> None:
    code, _, stderr = run("sign", str(crawl), "--id-field", "id", "-o", str(tmp_path / "s"))
    assert code == 1
    assert f'every record of {crawl} was skipped: 5 records, e.g. {crawl} element 1: no "id" field' in stderr
    assert 'its first record has the fields "url", "text", "quality"' in stderr


def test_an_element_edited_since_signing_is_gone_and_never_dropped(crawl: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run("sign", str(crawl), "-o", str(store), "-q")[0] == 0
    records = json.loads(crawl.read_text())
    records[2]["text"] = "a text of other words that the store never signed"
    crawl.write_text(json.dumps(records, indent=2))
    code, stdout, stderr = run("find", str(store), "-t", "0.5", "--output", "members", "--format", "tsv", "-q")
    assert code == 0 and "1 grouped document is gone or changed" in stderr
    actions = {row.split("\t")[0]: row.split("\t")[2] for row in stdout.splitlines()[1:]}
    assert actions == {"crawl.json:1": "keep", "crawl.json:3": "gone", "crawl.json:5": "drop"}
    out = tmp_path / "clean.json"
    code, _, stderr = run("filter", str(crawl), "-s", str(store), "-o", str(out), "-t", "0.5")
    assert code == 0, stderr
    assert [record["url"] for record in json.loads(out.read_text())] == ["u1", "u2", "u3", "u4"]
