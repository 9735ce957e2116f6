"""The local engine's walk hands whole text files over in runs (a directory's files, a batch at a time) rather than
one source each: whatever the batches, the files, their order, the reports and the tasks planned are those of a
source per file, and so is the store, whatever the number of workers and over incremental runs."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dedup_cli as dedup
from dedup_cli.inputs import discovery, name_formats, task_planning
from dedup_cli.inputs.locations import FileRun, Source
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.input_options import InputOptions


def nested_corpus(root: Path) -> Path:
    """Nested folders of text files (some compressed, empty, not UTF-8 named, hidden, unreadable), with JSON
    Lines and Parquet files between them, so runs of whole files are cut by other formats and by folders."""
    folder = root / "corpus"
    for depth, name in enumerate(["a", "a/b", "a/b/c", "d", "a-b"]):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for number in range(7 + depth):
            (folder / name / f"{number:02d}.txt").write_text(f"folder {name} file {number} says words " * (number + 1))
    (folder / "a" / "03.jsonl").write_text("".join(json.dumps({"text": f"line {n} of a record"}) + "\n"
                                                   for n in range(5)))
    pq.write_table(pa.table({"text": ["a row of parquet", "another row"]}), folder / "a" / "b" / "05.parquet")
    (folder / "a" / "04.txt.gz").write_bytes(gzip.compress(b"compressed words of a file"))
    (folder / "d" / "empty.txt").write_text("")
    (folder / "d" / ".hidden.txt").write_text("never read")
    (folder / "d" / "bin.txt").write_bytes(b"binary\0file")
    with open(os.fsencode(folder / "d") + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"a name that is not UTF-8")
    (folder / "a" / "b" / "01b.txt").symlink_to(folder / "nowhere")  # listed, but its stat and read fail
    return folder


def per_file(walked: list[Source | FileRun]) -> list[Source]:
    return list(discovery._sources(iter(walked)))


def walk(folder: Path, options: InputOptions) -> tuple[list[Source | FileRun], ReadReport]:
    report = ReadReport()
    return list(discovery.walk_runs([str(folder)], options, report, io.BytesIO())), report


def task_keys(tasks: list[Any]) -> list[Any]:
    return [(type(task).__name__, getattr(task, "ids", None), getattr(task, "paths", None), task.input_bytes)
            for task in tasks]


@pytest.mark.parametrize("filters", [{}, {"include": ("*.txt",)}, {"exclude": ("a/b/*", "0[13].txt")}])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.integers(1, 9), task_files=st.integers(1, 6), task_bytes=st.integers(1, 400))
def test_runs_give_the_files_and_tasks_of_a_source_per_file(tmp_path_factory: pytest.TempPathFactory,
                                                           monkeypatch: pytest.MonkeyPatch, filters: dict[str, Any],
                                                           batch: int, task_files: int, task_bytes: int) -> None:
    folder = nested_corpus(tmp_path_factory.mktemp("walk"))
    options = InputOptions(**filters)
    whole, whole_report = walk(folder, options)  # every directory's files in one batch
    monkeypatch.setattr(discovery, "WALK_FILES", batch)
    monkeypatch.setattr(task_planning, "TASK_FILES", task_files)
    monkeypatch.setattr(task_planning, "TASK_BYTES", task_bytes)
    batched, report = walk(folder, options)
    assert any(isinstance(item, FileRun) for item in batched)
    assert per_file(batched) == per_file(whole) and report == whole_report
    sources = per_file(batched)
    assert [source.id for source in sources] == sorted(source.id for source in sources)
    planned = [ReadReport(), ReadReport()]
    from_runs = list(task_planning.plan_tasks(batched, options, planned[0], io.BytesIO()))
    from_sources = list(task_planning.plan_tasks(sources, options, planned[1], io.BytesIO()))
    assert task_keys(from_runs) == task_keys(from_sources) and planned[0] == planned[1]
    unchanged = {source.id for source in sources[::3]}
    skipped = [ReadReport(), ReadReport()]

    def known(identifier: str, location: str, status: os.stat_result) -> bool:
        return identifier in unchanged

    from_runs = list(task_planning.plan_tasks(batched, options, skipped[0], io.BytesIO(), known))
    from_sources = list(task_planning.plan_tasks(sources, options, skipped[1], io.BytesIO(), known))
    assert task_keys(from_runs) == task_keys(from_sources) and skipped[0] == skipped[1]
    assert skipped[0].unchanged > 0


def signed(store: Path) -> tuple[Any, ...]:
    stored = dedup.read_store(store)
    return tuple(stored.ids), tuple(stored.paths), stored.packed.tobytes(), stored.shingle_counts.tobytes()


def reported(report: dedup.SignReport) -> tuple[Any, ...]:
    read = report.read
    return (report.documents, report.unchanged, report.files_found, read.documents, read.bytes_read,
            read.input_bytes, tuple(read.unreadable), tuple(read.binary), tuple(read.duplicate_ids))


@pytest.mark.parametrize("filters", [{}, {"include": ("*.txt", "*.jsonl"), "exclude": ("a/b/c/*",)}])
def test_any_number_of_workers_signs_a_nested_folder_alike_incrementally(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: dict[str, Any]) -> None:
    _signs_alike(tmp_path, monkeypatch, filters)


def _signs_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: dict[str, Any]) -> None:
    folder = nested_corpus(tmp_path)
    monkeypatch.setattr(discovery, "WALK_FILES", 3)
    monkeypatch.setattr(task_planning, "TASK_FILES", 4)
    results = {}
    for jobs in (1, 2, 3):
        store = tmp_path / f"store-{jobs}"
        options = dedup.SignOptions(jobs=jobs, kernel="numpy", prune=True, input=dedup.InputOptions(**filters))
        first = dedup.sign([str(folder)], store, options)
        assert first.read.count("unreadable") == 1 and first.read.count("binary") == 1
        after_first = signed(store)
        (folder / "a" / "02.txt").write_text("changed since the first run")
        (folder / "d" / "00.txt").unlink()
        second = dedup.sign([str(folder)], store, options)
        assert second.unchanged > 10 and second.run is not None and second.run.changed == 1
        results[jobs] = (reported(first), after_first, reported(second), signed(store))
        (folder / "a" / "02.txt").write_text("folder a file 2 says words " * 3)
        (folder / "d" / "00.txt").write_text("folder d file 0 says words ")
    assert results[1] == results[2] == results[3]


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.tuples(st.text(st.sampled_from("aJsOnLqPrtTxXgGzZbB2.\u017f\u212a/é"), max_size=8),
                                st.sampled_from(["", ".jsonl", ".JSONL", ".ndjson", ".parquet", ".gz", ".jsonl.gz",
                                                 ".Parquet.BZ2", ".txt", ".zst", ".jsonl.xz", "jsonl"])),
                      max_size=30))
def test_the_walk_finds_the_files_that_are_not_plain_text_by_one_scan_of_their_names(
        names: list[tuple[str, str]]) -> None:
    """The known endings found in a batch's joined names are those a look at each name finds."""
    paths = [f"/d/{stem}{ending}" for stem, ending in names]
    expected = [position for position, path in enumerate(paths)
                if name_formats.format_and_compression(path) != ("text", None)]
    found = [position for position in name_formats.known_endings(paths)
             if name_formats.format_and_compression(paths[position]) != ("text", None)]
    assert found == expected


def _sampled(monkeypatch: pytest.MonkeyPatch, sampled: bool) -> None:
    """Plan with a ``stat`` of every third whole file after the first (or of every file, as incremental runs do)."""
    monkeypatch.setattr(task_planning, "EXACT_STAT_FILES", 1 if sampled else 10**9)
    monkeypatch.setattr(task_planning, "STAT_SAMPLE_EVERY", 3)


def readable_after_chmod(path: Path) -> bool:
    """Whether this process reads a file its mode forbids (root does)."""
    path.chmod(0)
    try:
        path.read_bytes()
        return True
    except PermissionError:
        return False


def test_files_not_stated_when_planned_sign_alike_whatever_the_workers(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The planning that states only a sample of the files gives the store and reports of the one that states
    every file, at -j 1, 2 and 3: binary, empty, unreadable, symlinked, nested and oddly named files, then an
    incremental run with a changed, an unchanged and a removed file (--prune)."""
    folder = nested_corpus(tmp_path)
    (folder / "a" / "b" / "link.txt").symlink_to(folder / "a" / "00.txt")  # a link to a file is read
    locked = folder / "a" / "b" / "c" / "locked.txt"
    locked.write_text("a file nobody may read")
    unreadable = 1 + (not readable_after_chmod(locked))
    dangling = folder / "a" / "b" / "01b.txt"
    monkeypatch.setattr(discovery, "WALK_FILES", 3)
    monkeypatch.setattr(task_planning, "TASK_FILES", 4)
    results = {}
    try:
        for sampled, jobs in [(False, 1), (True, 1), (True, 2), (True, 3)]:
            _sampled(monkeypatch, sampled)
            store = tmp_path / f"store-{sampled}-{jobs}"
            options = dedup.SignOptions(jobs=jobs, kernel="numpy", prune=True)
            first = dedup.sign([str(folder)], store, options)
            assert first.read.count("unreadable") == unreadable and first.read.count("binary") == 1
            assert first.documents > 30 and first.read.input_bytes is not None
            after_first = signed(store)
            (folder / "a" / "02.txt").write_text("changed since the first run")
            (folder / "d" / "00.txt").unlink()
            dangling.unlink()  # an unreadable input would keep --prune from removing anything
            locked.unlink()
            second = dedup.sign([str(folder)], store, options)
            assert not second.prune_skipped and second.read.count("unreadable") == 0
            gone = 1 + (unreadable == 1)  # and the locked file, when this process could read it
            assert second.run is not None and (second.run.changed, second.run.removed) == (1, gone)
            assert second.unchanged == first.documents - 1 - gone and second.documents == 1
            results[sampled, jobs] = ([*reported(first)[:5], *reported(first)[6:]], after_first,
                                      reported(second), signed(store))
            (folder / "a" / "02.txt").write_text("folder a file 2 says words " * 3)
            (folder / "d" / "00.txt").write_text("folder d file 0 says words ")
            dangling.symlink_to(folder / "nowhere")
            locked.write_text("a file nobody may read")
            locked.chmod(0)
    finally:
        if locked.exists():
            locked.chmod(0o644)
    assert results[False, 1] == results[True, 1] == results[True, 2] == results[True, 3]


def test_the_bytes_read_are_the_files_sizes_whatever_the_sample(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Files stated by a sample when planned: the bytes read (the summary's) are still the sum of the files'
    sizes, and the progress, its total the sample's estimate, ends at that total."""
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    for number in range(40):
        (folder / ("sub" if number % 5 == 0 else "") / f"{number:02d}.txt").write_text(
            f"document {number} with words " * (1 + number * 7))
    sizes = sum(path.stat().st_size for path in folder.rglob("*.txt"))
    _sampled(monkeypatch, True)
    for jobs in (1, 2):
        totals: list[int | None] = []
        advanced: list[int] = []
        report = dedup.sign([str(folder)], tmp_path / f"store-{jobs}", dedup.SignOptions(jobs=jobs, kernel="numpy"),
                            progress=advanced.append, on_start=totals.append)
        assert report.read.bytes_read == sizes and report.documents == 40
        assert len(totals) == 1 and totals[0] is not None and sum(advanced) == totals[0]
        assert totals[0] != sizes  # an estimate: the files differ in size, and most were not stated


def test_a_sample_of_the_files_sizes_them_all_at_its_mean(tmp_path: Path) -> None:
    paths = []
    for number in range(10):
        paths.append(str(tmp_path / f"{number}.txt"))
        Path(paths[-1]).write_bytes(b"x" * (number * 100))
    run = FileRun([f"{number}.txt" for number in range(10)], paths, None, None)
    every, read = ReadReport(input_bytes=0), ReadReport(input_bytes=0)
    exact = discovery.stat_run(run, every)
    assert exact.sizes == [number * 100 for number in range(10)] and every.input_bytes == 4500
    sampled = discovery.stat_run(run, read, 4)  # files 0, 4 and 8: mean 400
    assert sampled.sizes == [400] * 10 and sampled.statuses == [None] * 10 and read.input_bytes == 4000
    assert discovery.stat_run(exact, read) is exact and read.input_bytes == 4000


def test_a_duplicate_id_is_reported_where_it_was_read_whatever_the_workers(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker sends a files task's rows without the task's paths; the driver puts them back, so the later copy
    of an id (two names that display alike) is reported at its own file at any -j."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(12):
        (folder / f"{number:02d}.txt").write_text(f"file {number} words " * 5)
    with open(os.fsencode(folder) + b"/z-caf\xe9.txt", "wb") as handle:
        handle.write(b"named with a byte that is not UTF-8")
    (folder / "z-caf\\xe9.txt").write_text("named as the other one displays")
    monkeypatch.setattr(task_planning, "TASK_FILES", 3)
    seen = set()
    for jobs in (1, 2, 3):
        report = dedup.sign([str(folder)], tmp_path / f"store-{jobs}", dedup.SignOptions(jobs=jobs, kernel="numpy"))
        (where, identifier), = report.read.duplicate_ids
        assert identifier == "z-caf\\xe9.txt" and where.startswith(str(folder) + "/z-caf")
        seen.add(where)
    assert len(seen) == 1


def test_the_walk_leaves_out_the_stores_it_finds_and_notes_each_once(tmp_path: Path) -> None:
    folder = nested_corpus(tmp_path)
    plain, _ = walk(folder, InputOptions())
    for store, marker in (("a/b/sigs", "_dedup_manifest.json"), ("d/new-sigs", "_dedup.lock")):
        (folder / store).mkdir()
        (folder / store / marker).write_text("{}")
        (folder / store / "part-000001.parquet").write_bytes(b"PAR1 not read")
    walked, report = walk(folder, InputOptions())
    assert [source.id for source in per_file(walked)] == [source.id for source in per_file(plain)]
    assert report.stores_left_out == [str(folder / "a/b/sigs"), str(folder / "d/new-sigs")]
    # A store named itself is left out as well, and so is a file named inside one.
    report = ReadReport()
    named = [str(folder / "a/b/sigs"), str(folder / "d/new-sigs/part-000001.parquet"), str(folder / "d/empty.txt")]
    assert [source.id for source in discovery.walk_sources(named, InputOptions(), report, io.BytesIO())] == [
        "d/empty.txt"]
    assert sorted(report.stores_left_out) == [str(folder / "a/b/sigs"), str(folder / "d/new-sigs")]
