"""A reader's buffer is never resized under a view that something else still holds.

Dask's worker profiler samples every thread's stack every 10 ms and keeps the frames for a moment: a reader's
frame that has returned, and a numpy view of its buffer in it, can outlive the call, and a bytearray with a view
cannot be resized (``BufferError: Existing exports of data``). The filter of CSV inputs on a Dask cluster ended so,
now and then. Here the views are held on purpose, for the whole read."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dedup_cli.inputs import chunks, delimited, record_ends


@pytest.fixture
def views_held(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Every buffer the record scanner and the line counter look at stays viewed until the test ends."""
    held: list[np.ndarray] = []
    scan = record_ends.RecordEnds.scan

    def scanning(self: record_ends.RecordEnds, buffer: bytes | bytearray, final: bool = False) -> np.ndarray:
        held.append(np.frombuffer(buffer, dtype=np.uint8))  # as a sampled frame would keep it
        return scan(self, buffer, final)

    count = chunks.count_newlines

    def counting(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
        held.append(np.frombuffer(data, dtype=np.uint8))
        return count(data, start, end) if end is not None else count(data, start)

    monkeypatch.setattr(record_ends.RecordEnds, "scan", scanning)
    monkeypatch.setattr(chunks, "count_newlines", counting)
    return held


def csv_bytes(records: int) -> bytes:
    return b"id,text\n" + b"".join(f'{n},"words, and words {n}"\n'.encode() for n in range(records))


@pytest.mark.parametrize("kind", ["csv", "tsv"])
def test_records_are_read_whole_while_views_of_the_buffer_are_held(views_held: list[np.ndarray], kind: str) -> None:
    data = csv_bytes(30_000) if kind == "csv" else b"id\ttext\n" + b"".join(
        f"{n}\twords {n}\n".encode() for n in range(30_000))
    records = list(delimited.iter_raw_records(io.BytesIO(data), kind))
    assert len(records) == 30_001 and b"".join(raw for _, raw, _ in records) == data
    assert views_held  # the scanner did look, and its views were kept


def test_record_chunks_and_line_chunks_are_cut_while_views_are_held(views_held: list[np.ndarray]) -> None:
    data = csv_bytes(30_000)
    cut = list(delimited.table_chunks(io.BytesIO(data), b"", lambda: 0, False, 4096, 1000, "csv"))
    assert b"".join(piece if isinstance(piece, bytes) else piece.data for piece in cut) == data
    lines = b"".join(f"line {n}\n".encode() for n in range(30_000))
    cut_lines = list(chunks.line_chunks(io.BytesIO(lines), None, lambda: 0))
    assert b"".join(chunk.data for chunk in cut_lines) == lines and views_held
