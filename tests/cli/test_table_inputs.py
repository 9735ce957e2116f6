"""CSV and TSV inputs through the command line: an inch mark in a TSV record and a stray quote in an unquoted CSV field
are plain characters, every record is signed or named, --strict refuses any skip, -j 1 and -j 2 write the same
store, and filter writes back the kept records byte for byte (annotations in the format's own way)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.inputs import delimited, task_planning
from dedup_cli.store.store import read_store

SAME = "the quick brown fox jumps over the lazy dog again and again"
OTHER = "an entirely different sentence about signatures stores and bands"
TSV_RECORDS = [f'1\t12" pipe {SAME}\tx"y', f'2\t12" pipe {SAME}\t"quoted', f"3\t{OTHER} with a \\ and 'quotes'\t",
               f'4\t"{OTHER} with a \\ and \'quotes\'\t"', "", '5\tfifth "unbalanced\tz']
CSV_RECORDS = [f'1,a b"c {SAME}', f'2,"a b""c {SAME}"', f'3,"multi\nline, ""{OTHER}"""',
               f'4,"multi\nline, ""{OTHER}"""', "broken", '5,fifth 12" "quote"']


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_an_inch_mark_in_a_tsv_record_is_a_plain_character(tmp_path: Path) -> None:
    data = b'id\ttext\n1\t12" pipe\n2\tsecond\n3\tthird\n4\tfourth\n5\tfifth\n'
    (tmp_path / "t.tsv").write_bytes(data)
    signed = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(tmp_path / "t.tsv"), "--id-field", "id",
                             "-o", str(tmp_path / "s")], capture_output=True, check=False)
    assert signed.returncode == 0, signed.stderr
    assert b"signed 5 documents" in signed.stderr and b"0 inputs skipped" in signed.stderr
    assert b"warning" not in signed.stderr
    assert sorted(read_store(tmp_path / "s").ids) == ["1", "2", "3", "4", "5"]


def test_a_stray_quote_in_an_unquoted_csv_field_is_a_plain_character(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_bytes(b'id,text\n1,a,b"c\n2,a b"c d\n3,third\n4,"quoted ""x"""\n5,fifth\n')
    code, output = run("sign", str(tmp_path / "c.csv"), "--id-field", "id", "-o", str(tmp_path / "s"))
    assert code == 0 and "signed 5 documents" in output and "0 inputs skipped" in output, output
    assert sorted(read_store(tmp_path / "s").ids) == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("data, named", [
    (b'id,text\n1,one\n2,"never closed\n3,three\n', 'c.csv record 2: not one CSV record (a quoted field is not '
                                                    'closed before the end of the file)'),
    (b"id,text\n1,one\nragged\n3,three\n", "c.csv record 2: no 'text' column (the record has 1 fields, the header 2)"),
])
def test_strict_makes_a_record_that_cannot_be_read_fatal(tmp_path: Path, data: bytes, named: str) -> None:
    (tmp_path / "c.csv").write_bytes(data)
    code, output = run("sign", str(tmp_path / "c.csv"), "--id-field", "id", "-o", str(tmp_path / "s"))
    assert code == 0 and "1 input skipped" in output and named in output, output  # read, and the others too
    code, output = run("sign", str(tmp_path / "c.csv"), "--id-field", "id", "-o", str(tmp_path / "t"), "--strict")
    assert code == 1 and named in output and "--strict makes any skip an error" in output, output
    assert read_store(tmp_path / "t").ids == []  # nothing stored
    code, output = run("filter", str(tmp_path / "c.csv"), "--sign", "--strict", "--id-field", "id", "-s",
                       str(tmp_path / "u"), "-o", str(tmp_path / "out.csv"))
    assert code == 1 and named in output and not (tmp_path / "out.csv").exists(), output


def _corpus(folder: Path, records: int) -> None:
    """A CSV and a TSV of ``records`` records each, with stray quotes, quoted newlines, blank and ragged rows."""
    folder.mkdir()
    csv_rows = [row.replace("1,", "", 1) for row in CSV_RECORDS]
    tsv_rows = [row.split("\t", 1)[-1] for row in TSV_RECORDS]
    (folder / "a.csv").write_bytes(("\ufeffid,text\r\n" + "".join(
        f"c{n},{csv_rows[n % len(csv_rows)]} {n % 7}\r\n" if n % 11 else "\r\n" for n in range(records))).encode())
    (folder / "b.tsv").write_bytes(("id\ttext\n" + "".join(
        f"t{n}\t{tsv_rows[n % len(tsv_rows)]} {n % 7}\n" for n in range(records))).encode())


def test_jobs_sign_hostile_csv_and_tsv_cut_small_into_the_same_store(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _corpus(tmp_path / "corpus", 400)
    monkeypatch.setattr(task_planning, "CHUNK_LINES", 7)
    monkeypatch.setattr(task_planning, "CHUNK_BYTES", 300)
    monkeypatch.setattr(delimited, "_IN_PLACE_BLOCK", 61)
    parts = []
    for jobs in ("1", "2"):
        store = tmp_path / f"store-{jobs}"
        code, output = run("sign", str(tmp_path / "corpus"), "--id-field", "id", "-o", str(store), "-j", jobs)
        assert code == 0, output
        parts.append({path.name: path.read_bytes() for path in sorted(store.glob("part-*.parquet"))})
    assert parts[0] == parts[1] and parts[0]
    assert len(read_store(tmp_path / "store-1").ids) == 400 - 37 + 400  # all but the blank CSV records


@pytest.mark.parametrize("name, records", [("t.tsv", TSV_RECORDS), ("c.csv", CSV_RECORDS)])
def test_filter_writes_back_the_kept_records_byte_for_byte(tmp_path: Path, name: str, records: list[str]) -> None:
    (tmp_path / "in").mkdir()
    separator = "\t" if name.endswith(".tsv") else ","
    header = f"\ufeffid{separator}text{separator}note" if separator == "\t" else "id,text"
    raw = [(line + "\r\n").encode() for line in [header, *records]]
    (tmp_path / "in" / name).write_bytes(b"".join(raw))
    store = tmp_path / "s"
    code, output = run("sign", str(tmp_path / "in"), "--id-field", "id", "-o", str(store))
    assert code == 0 and "signed 5 documents" in output, output
    code, output = run("filter", str(tmp_path / "in"), "-s", str(store), "-o", str(tmp_path / "out"), "-t", "0.9")
    assert code == 0, output
    assert (tmp_path / "out" / name).read_bytes() == b"".join(raw[k] for k in (0, 1, 3, 5, 6))  # 2 and 4 dropped
    code, output = run("filter", str(tmp_path / "in"), "-s", str(store), "-o", str(tmp_path / "notes"), "-t", "0.9",
                       "--annotate")
    assert code == 0, output
    annotated = (tmp_path / "notes" / name).read_bytes().split(b"\r\n")
    if separator == "\t":  # one line a record, three more fields, nothing quoted
        assert [len(line.split(b"\t")) for line in annotated[:-1]] == [6, 6, 6, 6, 6, 1, 6]
        assert annotated[2].endswith(b'\t"quoted\t1\tfalse\t1')


def test_tsv_annotations_escape_what_would_break_the_line(tmp_path: Path) -> None:
    """A representative id from another input may hold a tab or a quote: written as find writes TSV fields."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(json.dumps({"id": 'a\t"y', "text": SAME}) + "\n")
    (tmp_path / "in" / "b.tsv").write_bytes(f"id\ttext\nb1\t{SAME}\n".encode())
    store = tmp_path / "s"
    assert run("sign", str(tmp_path / "in"), "--id-field", "id", "-o", str(store))[0] == 0
    code, output = run("filter", str(tmp_path / "in"), "-s", str(store), "-o", str(tmp_path / "out"), "--annotate")
    assert code == 0, output
    assert (tmp_path / "out" / "b.tsv").read_bytes() == (
        b"id\ttext\tdedup_group\tdedup_keep\tdedup_representative\n" + f'b1\t{SAME}\t1\tfalse\ta\\t"y\n'.encode())
