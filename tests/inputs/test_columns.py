"""Documents read as columns (whole files, JSON Lines parsed a block at a time) are exactly the documents the
line-by-line reader gives, with the same report; the block parser is used whenever it can vouch for a chunk; the
directory walk gives files in id order as it goes, and signing starts before it ends."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.engine.local import sign as local_sign
from dedup_cli.inputs import blocks, discovery, name_formats, task_planning
from dedup_cli.inputs.chunks import LineChunk, chunk_lines
from dedup_cli.inputs.columns import blank, blank_texts
from dedup_cli.inputs.discovery import walk_files
from dedup_cli.inputs.files import line_document, read_files, read_whole
from dedup_cli.inputs.locations import Source, display_name
from dedup_cli.inputs.records import Document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import LinesTask, read_task_columns
from dedup_cli.options.input_options import InputOptions

SOURCE_PATH = "/corpus/records.jsonl"


def reference(data: bytes, first_line: int, source: Source, options: InputOptions
              ) -> tuple[list[tuple[str, Document]], ReadReport]:
    """What the record-by-record reader gives for a chunk: (where, document) of each record, and its report."""
    report = ReadReport(max_document_bytes=options.max_document_bytes)
    found = []
    for number, line, consumed in chunk_lines(LineChunk(data, first_line), options.max_document_bytes):
        report.bytes_read += consumed
        if line is None:
            report.note("oversized", (f"{source.display}:{number}", consumed))
        elif not line or line.isspace():
            report.blank_lines += 1
        else:
            document = line_document(line, number, source, options, 7, report)
            if document is not None:
                found.append((f"{source.display}:{number}", document))
    return found, report


def as_columns(data: bytes, first_line: int, source: Source, options: InputOptions
               ) -> tuple[list[tuple[str, Document]], ReadReport]:
    read = read_task_columns(LinesTask(source, LineChunk(data, first_line), 7, len(data)), options)
    columns = read.columns
    documents = columns.documents()
    # The flags the kernel relies on: which texts are ASCII (JSON escapes make others of ASCII lines), which empty.
    assert columns.ascii.tolist() == [document.text.isascii() for document in documents]
    assert columns.empty.tolist() == [document.is_empty for document in documents]
    # The input's tally (documents read, records skipped), which the line-by-line reader leaves to its caller.
    skipped = sum(read.report.count(kind) for kind in ReadReport.RECORD_SKIPS)
    assert read.report.records_by_input.pop(source.display) == [len(columns), skipped]
    return list(zip([columns.wheres[d] for d in range(len(columns))], documents, strict=True)), read.report


def assert_same(data: bytes, first_line: int = 1, format: str = "jsonl", **reading: Any) -> None:
    source = Source("records.jsonl", SOURCE_PATH, SOURCE_PATH, format, None)
    options = InputOptions(**reading)
    expected, expected_report = reference(data, first_line, source, options)
    actual, actual_report = as_columns(data, first_line, source, options)
    assert actual == expected
    assert actual_report == expected_report


def record(text: str, identifier: Any = None, ascii_only: bool = True, **extra: Any) -> bytes:
    fields: dict[str, Any] = {"text": text, **extra}
    if identifier is not None:
        fields["id"] = identifier
    return json.dumps(fields, ensure_ascii=ascii_only).encode("utf-8")


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
good_lines = st.builds(record, texts, st.one_of(st.none(), st.text(min_size=1, max_size=8),
                                                  st.integers(-10**12, 10**12)),
                       st.booleans(), extra=st.one_of(st.integers(), st.lists(st.integers(), max_size=3)))
blank_lines = st.sampled_from([b"", b"   ", b"\t", b"\r", b" \t "])
bad_lines = st.sampled_from([
    b"not json", b'{"text": 5}', b'{"id": "x"}', b"[1, 2]", b'"text"', b'{"text": "a"} {"text": "b"}',
    b'{"text": "a\\ud800b"}', b'{"text": "\xff\xfe"}', b'{"text": null}', b'{"text": "a", "text": "b"}',
    b'{"text": "a", "id": ""}', b'{"text": "a", "id": 1.5}', b'{"text": "a", "id": true}', b'{"text": "a",}',
    b'{"text": "a", "x": ' + b"[" * 600 + b"]" * 600 + b"}", b'\xef\xbb\xbf{"text": "a"}', b"\x0c",
    b'{"text": "a", "id": 123456789012345678901234567890}', b'{"text": "tab\there"}',
    b"true", b"-1", b"[]",
])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(good_lines, blank_lines, bad_lines), min_size=1, max_size=12), st.booleans(),
       st.booleans(), st.booleans(), st.sampled_from([1, 17]))
def test_a_chunk_reads_as_the_line_by_line_reader_reads_it(lines: list[bytes], crlf: bool, last_newline: bool,
                                                           bom: bool, first_line: int) -> None:
    data = (b"\r\n" if crlf else b"\n").join(lines) + (b"\n" if last_newline else b"")
    if bom:
        data = b"\xef\xbb\xbf" + data
    assert_same(data, first_line)
    assert_same(data, first_line, id_field="id")
    assert_same(data, first_line, format="lines")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.one_of(good_lines, blank_lines), min_size=1, max_size=12), st.booleans(), st.booleans())
def test_the_block_parser_reads_every_chunk_of_good_records(lines: list[bytes], crlf: bool, with_id: bool) -> None:
    """The fast path is taken, not only correct when declined."""
    if with_id:  # ids of one type in a chunk, as real files have them
        lines = [record(f"text {n}", f"id{n}") if line.strip() else line for n, line in enumerate(lines)]
    data = (b"\r\n" if crlf else b"\n").join(lines) + b"\n"
    source = Source("records.jsonl", SOURCE_PATH, SOURCE_PATH, "jsonl", None)
    block = blocks.parse_block(data, 1, source, "text", "id" if with_id else None, None, 7)
    assert block is not None
    assert len(block.columns) == sum(1 for line in lines if line.strip())
    assert_same(data, id_field="id" if with_id else None)


def test_integer_ids_are_their_digits_and_mixed_ids_are_read_line_by_line() -> None:
    data = record("a", 5) + b"\n" + record("b", -0) + b"\n" + record("c", 10**15) + b"\n"
    source = Source("r", SOURCE_PATH, SOURCE_PATH, "jsonl", None)
    block = blocks.parse_block(data, 1, source, "text", "id", None, 0)
    assert block is not None and block.columns.ids == ["5", "0", "1000000000000000"]
    mixed = record("a", 5) + b"\n" + record("b", "x") + b"\n"
    assert blocks.parse_block(mixed, 1, source, "text", "id", None, 0) is None
    assert_same(mixed, id_field="id")


def test_lines_over_the_limit_are_read_line_by_line() -> None:
    data = record("short") + b"\n" + record("a much longer text " * 5) + b"\n"
    source = Source("r", SOURCE_PATH, SOURCE_PATH, "jsonl", None)
    assert blocks.parse_block(data, 1, source, "text", None, 40, 0) is None
    assert blocks.parse_block(data, 1, source, "text", None, 4000, 0) is not None
    assert_same(data, max_document_bytes=40)


def test_blank_follows_str_isspace() -> None:
    samples = ["", " ", "\x1c\x1f", "\u3000 \u00a0", " x", "\u3000x", "é", "\t\n\x0b\x0c\r"]
    encoded = "".join(samples).encode("utf-8")
    offsets = np.cumsum([0] + [len(text.encode("utf-8")) for text in samples])
    # As bytes, and as Arrow exports them (signed chars, cast to bytes as the block parser does).
    for data in (encoded, memoryview(pa.py_buffer(encoded)).cast("B")):
        assert blank_texts(data, offsets).tolist() == [not text or text.isspace() for text in samples]
        assert all(blank(data, int(offsets[i]), int(offsets[i + 1])) == (not t or t.isspace()) for i, t in
                   enumerate(samples))
    parsed = blocks.parse_block(record("\u00a0", ascii_only=False) + b"\n" + record("\u00a0x", ascii_only=False),
                                1, Source("r", SOURCE_PATH, SOURCE_PATH, "jsonl", None), "text", None, None, 0)
    assert parsed is not None and parsed.columns.empty.tolist() == [True, False]


def test_whole_files_read_as_columns_are_the_documents_read_one_by_one(tmp_path: Path) -> None:
    contents = {"plain.txt": b"plain text", "bom.txt": b"\xef\xbb\xbfwith a mark", "bad.txt": b"caf\xe9 bytes",
                "binary.bin": b"\x00\x01", "empty.txt": b"", "space.txt": b" \n\t ", "big.txt": b"x" * 100,
                "packed.txt.gz": gzip.compress("compressed é".encode()), "utf8.txt": "ünïcödé".encode()}
    paths = []
    for name, content in contents.items():
        (tmp_path / name).write_bytes(content)
        paths.append(str(tmp_path / name))
    paths.append(str(tmp_path / "missing.txt"))
    ids = [os.path.basename(path) for path in paths]
    report = ReadReport()
    columns = read_files(ids, paths, 50, report)
    expected_report = ReadReport()
    expected: list[Document] = []
    for identifier, path in zip(ids, paths, strict=True):
        source = Source(identifier, path, display_name(path), "text", name_formats.format_and_compression(path)[1])
        try:
            if source.compression is None:
                with open(path, "rb", buffering=0) as stream:
                    expected += [d for _, d in read_whole(stream, os.fstat(stream.fileno()), source, 50,
                                                          expected_report)]
            else:
                with gzip.open(path, "rb") as stream:
                    expected += [d for _, d in read_whole(stream, os.stat(path), source, 50, expected_report)]
        except OSError as error:
            expected_report.note("unreadable", (display_name(path), error.strerror))
    assert columns.documents() == expected
    assert report == expected_report
    assert [columns.wheres[d] for d in range(len(columns))] == [d.path for d in expected]
    assert columns.empty.tolist() == [d.is_empty for d in expected]


def tricky_tree(root: Path) -> list[str]:
    """Files whose names sort differently by path and by walk: a, a.txt, a-b, a/…, a0, A, names not in UTF-8."""
    relative = ["a.txt", "a-b", "a/x", "a/y/z", "a0", "A", "b/c", "ab", "a b/c", "zz", "ä", "a/.hidden/x"]
    for name in relative:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    raw = os.fsencode(root) + b"/caf\xe9"
    with open(raw, "wb") as handle:
        handle.write(b"latin-1 name")
    os.mkdir(os.fsencode(root) + b"/d\xff")
    with open(os.fsencode(root) + b"/d\xff/in", "wb") as handle:
        handle.write(b"inside")
    (root / ".hidden").write_text("never read")
    return [display_name(os.path.relpath(os.path.join(d, f), root)) for d, _, files in os.walk(root)
            for f in files if ".hidden" not in os.path.join(d, f)]


def test_the_walk_gives_files_in_id_order(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    everything = tricky_tree(root)
    expected = sorted(everything, key=lambda relative: (display_name(relative), relative))
    walked = [file.id for file in walk_files([str(root)], [], [], [], ReadReport())]
    assert walked == expected and len(walked) == 13
    # Several inputs, overlapping: merged in id order, each file once.
    named = [str(root / "a"), str(root / "zz"), str(root), str(root / "a" / "x")]
    assert [file.id for file in walk_files(named, [], [], [], ReadReport(), str(root))] == expected


def test_signing_starts_before_the_walk_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(60):
        (corpus / f"{index:02d}.txt").write_text(f"document {index} says a few words of its own " * 4)
    monkeypatch.setattr(task_planning, "TASK_FILES", 4)  # 15 tasks; two workers hold at most 4 at a time
    monkeypatch.setattr(discovery, "WALK_FILES", 4)  # the walk states the files four at a time
    events: list[str] = []
    real_status, real_signed = discovery._status, local_sign.TasksDone.signed

    def walking(path: str) -> os.stat_result | None:
        events.append("walked")
        return real_status(path)

    def signed(done: local_sign.TasksDone, input_bytes: int) -> None:
        events.append("signed")
        real_signed(done, input_bytes)

    monkeypatch.setattr(discovery, "_status", walking)
    monkeypatch.setattr(local_sign.TasksDone, "signed", signed)
    totals: list[int | None] = []
    report = dedup.sign([str(corpus)], tmp_path / "s.parquet", dedup.SignOptions(jobs=2, kernel="numpy"),
                        on_start=totals.append)
    assert report.documents == 60 and events.count("walked") == 60 and events.count("signed") == 15
    assert events.index("signed") < len(events) - 1 - events[::-1].index("walked")  # a task signed before the last file
    assert totals == [sum(path.stat().st_size for path in corpus.iterdir())]  # told once the walk knew it


def test_a_parquet_file_the_walk_reaches_without_its_column_stops_the_run(tmp_path: Path) -> None:
    """The walk goes on while the workers sign, so a Parquet file without the named column may be found after the
    store was opened: the run stops with the same one-line message, and nothing is committed."""
    from click.testing import CliRunner

    from dedup_cli.cli.main import cli

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(20):
        (corpus / f"a{index:02d}.txt").write_text(f"document {index} of a few words that say something " * 3)
    store = tmp_path / "s.parquet"
    runner = CliRunner()
    assert runner.invoke(cli, ["sign", str(corpus), "-o", str(store), "-q"]).exit_code == 0
    before = sorted(path.name for path in store.iterdir())
    (corpus / "a05.txt").write_text("changed: a run that committed would store this")
    pa.parquet.write_table(pa.table({"body": ["x"]}), corpus / "z.parquet")
    result = runner.invoke(cli, ["sign", str(corpus), "-o", str(store), "--jobs", "2"])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (f"Error: {corpus / 'z.parquet'} has no column 'text' (its "
                                                       "columns: body); name the column with --text-field")
    assert sorted(path.name for path in store.iterdir()) == before
    assert dedup.open_store(store).last_run == 1 and len(dedup.read_store(store).ids) == 20
