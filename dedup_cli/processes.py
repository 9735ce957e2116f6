"""Worker processes that end with the process that started them.

A run's worker processes (the signing pool, the parallel stages of ``find``) are forked by its driver. When the
driver is killed (``kill -9 PID``, the out-of-memory killer), nothing tells its workers: a pool worker blocked on
its task queue would sleep on for ever, holding whatever it inherited. Each worker therefore calls
:func:`die_with_parent` first. On Linux the kernel sends the worker ``SIGKILL`` the moment its parent thread
ends (``PR_SET_PDEATHSIG``); elsewhere a daemon thread watches the parent's pid. Either way a worker whose parent
is already gone by the time it asks (the parent died between the fork and the call) ends at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

# How often a worker on a system without PR_SET_PDEATHSIG looks whether its parent is still there.
PARENT_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _parent_death_signal() -> bool:
    """Ask the Linux kernel to send this process SIGKILL when its parent ends; whether it was set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def die_with_parent(parent_pid: int) -> None:
    """Make this (worker) process end when ``parent_pid``, the process that started it, ends.

    Call it first thing in a worker, with the parent's pid taken before the fork: if the parent has already
    ended, this process has been handed to another parent (init, a subreaper), and it ends at once.
    """
    if not _parent_death_signal():
        threading.Thread(target=_watch_parent, args=(parent_pid,), name="dedup-parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent ended before the signal was asked for
        os._exit(1)
