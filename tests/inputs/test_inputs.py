"""Reading inputs (inputs.reading.read_inputs): formats, compression, stdin, --files-from, ids, locations, bad input."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from helpers import raises_worded, read_text, reread_document, summary
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.cli.main import flag, message
from dedup_cli.cli.summaries import read_warnings
from dedup_cli.errors import InputError, UsageError
from dedup_cli.inputs import byte_streams, decoding, files, parquet_inputs
from dedup_cli.inputs.discovery import walk_files
from dedup_cli.inputs.name_formats import format_and_compression
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.records import Document, text_hash
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import reread_documents
from dedup_cli.options.input_options import InputOptions


def read(inputs: list[Any], stdin: bytes | None = None, **options: Any) -> tuple[list[Document], ReadReport]:
    report = ReadReport()
    stream = io.BytesIO(stdin) if stdin is not None else io.BytesIO(b"")
    documents = list(read_inputs([str(i) for i in inputs], InputOptions(**options), report, stdin=stream))
    return documents, report


def ids(documents: list[Document]) -> list[str]:
    return [d.id for d in documents]


def texts(documents: list[Document]) -> dict[str, str]:
    return {d.id: d.text for d in documents}


def jsonl(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


def write_zstd(path: Path, data: bytes) -> None:
    with pa.CompressedOutputStream(str(path), "zstd") as stream:
        stream.write(data)


COMPRESSORS: dict[str, Callable[[Path, bytes], Any]] = {
    "": lambda path, data: path.write_bytes(data),
    ".gz": lambda path, data: path.write_bytes(gzip.compress(data)),
    ".bz2": lambda path, data: path.write_bytes(bz2.compress(data)),
    ".xz": lambda path, data: path.write_bytes(lzma.compress(data)),
    ".zst": write_zstd,
}


def assert_round_trips(documents: list[Document]) -> None:
    """Every document re-reads to its text, one at a time and in one batch, and its hash is the text's."""
    for document in documents:
        assert document.content_hash == text_hash(document.text)
        if "#" in document.path.rsplit("/", 1)[-1]:  # a record: the length of its text
            assert document.size == len(document.text.encode("utf-8"))
        assert reread_document(document.path, document.content_hash) == document.text
        assert read_text(document.path) == document.text
    batch = reread_documents([d.path for d in documents], [d.content_hash for d in documents])
    assert batch == [d.text for d in documents]


# --- formats and compression ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a.txt", "text"), ("a", "text"), ("a.jsonl", "jsonl"), ("a.NDJSON", "jsonl"), ("a.parquet", "parquet"),
     ("a.jsonl.gz", "jsonl"), ("a.ndjson.zst", "jsonl"), ("a.txt.xz", "text"), ("a.gz", "text"),
     ("a.parquet.bz2", "parquet"), ("a.json", "json"), ("a.JSON.gz", "json"), ("dir.jsonl/a.md", "text")],
)
def test_detect_format_looks_inside_the_compression_suffix(name: str, expected: str) -> None:
    assert format_and_compression(name)[0] == expected


def test_text_files_keep_their_ids_paths_and_hash_of_bytes(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "corpus"
    (corpus_dir / "sub").mkdir(parents=True)
    (corpus_dir / "a.txt").write_text("alpha beta")
    (corpus_dir / "sub" / "b.md").write_text("gamma ✓")
    (corpus_dir / ".hidden.txt").write_text("never read")
    documents, report = read([corpus_dir])
    assert ids(documents) == ["a.txt", "sub/b.md"]
    assert documents[0].path == str(corpus_dir / "a.txt")
    # A UTF-8 file's content hash is still the hash of its bytes, so stores signed before stay verifiable.
    assert documents[1].content_hash == xxhash.xxh3_64_intdigest((corpus_dir / "sub" / "b.md").read_bytes())
    assert documents[1].size == (corpus_dir / "sub" / "b.md").stat().st_size
    assert report.documents == 2 and report.files_found == 2 and report.skipped == 0
    assert summary(report) == "read 2 documents from 2 inputs (0.0 MB); nothing skipped"
    assert_round_trips(documents)


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_every_compression_for_text_jsonl_and_lines(tmp_path: Path, suffix: str) -> None:
    COMPRESSORS[suffix](tmp_path / f"doc.txt{suffix}", b"one whole document\nof two lines")
    COMPRESSORS[suffix](tmp_path / f"records.jsonl{suffix}", jsonl({"text": "first"}, {"text": "second"}))
    COMPRESSORS[suffix](tmp_path / f"plain.log{suffix}", b"line one\nline two\n")
    documents, report = read([tmp_path])
    assert texts(documents) == {
        f"doc.txt{suffix}": "one whole document\nof two lines",
        f"plain.log{suffix}": "line one\nline two\n",
        f"records.jsonl{suffix}:1": "first",
        f"records.jsonl{suffix}:2": "second",
    }
    assert report.skipped == 0
    # A whole file's size is its size on disk (compressed), what stat reports; a record's is its text's.
    assert documents[0].size == (tmp_path / f"doc.txt{suffix}").stat().st_size
    assert_round_trips(documents)
    lines, _ = read([tmp_path / f"plain.log{suffix}"], input_format="lines")
    assert texts(lines) == {f"plain.log{suffix}:1": "line one", f"plain.log{suffix}:2": "line two"}
    assert lines[1].path == f"{tmp_path / f'plain.log{suffix}'}#line=2"
    assert_round_trips(lines)


def test_jsonl_ids_from_a_field_and_record_locations(tmp_path: Path) -> None:
    path = tmp_path / "r.ndjson"
    path.write_bytes(jsonl({"id": "doc-a", "body": "x y z"}, {"id": 7, "body": "p q"}, {"id": "é", "body": ""}))
    documents, report = read([path], id_field="id", text_field="body")
    assert ids(documents) == ["doc-a", "7", "é"]
    assert [d.path for d in documents] == [f"{path}#line={n}&field=body" for n in (1, 2, 3)]
    assert report.empty_documents == 1
    assert_round_trips(documents)


def test_record_ids_use_the_file_id_relative_to_the_common_root(tmp_path: Path) -> None:
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "part.jsonl").write_bytes(jsonl({"text": name}))
    documents, _ = read([tmp_path / "x", tmp_path / "y" / "part.jsonl"])
    assert ids(documents) == ["x/part.jsonl:1", "y/part.jsonl:1"]


def test_lines_format_skips_blank_lines_and_strips_crlf_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"\xef\xbb\xbffirst\r\n\n   \nsecond\nlast without newline")
    documents, report = read([path], input_format="lines")
    assert texts(documents) == {"notes.txt:1": "first", "notes.txt:4": "second", "notes.txt:5": "last without newline"}
    assert report.blank_lines == 2
    assert_round_trips(documents)


def test_an_explicit_format_overrides_the_extension(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(jsonl({"text": "a"}))
    documents, _ = read([path], input_format="text")
    assert texts(documents) == {"data.jsonl": '{"text": "a"}\n'}
    documents, _ = read([path], input_format="lines")
    assert texts(documents) == {"data.jsonl:1": '{"text": "a"}'}
    assert_round_trips(documents)


def write_parquet(path: Path, columns: dict[str, list[Any]], row_group_size: int = 2) -> None:
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def test_parquet_rows_in_batches_across_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_inputs, "PARQUET_BATCH_ROWS", 3)
    path = tmp_path / "docs.parquet"
    bodies = [f"document number {n}" for n in range(7)]
    write_parquet(path, {"key": list(range(100, 107)), "body": bodies, "other": [1.5] * 7})
    documents, report = read([path], text_column="body")
    assert ids(documents) == [f"docs.parquet:{n}" for n in range(7)]  # rows count from 0
    assert documents[5].path == f"{path}#row=5&column=body"
    assert [d.text for d in documents] == bodies
    assert_round_trips(documents)
    keyed, _ = read([path], text_column="body", id_column="key")
    assert ids(keyed) == [str(n) for n in range(100, 107)]
    assert report.bytes_read == sum(len(b) for b in bodies)


def test_parquet_large_string_dictionary_and_binary_text_columns(tmp_path: Path) -> None:
    path = tmp_path / "kinds.parquet"
    table = pa.table({
        "large": pa.array(["a b", "c d"], pa.large_string()),
        "dict": pa.array(["x", "x"]).dictionary_encode(),
        "raw": pa.array([b"bytes \xff", b"ok"], pa.binary()),
    })
    pq.write_table(table, path)
    for column, expected in (("large", ["a b", "c d"]), ("dict", ["x", "x"]), ("raw", ["bytes \ufffd", "ok"])):
        documents, report = read([path], text_column=column)
        assert [d.text for d in documents] == expected
        assert_round_trips(documents)
    assert report.invalid_utf8 == [f"{path} row 0"]


def test_parquet_without_the_named_column_stops_before_reading(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("read first")
    write_parquet(tmp_path / "b.parquet", {"body": ["x"], "id": ["1"]})
    with raises_worded(InputError, "") as error:
        read_inputs([str(tmp_path)], InputOptions(), ReadReport())  # raised by the call, not while iterating
    assert message(error.value) == (f"{tmp_path / 'b.parquet'} has no column 'text' (its columns: body, id); "
                                    "name the column with --text-field")
    with raises_worded(InputError, "no column 'key' .*--id-field"):
        read([tmp_path / "b.parquet"], text_column="body", id_column="key")


def test_parquet_columns_of_the_wrong_type_stop(tmp_path: Path) -> None:
    write_parquet(tmp_path / "n.parquet", {"text": [1, 2], "score": [0.5, 0.7]})
    with pytest.raises(InputError, match=r"column 'text' of .*n.parquet holds int64, not text; name a string"):
        read([tmp_path / "n.parquet"])
    write_parquet(tmp_path / "s.parquet", {"text": ["a"], "score": [0.5]})
    with pytest.raises(InputError, match="holds double; ids must be strings or integers"):
        read([tmp_path / "s.parquet"], id_column="score")


def test_parquet_nulls_are_malformed_rows(tmp_path: Path) -> None:
    path = tmp_path / "n.parquet"
    write_parquet(path, {"text": ["a", None, "c", "d"], "id": ["1", "2", None, ""]})
    documents, report = read([path], id_column="id")
    assert ids(documents) == ["1"]
    assert report.malformed == [(f"{path} row 1", "'text' is null"), (f"{path} row 2", "'id' is null"),
                                (f"{path} row 3", "'id' is empty")]


def test_compressed_or_damaged_parquet_is_unreadable(tmp_path: Path) -> None:
    write_parquet(tmp_path / "ok.parquet", {"text": ["fine"]})
    (tmp_path / "z.parquet.gz").write_bytes(gzip.compress((tmp_path / "ok.parquet").read_bytes()))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 but not really")
    documents, report = read([tmp_path])
    assert ids(documents) == ["ok.parquet:0"]
    reasons = dict(report.unreadable)
    assert reasons[str(tmp_path / "z.parquet.gz")].startswith("Parquet cannot be read through gzip compression")
    assert reasons[str(tmp_path / "bad.parquet")].startswith("not a readable Parquet file (")


# --- stdin ------------------------------------------------------------------------------------------------


def test_stdin_text_is_one_document_that_cannot_be_re_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("file")
    documents, report = read(["-", tmp_path / "a.txt"], stdin=b"\xef\xbb\xbffrom a pipe")
    assert texts(documents) == {"-": "from a pipe", "a.txt": "file"}
    assert documents[0].path == "-" and documents[0].mtime_ns == 0
    assert reread_document("-") is None
    with pytest.raises(InputError, match="read from stdin and cannot be re-read"):
        read_text("-")
    assert report.files_found == 2


@pytest.mark.parametrize("input_format", ["jsonl", "lines"])
def test_stdin_records(input_format: str) -> None:
    data = jsonl({"text": "one"}, b"", {"text": "two"})
    documents, _ = read(["-"], stdin=data, input_format=input_format)
    assert ids(documents) == ["-:1", "-:3"]
    assert all(reread_document(d.path) is None for d in documents)
    if input_format == "jsonl":
        assert documents[1].path == "-#line=3&field=text" and documents[1].text == "two"


def test_stdin_mistakes_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="Parquet cannot be read from stdin"):
        read(["-"], input_format="parquet")
    with pytest.raises(UsageError, match="named more than once"):
        read(["-", "-"])
    with raises_worded(UsageError, "both documents"):
        read(["-"], files_from="-")


# --- --files-from -----------------------------------------------------------------------------------------


def test_files_from_newlines_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a")
    (tmp_path / "d" / "b.txt").write_text("b")
    (tmp_path / "d" / "skip.log").write_text("c")
    (tmp_path / "list").write_bytes(b"d/a.txt\r\n\nd\nd/skip.log\nd/gone.txt\n")
    documents, report = read([], files_from="list", include=["*.txt"])
    # A listed directory is walked; a file found twice is read once; filters apply to listed files.
    assert ids(documents) == ["a.txt", "b.txt"]
    assert report.unreadable == [("d/gone.txt", "does not exist (listed in --files-from)")]


def test_files_from_stdin_nul_separated_names_with_newlines(tmp_path: Path) -> None:
    odd = tmp_path / "two\nlines.txt"
    odd.write_text("odd")
    (tmp_path / "b.txt").write_text("b")
    listing = f"{odd}\0{tmp_path / 'b.txt'}\0".encode()
    documents, _ = read([], stdin=listing, files_from="-", null_separated=True)
    assert ids(documents) == ["b.txt", "two\nlines.txt"]
    assert_round_trips(documents)


def test_files_from_problems(tmp_path: Path) -> None:
    with raises_worded(InputError, r"cannot read --files-from .*nope: No such file or directory"):
        read([], files_from=str(tmp_path / "nope"))
    with raises_worded(UsageError, "-0/--null applies to --files-from"):
        read([tmp_path], null_separated=True)
    (tmp_path / "empty").write_bytes(b"")
    # an empty list is no error
    assert read([], files_from=str(tmp_path / "empty")) == ([], ReadReport(input_bytes=0))


# --- bad input --------------------------------------------------------------------------------------------


def test_missing_named_input_and_no_input_stop(tmp_path: Path) -> None:
    with pytest.raises(InputError) as error:
        read([tmp_path / "nope"])
    assert str(error.value) == f"input {tmp_path / 'nope'} does not exist; check the path"
    with pytest.raises(InputError, match="no input given"):
        read([])


@pytest.mark.parametrize(
    ("options", "message"),
    [({"input_format": "xlsx"}, "unknown input format 'xlsx'"),
     ({"max_document_bytes": 0}, "--max-document-bytes 0 must be at least 1"),
     ({"input_format": "lines", "id_field": "id"}, "--id-field applies to records"),
     ({"input_format": "text", "id_column": "id"}, "--id-field applies to records"),
     ({"text_field": ""}, "must name a field")],
)
def test_contradictory_options_are_usage_errors(options: dict[str, Any], message: str) -> None:
    with raises_worded(UsageError, message):
        InputOptions(**options)


def test_binary_files_are_skipped_whatever_the_format(tmp_path: Path) -> None:
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00\x00binary")
    (tmp_path / "packed.jsonl").write_bytes(b'{"text": "a"}\n\x00\x01\x02')
    (tmp_path / "archive.txt.gz").write_bytes(gzip.compress(b"\x00" * 100))
    (tmp_path / "late-nul.txt").write_bytes(b"x" * 9000 + b"\x00")  # beyond the 8 KiB sniffed: text
    documents, report = read([tmp_path])
    assert ids(documents) == ["late-nul.txt"]
    assert report.binary == [str(tmp_path / n) for n in ("archive.txt.gz", "image.png", "packed.jsonl")]
    assert read(["-"], stdin=b"\x00\x01")[1].binary == ["<stdin>"]
    assert f"skipped binary file {tmp_path / 'image.png'}" in read_warnings(report, flag)


def test_invalid_utf8_is_replaced_read_and_listed(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "r.jsonl").write_bytes(b'{"text": "caf\xe9"}\n' + jsonl({"text": "lone \ud800 surrogate"}))
    documents, report = read([tmp_path])
    assert texts(documents) == {"latin1.txt": "caf\ufffd", "r.jsonl:1": "caf\ufffd",
                                "r.jsonl:2": "lone \ufffd surrogate"}
    records = tmp_path / "r.jsonl"
    assert report.invalid_utf8 == [str(tmp_path / "latin1.txt"), f"{records}:1", f"{records}:2"]
    assert "3 with invalid UTF-8 replaced" in summary(report)
    assert_round_trips(documents)  # the hash is of the repaired text, so re-reading agrees


def test_empty_and_whitespace_documents_are_read_and_counted(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.txt").write_bytes(b" \n\t\n")
    (tmp_path / "r.jsonl").write_bytes(jsonl({"text": ""}, {"text": "  "}, {"text": "words"}) + b"   \n")
    documents, report = read([tmp_path])
    assert ids(documents) == ["blank.txt", "empty.txt", "r.jsonl:1", "r.jsonl:2", "r.jsonl:3"]
    assert report.empty_documents == 4 and report.blank_lines == 1
    assert summary(report).endswith("; 4 empty")


def test_malformed_jsonl_lines_are_skipped_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl(
        {"id": "ok", "text": "kept"},
        b'{"id": "x", "text": "unterminated',
        b"[1, 2]",
        {"id": "y"},
        {"id": "z", "text": 3},
        {"id": "n", "text": None},
        {"id": "l", "text": ["a"]},
        {"text": "no id"},
        {"id": 1.5, "text": "float id"},
        {"id": True, "text": "bool id"},
        {"id": "", "text": "empty id"},
        {"id": "last", "text": "kept too"},
    ))
    documents, report = read([path], id_field="id")
    assert ids(documents) == ["ok", "last"]
    where = lambda n: f"{path}:{n}"  # noqa: E731
    assert report.malformed == [
        (where(2), "invalid JSON (Unterminated string starting at: column 21)"),
        (where(3), "expected a JSON object, found an array"),
        (where(4), 'no "text" field; name the text field with --text-field'),
        (where(5), '"text" is a number, not a string'),
        (where(6), '"text" is null, not a string'),
        (where(7), '"text" is an array, not a string'),
        (where(8), 'no "id" field (--id-field)'),
        (where(9), '"id" is a number; ids must be strings or integers'),
        (where(10), '"id" is a boolean; ids must be strings or integers'),
        (where(11), '"id" is empty'),
    ]
    assert report.count("malformed") == 10
    assert summary(report) == "read 2 documents from 1 inputs (0.0 MB); skipped 10 malformed"
    assert read_warnings(report, flag)[0] == (f"skipped {where(2)}: invalid JSON (Unterminated string starting at: "
                                              "column 21)")


def test_duplicate_ids_keep_the_first_and_report_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(jsonl({"id": "1", "text": "first"}, {"id": 1, "text": "again"}))
    (tmp_path / "b.jsonl").write_bytes(jsonl({"id": "2", "text": "two"}, {"id": "1", "text": "third"}))
    documents, report = read([tmp_path], id_field="id")
    assert texts(documents) == {"1": "first", "2": "two"}
    assert report.duplicate_ids == [(f"{tmp_path / 'a.jsonl'}:2", "1"), (f"{tmp_path / 'b.jsonl'}:2", "1")]
    assert f"skipped {tmp_path / 'a.jsonl'}:2: id '1' was already read" in read_warnings(report, flag)
    assert "skipped 2 duplicate id" in summary(report)


def test_a_large_file_is_skipped_from_its_size_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * 5000)
    (tmp_path / "small.txt").write_bytes(b"y" * 100)
    (tmp_path / "big.txt.gz").write_bytes(gzip.compress(b"z" * 5000))
    documents, report = read([tmp_path], max_document_bytes=1000)
    assert ids(documents) == ["small.txt"]
    # Uncompressed: the size comes from stat. Compressed: reading stops after limit + 1 bytes.
    assert report.oversized == [(str(tmp_path / "big.txt"), 5000), (str(tmp_path / "big.txt.gz"), 1001)]
    assert report.bytes_read == 100 + 1001
    assert (f"skipped {tmp_path / 'big.txt'}: 5000 bytes or more exceed --max-document-bytes 1000; raise the limit "
            "to read it") in read_warnings(report, flag)


class Endless(io.RawIOBase):
    """A stdin that never ends: reading it whole would never finish."""

    def __init__(self) -> None:
        super().__init__()
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        buffer[:] = b"w" * len(buffer)
        self.served += len(buffer)
        return len(buffer)


def test_an_endless_stdin_document_stops_at_the_limit() -> None:
    stream = Endless()
    report = ReadReport()
    documents = list(read_inputs(["-"], InputOptions(max_document_bytes=10_000), report, stdin=stream))  # type: ignore[arg-type]
    assert documents == [] and report.oversized == [("<stdin>", 10_001)]
    assert stream.served <= files.BINARY_SNIFF_BYTES + (1 << 20)


def test_long_lines_are_skipped_in_chunks_and_numbering_continues(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    huge = json.dumps({"text": "w " * 2_000_000}).encode()  # 4 MB line, limit 1 KB
    path.write_bytes(jsonl({"text": "before"}, huge, {"text": "x" * 2000}, {"text": "after"}))
    documents, report = read([path], max_document_bytes=1000)
    assert texts(documents) == {"r.jsonl:1": "before", "r.jsonl:4": "after"}
    assert [where for where, _ in report.oversized] == [f"{path}:2", f"{path}:3"]
    assert report.oversized[0][1] == len(huge) + 1  # the whole line was consumed, in chunks
    # The chunks held while skipping are bounded, not the line.
    sizes = []
    reader = io.BufferedReader(io.BytesIO(huge + b"\nnext\n"))
    original = reader.readline

    def recording(size: int | None = -1) -> bytes:
        line = original(size)
        sizes.append(len(line))
        return line

    reader.readline = recording  # type: ignore[method-assign]
    assert [(n, line) for n, line, _ in byte_streams.iter_lines(reader, 1000)] == [(1, None), (2, b"next")]
    assert max(sizes) <= 1 << 20


def test_lines_and_parquet_cells_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "l.txt").write_bytes(b"short\n" + b"y" * 50 + b"\r\n" + b"z" * 20 + b"\r\n")
    documents, report = read([tmp_path / "l.txt"], input_format="lines", max_document_bytes=20)
    assert ids(documents) == ["l.txt:1", "l.txt:3"]  # a line of exactly the limit (CRLF aside) is kept
    write_parquet(tmp_path / "p.parquet", {"text": ["ok", "q" * 30]})
    documents, report = read([tmp_path / "p.parquet"], max_document_bytes=20)
    assert ids(documents) == ["p.parquet:0"] and report.oversized == [(f"{tmp_path / 'p.parquet'} row 1", 30)]


def test_unreadable_files_dangling_links_and_failing_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ok.txt").write_text("fine")
    (tmp_path / "locked.txt").write_text("secret")
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "does-not-exist")
    real_open = files.os.open

    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("locked.txt"):  # as if opening it failed (the tests may run as root)
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", guarded)
    documents, report = read([tmp_path])
    assert ids(documents) == ["ok.txt"]
    assert report.unreadable == [(str(tmp_path / "dangling.txt"), "No such file or directory"),
                                 (str(tmp_path / "locked.txt"), "Permission denied")]
    assert "skipped 2 unreadable" in summary(report)


def test_a_directory_replaced_by_a_file_mid_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    real_scandir = os.scandir

    def replacing(path: Any = ".") -> Any:
        if str(path).endswith("sub") and (tmp_path / "sub").is_dir():
            shutil.rmtree(tmp_path / "sub")
            (tmp_path / "sub").write_text("now a file")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", replacing)
    documents, report = read([tmp_path])
    assert ids(documents) == ["a.txt"]
    assert report.unreadable == [(str(tmp_path / "sub"), "Not a directory")]


def test_a_file_deleted_after_listing_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    report = ReadReport()
    documents = read_inputs([str(tmp_path)], InputOptions(), report)
    (tmp_path / "b.txt").unlink()  # documents are read lazily, after the listing
    assert ids(list(documents)) == ["a.txt"]
    assert report.unreadable == [(str(tmp_path / "b.txt"), "No such file or directory")]


def test_truncated_compressed_file_keeps_the_records_before_the_damage(tmp_path: Path) -> None:
    records = jsonl(*({"text": f"record {n} " + "filler " * 50} for n in range(2000)))
    packed = gzip.compress(records)
    (tmp_path / "r.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "fake.txt.xz").write_bytes(b"not xz at all")
    documents, report = read([tmp_path])
    assert 0 < len(documents) < 2000 and documents[0].id == "r.jsonl.gz:1"
    reasons = dict(report.unreadable)
    assert reasons[str(tmp_path / "r.jsonl.gz")].startswith("damaged gzip data (")
    assert reasons[str(tmp_path / "fake.txt.xz")].startswith("damaged xz data (")


def test_directory_symlink_loops_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)  # points to an ancestor
    (root / "link.txt").symlink_to(root / "a.txt")  # a link to a file is read
    (root / "x").symlink_to(root / "y")
    (root / "y").symlink_to(root / "x")  # a file-link loop cannot be opened
    documents, report = read([root])
    assert ids(documents) == ["a.txt", "link.txt", "sub/b.txt"]
    assert report.unreadable == [(str(root / "x"), "Too many levels of symbolic links"),
                                 (str(root / "y"), "Too many levels of symbolic links")]


def test_non_utf8_file_names_get_escaped_ids_and_reversible_locations(tmp_path: Path) -> None:
    directory = os.fsencode(tmp_path)
    with open(os.path.join(directory, b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"latin-1 name")
    with open(os.path.join(directory, b"r\xff.jsonl"), "wb") as handle:
        handle.write(jsonl({"text": "record"}))
    (tmp_path / "hash#tag.txt").write_text("hash in the name")
    documents, report = read([tmp_path])
    assert texts(documents) == {"caf\\xe9.txt": "latin-1 name", "hash#tag.txt": "hash in the name",
                                "r\\xff.jsonl:1": "record"}
    for document in documents:  # a store can hold the id and the location
        pa.array([document.id, document.path], pa.string())
    assert [d.path for d in documents] == [f"file://{tmp_path}/caf%E9.txt", f"file://{tmp_path}/hash%23tag.txt",
                                           f"file://{tmp_path}/r%FF.jsonl#line=1&field=text"]
    assert report.skipped == 0
    assert_round_trips(documents)


def test_a_name_that_looks_like_an_escaped_one_is_a_duplicate_id(tmp_path: Path) -> None:
    directory = os.fsencode(tmp_path)
    for name in (b"caf\xe9.txt", b"caf\\xe9.txt"):  # the second is a real backslash, x, e, 9
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(name)
    documents, report = read([tmp_path])
    # Both display as caf\xe9.txt; the one whose raw name sorts first is kept, the other is reported.
    assert ids(documents) == ["caf\\xe9.txt"] and documents[0].text == "caf\\xe9.txt"
    assert report.duplicate_ids == [(str(tmp_path / "caf\\xe9.txt"), "caf\\xe9.txt")]


def test_non_utf8_names_through_files_from(tmp_path: Path) -> None:
    name = os.path.join(os.fsencode(tmp_path), b"na\xefve.txt")
    with open(name, "wb") as handle:
        handle.write(b"words")
    documents, _ = read([], stdin=name + b"\0", files_from="-", null_separated=True)
    assert ids(documents) == ["na\\xefve.txt"]
    assert_round_trips(documents)


def test_report_lists_at_most_max_listed_items(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_bytes(b"oops\n" * 5)
    report = ReadReport(max_listed=2)
    assert list(read_inputs([str(tmp_path)], InputOptions(), report)) == []
    assert len(report.malformed) == 2 and report.count("malformed") == 5 and report.skipped == 5
    assert read_warnings(report, flag)[-1] == "... and 3 more malformed records"


# --- re-reading -------------------------------------------------------------------------------------------


def test_reread_notices_changes_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("original")
    (tmp_path / "r.jsonl").write_bytes(jsonl({"text": "one"}, {"text": "two"}))
    write_parquet(tmp_path / "p.parquet", {"text": ["row"]})
    documents, _ = read([tmp_path])
    locations = [d.path for d in documents]
    hashes = [d.content_hash for d in documents]
    (tmp_path / "a.txt").write_text("edited")
    (tmp_path / "r.jsonl").write_bytes(jsonl({"text": "one"}))  # line 2 is gone
    (tmp_path / "p.parquet").unlink()
    assert ids(documents) == ["a.txt", "p.parquet:0", "r.jsonl:1", "r.jsonl:2"]
    assert reread_documents(locations, hashes) == [None, None, "one", None]
    assert reread_document(locations[0]) == "edited"  # without a hash: whatever is there now
    with pytest.raises(InputError, match=r"cannot read .*p.parquet: No such file or directory"):
        read_text(locations[1])
    with pytest.raises(InputError, match=r"line 2 of .*r.jsonl is gone or no longer holds a text"):
        read_text(locations[3])


def test_reread_keeps_plain_paths_written_by_older_stores(tmp_path: Path) -> None:
    path = tmp_path / "dir#1" / "a#line=x.txt"  # '#' but not a record fragment: still a plain path
    path.parent.mkdir()
    path.write_text("old store")
    assert reread_document(str(path)) == "old store"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=1).filter(lambda t: not t.isspace()), min_size=1, max_size=5))
def test_jsonl_and_lines_round_trip_any_text(tmp_path_factory: pytest.TempPathFactory, items: list[str]) -> None:
    directory = tmp_path_factory.mktemp("prop")
    (directory / "r.jsonl").write_bytes(jsonl(*({"text": t} for t in items)))
    documents, report = read([directory / "r.jsonl"])
    expected = [decoding.clean(t)[0] for t in items]
    assert [d.text for d in documents] == expected and report.skipped == 0
    assert_round_trips(documents)


def test_an_entry_whose_type_cannot_be_told_is_a_file_and_the_rest_are_walked(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk reads a directory's listing once, keeping only names; an entry whose type the listing does not give
    and whose stat fails (is_dir raises) makes it list the directory again entry by entry: that entry is a file
    (then reported unreadable when read), and the others, subdirectories and hidden files, are as always."""
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("g")
    (tmp_path / ".hidden.txt").write_text("h")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    (tmp_path / "sub" / "c.txt").write_text("c")
    real_scandir = os.scandir

    class Unknown:
        def __init__(self, entry: os.DirEntry[str]) -> None:
            self.entry, self.name, self.path = entry, entry.name, entry.path

        def is_dir(self, follow_symlinks: bool = True) -> bool:
            if self.name == "gone.txt":
                raise FileNotFoundError(2, "No such file or directory", self.path)
            return self.entry.is_dir()

        def is_symlink(self) -> bool:
            return self.entry.is_symlink()

    class Listing:
        def __init__(self, path: Any) -> None:
            self.listing = real_scandir(path)

        def __enter__(self) -> Any:
            return (Unknown(entry) for entry in self.listing)

        def __exit__(self, *exception: object) -> None:
            self.listing.close()

    monkeypatch.setattr(os, "scandir", Listing)
    found = [file.id for file in walk_files([str(tmp_path)], [], [], [], ReadReport(), str(tmp_path))]
    assert found == ["a.txt", "gone.txt", "sub/b.txt", "sub/c.txt"]
