"""Cron jobs and pipelines: incremental stores, --new-since, locks, kills, stdin, exit codes, formats."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import REPO

import dedup_cli as dedup
from dedup_cli.cli.main import EXIT_DUPLICATES, cli
from dedup_cli.engine.stages import sign as sign_stage
from dedup_cli.inputs import task_planning
from dedup_cli.store.store import open_store, read_store

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def run(*args: str, env: dict[str, str] | None = None, stdin: str | bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def words(prefix: str, count: int = 120) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def snapshot(store: Path) -> dict[str, tuple[int, bytes]]:
    """What a reader sees: id → estimate-free fingerprint (shingle count and first signature byte)."""
    loaded = read_store(store)
    return {i: (int(c), bytes(p[:8])) for i, c, p in zip(loaded.ids, loaded.shingle_counts, loaded.packed,
                                                         strict=True)}


def test_second_run_signs_only_new_and_changed_documents_and_prune_removes(tmp_path: Path) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "sigs.parquet"
    corpus.mkdir()
    for name in "abcd":
        (corpus / f"{name}.txt").write_text(words(name))
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and "(4 new, 0 changed, 0 unchanged, 0 moved, 0 removed" in stderr and "run 1" in stderr

    (corpus / "e.txt").write_text(words("e"))  # new
    (corpus / "b.txt").write_text(words("b") + " edited")  # changed
    os.utime(corpus / "c.txt", ns=(1, 1))  # touched: same bytes, new mtime
    (corpus / "d.txt").unlink()  # gone
    code, _, stderr = run("sign", str(corpus), "-o", str(store))
    assert code == 0 and "(1 new, 1 changed, 2 unchanged, 0 moved, 0 removed" in stderr and "run 2" in stderr
    assert sorted(read_store(store).ids) == ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]

    code, _, stderr = run("sign", str(corpus), "-o", str(store), "--prune")
    assert code == 0 and "(0 new, 0 changed, 4 unchanged, 0 moved, 1 removed" in stderr
    assert read_store(store).ids == ["a.txt", "b.txt", "c.txt", "e.txt"]
    info = json.loads(run("info", str(store))[1])
    assert [r["run"] for r in info["runs"]] == [1, 2, 3] and info["last_run"] == 3 and info["documents"] == 4


def test_new_since_reports_only_what_came_in(tmp_path: Path) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "sigs.parquet"
    corpus.mkdir()
    (corpus / "old1.txt").write_text(words("x"))
    (corpus / "old2.txt").write_text(words("x") + " tail")  # an old duplicate pair
    (corpus / "other.txt").write_text(words("y"))
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    (corpus / "new.txt").write_text(words("y") + " copy")  # today's duplicate of an old document
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0

    _, stdout, _ = run("find", str(store), "--new-since", "1", "--output", "pairs", "-q")
    assert [(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())] == [("new.txt", "other.txt")]
    _, stdout, _ = run("find", str(store), "--output", "pairs", "-q")
    assert len(stdout.splitlines()) == 2
    code, _, stderr = run("find", str(store), "--new-since", "7")
    assert code == 2 and "run 7 is not in" in stderr


def test_a_second_writer_fails_clearly_while_the_first_holds_the_lock(tmp_path: Path, small_corpus: Path) -> None:
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    before = snapshot(store)
    opened = open_store(store)
    with opened.begin_run(opened.params):  # a run with the store's own parameters, as sign's would be
        code, _, stderr = run("sign", str(small_corpus), "-o", str(store))
        assert code == 1 and "is being written by another dedup run" in stderr and "try again later" in stderr
    assert snapshot(store) == before


@pytest.mark.parametrize("signal_number", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killed_sign_leaves_the_store_before_or_after_and_a_rerun_completes(tmp_path: Path,
                                                                            signal_number: int) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "sigs.parquet"
    corpus.mkdir()
    for index in range(2000):
        (corpus / f"doc{index:04d}.txt").write_text(words(f"d{index}w", 400))
    # One kernel throughout (the compiled one, once the background compiler has cached it, signs this corpus
    # several times faster), and the signals sent at fractions of a whole run timed here, on this machine: fixed
    # delays let a run finish before the first of them where the kernel was cached.
    options = ["-q", "--jobs", "1", "-k", "1024", "--scheme", "kperm", "--kernel", "numpy"]
    assert run("sign", str(corpus / "doc0000.txt"), "-o", str(store), *options)[0] == 0
    before = snapshot(store)
    started = time.monotonic()
    timed = [sys.executable, "-m", "dedup_cli", "sign", str(corpus), "-o", str(tmp_path / "timed.parquet"), *options]
    assert subprocess.run(timed, env=ENV, check=False, timeout=120).returncode == 0
    whole = time.monotonic() - started
    command = [sys.executable, "-m", "dedup_cli", "sign", str(corpus), "-o", str(store), *options]
    interrupted = 0
    for fraction in (0.3, 0.5, 0.7, 0.85):
        child = subprocess.Popen(command, env=ENV, stderr=subprocess.DEVNULL,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(whole * fraction)
        child.send_signal(signal_number)
        interrupted += child.wait(timeout=60) != 0
        state = snapshot(store)
        if len(state) == 2000:  # the run finished before the signal: nothing more to test
            break
        assert state == before, "a killed run must leave the store as it was"
    assert interrupted, "no kill landed while signing; the corpus is too small for this machine"
    # A re-run completes the work, and leaves no temporary files behind.
    assert subprocess.run(command, env=ENV, check=False).returncode == 0
    assert sorted(read_store(store).ids) == [f"doc{index:04d}.txt" for index in range(2000)]
    assert not [p for p in store.iterdir() if ".tmp" in p.name]


def test_jsonl_from_stdin(tmp_path: Path) -> None:
    store = tmp_path / "sigs.parquet"
    lines = [json.dumps({"url": f"u{i}", "body": words("z" if i < 2 else f"q{i}")}) for i in range(4)]
    lines.insert(2, "{broken")
    feed = subprocess.run(
        [sys.executable, "-m", "dedup_cli", "sign", "-", "--input-format", "jsonl", "--id-field", "url",
         "--text-field", "body", "-o", str(store)],
        input="\n".join(lines) + "\n", capture_output=True, text=True, env=ENV, check=False)
    assert feed.returncode == 0, feed.stderr
    assert "<stdin>:3: invalid JSON" in feed.stderr
    assert "signed 4 documents" in feed.stderr and "1 input skipped" in feed.stderr
    _, stdout, _ = run("find", str(store), "--output", "pairs", "-q")
    assert [(r["id_a"], r["id_b"]) for r in map(json.loads, stdout.splitlines())] == [("u0", "u1")]


def test_delete_all_but_the_kept_member_of_each_group(tmp_path: Path) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "sigs.parquet"
    corpus.mkdir()
    (corpus / "keep me.txt").write_text(words("k") + " the longest version of all")
    (corpus / "copy 1.txt").write_text(words("k"))
    (corpus / "copy 2.txt").write_text(words("k") + " longer")
    (corpus / "alone.txt").write_text(words("a"))
    assert run("sign", str(corpus), "-o", str(store), "-q")[0] == 0
    recipe = (f"cd {corpus} && {sys.executable} -m dedup_cli find {store} --keep longest --output members "
              "--format tsv -q | awk -F'\\t' '$3==\"drop\"' | cut -f1 | xargs -d '\\n' rm")
    subprocess.run(recipe, shell=True, env=ENV, check=True)
    assert sorted(p.name for p in corpus.iterdir()) == ["alone.txt", "keep me.txt"]


def test_exit_codes_parquet_output_and_environment(tmp_path: Path, small_corpus: Path) -> None:
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q", env={"DEDUP_SIGN_NUM_PERM": "64"})[0] == 0
    assert open_store(store).params.num_perm == 64
    code, _, _ = run("find", str(store), "--fail-on-duplicates", "-q")
    assert code == EXIT_DUPLICATES
    # No document is an exact copy of another: nothing at R0 = 1 once pairs are checked exactly.
    code, _, _ = run("find", str(store), "-t", "1.0", "--verify", "all", "--fail-on-duplicates", "-q")
    assert code == 0
    out = tmp_path / "groups.parquet"
    assert run("find", str(store), "--format", "parquet", "-o", str(out), "-q")[0] == 0
    table = pq.read_table(out)
    assert table.column_names == ["group", "size", "weakest", "representative", "members"]
    assert table.column("members").to_pylist() == [["a.txt", "b.txt", "sub/c.txt"]]


def test_jobs_give_a_byte_identical_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for index in range(120):
        (corpus / f"{index:03d}.txt").write_text(words(f"j{index % 40}w") + f" tail{index}")
    monkeypatch.setattr(task_planning, "TASK_FILES", 16)  # many tasks, so the pool is used
    parts = {}
    for jobs in (1, 2):
        store = tmp_path / f"jobs{jobs}.parquet"
        report = dedup.sign([str(corpus)], store, dedup.SignOptions(num_perm=64, jobs=jobs))
        assert report.documents == 120
        parts[jobs] = {p.name: p.read_bytes() for p in sorted(store.glob("part-*.parquet"))}
    assert parts[1] and parts[1] == parts[2]


def test_full_disk_fails_clearly_and_keeps_the_store(tmp_path: Path, small_corpus: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    before = snapshot(store)
    (small_corpus / "new.txt").write_text(words("n"))

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", no_space)
    code, _, stderr = run("sign", str(small_corpus), "-o", str(store))
    assert code == 1 and "No space left on device" in stderr and "Traceback" not in stderr
    monkeypatch.undo()
    assert snapshot(store) == before
    assert not [p for p in store.iterdir() if ".tmp" in p.name]


def test_store_from_a_newer_version_and_foreign_files(tmp_path: Path, small_corpus: Path) -> None:
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    manifest = store / "_dedup_manifest.json"
    data = json.loads(manifest.read_text())
    data["format_version"] = 99
    manifest.write_text(json.dumps(data))
    code, _, stderr = run("find", str(store))
    assert code == 1 and "upgrade dedup" in stderr and len(stderr.strip().splitlines()) == 1
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(__import__("pyarrow").table({"x": np.arange(3)}), foreign)
    code, _, stderr = run("find", str(foreign))
    assert code == 1 and "not a dedup store" in stderr
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(foreign.read_bytes()[:20])
    code, _, stderr = run("find", str(truncated))
    assert code == 1 and "Traceback" not in stderr


def _worker_dies(*args: object) -> None:
    os._exit(9)  # as if the kernel killed the worker (out of memory)


def test_a_dead_worker_fails_the_run_cleanly(tmp_path: Path, small_corpus: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "sigs.parquet"
    assert run("sign", str(small_corpus), "-o", str(store), "-q")[0] == 0
    before = snapshot(store)
    for index in range(40):
        (small_corpus / f"more{index}.txt").write_text(words(f"m{index}w"))
    monkeypatch.setattr(task_planning, "TASK_FILES", 4)
    monkeypatch.setattr(sign_stage, "sign_columns", _worker_dies)
    code, _, stderr = run("sign", str(small_corpus), "-o", str(store), "--jobs", "2")
    assert code == 1 and "a signing worker process died" in stderr and "Traceback" not in stderr
    assert snapshot(store) == before
