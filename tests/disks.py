"""A small file system that really fills up: a tmpfs mounted for one test, so that writes fail with ENOSPC as
they do on a full disk (not a write made to fail by a test double, nor ``RLIMIT_FSIZE``, which gives EFBIG).

Mounting needs root (or ``CAP_SYS_ADMIN``); elsewhere the tests that need one are skipped, saying why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class SmallDisk:
    """A mounted tmpfs at ``path``; :meth:`fill` takes its free space."""

    path: Path

    def free_bytes(self) -> int:
        status = os.statvfs(self.path)
        return status.f_bavail * status.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Allocate all the free space but ``leave`` bytes (rounded down to whole blocks by the file system)."""
        size = self.free_bytes() - leave
        if size <= 0:
            return
        descriptor = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.posix_fallocate(descriptor, 0, size)
        finally:
            os.close(descriptor)

    def empty(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)


@contextmanager
def small_disk(mount_point: Path, size: str = "8m") -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` mounted at ``mount_point`` (created) for the block; the test is skipped where this
    process may not mount one."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small file system to fill needs root")
    mount_point.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                              capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no mount command here to mount a small file system")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield SmallDisk(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)
