"""The processes below a process (dedup_cli/processes.py), as those who watch a run or stop it see them."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from dedup_cli.processes import descendants

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")


def test_children_and_theirs_each_child_before_those_below_it() -> None:
    # A shell that starts a sleeping grandchild and then sleeps itself: two levels below this process.
    child = subprocess.Popen(["sh", "-c", "sleep 30 & echo started; wait"], stdout=subprocess.PIPE)
    grandchildren: list[int] = []
    try:
        assert child.stdout is not None and child.stdout.readline() == b"started\n"
        below = descendants(os.getpid())
        assert child.pid in below
        grandchildren = descendants(child.pid)
        assert len(grandchildren) == 1 and below.index(grandchildren[0]) == below.index(child.pid) + 1
    finally:
        for pid in grandchildren:
            os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()


def test_a_process_that_has_ended_has_none() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert descendants(gone.pid) == []
