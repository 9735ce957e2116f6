"""The writer lock: an exclusive ``flock(2)`` on ``_dedup.lock``, held by the one run that may write.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from dedup_cli.errors import StoreError
from dedup_cli.store.format import LOCK_NAME

LOCK_POLL_SECONDS = 0.05


class WriterLock:
    """An exclusive ``flock`` on ``_dedup.lock``; the holder's pid is written into the file for the message.

    The kernel releases it when the holder dies, so it is never stale and never taken over: :meth:`check` has
    nothing to check, and the run needs no token (a store in object storage: :mod:`dedup_cli.store.leases`).
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
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(descriptor)
                    raise StoreError(f"cannot lock store {self.path}: {error.strerror or error}") from error
            if deadline is not None and time.monotonic() >= deadline:
                holder = self._holder(descriptor)
                os.close(descriptor)
                waited = f" after waiting {self.timeout:g} s" if self.timeout else ""
                raise StoreError(
                    f"store {self.path} is being written by another dedup run ({holder}){waited}; try again later"
                )
            time.sleep(LOCK_POLL_SECONDS)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        self._descriptor = descriptor

    @staticmethod
    def _holder(descriptor: int) -> str:
        text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        return f"pid {text}" if text.isdigit() else "pid unknown"

    def release(self) -> None:
        if self._descriptor is not None:
            # Closing releases the flock; the pid stays in the file, read only while the lock is held.
            os.close(self._descriptor)
            self._descriptor = None
