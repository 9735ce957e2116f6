"""The writer lock of a store in object storage, and how a writer fences out the runs before it.

A bucket has neither ``flock`` nor rename, so the protocol (docs/store-format.md) rests on the conditional writes
S3 and its kin support, which the server applies atomically:

* **The lock** is the object ``_dedup.lock``, created with ``If-None-Match: *`` (of two runs, one creates it)
  and holding the run's random token, pid and host. The holder rewrites it every :data:`HEARTBEAT_SECONDS`
  with ``If-Match`` on its own last version, so its modification time says the holder is alive; a lock not
  rewritten for :data:`LEASE_SECONDS` (by the server's clock), or held by a process of this host that is gone,
  is stale and may be taken over, again with ``If-Match`` (of two runs, one takes it). A second run therefore
  fails at once naming the holder, or waits, as with a local store.
* **The commit** is one conditional PUT of the manifest, ``If-Match`` on the version the run read after taking the
  lock: should two runs ever both believe they hold it (a holder paused past its lease), only one commits.
* **The fence.** Before it deletes what killed runs left (files no manifest lists, uploads never completed), a
  new holder rewrites the manifest with its own token, so that a run from before can no longer commit, then
  makes sure it still holds the lock, so that what it listed cannot hold a file of a run that took the lock
  after it. A run's own commit deletes only the files its commit stopped listing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import threading
import time

from dedup_cli.atomic_files import process_alive
from dedup_cli.errors import StoreError
from dedup_cli.objectstore import objects
from dedup_cli.objectstore.objects import ConditionFailed
from dedup_cli.objectstore.urls import ObjectPath
from dedup_cli.store.format import LOCK_NAME, MANIFEST_NAME
from dedup_cli.store.manifest import Manifest, is_ours, listed_files, read_manifest_version, write_manifest

LEASE_SECONDS = 60.0
"""A lock not rewritten for this long (server time) belongs to a run that is gone, and may be taken over."""
HEARTBEAT_SECONDS = 10.0
"""How often the holder rewrites the lock."""
POLL_SECONDS = 0.5
"""How often a run that waits (``--wait``) looks at the lock again."""


@dataclasses.dataclass(frozen=True)
class Holder:
    token: str
    pid: int
    host: str

    def described(self) -> str:
        return f"pid {self.pid}" if self.host == socket.gethostname() else f"pid {self.pid} on {self.host}"


class ObjectLock:
    """The writer lock of the store at ``path`` (see the module); ``token`` names this run in the lock, in the
    files it writes and in the manifests it commits."""

    def __init__(self, path: ObjectPath, timeout: float | None, token: str | None = None) -> None:
        self.path = path
        self.timeout = timeout
        self.token = token or secrets.token_hex(8)
        self._url = str(path / LOCK_NAME)
        self._version: str | None = None
        self._beats = 0
        self._lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def _body(self) -> bytes:
        self._beats += 1
        return json.dumps({"token": self.token, "pid": os.getpid(), "host": socket.gethostname(),
                           "beat": self._beats, "written_by": "dedup sign"}).encode()

    def _holder(self) -> tuple[Holder | None, str, float]:
        """The lock's holder (None: no lock, or not ours to read), its version and age in seconds."""
        try:
            data, described, now = objects.read_described(self._url)
        except FileNotFoundError:
            return None, "", 0.0
        try:
            document = json.loads(data)
            holder = Holder(str(document["token"]), int(document["pid"]), str(document["host"]))
        except (ValueError, KeyError, TypeError):
            holder = Holder("", 0, "unknown")
        return holder, described.etag, now - described.mtime_ns / 1e9

    def acquire(self) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            while True:
                try:
                    self._version = objects.put(self._url, self._body(), if_none_match=True)
                    break
                except ConditionFailed:
                    pass
                holder, version, age = self._holder()
                if holder is None:
                    continue  # released meanwhile
                if holder.token == self.token:  # our own PUT took effect, its answer was lost
                    self._version = version
                    break
                stale = age > LEASE_SECONDS or (holder.host == socket.gethostname() and not process_alive(holder.pid))
                if stale:
                    try:
                        self._version = objects.put(self._url, self._body(), if_match=version)
                        break
                    except ConditionFailed:
                        continue
                if deadline is not None and time.monotonic() >= deadline:
                    waited = f" after waiting {self.timeout:g} s" if self.timeout else ""
                    raise StoreError(f"store {self.path} is being written by another dedup run "
                                     f"({holder.described()}){waited}; try again later")
                time.sleep(POLL_SECONDS)
        except OSError as error:
            raise StoreError(f"cannot lock store {self.path}: {error.strerror or error}") from error
        self._thread = threading.Thread(target=self._heartbeat, name="dedup-lock-heartbeat", daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            with self._guard:
                if self._stop.is_set():
                    return
                try:
                    self._version = objects.put(self._url, self._body(), if_match=self._version)
                except ConditionFailed:
                    holder, version, _ = self._holder()
                    if holder is not None and holder.token == self.token:
                        self._version = version
                    else:
                        self._lost = True
                        return
                except OSError:
                    continue  # a passing failure: the next beat tries again, well within the lease

    def check(self) -> None:
        """Raise a :class:`StoreError` unless this run still holds the lock (read from the bucket)."""
        try:
            holder, _, _ = self._holder()
        except OSError as error:
            raise StoreError(f"cannot lock store {self.path}: {error.strerror or error}") from error
        if self._lost or holder is None or holder.token != self.token:
            raise StoreError(f"store {self.path} was taken over by another dedup run while this one was paused "
                             "past its lease; nothing was committed; run again")

    def release(self) -> None:
        if self._version is None:
            return
        self._stop.set()
        with self._guard:
            version, self._version = self._version, None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=HEARTBEAT_SECONDS)
        if self._lost:
            return
        try:
            objects.delete(self._url, if_match=version)
        except OSError:
            pass  # a stale lock: the next run sees it is ours and gone, or waits for its lease to end


def read_versioned_manifest(path: ObjectPath) -> tuple[Manifest, str | None]:
    data, version = read_manifest_version(path)
    return Manifest.from_json(path, data), version


class UncertainCommit(StoreError):
    """The commit's PUT failed in a way that leaves open whether it took effect, and the manifest could not be
    read back to tell: the run's files must be left in place (the next run deletes them if they are garbage)."""


def commit_manifest(path: ObjectPath, manifest: Manifest, version: str | None, token: str) -> str | None:
    """Write ``manifest`` (as the run ``token``) over ``version``; the new version.

    When the server refuses (another run committed since ``version`` was read), the manifest is read back: if it
    is this run's own (a PUT that took effect but whose answer was lost, then retried), the commit stands.
    """
    mine = dataclasses.replace(manifest, writer=token)
    try:
        return write_manifest(path, mine, version)
    except ConditionFailed:
        try:
            current, current_version = read_versioned_manifest(path)
        except (OSError, StoreError):
            current, current_version = None, None
        if current == mine:
            return current_version
        raise StoreError(f"store {path} was committed by another dedup run while this one wrote; this run's work "
                         "was not committed; run again") from None
    except OSError as error:
        # Whether the PUT took effect is unknown: read the manifest back to tell.
        try:
            current, current_version = read_versioned_manifest(path)
        except (OSError, StoreError):
            raise UncertainCommit(f"cannot commit to {path}: {error.strerror or error}; the store is as before "
                                  "this run or as after it (dedup info tells)") from error
        if current == mine:
            return current_version
        raise StoreError(f"cannot commit to {path}: {error.strerror or error}; nothing was committed") from error


def fence_and_clean(path: ObjectPath, manifest: Manifest, version: str | None, lock: ObjectLock) -> str | None:
    """Delete what runs that never committed left in the store (files the manifest does not list, uploads never
    completed), fencing those runs out first (see the module); the manifest's version after.

    What is deleted was listed before this run made sure it still holds the lock: a run that takes the lock over
    after that check writes only files the listing cannot hold.
    """
    listed = listed_files(manifest)
    garbage = [item.url for item in objects.listing(str(path), recursive=False)
               if (name := item.url.rsplit("/", 1)[1]) not in listed and name not in (MANIFEST_NAME, LOCK_NAME)
               and is_ours(name)]
    uploads = objects.unfinished_uploads(str(path))
    if not garbage and not uploads:
        return version
    mine = dataclasses.replace(manifest, writer=lock.token)
    try:
        version = write_manifest(path, mine, version)
    except ConditionFailed:
        raise StoreError(f"store {path} was committed by another dedup run while this one took the lock; run "
                         "again") from None
    lock.check()
    objects.delete_many(garbage)
    for url, upload, _ in uploads:
        objects.abort_upload(url, upload)
    return version
