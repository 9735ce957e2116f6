"""Documents gone since they were signed (a file renamed or deleted without --prune, a line that moved) are never
kept in place of a live copy: find keeps them in their pairs and groups but keeps a live member first, marks them
``gone`` in the members and names them in a warning, so that the members file, its rm recipe and filter never lose
the only text that exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import dedup_cli as dedup
from dedup_cli.cli.main import cli

WORDS = 120


def text(topic: int, variant: int = -1, extra: int = 0) -> str:
    """Texts of one topic are near-duplicates (one word of 120 replaced per variant); topics share nothing."""
    words = [f"t{topic}w{i}" for i in range(WORDS)] + [f"t{topic}x{i}" for i in range(extra)]
    if variant >= 0:
        words[variant * 7 % WORDS] = f"v{variant}"
    return " ".join(words)


def dedup_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dedup ARGS`` as the user runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def ok(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout, result.stderr


def members(store: Path, *options: str) -> list[dict]:
    stdout, _ = ok("find", str(store), "--output", "members", "-q", *options)
    return [json.loads(line) for line in stdout.splitlines()]


def test_a_record_deleted_above_others_loses_no_record(tmp_path: Path) -> None:
    """Ten distinct records signed, the first deleted, signed again: every line moved up one, and the old id of
    the last line (now past the end) held the same text as the new id of the last line. The run read the whole
    file, so the store no longer holds the old id (removed: its place is nowhere), and every record is written;
    once, the old id was kept (it sorts first) and the only copy of the last record was dropped."""
    corpus = tmp_path / "d.jsonl"
    corpus.write_text("".join(json.dumps({"text": text(topic)}) + "\n" for topic in range(10)))
    first = dedup_process("filter", "d.jsonl", "--sign", "-o", "clean.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "10 kept, 0 dropped" in first.stderr
    corpus.write_text("".join(corpus.read_text().splitlines(keepends=True)[1:]))  # sed -i '1d' d.jsonl
    second = dedup_process("filter", "d.jsonl", "--sign", "-o", "clean.jsonl", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "9 kept, 0 dropped from 0 groups" in second.stderr
    assert "(0 new, 9 changed, 0 unchanged, 0 moved, 1 removed;" in second.stderr  # ids are places here
    assert (tmp_path / "clean.jsonl").read_bytes() == corpus.read_bytes()
    assert "gone" not in second.stderr


CORPUS = {
    "a.txt": text(0),  # renamed to z.txt after the first run: a.txt stays in the store, gone
    "m.txt": text(0, 1, extra=10),  # a live near-duplicate, longer
    "b.txt": text(1),
    "c.txt": text(1, 2),  # a group of live documents only
}


@pytest.mark.parametrize("group", ["components", "strict"])
@pytest.mark.parametrize("keep", ["first", "id", "longest", "shortest", "oldest", "newest"])
def test_a_file_renamed_without_prune_is_never_kept_and_rm_keeps_a_live_copy(tmp_path: Path, keep: str,
                                                                              group: str) -> None:
    """A renamed file without --prune: the store holds its old name (gone) and its new one. Whatever --keep says,
    the members name no gone document, every group keeps a live one, and the README's rm recipe (run through a
    shell, as the user runs it) leaves a copy of every text."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, content in CORPUS.items():
        (corpus / name).write_text(content)
    store = tmp_path / "dedup.parquet"
    assert dedup_process("sign", str(corpus), "-o", str(store), "-q", cwd=tmp_path).returncode == 0
    os.rename(corpus / "a.txt", corpus / "z.txt")
    assert dedup_process("sign", str(corpus), "-o", str(store), "-q", cwd=tmp_path).returncode == 0
    found = {record["id"]: record for record in members(store, "--group", group, "--keep", keep)}
    assert set(found) == {"a.txt", "m.txt", "z.txt", "b.txt", "c.txt"}
    assert found["a.txt"]["action"] == "gone"
    assert sorted(record["action"] for record in found.values()) == ["drop", "drop", "gone", "keep", "keep"]
    for record in found.values():
        assert (corpus / record["representative"]).exists()
    pipeline = (f"{sys.executable} -m dedup_cli find ../dedup.parquet --group {group} --keep {keep} "
                "--output members --format tsv -q | awk -F'\\t' '$3==\"drop\"' | cut -f1 | xargs -d '\\n' rm --")
    removed = subprocess.run(["sh", "-c", pipeline], cwd=corpus, capture_output=True, text=True, check=False)
    assert removed.returncode == 0, removed.stderr
    left = {path.name for path in corpus.iterdir()}
    assert len(left) == 2 and left & {"m.txt", "z.txt"} and left & {"b.txt", "c.txt"}


def test_the_gone_document_is_named_and_the_api_lists_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(text(0))
    (corpus / "b.txt").write_text(text(1))
    store = tmp_path / "dedup.parquet"
    dedup.sign([str(corpus)], store)
    os.rename(corpus / "a.txt", corpus / "z.txt")
    dedup.sign([str(corpus)], store)
    result = dedup.find(store)
    assert result.gone == ["a.txt"]
    assert [tuple(member) for member in result.members()] == [("a.txt", 1, "gone", 2, "z.txt", None),
                                                              ("z.txt", 1, "keep", 2, "z.txt", None)]
    _, stderr = ok("find", str(store))
    assert "1 grouped document is gone or changed since it was signed" in stderr
    assert "e.g. a.txt" in stderr and "--prune" in stderr
    dedup.sign([str(corpus)], store, dedup.SignOptions(prune=True))
    assert dedup.find(store).gone == []


def test_a_line_that_moved_to_another_file_is_written_once(tmp_path: Path) -> None:
    """A record moved from the end of one file to another: its old FILE:LINE id points past the end of its file,
    the new one holds the text. The run read both files, so the old id is removed (its place is nowhere), and
    filter writes the record where it now is."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": text(topic)}) + "\n" for topic in (0, 1)))
    second.write_text(json.dumps({"text": text(2)}) + "\n")
    store = tmp_path / "dedup.parquet"
    ok("sign", str(first), str(second), "-o", str(store), "-q")
    moved = first.read_text().splitlines(keepends=True)
    first.write_text(moved[0])
    second.write_text(second.read_text() + moved[1])
    ok("sign", str(first), str(second), "-o", str(store), "-q")
    out = tmp_path / "clean"
    _, stderr = ok("filter", str(first), str(second), "-s", str(store), "-o", str(out))
    assert (out / "a.jsonl").read_bytes() == first.read_bytes()
    assert (out / "b.jsonl").read_bytes() == second.read_bytes()
    assert "0 dropped" in stderr and "gone" not in stderr
    stdout, _ = ok("find", str(store), "--output", "members", "--format", "tsv", "--no-header", "-q")
    assert stdout == ""
    assert sorted(dedup.read_store(store).ids) == ["a.jsonl:1", "b.jsonl:1", "b.jsonl:2"]


def test_a_line_that_now_holds_another_record_is_gone(tmp_path: Path) -> None:
    """A file edited after it was signed and not signed again: its ids point at lines that now hold other records.
    Those whose text moved away are gone (their hash is not the stored one) and are never kept; lines that still
    hold their text are live."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": text(topic)}) + "\n" for topic in (0, 1, 3)))
    second.write_text(json.dumps({"text": text(0, 1)}) + "\n" + json.dumps({"text": text(3, 1)}) + "\n")
    store = tmp_path / "dedup.parquet"
    ok("sign", str(first), str(second), "-o", str(store), "-q")
    lines = first.read_text().splitlines(keepends=True)
    first.write_text(lines[1] + lines[0] + lines[2])  # topic 0 moves from line 1 to line 2; topic 3 stays at 3
    found = {record["id"]: (record["action"], record["representative"]) for record in members(store)}
    assert found == {"a.jsonl:1": ("gone", "b.jsonl:1"), "b.jsonl:1": ("keep", "b.jsonl:1"),
                     "a.jsonl:3": ("keep", "a.jsonl:3"), "b.jsonl:2": ("drop", "a.jsonl:3")}
    assert dedup.find(store).gone == ["a.jsonl:1"]
    # Annotated, the record now at a.jsonl:1 is in no group: the text grouped under that id is not there any more.
    out = tmp_path / "annotated"
    ok("filter", str(first), str(second), "-s", str(store), "-o", str(out), "--annotate", "-q")
    annotated = [json.loads(line) for line in (out / "a.jsonl").read_text().splitlines()]
    assert [(r["dedup_group"], r["dedup_keep"]) for r in annotated] == [(None, True), (None, True), (2, True)]
