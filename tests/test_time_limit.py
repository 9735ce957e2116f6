"""The suite's time limit on a test (tests/conftest.py): a test that waits forever on a forked worker fails after
the limit, and the run goes on, with the stacks of the test's process and of the worker on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

HANGING = '''
import time

from dedup_cli.forked import forked_map


def wait_forever(task):
    while True:
        time.sleep(0.05)


def test_a_worker_that_never_answers():
    list(forked_map(wait_forever, [1, 2], 2, "the test"))


def test_the_next_one_runs():
    pass
'''


def test_a_hung_test_fails_at_the_limit_and_shows_its_workers_stacks(tmp_path: Path) -> None:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    environment = {**os.environ, "DEDUP_TEST_SECONDS": "3",
                   "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "--rootdir", str(tmp_path), "-o", "addopts=", str(tmp_path / "test_hanging.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=environment)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout, done.stdout
    assert "TestTimedOut: the test ran past 3 s" in done.stdout
    shown = done.stdout + done.stderr
    assert shown.count("in wait_forever") >= 2, shown  # each forked worker's own stack
    assert "in forked_map" in shown  # and where the test waited on them
