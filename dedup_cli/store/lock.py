"""The writer lock: an exclusive ``flock(2)`` on ``_dedup.lock``, held by the one run that may write.

A ``flock`` belongs to the open file, not to the process, so a process forked while the lock is held would hold
it too, and go on holding it after the run ends: a pool worker of a killed run, asleep on its task queue, would
lock the store for good. Two defences. A forked child closes its copy of every held lock's descriptor at once
(``os.register_at_fork``), so the lock is the driver's alone. And a run that finds the lock held by processes a
run that is gone left behind (strays of an older version, a child forked by a library user's own code) ends
them and takes the lock over, with a warning; where the system cannot name the holders, it says what to do.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time
import warnings
from pathlib import Path

from dedup_cli.errors import DedupWarning, StoreError
from dedup_cli.processes import LockHolder, flock_holders, running
from dedup_cli.store.format import LOCK_NAME

LOCK_POLL_SECONDS = 0.05
# How long a run that ended a dead run's leftover holders waits for the kernel to release the lock.
TAKEOVER_SECONDS = 10.0
# How often a waiting run looks again for the holders of a lock whose run is gone (a look lists /proc).
HOLDER_LOOK_SECONDS = 1.0


class WriterLock:
    """An exclusive ``flock`` on ``_dedup.lock``; the holder's pid is written into the file for the message.

    The kernel releases it when the holder and every process sharing its descriptor have ended; forked children
    share none (see the module). A lock whose recorded holder is gone, held on only by Python processes of this
    user that the gone run left (Linux tells which), is taken over: they are ended. Otherwise it is never stale:
    :meth:`check` has nothing to check, and the run needs no token (a store in object storage:
    :mod:`dedup_cli.store.leases`).
    """

    token: str | None = None

    def __init__(self, path: Path, timeout: float | None) -> None:
        self.path = path
        self.timeout = timeout
        self._descriptor: int | None = None

    def check(self) -> None:
        """Nothing: a ``flock`` is held until released."""

    def acquire(self) -> None:
        try:
            descriptor = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise StoreError(f"cannot lock store {self.path}: {error.strerror or error}") from error
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        next_look = time.monotonic()
        try:
            while not _try_lock(descriptor):
                if time.monotonic() >= next_look:
                    next_look = time.monotonic() + HOLDER_LOOK_SECONDS
                    if self._take_over(descriptor):
                        break
                if deadline is not None and time.monotonic() >= deadline:
                    waited = f" after waiting {self.timeout:g} s" if self.timeout else ""
                    raise StoreError(self._busy(descriptor, waited))
                time.sleep(LOCK_POLL_SECONDS)
        except OSError as error:
            os.close(descriptor)
            raise StoreError(f"cannot lock store {self.path}: {error.strerror or error}") from error
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        self._descriptor = descriptor
        _held.add(self)

    def _take_over(self, descriptor: int) -> bool:
        """Take the lock from the processes a gone run left holding it, ending them; whether it was taken."""
        recorded = _recorded_pid(descriptor)
        if recorded is None or running(recorded):
            return False
        holders = flock_holders(descriptor)
        if not holders or not all(_left_behind(holder, recorded) for holder in holders):
            return False
        for holder in holders:
            try:
                os.kill(holder.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except PermissionError:
                return False
        # The kernel releases the lock once each holder has exited (a zombie holds no descriptor).
        deadline = time.monotonic() + TAKEOVER_SECONDS
        while not _try_lock(descriptor):
            if time.monotonic() >= deadline:
                return False  # another run took it meanwhile, or a holder does not end: the usual message
            time.sleep(LOCK_POLL_SECONDS)
        ended = ", ".join(str(holder.pid) for holder in holders)
        warnings.warn(f"store {self.path} was locked by dedup run pid {recorded}, which is no longer running; "
                      f"ended the {len(holders)} process(es) it left holding the lock (pid {ended}) and took "
                      "it over", DedupWarning, stacklevel=2)
        return True

    def _busy(self, descriptor: int, waited: str) -> str:
        """The message when the lock stays held: who holds it, and what to do."""
        recorded = _recorded_pid(descriptor)
        if recorded is not None and not running(recorded):
            holders = flock_holders(descriptor)
            live = [holder.locker for holder in holders or () if holder.locker and running(holder.locker)]
            if not live:
                lock_file = self.path / LOCK_NAME
                named = f" (pid {', '.join(str(h.pid) for h in holders)})" if holders else ""
                finder = "" if holders else f" (lsof {lock_file} names it)"
                return (f"store {self.path} is locked by a process{named} that dedup run pid {recorded} left "
                        f"behind, and pid {recorded} is no longer running; end that process{finder}, then run "
                        f"again{f' (waited {self.timeout:g} s)' if waited else ''}")
            recorded = live[0]  # a run that took the lock just now, before writing its pid
        holder = "pid unknown" if recorded is None else f"pid {recorded}"
        return f"store {self.path} is being written by another dedup run ({holder}){waited}; try again later"

    def release(self) -> None:
        if self._descriptor is not None:
            # Closing releases the flock; the pid stays in the file, read only while the lock is held.
            _held.discard(self)
            os.close(self._descriptor)
            self._descriptor = None


def _try_lock(descriptor: int) -> bool:
    """Take the exclusive ``flock`` if no one holds it; whether it was taken (other failures raise)."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        return False
    return True


def _recorded_pid(descriptor: int) -> int | None:
    """The pid the holder wrote into the lock file; None when there is none (a run that has only just locked)."""
    text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def _left_behind(holder: LockHolder, recorded: int) -> bool:
    """Whether ``holder`` holds the lock only as a leftover of the gone run ``recorded``: a Python process (not
    this one) that did not take the lock itself, taken by a process that has ended."""
    if holder.pid == os.getpid() or holder.pid == holder.locker or not holder.python:
        return False
    if holder.locker == 0:  # the kernel cannot name the taker in this namespace: it has ended, as has recorded
        return True
    return not running(holder.locker)


# The locks this process holds, whose descriptors a forked child closes.
_held: set[WriterLock] = set()


def _close_in_child() -> None:
    """In a child just forked: close the inherited descriptors of the parent's locks, so the lock stays the
    parent's alone and ends with it (closing a copy releases nothing while the parent's is open)."""
    for lock in _held:
        if lock._descriptor is not None:
            try:
                os.close(lock._descriptor)
            except OSError:
                pass
            lock._descriptor = None
    _held.clear()


if hasattr(os, "register_at_fork"):  # not on Windows, which has neither fork nor flock
    os.register_at_fork(after_in_child=_close_in_child)
