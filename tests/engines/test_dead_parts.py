"""A store whose parts hold no live row: every document of an earlier run replaced by a later run, or removed by
``sign --prune``, until a compaction drops them (a commit compacts only when more than half the rows are dead).
Every command reads such a store as it reads the same store compacted, with either engine and any number of jobs.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dedup_cli.cli.main import cli
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.store.format import MANIFEST_NAME
from dedup_cli.store.snapshot import read_snapshot
from dedup_cli.store.store import open_store

WORDS = [f"w{n}" for n in range(500)]


def _text(topic: int, edit: str = "") -> str:
    words = random.Random(topic).choices(WORDS, k=60)
    return " ".join(words + [edit] if edit else words)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        result.exception  # a traceback
    return result.exit_code, result.stdout, result.stderr


def _sign(corpus: Path, store: Path, *options: str) -> None:
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "-q", *options)
    assert code == 0, stderr


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``dead``: run 1 signs four documents (two pairs of near-duplicates), run 2 replaces every one of them and
    adds six, run 3 adds two more and run 4 prunes those two and one of run 2's: parts 1 and 3 hold no live row.
    ``compacted``: a copy of it, compacted. ``other``: a store of the same shape over other texts, whose first part
    is dead too, for ``--against``."""
    folder = tmp_path_factory.mktemp("dead-parts")
    corpus, other = folder / "corpus", folder / "other-corpus"
    corpus.mkdir()
    other.mkdir()
    for name, topic in (("a", 1), ("b", 1), ("c", 2), ("d", 2)):
        (corpus / f"{name}.txt").write_text(_text(topic, name))
        (other / f"{name}.txt").write_text(_text(topic + 10, name))
    _sign(corpus, folder / "dead")
    _sign(other, folder / "other")
    for name, topic in (("a", 1), ("b", 1), ("c", 2), ("d", 2), ("e", 3), ("f", 3), ("g", 4), ("h", 5), ("i", 6),
                        ("j", 2)):
        (corpus / f"{name}.txt").write_text(_text(topic, name + " again"))
        (other / f"{name}.txt").write_text(_text(topic + 10, name + " again"))
    _sign(corpus, folder / "dead")
    _sign(other, folder / "other")
    for name in ("k", "l"):
        (corpus / f"{name}.txt").write_text(_text(7, name))
    _sign(corpus, folder / "dead")
    for name in ("k", "l", "i"):
        (corpus / f"{name}.txt").unlink()
    _sign(corpus, folder / "dead", "--prune")
    shutil.copytree(folder / "dead", folder / "compacted")
    assert open_store(folder / "compacted").compact()
    return {"corpus": corpus, "dead": folder / "dead", "compacted": folder / "compacted", "other": folder / "other"}


def test_the_store_has_parts_without_a_live_row(stores: dict[str, Path]) -> None:
    manifest = json.loads((stores["dead"] / MANIFEST_NAME).read_text())
    assert not any(run["compacted"] for run in manifest["runs"]) and manifest["removals"]
    store = open_store(stores["dead"])
    assert store.manifest is not None
    table, keep = read_snapshot(store.path, store.manifest, ["id"])
    first_rows = [0]
    for part in store.manifest.parts:
        first_rows.append(first_rows[-1] + part.rows)
    live_parts = {next(p for p in range(len(first_rows) - 1) if first_rows[p] <= row < first_rows[p + 1])
                  for row in keep.tolist()}
    assert live_parts == {1} and len(store.manifest.parts) == 3  # parts 1 and 3 hold no live row
    assert store.documents == 9


FINDS = [[], ["--ways", "3"], ["--new-since", "1"], ["--new-since", "3"], ["-b", "1/2"], ["--verify", "all"],
         ["--output", "members"]]


@pytest.mark.parametrize("options", FINDS, ids=lambda options: " ".join(options) or "default")
def test_find_reads_it_as_the_compacted_store(stores: dict[str, Path], engine: EngineOptions,
                                              options: list[str]) -> None:
    common = ["-t", "0.5", "-q", *options]
    code, expected, stderr = run("find", str(stores["compacted"]), *common)
    assert code == 0 and (expected.count("\n") >= 2 or options == ["--new-since", "3"]), stderr
    for jobs in ("1", "2"):
        assert run("find", str(stores["dead"]), *common, "-j", jobs) == (0, expected, "")
    if "1/2" not in options:  # b = 1/2 is the local engine's alone
        code, stdout, stderr = run("find", str(stores["dead"]), *common, "--engine", "dask", "--scheduler",
                                   str(engine.scheduler))
        assert (code, stdout) == (0, expected), stderr


def test_find_against_a_store_with_dead_parts(stores: dict[str, Path], engine: EngineOptions) -> None:
    for store, reference in ((stores["dead"], stores["other"]), (stores["other"], stores["dead"])):
        common = ["-t", "0.2", "-q", "--output", "pairs", "--against", str(reference)]
        code, expected, stderr = run("find", str(store), *common)
        assert code == 0, stderr
        assert run("find", str(store), *common, "-j", "2") == (0, expected, "")
        code, stdout, stderr = run("find", str(store), *common, "--engine", "dask", "--scheduler",
                                   str(engine.scheduler))
        assert (code, stdout) == (0, expected), stderr


def test_filter_writes_what_the_compacted_store_gives(stores: dict[str, Path], engine: EngineOptions,
                                                      tmp_path: Path) -> None:
    def kept(store: str, *options: str) -> dict[str, str]:
        out = tmp_path / f"{store}-{len(list(tmp_path.iterdir()))}"
        code, _, stderr = run("filter", str(stores["corpus"]), "-s", str(stores[store]), "-o", str(out), "-q",
                              "-t", "0.5", *options)
        assert code == 0, stderr
        return {path.name: path.read_text() for path in out.glob("*.txt")}

    expected = kept("compacted")
    assert len(expected) == 5  # a, c, e, g, h of the 9 live documents: b, d, f, j dropped as near-duplicates
    assert kept("dead", "-j", "1") == expected
    assert kept("dead", "-j", "2") == expected
    assert kept("dead", "--engine", "dask", "--scheduler", str(engine.scheduler)) == expected


def test_eval_estimate_and_info(stores: dict[str, Path]) -> None:
    for command in (["eval", "--sample", "50", "--seed", "3"], ["estimate", "-s", "{store}", "a.txt", "b.txt"],
                    ["info"]):
        outputs = []
        for store in ("dead", "compacted"):
            args = [part.replace("{store}", str(stores[store])) for part in command]
            code, stdout, stderr = run(*args, *([] if "-s" in args else [str(stores[store])]))
            assert code == 0, stderr
            outputs.append(stdout)
        if command[0] != "info":  # info shows the parts, which compaction changes
            assert outputs[0] == outputs[1]
    code, _, stderr = run("eval", str(stores["dead"]), "-j", "2", "--sample", "50")
    assert code == 0, stderr


def test_a_real_process_finds_in_it(stores: dict[str, Path]) -> None:
    command = [sys.executable, "-m", "dedup_cli", "find", "-t", "0.5", "-q", "--output", "pairs"]
    expected = subprocess.run([*command, str(stores["compacted"])], capture_output=True, text=True, timeout=300)
    got = subprocess.run([*command, str(stores["dead"])], capture_output=True, text=True, timeout=300)
    assert (got.returncode, got.stdout, got.stderr) == (0, expected.stdout, "")
    assert expected.stdout.count("\n") >= 2
