"""The command line under a fuzzer: every command with random combinations of its options and hostile values.

Each case runs one command with options drawn from its own Click declaration (so a new option is fuzzed without
touching this file) and values drawn from pools of what users and scripts get wrong: numbers out of range, NaN,
inf, empty strings, 300-character and non-UTF-8 names, missing files, directories where files belong and the
reverse, FIFOs, ``/dev/null``, ``/dev/full``, symbolic-link loops, stores of other formats. Whatever happens, the
command must end with an exit code in {0, 1, 2, 3}, no traceback, a few lines on stderr (one ``Error:`` line when
it fails), and nothing outside the case's temporary directory created, changed or replaced; the special files
inside it stay what they are (a FIFO is never replaced by a file).

``make test`` runs a few hundred cases in process (CliRunner) and a sample through real subprocesses; the
``long_fuzz`` marker runs many more (``pytest -m long_fuzz``; ``DEDUP_FUZZ_EXAMPLES`` sets how many).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import REPO, StoreWriter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_cli.cli.main import cli
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import read_store

EXAMPLES = int(os.environ.get("DEDUP_FUZZ_EXAMPLES", "0")) or None
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OUTSIDE = ("/dev/null", "/dev/full")  # real files outside the case's directory that cases name
NON_UTF8 = os.fsdecode(b"caf\xe9-\xff.txt")
LONG = "n" * 300
HANG_SECONDS = 120  # a case that takes this long is a hang: dump every thread's stack and fail the run

# Options never drawn: they reach outside this machine (a scheduler address) or start a cluster per case.
SKIPPED_OPTIONS = {"engine_name", "scheduler", "help", "version"}

INTS = ["-1", "0", "1", "2", "3", "8", "9", "17", "64", "65", "1000", str(2**31), str(2**63), "nan", "", "x", "1e3",
        "0x10"]
FLOATS = ["nan", "inf", "-inf", "0", "1", "0.5", "0.99", "-0.1", "1.1", "", "1e-300", "x"]
STRINGS = ["", "x", "text", "id", LONG, NON_UTF8, "0", "-", "*", "\t", "a,b"]


@dataclass(frozen=True)
class World:
    """The case's directory: a corpus, stores of every kind, and files that are not what a path expects."""

    root: Path

    @property
    def paths(self) -> list[str]:
        """Paths for any argument, relative to ``root`` (the working directory) or outside it."""
        return ["corpus", "corpus/KJV/jonah-01.txt", "lines.jsonl", "rows.parquet", "store", "legacy.parquet",
                "not-a-store.parquet", "bad-manifest", "empty-dir", "notes.txt", "members.tsv", "truth.tsv",
                "fifo", "loop", "dangling", "missing", "missing/deeper/file", LONG, NON_UTF8, "read-only/out",
                "link-to-notes", "out.jsonl", "out-dir", "-", "", *OUTSIDE]


DRAIN = """
import os, select, sys, time
fifo = sys.argv[1]
while True:
    time.sleep(0.02)
    try:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        while select.select([reader], [], [], 0.05)[0] and os.read(reader, 1 << 16):
            pass
    finally:
        os.close(reader)
    try:
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        os.write(writer, b"in the beginning was the word and the word was with the fifo\\n")
    except OSError:
        pass
    finally:
        os.close(writer)
"""
"""Keeps a FIFO usable by whatever a case does with it: a writer waiting for a reader is read to its end; a reader
waiting for a writer gets a short document and its end; never blocks. A process of its own, so that the workers
a case forks never inherit its end of the FIFO (a reader would then wait for that writer forever)."""


def _batch_of(store: Path) -> DocumentBatch:
    stored = read_store(store)
    count = len(stored.ids)
    return DocumentBatch(stored.ids, stored.paths, np.zeros(count, np.int64), np.zeros(count, np.int64),
                         np.zeros(count, np.uint64), stored.shingle_counts, stored.packed)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The world every case starts from (copied per case, so that no case sees another's writes)."""
    root = tmp_path_factory.mktemp("fuzz-world")
    corpus = root / "corpus"
    for edition in ("KJV", "AKJV", "ASV"):
        (corpus / edition).mkdir(parents=True)
        for chapter in ("jonah-01.txt", "jonah-02.txt"):
            shutil.copy(REPO / "sample_corpora" / "bible-editions" / edition / chapter, corpus / edition / chapter)
    texts = [(corpus / "KJV" / name).read_text() for name in ("jonah-01.txt", "jonah-02.txt")]
    lines = [f'{{"id": "doc-{n}", "text": {text!r}}}'.replace("'", '"') for n, text in enumerate(texts * 2)]
    (root / "lines.jsonl").write_text("\n".join(line.replace("\n", " ") for line in lines) + "\n{broken\n")
    pq.write_table(pa.table({"id": ["r1", "r2"], "text": texts}), root / "rows.parquet")
    result = CliRunner().invoke(cli, ["sign", str(corpus), "-o", str(root / "store"), "-q"])
    assert result.exit_code == 0, result.output
    with StoreWriter(root / "legacy.parquet", read_store(root / "store").params) as writer:
        writer.write(_batch_of(root / "store"))
    pq.write_table(pa.table({"x": [1, 2]}), root / "not-a-store.parquet")
    (root / "bad-manifest").mkdir()
    (root / "bad-manifest" / "manifest.json").write_text("{not json")
    (root / "empty-dir").mkdir()
    (root / "notes.txt").write_text("a plain file\n")
    members = CliRunner().invoke(cli, ["find", str(root / "store"), "--output", "members", "--format", "tsv",
                                       "-o", str(root / "members.tsv"), "-q"])
    assert members.exit_code == 0, members.output
    (root / "truth.tsv").write_text("id_a\tid_b\tresemblance\nKJV/jonah-01.txt\tAKJV/jonah-01.txt\t0.9\n")
    os.symlink("loop", root / "loop")
    os.symlink("nowhere", root / "dangling")
    os.symlink("notes.txt", root / "link-to-notes")
    (root / "read-only").mkdir()
    (root / "list.txt").write_text("corpus/KJV/jonah-01.txt\ncorpus/ASV/jonah-01.txt\n")
    (root.parent / "case").mkdir()
    return root


def _snapshot(path: Path) -> tuple[int, int, int, int]:
    status = os.lstat(path)
    return status.st_ino, status.st_mode, status.st_rdev, status.st_size


@contextmanager
def world_of(template: Path) -> Iterator[World]:
    """A fresh copy of the template, the working directory while the case runs, its FIFO kept unblocked."""
    scratch = template.parent / "case"
    root = scratch / "world"
    if root.exists():
        (root / "read-only").chmod(0o755)
        shutil.rmtree(root)
    shutil.copytree(template, root, symlinks=True)
    os.mkfifo(root / "fifo")  # copytree copies no FIFO
    if not IS_ROOT:  # root writes through a read-only directory: nothing to learn from it then
        (root / "read-only").chmod(0o555)
    outside = {name: _snapshot(Path(name)) for name in OUTSIDE}
    around = sorted(os.listdir(scratch.parent)), sorted(os.listdir(scratch))
    drainer = subprocess.Popen([sys.executable, "-c", DRAIN, str(root / "fifo")])
    previous = os.getcwd()
    os.chdir(root)
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    try:
        yield World(root)
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(previous)
        drainer.kill()
        drainer.wait()
    assert {name: _snapshot(Path(name)) for name in OUTSIDE} == outside, "a file outside the case was replaced"
    assert (sorted(os.listdir(scratch.parent)), sorted(os.listdir(scratch))) == around, \
        "a file was created outside the case's directory"
    assert stat.S_ISFIFO(os.lstat(root / "fifo").st_mode), "the FIFO was replaced"
    assert os.readlink(root / "loop") == "loop" and os.readlink(root / "link-to-notes") == "notes.txt"


OUTPUT_OPTIONS = {"out", "removed", "plot"}
STORE_OPTIONS = {"store", "against"}
GOOD_PATHS = {
    "out": ["out.jsonl", "out-dir", "/dev/null", "/dev/full", "fifo", "link-to-notes", "-"],
    "store": ["store", "legacy.parquet"],
    "truth": ["truth.tsv", "fifo"],
    "members": ["members.tsv", "fifo"],
    "files_from": ["list.txt", "-"],
    "id_root": ["."],
}
GOOD_STRINGS = {"id_field": ["id"], "text_field": ["text"], "id_column": ["id"], "text_column": ["text"],
                "keep_field": ["size"], "include": ["*.txt"], "exclude": ["*ASV*"], "memory_limit": ["1GiB"]}
GOOD_ARGUMENTS = {"sign": ["corpus", "lines.jsonl", "rows.parquet", "fifo"], "filter": ["corpus", "lines.jsonl",
                  "rows.parquet", "corpus/KJV/jonah-01.txt"], "find": ["store"], "eval": ["store"],
                  "info": ["store", "legacy.parquet"], "estimate": ["store", "KJV/jonah-01.txt", "AKJV/jonah-01.txt"]}


def _good_values(parameter: click.Parameter) -> list[str]:
    """Values a careful user might give: in range, of the right kind."""
    kind, name = parameter.type, parameter.name or ""
    if isinstance(kind, click.Choice):
        return list(map(str, kind.choices))
    if isinstance(kind, click.IntRange):
        low = kind.min if kind.min is not None else 0
        high = kind.max if kind.max is not None else low + 8
        return sorted({str(low + (1 if kind.min_open else 0)), str(min(high, low + 2)), str(min(high, 8))})
    if isinstance(kind, click.FloatRange):
        low, high = kind.min if kind.min is not None else 0.0, kind.max if kind.max is not None else 10.0
        return [str(low + (high - low) * share) for share in (0.5, 0.8, 0.95)]
    if kind is click.INT:
        return ["1", "2", "8"]
    if kind is click.FLOAT:
        return ["0.5", "1"]
    if name in OUTPUT_OPTIONS:
        return GOOD_PATHS["out"]
    if name in STORE_OPTIONS:
        return GOOD_PATHS["store"]
    return GOOD_PATHS.get(name) or GOOD_STRINGS.get(name) or ["x"]


def _hostile_values(parameter: click.Parameter, world: World) -> list[str]:
    """Values users and scripts get wrong."""
    kind = parameter.type
    if isinstance(kind, click.Choice):
        return ["", "bogus"]
    if isinstance(kind, click.IntRange) or kind is click.INT:
        return INTS
    if isinstance(kind, click.FloatRange) or kind is click.FLOAT:
        return FLOATS
    if isinstance(kind, click.Path):
        return world.paths
    return STRINGS + world.paths[:6]


@st.composite
def value_of(draw: st.DrawFn, parameter: click.Parameter, world: World, hostility: int) -> str:
    """A good value, or one time in ``hostility`` a hostile one (never, when ``hostility`` is 0)."""
    hostile = hostility > 0 and draw(st.integers(1, hostility)) == 1
    return draw(st.sampled_from(_hostile_values(parameter, world) if hostile else _good_values(parameter)))


@st.composite
def invocations(draw: st.DrawFn, world: World) -> list[str]:
    """A command line: a command, its arguments and a random subset of its options. Half the cases are careful
    (good values, so that the command gets past parsing into the work), half hostile (a value in three, an
    argument in four)."""
    name = draw(st.sampled_from(sorted(cli.commands)))
    hostility = draw(st.sampled_from([0, 3]))
    command = cli.commands[name]
    args = [name]
    for parameter in command.params:
        if not isinstance(parameter, click.Option) or parameter.name in SKIPPED_OPTIONS:
            continue
        usual = name == "filter" and parameter.name == "store"  # filter without its store reads ./dedup.parquet
        if not parameter.required and draw(st.integers(0, 4)) > (3 if usual else 0):
            continue  # a fifth of the optional options
        flag = draw(st.sampled_from(parameter.opts))
        args += [flag] if parameter.is_flag else [flag, draw(value_of(parameter, world, hostility))]
    for parameter in command.params:
        if not isinstance(parameter, click.Argument):
            continue
        good = GOOD_ARGUMENTS[name]
        if name == "estimate":
            chosen = good[: draw(st.sampled_from([3, 3, 3, 2]))]
        else:
            chosen = [draw(st.sampled_from(good)) for _ in range(draw(st.sampled_from([1, 1, 1, 2, 0])))]
        for value in chosen:
            hostile = draw(st.integers(0, 3)) == 0
            args.append(draw(st.sampled_from(world.paths)) if hostile else value)
    return args


def check_outcome(args: list[str], code: int, stdout: str, stderr: str) -> None:
    """What every case must end with, whatever it asked for (``-v`` may add a traceback before the error)."""
    shown = " ".join(args)
    assert code in (0, 1, 2, 3), (shown, code, stderr)
    verbose = "-v" in args or "--verbose" in args
    if verbose and "Traceback" in stderr:
        stderr = stderr[stderr.rindex("\nError:") + 1:] if "\nError:" in stderr else stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout, (shown, stderr)
    lines = stderr.splitlines()
    assert len(lines) <= 25, (shown, stderr)
    if code in (1, 2):
        errors = [line for line in lines if line.startswith("Error:")]
        assert len(errors) == 1 and lines[-1] == errors[0] or "Usage:" in stderr, (shown, stderr)


def run_in_process(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args, env={"DEDUP_STORE": None, "DEDUP_SCHEDULER": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception,
                                                                                     result.stderr)
    check_outcome(args, result.exit_code, result.stdout, result.stderr)


def run_subprocess(args: list[str]) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DEDUP_")}
    done = subprocess.run([sys.executable, "-m", "dedup_cli", *args], capture_output=True, timeout=HANG_SECONDS,
                          env=environment)
    check_outcome(args, done.returncode, done.stdout.decode("utf-8", "replace"),
                  done.stderr.decode("utf-8", "replace"))


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_command_survives_hostile_options(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_in_process(data.draw(invocations(world)))


@pytest.mark.slow
@settings(max_examples=12, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_sample_survives_as_a_real_process(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_subprocess(data.draw(invocations(world)))


@pytest.mark.long_fuzz
@settings(max_examples=EXAMPLES or 3000, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_many_more_hostile_options(template: Path, data: st.DataObject) -> None:
    with world_of(template) as world:
        run_in_process(data.draw(invocations(world)))
