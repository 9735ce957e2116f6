"""A long-lived store of whole files on the Dask engine: files renamed, changed or deleted since they were signed,
and copies or second names of one file, in a store signed twice (the second run signing one file whose name sorts
last, so that the last range of documents holds one document). ``find`` and ``filter`` on the cluster write the
local engine's bytes, with the decisions and the end of find gathered into the driver or run on the workers
(``--gather-limit 0``), whatever the exact checks (``--verify``), ``--ways`` and ``--group``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
from click.testing import CliRunner
from distributed import Client
from same_answers import assert_same_answers

import dedup_cli as dedup
from dedup_cli.cli.main import cli
from dedup_cli.engine.dask.joins import attach_ranges
from dedup_cli.options.engine_choice import EngineOptions

WORDS = 120
TOPICS = 4
GATHERED, ON_WORKERS = (), ("--gather-limit", "0")
OPTIONS = [("-t", "0.8"), ("-t", "0.8", "--verify", "all"), ("--ways", "3", "--verify", "all", "--output", "triples"),
           ("--group", "strict", "-t", "0.6")]


def text(topic: int, changed: int = 0) -> str:
    """Texts of one topic share all but ``changed`` of their words (its last ones): near-duplicates of each other
    whose resemblance straddles the thresholds above; topics share nothing."""
    words = [f"t{topic}w{i}" for i in range(WORDS)]
    for place in range(changed):
        words[WORDS - 1 - 4 * place] = f"t{topic}c{changed}x{place}"
    return " ".join(words)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"DEDUP_STORE": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def _without_time(text: str) -> str:
    return re.sub(r"\d+\.\d+ s", "T s", text)


def _signed(corpus: Path, store: Path) -> None:
    code, _, stderr = run("sign", str(corpus), "-o", str(store), "-q")
    assert code == 0, stderr


def _store(tmp_path: Path, case: str) -> tuple[Path, Path]:
    """A corpus and its store signed twice, with ``case`` done to it (see the module docstring)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for topic in range(TOPICS):
        for changed in (0, 3, 8):
            (corpus / f"t{topic}-{changed}.txt").write_text(text(topic, changed))
    store = tmp_path / "dedup.parquet"
    _signed(corpus, store)
    if case == "renamed":  # without --prune: the old name stays in the store, gone
        os.rename(corpus / "t0-3.txt", corpus / "zz-renamed.txt")
    elif case == "deleted":
        (corpus / "t0-3.txt").unlink()
    elif case == "copy":
        (corpus / "zz-copy.txt").write_text(text(0, 3))
    elif case == "alias":  # one file under two names
        os.link(corpus / "t0-3.txt", corpus / "zz-alias.txt")
    if case in ("changed", "deleted"):
        (corpus / "zz-new.txt").write_text(text(0, 5))
    _signed(corpus, store)
    if case == "changed":  # after its last signing
        (corpus / "t0-3.txt").write_text(text(0, 12))
    return corpus, store


def _find_everywhere(store: Path, engine: EngineOptions, *options: str) -> None:
    """find with ``options`` writes the same bytes and says the same on each engine and end."""
    on_cluster = ("--engine", "dask", "--scheduler", str(engine.scheduler))
    outputs = [o for o in (("--output", "pairs"), ("--output", "members")) if "--output" not in options]
    for output in outputs or [()]:
        local = run("find", str(store), "--format", "tsv", *options, *output)
        assert local[0] == 0, local[2]
        for end in (GATHERED, ON_WORKERS):
            remote = run("find", str(store), "--format", "tsv", *options, *output, *on_cluster, *end)
            assert (remote[0], remote[1]) == (local[0], local[1]), (options, output, end, remote[2])
            assert _without_time(remote[2]) == _without_time(local[2]), (options, output, end)


def _filtered(corpus: Path, store: Path, out: Path, *options: str) -> tuple[int, dict[str, bytes], str]:
    code, _, stderr = run("filter", str(corpus), "-s", str(store), "-o", str(out), "-t", "0.8", *options)
    tree = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    return code, tree, _without_time(stderr).replace(str(out), "OUT")


CASES = ["renamed", "changed", "deleted", "copy", "alias"]
# Each command-line option set starts three finds, two on the cluster: the renamed file (the case first reported)
# runs them all, and the other cases one each in turn, so that every case meets every end through the API and every
# option set meets the command line, within the suite's time.
OPTIONS_BY_CASE = {case: OPTIONS if case == "renamed" else [OPTIONS[index % len(OPTIONS)]]
                   for index, case in enumerate(CASES)}


@pytest.mark.parametrize("case", CASES)
def test_find_on_the_cluster_writes_the_local_bytes(engine: EngineOptions, tmp_path: Path, case: str) -> None:
    _, store = _store(tmp_path, case)
    local = dedup.find(store, dedup.FindOptions(threshold=0.8, verify="all"))
    assert local.accepted.first.size and bool(local.gone) == (case in ("renamed", "changed", "deleted"))
    for limit in ({}, {"gather_limit": 0}):
        remote = dedup.find(store, dedup.FindOptions(threshold=0.8, verify="all", engine=engine, **limit))
        assert_same_answers(local, remote)
    for options in OPTIONS_BY_CASE[case]:
        _find_everywhere(store, engine, *options)


@pytest.mark.parametrize("case", CASES)
def test_filter_on_the_cluster_writes_the_local_bytes(engine: EngineOptions, tmp_path: Path, case: str) -> None:
    corpus, store = _store(tmp_path, case)
    local = _filtered(corpus, store, tmp_path / "local")
    assert local[0] == 0 and local[1], local[2]
    assert len(local[1]) < len(list(corpus.iterdir()))
    for end in (GATHERED, ON_WORKERS):
        out = tmp_path / f"dask{len(end)}"
        assert _filtered(corpus, store, out, "--engine", "dask", "--scheduler", str(engine.scheduler),
                         *end) == local


def test_a_real_process_finds_a_renamed_file_on_the_workers(engine: EngineOptions, tmp_path: Path) -> None:
    """The command as the user runs it: the renamed file's old name gone, its pairs decided on the workers."""
    _, store = _store(tmp_path, "renamed")
    command = [sys.executable, "-m", "dedup_cli", "find", str(store), "--output", "members", "--format", "tsv",
               "-q"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("DEDUP_STORE", None)
    local = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    remote = subprocess.run([*command, "--engine", "dask", "--scheduler", str(engine.scheduler), "--gather-limit",
                             "0"], capture_output=True, text=True, env=env, check=False)
    assert (remote.returncode, remote.stdout, remote.stderr) == (0, local.stdout, local.stderr)
    assert "e.g. t0-3.txt" in local.stderr
    assert "t0-3.txt\t1\tgone\t" in local.stdout


@pytest.mark.parametrize("divisions", [(0, 9, 9), (0, 5, 9, 9)])
def test_a_join_keeps_the_ranges_of_the_documents(client: Client, divisions: tuple[int, ...]) -> None:
    """The last range may hold one document (its division repeated): the pairs joined to the documents keep one
    part per range, part i the pairs whose document lies in range i, so that tables cut by these ranges meet
    part by part."""
    ends = [*divisions[1:-1], 10]  # the last range holds its last division
    ranges = [dask.delayed({"doc": np.arange(low, high), "id": np.array([f"d{i}" for i in range(low, high)])})
              for low, high in zip(divisions[:-1], ends, strict=True)]
    pairs = [dask.delayed({"first": np.arange(10, dtype=np.int64)[::-1][half], "second": np.arange(10)[half]})
             for half in (slice(0, 5), slice(5, 10))]
    parts = dask.compute(*attach_ranges(pairs, "first", ranges, divisions, "a_", ("id",)))
    assert len(parts) == len(divisions) - 1
    assert [sorted(part["first"].tolist()) for part in parts] == [list(range(low, high))
                                                                 for low, high in zip(divisions[:-1], ends,
                                                                                      strict=True)]
    assert all(part["a_id"].tolist() == [f"d{i}" for i in part["first"]] for part in parts)
