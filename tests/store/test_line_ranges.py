"""A line file signed as ranges of its bytes: the process that drives ``sign`` cuts a plain line file by its size
alone and each worker finds, counts and numbers the lines that start in its range, so the store, the line
numbers of ids and locations and the FILE:LINE of every report are the same whatever the ranges and the number
of workers, however the ranges cut through lines."""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.engine.local.sign_workers import LineNumbering
from dedup_cli.inputs import chunks, task_planning
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import LineRangeTask, LinesTask, numbered_lines, task_documents
from dedup_cli.options.input_options import InputOptions

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def text(seed: int, words: int = 9) -> str:
    return " ".join(WORDS[(seed * 5 + 3 * i + i * i) % len(WORDS)] for i in range(words)) + f" n{seed}"


def contents(store: Path) -> tuple[Any, ...]:
    """What a store holds, read back in id order, however its parts cut it."""
    stored = dedup.read_store(store)
    assert stored.content_hashes is not None
    return (tuple(stored.ids), tuple(stored.paths), stored.shingle_counts.tobytes(), stored.packed.tobytes(),
            stored.content_hashes.tobytes())


def said(report: dedup.SignReport) -> tuple[Any, ...]:
    read = report.read
    return (report.documents, report.empty, read.documents, read.empty_documents, read.blank_lines,
            read.bytes_read, tuple(read.duplicate_ids), tuple(read.malformed), tuple(read.unreadable))


def records_file(path: Path) -> tuple[bytes, list[int]]:
    """JSON Lines with what a range may cut through: a byte-order mark, CRLF endings, empty and blank lines,
    malformed records, records without an id (their id is FILE:LINE), an id read twice, and no final newline.
    Returns the bytes and the numbers of the malformed lines."""
    lines: list[bytes] = []
    bad = []
    for number in range(1, 61):
        if number % 11 == 0:
            line = b""
        elif number % 13 == 0:
            line = b"   \t"
        elif number % 9 == 0:
            line = b"{not json"
            bad.append(number)
        elif number % 4 == 0:
            line = json.dumps({"text": text(number)}).encode()  # no id: FILE:LINE
        else:
            line = json.dumps({"id": f"r{number % 23}", "text": text(number)}).encode()
        ending = b"\r\n" if number % 3 == 0 else b"\n"
        lines.append(line + ending)
    data = b"\xef\xbb\xbf" + b"".join(lines)
    data = data.rstrip(b"\r\n")  # the last line has no newline
    path.write_bytes(data)
    return data, bad


@pytest.mark.parametrize("range_bytes", [1, 7, 64, 97, 1 << 20])
@pytest.mark.parametrize("id_field", ["id", None])
def test_the_store_and_every_report_are_the_same_whatever_the_ranges_and_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_bytes: int, id_field: str | None) -> None:
    path = tmp_path / "records.jsonl"
    data, bad = records_file(path)
    options = dedup.InputOptions(id_field=id_field)
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 1 << 30)  # one range: the lines numbered from 1 in order
    expected_report = dedup.sign([str(path)], tmp_path / "expected", dedup.SignOptions(jobs=1, input=options))
    expected = contents(tmp_path / "expected")
    if id_field is None:  # every id is FILE:LINE
        assert [where for where, _ in expected_report.read.malformed] == [f"{path}:{n}" for n in bad]
        assert "records.jsonl:4" in expected[0] and "records.jsonl:60" in expected[0]
    else:  # the records without an id are malformed too
        missing = [n for n in range(1, 61) if n % 4 == 0 and n % 11 and n % 13 and n % 9]
        assert [where for where, _ in expected_report.read.malformed] == [f"{path}:{n}"
                                                                          for n in sorted(bad + missing)]
        assert expected_report.read.duplicate_ids
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", range_bytes)
    for jobs in (1, 2, 3):
        store = tmp_path / f"store-{jobs}"
        report = dedup.sign([str(path)], store, dedup.SignOptions(jobs=jobs, input=options))
        assert contents(store) == expected, jobs
        assert said(report) == said(expected_report), jobs
    assert said(expected_report)[5] == len(data)  # every byte read once, by one range


def test_a_line_exactly_at_a_range_boundary_is_the_next_ranges(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "lines.txt"
    lines = [text(n, 3).encode() for n in range(6)]
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(data)
    boundary = len(lines[0]) + 1 + len(lines[1]) + 1  # line 3 starts exactly here
    size = os.stat(path).st_size
    mtime = os.stat(path).st_mtime_ns
    before = chunks.read_range(str(path), 0, boundary, size, mtime)
    after = chunks.read_range(str(path), boundary, size, size, mtime)
    assert before == lines[0] + b"\n" + lines[1] + b"\n" and after == data[boundary:]
    # One byte earlier, line 3's first byte is still in the second range; one later, the first range takes it.
    assert chunks.read_range(str(path), 0, boundary - 1, size, mtime) == before
    assert chunks.read_range(str(path), 0, boundary + 1, size, mtime) == data[: boundary + len(lines[2]) + 1]
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", boundary)
    report = dedup.sign([str(path)], tmp_path / "store", dedup.SignOptions(jobs=2, input=dedup.InputOptions(
        input_format="lines")))
    stored = dedup.read_store(tmp_path / "store")
    assert report.documents == 6 and sorted(stored.ids) == sorted(f"lines.txt:{n}" for n in range(1, 7))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=40), step=st.integers(1, 50),
       last_newline=st.booleans())
def test_ranges_share_out_every_line_once(tmp_path_factory: pytest.TempPathFactory,
                                          lines: list[tuple[int, bool]], step: int, last_newline: bool) -> None:
    """However the ranges cut a file (lines of any length, empty ones, CRLF), each line is read by exactly one
    range, whole, and the newlines counted number the lines as one reader of the file does."""
    data = b"".join(b"x" * length + (b"\r\n" if crlf else b"\n") for length, crlf in lines)
    if lines and not last_newline:
        data = data.rstrip(b"\r\n")
    path = tmp_path_factory.mktemp("ranges") / "lines.txt"
    path.write_bytes(data)
    status = os.stat(path)
    pieces = [chunks.read_range(str(path), start, min(start + step, len(data)), len(data), status.st_mtime_ns)
              for start in range(0, len(data), step)]
    assert b"".join(pieces) == data
    end = 0
    for piece in pieces:  # whole lines only: each piece ends with a newline or at the file's end
        end += len(piece)
        assert not piece or piece.endswith(b"\n") or end == len(data)
    assert sum(piece.count(b"\n") for piece in pieces) == data.count(b"\n")


@settings(max_examples=100, deadline=None)
@given(files=st.lists(st.lists(st.integers(-1, 5), min_size=1, max_size=6), min_size=1, max_size=4),
       seed=st.integers(0, 1000))
def test_the_driver_numbers_ranges_in_task_order_whatever_order_their_counts_come_in(files: list[list[int]],
                                                                                       seed: int) -> None:
    """Each range's first line is one more than the newlines of the ranges of its file before it, told in any
    order; after a range that could not be read (-1), the file's later ranges are not numbered (0)."""
    source = Source("f", "f", "f", "lines", None)
    tasks: dict[int, Any] = {}
    counts = {}
    expected = {}
    for counted in files:
        tasks[len(tasks)] = LinesTask(source, chunks.LineChunk(b"", 1), 0, 0)  # a task between files
        line, unreadable = 1, False
        for number, newlines in enumerate(counted):
            index = len(tasks)
            tasks[index] = LineRangeTask(source, number * 10, number * 10 + 10, 100, 0, 1)
            counts[index] = newlines
            expected[index] = 0 if unreadable else line
            unreadable |= newlines < 0
            line += max(newlines, 0)
    order = list(counts)
    random.Random(seed).shuffle(order)
    numbering = LineNumbering()
    found: dict[int, int] = {}
    done = 0  # the tasks told so far (the driver tells them in order, once each is done)
    waiting = dict(tasks)
    for index in order:
        while done in waiting and (done in found or not isinstance(waiting[done], LineRangeTask)):
            del waiting[done]  # told: done, and before every task not done
            done += 1
        found.update(numbering.count(index, counts[index], waiting, done))
    assert found == expected


def test_a_file_changed_after_it_was_planned_is_reported_once_and_not_half_numbered(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(json.dumps({"text": text(n)}).encode() + b"\n" for n in range(40)))
    source = Source("records.jsonl", str(path), str(path), "jsonl", None, os.stat(path).st_size)
    with open(path, "rb") as stream:
        head = stream.read(64)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 300)
    try:
        ranges = list(task_planning.line_ranges_of(source, os.stat(path), head))
    finally:
        monkeypatch.undo()
    assert len(ranges) > 2 and ranges[-1].end == source.size and all(task_documents(r) >= 1 for r in ranges)
    with open(path, "ab") as appending:
        appending.write(b'{"text": "added while the run read it"}\n')
    told: list[int] = []

    def first_line_of(newlines: int) -> int:
        told.append(newlines)
        return 0

    task = numbered_lines(ranges[1], first_line_of)
    assert told == [-1] and task.chunk.data == b""
    report = ReadReport()
    for kind, item in task.notes:
        report.note(kind, item)
    assert report.unreadable == [(str(path), "it changed while it was read; sign it again")]


def test_the_driver_reads_nothing_of_a_plain_line_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain line file becomes ranges planned from its size (the driver reads only its first bytes, to tell a
    binary file); a compressed one is still cut into chunks of lines by the driver."""
    import gzip

    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(json.dumps({"text": text(n)}).encode() + b"\n" for n in range(400)))
    with gzip.open(tmp_path / "records.jsonl.gz", "wb") as packed:
        packed.write(path.read_bytes())
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 1000)
    opened: list[int] = []
    real_read = chunks.read_range

    def spy(*args: Any) -> bytes:
        opened.append(1)
        return real_read(*args)

    monkeypatch.setattr(chunks, "read_range", spy)
    from dedup_cli.inputs.discovery import plan_sources

    report = ReadReport()
    sources = plan_sources([str(path), str(tmp_path / "records.jsonl.gz")], InputOptions(), report, None)  # type: ignore[arg-type]
    tasks = list(task_planning.plan_tasks(sources, InputOptions(), report, None, line_ranges=True))  # type: ignore[arg-type]
    ranges = [task for task in tasks if isinstance(task, LineRangeTask)]
    assert [(task.start, task.end) for task in ranges] == [(s, min(s + 1000, path.stat().st_size))
                                                           for s in range(0, path.stat().st_size, 1000)]
    assert not opened
    assert any(isinstance(task, LinesTask) and task.source.compression == "gzip" for task in tasks)


def test_integer_sets_cut_into_ranges_are_the_same_whatever_the_ranges_and_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sets.txt"
    rows = [f"s{n % 40}\t" + " ".join(str((n * 7 + i * 3) % 100) for i in range(1 + n % 9)) for n in range(50)]
    rows[17] = "s17\t12 not-a-number"  # malformed, its FILE:LINE reported alike
    path.write_text("\n".join(rows) + "\n")
    options = dedup.InputOptions(input_format="sets", universe=100)
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 1 << 30)
    expected_report = dedup.sign([str(path)], tmp_path / "expected", dedup.SignOptions(jobs=1, input=options))
    assert [where for where, _ in expected_report.read.malformed] == [f"{path}:18"]
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 13)
    for jobs in (1, 3):
        report = dedup.sign([str(path)], tmp_path / f"store-{jobs}", dedup.SignOptions(jobs=jobs, input=options))
        assert contents(tmp_path / f"store-{jobs}") == contents(tmp_path / "expected")
        assert said(report) == said(expected_report)


def _dies_in_second_range(task: LineRangeTask, first_line_of: Any) -> LinesTask:
    """A worker killed once it has counted the second range of a file and been told its first line."""
    numbered = numbered_lines(task, first_line_of)
    if task.start > 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return numbered


def test_a_worker_killed_in_a_range_names_it_and_nothing_is_stored(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from dedup_cli.cli.main import cli
    from dedup_cli.engine.local import sign_workers

    path = tmp_path / "records.jsonl"
    records_file(path)
    store = tmp_path / "store"
    monkeypatch.setattr(task_planning, "LINE_RANGE_BYTES", 500)
    monkeypatch.setattr(sign_workers, "numbered_lines", _dies_in_second_range)  # the forked workers inherit it
    result = CliRunner().invoke(cli, ["sign", str(path), "-o", str(store), "-j", "2", "-q"])
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output
    assert "a signing worker process died while reading" in lines[0] and "records.jsonl" in lines[0]
    assert "from byte" in lines[0] and "SIGKILL" in lines[0]
    assert not list(store.glob("part-*")) and not list(store.glob(".*tmp"))
