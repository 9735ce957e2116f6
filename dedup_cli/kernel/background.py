"""Compiling the kernel into numba's cache in the background, once, so that no run waits for the compiler.

``--kernel auto`` signs with numpy while the compiled kernel is not in numba's cache
(:func:`dedup_cli.kernel.cache.cached`), and :func:`compile_later` starts one detached process, at the lowest
priority (idle scheduling where the system has it, else nice 19), that compiles it for later runs: ``python -m
dedup_cli.kernel.background PID``. That process takes an exclusive lock first and ends at once if another holds
it, so two runs started together compile once; then it waits for the run that started it (PID) to end, and a few
seconds more (a script's next command, say ``dedup find``), so that the compiler does not share their cores. It
writes one line to the log of the key (:mod:`dedup_cli.kernel.cache`) saying what it did, and records a failure
instead of raising it.
"""

from __future__ import annotations

import os
import sys
import time

from dedup_cli.kernel.cache import PACKAGE_PARENT, cached, compiling, failure, log, record_failure, record_paths

# How long the compiler waits for the run that started it to end before it compiles anyway (a long-lived process,
# a notebook, may sign for hours), and then a little more, for what a script runs next (dedup find after sign).
WAIT_SECONDS = 120.0
AFTER_SECONDS = 2.0


def compile_later() -> bool:
    """Start compiling the kernel into numba's cache in a detached, lowest-priority background process, unless
    it is cached, being compiled, or failed to compile before. Returns whether a process was started."""
    if cached() or failure() is not None or compiling():
        return False
    import subprocess

    # The shell starts the compiler in the background and ends at once: this process waits only for the shell
    # (a few ms), and the compiler, in its own session, outlives it. From the folder holding this dedup_cli, so
    # that ``-m`` imports this one.
    command = '"$0" -m dedup_cli.kernel.background "$1" </dev/null >/dev/null 2>&1 &'
    try:
        subprocess.run(["/bin/sh", "-c", command, sys.executable, str(os.getpid())], cwd=PACKAGE_PARENT,
                       start_new_session=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        record_failure(f"cannot start the compiler process ({error})")
        return False
    return True


def _lowest_priority() -> None:
    """Yield every core to the run that started this: idle scheduling where there is one, else nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.nice(19)
    except OSError:
        pass


def _wait_for(pid: int, seconds: float) -> None:
    """Wait until process ``pid`` has ended, or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.2)


def compile_in_this_process(starter: int | None = None) -> None:
    """What the background process does: take the lock (or end if another process holds it), wait for the run
    that started it (``starter``, a process id) to end, at most :data:`WAIT_SECONDS`, and :data:`AFTER_SECONDS`
    more, so as not to share its cores or memory, and compile the kernel into numba's cache unless it is there by
    now; the outcome goes to the log, a failure to its record."""
    import fcntl

    _lowest_priority()
    paths = record_paths()
    with open(paths["lock"], "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(paths["log"], "another process is compiling the kernel")
            return
        if starter is not None:
            _wait_for(starter, WAIT_SECONDS)
            time.sleep(AFTER_SECONDS)
        if cached():
            log(paths["log"], "the kernel is cached already")
            return
        started = time.perf_counter()
        try:
            from dedup_cli.kernel.compiled import compile_kernel

            compile_kernel()
        except BaseException as error:  # whatever stops the compiler is recorded, never shown unasked
            record_failure(f"{type(error).__name__}: {error}")
            log(paths["log"], f"compiling the kernel failed: {type(error).__name__}: {error}")
            return
        if cached():
            log(paths["log"], f"compiled the kernel in {time.perf_counter() - started:.1f} s")
        else:
            log(paths["log"], f"compiled the kernel, but it is not cached: {failure()}")


if __name__ == "__main__":
    compile_in_this_process(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None)
