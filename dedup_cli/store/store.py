"""Opening, creating and reading a store; a store object hands out snapshots, runs and compactions.

A store is a directory (format 2) of Parquet parts and a manifest, grown by sign runs and read as a snapshot
(docs/store-format.md); a single Parquet file (format 1) is still read. A store may also be a prefix in object
storage (``s3://bucket/sigs``), the same files under the same names, committed by the protocol of
:mod:`dedup_cli.store.leases`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa

from dedup_cli.atomic_files import path_kind
from dedup_cli.errors import NotAStore, StoreError, UsageError, store_beside
from dedup_cli.inputs.locations import infer_id_root
from dedup_cli.objectstore.objects import ConditionFailed, require_s3
from dedup_cli.objectstore.urls import ObjectPath, is_url
from dedup_cli.params import SignatureParams
from dedup_cli.store.document_index import DocumentIndex, index_of_rows
from dedup_cli.store.format import (
    FORMAT_VERSION,
    LEGACY_FORMAT_VERSION,
    MANIFEST_NAME,
    column_problem,
    open_parquet,
    parse_metadata,
    removal_schema,
)
from dedup_cli.store.legacy import legacy_error, read_legacy_table
from dedup_cli.store.manifest import (
    Manifest,
    PartFile,
    RunInput,
    RunRecord,
    clean_garbage,
    is_ours,
    listed_files,
    read_manifest_version,
    write_manifest,
)
from dedup_cli.store.places import Folder, names, remove_all
from dedup_cli.store.snapshot import (
    SIGNATURE_COLUMNS,
    StoredSignatures,
    may_hold_stdin,
    missing_file,
    named_rows,
    read_files,
    read_rows,
    read_snapshot,
    stored_signatures,
)

if TYPE_CHECKING:
    from dedup_cli.store.leases import ObjectLock
    from dedup_cli.store.lock import WriterLock
    from dedup_cli.store.runs import StoreRun

# The writing side (runs, locks, leases, compaction: 4-5 ms of imports) is imported by the methods that write, so
# that info, estimate and find, which only read, do without it.

READ_ATTEMPTS = 8
T = TypeVar("T")


class Store:
    """An opened store: its parameters and a snapshot of its manifest (format 2) or footer (format 1).

    Reading needs no lock; :meth:`begin_run` and :meth:`compact` take the writer lock.
    """

    def __init__(self, path: Folder, format_version: int, params: SignatureParams, manifest: Manifest | None,
                 legacy_rows: int = 0, version: str | None = None) -> None:
        self.path = path
        self.format_version = format_version
        self.params = params
        self._manifest = manifest
        self._legacy_rows = legacy_rows
        self._version = version  # in object storage: the manifest's ETag, which a commit must still find

    @property
    def manifest(self) -> Manifest | None:
        """The manifest as last read (None for a format 1 store)."""
        return self._manifest

    @property
    def runs(self) -> tuple[RunRecord, ...]:
        """Every committed sign run, oldest first."""
        return () if self._manifest is None else self._manifest.runs

    @property
    def last_run(self) -> int:
        """The number of the last committed run; 0 before the first (and for format 1 stores)."""
        return 0 if self._manifest is None else self._manifest.last_run

    @property
    def documents(self) -> int:
        """The number of live documents."""
        return self._legacy_rows if self._manifest is None else self._manifest.documents

    @property
    def id_root(self) -> str | None:
        """The directory file ids are relative to, as recorded (None before a run named files)."""
        return None if self._manifest is None else self._manifest.id_root

    def refresh(self) -> None:
        """Read the manifest again (another run may have committed since this store was opened)."""
        if self._manifest is not None:
            data, self._version = read_manifest_version(self.path)
            self._manifest = Manifest.from_json(self.path, data)
            self.params = self._manifest.params

    def _committed(self, manifest: Manifest, version: str | None) -> None:
        self._manifest, self._version = manifest, version

    def reading(self, read: Callable[[Manifest], T]) -> T:
        """``read(manifest)``; when a listed file vanished (a compaction committed), again with the newer one. A
        listed file missing while the manifest stays the same is damage, not a race: a :class:`StoreError` says so
        at once (reading again would meet the same gap)."""
        assert self._manifest is not None
        for _ in range(READ_ATTEMPTS):
            try:
                return read(self._manifest)
            except FileNotFoundError as missing:
                before = self._manifest
                self.refresh()
                if self._manifest == before:
                    raise missing_file(self.path, missing) from None
        raise StoreError(f"{self.path} kept changing while it was read; try again")

    def _live(self, columns: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
        """``columns`` of the stored rows (with ``id`` and ``run``) and the positions of the live ones, in id
        order."""
        if self._manifest is None:
            assert isinstance(self.path, Path)  # a format 1 store is a local file
            table = read_legacy_table(self.path, list(dict.fromkeys([*columns, "id", "run"])))
            return table, np.arange(table.num_rows, dtype=np.int64)
        return self.reading(lambda manifest: read_snapshot(self.path, manifest, columns))

    def document_index(self) -> DocumentIndex:
        """The live documents' ids, paths, sizes, modification times, content hashes and runs, in id order."""
        return index_of_rows(*self._live(["id", "path", "size", "mtime_ns", "content_hash", "run"]))

    @property
    def inputs(self) -> tuple[RunInput, ...]:
        """How each sign run read its inputs (none for runs of older versions, and format 1 stores)."""
        return () if self._manifest is None else self._manifest.inputs

    @property
    def id_scheme(self) -> RunInput | None:
        """How the store's runs that read records gave them ids (the latest such run's options; None before one
        did): the scheme the store pins, which liveness re-reads a changed source with."""
        return next((recorded for recorded in reversed(self.inputs) if recorded.records), None)

    def source_files(self) -> set[str]:
        """The files the live documents were read from: their locations without a record's ``#line=``/``#row=``
        (``#csv=``/``#tsv=``/``#json=``) part (``-`` for stdin)."""
        import pyarrow.compute as pc

        table, keep = self._live(["path"])
        paths = table.column("path").take(pa.array(keep, pa.int64()))
        files = pc.replace_substring_regex(paths,
                                           pattern=r"#(?:line|row|csv|tsv|json)=\d+(?:&(?:field|column)=[^&#]*)?$",
                                           replacement="")
        return set(pc.unique(files).to_pylist())

    def stdin_documents(self, among: Sequence[str] = ()) -> tuple[int, list[str]]:
        """How many live documents were read from stdin (their locations start with ``-``), which nothing can read
        again to verify them, and which of the ids ``among`` they hold. The parts' statistics rule stdin out
        first, reading no row: a location starting with ``-`` sorts before every path and URL."""
        if self._manifest is not None and not self.reading(lambda manifest: may_hold_stdin(self.path, manifest)):
            return 0, []
        import pyarrow.compute as pc

        table, keep = self._live(["path"])
        live = table.take(pa.array(keep, pa.int64()))
        ids = live.column("id").filter(pc.starts_with(live.column("path"), "-")).combine_chunks()
        asked = pa.array(list(among), pa.string())
        return len(ids), asked.filter(pc.is_in(asked, value_set=ids)).to_pylist() if len(ids) and len(asked) else []

    def check_run(self, run: int) -> None:
        """Raise a UsageError unless ``run`` is 0 or a committed run (for ``find --new-since``)."""
        if run == 0 or any(record.run == run for record in self.runs):
            return
        if not self.runs:
            raise UsageError(f"run {run} is not in {self.path}: it has no sign runs yet (only run 0, before any)")
        raise UsageError(
            f"run {run} is not in {self.path}: its runs are 1 to {self.last_run} (0 means before the first); "
            "dedup info lists them"
        )

    def read(self, since_run: int | None = None) -> StoredSignatures:
        """The live rows in ascending id order; with ``since_run``, only those written by later runs."""
        if since_run is not None:
            self.check_run(since_run)
        table, keep = self._live(SIGNATURE_COLUMNS)
        if since_run is not None:
            keep = keep[table.column("run").take(pa.array(keep, pa.int64())).to_numpy() > since_run]
        if keep.size != table.num_rows or not np.array_equal(keep, np.arange(keep.size)):
            table = table.take(pa.array(keep, pa.int64()))
        return stored_signatures(table, self.params, self.path)

    def shingle_counts(self) -> np.ndarray:
        """int64[n_live]: the live documents' shingle counts in id order; no signature is read."""
        table, keep = self._live(["shingle_count"])
        # Indexed in numpy: ChunkedArray.take would import pyarrow.compute (30-50 ms) for ``dedup info`` alone.
        return table.column("shingle_count").to_numpy().astype(np.int64, copy=False)[keep]

    def live_ids(self, batch: int = 1 << 16) -> Iterator[list[str]]:
        """The live documents' ids in id order (the order every reader of the store sees), ``batch`` at a time:
        only the Arrow ``id`` column is held, never a Python string per document (10^7 ids stream)."""
        table, keep = self._live(["id"])
        ids = table.column("id")
        for start in range(0, keep.size, batch):
            yield ids.take(pa.array(keep[start:start + batch], pa.int64())).to_pylist()

    def read_documents(self, ids: Sequence[str]) -> tuple[StoredSignatures, list[str]]:
        """The live documents named by ``ids``, in that order, and the ids that are not stored.

        Only the ids (and runs) of the whole store are read; the signatures and other columns only from the
        row groups that hold the named documents.
        """
        if self._manifest is None:
            assert isinstance(self.path, Path)  # a format 1 store is a local file
            table = read_legacy_table(self.path, SIGNATURE_COLUMNS)
            rows, missing = named_rows(table.column("id"), np.arange(table.num_rows, dtype=np.int64), ids)
            return stored_signatures(table.take(pa.array(rows, pa.int64())), self.params, self.path), missing

        def read(manifest: Manifest) -> tuple[pa.Table, list[str]]:
            # The positions refer to this manifest's parts, so both reads use it (a compaction restarts both).
            table, keep = read_snapshot(self.path, manifest, ["id"])
            rows, missing = named_rows(table.column("id"), keep, ids)
            return read_rows(self.path, manifest, rows, SIGNATURE_COLUMNS), missing

        chosen, missing = self.reading(read)
        return stored_signatures(chosen, self.params, self.path), missing

    def begin_run(self, params: SignatureParams, lock_timeout: float | None = 0.0, replace: bool = False) -> StoreRun:
        """Take the writer lock and start run ``last_run + 1``; use the result as a context manager.

        Args:
            params: must equal the store's (a :class:`UsageError` names each differing parameter); a store
                keeps its parameters for life.
            lock_timeout: seconds to wait for another run to finish (None waits for ever); 0 fails at once
                with a :class:`StoreError` naming the other run's pid.
            replace: the run's rows replace every stored row (a whole re-sign, e.g. of integer sets, which
                have no modification times), in one commit like any run.
        """
        from dedup_cli.store.runs import StoreRun

        lock, manifest = self._lock(lock_timeout)
        try:
            differences = manifest.params.differences(params)
            if differences:
                raise UsageError(
                    f"{self.path} was signed with other parameters ({'; '.join(differences)}, stored vs requested); "
                    f"sign into a new store or remove {self.path}"
                )
            return StoreRun(self.path, lock, manifest, params, replace, on_commit=self._committed,
                            version=self._version)
        except BaseException:
            lock.release()
            raise

    def _lock(self, lock_timeout: float | None) -> tuple[WriterLock | ObjectLock, Manifest]:
        """Take the writer lock, read the manifest again under it and delete what killed runs left behind."""
        from dedup_cli.store.leases import ObjectLock, fence_and_clean

        if self._manifest is None:
            raise legacy_error(Path(str(self.path)))
        lock = writer_lock(self.path, lock_timeout)
        lock.acquire()
        try:
            self.refresh()
            assert self._manifest is not None
            if isinstance(self.path, ObjectPath):
                assert isinstance(lock, ObjectLock)
                self._version = fence_and_clean(self.path, self._manifest, self._version, lock)
            else:
                clean_garbage(self.path, self._manifest)
        except BaseException:
            lock.release()
            raise
        return lock, self._manifest

    def compact(self, lock_timeout: float | None = 0.0) -> bool:
        """Rewrite the live rows into fresh parts and drop the removal files; False when already compact."""
        from dedup_cli.store.compaction import compact_parts
        from dedup_cli.store.leases import commit_manifest
        from dedup_cli.store.parts import FileCounter, commit_files

        lock, manifest = self._lock(lock_timeout)
        try:
            if not manifest.removals and sum(not p.compacted for p in manifest.parts) == 0:
                return False
            counter = FileCounter(manifest.next_file)
            removals = read_files(self.path, [r.file for r in manifest.removals], ["id", "run"], removal_schema())
            written = compact_parts(self.path, manifest.params, [self.path / p.file for p in manifest.parts],
                                    removals, counter, lock.token)
            commit_files(self.path, written)
            new = dataclasses.replace(
                manifest, parts=tuple(PartFile(w.name, w.rows, True) for w in written), removals=(),
                next_file=counter.next, documents=sum(w.rows for w in written),
            )
            if isinstance(self.path, ObjectPath):
                assert lock.token is not None
                lock.check()
                self._version = commit_manifest(self.path, new, self._version, lock.token)
                self._manifest = dataclasses.replace(new, writer=lock.token)
                remove_all(self.path, sorted(listed_files(manifest) - listed_files(new)))
            else:
                write_manifest(self.path, new)
                self._manifest = new
                clean_garbage(self.path, new)
            return True
        finally:
            lock.release()


def writer_lock(path: Folder, timeout: float | None) -> WriterLock | ObjectLock:
    """The writer lock of the store at ``path``: a ``flock`` locally, a leased object in object storage."""
    from dedup_cli.store.leases import ObjectLock
    from dedup_cli.store.lock import WriterLock

    return ObjectLock(path, timeout) if isinstance(path, ObjectPath) else WriterLock(path, timeout)


def _open_objects(path: ObjectPath) -> Store:
    require_s3(str(path))
    try:
        data, version = read_manifest_version(path)
    except StoreError:
        kind = path_kind(str(path))
        if kind is None:
            raise StoreError(f"store {path} does not exist; create it with: dedup sign INPUT -o {path}") from None
        if kind == "file":
            raise StoreError(f"{path} is an object, not a store; a store is a prefix written by dedup sign") from None
        raise
    manifest = Manifest.from_json(path, data)
    return Store(path, FORMAT_VERSION, manifest.params, manifest, version=version)


def open_store(path: str | os.PathLike[str] | ObjectPath) -> Store:
    """Open the store at ``path`` (a format 2 directory or a format 1 file, or a prefix in object storage),
    reading only its manifest or footer."""
    if isinstance(path, ObjectPath) or is_url(path):
        return _open_objects(ObjectPath(str(path)))
    path = Path(path)
    kind = path_kind(path)
    if kind == "directory":
        try:
            data, version = read_manifest_version(path)
        except StoreError:
            if not any(not is_ours(name) for name in names(path)):
                raise  # an empty directory, or a store that lost its manifest
            # a directory of other files: maybe the corpus itself, named where its store belongs
            raise NotAStore(path, f"store {path} is a directory without a dedup manifest ({MANIFEST_NAME})") from None
        manifest = Manifest.from_json(path, data)
        return Store(path, FORMAT_VERSION, manifest.params, manifest)
    if kind is None:
        raise StoreError(f"store {path} does not exist; create it with: dedup sign INPUT -o {path}")
    if kind != "file":  # never opened: a FIFO would wait for a writer, a device read forever
        raise StoreError(f"{path} is a {kind}, not a store; a store is a directory written by dedup sign")
    parquet = open_parquet(path)
    legacy_version, params = parse_metadata(path, parquet.schema_arrow.metadata)
    if legacy_version != LEGACY_FORMAT_VERSION:
        raise StoreError(f"{path} is one part of a directory store; pass the directory {path.parent}")
    problem = column_problem(parquet.schema_arrow, legacy=True)
    if problem is not None:
        raise StoreError(f"{path} is damaged (not a file dedup wrote: {problem}); sign the corpus again into a "
                         "new store")
    return Store(path, legacy_version, params, None, legacy_rows=parquet.metadata.num_rows)  # format 1: local only


def refuse_foreign_directory(path: Folder) -> None:
    foreign = [name for name in names(path) if not is_ours(name)]
    if foreign:
        raise StoreError(
            f"refusing to overwrite {path}: it is a directory holding other files ({foreign[0]}); choose another path"
        )


def create_store(path: str | os.PathLike[str], params: SignatureParams, exist_ok: bool = False,
                 lock_timeout: float | None = 0.0) -> Store:
    """Create an empty store (a directory with a manifest and no run) at ``path``; its parent must exist.

    With ``exist_ok``, a store already at ``path`` (or one created concurrently) is opened instead; its
    parameters are checked by :meth:`Store.begin_run`. A file or directory that is not a dedup store is
    never overwritten.
    """
    if is_url(path):
        return _create_objects(ObjectPath(str(path)), params, exist_ok, lock_timeout)
    path = Path(path)
    if path.exists() and not path.is_dir():
        try:
            existing = open_store(path)
        except NotAStore as error:  # its hint would sign the file into another store: not what was asked
            raise StoreError(f"refusing to overwrite {path}: {error.problem}; choose another path for the store, "
                             f"e.g. {store_beside(path)}") from None
        except StoreError as error:
            raise StoreError(f"refusing to overwrite {path}: {error}") from None
        if exist_ok:
            return existing
        raise StoreError(f"store {path} already exists; sign into it, or choose another path")
    if (path / MANIFEST_NAME).exists():
        if exist_ok:
            return open_store(path)
        raise StoreError(f"store {path} already exists; sign into it, or choose another path")
    try:
        path.mkdir(exist_ok=True)
        refuse_foreign_directory(path)  # before the lock file is added to someone else's directory
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from error
    lock = writer_lock(path, lock_timeout)
    lock.acquire()
    try:
        if (path / MANIFEST_NAME).exists():  # created by a concurrent run between our check and the lock
            if exist_ok:
                return open_store(path)
            raise StoreError(f"store {path} already exists; sign into it, or choose another path")
        refuse_foreign_directory(path)
        clean_garbage(path, None)
        write_manifest(path, Manifest(params=params))
    finally:
        lock.release()
    return open_store(path)


def _create_objects(path: ObjectPath, params: SignatureParams, exist_ok: bool, lock_timeout: float | None
                    ) -> Store:
    """:func:`create_store` in object storage: the manifest is created with ``If-None-Match: *``, under the lock."""
    require_s3(str(path))
    kind = path_kind(str(path))  # also says, in one line, that the bucket is missing or the credentials are refused
    if kind == "file":
        raise StoreError(f"refusing to overwrite {path}: it is an object, not a store; choose another path")
    if kind == "directory":
        try:
            existing = _open_objects(path)
        except StoreError:
            refuse_foreign_directory(path)
        else:
            if exist_ok:
                return existing
            raise StoreError(f"store {path} already exists; sign into it, or choose another path")
    lock = writer_lock(path, lock_timeout)
    lock.acquire()
    try:
        refuse_foreign_directory(path)
        try:
            write_manifest(path, Manifest(params=params, writer=lock.token), None)
        except ConditionFailed:
            if not exist_ok:  # created by a concurrent run between our look and the lock
                raise StoreError(f"store {path} already exists; sign into it, or choose another path") from None
    finally:
        lock.release()
    return _open_objects(path)


def read_store(path: str | os.PathLike[str], since_run: int | None = None) -> StoredSignatures:
    """Read the live rows of a store in ascending id order, checking that this version understands it.

    Args:
        since_run: keep only the rows written by runs after this one (0: every row of a format 2 store);
            a run the store never had is a :class:`UsageError`.
    """
    return open_store(path).read(since_run)


def stored_params(path: str | os.PathLike[str]) -> SignatureParams | None:
    """The signature parameters of the store at ``path``; None when there is none (yet)."""
    if not os.path.isdir(path) or not os.path.exists(os.path.join(path, MANIFEST_NAME)):
        return None
    return open_store(path).params


def stored_id_root(path: str | os.PathLike[str]) -> str | None:
    """The id root recorded in the store at ``path``, or inferred from its rows (stores from before roots were
    recorded); None when there is no store or it has no file documents."""
    if is_url(path):
        try:
            store = open_store(path)
        except StoreError:
            return None
    elif not os.path.isdir(path) or not os.path.exists(os.path.join(path, MANIFEST_NAME)):
        return None
    else:
        store = open_store(path)
    if store.id_root is not None or store.documents == 0:
        return store.id_root
    index = store.document_index()
    return infer_id_root(index.ids, index.paths)
