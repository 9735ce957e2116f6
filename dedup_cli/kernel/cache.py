"""Whether the compiled kernel waits in numba's on-disk cache, and what is known of compiling it there.

Loading the compiled kernel from numba's cache takes about 0.4 s; compiling it takes 8 s or more. So no run
waits for the compiler when numpy could sign instead: ``--kernel auto`` takes the compiled kernel only when
:func:`cached` says a fresh process can load it, and otherwise signs with numpy while one detached process, at
the lowest priority, compiles it for later runs (:mod:`dedup_cli.kernel.background`).

How this is known without importing numba (which alone costs 0.25 s): a process that has the kernel compiled
or loaded records (:func:`record_compiled`), in a small JSON file, the cache files numba keeps it in (their
sizes and modification times), under a *key* of everything numba's cache depends on: this Python, numba's
installation, the source file of the kernel (numba's own test of freshness: its modification time and size),
the ``NUMBA_*`` environment variables (``NUMBA_CACHE_DIR`` moves the cache) and the machine. :func:`cached`
reads that file and stats those files: a changed key, or a cache file gone or rewritten, means not cached.

The records live in ``__pycache__`` beside this file (where numba keeps its cache when it can write there),
else in the user's cache directory (``$XDG_CACHE_HOME/dedup-cli``, by default ``~/.cache/dedup-cli``), one set of
files per key: ``compiled-kernel-KEY.json`` (the cache files), ``.lock`` (held by the process compiling),
``.failed`` (why the last compilation failed) and ``.log`` (one line per background attempt).

Once: the background process holds an exclusive lock on the ``.lock`` file while it compiles; another that
finds the lock taken ends at once, and one that takes it after a compilation finished finds the kernel cached.
A failure is recorded and silent: later runs sign with numpy without trying again (``sign -v`` says why, and
``--kernel numba`` compiles in the foreground, showing the error or, on success, clearing the record).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

RECORD_PREFIX = "compiled-kernel-"
SOURCE = Path(__file__).with_name("compiled.py")
PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent  # the directory holding dedup_cli


def cache_key() -> dict[str, Any]:
    """Everything numba's cached code of the kernel depends on, as JSON values (a few ``stat`` calls)."""
    spec = importlib.util.find_spec("numba")
    numba_origin = spec.origin if spec is not None and spec.origin else ""
    key: dict[str, Any] = {"python": sys.version, "prefix": sys.prefix, "machine": os.uname().machine,
                           "environment": sorted([name, value] for name, value in os.environ.items()
                                                 if name.startswith("NUMBA_"))}
    for name, path in (("numba", numba_origin), ("source", str(SOURCE))):
        try:
            status = os.stat(path)
            key[name] = [path, status.st_mtime_ns, status.st_size]
        except OSError:
            key[name] = [path, 0, 0]
    return key


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def record_directory() -> Path:
    """Where the records are kept: ``__pycache__`` beside the kernel when writable, else the user's cache."""
    beside = SOURCE.parent / "__pycache__"
    try:
        beside.mkdir(exist_ok=True)
        if os.access(beside, os.W_OK):
            return beside
    except OSError:
        pass
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = Path(base) / "dedup-cli"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _paths(key: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Path]]:
    """The current key (or ``key``) and the paths of its record files."""
    key = cache_key() if key is None else key
    stem = RECORD_PREFIX + _digest(key)
    directory = record_directory()
    return key, {kind: directory / f"{stem}.{kind}" for kind in ("json", "lock", "failed", "log")}


def _read_record(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("key") == key else None


def cached() -> bool:
    """Whether a fresh process can load the compiled kernel from numba's cache without compiling it."""
    try:
        key, paths = _paths()
    except OSError:
        return False
    record = _read_record(paths["json"], key)
    if record is None or not record.get("files"):
        return False
    for path, size, mtime_ns in record["files"]:
        try:
            status = os.stat(path)
        except OSError:
            return False
        if status.st_size != size or status.st_mtime_ns != mtime_ns:
            return False
    return True


def failure() -> str | None:
    """Why compiling the kernel failed for the current key, or None."""
    try:
        key, paths = _paths()
    except OSError:
        return None
    record = _read_record(paths["failed"], key)
    return None if record is None else str(record.get("reason", "unknown"))


def compiling() -> bool:
    """Whether a process holds the lock of the current key (is compiling the kernel)."""
    import fcntl

    try:
        _, paths = _paths()
        with open(paths["lock"], "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _write_json(path: Path, content: dict[str, Any]) -> None:
    from dedup_cli.atomic_files import atomic_write

    with atomic_write(path, binary=False) as stream:
        stream.write(json.dumps(content, indent=1) + "\n")


def record_failure(reason: str) -> None:
    """Record why the kernel could not be compiled into numba's cache (later runs do not retry)."""
    try:
        key, paths = _paths()
        _write_json(paths["failed"], {"key": key, "reason": " ".join(reason.split())})
    except OSError:
        pass


def record_compiled(dispatcher: Any) -> None:
    """Record where numba cached the kernel, once this process has compiled or loaded it (``dispatcher``: the
    compiled function); records a failure when numba keeps no cache of it (it could not write one)."""
    if cached():
        return
    try:
        cache = dispatcher._cache
        directory = Path(cache._cache_path)
        index = Path(cache._cache_file._index_path)
    except AttributeError:
        record_failure("numba keeps no on-disk cache of the compiled kernel")
        return
    stem = index.name[: -len(".nbi")]
    files = [index, *sorted(directory.glob(f"{stem}.*.nbc"))]
    try:
        found = [[str(path), status.st_size, status.st_mtime_ns] for path in files
                 for status in [os.stat(path)]]
    except OSError:
        found = []
    if len(found) < 2:
        record_failure(f"numba did not write the compiled kernel to its cache in {directory}")
        return
    try:
        key, paths = _paths()
        _write_json(paths["json"], {"key": key, "files": found})
        paths["failed"].unlink(missing_ok=True)
    except OSError:
        pass


def record_paths() -> dict[str, Path]:
    """The record files of the current key: ``json``, ``lock``, ``failed`` and ``log``."""
    return _paths()[1]


def log(path: Path, line: str) -> None:
    """Append ``line`` (with the time and this process's id) to the log of background compilations."""
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {line}\n")
    except OSError:
        pass
