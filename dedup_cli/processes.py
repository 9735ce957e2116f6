"""Worker processes that end with the process that started them.

A run's worker processes (the signing pool, the parallel stages of ``find``) are forked by its driver. When the
driver is killed (``kill -9 PID``, the out-of-memory killer), nothing tells its workers: a pool worker blocked on
its task queue would sleep on for ever, holding whatever it inherited. Each worker therefore calls
:func:`die_with_parent` first. On Linux the kernel sends the worker ``SIGKILL`` the moment its parent thread
ends (``PR_SET_PDEATHSIG``); elsewhere a daemon thread watches the parent's pid. Either way a worker whose parent
is already gone by the time it asks (the parent died between the fork and the call) ends at once.

:func:`flock_holders` names the processes that hold a lock file's ``flock``, and the process that took it, so
that a lock whose taker is gone, held on by processes it left, can be told from one held by a running run;
:func:`descendants` lists the processes below one (what a run started, for those who watch or stop it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

# How often a worker on a system without PR_SET_PDEATHSIG looks whether its parent is still there.
PARENT_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _parent_death_signal() -> bool:
    """Ask the Linux kernel to send this process SIGKILL when its parent ends; whether it was set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        # The running program's own symbols (dlopen of NULL), libc's among them: no search for the library, which
        # (ctypes.util.find_library) runs ldconfig in a subprocess, a fork and exec in every worker.
        libc = ctypes.CDLL(None, use_errno=True)
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


def descendants(pid: int) -> list[int]:
    """The processes below ``pid``: its children, each followed by those below it (Linux's
    ``/proc/PID/task/TID/children``, which every thread of a process has; none where there is no /proc, or once
    ``pid`` has ended)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as listing:
                children = [int(child) for child in listing.read().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def running(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts; a process of another user too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LockHolder:
    """A process holding an exclusive ``flock`` through a descriptor, and the process that took the lock.

    The kernel records the pid of the process that called ``flock`` (``locker``), not of those that share its
    descriptor: a child forked after the lock was taken holds it too, and goes on holding it when ``locker`` ends.
    """

    pid: int
    locker: int  # 0 when the kernel cannot name it in this pid namespace (it has ended, or lives outside)
    arguments: tuple[str, ...]  # the holder's command line

    @property
    def python(self) -> bool:
        """Whether the holder runs Python (as a run's worker process does), not some other program that was
        handed the descriptor."""
        program = os.path.basename(self.arguments[0]) if self.arguments else ""
        return program.startswith("python") or program == "dedup"


def flock_holders(descriptor: int) -> list[LockHolder] | None:
    """The processes of this user that hold an exclusive ``flock`` on the file open as ``descriptor`` (not
    through ``descriptor`` itself); None where the system does not tell (it needs Linux's ``/proc``).

    A descriptor holds the lock when its ``/proc/PID/fdinfo`` lists it (Linux 4.1 and later; older kernels list
    none, so no holder is found): other processes merely having the file open (a run waiting for the lock) do
    not. Processes of other users cannot be looked at, so they are never listed.
    """
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/fdinfo"):
        return None
    try:
        status = os.fstat(descriptor)
        name = os.path.basename(os.readlink(f"/proc/self/fd/{descriptor}"))
    except OSError:
        return None
    me, user = os.getpid(), os.getuid()
    holders = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.stat(f"/proc/{pid}").st_uid != user:
                continue
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # ended meanwhile, or not ours to look at
            continue
        for number in descriptors:
            if pid == me and int(number) == descriptor:
                continue
            link = f"/proc/{pid}/fd/{number}"
            try:
                # The name first: a stat of every descriptor of every process would cost far more.
                if os.path.basename(os.readlink(link)) != name:
                    continue
                target = os.stat(link)
                if (target.st_dev, target.st_ino) != (status.st_dev, status.st_ino):
                    continue
                locker = _flock_locker(f"/proc/{pid}/fdinfo/{number}")
                if locker is None:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    arguments = tuple(os.fsdecode(argument) for argument in handle.read().split(b"\0")[:-1])
            except OSError:
                continue
            holders.append(LockHolder(pid, locker, arguments))
            break
    return holders


def _flock_locker(fdinfo: str) -> int | None:
    """The pid that took the exclusive ``flock`` the descriptor of ``fdinfo`` holds; None when it holds none.

    A line reads ``lock:\t1: FLOCK  ADVISORY  WRITE 1234 fe:00:56789 0 EOF`` (``->`` after the number marks a
    request still waiting, not a lock held).
    """
    with open(fdinfo) as handle:
        for line in handle:
            if not line.startswith("lock:"):
                continue
            fields = line.split()
            if len(fields) >= 6 and fields[2:5] == ["FLOCK", "ADVISORY", "WRITE"] and fields[5].lstrip("-").isdigit():
                return max(int(fields[5]), 0)
    return None
