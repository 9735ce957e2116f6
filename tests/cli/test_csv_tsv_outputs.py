r"""CSV and TSV outputs read back by two parsers (Python's csv module and pyarrow.csv) give the JSON Lines records.

Ids hold what breaks naive writers: a carriage return (which ``csv.writer(lineterminator="\n")`` leaves unquoted, so
parsers read a made-up row), a line feed, a tab, a double quote, a comma, a backslash, NUL, a file name that is not
UTF-8 (written ``\xNN``) and a lone surrogate of a JSON id. CSV is RFC 4180 (quoted where needed); TSV is
PostgreSQL's text format (never quoted, ``\\``, ``\t``, ``\n``, ``\r`` escaped), read with quoting off and then
unescaped (``dedup_cli.inputs.decoding.tsv_unescape``). A Hypothesis test writes arbitrary ids the same way.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
from click.testing import CliRunner
from helpers import csv_module_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.cli.main import cli
from dedup_cli.cli.record_writers import CsvWriter, write_records
from dedup_cli.engine.stages.results import FIELDS
from dedup_cli.inputs.decoding import tsv_unescape
from dedup_cli.inputs.members import read_members

AWKWARD = ["a\rb", "c\nd", "e\tf", 'g"h', "i,j", "k\\l", "m\0n", "o\r\np", '"', "\\t", "\\", " s ", "\udcff"]
"""JSON Lines ids; ``\udcff`` is a JSON string's lone surrogate, stored as ``\xff``."""
FILE_NAMES = [b"r\rfile.txt", b"n\nfile.txt", b"t\tfile.txt", b'q"file.txt', b"c,file.txt", b"b\\file.txt",
              b"caf\xe9.txt", b"\\xe9.txt"]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def read_csv(data: bytes, columns: list[str], parser: str) -> list[list[str]]:
    """The rows after the header, every field a string, as ``parser`` reads CSV."""
    if parser == "csv":
        rows = csv_module_rows(data.decode("utf-8"))
        assert rows[0] == columns
        return rows[1:]
    table = pa_csv.read_csv(io.BytesIO(data), parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(columns, pa.string())))
    assert table.column_names == columns
    return [list(row.values()) for row in table.to_pylist()]


def read_tsv(data: bytes, columns: list[str], parser: str) -> list[list[str]]:
    """The rows after the header, every field unescaped, as ``parser`` reads TSV with quoting off."""
    if parser == "csv":
        rows = csv_module_rows(data.decode("utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        options = pa_csv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False)
        table = pa_csv.read_csv(io.BytesIO(data), parse_options=options, read_options=pa_csv.ReadOptions(
            autogenerate_column_names=True), convert_options=pa_csv.ConvertOptions(
            column_types={f"f{index}": pa.string() for index in range(len(columns))}))
        rows = [list(row.values()) for row in table.to_pylist()]
    assert rows[0] == columns
    return [[tsv_unescape(field) for field in row] for row in rows[1:]]


def expected_rows(records: list[dict[str, Any]], kind: str) -> list[list[str]]:
    """The TSV/CSV rows of JSON Lines records, as text (null is empty)."""
    if kind == "groups":
        return [[str(record["group"]), str(record["size"]), member] for record in records
                for member in record["members"]]
    return [["" if record[name] is None else str(record[name]) for name in FIELDS[kind]] for record in records]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Near-duplicates under every awkward id: records of a JSON Lines file, and files with awkward names."""
    folder = tmp_path_factory.mktemp("awkward")
    corpus = folder / "corpus"
    (corpus / "files").mkdir(parents=True)
    words = [f"w{index}" for index in range(300)]

    def text(variant: int) -> str:
        return " ".join(f"v{variant}" if index == variant else word for index, word in enumerate(words))

    lines = [json.dumps({"id": identifier, "text": text(number)}) for number, identifier in enumerate(AWKWARD)]
    (corpus / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for number, name in enumerate(FILE_NAMES):
        with open(os.path.join(os.fsencode(corpus / "files"), name), "w", encoding="utf-8") as handle:
            handle.write(text(100 + number))
    path = folder / "sigs"
    code, stderr = invoke("sign", str(corpus), "-o", str(path), "--id-field", "id", "-q")
    assert code == 0, stderr
    return path


@pytest.mark.parametrize("kind", ["groups", "pairs", "members"])
def test_csv_and_tsv_read_back_by_two_parsers_are_the_json_lines_records(store: Path, tmp_path: Path,
                                                                          kind: str) -> None:
    common = ("find", str(store), "-t", "0.5", "--output", kind, "-q")
    assert invoke(*common, "-o", str(tmp_path / "out.jsonl"))[0] == 0
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text("utf-8").splitlines()]
    expected = expected_rows(records, kind)
    ids = {row[FIELDS[kind].index("id")] for row in expected} if kind != "pairs" else set()
    if kind == "groups":
        assert len(records) == 1 and len(expected) == len(AWKWARD) + len(FILE_NAMES)
        assert {"a\rb", "o\r\np", "m\0n", "\\xff", "files/r\rfile.txt", "files/caf\\xe9.txt"} <= {
            member.removeprefix("records.jsonl:") for member in ids} | ids
    columns = list(FIELDS[kind])
    for fmt, read in (("csv", read_csv), ("tsv", read_tsv)):
        assert invoke(*common, "--format", fmt, "-o", str(tmp_path / f"out.{fmt}"))[0] == 0
        data = (tmp_path / f"out.{fmt}").read_bytes()
        for parser in ("csv", "pyarrow"):
            assert read(data, columns, parser) == expected, (fmt, parser)
        if fmt == "tsv":  # a row a line, whatever the ids hold: what cut and awk need
            assert data.count(b"\n") == len(expected) + 1 and b"\r" not in data
    if kind == "members":
        for fmt in ("jsonl", "csv", "tsv"):
            members = read_members(str(tmp_path / f"out.{fmt}"))
            assert members.ids == [record["id"] for record in records]
            assert members.representatives == [record["representative"] for record in records]
            assert members.drop.tolist() == [record["action"] == "drop" for record in records]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_members_without_a_header_are_read_back_too(store: Path, tmp_path: Path, fmt: str) -> None:
    common = ("find", str(store), "-t", "0.5", "--output", "members", "-q")
    assert invoke(*common, "-o", str(tmp_path / "out.jsonl"))[0] == 0
    assert invoke(*common, "--format", fmt, "--no-header", "-o", str(tmp_path / f"out.{fmt}"))[0] == 0
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text("utf-8").splitlines()]
    assert read_members(str(tmp_path / f"out.{fmt}")).ids == [record["id"] for record in records]


IDS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
"""Any id a store can hold: every character but surrogates (ids are valid Unicode: see ``display_name``)."""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(IDS, IDS, st.none() | st.floats(0, 1)), min_size=1, max_size=5))
def test_any_ids_are_read_back_by_both_parsers(pairs: list[tuple[str, str, float | None]]) -> None:
    records = [{"id_a": first, "id_b": second, "estimate": 0.5, "stderr": 0.01, "ci_low": 0.4, "ci_high": 0.6,
                "matches": 64, "exact": exact} for first, second, exact in pairs]
    expected = expected_rows(records, "pairs")
    for fmt, read in (("csv", read_csv), ("tsv", read_tsv)):
        stream = io.StringIO()
        write_records(iter(records), "pairs", fmt, stream)
        data = stream.getvalue().encode("utf-8")
        for parser in ("csv", "pyarrow"):
            assert read(data, list(FIELDS["pairs"]), parser) == expected, (fmt, parser)



FIELD = st.one_of(st.text(alphabet=st.sampled_from(',"\r\n\0\t\\ ab\x85\u2028'), max_size=6), st.text(max_size=6),
                  st.integers(), st.floats(allow_nan=False), st.none())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10's csv.writer refuses a NUL in a field")
@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(FIELD, min_size=1, max_size=4), min_size=1, max_size=5))
def test_csv_rows_are_the_bytes_of_pythons_csv_writer(rows: list[list[Any]]) -> None:
    # dedup writes its CSV rows itself, on every Python, as 3.11's csv.writer writes them with "\r\n" ends, each
    # end then "\n" (None an empty field, as the writer takes it).
    ours = io.StringIO()
    CsvWriter(ours).writerows(rows)
    expected = []
    for row in rows:
        theirs = io.StringIO()
        csv.writer(theirs, lineterminator="\r\n").writerow(row)
        expected.append(theirs.getvalue()[:-2] + "\n")
    assert ours.getvalue() == "".join(expected)
