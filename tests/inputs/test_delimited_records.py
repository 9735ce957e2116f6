"""Every record of a CSV or TSV file is a document or a named, counted skip, numbered as Python's csv module (CSV) or a
split on newlines and tabs (TSV) numbers it: generated files with stray quotes in unquoted fields, quoted fields
holding newlines, delimiters and doubled quotes, byte-order marks, ``\\r\\n``, ragged rows and blank lines, read
through the chunk planner cut into tiny blocks and chunks, and re-read and walked record by record as ``filter``
walks them."""

from __future__ import annotations

import csv
import gzip
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_delimited import Trickle

from dedup_cli.inputs import delimited, task_planning
from dedup_cli.inputs.chunks import LineChunk
from dedup_cli.inputs.decoding import BOM
from dedup_cli.inputs.delimited import UNCLOSED, iter_raw_records, reread_records, split_records, table_chunks
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import reread_documents
from dedup_cli.options.input_options import InputOptions

UNQUOTED = ["a", "b", " ", '"', "é", "\t", "x", '""']  # a quote inside an unquoted field is a plain character
QUOTED = ["a", " ", '"', ",", "\n", "\r", "\r\n", "é"]
TSV_CHARACTERS = ["a", " ", '"', "\\", "é", "'", "x", '""', ","]
LINE_ENDS = st.sampled_from(["\n", "\r\n"])


@st.composite
def csv_field(draw: Any) -> str:
    """An unquoted field (never starting with a quote), or a quoted one, maybe followed by plain characters."""
    if draw(st.booleans()):
        text = "".join(draw(st.lists(st.sampled_from(QUOTED), max_size=6)))
        return '"' + text.replace('"', '""') + '"' + draw(st.sampled_from(["", "", "z", 'z"']))
    return "".join(draw(st.lists(st.sampled_from(UNQUOTED), max_size=6))).lstrip('"')


@st.composite
def csv_file(draw: Any) -> tuple[bytes, bool]:
    """A CSV file whose text is its second column, and whether it ends inside a quoted field left open."""
    header = draw(st.sampled_from(["id,text", '"id","text"', 'id,"text",n']))
    lines = [draw(st.sampled_from(["", "\ufeff"])) + header + draw(LINE_ENDS)]
    for _ in range(draw(st.integers(0, 12))):
        lines.append(",".join(draw(st.lists(csv_field(), max_size=4))) + draw(LINE_ENDS))
    ending = draw(st.sampled_from(["newline", "none", "open"]))
    if ending == "none" and len(lines) > 1:
        lines[-1] = lines[-1].rstrip("\r\n")
    if ending == "open":
        lines.append('9,"' + "".join(draw(st.lists(st.sampled_from(QUOTED), max_size=5))).replace('"', '""'))
    return "".join(lines).encode(), ending == "open"


@st.composite
def tsv_file(draw: Any) -> bytes:
    """A TSV file: fields of any characters but tabs, newlines and carriage returns, quotes and backslashes too."""
    header = draw(st.sampled_from(["id\ttext", '"id"\ttext', "id\ttext\tn"]))
    lines = [draw(st.sampled_from(["", "\ufeff"])) + header + draw(LINE_ENDS)]
    for _ in range(draw(st.integers(0, 12))):
        fields = ["".join(draw(st.lists(st.sampled_from(TSV_CHARACTERS), max_size=6)))
                  for _ in range(draw(st.integers(0, 4)))]
        lines.append("\t".join(fields) + draw(LINE_ENDS))
    if draw(st.booleans()) and len(lines) > 1:
        lines[-1] = lines[-1].rstrip("\r\n")
    return "".join(lines).encode()


Expected = tuple[int, list[tuple[int, str, str]], set[int], str]


def csv_module_records(data: bytes, open_end: bool) -> Expected:
    """(how many records, (number, text, first field) of those that are documents, the numbers that must be skipped
    as not one record, the first column's name), as Python's csv module reads ``data``; a last record left inside
    an open quote is not one."""
    header, *rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    unclosed = {len(rows)} if open_end else set()
    return len(rows), [(number, row[1], row[0]) for number, row in enumerate(rows, 1)
                       if len(row) > 1 and number not in unclosed], unclosed, header[0]


def split_records_of(data: bytes) -> Expected:
    """The same for TSV, by a split on newlines (a ``\\r`` before one dropped) and tabs."""
    header, *lines = data.decode("utf-8-sig").split("\n")
    lines = [line.removesuffix("\r") for line in (lines[:-1] if lines and lines[-1] == "" else lines)]
    return len(lines), [(number, *line.split("\t")[1::-1]) for number, line in enumerate(lines, 1)
                        if line.strip(" \t") and len(line.split("\t")) > 1], set(), header.split("\t")[0]


def read_file(data: bytes, kind: str, compressed: bool, block: int, chunk_bytes: int, chunk_records: int
              ) -> tuple[list[Any], ReadReport, Path, tempfile.TemporaryDirectory[str]]:
    """The documents read from ``data`` written to a file, the planner reading blocks of ``block`` bytes and
    cutting chunks of ``chunk_bytes`` bytes or ``chunk_records`` records."""
    folder = tempfile.TemporaryDirectory()
    path = Path(folder.name) / (f"t.{kind}.gz" if compressed else f"t.{kind}")
    path.write_bytes(gzip.compress(data) if compressed else data)
    report = ReadReport()
    with pytest.MonkeyPatch.context() as patch:
        for name in ("_BLOCK", "_IN_PLACE_BLOCK"):
            patch.setattr(delimited, name, block)
        patch.setattr(task_planning, "CHUNK_BYTES", chunk_bytes)
        patch.setattr(task_planning, "CHUNK_LINES", chunk_records)
        documents = list(read_inputs([str(path)], InputOptions(), report))
    return documents, report, path, folder


def check_every_record(data: bytes, kind: str, expected: Expected, reading: tuple[bool, int, int, int]) -> None:
    """Documents, skips and blanks account for every record, numbered as ``expected`` numbers them; the
    documents re-read as they were read (a field of the same record with them, as ``--keep-field`` reads it);
    ``filter``'s walk finds the same records."""
    count, documents, unclosed, first_column = expected
    read, report, path, folder = read_file(data, kind, *reading)
    with folder:
        name = path.name
        assert [(d.id, d.text) for d in read] == [(f"{name}:{n}", text) for n, text, _ in documents]
        skipped = {int(where.rsplit(" ", 1)[1]): reason for where, reason in report.malformed}
        assert len(skipped) == len(report.malformed) and not skipped.keys() & {n for n, _, _ in documents}
        assert {number for number, reason in skipped.items() if reason == UNCLOSED} == unclosed
        assert len(documents) + len(skipped) + report.blank_lines == count  # nothing lost unnamed
        assert reread_documents([d.path for d in read], [d.content_hash for d in read]) == [d.text for d in read]
        numbers = {number for number, _, _ in documents} | unclosed | {count + 1}
        assert reread_records(io.BytesIO(data), kind, numbers, ["text", first_column]) == {
            number: [text, first] for number, text, first in documents}
        walked = list(iter_raw_records(Trickle(data, count), kind))
        assert b"".join(raw for _, raw, _ in walked) == data
        assert [number for number, _, _ in walked] == list(range(count + 1))
        assert [closed for _, _, closed in walked] == [n not in unclosed for n in range(count + 1)]


READING = st.tuples(st.booleans(), st.integers(1, 9), st.integers(1, 40), st.integers(1, 4))


@settings(max_examples=150)
@given(file=csv_file(), reading=READING)
def test_csv_records_are_the_csv_modules(file: tuple[bytes, bool], reading: tuple[bool, int, int, int]) -> None:
    data, open_end = file
    check_every_record(data, "csv", csv_module_records(data, open_end), reading)


@settings(max_examples=100)
@given(data=tsv_file(), reading=READING)
def test_tsv_records_are_its_lines_split_on_tabs(data: bytes, reading: tuple[bool, int, int, int]) -> None:
    check_every_record(data, "tsv", split_records_of(data), reading)


def planned(data: bytes, stream: Any, kind: str, chunk_bytes: int, chunk_records: int) -> list[tuple[bytes, int]]:
    got = list(table_chunks(stream, b"", lambda: 0, False, chunk_bytes, chunk_records, kind))
    assert isinstance(got[0], bytes) and all(isinstance(chunk, LineChunk) for chunk in got[1:])
    return [(got[0], 0)] + [(chunk.data, chunk.first_line) for chunk in got[1:] if isinstance(chunk, LineChunk)]


@settings(max_examples=150)
@given(file=csv_file(), tsv=tsv_file(), seed=st.integers(0, 1000), block=st.integers(1, 9),
       chunk_bytes=st.integers(1, 60), chunk_records=st.integers(1, 5))
def test_the_planners_cuts_depend_on_the_bytes_alone(file: tuple[bytes, bool], tsv: bytes, seed: int, block: int,
                                                     chunk_bytes: int, chunk_records: int) -> None:
    """Chunks cut from reads of any size are the same; each holds whole records, numbered on from the last."""
    for kind, data in (("csv", file[0]), ("tsv", tsv)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(delimited, "_BLOCK", block)
            chunks = planned(data, io.BytesIO(data), kind, chunk_bytes, chunk_records)
        assert planned(data, Trickle(data, seed), kind, chunk_bytes, chunk_records) == chunks
        assert b"".join(chunk for chunk, _ in chunks) == data
        records = [chunks[0][0]] + [record for chunk, _ in chunks[1:] for record in split_records(chunk, kind)[0]]
        assert records == [raw for _, raw, _ in iter_raw_records(io.BytesIO(data), kind)]
        counts = [len(split_records(chunk, kind)[0]) for chunk, _ in chunks[1:]]
        assert [first for _, first in chunks[1:]] == [1 + sum(counts[:k]) for k in range(len(counts))]


def test_a_header_left_inside_an_open_quote_is_refused(tmp_path: Path) -> None:
    from dedup_cli.errors import InputError

    (tmp_path / "h.csv").write_bytes(b'"id,text\n1,one\n')
    with pytest.raises(InputError, match=r"h.csv: its header is not one CSV record \(a quoted field is not closed"):
        list(read_inputs([str(tmp_path / "h.csv")], InputOptions(), ReadReport()))
    assert split_records(BOM + b'"a', "csv") == ([BOM + b'"a'], True)  # not the file's start: the mark is text
