"""No run waits for the compiler: with an empty numba cache, sign signs with numpy and the compiled kernel is
compiled once, in the background, under a lock; a later run loads it from the cache; a failure is silent but
for sign -v. Real processes with their own NUMBA_CACHE_DIR, so nothing here depends on this install's cache."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="the fast extra (numba) is not installed")
SMALL = "a small document of a dozen words or so, signed in a fresh process with a fresh cache\n"


def environment(cache_dir: Path, **more: str) -> dict[str, str]:
    """A fresh numba cache: its own key, so its own records (kernel.cache) and its own cached code."""
    return {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(cache_dir), **more}


def record_paths(env: dict[str, str]) -> dict[str, Path]:
    script = "import json; from dedup_cli.kernel import cache; print(json.dumps({k: str(v) for k, v in " \
             "cache.record_paths().items()}))"
    found = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return {kind: Path(path) for kind, path in json.loads(found.stdout).items()}


def sign(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dedup_cli", "sign", *args, "-v"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)


def wait_for_log(log: Path, done: tuple[str, ...], timeout: float = 600.0) -> list[str]:
    """The log's lines once one of them says the compilation ended (it runs at idle priority: no time is
    asserted, the wait is only bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        if any(marker in line for line in lines for marker in done):
            return lines
        time.sleep(0.2)
    raise AssertionError(f"no background compilation ended within {timeout} s: {log}")


@needs_numba
@pytest.mark.slow
def test_a_first_run_signs_with_numpy_and_the_kernel_is_compiled_once_in_the_background(tmp_path: Path) -> None:
    env = environment(tmp_path / "numba-cache")
    paths = record_paths(env)
    assert not paths["json"].exists() and not paths["log"].exists()
    (tmp_path / "small.txt").write_text(SMALL)
    # Two runs at once: both sign with numpy at once, and start (at most) one compilation each.
    runs = [sign(env, str(tmp_path / "small.txt"), "-o", str(tmp_path / f"s{n}.parquet")) for n in range(2)]
    for run in runs:
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        assert "kernel: numpy (the compiled kernel is not in numba's cache yet; it is being compiled in the " \
               "background, once, for later runs)" in stderr
    lines = wait_for_log(paths["log"], ("compiled the kernel in", "failed"))
    time.sleep(1.0)  # a second background process, had one started, has logged by now
    lines = paths["log"].read_text().splitlines()
    compiled = [line for line in lines if "compiled the kernel in" in line]
    assert len(compiled) == 1, lines  # the lock let one process compile
    assert all("compiled the kernel in" in line or "another process is compiling" in line
               or "cached already" in line for line in lines), lines
    assert paths["json"].exists() and not paths["failed"].exists()
    assert any((tmp_path / "numba-cache").rglob("*.nbc"))
    # A later run loads the kernel from the cache: auto takes it (when the run repays it; here every run does),
    # this process does not compile (numba counts no cache miss) and no background compilation starts.
    script = ("import dedup_cli as dedup\n"
              "from dedup_cli.kernel import choice\n"
              "choice.LOAD_SECONDS = 0.0\n"
              f"report = dedup.sign([{str(tmp_path / 'small.txt')!r}], {str(tmp_path / 'later.parquet')!r})\n"
              "from dedup_cli.kernel import compiled\n"
              "assert report.kernels == ['numba'], (report.kernels, report.kernel_reason)\n"
              "assert not compiled.sign_documents.stats.cache_misses, compiled.sign_documents.stats\n"
              "assert compiled.sign_documents.stats.cache_hits\n")
    later = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=REPO)
    assert later.returncode == 0, later.stderr
    assert paths["log"].read_text().splitlines() == lines
    # The stores are the same whichever kernel signed.
    parts = [sorted(p.read_bytes() for p in (tmp_path / name).glob("part-*.parquet"))
             for name in ("s0.parquet", "later.parquet")]
    assert parts[0] == parts[1]


@needs_numba
def test_a_failed_compilation_is_silent_but_for_verbose_and_not_retried(tmp_path: Path) -> None:
    """Without numba's JIT there is no cached code to record: the background process records the failure, later
    runs sign with numpy without starting another, and only sign -v says why."""
    env = environment(tmp_path / "numba-cache", NUMBA_DISABLE_JIT="1")
    paths = record_paths(env)
    (tmp_path / "small.txt").write_text(SMALL)
    first = sign(env, str(tmp_path / "small.txt"), "-o", str(tmp_path / "a.parquet"))
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0 and "not in numba's cache yet" in stderr
    lines = wait_for_log(paths["log"], ("failed", "not cached"))
    assert paths["failed"].exists() and not paths["json"].exists()
    quiet = subprocess.run([sys.executable, "-m", "dedup_cli", "sign", str(tmp_path / "small.txt"), "-o",
                            str(tmp_path / "b.parquet")], env=env, capture_output=True, text=True, cwd=REPO)
    assert quiet.returncode == 0 and len(quiet.stderr.splitlines()) == 1
    assert quiet.stderr.startswith("signed 1 document (")  # the summary alone
    verbose = sign(env, str(tmp_path / "small.txt"), "-o", str(tmp_path / "c.parquet"))
    _, stderr = verbose.communicate(timeout=120)
    assert verbose.returncode == 0
    assert "kernel: numpy (compiling the compiled kernel in the background failed: numba keeps no on-disk cache " \
           "of the compiled kernel; --kernel numba compiles it in the foreground)" in stderr
    time.sleep(0.5)
    assert paths["log"].read_text().splitlines() == lines  # no second attempt
