"""Signing with several worker processes: each worker writes parts of its own and the driver only keeps the first
document of each id and commits, so the store read back, the reports and incremental runs are the same whatever
the number of workers, the cut of the inputs into tasks and the size of the parts."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import pickle
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.local import sign as local_sign
from dedup_cli.engine.local import sign_workers, task_board, task_rows
from dedup_cli.inputs import chunks, task_planning
from dedup_cli.store import parts as part_files

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def text(seed: int, words: int = 12) -> str:
    return " ".join(WORDS[(seed * 7 + 3 * i + i * i) % len(WORDS)] for i in range(words)) + f" n{seed}"


def contents(store: str | Path) -> tuple[Any, ...]:
    """What a store holds, read back: its live rows in id order, however its parts cut them."""
    stored = dedup.read_store(store)
    assert stored.content_hashes is not None and stored.runs is not None
    return (tuple(stored.ids), tuple(stored.paths), stored.shingle_counts.tobytes(), stored.packed.tobytes(),
            stored.content_hashes.tobytes(), stored.runs.tobytes())


def said(report: dedup.SignReport) -> tuple[Any, ...]:
    """What a sign run reports: counts, and every listed skipped or repaired input."""
    read = report.read
    run = report.run
    return (report.documents, report.unchanged, report.empty, read.documents, read.empty_documents,
            read.bytes_read, tuple(read.duplicate_ids), tuple(read.malformed), tuple(read.binary),
            None if run is None else (run.added, run.changed, run.removed, run.documents))


def corpus(root: Path, edit: int = 0) -> Path:
    """Files and JSON Lines records whose ids repeat within a task, across tasks and across files; ``edit``
    changes some, adds some and removes a file, as between two runs."""
    folder = root / "corpus"
    (folder / "docs").mkdir(parents=True, exist_ok=True)
    for number in range(23):
        (folder / "docs" / f"{number:02d}.txt").write_text(text(number + 10 * edit * (number % 5 == 0)))
    (folder / "docs" / "empty.txt").write_text("  \n")
    if edit:
        (folder / "docs" / "03.txt").unlink()
    lines = []
    for number in range(40 + 5 * edit):
        identifier = f"r{number % 31}"  # r0 … r8 come twice: in other tasks of the same file
        content = text(100 + number + (edit if number % 7 == 0 else 0))
        lines.append(json.dumps({"id": identifier, "text": content}))
    lines.insert(5, json.dumps({"id": "r2", "text": "the same id again, within one task"}))
    lines.insert(9, "{not json")
    lines.append(json.dumps({"id": "r40", "text": ""}))
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "b.jsonl").write_text("\n".join(lines[::-3]) + "\n")  # every id of it read before, in a.jsonl
    return folder


@pytest.fixture
def small_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_planning, "TASK_FILES", 4)
    monkeypatch.setattr(chunks, "CHUNK_LINES", 6)
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 200)  # ranges of a line file cut through its lines
    monkeypatch.setattr(part_files, "PART_ROWS", 9)  # parts roll, and rows read twice fall in several of them
    monkeypatch.setattr(local_sign, "MERGED_ROWS", 0)  # and stay apart


@pytest.mark.usefixtures("small_tasks")
def test_any_number_of_workers_writes_and_reports_the_same(tmp_path: Path) -> None:
    folder = corpus(tmp_path)
    results = {}
    for jobs in (1, 2, 3):
        store = tmp_path / f"store-{jobs}"
        options = dedup.SignOptions(jobs=jobs, prune=True, input=dedup.InputOptions(id_field="id"))
        first = dedup.sign([str(folder)], store, options)
        assert first.read.count("duplicate_ids") > 10 and first.read.count("malformed") == 2
        after_first = contents(store)
        assert len(list(store.glob("part-*.parquet"))) > 1 and not list(store.glob(".*tmp"))
        corpus(tmp_path, edit=1)
        second = dedup.sign([str(folder)], store, options)
        assert second.run is not None and second.run.removed == 1 and second.run.changed > 0
        assert second.unchanged > 0
        results[jobs] = (said(first), after_first, said(second), contents(store))
        corpus(tmp_path, edit=0)
    assert results[1] == results[2] == results[3]
    ids = results[1][1][0]
    assert len(ids) == len(set(ids)) == 23 + 1 + 31 + 1  # every id once: its first document


@pytest.mark.usefixtures("small_tasks")
def test_the_first_document_of_each_id_is_kept(tmp_path: Path) -> None:
    folder = corpus(tmp_path)
    dedup.sign([str(folder / "a.jsonl")], tmp_path / "one", dedup.SignOptions(jobs=1, input=dedup.InputOptions(
        id_field="id")))
    dedup.sign([str(folder)], tmp_path / "many", dedup.SignOptions(jobs=3, input=dedup.InputOptions(
        id_field="id")))
    one, many = dedup.read_store(tmp_path / "one"), dedup.read_store(tmp_path / "many")
    records = {r: row for row, r in enumerate(one.ids)}
    for row, identifier in enumerate(many.ids):
        if identifier.startswith("r"):  # read first in a.jsonl, the same row as a run of that file alone
            assert many.paths[row] == one.paths[records[identifier]]
            assert bytes(many.packed[row]) == bytes(one.packed[records[identifier]])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(0, 12), min_size=1, max_size=40), chunk=st.integers(1, 7), jobs=st.integers(1, 3),
       part_rows=st.integers(1, 12), joined=st.booleans())
def test_whatever_the_tasks_the_store_holds_the_first_record_of_each_id(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, ids: list[int], chunk: int,
        jobs: int, part_rows: int, joined: bool) -> None:
    folder = tmp_path_factory.mktemp("layout")
    records = folder / "records.jsonl"
    records.write_text("".join(json.dumps({"id": f"i{i}", "text": text(n)}) + "\n" for n, i in enumerate(ids)))
    first_of = {}
    for number, identifier in enumerate(ids):
        first_of.setdefault(f"i{identifier}", number)
    expected = folder / "expected"
    (folder / "first.jsonl").write_text("".join(json.dumps({"id": i, "text": text(n)}) + "\n"
                                                for i, n in first_of.items()))
    options = dedup.InputOptions(id_field="id")
    dedup.sign([str(folder / "first.jsonl")], expected, dedup.SignOptions(jobs=1, input=options))
    monkeypatch.setattr(chunks, "CHUNK_LINES", chunk)
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 31 * chunk)
    monkeypatch.setattr(part_files, "PART_ROWS", part_rows)
    monkeypatch.setattr(local_sign, "MERGED_ROWS", 1000 if joined else 0)
    report = dedup.sign([str(records)], folder / "store", dedup.SignOptions(jobs=jobs, input=options))
    stored, wanted = dedup.read_store(folder / "store"), dedup.read_store(expected)
    assert stored.ids == wanted.ids and stored.packed.tobytes() == wanted.packed.tobytes()
    assert stored.content_hashes is not None and wanted.content_hashes is not None
    assert stored.content_hashes.tobytes() == wanted.content_hashes.tobytes()
    lines = [int(where.rsplit(":", 1)[1]) for where, _ in report.read.duplicate_ids]
    assert lines == [n + 1 for n, i in enumerate(ids) if first_of[f"i{i}"] != n]
    assert report.documents == len(first_of) and not list((folder / "store").glob(".*tmp"))
    if joined:
        assert len(list((folder / "store").glob("part-*.parquet"))) == 1


def _killed(task: Any, *args: Any, **kwargs: Any) -> Any:
    if getattr(task, "paths", ("",))[0].endswith("08.txt"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_sign_task(task, *args, **kwargs)


real_sign_task = sign_workers.sign_task


@pytest.mark.usefixtures("small_tasks")
def test_a_worker_that_dies_names_what_it_was_reading_and_nothing_is_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = corpus(tmp_path)
    store = tmp_path / "store"
    dedup.sign([str(folder / "a.jsonl")], store, dedup.SignOptions(input=dedup.InputOptions(id_field="id")))
    before = contents(store)
    monkeypatch.setattr(sign_workers, "sign_task", _killed)  # the forked workers inherit it
    # Plain-text files are named by their paths: the store's id field (for its records) does not apply to them.
    result = CliRunner().invoke(cli, ["sign", str(folder / "docs"), "-o", str(store), "-j", "2", "-q"])
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output
    assert "a signing worker process died while reading" in lines[0] and "08.txt" in lines[0]
    assert "SIGKILL" in lines[0] and "--jobs 1" in lines[0]
    assert contents(store) == before and not list(store.glob(".*tmp"))
    monkeypatch.setattr(sign_workers, "sign_task", real_sign_task)
    assert CliRunner().invoke(cli, ["sign", str(folder / "docs"), "-o", str(store), "-q"]).exit_code == 0


def _failing_write(*args: Any, **kwargs: Any) -> Any:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.usefixtures("small_tasks")
def test_a_failed_write_is_one_line_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              jobs: str) -> None:
    folder = corpus(tmp_path)
    store = tmp_path / "store"
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(part_files, "PART_ROWS", 3)
    monkeypatch.setattr("dedup_cli.store.places.ParquetSink.close", _failing_write)
    result = CliRunner().invoke(cli, ["sign", str(folder), "--id-field", "id", "-o", str(store), "-j", jobs, "-q"])
    gc.collect()
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [f"Error: cannot write {store}: No space left on device"]
    assert unraisable == [] and not list(store.glob("part-*")) and not list(store.glob(".*tmp"))


@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.usefixtures("small_tasks")
def test_workers_write_their_parts_into_object_storage(tmp_path: Path, bucket: str, monkeypatch: pytest.MonkeyPatch,
                                                       joined: bool) -> None:
    monkeypatch.setattr(local_sign, "MERGED_ROWS", 1000 if joined else 0)
    folder = corpus(tmp_path)
    options = dedup.SignOptions(jobs=2, prune=True, input=dedup.InputOptions(id_field="id"))
    local = dedup.SignOptions(jobs=1, prune=True, input=dedup.InputOptions(id_field="id"))
    remote = f"{bucket}/store-{joined}"
    for edit in (0, 1):
        corpus(tmp_path, edit)
        there = dedup.sign([str(folder)], remote, options)
        here = dedup.sign([str(folder)], tmp_path / "here", local)
        assert said(there)[:-1] == said(here)[:-1]
        assert contents(remote) == contents(tmp_path / "here")


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.integers(0, 60), max_size=80), chunk_bytes=st.integers(1, 40), chunk_lines=st.integers(1, 6),
       block=st.integers(1, 50), head=st.integers(0, 30), last_newline=st.booleans())
def test_the_driver_cuts_a_line_file_in_place_as_a_reader_of_its_lines_does(
        lines: list[int], chunk_bytes: int, chunk_lines: int, block: int, head: int, last_newline: bool) -> None:
    """The driver of a run cuts a plain line file into tasks by finding newlines in a window of its bytes (with a
    long line's bytes dropped as they are passed): the same cuts as reading the lines, whatever the reads."""
    import io

    data = b"\n".join(b"x" * length for length in lines) + (b"\n" if last_newline and lines else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
        patch.setattr(chunks, "CHUNK_LINES", chunk_lines)
        patch.setattr(chunks, "_IN_PLACE_BLOCK", block)
        stream = io.BytesIO(data)
        expected = [(chunk.first_line, len(chunk.data), chunk.data.count(b"\n"))
                    for chunk in chunks.line_chunks(stream, None, stream.tell, False)]
        placed = list(chunks.in_place_chunks(io.BytesIO(data[head:]), data[:head]))
    assert [(chunk.first_line, chunk.length, chunk.newlines) for chunk in placed] == expected
    assert [chunk.offset for chunk in placed] == [sum(length for _, length, _ in expected[:n])
                                                 for n in range(len(expected))]
    assert all(chunk.position == chunk.offset + chunk.length for chunk in placed)


@pytest.mark.parametrize("slot_bytes", [0, 400, sign_workers.BOARD_SLOT_BYTES])
@pytest.mark.usefixtures("small_tasks")
def test_tasks_handed_out_through_the_board_or_the_pipes_sign_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    slot_bytes: int) -> None:
    """Tasks go to the workers by index through a few slots of shared memory, and those too large for a slot
    through the worker's pipe when it asks: with no task fitting, some, or all, and many more tasks than slots
    (one file each), the store and the reports are those of one process."""
    folder = corpus(tmp_path)
    monkeypatch.setattr(task_planning, "TASK_FILES", 1)
    options = dedup.SignOptions(jobs=1, prune=True, input=dedup.InputOptions(id_field="id"))
    alone = dedup.sign([str(folder)], tmp_path / "alone", options)
    posted: list[bool] = []
    real_post = task_board.TaskBoard.post

    def post(board: task_board.TaskBoard, index: int, pickled: Any) -> bool:
        posted.append(real_post(board, index, pickled))
        return posted[-1]

    monkeypatch.setattr(sign_workers, "BOARD_SLOT_BYTES", slot_bytes)
    monkeypatch.setattr(task_board.TaskBoard, "post", post)
    for jobs in (2, 3):
        posted.clear()
        report = dedup.sign([str(folder)], tmp_path / f"store-{jobs}", dataclasses.replace(options, jobs=jobs))
        assert said(report) == said(alone) and contents(tmp_path / f"store-{jobs}") == contents(tmp_path / "alone")
        assert len(posted) > 5 * 2 * jobs  # many more tasks than the board's slots
        fitted = {0: [False], 400: [False, True]}.get(slot_bytes, [True])  # 400: files tasks, not ranges
        assert sorted(set(posted)) == fitted


def test_a_workers_rows_sent_at_its_end_are_each_tasks_rows() -> None:
    """What a worker sends once at its end, the arrays of its tasks end to end, unpacks into each task's rows."""
    from dedup_cli.inputs.columns import FileWheres, LineWheres
    from dedup_cli.inputs.report import ReadReport
    from dedup_cli.store.worker_parts import ReadIds

    rng = np.random.default_rng(5)
    rows = []
    for index, count in enumerate([3, 0, 5, 1, 4]):
        fresh = rng.random(count) < 0.5
        ids = [f"t{index}-{n}" for n in range(count)]
        report = ReadReport()
        report.note("malformed", (f"f{index}", "bad"))
        wheres: Any = (FileWheres((), np.arange(count)) if index % 2 == 0 else FileWheres((), rng.permutation(count))
                       if index == 1 else LineWheres("x.jsonl", np.arange(count) + 7))
        rows.append(task_rows.TaskRows(10 + index, report, ReadIds.of(ids), wheres, rng.random(count) < 0.3, fresh,
                                          rng.random(int(fresh.sum())) < 0.5, f"part-{index}" if fresh.any() else None,
                                          index * 2, 100 * index, [], isinstance(wheres, FileWheres)))
    sent = pickle.loads(pickle.dumps(task_rows.WorkerRows.of(rows)))
    for original, back in zip(rows, sent.unpacked(), strict=True):
        assert back.ids.ids.to_pylist() == original.ids.ids.to_pylist()
        assert back.ids.hashes.tolist() == original.ids.hashes.tolist()
        for name in ("empty", "fresh", "blank"):
            assert getattr(back, name).tolist() == getattr(original, name).tolist()
        assert (back.index, back.part, back.first_row, back.input_bytes, back.paths_left_out, back.report) == (
            original.index, original.part, original.first_row, original.input_bytes, original.paths_left_out,
            original.report)
        assert type(back.wheres) is type(original.wheres)
        if isinstance(original.wheres, FileWheres):
            assert back.wheres.positions.tolist() == original.wheres.positions.tolist()
            named = back.received(tuple(f"/d/{n}" for n in range(len(original.ids))))
            assert [named.wheres[n] for n in range(len(named.wheres))] == [
                f"/d/{p}" for p in original.wheres.positions.tolist()]
        else:
            assert list(back.wheres[n] for n in range(len(back.wheres))) == [
                original.wheres[n] for n in range(len(original.wheres))]


@pytest.mark.usefixtures("small_tasks")
def test_the_driver_collects_garbage_again_after_a_run_even_one_that_failed(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Cyclic collection is paused while the driver walks and hands out tasks, and only then."""
    folder = corpus(tmp_path)
    assert gc.isenabled()
    dedup.sign([str(folder / "docs")], tmp_path / "store", dedup.SignOptions(jobs=2))
    assert gc.isenabled()
    monkeypatch.setattr(sign_workers, "sign_task", _killed)
    with pytest.raises(dedup.DedupError, match="worker process died"):
        dedup.sign([str(folder / "docs")], tmp_path / "other", dedup.SignOptions(jobs=2))
    assert gc.isenabled()
    gc.disable()  # and a caller's choice to collect nothing stays
    try:
        monkeypatch.setattr(sign_workers, "sign_task", real_sign_task)
        dedup.sign([str(folder / "docs")], tmp_path / "third", dedup.SignOptions(jobs=2))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("rows_held", [1, 10])
@pytest.mark.usefixtures("small_tasks")
def test_workers_that_send_their_rows_as_they_go_sign_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            rows_held: int) -> None:
    """A worker sends its tasks' rows when it ends, or sooner once it holds ``ROWS_HELD`` of them: with every task's
    rows sent at once, or a few tasks' together, the store and the reports are those of one process."""
    folder = corpus(tmp_path)
    options = dedup.SignOptions(jobs=1, prune=True, input=dedup.InputOptions(id_field="id"))
    alone = dedup.sign([str(folder)], tmp_path / "alone", options)
    monkeypatch.setattr(sign_workers, "ROWS_HELD", rows_held)
    many = dedup.sign([str(folder)], tmp_path / "many", dataclasses.replace(options, jobs=3))
    assert said(many) == said(alone) and contents(tmp_path / "many") == contents(tmp_path / "alone")
