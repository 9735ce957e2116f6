"""sign --engine dask stores what --engine local stores: the same live rows, runs, reports and removals.

Tasks are made small (a few kB of input) so that even the bundled corpora are cut into many tasks, each writing
its own part; a Parquet input is cut by row groups. A worker killed in the middle of a task and a driver killed
before its commit are tested with real signals.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from distributed import Client
from helpers import REPO

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.dask import sign as dask_sign
from dedup_cli.inputs import chunks, task_planning
from dedup_cli.inputs.locations import Source
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.store import open_store, read_store

SAMPLES = REPO / "sample_corpora"
READING = dedup.InputOptions(exclude=("SOURCE",))


@pytest.fixture(autouse=True)
def small_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_sign, "TASK_BYTES", 6_000)


def assert_same_rows(a: Path, b: Path) -> None:
    x, y = read_store(a), read_store(b)
    assert x.ids == y.ids and x.paths == y.paths
    assert np.array_equal(x.packed, y.packed) and np.array_equal(x.shingle_counts, y.shingle_counts)
    assert np.array_equal(x.content_hashes, y.content_hashes) and np.array_equal(x.runs, y.runs)


def sign_both(inputs: list[str], folder: Path, engine: EngineOptions, **options: object
              ) -> tuple[dedup.SignReport, dedup.SignReport]:
    local = dedup.sign(inputs, folder / "local.parquet", dedup.SignOptions(**options))  # type: ignore[arg-type]
    remote = dedup.sign(inputs, folder / "dask.parquet", dedup.SignOptions(engine=engine, **options))  # type: ignore[arg-type]
    assert_same_rows(folder / "local.parquet", folder / "dask.parquet")
    for report in (local, remote):
        report.seconds = 0.0
        assert report.run is not None
        report.run = report.run.__class__(**{**vars(report.run), "time": ""})
    assert remote.run == local.run and remote.documents == local.documents and remote.empty == local.empty
    assert remote.unchanged == local.unchanged and remote.read.documents == local.read.documents
    assert remote.read.skipped == local.read.skipped and remote.prune_skipped == local.prune_skipped
    return local, remote


def test_a_corpus_signed_and_grown_in_tasks(engine: EngineOptions, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES, corpus)
    (corpus / "empty.txt").write_text("")
    (corpus / "image.bin").write_bytes(b"\x89PNG\x00binary")
    local, remote = sign_both([str(corpus)], tmp_path, engine, input=READING)
    assert len(open_store(tmp_path / "dask.parquet").manifest.parts) > 10  # a part per task
    assert remote.read.binary == local.read.binary == [str(corpus / "image.bin")]
    (corpus / "bible-editions" / "KJV" / "ruth-01.txt").write_text("a changed chapter " * 40)
    shutil.rmtree(corpus / "bible-editions" / "ASV")
    (corpus / "new.txt").write_text("a new document of a few words " * 5)
    _, remote = sign_both([str(corpus)], tmp_path, engine, input=READING, prune=True)
    assert remote.run is not None and (remote.run.added, remote.run.changed, remote.run.removed) == (1, 1, 8)
    assert remote.unchanged > 1000  # unchanged files were recognised in the tasks, not signed again
    find_local = dedup.find(tmp_path / "local.parquet", dedup.FindOptions(bits=2))
    find_remote = dedup.find(tmp_path / "dask.parquet", dedup.FindOptions(bits=2))
    assert find_local.accepted.first.size == find_remote.accepted.first.size > 0


def test_records_ids_across_tasks_and_parquet_row_groups(engine: EngineOptions, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:120]]
    # Two JSON Lines files whose ids repeat across them (the first read wins), and a Parquet file of several row
    # groups read by row group in separate tasks.
    for name, part in (("a.jsonl", texts[:60]), ("b.jsonl", texts[50:110])):
        (corpus / name).write_text("".join(json.dumps({"url": f"u{index % 70}", "body": text}) + "\n"
                                           for index, text in enumerate(part)))
    # --id-field names the Parquet file's id column too.
    pq.write_table(pa.table({"body": texts, "url": [f"p{index}" for index in range(len(texts))]}), corpus / "c.parquet",
                   row_group_size=17)
    options = dict(input=dedup.InputOptions(id_field="url", text_field="body", text_column="body"))
    local, remote = sign_both([str(corpus)], tmp_path, engine, **options)
    assert sorted(remote.read.duplicate_ids) == sorted(local.read.duplicate_ids)
    assert len(local.read.duplicate_ids) > 40
    assert "p119" in read_store(tmp_path / "dask.parquet").ids
    # A second run with nothing changed writes nothing, though records with an id field are signed in the tasks.
    _, again = sign_both([str(corpus)], tmp_path, engine, **options)
    assert again.run is not None and (again.run.added, again.run.changed, again.documents) == (0, 0, 0)


def test_csv_and_tsv_records_signed_as_the_local_engine_signs_them(engine: EngineOptions, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:40]]
    quoted = ['"' + text.replace('"', '""') + '"' for text in texts]  # CSV: newlines, quotes and commas inside
    lines = [" ".join(text.split()) for text in texts]  # TSV: one line each, quotes as they are
    for name, separator, fields in (("a.csv", ",", quoted), ("b.tsv", "\t", lines)):
        (corpus / name).write_text(f"n{separator}text\n" + "".join(f"{index}{separator}{text}\n"
                                                                   for index, text in enumerate(fields)))
    local, remote = sign_both([str(corpus)], tmp_path, engine)
    assert local.read.documents == 80
    assert "a.csv:40" in read_store(tmp_path / "dask.parquet").ids


def test_one_large_jsonl_or_csv_file_is_cut_into_tasks_as_the_local_engine_cuts_it(
        engine: EngineOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks of 7 lines or records; tasks of 6 kB (small_tasks): each file below is several tasks.
    monkeypatch.setattr(chunks, "CHUNK_LINES", 7)
    monkeypatch.setattr(task_planning, "CHUNK_LINES", 7)
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:150]]
    lines = tmp_path / "lines"
    lines.mkdir()
    # ids repeat across the file (u0 … u69, then again): the first of each wins, whichever task reads it.
    (lines / "big.jsonl").write_text("".join(json.dumps({"url": f"u{index % 70}", "body": text}) + "\n"
                                             for index, text in enumerate(texts)))
    table = tmp_path / "table"
    table.mkdir()
    quoted = ['"' + text.replace('"', '""') + '"' for text in texts]  # newlines, quotes and commas inside
    (table / "big.csv").write_text("n,text\n" + "".join(f"u{index % 70},{text}\n" for index, text in enumerate(quoted)))
    planned: list[int] = []
    original = dask_sign.plan_tasks

    def counted(*arguments: object, **options: object) -> list[list[object]]:
        tasks = original(*arguments, **options)  # type: ignore[arg-type]
        planned.append(len(tasks))
        return tasks  # type: ignore[return-value]

    monkeypatch.setattr(dask_sign, "plan_tasks", counted)
    cases = [(lines, "by_id", dict(id_field="url", text_field="body")), (lines, "by_line", dict(text_field="body")),
             (table, "by_id", dict(id_field="n")), (table, "by_line", {}),
             (lines, "over_the_limit", dict(text_field="body", max_document_bytes=600))]  # lines skipped unheld
    for corpus, name, reading in cases:
        folder = tmp_path / f"{corpus.name}-{name}"
        folder.mkdir()
        local, remote = sign_both([str(corpus)], folder, engine, input=dedup.InputOptions(**reading))
        assert planned[-1] > 5, (name, corpus, planned)  # one file, several tasks
        assert sorted(remote.read.duplicate_ids) == sorted(local.read.duplicate_ids)
        stored = read_store(folder / "dask.parquet")
        if name == "by_id":
            assert len(local.read.duplicate_ids) == 80 and len(stored.ids) == 70
        elif name == "by_line":  # FILE:LINE ids numbered in every task as in one reading of the file; a part per task
            assert len(stored.ids) == 150 and not local.read.duplicate_ids
            assert len(open_store(folder / "dask.parquet").manifest.parts) == planned[-1]
        else:
            assert sorted(remote.read.oversized) == sorted(local.read.oversized) and len(local.read.oversized) == 12
    # A second run finds every record unchanged; each task is given the stored entries of its own lines only.
    known: list[int] = []
    entries = dask_sign.known_entries

    def looked_up(*arguments: object) -> dict[str, object]:
        found = entries(*arguments)  # type: ignore[arg-type]
        known.append(0 if found is None else len(found))
        return found  # type: ignore[return-value]

    monkeypatch.setattr(dask_sign, "known_entries", looked_up)
    for corpus, name, reading in cases:
        known.clear()
        _, again = sign_both([str(corpus)], tmp_path / f"{corpus.name}-{name}", engine,
                             input=dedup.InputOptions(**reading))
        assert again.run is not None and (again.run.added, again.run.changed, again.documents) == (0, 0, 0)
        assert len(known) == planned[-1] and sum(known) == len(read_store(tmp_path / f"{corpus.name}-{name}"
                                                                          / "dask.parquet").ids)


def test_a_shard_of_9_mb_is_signed_by_several_tasks_from_the_command_line(engine: EngineOptions,
                                                                          tmp_path: Path) -> None:
    # At the real task sizes (no monkeypatch reaches the subprocess): 9 MB is 32 tasks of at least 4 MB, so 3.
    words = np.random.default_rng(7).integers(0, 20_000, size=(23_000, 60))
    shard = tmp_path / "shard.jsonl"
    shard.write_text("".join(json.dumps({"text": " ".join(f"w{word}" for word in row)}) + "\n" for row in words))
    assert 8 << 20 < shard.stat().st_size < 12 << 20
    signed = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(shard), "-o", str(tmp_path / "dask"),
                             "--engine", "dask", "--scheduler", str(engine.scheduler)],
                            capture_output=True, text=True, timeout=300)
    assert signed.returncode == 0, signed.stderr
    assert len(open_store(tmp_path / "dask").manifest.parts) == 3
    dedup.sign([str(shard)], tmp_path / "local")
    assert_same_rows(tmp_path / "local", tmp_path / "dask")


def test_a_run_of_less_than_32_full_tasks_is_cut_into_smaller_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_sign, "TASK_BYTES", 64 << 20)
    megabyte = 1 << 20
    files = [Source(f"f{n}.txt", f"/c/f{n}.txt", f"f{n}.txt", "text", None, megabyte) for n in range(60)]
    assert len(dask_sign.plan_tasks(files, lambda source: None)) == 15  # 60 MB: 15 tasks of 4 MB, not one
    asked: list[int] = []

    def pieces(source: Source, task_bytes: int) -> list[Source]:
        asked.append(task_bytes)
        return [dataclasses.replace(source, size=task_bytes)] * (source.size // task_bytes)

    shard = Source("a.jsonl", "/c/a.jsonl", "a.jsonl", "jsonl", None, 40 * megabyte)
    assert len(dask_sign.plan_tasks([shard], lambda source: None, pieces=pieces)) == 10
    assert asked == [4 * megabyte]
    big = [dataclasses.replace(shard, size=4096 * megabyte)]
    assert len(dask_sign.plan_tasks(big, lambda source: None, pieces=pieces)) == 64 and asked[-1] == 64 * megabyte


def test_a_compressed_file_holding_most_of_the_input_is_named_as_one_task(engine: EngineOptions,
                                                                            tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:200]]
    with gzip.open(corpus / "big.jsonl.gz", "wt") as stream:
        stream.write("".join(json.dumps({"text": text}) + "\n" for text in texts))
    assert (corpus / "big.jsonl.gz").stat().st_size > 6_000  # tasks of 6 kB (small_tasks): it would be several
    (corpus / "small.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts[:30]))
    share = 100 * (corpus / "big.jsonl.gz").stat().st_size // sum(path.stat().st_size for path in corpus.iterdir())
    command = ["sign", str(corpus), "-o", str(tmp_path / "s"), "--engine", "dask", "--scheduler", str(engine.scheduler)]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"{corpus / 'big.jsonl.gz'} is gzip-compressed and holds {share}% of the input bytes: a compressed file "
        "cannot be cut into tasks, so one Dask worker reads it alone; decompress it (or split it into several "
        "files) to share it out")
    assert CliRunner().invoke(cli, command + ["-q"]).stderr == ""
    # Decompressed, it is cut into tasks: no note.
    with gzip.open(corpus / "big.jsonl.gz", "rb") as stream:
        (corpus / "big.jsonl").write_bytes(stream.read())
    (corpus / "big.jsonl.gz").unlink()
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0 and "cannot be cut" not in result.stderr


def test_an_id_another_file_keeps_is_skipped_in_later_runs_and_a_renamed_file_hands_its_ids_on(
        engine: EngineOptions, tmp_path: Path) -> None:
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:91]]
    first, later = tmp_path / "corpus" / "first", tmp_path / "corpus" / "later"
    first.mkdir(parents=True)
    later.mkdir()
    (first / "a.jsonl").write_text("".join(json.dumps({"url": f"u{index}", "body": texts[index]}) + "\n"
                                           for index in range(60)))
    # ids u30 … u59 again, with other texts
    (later / "b.jsonl").write_text("".join(json.dumps({"url": f"u{index}", "body": texts[index + 1]}) + "\n"
                                           for index in range(30, 90)))
    options = dict(input=dedup.InputOptions(id_field="url", text_field="body", id_root=str(tmp_path / "corpus")))
    sign_both([str(first)], tmp_path, engine, **options)
    local, remote = sign_both([str(later)], tmp_path, engine, **options)
    assert sorted(remote.read.held_elsewhere) == sorted(local.read.held_elsewhere)
    assert len(local.read.held_elsewhere) == 30 and local.run is not None and local.run.changed == 0
    (first / "a.jsonl").rename(first / "renamed.jsonl")
    local, remote = sign_both([str(first)], tmp_path, engine, **options)
    assert local.run is not None and (local.run.added, local.run.changed) == (0, 60)
    assert not local.read.held_elsewhere and not remote.read.held_elsewhere


def test_a_file_read_first_does_not_take_the_ids_of_one_read_later_in_the_same_task(
        engine: EngineOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_sign, "TASK_BYTES", 1 << 20)  # both files in one task
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [path.read_text() for path in sorted((SAMPLES / "devils-dictionary").glob("*.txt"))[:70]]
    (corpus / "b.jsonl").write_text("".join(json.dumps({"url": f"u{index}", "body": texts[index]}) + "\n"
                                            for index in range(60)))
    options = dict(input=dedup.InputOptions(id_field="url", text_field="body"), prune=True)
    sign_both([str(corpus)], tmp_path, engine, **options)
    # a.jsonl, read before b.jsonl, repeats ten of b.jsonl's ids: b.jsonl keeps them, and the prune keeps them.
    (corpus / "a.jsonl").write_text("".join(json.dumps({"url": f"u{index}", "body": texts[index + 60]}) + "\n"
                                            for index in range(10)))
    local, remote = sign_both([str(corpus)], tmp_path, engine, **options)
    assert sorted(remote.read.held_elsewhere) == sorted(local.read.held_elsewhere)
    assert len(local.read.held_elsewhere) == 10 and not local.read.duplicate_ids and not remote.read.duplicate_ids
    assert local.run is not None and (local.run.added, local.run.changed, local.run.removed) == (0, 0, 0)
    assert local.unchanged == remote.unchanged == 60


def test_stdin_cannot_go_to_the_workers(engine: EngineOptions, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sign", "-", "-o", str(tmp_path / "s"), "--engine", "dask", "--scheduler",
                                      str(engine.scheduler)], input="some text")
    assert result.exit_code == 2 and not (tmp_path / "s").exists()
    assert result.stderr == ("Error: - (stdin) cannot be read by Dask workers; save it to a file they can read, or "
                             "sign it with --engine local\n")


def _kill_the_first_task(marker: str) -> None:
    """On a worker: the first sign task to run there after the marker is written kills its own process."""
    from dedup_cli.engine.dask import sign

    original = sign.sign_task

    def killing(task: sign.SignTask) -> sign.TaskResult:
        if not os.path.exists(marker):
            Path(marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return original(task)

    sign.sign_task = killing


def test_a_worker_killed_mid_sign_is_replaced_and_the_run_completes(client: Client, engine: EngineOptions,
                                                                     tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    client.run(_kill_the_first_task, str(marker))
    workers = set(client.scheduler_info()["workers"])
    local, remote = sign_both([str(SAMPLES)], tmp_path, engine, input=READING)
    assert marker.exists() and set(client.scheduler_info()["workers"]) != workers
    assert not [name for name in os.listdir(tmp_path / "dask.parquet") if name.endswith(".tmp")]
    client.run(lambda: setattr(sys.modules["dedup_cli.engine.dask.sign"], "sign_task", dask_sign.sign_task))


_DRIVER = """
import os, signal, sys
import dedup_cli as dedup
from dedup_cli.engine.dask import sign
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store import runs

sign.TASK_BYTES = 6000
def dead(self):  # every task has written its part; the commit never happens
    assert any(name.endswith(".tmp") for name in os.listdir(self.path))
    os.kill(os.getpid(), signal.SIGKILL)
runs.StoreRun.commit = dead
dedup.sign([sys.argv[1]], sys.argv[2], dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",)),
           engine=EngineOptions("dask", scheduler=sys.argv[3])))
"""


def test_a_driver_killed_before_its_commit_leaves_the_store_as_it_was(engine: EngineOptions, tmp_path: Path) -> None:
    store = tmp_path / "store"
    dedup.sign([str(SAMPLES / "licenses")], store,
               dedup.SignOptions(input=dedup.InputOptions(exclude=("SOURCE",), id_root=str(SAMPLES))))
    before = read_store(store)
    killed = subprocess.run([sys.executable, "-c", _DRIVER, str(SAMPLES), str(store), str(engine.scheduler)],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert any(name.endswith(".tmp") for name in os.listdir(store))  # the parts it wrote, listed nowhere
    after = read_store(store)
    assert after.ids == before.ids and np.array_equal(after.packed, before.packed)
    report = dedup.sign([str(SAMPLES)], store, dedup.SignOptions(input=READING, engine=engine))
    assert report.run is not None and report.run.run == 2
    assert not [name for name in os.listdir(store) if name.endswith(".tmp")]  # cleaned up by the next writer
    assert len(read_store(store)) == 1128


def test_documents_shorter_than_a_shingle_are_signed_and_found_as_locally(engine: EngineOptions,
                                                                          tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("a", "b", "c"):
        (corpus / f"{name}.txt").write_text("The quick brown fox")
    (corpus / "long.txt").write_text(" ".join(f"filler{number}" for number in range(3000)) + " the quick brown fox")
    (corpus / "empty.txt").write_text("")
    local, remote = sign_both([str(corpus)], tmp_path, engine)
    assert remote.empty == local.empty == 1
    found = dedup.find(tmp_path / "dask.parquet", dedup.FindOptions(engine=engine, verify="all"))
    assert [list(group.ids) for group in found.groups()] == [["a.txt", "b.txt", "c.txt"]]


def test_a_run_that_did_the_wrong_job_stores_nothing_as_on_the_local_engine(engine: EngineOptions,
                                                                           tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{n}", "text": f"record {n} of a few words"}) + "\n"
                              for n in range(40)))
    store = tmp_path / "s"
    wrong = dedup.SignOptions(engine=engine, input=dedup.InputOptions(id_field="url"))
    with pytest.raises(dedup.InputError, match=r'every record of .*c\.jsonl was skipped: 40 records.*"url"'):
        dedup.sign([str(corpus)], store, wrong)
    assert read_store(store).ids == []
    dedup.sign([str(corpus)], store, dedup.SignOptions(engine=engine, input=dedup.InputOptions(id_field="id")))
    corpus.write_text("")
    with pytest.raises(dedup.InputError, match=r"c\.jsonl is empty \(0 bytes\); nothing was stored; .*allow_empty"):
        dedup.sign([str(corpus)], store, dedup.SignOptions(engine=engine, prune=True,
                                                           input=dedup.InputOptions(id_field="id")))
    with pytest.raises(dedup.InputError, match="would remove 40 of the 40 documents"):
        dedup.sign([str(corpus)], store, dedup.SignOptions(engine=engine, prune=True, allow_empty=True,
                                                           input=dedup.InputOptions(id_field="id")))
    assert len(read_store(store).ids) == 40


def test_checksum_signs_again_a_file_rewritten_with_its_old_size_and_time_as_locally(engine: EngineOptions,
                                                                                    tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "bible-editions" / "KJV", corpus)
    (corpus / "packed.txt.gz").write_bytes(gzip.compress(b"a compressed chapter of a few words", mtime=0))
    sign_both([str(corpus)], tmp_path, engine)
    target = corpus / "jonah-01.txt"
    status = target.stat()
    text = target.read_text()
    target.write_text(text.replace("the", "teh"))  # the same length: cp -p of another text would look alike
    os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert target.stat().st_size == status.st_size
    local, remote = sign_both([str(corpus)], tmp_path, engine)
    assert remote.documents == 0 and remote.unchanged == 9  # unread: the size and the time are the store's
    local, remote = sign_both([str(corpus)], tmp_path, engine, checksum=True)
    assert remote.run is not None and remote.run.changed == 1 and remote.unchanged == 8
    stored = read_store(tmp_path / "dask.parquet")
    assert stored.mtimes_ns is not None
    assert stored.mtimes_ns[stored.ids.index("jonah-01.txt")] == status.st_mtime_ns
    local, remote = sign_both([str(corpus)], tmp_path, engine, checksum=True)
    assert remote.documents == 0 and remote.unchanged == 9


def test_json_arrays_are_signed_as_records_as_locally(engine: EngineOptions, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = [path.read_text() for path in sorted((SAMPLES / "bible-editions" / "KJV").glob("*.txt"))]
    (corpus / "a.json").write_text(json.dumps([{"id": f"k{n}", "text": text} for n, text in enumerate(texts)],
                                              indent=1))
    (corpus / "b.json.gz").write_bytes(gzip.compress(json.dumps([{"text": texts[0]}, 7]).encode(), mtime=0))
    (corpus / "c.json").write_text(json.dumps({"text": "one object: a text document"}))
    local, remote = sign_both([str(corpus)], tmp_path, engine)
    assert read_store(tmp_path / "dask.parquet").ids == ["a.json:1", "a.json:2", "a.json:3", "a.json:4", "a.json:5",
                                                         "a.json:6", "a.json:7", "a.json:8", "b.json.gz:1", "c.json"]
    assert remote.read.malformed == local.read.malformed == [(f"{corpus / 'b.json.gz'} element 2",
                                                              "expected a JSON object, found a number")]
    local, remote = sign_both([str(corpus)], tmp_path, engine)  # read again: every record unchanged
    assert remote.documents == 0 and remote.unchanged == 10
