"""Runs killed by ``SIGKILL`` of their driver alone, as the out-of-memory killer or ``kill -9 PID`` does (not of
their process group): within seconds no process of the run is left, the next run needs no ``--wait``, and its
result equals a clean run's.

One row of :data:`COMMANDS` per command that starts processes of its own (a pool, a local Dask cluster); the
helper :func:`check_killed_run` runs each clean, then starts it again, waits until its workers exist, kills the
driver, and checks what is left. A new parallel command is one more row.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import REPO

from dedup_cli.store.store import read_store

psutil = pytest.importorskip("psutil", reason="the process tree is read with psutil (installed with the dask extra)")

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
DEADLINE_SECONDS = 20.0  # generous, for a loaded machine: how long the killed run's processes may take to end
START_SECONDS = 120.0  # how long a run may take to start its workers
# The kernel compiler a run may start (dedup_cli.kernel.background) is detached on purpose and outlives the run;
# it holds no store (the next run would find the lock held).
DETACHED = "dedup_cli.kernel.background"

needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="the Dask engine needs the dask extra: pip install 'dedup-cli[dask]'")


@dataclass(frozen=True)
class Paths:
    """Where one run of a command reads and writes."""

    root: Path  # this run's own folder: every path it names is under it but the corpus (and a store in a bucket)
    corpus: Path
    store: str  # a directory, or an s3:// URL
    out: Path


def stored(paths: Paths, stdout: str) -> object:
    """A store's documents and their signatures (what a reader sees, not which run wrote them)."""
    signatures = read_store(paths.store)
    return {identifier: (int(count), bytes(packed)) for identifier, count, packed in
            zip(signatures.ids, signatures.shingle_counts, signatures.packed, strict=True)}


def written(paths: Paths, stdout: str) -> object:
    """Every file of the output directory, by relative path (the store's path, which its marker file names,
    said the same way for every run), and the store the run signed."""
    files = {str(path.relative_to(paths.out)): path.read_bytes().replace(bytes(paths.root), b"RUN")
             for path in sorted(paths.out.rglob("*")) if path.is_file()}
    return files, stored(paths, stdout)


def printed(paths: Paths, stdout: str) -> object:
    return stdout


@dataclass(frozen=True)
class Command:
    """A command of the table: how to run it, when it has started its processes, and what its result is."""

    arguments: Callable[[Paths], list[str]]  # after ``dedup``
    workers: int  # processes the running command has started below it: it is killed once they exist
    result: Callable[[Paths, str], object]  # what a finished run produced (from its paths and its stdout)
    worker: str = ""  # a worker's command line holds this (the default: any process below the driver)
    prepare: Callable[[Paths], list[str]] | None = None  # run first, to completion (a store to find in)
    settle: float = 0.0  # seconds the run goes on working after its workers exist, before the kill
    in_bucket: bool = False  # the store is in object storage (the test S3 server), its lock a lease


def signing(paths: Paths) -> list[str]:
    return ["sign", str(paths.corpus), "-o", str(paths.store), "-j", "2", "--kernel", "numpy", "-q"]


COMMANDS = [
    pytest.param(Command(signing, workers=2, result=stored), id="sign"),
    # The lock of a store in a bucket is a lease naming the driver's pid: taken over once that pid is gone.
    pytest.param(Command(signing, workers=2, result=stored, in_bucket=True), id="sign-s3"),
    # filter runs in one process once the inputs are signed: its signing pool is what --sign adds.
    pytest.param(Command(lambda p: ["filter", str(p.corpus), "--sign", "-s", str(p.store), "-o", str(p.out), "-q"],
                         workers=2, result=written), id="filter"),
    # A local cluster: two worker processes forked by the driver on Linux, their command line the driver's (beside
    # them multiprocessing's resource tracker, whose command line is its own); the nannies run in the driver.
    # Killed once the workers have had a moment to join and start computing (``--verify all`` re-reads every
    # candidate pair's documents on the workers, so the run outlasts the moment).
    pytest.param(Command(lambda p: ["find", str(p.store), "--engine", "dask", "--workers", "2", "--verify", "all",
                                    "-q"],
                         workers=2, worker="dedup_cli", result=printed, prepare=signing, settle=0.4),
                 id="find-dask", marks=needs_dask),
    # The same, killed while the workers are still starting (before Dask's own watch of their nanny is set up).
    pytest.param(Command(lambda p: ["find", str(p.store), "--engine", "dask", "--workers", "2", "-q"],
                         workers=2, worker="dedup_cli", result=printed, prepare=signing, settle=0.2),
                 id="find-dask-starting", marks=needs_dask),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6000 text files of 400 words, every tenth a near copy of the one before (24 MB): a few seconds of
    signing for two workers, and groups for find and filter."""
    root = tmp_path_factory.mktemp("kills") / "corpus"
    root.mkdir()
    rng = np.random.default_rng(20)
    count, length = 6000, 400
    tokens = rng.integers(0, 50_000, size=(count, length))
    copies = np.arange(1, count, 10)
    edited = rng.random((copies.size, length)) < 0.03
    tokens[copies] = np.where(edited, rng.integers(0, 50_000, size=edited.shape), tokens[copies - 1])
    for number, row in enumerate(tokens):
        (root / f"d{number:05d}.txt").write_text(" ".join(map("w{}".format, row)))
    return root


def dedup(arguments: list[str], cwd: Path, **more: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dedup_cli", *arguments], env=ENV, cwd=cwd, **more)


def finished(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dedup_cli", *arguments], env=ENV, cwd=cwd, capture_output=True,
                          text=True, timeout=600, check=False)


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return ""


def running(process: psutil.Process) -> bool:
    """Whether the process still runs (a zombie, ended and waiting for its new parent to reap it, does not)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def below(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@dataclass
class Tree:
    """The processes of a run, every one seen so far, to be checked and, whatever happens, ended."""

    driver: subprocess.Popen
    seen: dict[int, psutil.Process]

    def look(self) -> list[psutil.Process]:
        """The processes below the driver now (all of them remembered)."""
        found = below(self.driver.pid)
        for process in found:
            self.seen.setdefault(process.pid, process)
        return found

    def left(self, paths: Paths) -> list[psutil.Process]:
        """The processes of the killed run still running: those seen below its driver, and any naming its folder
        or store (a forked worker's command line is its driver's), remembered too."""
        for process in psutil.process_iter():
            if str(paths.root) in command_line(process) or paths.store in command_line(process):
                self.seen.setdefault(process.pid, process)
        return [p for p in self.seen.values() if running(p) and DETACHED not in command_line(p)]


@pytest.fixture
def trees() -> Iterator[list[Tree]]:
    """Every run a test starts; each process of them still running at the end is killed, pass or fail."""
    started: list[Tree] = []
    yield started
    for tree in started:
        tree.driver.kill()  # nothing, once it has ended
        tree.driver.wait()
        for process in tree.seen.values():  # psutil makes sure each is still the process seen, not a new one
            try:
                if running(process):
                    process.kill()
            except psutil.NoSuchProcess:
                pass


def start_and_kill(command: Command, paths: Paths, trees: list[Tree]) -> Tree:
    """Start ``command``, wait until its workers exist (and ``settle`` seconds more), then SIGKILL its driver."""
    with open(paths.root / "stderr", "wb") as stderr:
        tree = Tree(dedup(command.arguments(paths), paths.root, stdout=subprocess.DEVNULL, stderr=stderr), {})
    trees.append(tree)
    deadline = time.monotonic() + START_SECONDS
    while True:
        workers = [p for p in tree.look() if command.worker in command_line(p) and DETACHED not in command_line(p)]
        if len(workers) >= command.workers:
            break
        assert tree.driver.poll() is None, (f"the run ended ({tree.driver.returncode}) before {command.workers} "
                                            f"workers were seen: {(paths.root / 'stderr').read_text()[-2000:]}")
        assert time.monotonic() < deadline, f"no {command.workers} workers after {START_SECONDS:g} s"
        time.sleep(0.02)
    settled = time.monotonic() + command.settle
    while time.monotonic() < settled:
        tree.look()
        time.sleep(0.05)
    tree.look()
    os.kill(tree.driver.pid, signal.SIGKILL)  # the driver alone, not its group
    code = tree.driver.wait(timeout=DEADLINE_SECONDS)
    assert code == -signal.SIGKILL, ("the run finished before it was killed; give it a larger corpus: "
                                     f"{(paths.root / 'stderr').read_text()[-2000:]}")
    return tree


def check_killed_run(command: Command, corpus: Path, root: Path, trees: list[Tree], bucket: str | None = None
                     ) -> None:
    """Run ``command`` clean; run it again and kill its driver; check that none of the killed run's processes is
    left within :data:`DEADLINE_SECONDS`; then run it once more, without ``--wait``, and compare with the clean
    run. Stores are in ``bucket`` when one is given."""
    clean, killed = (Paths(root / name, corpus, f"{bucket}/{name}" if bucket else str(root / name / "sigs.parquet"),
                           root / name / "out") for name in ("clean", "killed"))
    for paths in (clean, killed):
        paths.root.mkdir()
    if command.prepare is not None:
        assert bucket is None, "a store in a bucket is not copied"
        prepared = Paths(root / "prepared", corpus, str(root / "prepared" / "sigs.parquet"), root / "prepared" / "out")
        prepared.root.mkdir()
        assert finished(command.prepare(prepared), prepared.root).returncode == 0
        for paths in (clean, killed):
            shutil.copytree(prepared.store, paths.store)

    baseline = finished(command.arguments(clean), clean.root)
    assert baseline.returncode == 0, baseline.stderr

    tree = start_and_kill(command, killed, trees)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (left := tree.left(killed)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"left running {DEADLINE_SECONDS:g} s after the kill: {[command_line(p) for p in left]}"

    again = finished(command.arguments(killed), killed.root)
    assert again.returncode == 0, again.stderr
    assert "took it over" not in again.stderr, "the killed run left processes holding the store's lock"
    assert command.result(killed, again.stdout) == command.result(clean, baseline.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_killed_by_its_driver_alone_leaves_nothing_behind(command: Command, corpus: Path, tmp_path: Path,
                                                                trees: list[Tree], request: pytest.FixtureRequest
                                                                ) -> None:
    bucket = request.getfixturevalue("bucket") if command.in_bucket else None
    check_killed_run(command, corpus, tmp_path, trees, bucket)
