"""A work folder where ``find --work-dir`` keeps each completed stage, so a run killed part-way resumes there.

Each stage's output is a set of named numpy arrays in one file, ``STAGE-KEY.npz``, written under a temporary name
and renamed into place (:mod:`dedup_cli.files`), holding beside the arrays the SHA-256 of their bytes. KEY is a
fingerprint of everything the output depends on: the store's snapshot (its manifest, or for a format 1 file its
size, time and inode; and the reference store's with ``--against``), the version of dedup, the stage's own
version (:data:`STAGE_VERSIONS`, raised whenever a stage's output would change), and the options that matter to
that stage. A file is used only when its name's fingerprint is the one this run computes and its checksum holds:
a file from another snapshot or other options is never read, and a torn or damaged one is removed and recomputed.

A stage too large for one file (the Dask engine's, written by its workers) is a folder ``STAGE-KEY/`` of part
files and an index written last, which commits it.
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

from dedup_cli.errors import StoreError
from dedup_cli.files import atomic_write, path_kind
from dedup_cli.store.store import Store
from dedup_cli.version import __version__

STAGE_VERSIONS = {"candidates": 1, "scored": 1, "decisions": 1}
"""Raised when a stage's output for the same inputs would change, so older work files are not reused."""
_CHECKSUM = "__sha256__"
_STAGE_PREFIX = re.compile(r"(candidates|scored|decisions)-[0-9a-f]{24}")


def snapshot_of(store: Store) -> str:
    """What identifies a store's contents as opened: its manifest, or for a format 1 file its size, time, inode."""
    if store.manifest is None:
        status = os.stat(store.path)
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
        self.path = Path(path)
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
        (a damaged file is removed)."""
        file = self.file(stage, key)
        if not file.exists():
            return None
        try:
            with np.load(file, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError):
            arrays = None
        if arrays is None or str(arrays.pop(_CHECKSUM, "")) != _digest(arrays):
            file.unlink(missing_ok=True)
            return None
        self.used.append(file)
        return arrays

    def save(self, stage: str, key: str, arrays: dict[str, np.ndarray]) -> None:
        """Keep ``arrays`` as ``stage``'s output under ``key``, atomically, with their checksum."""
        buffer = io.BytesIO()
        named: dict[str, Any] = {**arrays, _CHECKSUM: np.array(_digest(arrays))}
        np.savez(buffer, **named)
        file = self.file(stage, key)
        try:
            with atomic_write(file) as stream:
                stream.write(buffer.getbuffer())
        except OSError as error:
            raise StoreError(f"cannot write --work-dir {self.path}: {error.strerror or error}") from error
        self.used.append(file)

    def folder(self, stage: str, key: str) -> Path:
        """A folder of parts for a stage written by many tasks; committed by :meth:`commit_folder`."""
        return self.path / f"{stage}-{key}"

    def commit_folder(self, stage: str, key: str, parts: dict[str, str]) -> None:
        """Write the index of a stage's folder (part name → SHA-256 of its bytes): the stage is complete."""
        index = self.path / f"{stage}-{key}.index.json"
        with atomic_write(index, binary=False) as stream:
            stream.write(json.dumps(parts, sort_keys=True))
        self.used += [index, self.folder(stage, key)]

    def load_folder(self, stage: str, key: str) -> list[Path] | None:
        """The parts of a committed stage folder, in name order, each checked against the index; None when the
        stage is not complete or a part does not check out (then the folder is removed)."""
        index = self.path / f"{stage}-{key}.index.json"
        folder = self.folder(stage, key)
        if not index.exists():
            return None
        try:
            parts = json.loads(index.read_text(encoding="utf-8"))
            files = [folder / name for name in sorted(parts)]
            good = all(hashlib.sha256(file.read_bytes()).hexdigest() == parts[file.name] for file in files)
        except (OSError, ValueError, KeyError):
            good = False
        if not good:
            index.unlink(missing_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
            return None
        self.used += [index, folder]
        return files

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
