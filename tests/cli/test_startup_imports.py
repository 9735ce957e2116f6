"""Each command imports what it uses: a fresh process that runs one command on a small store does not import the
modules only other commands (or other inputs) need. Start-up is paid by every call of a cron job or a pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import COMMANDS, cli

# What no command below needs: eval's modules, filter's writers, S3's date parsing, the other engine's stages.
NEVER = ["dedup_cli.evaluation", "dedup_cli.inputs.truth", "dedup_cli.corpus.sources", "dedup_cli.engine.dask",
         "email.utils", "pandas"]
# A store's writing side, which the commands that only read it do without.
WRITING = ["dedup_cli.store.runs", "dedup_cli.store.leases", "dedup_cli.store.lock", "dedup_cli.store.compaction"]

UNUSED = {
    # find on a one-document store: no compute function runs, the output is JSON Lines, nothing is signed
    "find": NEVER + WRITING + ["pyarrow.compute", "csv", "dedup_cli.engine.local.sign",
                               "dedup_cli.engine.stages.sign", "dedup_cli.kernel.choice"],
    # info reads the shingle counts only
    "info": NEVER + WRITING + ["pyarrow.compute", "dedup_cli.engine.local.find", "dedup_cli.engine.local.sign",
                               "dedup_cli.kernel.choice"],
    # estimate reads two documents' signatures; nothing is re-read without --exact
    "estimate": NEVER + WRITING + ["dedup_cli.verification", "dedup_cli.engine.local.find",
                                   "dedup_cli.engine.local.sign", "dedup_cli.kernel.choice"],
    # sign does not find
    "sign": NEVER + ["dedup_cli.engine.local.find", "dedup_cli.engine.stages.find", "dedup_cli.engine.stages.results"],
}


def imported_after(arguments: list[str], watched: list[str]) -> list[str]:
    """The modules of ``watched`` (or a submodule of one) that a fresh process has imported after running the
    command line with ``arguments``."""
    script = ("import sys\n"
              "from dedup_cli.cli.main import cli\n"
              f"cli({arguments!r}, standalone_mode=False)\n"
              f"watched = {watched!r}\n"
              "print(json.dumps(sorted(name for name in sys.modules\n"
              "                        if any(name == w or name.startswith(w + '.') for w in watched))))\n")
    result = subprocess.run([sys.executable, "-c", "import json\n" + script], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("startup")
    (folder / "one.jsonl").write_text('{"id": "a", "text": "hello world this is a test"}\n'
                                      '{"id": "b", "text": "hello world this is a toast"}\n')
    store = folder / "store"
    result = CliRunner().invoke(cli, ["sign", str(folder / "one.jsonl"), "--id-field", "id", "-o", str(store), "-q"])
    assert result.exit_code == 0, result.output
    return store


@pytest.fixture(scope="module")
def one_document_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("startup-one")
    (folder / "one.jsonl").write_text('{"id": "a", "text": "hello world this is a test"}\n')
    store = folder / "store"
    result = CliRunner().invoke(cli, ["sign", str(folder / "one.jsonl"), "--id-field", "id", "-o", str(store), "-q"])
    assert result.exit_code == 0, result.output
    return store


def test_the_library_find_that_reads_candidates_never_imports_pandas(small_store: Path) -> None:
    # The library's find, without the command line's hiding of pandas: numbering the documents, banding, reading
    # the candidates' documents and exact checks in this process read Arrow's buffers directly, where to_numpy and
    # pa.array of a numpy array would import pandas (a fifth of a second) to recognise its objects.
    script = ("import sys\n"
              "import dedup_cli as dedup\n"
              f"result = dedup.find({str(small_store)!r}, dedup.FindOptions(threshold=0.1, jobs=1, verify='all'))\n"
              "print(result.pair_count, result.verification.checked, 'pandas' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "1", "False"]  # the pair was found, scored and re-read


def test_find_on_one_document_imports_only_what_it_uses(one_document_store: Path, tmp_path: Path) -> None:
    arguments = ["find", str(one_document_store), "-t", "0.55", "-b", "2", "-q", "-o", str(tmp_path / "out")]
    assert imported_after(arguments, UNUSED["find"]) == []
    assert (tmp_path / "out").exists()


def test_info_imports_only_what_it_uses(one_document_store: Path, tmp_path: Path) -> None:
    arguments = ["info", str(one_document_store), "-o", str(tmp_path / "info.json")]
    assert imported_after(arguments, UNUSED["info"]) == []
    assert json.loads((tmp_path / "info.json").read_text())["documents"] == 1


def test_estimate_imports_only_what_it_uses(small_store: Path, tmp_path: Path) -> None:
    arguments = ["estimate", str(small_store), "a", "b", "-o", str(tmp_path / "estimate.txt")]
    assert imported_after(arguments, UNUSED["estimate"]) == []
    assert "estimate" in (tmp_path / "estimate.txt").read_text()


def test_sign_imports_only_what_it_uses(tmp_path: Path) -> None:
    (tmp_path / "one.jsonl").write_text('{"id": "a", "text": "hello world this is a test"}\n')
    arguments = ["sign", str(tmp_path / "one.jsonl"), "--id-field", "id", "-q", "-o", str(tmp_path / "store")]
    assert imported_after(arguments, UNUSED["sign"]) == []
    assert (tmp_path / "store").is_dir()


def test_the_watch_sees_an_import(one_document_store: Path, tmp_path: Path) -> None:
    """The check above can fail: a module the command does import is reported."""
    arguments = ["find", str(one_document_store), "-t", "0.55", "-b", "2", "-q", "-o", str(tmp_path / "out")]
    assert imported_after(arguments, ["dedup_cli.engine.stages.find", "pyarrow.parquet"]) == [
        "dedup_cli.engine.stages.find", "pyarrow.parquet", "pyarrow.parquet.core"]


def test_the_commands_are_imported_when_looked_up() -> None:
    """Listing the commands imports none of them; looking one up imports that one only."""
    script = ("import sys\n"
              "from dedup_cli.cli.main import cli\n"
              "print(','.join(cli.list_commands(None)))\n"
              "commands = {'dedup_cli.cli.' + name for name in cli.list_commands(None)}\n"
              "print(sorted(name for name in sys.modules if name in commands))\n"
              "cli.commands['info']\n"
              "print(sorted(name for name in sys.modules if name in commands))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    names, before, after = result.stdout.strip().splitlines()
    assert names == "estimate,eval,filter,find,info,plan,review,sign"
    assert before == "[]"
    assert after == "['dedup_cli.cli.info']"


def test_every_command_is_found_under_its_name() -> None:
    assert len(cli.commands) == len(COMMANDS) == 8
    for name in COMMANDS:
        assert cli.commands[name].name == name
    assert cli.commands.get("fnd") is None
    with pytest.raises(KeyError):
        cli.commands["fnd"]


def threads_after_numpy(preset: str | None) -> tuple[int, str]:
    """The threads of a fresh process that imported the command line and then numpy, and the OpenBLAS setting
    it ran with (``preset``: the user's value, None for none)."""
    environment = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        environment["OPENBLAS_NUM_THREADS"] = preset
    script = ("import os\nimport dedup_cli.cli.main\nimport numpy\n"
              "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**environment, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    threads, setting = result.stdout.split()
    return int(threads), setting


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads through /proc")
def test_the_command_line_loads_numpy_without_a_thread_per_core() -> None:
    # OpenBLAS would start one per core, each spinning a while for matrix work dedup never gives it.
    assert threads_after_numpy(None) == (1, "1")
    assert threads_after_numpy("2")[1] == "2"  # the user's own setting is kept
