"""The directory store (format 2): runs that add, change and remove documents, the writer lock, crash safety,
compaction, the format 1 file still read, damaged stores, and selecting the rows of later runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from helpers import REPO, StoreWriter, compact, lookup, read_store_params, unchanged
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_cli.errors import StoreError, UsageError
from dedup_cli.params import SignatureParams
from dedup_cli.store import compaction, lock, parts
from dedup_cli.store.format import FORMAT_VERSION, LOCK_NAME, MANIFEST_NAME, DocumentBatch
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.store.store import create_store, open_store, read_store

PARAMS = SignatureParams(num_perm=8, bits=8)  # 8 bytes a signature

# The content of run k of the crash test, shared with the child process that runs it (see _CHILD).
_RUN_CONTENT = '''
import numpy as np
import numpy.random  # now, not at the first run: a Ctrl-C that lands in a first import can be swallowed

def run_content(k):
    """Ids written by run k (with a signature that depends on k) and ids it removes."""
    written = sorted({f"doc-{(7 * k + 3 * j) % 40:03d}" for j in range(6)})
    removed = sorted({f"doc-{(11 * k + 5 * j) % 40:03d}" for j in range(3)})
    return written, removed

def signature(k, identifier):
    return np.random.default_rng([k, int(identifier[4:])]).integers(0, 256, 8, dtype=np.uint8)
'''
_namespace: dict = {}
exec(_RUN_CONTENT, _namespace)
run_content = _namespace["run_content"]
signature = _namespace["signature"]


def batch_of(ids: list[str], run: int) -> DocumentBatch:
    """Documents ``ids`` as signed in run ``run``: every column depends on both."""
    count = len(ids)
    numbers = np.array([int(identifier.rsplit("-", 1)[1]) for identifier in ids], dtype=np.int64)
    return DocumentBatch(
        ids=list(ids),
        paths=[f"/corpus/{identifier}.txt" for identifier in ids],
        sizes=numbers * 10 + run,
        mtimes_ns=numbers * 1000 + run,
        content_hashes=(numbers * 7919 + run).astype(np.uint64),
        shingle_counts=numbers + run,
        signatures=np.array([signature(run, identifier) for identifier in ids], dtype=np.uint8).reshape(count, 8),
    )


def expected_rows(model: dict[str, int]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """ids in order, their packed signatures and runs, for a model {id: run that last wrote it}."""
    ids = sorted(model)
    packed = np.array([signature(model[i], i) for i in ids], dtype=np.uint8).reshape(len(ids), 8)
    return ids, packed, np.array([model[i] for i in ids], dtype=np.int64)


def assert_store_is(stored: StoredSignatures, model: dict[str, int]) -> None:
    ids, packed, runs = expected_rows(model)
    assert stored.ids == ids
    assert np.array_equal(stored.packed, packed)
    assert stored.runs is not None and np.array_equal(stored.runs, runs)
    assert stored.paths == [f"/corpus/{i}.txt" for i in ids]
    numbers = np.array([int(i[4:]) for i in ids], dtype=np.int64)
    assert np.array_equal(stored.shingle_counts, numbers + runs)


def do_run(path: Path, written: list[str], removed: list[str] = (), params: SignatureParams = PARAMS):
    store = open_store(path)
    with store.begin_run(params) as run:
        if written:
            run.write(batch_of(written, run.number))
        run.remove(removed)
    return run.record


def apply(model: dict[str, int], run: int, written: list[str], removed: list[str]) -> dict[str, int]:
    after = {i: r for i, r in model.items() if i not in set(removed) - set(written)}
    after.update({i: run for i in written})
    return after


def files_of(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def listed_files(path: Path) -> set[str]:
    manifest = json.loads((path / MANIFEST_NAME).read_text())
    return {p["file"] for p in manifest["parts"]} | {r["file"] for r in manifest["removals"]}


def assert_no_garbage(path: Path) -> None:
    assert set(files_of(path)) == listed_files(path) | {MANIFEST_NAME, LOCK_NAME}


def ids(prefix_numbers: range | list[int]) -> list[str]:
    return [f"doc-{n:03d}" for n in prefix_numbers]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "sigs.parquet"
    create_store(path, PARAMS)
    return path


# --- runs: create, append, change, remove ---------------------------------------------------------------------


def test_new_store_is_an_empty_directory_store(store_path: Path) -> None:
    store = open_store(store_path)
    assert store.format_version == FORMAT_VERSION == 2 and store.params == PARAMS
    assert store.runs == () and store.last_run == 0 and store.documents == 0
    stored = read_store(store_path)
    assert len(stored) == 0 and stored.packed.shape == (0, 8) and stored.runs.shape == (0,)
    assert len(store.document_index()) == 0
    assert read_store_params(store_path) == PARAMS
    assert files_of(store_path) == [LOCK_NAME, MANIFEST_NAME]


def test_runs_append_change_and_remove(store_path: Path) -> None:
    first = do_run(store_path, ids([5, 1, 3, 2, 4]))  # any order in, id order out
    assert (first.run, first.added, first.changed, first.removed, first.documents) == (1, 5, 0, 0, 5)
    second = do_run(store_path, ids([6, 7]) + ids([3]), removed=ids([1, 2, 99]))  # 99 was never stored
    assert (second.run, second.added, second.changed, second.removed, second.documents) == (2, 2, 1, 2, 5)
    stored = read_store(store_path)
    assert_store_is(stored, {"doc-003": 2, "doc-004": 1, "doc-005": 1, "doc-006": 2, "doc-007": 2})
    store = open_store(store_path)
    assert [r.run for r in store.runs] == [1, 2] and store.last_run == 2 and store.documents == 5
    assert all(r.time.endswith("Z") and r.time[:4].isdigit() for r in store.runs)
    assert_no_garbage(store_path)


def test_newest_version_of_an_id_wins(store_path: Path) -> None:
    do_run(store_path, ids([1, 2]))
    do_run(store_path, ids([1]))  # changed in run 2
    do_run(store_path, ids([1]))  # and again in run 3
    assert_store_is(read_store(store_path), {"doc-001": 3, "doc-002": 1})
    do_run(store_path, [], removed=ids([1]))  # removed in run 4
    assert_store_is(read_store(store_path), {"doc-002": 1})
    do_run(store_path, ids([1]))  # back in run 5: newer than its removal
    assert_store_is(read_store(store_path), {"doc-001": 5, "doc-002": 1})
    record = do_run(store_path, ids([2]), removed=ids([2]))  # removed and written in one run: the write wins
    assert (record.changed, record.removed) == (1, 0)
    assert_store_is(read_store(store_path), {"doc-001": 5, "doc-002": 6})


def test_an_empty_run_is_recorded_and_changes_nothing(store_path: Path) -> None:
    do_run(store_path, ids([1, 2]))
    before = read_store(store_path)
    record = do_run(store_path, [])
    assert (record.run, record.added, record.changed, record.removed, record.documents) == (2, 0, 0, 0, 2)
    assert_store_is(read_store(store_path), {"doc-001": 1, "doc-002": 1})
    assert read_store(store_path).ids == before.ids


def test_a_run_writing_an_id_twice_is_refused_and_changes_nothing(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    store = open_store(store_path)
    with pytest.raises(ValueError, match="doc-002"):
        with store.begin_run(PARAMS) as run:
            run.write(batch_of(ids([2, 3]), run.number))
            run.write(batch_of(ids([2]), run.number))
    assert_store_is(read_store(store_path), {"doc-001": 1})
    assert_no_garbage(store_path)


def test_document_index_for_the_incremental_comparison(store_path: Path) -> None:
    do_run(store_path, ids([3, 1, 2]))
    do_run(store_path, ids([2]), removed=ids([3]))
    index = open_store(store_path).document_index()
    assert index.ids == ids([1, 2]) and index.paths == ["/corpus/doc-001.txt", "/corpus/doc-002.txt"]
    assert index.sizes.tolist() == [11, 22] and index.mtimes_ns.tolist() == [1001, 2002]
    assert index.content_hashes.dtype == np.uint64 and index.content_hashes.tolist() == [7920, 7919 * 2 + 2]
    assert index.runs.tolist() == [1, 2]
    assert lookup(index, ids([2, 9, 1, 3])).tolist() == [1, -1, 0, -1]
    assert lookup(index, []).tolist() == []
    assert unchanged(
        index,
        ids([1, 2, 2, 2, 9]),
        ["/corpus/doc-001.txt", "/corpus/doc-002.txt", "/moved/doc-002.txt", "/corpus/doc-002.txt", "/corpus/x"],
        np.array([11, 22, 22, 22, 0]), np.array([1001, 2002, 2002, 2003, 0]),
    ).tolist() == [True, True, False, False, False]
    assert index.absent(ids([2, 7])).tolist() == [True, False]
    assert index.ids_at(index.absent(ids([2]))) == ids([1])
    assert index.ids_at(np.array([1, 0])) == ids([2, 1])


def test_run_document_index_is_read_under_the_lock(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    stale = open_store(store_path)  # opened before another run commits
    do_run(store_path, ids([2]))
    with stale.begin_run(PARAMS) as run:
        assert run.number == 3
        assert run.document_index().ids == ids([1, 2])
    assert stale.last_run == 3


def test_params_mismatch_names_the_parameter_and_changes_nothing(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    before = {name: (store_path / name).read_bytes() for name in files_of(store_path)}
    other = SignatureParams(num_perm=16, bits=8, seed=3)
    with pytest.raises(UsageError) as caught:
        open_store(store_path).begin_run(other)
    message = str(caught.value)
    assert "num_perm: 8 vs 16" in message and "seed: 1 vs 3" in message and "bits" not in message.split("(")[1]
    assert str(store_path) in message and "\n" not in message
    assert {name: (store_path / name).read_bytes() for name in files_of(store_path)} == before
    do_run(store_path, ids([2]))  # the lock was released


def test_a_replacing_run_swaps_every_row(store_path: Path) -> None:
    do_run(store_path, ids([1, 2, 3]))
    do_run(store_path, ids([4]), removed=ids([1]))
    store = open_store(store_path)
    with pytest.raises(UsageError, match="num_perm: 8 vs 16"):
        store.begin_run(SignatureParams(num_perm=16, bits=4), replace=True)  # parameters are for life
    with store.begin_run(PARAMS, replace=True) as run:
        run.write(batch_of(ids([2, 9]), run.number))
    assert (run.record.added, run.record.changed, run.record.removed, run.record.replaced) == (1, 1, 2, True)
    stored = read_store(store_path)
    assert stored.ids == ids([2, 9]) and stored.runs.tolist() == [3, 3]
    assert_no_garbage(store_path)
    assert len(listed_files(store_path)) == 1


def test_a_dataset_reader_sees_exactly_the_parts(store_path: Path) -> None:
    """The layout a distributed engine reads: part files, the same schema, underscore files ignored."""
    do_run(store_path, ids(range(10)))
    do_run(store_path, ids([3, 4]), removed=ids([5]))
    dataset = pads.dataset(store_path, format="parquet")
    assert sorted(Path(f).name for f in dataset.files) == ["part-000001.parquet", "part-000002.parquet"]
    table = dataset.to_table()
    assert table.num_rows == 12 and "run" in table.column_names  # rows, not documents: the live rule applies
    assert table.schema.field("signature").type.byte_width == PARAMS.signature_bytes


# --- the writer lock -------------------------------------------------------------------------------------------

_HOLDER = """
import sys
from dedup_cli.params import SignatureParams
from dedup_cli.store.store import open_store
with open_store(sys.argv[1]).begin_run(SignatureParams(num_perm=8, bits=8)) as run:
    print("locked", flush=True)
    sys.stdin.readline()
"""


def _child(code: str, *args: str) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment)


def test_a_second_writer_fails_at_once_naming_the_first(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = _child(_HOLDER, str(store_path))
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()

        def waits(seconds: float) -> None:
            raise AssertionError("the second writer waited for the lock instead of failing at once")

        monkeypatch.setattr(lock.time, "sleep", waits)
        with pytest.raises(StoreError) as caught:
            open_store(store_path).begin_run(PARAMS)
        monkeypatch.undo()
        assert str(caught.value) == (
            f"store {store_path} is being written by another dedup run (pid {holder.pid}); try again later"
        )
        with pytest.raises(StoreError, match=r"after waiting 0\.2 s; try again later"):
            open_store(store_path).begin_run(PARAMS, lock_timeout=0.2)
        # create_store on the same path does not write either: the store exists.
        assert create_store(store_path, PARAMS, exist_ok=True).last_run == 0
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
        holder.wait()
    assert do_run(store_path, ids([1])).run == 2  # the holder's empty run committed as run 1


def test_a_waiting_writer_proceeds_when_the_first_finishes(store_path: Path) -> None:
    holder = _child(_HOLDER, str(store_path))
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()

        released = threading.Event()

        def release() -> None:
            released.set()
            holder.stdin.write("\n")
            holder.stdin.flush()

        threading.Timer(0.3, release).start()  # while this process waits for the lock
        with open_store(store_path).begin_run(PARAMS, lock_timeout=30) as run:
            held_until_released = released.is_set()  # the lock came only after the holder was told to go
            run.write(batch_of(ids([1]), run.number))
    finally:
        holder.kill()
        holder.wait()
    assert held_until_released and run.number == 2 and read_store(store_path).ids == ids([1])


def test_a_killed_writer_releases_the_lock(store_path: Path) -> None:
    holder = _child(_HOLDER, str(store_path))
    assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert do_run(store_path, ids([1])).run == 1  # the killed run never committed
    assert_no_garbage(store_path)


# --- crash safety ------------------------------------------------------------------------------------------------


class Crash(Exception):
    """A simulated crash at one file-system step of a commit."""


def _crash_at(monkeypatch: pytest.MonkeyPatch, step: int) -> list[str]:
    """Make the ``step``-th os.replace or os.fsync of the store raise Crash; returns the steps seen."""
    seen: list[str] = []
    real_replace, real_fsync = os.replace, os.fsync

    def counted(name, real):
        def call(*args):
            seen.append(name if name == "fsync" else f"replace {Path(args[1]).name}")
            if len(seen) - 1 == step:
                raise Crash(seen[-1])
            return real(*args)
        return call

    monkeypatch.setattr(os, "replace", counted("replace", real_replace))
    monkeypatch.setattr(os, "fsync", counted("fsync", real_fsync))
    return seen


def test_a_crash_before_the_manifest_replace_leaves_the_store_as_before(store_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    do_run(store_path, ids([1, 2, 3]))
    real_replace = os.replace

    def failing_replace(source, destination):
        if Path(destination).name == MANIFEST_NAME:
            raise OSError("simulated crash before the commit point")
        return real_replace(source, destination)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        do_run(store_path, ids([4, 2]), removed=ids([1]))
    monkeypatch.undo()
    # The run's part and removal file were renamed into place, but the manifest does not list them.
    garbage = set(files_of(store_path)) - listed_files(store_path) - {MANIFEST_NAME, LOCK_NAME}
    assert garbage == {"part-000002.parquet", "_removed-000003.parquet"}
    assert_store_is(read_store(store_path), {"doc-001": 1, "doc-002": 1, "doc-003": 1})
    assert open_store(store_path).last_run == 1
    # The next run cleans the garbage and completes the work.
    do_run(store_path, ids([4, 2]), removed=ids([1]))
    assert_no_garbage(store_path)
    assert_store_is(read_store(store_path), {"doc-002": 2, "doc-003": 1, "doc-004": 2})


@pytest.mark.parametrize("compacting", [False, True], ids=["append", "compact"])
def test_a_crash_at_every_step_of_a_commit_leaves_before_or_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  compacting: bool) -> None:
    if compacting:
        monkeypatch.setattr(compaction, "MAX_DELTA_FILES", 1)  # the parts of one run count once
    monkeypatch.setattr(parts, "PART_ROWS", 2)  # several parts a run
    history = [([1, 2, 3], []), ([4, 5], [1])]
    last = ([2, 6, 7], [3, 5])
    before: dict[str, int] = {}
    for run, (written, removed) in enumerate(history, start=1):
        before = apply(before, run, ids(written), ids(removed))
    after = apply(before, 3, ids(last[0]), ids(last[1]))
    outcomes = []
    step = 0
    real_replace, real_fsync = os.replace, os.fsync  # keep the originals to restore
    while True:
        path = tmp_path / f"store-{step}"
        create_store(path, PARAMS)
        for written, removed in history:
            do_run(path, ids(written), ids(removed))
        _crash_at(monkeypatch, step)
        try:
            do_run(path, ids(last[0]), ids(last[1]))
            crashed = None
        except Crash as crash:
            crashed = str(crash)
        monkeypatch.setattr(os, "replace", real_replace)
        monkeypatch.setattr(os, "fsync", real_fsync)
        state = read_store(path)
        expected = after if open_store(path).last_run == 3 else before
        assert_store_is(state, expected)
        outcomes.append((crashed, "after" if expected is after else "before"))
        do_run(path, [])  # the next run cleans up
        assert_no_garbage(path)
        if crashed is None:
            break
        step += 1
    # Every step before the manifest replace leaves the store as before; the replace and later ones, as after.
    commit = next(i for i, (where, _) in enumerate(outcomes) if where == f"replace {MANIFEST_NAME}")
    assert all(state == "before" for _, state in outcomes[:commit + 1])
    assert all(state == "after" for _, state in outcomes[commit + 1:])
    assert len(outcomes) > 6 and (not compacting or open_store(path).runs[2].compacted)


def test_an_exception_inside_the_run_discards_it(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    store = open_store(store_path)
    with pytest.raises(KeyboardInterrupt):
        with store.begin_run(PARAMS) as run:
            run.write(batch_of(ids([2, 3]), run.number))
            run.remove(ids([1]))
            assert any(name.endswith(".tmp") for name in files_of(store_path))
            raise KeyboardInterrupt
    assert_no_garbage(store_path)
    assert_store_is(read_store(store_path), {"doc-001": 1})
    assert do_run(store_path, ids([2])).run == 2  # the lock was released


_CHILD = _RUN_CONTENT + '''
import signal
import sys

# Ctrl-C is a KeyboardInterrupt even when this process inherited SIGINT ignored (a background job).
signal.signal(signal.SIGINT, signal.default_int_handler)
from dedup_cli.params import SignatureParams
from dedup_cli.store import compaction, parts
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import open_store

compaction.MAX_DELTA_FILES = 3  # compactions happen too
parts.PART_ROWS = 4  # and runs write several parts
path = sys.argv[1]
print("ready", flush=True)
while True:
    with open_store(path).begin_run(SignatureParams(num_perm=8, bits=8), lock_timeout=10) as run:
        k = run.number
        if k > int(sys.argv[2]):
            run.abort()
            break
        written, removed = run_content(k)
        numbers = np.array([int(i[4:]) for i in written], dtype=np.int64)
        run.write(DocumentBatch(
            ids=written, paths=[f"/corpus/{i}.txt" for i in written], sizes=numbers * 10 + k,
            mtimes_ns=numbers * 1000 + k, content_hashes=(numbers * 7919 + k).astype(np.uint64),
            shingle_counts=numbers + k, signatures=np.array([signature(k, i) for i in written], dtype=np.uint8),
        ))
        run.remove(removed)
'''


@pytest.mark.slow
def test_real_processes_killed_at_random_moments_leave_before_or_after(store_path: Path) -> None:
    """SIGKILL, SIGTERM and SIGINT at random moments of a loop of runs; each state read is a committed one."""
    # The killed children stop at run 399 and the final one runs four more: an idle machine can finish all 399
    # before the kills, so the model goes as far as the final runs can.
    models = [{}]
    for k in range(1, 404):
        models.append(apply(models[-1], k, *run_content(k)))
    rng = np.random.default_rng(2024)
    signals = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT]
    seen_runs, garbage_seen = set(), 0
    for attempt in range(15):
        child = _child(_CHILD, str(store_path), "399")
        try:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
            time.sleep(float(rng.uniform(0.0, 0.25)))
            child.send_signal(signals[attempt % 3])
            child.wait(timeout=30)
        finally:
            child.kill()
            child.wait()
        store = open_store(store_path)
        last = store.last_run
        seen_runs.add(last)
        assert_store_is(read_store(store_path), models[last])
        assert len(store.document_index()) == len(models[last]) == store.documents
        garbage_seen += bool(set(files_of(store_path)) - listed_files(store_path) - {MANIFEST_NAME, LOCK_NAME})
    # Runs to the end clean what the killed ones left; four of them compact at least once whatever the kills left
    # (under load every kill may land before the first commit, and run 1 removes nothing, so two runs may not).
    final = _child(_CHILD, str(store_path), str(open_store(store_path).last_run + 4))
    assert final.wait(timeout=60) == 0, final.stderr.read()
    final.stdout.close(), final.stderr.close(), final.stdin.close()
    assert_no_garbage(store_path)
    store = open_store(store_path)
    last = store.last_run
    assert_store_is(read_store(store_path), models[last])
    compactions = sum(record.compacted for record in store.runs)
    assert compactions > 0  # a run counts once for its parts, once for its removal file: compactions every 2–3 runs
    print(f"\n[crash] 15 kills, {len(seen_runs)} distinct committed states, {garbage_seen} left garbage, "
          f"{compactions} compactions, last run {last}")


def test_a_reader_with_an_old_snapshot_follows_a_compaction(store_path: Path) -> None:
    do_run(store_path, ids([1, 2]))
    do_run(store_path, ids([3]), removed=ids([1]))
    reader = open_store(store_path)  # its snapshot lists parts that the compaction deletes
    assert compact(store_path) is True
    assert not (store_path / "part-000001.parquet").exists()
    assert_store_is(reader.read(), {"doc-002": 1, "doc-003": 2})
    assert reader.document_index().ids == ids([2, 3])


def test_the_single_file_writer_refuses_a_directory_store(store_path: Path) -> None:
    with pytest.raises(StoreError, match="it is a directory store"):
        with StoreWriter(store_path, PARAMS):
            pass
    assert open_store(store_path).last_run == 0


# --- compaction ----------------------------------------------------------------------------------------------


def test_compaction_keeps_every_document_id_and_run(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "MAX_DELTA_FILES", 1000)  # only explicit compaction here
    monkeypatch.setattr(compaction, "ROW_GROUP_ROWS", 3)
    monkeypatch.setattr(parts, "PART_ROWS", 10)
    model: dict[str, int] = {}
    for k in range(1, 9):
        written, removed = run_content(k)
        do_run(store_path, written, removed)
        model = apply(model, k, written, removed)
    before = read_store(store_path)
    assert_store_is(before, model)
    parts_before = len(json.loads((store_path / MANIFEST_NAME).read_text())["parts"])
    assert compact(store_path) is True
    after = read_store(store_path)
    assert after.ids == before.ids and np.array_equal(after.packed, before.packed)
    assert np.array_equal(after.runs, before.runs) and np.array_equal(after.content_hashes, before.content_hashes)
    manifest = json.loads((store_path / MANIFEST_NAME).read_text())
    assert manifest["removals"] == [] and all(part["compacted"] for part in manifest["parts"])
    assert sum(part["rows"] for part in manifest["parts"]) == len(model) == manifest["documents"]
    assert len(manifest["parts"]) == -(-len(model) // 10) < parts_before  # parts of at most PART_ROWS rows
    assert [r["run"] for r in manifest["runs"]] == list(range(1, 9))  # compaction is not a run
    assert_no_garbage(store_path)
    assert compact(store_path) is False  # nothing left to do


def test_a_commit_compacts_when_too_many_parts(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "MAX_DELTA_FILES", 4)
    for k in range(1, 5):
        assert not do_run(store_path, ids([k])).compacted
    record = do_run(store_path, ids([5]))
    assert record.compacted and record.run == 5
    manifest = json.loads((store_path / MANIFEST_NAME).read_text())
    assert len(manifest["parts"]) == 1 and manifest["parts"][0]["compacted"]
    assert read_store(store_path).runs.tolist() == [1, 2, 3, 4, 5]
    assert_no_garbage(store_path)


def test_a_commit_compacts_when_most_rows_are_dead(store_path: Path) -> None:
    do_run(store_path, ids(range(10)))
    assert not do_run(store_path, [], removed=ids(range(5))).compacted  # 5 of 10 rows dead: not more than half
    record = do_run(store_path, [], removed=ids([5]))
    assert record.compacted and record.documents == 4
    manifest = json.loads((store_path / MANIFEST_NAME).read_text())
    assert manifest["removals"] == [] and [p["rows"] for p in manifest["parts"]] == [4]
    assert read_store(store_path).ids == ids(range(6, 10))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sets(st.integers(0, 12), max_size=6), st.sets(st.integers(0, 12), max_size=4)),
                min_size=1, max_size=8),
       st.integers(1, 4), st.integers(1, 5))
def test_any_sequence_of_runs_reads_like_a_dictionary(runs: list[tuple[set[int], set[int]]], max_delta: int,
                                                      part_rows: int) -> None:
    saved = compaction.MAX_DELTA_FILES, parts.PART_ROWS
    compaction.MAX_DELTA_FILES, parts.PART_ROWS = max_delta, part_rows
    try:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "store"
            create_store(path, PARAMS)
            model: dict[str, int] = {}
            for k, (written, removed) in enumerate(runs, start=1):
                record = do_run(path, ids(sorted(written)), ids(sorted(removed)))
                model = apply(model, k, ids(sorted(written)), ids(sorted(removed)))
                assert record.documents == len(model) == open_store(path).documents
                assert_store_is(read_store(path), model)
                since = k // 2
                newer = read_store(path, since_run=since)
                assert newer.ids == sorted(i for i, r in model.items() if r > since)
            assert_no_garbage(path)
    finally:
        compaction.MAX_DELTA_FILES, parts.PART_ROWS = saved


# --- selecting the rows of later runs ------------------------------------------------------------------------


def test_read_store_since_run(store_path: Path) -> None:
    do_run(store_path, ids([1, 2, 3]))
    do_run(store_path, ids([4, 2]))
    do_run(store_path, ids([5]), removed=ids([4]))
    assert read_store(store_path, since_run=0).ids == ids([1, 2, 3, 5])
    newer = read_store(store_path, since_run=1)
    assert newer.ids == ids([2, 5]) and newer.runs.tolist() == [2, 3] and newer.packed.shape == (2, 8)
    assert read_store(store_path, since_run=2).ids == ids([5])
    assert read_store(store_path, since_run=3).ids == []
    whole = read_store(store_path)
    assert whole.runs.tolist() == [1, 2, 1, 3]
    assert [whole.ids[i] for i in np.flatnonzero(whole.runs > 1)] == newer.ids  # what find --new-since 1 selects
    for bad in (4, -1):
        with pytest.raises(UsageError) as caught:
            read_store(store_path, since_run=bad)
        assert f"run {bad} is not in {store_path}: its runs are 1 to 3" in str(caught.value)


# --- format 1 files and damaged stores -----------------------------------------------------------------------


def test_single_file_store_is_still_read_but_not_signed_into(tmp_path: Path) -> None:
    path = tmp_path / "old.parquet"
    with StoreWriter(path, PARAMS) as writer:
        writer.write(batch_of(ids([1, 2]), 0))
    store = open_store(path)
    assert store.format_version == 1 and store.documents == 2 and store.runs == ()
    stored = read_store(path)
    assert stored.ids == ids([1, 2]) and stored.runs.tolist() == [0, 0]
    assert np.array_equal(stored.packed, batch_of(ids([1, 2]), 0).signatures)
    assert lookup(store.document_index(), ids([2])).tolist() == [1]
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        create_store(path, PARAMS, exist_ok=True).begin_run(PARAMS)
    assert str(caught.value) == (
        f"{path} is a single-file store (format 1) from an older dedup and cannot be signed into incrementally; "
        f"sign into a new store (dedup sign INPUT -o NEW) or remove {path} and sign again"
    )
    with pytest.raises(StoreError, match="single-file store"):
        compact(path)
    assert path.read_bytes() == before and files_of(tmp_path) == ["old.parquet"]


def _one_line_error(action, path: Path) -> str:
    with pytest.raises(StoreError) as caught:
        action()
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    return message


@pytest.mark.parametrize("reader", [read_store, read_store_params, open_store])
def test_foreign_directory(tmp_path: Path, reader) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    message = _one_line_error(lambda: reader(tmp_path), tmp_path)
    assert message == (
        f"store {tmp_path} is a directory without a dedup manifest ({MANIFEST_NAME}); if it holds documents, sign "
        f"them into a store first (dedup sign {tmp_path} -o {tmp_path}-sigs.parquet) and name that store"
    )
    message = _one_line_error(lambda: create_store(tmp_path, PARAMS), tmp_path)
    assert "refusing to overwrite" in message and "notes.txt" in message
    assert files_of(tmp_path) == ["notes.txt"]  # nothing was added


def test_refusing_to_overwrite_a_foreign_file(tmp_path: Path) -> None:
    precious = tmp_path / "precious.parquet"
    precious.write_bytes(b"not mine")
    message = _one_line_error(lambda: create_store(precious, PARAMS, exist_ok=True), precious)
    assert message.startswith(f"refusing to overwrite {precious}: ") and "not a readable Parquet file" in message
    assert precious.read_bytes() == b"not mine"


def test_creating_twice_and_in_a_missing_directory(store_path: Path, tmp_path: Path) -> None:
    assert "already exists" in _one_line_error(lambda: create_store(store_path, PARAMS), store_path)
    missing = tmp_path / "no" / "sigs.parquet"
    assert "cannot write" in _one_line_error(lambda: create_store(missing, PARAMS), missing)
    assert not (tmp_path / "no").exists()


def test_an_interrupted_creation_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / "sigs.parquet"
    path.mkdir()
    (path / LOCK_NAME).write_text("")
    (path / ".part-000001.parquet.tmp").write_bytes(b"half")
    create_store(path, PARAMS)
    assert files_of(path) == [LOCK_NAME, MANIFEST_NAME]


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_truncated_manifest(store_path: Path, reader) -> None:
    do_run(store_path, ids([1]))
    manifest = store_path / MANIFEST_NAME
    manifest.write_bytes(manifest.read_bytes()[:50])
    message = _one_line_error(lambda: reader(store_path), store_path)
    assert "damaged manifest" in message and "sign the corpus again into a new store" in message


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.pop("parts"),
        lambda m: m.update(parts=[{"file": "../../etc/passwd", "rows": 1, "compacted": False}]),
        lambda m: m.update(format_version=1),
        lambda m: m["params"].update(num_perm=0),
        lambda m: m["runs"][0].update(extra=1),
    ],
    ids=["no-parts", "path-outside", "format-1-manifest", "bad-params", "unknown-run-field"],
)
def test_damaged_manifest(store_path: Path, change) -> None:
    do_run(store_path, ids([1]))
    manifest = json.loads((store_path / MANIFEST_NAME).read_text())
    change(manifest)
    (store_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert "damaged manifest" in _one_line_error(lambda: read_store(store_path), store_path)


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_newer_manifest_version_asks_to_upgrade(store_path: Path, reader) -> None:
    manifest = json.loads((store_path / MANIFEST_NAME).read_text())
    manifest["format_version"] = 3
    (store_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    message = _one_line_error(lambda: reader(store_path), store_path)
    assert "uses store format 3, newer than this dedup" in message and "upgrade dedup" in message


def test_missing_or_damaged_part(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    do_run(store_path, ids([2]))
    part = store_path / "part-000002.parquet"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    message = _one_line_error(lambda: read_store(store_path), store_path)
    assert "is damaged (part-000002.parquet:" in message
    part.unlink()
    message = _one_line_error(lambda: read_store(store_path), store_path)
    assert "part-000002.parquet is listed in its manifest but missing" in message
    assert read_store_params(store_path) == PARAMS  # the manifest alone is intact


def test_a_part_passed_as_the_store(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    part = store_path / "part-000001.parquet"
    assert _one_line_error(lambda: read_store(part), part) == (
        f"{part} is one part of a directory store; pass the directory {store_path}"
    )


def test_part_files_describe_themselves(store_path: Path) -> None:
    do_run(store_path, ids([1]))
    header = json.loads(pq.read_schema(store_path / "part-000001.parquet").metadata[b"dedup"])
    assert header["format_version"] == 2 and header["params"] == PARAMS.to_dict()


# --- speed -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_document_index_of_a_hundred_thousand_documents_is_fast(tmp_path: Path) -> None:
    """Reports (does not assert) the time to read the index and the whole store, 10^5 rows over 3 runs."""
    params = SignatureParams(num_perm=256, bits=8)
    path = tmp_path / "big.parquet"
    store = create_store(path, params)
    rng = np.random.default_rng(0)
    count = 100_000
    for k, rows in enumerate((range(0, count), range(0, count, 10), range(count, count + 1000)), start=1):
        numbers = np.array(rows, dtype=np.int64)
        with store.begin_run(params) as run:
            for start in range(0, numbers.size, 4096):
                chunk = numbers[start : start + 4096]
                run.write(DocumentBatch(
                    ids=[f"corpus/dir{n % 97:02d}/doc-{n:07d}.txt" for n in chunk.tolist()],
                    paths=[f"/data/corpus/dir{n % 97:02d}/doc-{n:07d}.txt" for n in chunk.tolist()],
                    sizes=chunk, mtimes_ns=chunk + k, content_hashes=chunk.astype(np.uint64),
                    shingle_counts=chunk, signatures=rng.integers(0, 256, (chunk.size, 256), dtype=np.uint8),
                ))
    started = time.perf_counter()
    index = open_store(path).document_index()
    index_seconds = time.perf_counter() - started
    started = time.perf_counter()
    rows = lookup(index, [f"corpus/dir{n % 97:02d}/doc-{n:07d}.txt" for n in range(count)])
    lookup_seconds = time.perf_counter() - started
    started = time.perf_counter()
    stored = read_store(path)
    read_seconds = time.perf_counter() - started
    assert len(index) == len(stored) == count + 1000 and (rows >= 0).all()
    assert int((index.runs == 2).sum()) == count // 10
    print(f"\n[speed] {len(index)} documents in 3 parts: document_index {index_seconds:.3f} s, "
          f"lookup of {count} ids {lookup_seconds:.3f} s, read_store {read_seconds:.3f} s")
