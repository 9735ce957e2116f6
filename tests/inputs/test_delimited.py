"""CSV and TSV inputs: records found where they end (for CSV, where the quotes at a field's start say), whatever the
reads or the cuts, compared record by record with Python's csv module (CSV) and a split on newlines and tabs (TSV);
ids, skips, re-reads."""

from __future__ import annotations

import csv
import gzip
import io
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import raises_worded

from dedup_cli.errors import InputError
from dedup_cli.inputs.chunks import LineChunk
from dedup_cli.inputs.delimited import iter_raw_records, split_records, table_chunks
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import reread_documents
from dedup_cli.options.input_options import InputOptions


class Trickle(io.RawIOBase):
    """A stream whose reads return a few bytes at a time, as a pipe may."""

    def __init__(self, data: bytes, seed: int) -> None:
        super().__init__()
        self._data, self._random = data, random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        take = self._random.randint(1, 50)
        piece, self._data = self._data[:take], self._data[take:]
        return piece


def quoted_csv(records: int, seed: int) -> tuple[bytes, list[list[str]]]:
    """A CSV file whose texts hold newlines, quotes and commas, and the rows Python's csv module reads from it."""
    rng = random.Random(seed)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["id", "text"])
    for number in range(records):
        words = [rng.choice(["a", "b,c", 'say "hi"', "line\nbreak", "\r\n", "x"]) for _ in range(rng.randint(0, 5))]
        writer.writerow([f"r{number}", " ".join(words)])
    data = out.getvalue().encode()
    return data, list(csv.reader(io.StringIO(data.decode(), newline="")))


def _chunks(data: bytes, stream: Any, chunk_bytes: int, chunk_records: int, kind: str = "csv"
            ) -> list[tuple[bytes, int]]:
    got = list(table_chunks(stream, b"", lambda: 0, False, chunk_bytes, chunk_records, kind))
    assert isinstance(got[0], bytes)
    chunks = [chunk for chunk in got[1:] if isinstance(chunk, LineChunk)]
    assert b"".join([got[0], *(chunk.data for chunk in chunks)]) == data
    return [(chunk.data, chunk.first_line) for chunk in chunks]


@pytest.mark.parametrize("seed", range(5))
def test_chunks_end_where_records_end_however_the_stream_is_read(seed: int) -> None:
    data, rows = quoted_csv(200, seed)
    whole = _chunks(data, io.BytesIO(data), 97, 7)
    assert len(whole) > 10  # cut many times, next to quoted newlines
    assert _chunks(data, Trickle(data, seed), 97, 7) == whole  # the cuts depend on the bytes alone
    parsed = [row for chunk, _ in whole for record in split_records(chunk, "csv")[0]
              for row in csv.reader([record.decode()])]
    assert [["id", "text"], *parsed] == rows
    numbers = [first for _, first in whole]
    counts = [len(split_records(chunk, "csv")[0]) for chunk, _ in whole]
    assert numbers == [1 + sum(counts[:k]) for k in range(len(counts))]
    assert [raw for _, raw, _ in iter_raw_records(Trickle(data, seed + 1), "csv")] == split_records(data, "csv")[0]


def read(paths: list[Path], **options: Any) -> tuple[list[Any], ReadReport]:
    report = ReadReport()
    return list(read_inputs([str(path) for path in paths], InputOptions(**options), report)), report


def test_csv_and_tsv_records_with_ids_from_a_column_or_their_number(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_bytes(b'\xef\xbb\xbfid,text,n\r\na,"one, ""two""\nthree",1\r\n\r\nb\r\nc,four,2\r\n')
    (tmp_path / "t.tsv").write_bytes(b'id\tbody\nx\t"tab\there"\ny\tplain')  # TSV: quotes are plain
    documents, report = read([tmp_path / "c.csv"], id_field="id")
    assert [(d.id, d.text) for d in documents] == [("a", 'one, "two"\nthree'), ("c", "four")]
    assert report.malformed == [(f"{tmp_path / 'c.csv'} record 3", "no 'text' column (the record has 1 fields, "
                                 "the header 3)")]
    assert report.blank_lines == 1
    documents, _ = read([tmp_path / "t.tsv"], text_column="body")  # the Parquet spelling names any column
    assert [(d.id, d.text) for d in documents] == [("t.tsv:1", '"tab'), ("t.tsv:2", "plain")]
    assert reread_documents([d.path for d in documents], [d.content_hash for d in documents]) == ['"tab', "plain"]
    with raises_worded(InputError, r"c.csv has no column 'body' in its header \(its columns: 'id', 'text', 'n'\); "
                                   r"name the column with --text-field"):
        read([tmp_path / "c.csv"], text_field="body")


def test_empty_damaged_and_headless_tables(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_bytes(b"")
    (tmp_path / "header.tsv").write_bytes(b"id\ttext\n")
    assert read([tmp_path / "empty.csv", tmp_path / "header.tsv"])[0] == []
    data, rows = quoted_csv(3000, 7)
    packed = gzip.compress(data)
    (tmp_path / "damaged.csv.gz").write_bytes(packed[: len(packed) // 2])
    documents, report = read([tmp_path / "damaged.csv.gz"], id_field="id")
    assert 100 < len(documents) < 3000 and report.unreadable[0][1].startswith("damaged gzip data")
    assert [d.text for d in documents] == [row[1] for row in rows[1 : len(documents) + 1]]


def test_carriage_returns_end_a_csv_record_only_before_its_newline(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_bytes(b'id,text\r\n1,a b"c\r\r\n2,x\ry\r\n3,"q\r"\r\n4,last\r')
    documents, report = read([tmp_path / "r.csv"])
    assert [(d.id, d.text) for d in documents] == [("r.csv:1", 'a b"c'), ("r.csv:3", "q\r"), ("r.csv:4", "last")]
    assert report.malformed == [(f"{tmp_path / 'r.csv'} record 2",
                                 "not one CSV record (a carriage return outside quotes); check its quotes")]
