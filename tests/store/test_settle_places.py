"""What a sign run makes of each document it reads against the store's copy of its id, and what its driver then
settles (dedup_cli/engine/stages/record_places.py), on a hand-made index."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_cli.engine.stages.record_places import (
    CHANGED,
    ELSEWHERE,
    MOVED,
    NEW,
    UNCHANGED,
    placed_documents,
    read_status,
    settle_places,
)
from dedup_cli.inputs.report import ReadReport
from dedup_cli.store.document_index import DocumentIndex, GoneSources


def index(tmp: str, entries: list[tuple[str, str, int]]) -> DocumentIndex:
    """An index of (id, location, content hash) entries, every source under ``tmp`` taken as there."""
    count = len(entries)
    return DocumentIndex(np.zeros(count, np.int64), np.zeros(count, np.int64),
                         np.array([h for _, _, h in entries], np.uint64), np.ones(count, np.int64),
                         pa.array([i for i, _, _ in entries]), pa.array([p for _, p, _ in entries]),
                         positions=np.arange(count), gone=GoneSources(False, ()))


def test_each_document_read_is_new_changed_unchanged_moved_or_held_elsewhere(tmp_path) -> None:
    a, b, gone = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "gone.jsonl"
    a.write_text("")
    b.write_text("")
    stored = index(str(tmp_path), [("same", f"{a}#line=1&field=text", 1), ("edited", f"{a}#line=2&field=text", 2),
                                   ("shifted", f"{a}#line=3&field=text", 3), ("held", f"{b}#line=1&field=text", 4),
                                   ("orphan", f"{gone}#line=1&field=text", 5)])
    ids = ["same", "edited", "shifted", "held", "orphan", "new"]
    locations = [f"{a}#line=1&field=text", f"{a}#line=2&field=text", f"{a}#line=9&field=text",
                 f"{a}#line=4&field=text", f"{a}#line=5&field=text", f"{a}#line=6&field=text"]
    hashes = np.array([1, 20, 3, 4, 5, 6], np.uint64)
    status, rows = read_status(ids, locations, hashes, stored)
    assert status.tolist() == [UNCHANGED, CHANGED, MOVED, ELSEWHERE, MOVED, NEW]
    assert rows.tolist() == [0, 1, 2, 3, 4, -1]
    placed = placed_documents(status, rows, ids, locations, locations, np.zeros(6, np.int64), np.zeros(6, np.int64),
                              hashes, stored, 4)
    assert placed.batch.ids == ["shifted", "held", "orphan"]
    assert placed.candidate.tolist() == [False, True, False] and placed.positions.tolist() == [2, -1, 3]
    # b.jsonl was read whole and no longer holds "held": it moves to a.jsonl; nothing of b.jsonl is left.
    report = ReadReport()
    settled = settle_places(stored, [placed], ["same", "edited", "shifted", "orphan", "new"], [],
                            {str(a), str(b)}, report, 4)
    assert settled.batch.ids == ["shifted", "held", "orphan"] and settled.copy_rows.tolist() == [2, 3, 4]
    assert settled.seen == ["held"] and settled.removed == [] and not report.held_elsewhere
    # Not read in this run, b.jsonl keeps it, and a.jsonl's copy is skipped, named.
    report = ReadReport()
    settled = settle_places(stored, [placed], ["same", "edited", "shifted", "orphan", "new"], [], {str(a)}, report, 4)
    assert settled.batch.ids == ["shifted", "orphan"] and report.held_elsewhere[0][1] == "held"


def test_a_source_read_whole_loses_what_it_no_longer_holds(tmp_path) -> None:
    a = tmp_path / "a.jsonl"
    stored = index(str(tmp_path), [("x", f"{a}#line=1&field=text", 1), ("y", f"{a}#line=2&field=text", 2),
                                   ("z", f"{tmp_path}/b.jsonl#line=1&field=text", 3)])
    settled = settle_places(stored, [], ["x"], [], {str(a)}, ReadReport(), 4)
    assert settled.removed == ["y"]  # z's file was not read: it keeps z
    assert settle_places(stored, [], ["x"], [], set(), ReadReport(), 4).removed == []
