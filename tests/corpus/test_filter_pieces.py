"""An input filtered in pieces and joined is the input filtered whole, byte for byte: line files cut at line ends
(their line numbers counted), Parquet files cut at row groups, across the batches a whole file is filtered in."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_cli.corpus import parquet_filter as filtered_parquet
from dedup_cli.corpus.filter_pieces import (
    Piece,
    count_lines,
    filter_piece,
    join_lines,
    join_parquet,
    line_ranges,
    row_group_runs,
)
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.corpus.sources import filter_source
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.records import text_hash
from dedup_cli.options.input_options import InputOptions


def _decisions(ids: list[str], texts: list[str], drop: list[bool]) -> Decisions:
    return Decisions(ids, np.array([text_hash(t) for t in texts], np.uint64), np.array(drop, bool),
                     np.arange(1, len(ids) + 1, dtype=np.int64), ids)


def _outcome(outcomes: list[SourceOutcome]) -> SourceOutcome:
    total = SourceOutcome()
    for outcome in outcomes:
        total.add(outcome)
    return total


def _lines(count: int) -> tuple[bytes, list[str], list[str]]:
    """A JSON Lines file with a byte-order mark, CRLF and LF ends, blank and malformed lines and no final newline;
    and the ids (FILE:LINE) and texts of its records."""
    lines, ids, texts = [], [], []
    for number in range(1, count + 1):
        if number % 7 == 3:
            lines.append(b"\n")
        elif number % 11 == 5:
            lines.append(b"{broken\n")
        else:
            text = f"record {number} " + "word " * (number % 13)
            lines.append(json.dumps({"text": text}).encode() + (b"\r\n" if number % 3 else b"\n"))
            ids.append(f"f.jsonl:{number}")
            texts.append(text)
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    lines[-1] = lines[-1].rstrip(b"\r\n")
    return b"".join(lines), ids, texts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 60), piece_bytes=st.integers(1, 400), seed=st.integers(0, 2**16),
       annotate=st.booleans())
def test_line_pieces_join_into_the_whole_files_output(tmp_path: Path, count: int, piece_bytes: int, seed: int,
                                                      annotate: bool) -> None:
    data, ids, texts = _lines(count)
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    source = Source("f.jsonl", str(path), "f.jsonl", "jsonl", None, len(data))
    rng = np.random.default_rng(seed)
    changed = texts[:]
    if changed:
        changed[int(rng.integers(len(changed)))] += " since"  # a record that changed since signing: kept
    decisions = _decisions(ids, changed, list(rng.random(len(ids)) < 0.5))
    whole = io.BytesIO()
    expected = filter_source(source, decisions, InputOptions(), whole, annotate)
    ranges = line_ranges(str(path), len(data), piece_bytes)
    assert ranges[0][0] == 0 and ranges[-1][1] is None
    starts = [start for start, _ in ranges]
    assert all(data[start - 1 : start] == b"\n" for start in starts[1:])
    first = 1
    outputs, outcomes = [], []
    for number, (start, stop) in enumerate(ranges):
        piece = Piece(source, number, start, stop, first)
        out = io.BytesIO()
        outcome, numbers = filter_piece(piece, decisions, InputOptions(), annotate, out)
        assert numbers == []
        outputs.append(out.getvalue())
        outcomes.append(outcome)
        if stop is not None:
            first += count_lines(str(path), start, stop)
    joined = io.BytesIO()
    join_lines(outputs, joined)
    assert joined.getvalue() == whole.getvalue()
    assert _outcome(outcomes) == expected


@pytest.mark.parametrize("annotate", [False, True])
@pytest.mark.parametrize("groups", [[7, 3, 10, 1, 9], [16], [5, 5, 5, 5]])
def test_parquet_pieces_join_into_the_whole_files_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         groups: list[int], annotate: bool) -> None:
    # Batches of 4 rows across row groups of other sizes: a piece boundary cuts batches, whose fragments rejoin.
    monkeypatch.setattr(filtered_parquet, "PARQUET_FILTER_ROWS", 4)
    rows = sum(groups)
    texts = [f"row {n} " + "x " * (n % 5) for n in range(rows)]
    path = tmp_path / "f.parquet"
    table = pa.table({"n": list(range(rows)), "text": texts}, metadata={b"owner": b"me"})
    with pq.ParquetWriter(path, table.schema, compression="gzip") as writer:
        start = 0
        for size in groups:
            writer.write_table(table.slice(start, size))
            start += size
    source = Source("f.parquet", str(path), "f.parquet", "parquet", None, path.stat().st_size)
    ids = [f"f.parquet:{n}" for n in range(rows)]
    decisions = _decisions(ids, texts, [n % 3 != 0 for n in range(rows)])
    whole = io.BytesIO()
    expected = filter_source(source, decisions, InputOptions(), whole, annotate)
    for piece_bytes in (1, source.size // 3, source.size):
        runs = row_group_runs(source, groups, piece_bytes)
        assert [run.row_groups for run in runs][0][0] == 0 and sum(run.size for run in runs) <= source.size
        parts, outcomes = [], []
        for number, run in enumerate(runs):
            out = io.BytesIO()
            outcome, numbers = filter_piece(Piece(run, number), decisions, InputOptions(), annotate, out)
            parts.append((out.getvalue(), numbers))
            outcomes.append(outcome)
        joined = io.BytesIO()
        join_parquet(source, InputOptions(), annotate, parts, joined)
        assert joined.getvalue() == whole.getvalue(), piece_bytes
        assert _outcome(outcomes) == expected
    assert pq.read_table(io.BytesIO(whole.getvalue())).num_rows == (rows if annotate else rows // 3 + (rows % 3 > 0))
