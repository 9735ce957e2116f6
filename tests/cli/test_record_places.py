"""Identity and place: a record's id says what it is, its place where it is now. Every run that reads a source
records the place of every record it reads; a source read whole holds exactly what was read; nothing decides
liveness from a place the latest read did not confirm (docs/inputs.md, "Identity and place"). Each case is one a
user met, run as the user runs it: commands in a folder, files edited between them."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.store.store import read_store

T = "the quick brown fox jumps over the lazy dog near the river bank today and tomorrow"
U = "completely unrelated words about cooking pasta with tomato sauce and basil leaves"


def dedup_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def jsonl(path: Path, *records: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": identifier, "text": text}) + "\n" for identifier, text in records))
    return path


def texts_of(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text().splitlines()]


def test_a_record_deleted_above_its_copies_never_takes_the_only_text_with_it(tmp_path: Path) -> None:
    """k, m and n hold T; k is deleted (the line below moves into its place) and p, a fourth copy, is appended.
    Before, k's stale place held a copy of T, so k passed for live and stayed the representative, and filter wrote a
    corpus without T."""
    data = jsonl(tmp_path / "d.jsonl", ("u", U), ("k", T), ("m", T), ("n", T))
    first = dedup_process("filter", "d.jsonl", "--sign", "--id-field", "id", "-o", "clean.jsonl", "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert texts_of(tmp_path / "clean.jsonl") == [U, T]
    lines = data.read_text().splitlines(keepends=True)
    data.write_text(lines[0] + "".join(lines[2:]) + json.dumps({"id": "p", "text": T}) + "\n")  # sed -i 2d; append
    second = dedup_process("filter", "d.jsonl", "--sign", "--id-field", "id", "-o", "clean.jsonl", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "(1 new, 0 changed, 1 unchanged, 2 moved, 1 removed;" in second.stderr
    assert texts_of(tmp_path / "clean.jsonl") == [U, T] and "2 kept, 2 dropped" in second.stderr
    assert sorted(read_store(tmp_path / "dedup.parquet").ids) == ["m", "n", "p", "u"]


def write_format(path: Path, records: list[tuple[str, str]]) -> None:
    if path.suffix == ".parquet":
        pq.write_table(pa.table({"id": [r[0] for r in records], "text": [r[1] for r in records]}), path)
    elif path.suffix == ".csv":
        path.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in records))
    elif path.suffix == ".tsv":
        path.write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in records))
    elif path.name.endswith(".gz"):
        path.write_bytes(gzip.compress("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in records).encode()))
    else:
        jsonl(path, *records)


@pytest.mark.parametrize("name", ["d.jsonl", "d.csv", "d.tsv", "d.parquet", "d.jsonl.gz"])
@pytest.mark.parametrize("prune", [False, True])
def test_a_shifted_record_stays_live_and_its_near_duplicate_is_found(tmp_path: Path, name: str, prune: bool) -> None:
    """The first record deleted, signed again (with or without --prune): the two records that moved up are moved,
    not gone; find groups them, filter keeps one, estimate --exact reads them where they are now."""
    corpus = tmp_path / name
    records = [("old", U), ("x", T), ("y", T + " again")]
    write_format(corpus, records)
    store = tmp_path / "s.parquet"
    assert run("sign", str(corpus), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    write_format(corpus, records[1:])
    code, _, stderr = run("sign", str(corpus), "--id-field", "id", "-o", str(store), *(["--prune"] if prune else []))
    assert code == 0 and "(0 new, 0 changed, 0 unchanged, 2 moved, 1 removed;" in stderr, stderr
    code, stdout, stderr = run("find", str(store), "-t", "0.8", "--output", "members", "--format", "tsv", "-q")
    assert code == 0 and "gone" not in stdout + stderr
    assert stdout.splitlines()[1:] == ["x\t1\tkeep\t2\tx", "y\t1\tdrop\t2\tx"]
    code, stdout, stderr = run("estimate", str(store), "x", "y", "--exact", "--format", "json")
    assert code == 0 and json.loads(stdout)["exact"] == pytest.approx(12 / 13), stderr
    out = tmp_path / f"clean{''.join(corpus.suffixes)}"
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-t", "0.8", "-o", str(out))
    assert code == 0 and "1 kept, 1 dropped" in stderr, stderr


def test_a_record_moved_to_another_file_moves_its_id_in_the_same_run(tmp_path: Path) -> None:
    """x moves from a.jsonl to b.jsonl, both read in one run: a.jsonl no longer holds it, so the id moves to b.jsonl
    at once (before, b's copy was skipped as held elsewhere until a prune removed a's)."""
    a = jsonl(tmp_path / "a.jsonl", ("x", T), ("u", U))
    b = jsonl(tmp_path / "b.jsonl", ("v", U + " and more"))
    store = tmp_path / "s.parquet"
    dedup.sign([str(a), str(b)], store, dedup.SignOptions(input=dedup.InputOptions(id_field="id")))
    jsonl(a, ("u", U))
    jsonl(b, ("v", U + " and more"), ("x", T))
    report = dedup.sign([str(a), str(b)], store, dedup.SignOptions(input=dedup.InputOptions(id_field="id")))
    assert report.moved == 2 and report.documents == 0 and not report.read.held_elsewhere  # u moved up, x over
    located = dict(zip(read_store(store).ids, read_store(store).paths, strict=True))
    assert located["x"] == f"{b}#line=2&field=text" and located["u"] == f"{a}#line=1&field=text"


def test_a_file_changed_since_signing_finds_its_records_by_id(tmp_path: Path) -> None:
    """Edited after its last sign, not signed again: find reads it again and finds each named record wherever it is
    now, so one that moved is live and one that was deleted is gone, even where another copy of its text now sits
    at its old place."""
    data = jsonl(tmp_path / "d.jsonl", ("u", U), ("k", T), ("m", T), ("n", T + " again"))
    store = tmp_path / "s.parquet"
    dedup.sign([str(data)], store, dedup.SignOptions(input=dedup.InputOptions(id_field="id")))
    jsonl(data, ("u", U), ("m", T), ("n", T + " again"))  # k deleted: m now at k's place, with k's text
    result = dedup.find(store, dedup.FindOptions(threshold=0.8))
    assert result.gone == ["k"]
    assert {(member.id, member.action) for member in result.members()} == {("k", "gone"), ("m", "keep"),
                                                                            ("n", "drop")}


def test_a_record_delivered_in_two_inputs_is_written_once(tmp_path: Path) -> None:
    day1 = jsonl(tmp_path / "day1.jsonl", ("k", T), ("u", U))
    day2 = jsonl(tmp_path / "day2.jsonl", ("k", T), ("w", "a third text about the weather in the mountains today"))
    out = tmp_path / "clean"
    code, _, stderr = run("filter", str(day1), str(day2), "--sign", "--id-field", "id", "-s",
                          str(tmp_path / "s.parquet"), "-o", str(out))
    assert code == 0, stderr
    written = texts_of(out / "day1.jsonl") + texts_of(out / "day2.jsonl")
    assert sorted(written) == sorted([T, U, "a third text about the weather in the mountains today"])
    assert "1 with an id already read skipped" in stderr
    # Signed in an earlier run, the second delivery is named as sign names it.
    (tmp_path / "s.parquet").rename(tmp_path / "old.parquet")
    assert run("sign", str(day1), "--id-field", "id", "-o", str(tmp_path / "t.parquet"), "-q")[0] == 0
    assert run("sign", str(day2), "--id-field", "id", "-o", str(tmp_path / "t.parquet"), "-q")[0] == 0
    code, _, stderr = run("filter", str(day1), str(day2), "-s", str(tmp_path / "t.parquet"), "-o", str(out))
    assert code == 0 and "id 'k' is stored from another source" in stderr
    assert sorted(texts_of(out / "day1.jsonl") + texts_of(out / "day2.jsonl")) == sorted(written)


@pytest.mark.parametrize("options", [["--id-field", "url"], ["--input-format", "lines"], ["--id-field", "text"]])
def test_filter_refuses_ids_given_another_way_than_the_store(tmp_path: Path, options: list[str]) -> None:
    data = jsonl(tmp_path / "d.jsonl", ("k", T), ("m", T))
    store = tmp_path / "s.parquet"
    assert run("sign", str(data), "--id-field", "id", "-o", str(store), "-q")[0] == 0
    out = tmp_path / "out.jsonl"
    code, _, stderr = run("filter", str(data), "-s", str(store), "-o", str(out), *options)
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and not out.exists()
    assert "--id-field 'id'" in stderr and "as its run 1 did" in stderr


def chain(folder: Path) -> Path:
    """a = words 1–70, b = 16–85, c = 31–100: R(a, b) = R(b, c) ≈ 0.63, R(a, c) = 0.375."""
    words = [f"w{i}" for i in range(1, 101)]
    folder.mkdir()
    for name, (start, stop) in {"a.txt": (0, 70), "b.txt": (15, 85), "c.txt": (30, 100)}.items():
        (folder / name).write_text(" ".join(words[start:stop]))
    return folder


def test_filter_drops_nothing_without_a_kept_document_beside_it(tmp_path: Path) -> None:
    corpus = chain(tmp_path / "c")
    code, _, stderr = run("filter", str(corpus), "--sign", "-s", str(tmp_path / "s.parquet"), "-o",
                          str(tmp_path / "out"))
    assert code == 0 and sorted(p.name for p in (tmp_path / "out").glob("*.txt")) == ["a.txt", "c.txt"], stderr
    code, _, _ = run("filter", str(corpus), "-s", str(tmp_path / "s.parquet"), "--group", "components", "-o",
                     str(tmp_path / "components"))
    assert code == 0 and sorted(p.name for p in (tmp_path / "components").glob("*.txt")) == ["a.txt"]
    code, stdout, _ = run("find", str(tmp_path / "s.parquet"), "--group", "witness", "--output", "members", "-q",
                          "--format", "tsv", "--no-header")
    assert stdout == "a.txt\t1\tkeep\t2\ta.txt\nb.txt\t1\tdrop\t2\ta.txt\n"
