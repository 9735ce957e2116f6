"""A work folder where ``find --work-dir`` keeps each completed stage, so a run killed part-way resumes there.

Each stage's output is a set of named numpy arrays in one file, ``STAGE-KEY.npz``, written under a temporary name
and renamed into place (:mod:`dedup_cli.atomic_files`), holding beside the arrays the SHA-256 of their bytes. KEY is a
fingerprint of everything the output depends on: the store's snapshot (its manifest, or for a format 1 file its
size, time and inode; and the reference store's with ``--against``), the version of dedup, the stage's own
version (:data:`STAGE_VERSIONS`, raised whenever a stage's output would change), and the options that matter to
that stage. A file is used only when its name's fingerprint is the one this run computes and its checksum holds:
a file from another snapshot or other options is never read, and a torn or damaged one is removed and recomputed.

A stage too large for one file (the Dask engine's, written by its workers) also has a folder ``STAGE-KEY/`` of
part files, each written atomically by one task; the stage's own file, written last, lists them with their
SHA-256 and so commits them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dedup_cli.atomic_files import atomic_write, path_kind
from dedup_cli.errors import StoreError, UsageError
from dedup_cli.objectstore.urls import is_url
from dedup_cli.store.store import Store
from dedup_cli.version import __version__

STAGE_VERSIONS = {"candidates": 2, "scored": 3, "decisions": 3}
"""Raised when a stage's output for the same inputs would change, so older work files are not reused."""
_CHECKSUM = "__sha256__"
_STAGE_PREFIX = re.compile(r"(candidates|scored|decisions)-[0-9a-f]{24}")


def snapshot_of(store: Store) -> str:
    """What identifies a store's contents as opened: its manifest, or for a format 1 file its size, time, inode."""
    if store.manifest is None:
        status = os.stat(str(store.path))  # format 1 stores are local files
        return f"format 1 {status.st_size} {status.st_mtime_ns} {status.st_ino}"
    return store.manifest.to_json().decode("utf-8")


def _digest(arrays: dict[str, np.ndarray]) -> str:
    found = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        found.update(f"{name} {array.dtype.str} {array.shape}".encode())
        found.update(array.tobytes())
    return found.hexdigest()


class WorkDir:
    """The work folder of one ``find`` (see the module docstring).

    Args:
        path: a folder (created when missing); anything else there is refused, as a store path would be.
        stores: the store and, with ``--against``, the reference store: their snapshots are in every key.
    """

    def __init__(self, path: str | os.PathLike[str], stores: Sequence[Store]) -> None:
        if is_url(os.fspath(path)):
            raise UsageError(f"--work-dir {os.fspath(path)}: work files are kept on a filesystem (for --engine dask "
                             "one every worker sees), not in object storage; name a folder")
        # Absolute: a Dask cluster's workers write the parts of large stages here, from working folders of their
        # own (on other hosts, the folder must be one they all see at the same path).
        self.path = Path(os.path.abspath(path))
        kind = path_kind(self.path)
        if kind not in (None, "directory"):
            raise StoreError(f"--work-dir {self.path} is a {kind}; name a folder (it is created when missing)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot write --work-dir {self.path}: {error.strerror or error}") from error
        self._base = json.dumps([__version__, [snapshot_of(store) for store in stores]])
        self.used: list[Path] = []

    def key(self, stage: str, **depends: object) -> str:
        """The fingerprint of ``stage``'s output given what it depends on besides the stores."""
        text = json.dumps([self._base, stage, STAGE_VERSIONS[stage], sorted(depends.items())], default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def file(self, stage: str, key: str) -> Path:
        return self.path / f"{stage}-{key}.npz"

    def load(self, stage: str, key: str) -> dict[str, np.ndarray] | None:
        """The arrays saved for ``stage`` under ``key``, or None when there are none or they do not check out
        (a damaged file is removed, with its folder of parts). A stage with parts (:meth:`part`) is returned only
        when every part listed in its ``parts`` array still has the SHA-256 listed in ``part_sha256``."""
        file = self.file(stage, key)
        if not file.exists():
            return None
        try:
            with np.load(file, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError):
            arrays = None
        good = arrays is not None and str(arrays.pop(_CHECKSUM, "")) == _digest(arrays)
        if good and arrays is not None and "parts" in arrays:
            folder = self.folder(stage, key)
            try:
                good = all(hashlib.sha256((folder / str(name)).read_bytes()).hexdigest() == str(digest)
                           for name, digest in zip(arrays["parts"], arrays["part_sha256"], strict=True))
            except OSError:
                good = False
        if not good or arrays is None:
            file.unlink(missing_ok=True)
            shutil.rmtree(self.folder(stage, key), ignore_errors=True)
            return None
        self.used.append(file)
        return arrays

    def save(self, stage: str, key: str, arrays: dict[str, np.ndarray]) -> None:
        """Keep ``arrays`` as ``stage``'s output under ``key``, atomically, with their checksum: the commit of the
        stage (of its parts too, listed in ``parts`` and ``part_sha256``)."""
        buffer = io.BytesIO()
        named: dict[str, Any] = {**arrays, _CHECKSUM: np.array(_digest(arrays))}
        np.savez(buffer, **named)
        file = self.file(stage, key)
        try:
            # the view released even when the write fails (a full disk), or the buffer cannot be freed
            with atomic_write(file) as stream, buffer.getbuffer() as view:
                stream.write(view)
        except OSError as error:
            raise StoreError(f"cannot write --work-dir {self.path}: {error.strerror or error}") from error
        self.used.append(file)

    def folder(self, stage: str, key: str) -> Path:
        """Where the parts of a stage written by many tasks go (every worker must see it)."""
        return self.path / f"{stage}-{key}"


    def finish(self, keep: bool) -> None:
        """After a complete run: remove the work files (every stage's file or folder here, and what killed
        writes left) unless ``keep``; the folder too when nothing else is in it."""
        if keep:
            return
        for name in os.listdir(self.path):
            if not _STAGE_PREFIX.match(name.lstrip(".")):
                continue
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
        try:
            self.path.rmdir()  # only when nothing else is there
        except OSError:
            pass


def write_part(folder: Path, name: str, arrays: dict[str, np.ndarray]) -> str:
    """Write one part of a stage (a task's share of it) atomically into ``folder``: its SHA-256, for the index."""
    buffer = io.BytesIO()
    named: dict[str, Any] = dict(arrays)
    np.savez(buffer, **named)
    data = buffer.getvalue()
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / name) as stream:
        stream.write(data)
    return hashlib.sha256(data).hexdigest()


def read_part(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of one part, checked by :meth:`WorkDir.load` before."""
    with np.load(path, allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}
