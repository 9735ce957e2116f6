"""Which kernel signs: the compiled one only when a run is large enough to repay loading it, the same store
either way, whatever the number of workers; sign -v says which ran; the options refuse what cannot run."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import REPO

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.local import sign_workers
from dedup_cli.engine.stages import sign as sign_stage
from dedup_cli.engine.stages.sign import sign_records, sign_task
from dedup_cli.inputs import chunks, task_planning
from dedup_cli.inputs.chunks import LineChunk
from dedup_cli.inputs.locations import Source
from dedup_cli.inputs.reading import read_inputs
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.tasks import FilesTask, LinesTask
from dedup_cli.kernel import cache, choice
from dedup_cli.params import SignatureParams

HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="the fast extra (numba) is not installed")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def mixed_corpus(root: Path) -> Path:
    """Whole files, JSON Lines (one with a duplicate id and a malformed line) and Parquet, some not ASCII."""
    corpus = root / "corpus"
    (corpus / "sub").mkdir(parents=True)
    for index in range(60):
        text = " ".join(f"w{index % 7}x{n}" for n in range(index * 3)) + (" Straße ﬁne ÉTÉ" if index % 5 else "")
        (corpus / ("sub" if index % 2 else ".") / f"{index:02d}.txt").write_text(text)
    records = [json.dumps({"id": f"r{i % 45}", "text": f"record {i} " + "alpha beta gamma " * (i % 9) + "ÿ" * (i % 2)})
               for i in range(50)] + ["not json"]
    (corpus / "records.jsonl").write_text("\n".join(records) + "\n")
    # the rows have the id column too: --id-field names the id in every format
    table = pa.table({"id": [f"p{i}" for i in range(40)],
                      "text": [f"row {i} " + "delta epsilon " * (i % 11) for i in range(40)]})
    pq.write_table(table, corpus / "rows.parquet", row_group_size=7)
    return corpus


def parts(store: Path) -> dict[str, bytes]:
    return {part.name: part.read_bytes() for part in sorted(store.glob("part-*.parquet"))}


def contents(store: Path) -> tuple[Any, ...]:
    """What a store holds, read back: its rows in id order (however its parts cut them)."""
    stored = dedup.read_store(store)
    assert stored.content_hashes is not None
    return (tuple(stored.ids), tuple(stored.paths), stored.shingle_counts.tobytes(), stored.packed.tobytes(),
            stored.content_hashes.tobytes())


# --- choosing -----------------------------------------------------------------------------------------------


def _cached(monkeypatch: pytest.MonkeyPatch, cached: bool = True, failure: str | None = None) -> None:
    """As in a fresh process of an install whose compiled kernel is (or is not) in numba's cache."""
    monkeypatch.setattr(choice, "compiled_kernel_installed", lambda: True)
    monkeypatch.setattr(choice, "compiled_kernel_loaded", lambda: False)
    monkeypatch.setattr(cache, "cached", lambda: cached)
    monkeypatch.setattr(cache, "failure", lambda: failure)


def test_auto_takes_the_compiled_kernel_only_when_cached_and_it_repays_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    _cached(monkeypatch)
    params = SignatureParams(num_perm=128)
    per_document = choice.saving_seconds(1, 4096, params)  # a document of 4 KB
    enough = int(choice.LOAD_SECONDS / per_document) + 1  # documents whose saving repays loading on one worker
    assert choice.choose_kernel(100, 100 * 4096, params=params) == ("numpy", choice.SMALL_RUN)
    assert choice.choose_kernel(enough, enough * 4096, params=params) == ("numba", "")
    # Loaded once and shared by two workers, each saving half: twice the documents to repay it.
    assert choice.choose_kernel(enough, enough * 4096, workers=2, params=params) == ("numpy", choice.SMALL_RUN)
    assert choice.choose_kernel(2 * enough, 2 * enough * 4096, workers=2, params=params) == ("numba", "")
    assert choice.choose_kernel(None, None) == ("numpy", choice.SMALL_RUN)  # a stream of unknown size starts small
    assert choice.choose_kernel(10**9, 10**12, "numpy") == ("numpy", choice.REQUESTED)
    assert choice.choose_kernel(0, 0, "numba") == ("numba", "")
    # The saving grows with k, and far more per byte for character shingles and for kperm.
    assert choice.saving_seconds(1, 4096, SignatureParams(num_perm=256)) > per_document
    assert choice.saving_seconds(1, 4096, SignatureParams(num_perm=128, scheme="kperm")) > 2 * per_document
    assert choice.saving_seconds(1, 4096, SignatureParams(num_perm=128, shingle_unit="char")) > 2 * per_document
    monkeypatch.setattr(choice, "compiled_kernel_loaded", lambda: True)
    assert choice.choose_kernel(1, 1000) == ("numba", "")  # already paid for in this process
    _cached(monkeypatch, cached=False)
    assert choice.choose_kernel(10**9, 10**12) == ("numpy", choice.NOT_COMPILED)  # never waits for the compiler
    assert choice.choose_kernel(10**9, 10**12, "numba") == ("numba", "")  # unless asked to
    _cached(monkeypatch, cached=False, failure="it broke")
    assert choice.choose_kernel(10**9, 10**12) == ("numpy", choice.COMPILE_FAILED)
    monkeypatch.setattr(choice, "compiled_kernel_installed", lambda: False)
    assert choice.choose_kernel(10**9, 10**12) == ("numpy", choice.NOT_INSTALLED)


def test_a_run_of_unknown_size_switches_once_it_has_seen_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    _cached(monkeypatch)
    monkeypatch.setattr(choice, "LOAD_SECONDS", choice.saving_seconds(100, 100 * 4096) - 1e-9)
    stream = choice.KernelChoice()
    assert stream.planned == "numpy" and stream.decided is None
    assert [stream.kernel_for(40, 40 * 4096) for _ in range(4)] == ["numpy", "numpy", "numba", "numba"]
    assert stream.used == ["numpy", "numba"] and stream.reason == choice.SMALL_RUN
    ended = choice.KernelChoice()
    ended.see(99, 99 * 4096)
    assert ended.decide() == "numpy" and ended.kernel_for(10**6, 10**9, ahead=True) == "numpy"  # decided once
    assert choice.KernelChoice("numpy").decided == "numpy"
    _cached(monkeypatch, cached=False)
    blocked = choice.KernelChoice()
    blocked.see(10**6, 10**9)
    assert blocked.decided == "numpy" and blocked.kernel_for(1, 1) == "numpy"
    assert blocked.reason == choice.NOT_COMPILED


def test_the_planner_looks_ahead_until_the_kernel_is_settled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tasks of files hold names only: the walk runs ahead until the kernel of the whole run is known. Tasks that
    hold their text (a stream's chunks) are looked at ahead only up to a bound, then the stream may switch."""
    _cached(monkeypatch)
    monkeypatch.setattr(choice, "LOAD_SECONDS", choice.saving_seconds(100, 100 * 4096) - 1e-9)
    files = [FilesTask((f"{n}",), (f"/nowhere/{n}",), 4096) for n in range(250)]
    decided = choice.KernelChoice()
    tasks = iter(files)
    assert len(sign_workers.TaskPlanner(tasks, decided).settle()) == 100 and decided.decided == "numba"
    assert next(tasks) is files[100]  # the rest is planned as it is signed
    short = choice.KernelChoice()
    assert len(sign_workers.TaskPlanner(iter(files[:60]), short).settle()) == 60 and short.decided == "numpy"
    # A line file read in place: its first chunk tells how much of the file is still to come, and the bytes
    # alone (a lower bound of the saving) settle the kernel without planning the rest.
    big = Source("big", "/nowhere/big.jsonl", "big.jsonl", "jsonl", None, 10**10)
    in_place = [LinesTask(big, LineChunk(b"", 1 + n, (), 0, n * 4096, 4096, 1), 0, 4096) for n in range(50)]
    early = choice.KernelChoice()
    assert len(sign_workers.TaskPlanner(iter(in_place), early).settle()) == 1 and early.decided == "numba"
    monkeypatch.setattr(sign_workers, "HELD_AHEAD_BYTES", 10 * 4096)
    source = Source("s", "-", "<stdin>", "lines", None)
    held = [LinesTask(source, LineChunk(b"x" * 4095 + b"\n", 1 + n), 0, 4096) for n in range(50)]
    stream = choice.KernelChoice()
    assert len(sign_workers.TaskPlanner(iter(held), stream).settle()) == 10 and stream.decided is None


def test_a_small_run_never_imports_numba(tmp_path: Path) -> None:
    (tmp_path / "small.txt").write_text("a small document of a few words, signed in a fresh process")
    script = ("import sys, dedup_cli as dedup\n"
              "from dedup_cli.kernel import cache\n"
              "cache.cached = lambda: True  # as where the compiled kernel is in numba's cache\n"
              f"report = dedup.sign([{str(tmp_path / 'small.txt')!r}], {str(tmp_path / 's.parquet')!r})\n"
              "assert report.kernels == ['numpy'] and report.kernel_reason == 'small run', report.kernels\n"
              "assert 'numba' not in sys.modules, 'numba was imported'\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr


def test_the_command_line_signs_and_finds_without_importing_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas, when installed, on its first conversion (0.27 s); the local engine's commands run
    as in the core install, and pandas stays importable afterwards."""
    (tmp_path / "small.txt").write_text("a small document of a few words, signed in a fresh process")
    store = str(tmp_path / "s.parquet")
    script = ("import sys\n"
              "from dedup_cli.cli.main import cli\n"
              f"cli(['sign', {str(tmp_path / 'small.txt')!r}, '-o', {store!r}, '-q'], standalone_mode=False)\n"
              f"cli(['find', {store!r}, '--threshold', '0.5', '--bits', '2', '-q'], standalone_mode=False)\n"
              "print('pandas' in sys.modules)\n"
              "import importlib.util\n"
              "print(importlib.util.find_spec('pandas') is not None)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    imported, installed = result.stdout.split()
    assert imported == "False"
    if installed == "True":  # the test install has it (the dask extra): still importable after the commands
        check = subprocess.run([sys.executable, "-c", script + "import pandas\n"], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
        assert check.returncode == 0, check.stderr


def test_pandas_hidden_hides_pandas_only_within() -> None:
    from dedup_cli.cli.pandas_hidden import pandas_hidden

    finders = list(sys.meta_path)
    with pandas_hidden():
        if "pandas" not in sys.modules:
            with pytest.raises(ModuleNotFoundError):
                importlib.import_module("pandas.nonexistent_submodule_of_the_test")
    assert sys.meta_path == finders


# --- the same store whatever runs ---------------------------------------------------------------------------


@needs_numba
def test_both_kernels_and_any_number_of_workers_write_the_same_store(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = mixed_corpus(tmp_path)
    monkeypatch.setattr(task_planning, "TASK_FILES", 8)  # many tasks of each kind, so the workers share them
    monkeypatch.setattr(chunks, "CHUNK_LINES", 6)
    stores = {}
    for kernel, jobs in [("numpy", 1), ("numpy", 2), ("numba", 1), ("numba", 2)]:
        store = tmp_path / f"{kernel}-{jobs}.parquet"
        options = dedup.SignOptions(num_perm=64, bits=4, jobs=jobs, kernel=kernel,
                                    input=dedup.InputOptions(id_field="id"))
        report = dedup.sign([str(corpus)], store, options)
        assert report.kernels == [kernel] and report.documents == 60 + 45 + 40
        assert report.read.count("duplicate_ids") == 5 and report.read.count("malformed") == 1
        assert len(parts(store)) == 1  # a small run's parts are joined
        stores[kernel, jobs] = contents(store)
    assert len(set(stores.values())) == 1


@needs_numba
def test_sign_says_which_kernel_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = mixed_corpus(tmp_path)
    _cached(monkeypatch)  # as in a fresh process, the compiled kernel in numba's cache
    code, _, stderr = run("sign", str(corpus), "-o", str(tmp_path / "a.parquet"), "-v")
    assert code == 0 and "kernel: numpy (0.0 MB in 150 documents would not repay the 0.36 s of loading the " \
                          "compiled kernel; --kernel numba takes it anyway)" in stderr
    code, _, stderr = run("sign", str(corpus), "-o", str(tmp_path / "b.parquet"), "-v", "--kernel", "numba")
    assert code == 0 and f"kernel: numba {choice.numba_version()} (compiled)" in stderr
    code, _, stderr = run("sign", str(corpus), "-o", str(tmp_path / "c.parquet"), "-v", "--kernel", "numpy")
    assert code == 0 and "kernel: numpy (--kernel numpy)" in stderr
    assert contents(tmp_path / "a.parquet") == contents(tmp_path / "b.parquet") == contents(tmp_path / "c.parquet")
    code, _, stderr = run("sign", str(corpus / "sub"), "-o", str(tmp_path / "d.parquet"), "-q")
    code, _, stderr = run("sign", str(corpus / "sub"), "-o", str(tmp_path / "d.parquet"), "-v")
    assert code == 0 and "kernel: none ran (nothing to sign)" in stderr  # every file unchanged


def test_the_options_refuse_a_kernel_that_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sets = tmp_path / "sets.tsv"
    sets.write_text("a\t1 2 3\n")
    code, _, stderr = run("sign", str(sets), "--input-format", "sets", "-D", "10", "--kernel", "numba")
    assert code == 2 and "--kernel numba signs text; integer sets are signed with numpy" in stderr
    real_find_spec = importlib.util.find_spec

    def without_numba(name: str, *args: Any) -> Any:
        return None if name == "numba" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_numba)
    code, _, stderr = run("sign", str(sets), "--kernel", "numba", "-o", str(tmp_path / "s.parquet"))
    assert code == 2 and "--kernel numba needs numba, which is not installed; install it with pip install " \
                          "'dedup-cli[fast]'" in stderr
    with pytest.raises(dedup.OptionError, match="kernel numba needs numba"):
        dedup.SignOptions(kernel="numba")
    assert dedup.SignOptions().kernel == "auto"


# --- the stage an engine maps over its work ---------------------------------------------------------------


def test_a_task_of_files_signs_as_the_documents_read_here(tmp_path: Path) -> None:
    corpus = mixed_corpus(tmp_path)
    params = SignatureParams(num_perm=32, bits=8)
    files = sorted(str(path) for path in corpus.rglob("*.txt"))
    # What an engine's task does with a list of files (ids as a run gives them: paths relative to its root).
    task = FilesTask(tuple(os.path.relpath(path, corpus) for path in files), tuple(files), 0)
    signed = sign_task(task, params, dedup.InputOptions())
    documents = list(read_inputs(files, dedup.InputOptions(id_root=str(corpus)), ReadReport()))
    expected = sign_records(documents, params)
    assert signed.batch.ids == expected.ids == [document.id for document in documents]
    assert (signed.batch.signatures == expected.signatures).all()
    assert list(signed.wheres) == [document.path for document in documents]
    assert signed.empty.tolist() == [document.is_empty for document in documents] == [True] + [False] * 59
    assert signed.ids == expected.ids and signed.fresh.tolist() == [True] * 60
    assert signed.kernel == "numpy" and signed.report.bytes_read == sum(Path(f).stat().st_size for f in files)


# --- incremental runs sign only what changed -----------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_incremental_run_signs_only_new_and_changed_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              jobs: int) -> None:
    """Records of a line file are re-read on every run (only whole files are skipped by size and time), but
    those whose content is unchanged are not signed again: the worker checks the store's index first."""
    records = tmp_path / "records.jsonl"
    lines = [json.dumps({"id": f"r{n}", "text": f"record number {n} says a few words of its own"}) for n in range(60)]
    records.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.parquet"
    options = dedup.SignOptions(input=dedup.InputOptions(id_field="id"), jobs=jobs)
    dedup.sign([str(records)], store, options)
    monkeypatch.setattr(chunks, "CHUNK_LINES", 8)  # several tasks, so two workers share them
    signed_counts: list[int] = []
    original = sign_stage.sign_columns

    def counting(columns: Any, *args: Any, **kwargs: Any) -> Any:
        signed_counts.append(len(columns))
        return original(columns, *args, **kwargs)

    monkeypatch.setattr(sign_stage, "sign_columns", counting)
    lines[7] = json.dumps({"id": "r7", "text": "record number 7 now says something else entirely"})
    records.write_text("\n".join(lines + [json.dumps({"id": "r60", "text": "a new record"})]) + "\n")
    report = dedup.sign([str(records)], store, options)
    assert report.run is not None and (report.run.added, report.run.changed) == (1, 1)
    assert report.unchanged == 59 and report.documents == 2
    if jobs == 1:  # the forked workers' counts stay in the workers
        assert sum(signed_counts) == 2
    assert dedup.read_store(store).ids == sorted(f"r{n}" for n in range(61))
