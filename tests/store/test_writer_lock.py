"""The writer lock and the processes around it: a forked child never holds it, and a lock that a run which is gone
left to other processes is taken over (or, when it cannot be, the message says so and what to do).

Each test makes the situation with real processes: a helper takes the ``flock`` on ``_dedup.lock`` as a run does,
hands its descriptor to a child (forked, as an older version's pool worker was, or another program), and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from dedup_cli.cli.main import cli
from dedup_cli.errors import DedupWarning, StoreError
from dedup_cli.params import SignatureParams
from dedup_cli.store import lock
from dedup_cli.store.format import LOCK_NAME
from dedup_cli.store.store import create_store, open_store, read_store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the holders are read from /proc")

PARAMS = SignatureParams(num_perm=8, bits=8)
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
DEADLINE_SECONDS = 20.0  # generous: how long a process may take to end on a loaded machine

# Takes the lock as a run does and records RECORDED (a pid, or "self") in it; then, by HOLDER: "python" forks a
# child that inherits the locked descriptor and exits (a killed run whose pool worker lives on), "program" hands
# the descriptor to another program (sleep) and exits, "stay" keeps the lock itself. Prints the holder's pid.
_LOCKER = """
import fcntl, os, subprocess, sys, time
store, holder, recorded = sys.argv[1:]
descriptor = os.open(os.path.join(store, "_dedup.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(descriptor, fcntl.LOCK_EX)
os.ftruncate(descriptor, 0)
os.pwrite(descriptor, (str(os.getpid()) if recorded == "self" else recorded).encode() + b"\\n", 0)
if holder == "python":
    child = os.fork()
    if child == 0:
        quiet = os.open(os.devnull, os.O_RDWR)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        time.sleep(600)
        os._exit(0)
elif holder == "program":
    child = subprocess.Popen(["sleep", "600"], pass_fds=[descriptor], stdout=subprocess.DEVNULL).pid
else:
    child = os.getpid()
print(child, flush=True)
if holder == "stay":
    sys.stdin.readline()
"""

# Takes the lock through the store, as sign does, forks a child that sleeps, and exits without releasing it.
_FORKER = """
import os, sys, time
from dedup_cli.params import SignatureParams
from dedup_cli.store.store import open_store
run = open_store(sys.argv[1]).begin_run(SignatureParams(num_perm=8, bits=8))
child = os.fork()
if child == 0:
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    time.sleep(600)
    os._exit(0)
print(child, flush=True)
os._exit(0)
"""


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie, ended but not yet reaped by its new parent, has)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_until_ended(pid: int) -> bool:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not ended(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def gone_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def children() -> Iterator[list[int]]:
    """Pids of the processes a test leaves behind on purpose: killed at the end, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not ended(pid):
            os.kill(pid, signal.SIGKILL)


def leave_lock(store: Path, holder: str, recorded: str, children: list[int]) -> tuple[int, subprocess.Popen]:
    """Run :data:`_LOCKER`; the pid of the process that holds the lock once it has exited (or stays)."""
    locker = subprocess.Popen([sys.executable, "-c", _LOCKER, str(store), holder, recorded], env=ENV,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None
    line = locker.stdout.readline().strip()
    assert line.isdigit(), "the helper did not take the lock"
    children.append(int(line))
    if holder != "stay":
        assert locker.wait(timeout=DEADLINE_SECONDS) == 0
    return int(line), locker


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "sigs.parquet"
    create_store(path, PARAMS)
    return path


def test_a_lock_left_to_a_forked_child_of_a_run_that_is_gone_is_taken_over(tmp_path: Path,
                                                                           children: list[int]) -> None:
    corpus, store = tmp_path / "corpus", tmp_path / "sigs.parquet"
    corpus.mkdir()
    for name in "abc":
        (corpus / f"{name}.txt").write_text(" ".join(f"{name}{i}" for i in range(50)))
    signing = ["-o", str(store), "-q", "--kernel", "numpy"]
    assert CliRunner().invoke(cli, ["sign", str(corpus / "a.txt"), *signing]).exit_code == 0
    holder, locker = leave_lock(store, "python", "self", children)
    assert not ended(holder)

    result = CliRunner().invoke(cli, ["sign", str(corpus), *signing])
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"warning: store {store} was locked by dedup run pid {locker.pid}, which is no longer "
                             f"running; ended the 1 process(es) it left holding the lock (pid {holder}) and took it "
                             "over\n")
    assert wait_until_ended(holder)
    assert read_store(store).ids == ["a.txt", "b.txt", "c.txt"]


def test_a_lock_another_program_holds_is_not_taken_over(store: Path, children: list[int]) -> None:
    recorded = gone_pid()
    holder, _ = leave_lock(store, "program", str(recorded), children)
    with pytest.raises(StoreError) as caught:
        open_store(store).begin_run(PARAMS)
    assert str(caught.value) == (f"store {store} is locked by a process (pid {holder}) that dedup run pid {recorded} "
                                 f"left behind, and pid {recorded} is no longer running; end that process, then run "
                                 "again")
    with pytest.raises(StoreError, match=r"; end that process, then run again \(waited 0\.3 s\)$"):
        open_store(store).begin_run(PARAMS, lock_timeout=0.3)
    assert not ended(holder)
    os.kill(holder, signal.SIGKILL)
    assert wait_until_ended(holder)
    with open_store(store).begin_run(PARAMS, lock_timeout=DEADLINE_SECONDS) as run:
        assert run.number == 1


def test_a_run_that_has_just_taken_the_lock_is_never_ended(store: Path, children: list[int]) -> None:
    # The file still names a run that is gone, but the process that took the lock runs: a run between its flock
    # and writing its pid. It is named, and left alone.
    holder, locker = leave_lock(store, "stay", str(gone_pid()), children)
    try:
        with pytest.raises(StoreError) as caught:
            open_store(store).begin_run(PARAMS, lock_timeout=0.2)
        assert str(caught.value) == (f"store {store} is being written by another dedup run (pid {holder}) after "
                                     "waiting 0.2 s; try again later")
        assert not ended(holder)
    finally:
        locker.communicate("\n", timeout=DEADLINE_SECONDS)


def test_where_the_holders_cannot_be_named_the_message_says_what_to_do(store: Path, children: list[int],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    holder, locker = leave_lock(store, "python", "self", children)
    monkeypatch.setattr(lock, "flock_holders", lambda descriptor: None)  # a system without /proc
    with pytest.raises(StoreError) as caught:
        open_store(store).begin_run(PARAMS)
    assert str(caught.value) == (f"store {store} is locked by a process that dedup run pid {locker.pid} left behind, "
                                 f"and pid {locker.pid} is no longer running; end that process (lsof "
                                 f"{store / LOCK_NAME} names it), then run again")
    assert not ended(holder)


def test_a_child_forked_by_the_lock_holder_does_not_hold_the_lock(store: Path, children: list[int]) -> None:
    forker = subprocess.run([sys.executable, "-c", _FORKER, str(store)], env=ENV, capture_output=True, text=True,
                            timeout=60, check=False)
    assert forker.returncode == 0, forker.stderr
    child = int(forker.stdout)
    children.append(child)
    # The holder exited with its child still running: the lock is free at once, with nothing to take over.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DedupWarning)
        with open_store(store).begin_run(PARAMS, lock_timeout=0) as run:
            assert run.number == 1
    assert not ended(child)


def test_the_lock_is_taken_again_after_a_fork_in_the_holder(store: Path) -> None:
    # In this very process: a child forked while the lock is held gets no copy of it, and the parent keeps it.
    with open_store(store).begin_run(PARAMS) as run:
        child = os.fork()
        if child == 0:
            os._exit(0 if all(held._descriptor is None for held in lock._held) else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        with pytest.raises(StoreError, match="is being written by another dedup run"):
            open_store(store).begin_run(PARAMS)
        assert run.number == 1


def compilers_started_by(pid: int) -> list[int]:
    """The kernel compilers (dedup_cli.kernel.background) that process ``pid`` started."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                arguments = handle.read().split(b"\0")
        except OSError:
            continue
        if b"dedup_cli.kernel.background" in arguments and str(pid).encode() in arguments:
            found.append(int(entry))
    return found


def test_the_background_compiler_holds_no_lock_of_the_store(store: Path, children: list[int],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.kernel import background

    # As when the kernel is not compiled yet: sign starts the compiler while it holds the store's lock.
    for name, value in (("cached", False), ("failure", None), ("compiling", False)):
        monkeypatch.setattr(background, name, lambda value=value: value)
    with open_store(store).begin_run(PARAMS):
        assert background.compile_later()
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not (compilers := compilers_started_by(os.getpid())):
            assert time.monotonic() < deadline, "the compiler process did not start"
            time.sleep(0.05)
        children.extend(compilers)  # it waits for this process to end before compiling: ended by the fixture
        descriptor = os.open(store / LOCK_NAME, os.O_RDONLY)
        try:
            holders = lock.flock_holders(descriptor)
        finally:
            os.close(descriptor)
        assert holders is not None and [holder.pid for holder in holders] == [os.getpid()]
