"""One sign run: new and changed rows written as parts, removals recorded, committed by one manifest replace.

Commit protocol (docs/store-format.md): under the writer lock, new parts and the removal file are written
under temporary names (``.part-000007.parquet.tmp``), fsynced and renamed; then the manifest is written to a
temporary file, fsynced, ``os.replace``d and the directory fsynced. The manifest replace is the only commit
point, so a run killed at any moment leaves the store as it was before the run or as after it. In object
storage the parts are written at final names carrying the run's token, and the manifest with one conditional
PUT (:mod:`dedup_cli.store.leases`).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType

import numpy as np
import pyarrow as pa

from dedup_cli.errors import StoreError
from dedup_cli.objectstore.urls import ObjectPath
from dedup_cli.params import SignatureParams
from dedup_cli.store.compaction import compact_parts, compaction_due
from dedup_cli.store.document_index import DocumentIndex, index_of_rows
from dedup_cli.store.format import (
    DocumentBatch,
    batch_table,
    integers,
    packed_signatures,
    part_schema,
    removal_schema,
)
from dedup_cli.store.leases import ObjectLock, UncertainCommit, commit_manifest
from dedup_cli.store.lock import WriterLock
from dedup_cli.store.manifest import (
    Manifest,
    PartFile,
    RemovalFile,
    RunInput,
    RunRecord,
    clean_garbage,
    listed_files,
    write_manifest,
)
from dedup_cli.store.names import Names
from dedup_cli.store.parts import FileCounter, PartWriter, WrittenFile, commit_files
from dedup_cli.store.places import (
    Folder,
    ParquetSink,
    folder_of,
    in_objects,
    new_name,
    parquet_file,
    remove,
    remove_all,
    where_written,
    write_table,
)
from dedup_cli.store.snapshot import missing_file, read_files, read_rows, read_snapshot
from dedup_cli.store.worker_parts import ReadIds


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StoreRun:
    """One sign run: write new or changed documents, remove gone ones; commit on a clean exit.

    Hold it in a ``with`` block: leaving it normally commits (parts, then the manifest, atomically);
    an exception discards everything written and the store stays as it was. The writer lock is held
    from ``Store.begin_run`` to the end of the block.

    Args:
        path: the store directory (or object storage prefix).
        lock: the writer lock, held.
        manifest: the store as the run found it (read under the lock).
        params: the run's parameters (equal to the store's).
        replace: the run's rows replace every stored row.
        on_commit: told the new manifest (and its version) once the run is committed.
        version: in object storage, the manifest's version when the run read it: the commit is made only over it.
    """

    def __init__(self, path: Folder, lock: WriterLock | ObjectLock, manifest: Manifest, params: SignatureParams,
                 replace: bool, on_commit: Callable[[Manifest, str | None], None] | None = None,
                 version: str | None = None) -> None:
        self.path = path
        self.token = lock.token  # in object storage: in the names of the files this run writes
        self.params = params
        self.replace = replace
        self.number = manifest.last_run + 1
        self.id_root = manifest.id_root  # set it to record the root of a store's first run that names files
        self.input: RunInput | None = None  # set it to record how the run read its inputs
        self.inputs_before = manifest.inputs  # how the committed runs read theirs
        self.rows_written = 0
        self.record: RunRecord | None = None
        self._lock = lock
        self._manifest = manifest
        self._counter = FileCounter(manifest.next_file)
        self._schema = part_schema(params)
        self._parts = PartWriter(path, self._schema, self._counter, self.token)
        self._version = version
        self._on_commit = on_commit
        self._written_ids: list[pa.Array] = []
        self._distinct_ids = 0  # written ids known to be distinct (the caller kept the first of each)
        self._removed: list[str] = []
        self._index: DocumentIndex | None = None
        self._temporaries: list[Folder] = []
        self._adopted: list[WrittenFile] = []
        self._expected: list[str] = []  # names of parts worker processes may be writing
        self._open = True
        self._committed = False  # the manifest is written: nothing of the run may be deleted any more

    def __enter__(self) -> StoreRun:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is None and self._open:
            self.commit()
        else:
            self.abort()

    def document_index(self) -> DocumentIndex:
        """The store as this run found it (read under the lock, so no other run can change it)."""
        if self._index is None:
            try:
                self._index = index_of_rows(
                    *read_snapshot(self.path, self._manifest, ["id", "path", "size", "mtime_ns", "content_hash"])
                )
            except FileNotFoundError as missing:  # under the lock no compaction deletes a listed file: damage
                raise missing_file(self.path, missing) from None
        return self._index

    def stored_signatures(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shingle counts and packed signatures of the live documents at ``rows`` (int64, rows of
        :meth:`document_index`), read from the parts that hold them: what a document whose text is unchanged but
        whose place moved is written again with, unsigned. Returns (int64[m], uint8[m, signature_bytes])."""
        index = self.document_index()
        rows = np.asarray(rows, np.int64)
        if not rows.size:
            return np.empty(0, np.int64), np.empty((0, self.params.signature_bytes), np.uint8)
        assert index.positions is not None
        try:
            table = read_rows(self.path, self._manifest, index.positions[rows], ["shingle_count", "signature"])
        except FileNotFoundError as missing:  # under the lock no compaction deletes a listed file: damage
            raise missing_file(self.path, missing) from None
        return (integers(table.column("shingle_count")),
                np.array(packed_signatures(table.column("signature"), self.params, self.path)))

    def write(self, batch: DocumentBatch) -> None:
        """Add new or changed documents; a changed document's older row stops being live at commit."""
        assert self._open, "the run is over"
        if not batch.ids:
            return
        table = batch_table(batch, self.params, self._schema, self.number)
        try:
            self._parts.write(table)
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        self._written_ids.append(table.column("id").combine_chunks())
        self.rows_written += len(batch.ids)

    def reserve_file(self) -> int:
        """A file number for a part another process writes for this run (:func:`write_task_part`)."""
        return self._counter()

    def adopt(self, written: WrittenFile, ids: Sequence[str] | Names, distinct: bool = False) -> None:
        """Commit with this run a part another process wrote (:func:`write_task_part`); ``ids`` are its rows' ids
        (``distinct``: the caller kept one row of each id in all it adopts, so the commit does not check again).

        The run must not be over; a file adopted is renamed into place by the commit like the run's own parts,
        and deleted if the run is aborted.
        """
        assert self._open, "the run is over"
        self._adopted.append(written)
        self._temporaries.append(written.temporary)
        self._written_ids.append(ids.array.cast(pa.string()) if isinstance(ids, Names)
                                 else pa.array(list(ids), pa.string()))
        self.rows_written += written.rows
        if distinct:
            self._distinct_ids += len(ids)

    def reserve_part(self) -> int:
        """A file number for a part a worker process of this machine may write for this run (:class:`RunParts`):
        an aborted run deletes the part, whether or not the worker got to say it wrote it."""
        number = self._counter()
        self._expected.append(new_name(f"part-{number:06d}", self.token, self.path))
        return number

    def adopt_parts(self, written: Sequence[WrittenFile], ids: Sequence[ReadIds]) -> None:
        """Commit with this run parts its worker processes wrote (:class:`RunParts`); ``ids`` are the ids of
        all their rows (in any order), all different (the caller kept the first document of each id), so the
        commit does not check that again."""
        assert self._open, "the run is over"
        self._adopted.extend(written)
        self._temporaries.extend(file.temporary for file in written)
        self._written_ids.extend(part.ids for part in ids if len(part))
        self._distinct_ids += sum(len(part) for part in ids)
        self.rows_written += sum(file.rows for file in written)

    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents (those gone from the corpus); ids not stored are ignored, ids written in this run win."""
        assert self._open, "the run is over"
        self._removed.extend(ids)

    def abort(self) -> None:
        """Discard what this run wrote and release the lock (also on KeyboardInterrupt)."""
        if not self._open:
            return
        self._open = False
        if self._committed:
            self._lock.release()
            return
        try:
            self._parts.discard()
            for temporary in self._temporaries:
                remove(temporary)
            if isinstance(self.path, ObjectPath):
                remove_all(self.path, self._expected)
            else:
                for name in self._expected:
                    remove(where_written(self.path, name))
        finally:
            self._lock.release()

    def commit(self) -> RunRecord:
        """Make the run durable and visible: one atomic manifest replace; compacts when due."""
        assert self._open, "the run is over"
        try:
            record = self._commit()
        except UncertainCommit:
            self._open = False  # its files may be listed now: they stay, and the next run knows which are garbage
            self._lock.release()
            raise
        except BaseException:
            self.abort()
            raise
        self._open = False
        self._lock.release()
        return record

    def _commit(self) -> RunRecord:
        path, before = self.path, self._manifest
        try:
            new_parts = self._parts.close() + self._adopted
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from error
        tally = self._tally()
        removal_files = self._write_removals(tally.removals)
        parts, listed_removals, documents, compacting = self._place_files(new_parts, removal_files, tally)
        self.record = RunRecord(run=self.number, time=_utc_now(), added=tally.added, changed=tally.changed,
                                removed=tally.removed, documents=documents, compacted=compacting,
                                replaced=self.replace)
        manifest = Manifest(params=self.params, parts=parts, removals=listed_removals,
                            runs=(*before.runs, self.record), next_file=self._counter.next, documents=documents,
                            id_root=self.id_root,
                            inputs=before.inputs + (() if self.input is None else (self.input,)))
        manifest, version = self._publish(manifest)
        # Committed. Files no longer listed (and unused temporaries) are garbage now; a failure to delete
        # them is harmless (the next run does it).
        self._committed = True
        if self._on_commit is not None:
            self._on_commit(manifest, version)
        try:
            self._remove_garbage(manifest, {w.name for w in [*new_parts, *removal_files]})
        except OSError:
            pass
        return self.record

    def _tally(self) -> _Tally:
        """What the run does to the store's documents: the ids it wrote that were stored (changed) and not
        (added), and those it removes that were stored and that it did not write again.

        Raises:
            ValueError: the run wrote an id twice (unless the caller said its ids are distinct).
        """
        before = self._manifest
        written = pa.chunked_array(self._written_ids, pa.string())
        touched = len(written) > 0 or bool(self._removed) or self.replace
        live_before = self.document_index().id_array if touched else pa.array([], pa.string())
        if len(written) > 1 or len(live_before) or self._removed:
            # 30-50 ms to import: a first run that signs one document has no need of it.
            import pyarrow.compute as pc
        if len(written) > 1 and self._distinct_ids < len(written):  # else there is nothing to check (10^6 ids: 0.2 s)
            unique = pc.unique(written)
            if len(unique) < len(written):
                counts = pc.value_counts(written)
                repeated = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))[0].as_py()
                raise ValueError(f"run {self.number} wrote document id {repeated!r} more than once")
        changed = int(pc.sum(pc.is_in(written, value_set=live_before)).as_py() or 0) if len(live_before) else 0
        added = len(written) - changed
        removals = pa.table({"id": pa.array([], pa.string()), "run": pa.array([], pa.int64())})
        removed = 0
        if self.replace:
            removed = before.documents - changed
        elif self._removed:
            requested = pc.unique(pa.array(self._removed, pa.string()))
            effective = pc.and_(pc.is_in(requested, value_set=live_before),
                                pc.invert(pc.is_in(requested, value_set=written)))
            removed_ids = requested.filter(effective)
            removed = len(removed_ids)
            if removed:
                removals = pa.table({"id": removed_ids, "run": pa.array(np.full(removed, self.number, np.int64))})
        documents = before.documents + added - removed if not self.replace else len(written)
        return _Tally(added, changed, removed, removals, documents)

    def _write_removals(self, removals: pa.Table) -> list[WrittenFile]:
        """The removal file of the run under a temporary name (none when it removes nothing)."""
        if not removals.num_rows:
            return []
        name = new_name(f"_removed-{self._counter():06d}", self.token, self.path)
        temporary = where_written(self.path, name)
        self._temporaries.append(temporary)
        write_table(removals, temporary)
        return [WrittenFile(temporary, name, removals.num_rows)]

    def _place_files(self, new_parts: list[WrittenFile], removal_files: list[WrittenFile], tally: _Tally
                     ) -> tuple[tuple[PartFile, ...], tuple[RemovalFile, ...], int, bool]:
        """The run's files renamed into place beside the store's, or, when compaction is due, every live row
        rewritten into new parts (docs/store-format.md, "Compaction").

        Returns:
            (the parts and the removal files the manifest lists, its document count, whether it compacted).
        """
        path, before = self.path, self._manifest
        old_parts = () if self.replace else before.parts
        old_removals = () if self.replace else before.removals
        parts = old_parts + tuple(PartFile(w.name, w.rows, self.replace, self.number) for w in new_parts)
        listed_removals = old_removals + tuple(RemovalFile(w.name, w.rows, self.number) for w in removal_files)
        rows = sum(part.rows for part in parts)
        # The parts of one run count once: a distributed run writes a part per task.
        deltas = len({part.file if part.run is None else part.run for part in parts if not part.compacted})
        deltas += len(listed_removals)
        if self.replace or not compaction_due(deltas, rows, tally.documents):
            commit_files(path, [*new_parts, *removal_files])
            return parts, listed_removals, tally.documents, False
        all_removals = pa.concat_tables([
            read_files(path, [r.file for r in old_removals], ["id", "run"], removal_schema()), tally.removals,
        ])
        sources = [path / p.file for p in old_parts] + [w.temporary for w in new_parts]
        compacted = compact_parts(path, self.params, sources, all_removals, self._counter, self.token)
        self._temporaries.extend(w.temporary for w in compacted)
        commit_files(path, compacted)
        return tuple(PartFile(w.name, w.rows, True) for w in compacted), (), sum(w.rows for w in compacted), True

    def _publish(self, manifest: Manifest) -> tuple[Manifest, str | None]:
        """The commit point: the manifest replaced atomically (in object storage, one conditional PUT over the
        version the run read, under its lease); the manifest as committed and its version."""
        if isinstance(self.path, ObjectPath):
            assert isinstance(self._lock, ObjectLock) and self.token is not None
            self._lock.check()
            version = commit_manifest(self.path, manifest, self._version, self.token)
            return dataclasses.replace(manifest, writer=self.token), version
        return manifest, write_manifest(self.path, manifest)

    def _remove_garbage(self, manifest: Manifest, written: set[str]) -> None:
        """After the commit: delete the files it stopped listing and this run's unused temporaries (``written``:
        the names of the files the run wrote)."""
        path = self.path
        if isinstance(path, ObjectPath):
            # Only what this commit stopped listing, and what this run wrote that it does not list: other
            # files may be a later holder's (docs/store-format.md).
            remove_all(path, sorted((listed_files(self._manifest) | written) - listed_files(manifest)))
        else:
            self._parts.discard()
            for temporary in self._temporaries:
                remove(temporary)
            clean_garbage(path, manifest)


@dataclasses.dataclass(frozen=True)
class _Tally:
    """What a run does to the store's documents, before its files are placed."""

    added: int
    changed: int
    removed: int
    removals: pa.Table  # id, run: the stored documents the run removes
    documents: int  # live documents after the run


# --- parts written by other processes (the tasks of a distributed run) --------------------------------------


def task_part_names(number: int, token: str) -> tuple[str, str]:
    """(final name, temporary name) of part ``number`` written by a task of the run with ``token`` (hex)."""
    name = f"part-{number:06d}.parquet"
    return name, f".{name}.{token}.tmp"


def _write_rows(path: Folder, number: int, token: str, schema: pa.Schema, tables: Iterable[pa.Table]
                ) -> WrittenFile | None:
    """Write ``tables`` to a file of this attempt; locally fsync it, then rename it to the task's temporary name.

    A task may run twice (a worker thought dead finishes after its retry): each attempt writes its own file and
    the rename is atomic, so the temporary part is always one whole attempt's, never a mix. In object storage
    each attempt's part has a name of its own (the run's token and the attempt's), which the driver adopts; an
    attempt it does not adopt is garbage for the next run.
    """
    attempt_token = f"{token}{secrets.token_hex(4)}"
    if in_objects(path):
        name = new_name(f"part-{number:06d}", attempt_token, path)
        attempt = where_written(path, name)
        final = attempt
    else:
        name, temporary = task_part_names(number, token)
        attempt = path / f".{name}.{attempt_token}.tmp"
        final = path / temporary
    rows = 0
    writer = ParquetSink(attempt, schema)
    try:
        for table in tables:
            writer.write_table(table)
            rows += table.num_rows
        if rows == 0:
            writer.discard()
            return None
        writer.close()
        if final != attempt:
            os.replace(attempt, final)  # type: ignore[arg-type]
    except BaseException:
        writer.discard()
        raise
    return WrittenFile(final, name, rows)


def write_task_part(path: str | Folder, params: SignatureParams, run: int, number: int, token: str,
                    batches: Iterable[DocumentBatch]) -> WrittenFile | None:
    """Write signed batches as part ``number`` of run ``run`` of the store at ``path``, under a temporary name that
    only :meth:`StoreRun.adopt` and a commit make visible; None when there was nothing to write."""
    schema = part_schema(params)
    tables = (batch_table(batch, params, schema, run) for batch in batches if batch.ids)
    try:
        return _write_rows(folder_of(path), number, token, schema, tables)
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from error


def rewrite_task_part(written: WrittenFile, params: SignatureParams, token: str, drop: Sequence[int]
                      ) -> tuple[WrittenFile | None, list[str], int]:
    """The part without its rows at positions ``drop``: the new file (None if nothing is left), the locations of
    the dropped rows, and how many of them had no shingle."""
    table = parquet_file(written.temporary).read()
    dropped = np.zeros(table.num_rows, dtype=bool)
    dropped[np.asarray(drop, dtype=np.int64)] = True
    gone = table.filter(pa.array(dropped))
    kept = table.filter(pa.array(~dropped)).replace_schema_metadata(None)
    number = int(written.name.split("-")[1].split(".")[0])
    result = _write_rows(written.temporary.parent, number, token, part_schema(params),
                         [kept.cast(part_schema(params))] if kept.num_rows else [])
    if result is None or in_objects(written.temporary):
        remove(written.temporary)
    import pyarrow.compute as pc  # here: a run of one document does without it

    empty = int(pc.sum(pc.equal(gone.column("shingle_count"), 0)).as_py() or 0)
    return result, gone.column("path").to_pylist(), empty
