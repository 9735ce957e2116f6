"""The signature store: a directory of Parquet part files and a manifest, grown by sign runs, read as a snapshot.

Layout (format 2). The store path (e.g. ``sigs.parquet``) is a directory, in the Parquet-dataset
convention that pyarrow.dataset, Dask and Spark read; files starting with ``_`` or ``.`` are not data::

    sigs.parquet/
      _dedup_manifest.json     the commit point: format version, params, live parts, removals, runs
      _dedup.lock              flock(2)ed by the one run that may write
      part-000001.parquet      rows written by a run (or by a compaction)
      _removed-000004.parquet  ids removed by a run: columns id (string), run (int64)

A part has one row per written document version, with the columns of format 1 plus ``run``:
``id`` (string), ``path`` (where the document was read, for verification), ``size``, ``mtime_ns`` and
``content_hash`` (xxh3-64 of the raw bytes; for incremental runs), ``shingle_count`` (f, the exact number of
distinct shingles; 0 marks a document with no shingle), ``signature`` (the k minwise values, lowest
``bits`` bits each, packed by :func:`dedup_cli.signatures.pack_values`) and ``run`` (int64, the sign run
that wrote the row). Each part's metadata key ``dedup`` repeats the format version and parameters.

Which rows are live (the rule is also written into the manifest, for other engines): among the rows of
the listed parts with one id, the row with the highest ``run`` wins (an id is written at most once per
run); it is live unless a listed removal of that id has a higher run (a run that removes and writes an
id keeps the write). Rewriting a changed document therefore needs no deletion record, and pruning
writes only the removed ids. In SQL: ``row_number() over (partition by id order by run desc) = 1`` and
no removal with ``removal.run > row.run``.

Commit protocol (one writer at a time, under ``fcntl.flock`` of ``_dedup.lock``): new parts and the
removal file are written under temporary names (``.part-000007.parquet.tmp``), fsynced and renamed;
then the manifest is written to a temporary file, fsynced, ``os.replace``d and the directory fsynced.
The manifest replace is the only commit point, so a run killed at any moment leaves the store as it
was before the run or as after it. Files the manifest does not list (from a killed run, or made
obsolete by a compaction) are never read and are deleted by the next writer. Readers take no lock: they
read one manifest and its parts (and start again if a compaction deleted a part under them).

Compaction rewrites the live rows into fresh parts (of at most :data:`PART_ROWS` rows) and drops every
removal file; a commit does it when more than :data:`MAX_DELTA_FILES` run parts and removal files have
accumulated since the last compaction, or when more than :data:`MAX_DEAD_FRACTION` of the stored rows are
dead. It holds the ``id`` and ``run`` columns of the whole store but only one row group of the other
columns at a time. Compacted parts are not sorted by id; readers sort (one Arrow sort on id and run).

An engine that lists the directory itself sees every ``part-*.parquet``, including one a killed run left
before the next run deletes it: read the parts the manifest lists, and apply the rule above.

Format 1 (a single Parquet file, parameters in its metadata) is still read; :class:`StoreWriter` still
writes it (an atomic whole-store write); runs cannot append to it.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401 - pa.array(ndarray) imports it at first use; a Ctrl-C landing in an import can be lost
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dedup_cli import __version__
from dedup_cli.errors import StoreError, UsageError
from dedup_cli.signatures import SignatureParams, lowest_bits, unpack_values

FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1
METADATA_KEY = b"dedup"

MANIFEST_NAME = "_dedup_manifest.json"
LOCK_NAME = "_dedup.lock"
PART_NAME = re.compile(r"part-\d{6,}\.parquet")
REMOVAL_NAME = re.compile(r"_removed-\d{6,}\.parquet")
TEMPORARY_NAME = re.compile(r"\.(part-\d{6,}\.parquet|_removed-\d{6,}\.parquet|_dedup_manifest\.json)\.tmp")

LIVE_ROW_RULE = (
    "per id, the row with the highest run wins; it is live unless a removal of that id has a higher run"
)

# Compaction policy and file sizes (module constants so that tests can make them small).
MAX_DELTA_FILES = 32
MAX_DEAD_FRACTION = 0.5
PART_ROWS = 1 << 20
ROW_GROUP_ROWS = 1 << 16
LOCK_POLL_SECONDS = 0.05
READ_ATTEMPTS = 8

_PART_COLUMNS = ("id", "path", "size", "mtime_ns", "content_hash", "shingle_count", "signature", "run")


def store_schema(params: SignatureParams, format_version: int = LEGACY_FORMAT_VERSION) -> pa.Schema:
    """The Arrow schema of a single-file store (format 1), or with ``FORMAT_VERSION`` of a part (with ``run``)."""
    columns = [
        ("id", pa.string()),
        ("path", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("content_hash", pa.uint64()),
        ("shingle_count", pa.int64()),
        ("signature", pa.binary(params.signature_bytes)),
    ]
    if format_version >= 2:
        columns.append(("run", pa.int64()))
    header = {"format_version": format_version, "dedup_version": __version__, "params": params.to_dict()}
    return pa.schema(columns, metadata={METADATA_KEY: json.dumps(header).encode()})


def part_schema(params: SignatureParams) -> pa.Schema:
    """The Arrow schema of a format 2 part: the format 1 columns and ``run``."""
    return store_schema(params, FORMAT_VERSION)


@dataclass
class DocumentBatch:
    """Signed documents ready to be written; arrays are aligned by row."""

    ids: list[str]
    paths: list[str]
    sizes: np.ndarray  # int64[n]
    mtimes_ns: np.ndarray  # int64[n]
    content_hashes: np.ndarray  # uint64[n]
    shingle_counts: np.ndarray  # int64[n]
    signatures: np.ndarray  # uint8[n, signature_bytes]


def _batch_table(batch: DocumentBatch, params: SignatureParams, schema: pa.Schema, run: int | None) -> pa.Table:
    count = len(batch.ids)
    signatures = np.ascontiguousarray(batch.signatures, dtype=np.uint8)
    if signatures.shape != (count, params.signature_bytes):
        raise ValueError(
            f"signatures are uint8{list(signatures.shape)}; {count} documents at these parameters need "
            f"uint8[{count}, {params.signature_bytes}]"
        )
    signature_array = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(params.signature_bytes), count, [None, pa.py_buffer(signatures.tobytes())]
    )
    arrays = [
        pa.array(batch.ids, pa.string()),
        pa.array(batch.paths, pa.string()),
        pa.array(batch.sizes, pa.int64()),
        pa.array(batch.mtimes_ns, pa.int64()),
        pa.array(batch.content_hashes, pa.uint64()),
        pa.array(batch.shingle_counts, pa.int64()),
        signature_array,
    ]
    if run is not None:
        arrays.append(pa.array(np.full(count, run, dtype=np.int64)))
    return pa.Table.from_arrays(arrays, schema=schema)


def _one_line(error: BaseException) -> str:
    """Arrow's messages can span lines; a StoreError is one line (errors.py)."""
    return " ".join(str(error).split())


def _fsync_path(path: Path, directory: bool = False) -> None:
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(descriptor)
    except OSError as error:
        # Some file systems cannot fsync a directory; their renames are as durable as they get.
        if not directory or error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(descriptor)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


# --- format 1: one Parquet file ------------------------------------------------------------------------------


class StoreWriter:
    """Write a whole single-file (format 1) store beside ``path`` and rename it into place only on success.

    An existing store at ``path`` is untouched until the final rename, so an interrupted or failed run
    leaves it as it was. Incremental signing uses :meth:`Store.begin_run` on a directory store instead.
    """

    def __init__(self, path: str | os.PathLike[str], params: SignatureParams) -> None:
        self.path = Path(path)
        self.params = params
        self.schema = store_schema(params)
        self.temp_path = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._writer: pq.ParquetWriter | None = None
        self.rows_written = 0

    def __enter__(self) -> StoreWriter:
        if self.path.is_dir():
            raise StoreError(
                f"cannot write {self.path}: it is a directory store; sign into it with a run, or choose another path"
            )
        try:
            self._writer = pq.ParquetWriter(self.temp_path, self.schema, compression="zstd")
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        return self

    def write(self, batch: DocumentBatch) -> None:
        assert self._writer is not None, "use StoreWriter as a context manager"
        self._writer.write_table(_batch_table(batch, self.params, self.schema, run=None))
        self.rows_written += len(batch.ids)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._writer is not None
        try:
            self._writer.close()
            if kind is None:
                _fsync_path(self.temp_path)
                os.replace(self.temp_path, self.path)
        except OSError as failure:
            if kind is None:
                raise StoreError(f"cannot write {self.path}: {failure.strerror or failure}") from failure
        finally:
            if self.temp_path.exists():
                self.temp_path.unlink()


def _parse_metadata(path: Path, metadata: dict[bytes, bytes] | None) -> tuple[int, SignatureParams]:
    if not metadata or METADATA_KEY not in metadata:
        raise StoreError(f"{path} is a Parquet file but not a dedup store; create one with: dedup sign INPUT -o {path}")
    try:
        header: dict[str, Any] = json.loads(metadata[METADATA_KEY])
        version = int(header["format_version"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again") from error
    if version > FORMAT_VERSION:
        raise StoreError(
            f"{path} uses store format {version}, newer than this dedup ({__version__}) reads "
            f"(format {FORMAT_VERSION}); upgrade dedup"
        )
    try:
        return version, SignatureParams.from_dict(header["params"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again") from error


def _open_parquet(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise StoreError(
            f"{path} is not a readable Parquet file ({_one_line(error)}); pass a store written by dedup sign"
        ) from error


def _packed_signatures(column: pa.ChunkedArray | pa.Array, params: SignatureParams, path: Path) -> np.ndarray:
    """uint8[n, signature_bytes], a view of the Arrow buffer."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type != pa.binary(params.signature_bytes):
        raise StoreError(f"{path}: signature column does not match its parameters; sign the corpus again")
    width = params.signature_bytes
    if len(column) == 0:
        return np.empty((0, width), dtype=np.uint8)
    data = np.frombuffer(column.buffers()[1], dtype=np.uint8)
    offset = column.offset * width
    return data[offset : offset + len(column) * width].reshape(len(column), width)


def _read_legacy(path: Path, params: SignatureParams) -> StoredSignatures:
    try:
        table = _open_parquet(path).read(columns=["id", "path", "content_hash", "shingle_count", "signature"])
    except (pa.ArrowException, OSError) as error:
        raise StoreError(f"{path} is damaged ({_one_line(error)}); sign the corpus again") from error
    return StoredSignatures(
        params=params,
        ids=table.column("id").to_pylist(),
        paths=table.column("path").to_pylist(),
        shingle_counts=table.column("shingle_count").to_numpy().astype(np.int64),
        packed=_packed_signatures(table.column("signature"), params, path),
        content_hashes=table.column("content_hash").to_numpy(),
        runs=np.zeros(table.num_rows, dtype=np.int64),
    )


# --- format 2: the manifest ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartFile:
    """A live part: its file name in the store directory and its row count."""

    file: str
    rows: int
    compacted: bool = False  # written by a compaction or a replacing run, not counted as a delta


@dataclass(frozen=True)
class RemovalFile:
    """Ids removed by one run: a Parquet file with columns ``id`` and ``run``."""

    file: str
    rows: int
    run: int


@dataclass(frozen=True)
class RunRecord:
    """One committed sign run."""

    run: int
    time: str  # UTC, ISO 8601, e.g. 2024-05-01T03:00:00Z
    added: int  # ids not live before the run
    changed: int  # live ids written again
    removed: int  # live ids removed (and not written again)
    documents: int  # live documents after the run
    compacted: bool = False
    replaced: bool = False  # the run replaced every row (a whole-store rewrite)


@dataclass(frozen=True)
class Manifest:
    """What ``_dedup_manifest.json`` holds: the whole state of a format 2 store."""

    params: SignatureParams
    parts: tuple[PartFile, ...] = ()
    removals: tuple[RemovalFile, ...] = ()
    runs: tuple[RunRecord, ...] = ()
    next_file: int = 1  # file numbers are never reused by committed files
    documents: int = 0  # live documents
    id_root: str | None = None  # the directory file ids are relative to, fixed by the first run that named files

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    @property
    def last_run(self) -> int:
        return self.runs[-1].run if self.runs else 0

    def to_json(self) -> bytes:
        document = {
            "format_version": FORMAT_VERSION,
            "dedup_version": __version__,
            "params": self.params.to_dict(),
            "live_row_rule": LIVE_ROW_RULE,
            "id_root": self.id_root,
            "documents": self.documents,
            "next_file": self.next_file,
            "parts": [vars(part) for part in self.parts],
            "removals": [vars(removal) for removal in self.removals],
            "runs": [vars(run) for run in self.runs],
        }
        # One line per part, removal and run, so that the file stays readable and diffs stay small.
        lines = []
        for key, value in document.items():
            if isinstance(value, list) and value:
                items = ",\n".join(f"  {json.dumps(item)}" for item in value)
                lines.append(f' "{key}": [\n{items}\n ]')
            else:
                lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
        return ("{\n" + ",\n".join(lines) + "\n}\n").encode()

    @classmethod
    def from_json(cls, path: Path, data: bytes) -> Manifest:
        damaged = f"{path} has a damaged manifest ({MANIFEST_NAME}: {{}}); sign the corpus again into a new store"
        try:
            document = json.loads(data)
            version = int(document["format_version"])
        except (ValueError, KeyError, TypeError) as error:
            raise StoreError(damaged.format(_one_line(error))) from error
        if version > FORMAT_VERSION:
            raise StoreError(
                f"{path} uses store format {version}, newer than this dedup ({__version__}) reads "
                f"(format {FORMAT_VERSION}); upgrade dedup"
            )
        try:
            if version != FORMAT_VERSION:
                raise ValueError(f"format_version {version} is not a directory store format")
            manifest = cls(
                params=SignatureParams.from_dict(document["params"]),
                parts=tuple(PartFile(str(p["file"]), int(p["rows"]), bool(p["compacted"])) for p in document["parts"]),
                removals=tuple(
                    RemovalFile(str(r["file"]), int(r["rows"]), int(r["run"])) for r in document["removals"]
                ),
                runs=tuple(RunRecord(**run) for run in document["runs"]),
                next_file=int(document["next_file"]),
                documents=int(document["documents"]),
                id_root=None if document.get("id_root") is None else str(document["id_root"]),
            )
            for part in manifest.parts:
                if not PART_NAME.fullmatch(part.file) or part.rows < 0:
                    raise ValueError(f"bad part {part.file!r}")
            for removal in manifest.removals:
                if not REMOVAL_NAME.fullmatch(removal.file) or removal.rows < 0:
                    raise ValueError(f"bad removal file {removal.file!r}")
        except (ValueError, KeyError, TypeError) as error:
            raise StoreError(damaged.format(_one_line(error))) from error
        return manifest


def _read_manifest_bytes(path: Path) -> bytes:
    try:
        return (path / MANIFEST_NAME).read_bytes()
    except FileNotFoundError:
        raise StoreError(
            f"store {path} is a directory without a dedup manifest ({MANIFEST_NAME}); "
            "pass a store written by dedup sign"
        ) from None
    except OSError as error:
        raise StoreError(f"cannot read store {path}: {error.strerror or error}") from error


def _write_manifest(path: Path, manifest: Manifest) -> None:
    """The commit point: temporary file, fsync, atomic replace, fsync of the directory."""
    temporary = path / f".{MANIFEST_NAME}.tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(manifest.to_json())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path / MANIFEST_NAME)
    except BaseException:
        _unlink_quietly(temporary)
        raise
    _fsync_path(path, directory=True)


def _is_ours(name: str) -> bool:
    return (
        name in (MANIFEST_NAME, LOCK_NAME)
        or bool(PART_NAME.fullmatch(name) or REMOVAL_NAME.fullmatch(name) or TEMPORARY_NAME.fullmatch(name))
    )


def _clean_garbage(path: Path, manifest: Manifest | None) -> list[str]:
    """Delete parts, removal files and temporary files that ``manifest`` does not list; under the lock."""
    listed = set() if manifest is None else {p.file for p in manifest.parts} | {r.file for r in manifest.removals}
    deleted = []
    for name in sorted(os.listdir(path)):
        if name in listed or name in (MANIFEST_NAME, LOCK_NAME) or not _is_ours(name):
            continue
        _unlink_quietly(path / name)
        deleted.append(name)
    return deleted


# --- the writer lock -----------------------------------------------------------------------------------------


class _WriterLock:
    """An exclusive ``flock`` on ``_dedup.lock``; the holder's pid is written into the file for the message."""

    def __init__(self, path: Path, timeout: float | None) -> None:
        self.path = path
        self.timeout = timeout
        self._descriptor: int | None = None

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


# --- reading a snapshot --------------------------------------------------------------------------------------


def _live_rows(ids: pa.ChunkedArray, runs: pa.ChunkedArray, removals: pa.Table | None) -> np.ndarray:
    """Positions of the live rows (see the module docstring), ordered by ascending id: int64[n_live].

    Args:
        ids, runs: the ``id`` and ``run`` columns of the parts, concatenated in manifest order.
        removals: a table with columns ``id`` and ``run``, or None.
    """
    count = len(ids)
    if count == 0:
        return np.empty(0, dtype=np.int64)
    no_removals = removals is None or removals.num_rows == 0
    if no_removals and (count == 1 or pc.all(pc.less(ids.slice(0, count - 1), ids.slice(1))).as_py()):
        return np.arange(count, dtype=np.int64)  # already unique and in id order (e.g. one sorted part)
    order = pc.sort_indices(pa.table({"id": ids, "run": runs}), sort_keys=[("id", "ascending"), ("run", "descending")])
    sorted_ids = ids.take(order)
    first = np.ones(count, dtype=bool)
    first[1:] = pc.not_equal(sorted_ids.slice(1), sorted_ids.slice(0, count - 1)).to_numpy()
    keep = order.to_numpy()[first]
    if not no_removals:
        assert removals is not None
        # The latest removal of each id, by the same sort (Table.group_by would import pyarrow.acero at the
        # first removal, and a Ctrl-C that lands in a first import can be swallowed).
        removal_order = pc.sort_indices(removals, sort_keys=[("id", "ascending"), ("run", "descending")])
        removal_ids = removals.column("id").take(removal_order)
        latest = np.ones(len(removal_ids), dtype=bool)
        latest[1:] = pc.not_equal(removal_ids.slice(1), removal_ids.slice(0, len(removal_ids) - 1)).to_numpy()
        latest_positions = pa.array(removal_order.to_numpy()[latest], pa.int64())
        where = pc.fill_null(
            pc.index_in(ids.take(keep), value_set=removals.column("id").take(latest_positions)), -1
        ).to_numpy()
        removed = where >= 0
        removal_runs = removals.column("run").take(latest_positions).to_numpy()
        row_runs = runs.take(keep[removed]).to_numpy()
        dead = np.zeros(keep.size, dtype=bool)
        dead[removed] = removal_runs[where[removed]] > row_runs
        keep = keep[~dead]
    return keep.astype(np.int64, copy=False)


def _open_part(path: Path, name: str) -> pq.ParquetFile:
    """Open one listed file; FileNotFoundError passes through (a compaction may have deleted it)."""
    # Arrow's own file, not a Python file object: a KeyboardInterrupt raised inside a Python read
    # callback can leave Arrow's reader waiting for ever.
    try:
        return pq.ParquetFile(str(path / name))
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "listed but missing", name) from None
    except (pa.ArrowException, OSError) as error:
        raise StoreError(
            f"{path} is damaged ({name}: {_one_line(error)}); sign the corpus again into a new store"
        ) from error


def _read_files(path: Path, names: Sequence[str], columns: Sequence[str], schema: pa.Schema) -> pa.Table:
    tables = []
    for name in names:
        parquet = _open_part(path, name)
        try:
            tables.append(parquet.read(columns=list(columns)))
        except (pa.ArrowException, OSError, KeyError) as error:
            raise StoreError(
                f"{path} is damaged ({name}: {_one_line(error)}); sign the corpus again into a new store"
            ) from error
        finally:
            parquet.close()
    if not tables:
        return schema.empty_table().select(list(columns))
    try:
        return pa.concat_tables([table.replace_schema_metadata(None) for table in tables])
    except pa.ArrowInvalid as error:
        raise StoreError(f"{path} is damaged (parts disagree: {_one_line(error)}); sign the corpus again") from error


def _removal_schema() -> pa.Schema:
    return pa.schema([("id", pa.string()), ("run", pa.int64())])


def _read_snapshot(path: Path, manifest: Manifest, columns: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
    """The listed parts' ``columns`` (plus id and run) and the positions of their live rows, in id order."""
    wanted = list(dict.fromkeys([*columns, "id", "run"]))
    table = _read_files(path, [p.file for p in manifest.parts], wanted, part_schema(manifest.params))
    removals = _read_files(path, [r.file for r in manifest.removals], ["id", "run"], _removal_schema())
    return table, _live_rows(table.column("id"), table.column("run"), removals)


# --- stores --------------------------------------------------------------------------------------------------


@dataclass
class StoredSignatures:
    """A store read into memory: ids in ascending order, packed signatures and their parameters."""

    params: SignatureParams
    ids: list[str]
    paths: list[str]
    shingle_counts: np.ndarray  # int64[n_docs]
    packed: np.ndarray  # uint8[n_docs, signature_bytes]
    content_hashes: np.ndarray | None = None  # uint64[n_docs], xxh3-64 of the bytes that were signed
    runs: np.ndarray | None = None  # int64[n_docs], the sign run that wrote each row (0 in format 1 stores)

    def __len__(self) -> int:
        return len(self.ids)

    def values(self, bits: int | None = None) -> np.ndarray:
        """The stored minwise values, or only their lowest ``bits`` bits: uint[n_docs, k]."""
        values = unpack_values(self.packed, self.params.bits, self.params.num_perm)
        return values if bits is None else lowest_bits(values, bits)


@dataclass
class DocumentIndex:
    """The live documents of a store without their signatures, in ascending id order.

    What an incremental run compares the corpus against: look files up by id (:meth:`lookup`), compare
    sizes and modification times (and content hashes for the files that differ), and list the stored
    documents that are gone (:meth:`absent`).
    """

    sizes: np.ndarray  # int64[n]
    mtimes_ns: np.ndarray  # int64[n]
    content_hashes: np.ndarray  # uint64[n]
    runs: np.ndarray  # int64[n]
    _ids: pa.Array = field(repr=False)
    _paths: pa.Array = field(repr=False)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[str]:
        return self._ids.to_pylist()

    @property
    def paths(self) -> list[str]:
        return self._paths.to_pylist()

    def ids_at(self, rows: np.ndarray) -> list[str]:
        """The ids of ``rows`` (int64[m] positions, or bool[n])."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return self._ids.take(pa.array(rows, pa.int64())).to_pylist()

    def lookup(self, ids: Sequence[str]) -> np.ndarray:
        """The row of each of ``ids`` in this index, −1 where it is not stored: int64[len(ids)]."""
        found = pc.index_in(pa.array(ids, pa.string()), value_set=self._ids)
        return pc.fill_null(found, -1).to_numpy().astype(np.int64, copy=False)

    def unchanged(self, ids: Sequence[str], paths: Sequence[str], sizes: np.ndarray,
                  mtimes_ns: np.ndarray) -> np.ndarray:
        """bool[m]: which files are stored under the same id with the same path, size and modification time.

        The cheap first test of an incremental run; the others are read, and a content hash equal to the
        stored one (``content_hashes[lookup(ids)]``) confirms that a touched file did not change.
        """
        rows = self.lookup(ids)
        known = rows >= 0
        safe = np.where(known, rows, 0)
        if len(self) == 0:
            return np.zeros(len(ids), dtype=bool)
        same_path = pc.equal(self._paths.take(pa.array(safe, pa.int64())), pa.array(paths, pa.string()))
        return (
            known
            & pc.fill_null(same_path, False).to_numpy(zero_copy_only=False)
            & (self.sizes[safe] == np.asarray(sizes, dtype=np.int64))
            & (self.mtimes_ns[safe] == np.asarray(mtimes_ns, dtype=np.int64))
        )

    def absent(self, ids: Sequence[str]) -> np.ndarray:
        """bool[n]: the stored documents whose id is not among ``ids`` (the ones a prune removes)."""
        return ~pc.is_in(self._ids, value_set=pa.array(ids, pa.string())).to_numpy(zero_copy_only=False)


def _document_index(table: pa.Table, keep: np.ndarray) -> DocumentIndex:
    taken = table.take(pa.array(keep, pa.int64())) if keep.size != table.num_rows else table
    columns = {name: taken.column(name).combine_chunks() for name in taken.column_names}
    return DocumentIndex(
        sizes=columns["size"].to_numpy(),
        mtimes_ns=columns["mtime_ns"].to_numpy(),
        content_hashes=columns["content_hash"].to_numpy(),
        runs=columns["run"].to_numpy(),
        _ids=columns["id"],
        _paths=columns["path"],
    )


def _legacy_error(path: Path) -> StoreError:
    return StoreError(
        f"{path} is a single-file store (format 1) from an older dedup and cannot be signed into incrementally; "
        f"sign into a new store (dedup sign INPUT -o NEW) or remove {path} and sign again"
    )


class Store:
    """An opened store: its parameters and a snapshot of its manifest (format 2) or footer (format 1).

    Reading needs no lock; :meth:`begin_run` and :meth:`compact` take the writer lock.
    """

    def __init__(self, path: Path, format_version: int, params: SignatureParams, manifest: Manifest | None,
                 legacy_rows: int = 0) -> None:
        self.path = path
        self.format_version = format_version
        self.params = params
        self._manifest = manifest
        self._legacy_rows = legacy_rows

    @property
    def is_legacy(self) -> bool:
        return self.format_version == LEGACY_FORMAT_VERSION

    @property
    def manifest(self) -> Manifest | None:
        return self._manifest

    @property
    def runs(self) -> tuple[RunRecord, ...]:
        return () if self._manifest is None else self._manifest.runs

    @property
    def last_run(self) -> int:
        """The number of the last committed run; 0 before the first (and for format 1 stores)."""
        return 0 if self._manifest is None else self._manifest.last_run

    @property
    def documents(self) -> int:
        return self._legacy_rows if self._manifest is None else self._manifest.documents

    @property
    def id_root(self) -> str | None:
        """The directory file ids are relative to, as recorded (None before a run named files)."""
        return None if self._manifest is None else self._manifest.id_root

    def refresh(self) -> None:
        """Read the manifest again (another run may have committed since this store was opened)."""
        if self._manifest is not None:
            self._manifest = Manifest.from_json(self.path, _read_manifest_bytes(self.path))
            self.params = self._manifest.params

    def _snapshot(self, columns: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
        """Read this snapshot; when a listed file vanished (a compaction committed), read the newer one."""
        assert self._manifest is not None
        for _ in range(READ_ATTEMPTS):
            try:
                return _read_snapshot(self.path, self._manifest, columns)
            except FileNotFoundError as missing:
                before = self._manifest
                self.refresh()
                if self._manifest == before:
                    raise StoreError(
                        f"{self.path} is damaged ({Path(str(missing.filename)).name} is listed in its manifest but "
                        "missing); sign the corpus again into a new store"
                    ) from None
        raise StoreError(f"{self.path} kept changing while it was read; try again")

    def document_index(self) -> DocumentIndex:
        """The live documents' ids, paths, sizes, modification times, content hashes and runs, in id order."""
        columns = ["id", "path", "size", "mtime_ns", "content_hash", "run"]
        if self._manifest is None:
            parquet = _open_parquet(self.path)
            try:
                table = parquet.read(columns=columns[:-1])
            except (pa.ArrowException, OSError) as error:
                raise StoreError(f"{self.path} is damaged ({_one_line(error)}); sign the corpus again") from error
            table = table.append_column("run", pa.array(np.zeros(table.num_rows, dtype=np.int64)))
            return _document_index(table, np.arange(table.num_rows, dtype=np.int64))
        return _document_index(*self._snapshot(columns))

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
        if self._manifest is None:
            stored = _read_legacy(self.path, self.params)
            if since_run is not None:
                assert stored.runs is not None
                stored = _select(stored, np.flatnonzero(stored.runs > since_run))
            return stored
        columns = ["id", "path", "content_hash", "shingle_count", "signature", "run"]
        table, keep = self._snapshot(columns)
        if since_run is not None:
            keep = keep[table.column("run").take(pa.array(keep, pa.int64())).to_numpy() > since_run]
        if keep.size != table.num_rows or not np.array_equal(keep, np.arange(keep.size)):
            table = table.take(pa.array(keep, pa.int64()))
        return StoredSignatures(
            params=self.params,
            ids=table.column("id").to_pylist(),
            paths=table.column("path").to_pylist(),
            shingle_counts=table.column("shingle_count").to_numpy().astype(np.int64),
            packed=_packed_signatures(table.column("signature"), self.params, self.path),
            content_hashes=table.column("content_hash").to_numpy(),
            runs=table.column("run").to_numpy().astype(np.int64),
        )

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
        if self._manifest is None:
            raise _legacy_error(self.path)
        lock = _WriterLock(self.path, lock_timeout)
        lock.acquire()
        try:
            self.refresh()
            assert self._manifest is not None
            differences = self._manifest.params.differences(params)
            if differences:
                raise UsageError(
                    f"{self.path} was signed with other parameters ({'; '.join(differences)}, stored vs requested); "
                    f"sign into a new store or remove {self.path}"
                )
            _clean_garbage(self.path, self._manifest)
            return StoreRun(self, lock, self._manifest, params, replace)
        except BaseException:
            lock.release()
            raise

    def compact(self, lock_timeout: float | None = 0.0) -> bool:
        """Rewrite the live rows into fresh parts and drop the removal files; False when already compact."""
        if self._manifest is None:
            raise _legacy_error(self.path)
        lock = _WriterLock(self.path, lock_timeout)
        lock.acquire()
        try:
            self.refresh()
            manifest = self._manifest
            assert manifest is not None
            _clean_garbage(self.path, manifest)
            if not manifest.removals and sum(not p.compacted for p in manifest.parts) == 0:
                return False
            counter = _FileCounter(manifest.next_file)
            written = _compact(self.path, manifest.params, [self.path / p.file for p in manifest.parts],
                               _read_files(self.path, [r.file for r in manifest.removals], ["id", "run"],
                                           _removal_schema()), counter)
            _commit_files(self.path, written)
            new = dataclasses.replace(
                manifest, parts=tuple(PartFile(w.name, w.rows, True) for w in written), removals=(),
                next_file=counter.next, documents=sum(w.rows for w in written),
            )
            _write_manifest(self.path, new)
            self._manifest = new
            _clean_garbage(self.path, new)
            return True
        finally:
            lock.release()


def _select(stored: StoredSignatures, rows: np.ndarray) -> StoredSignatures:
    assert stored.content_hashes is not None and stored.runs is not None
    return StoredSignatures(
        params=stored.params,
        ids=[stored.ids[row] for row in rows.tolist()],
        paths=[stored.paths[row] for row in rows.tolist()],
        shingle_counts=stored.shingle_counts[rows],
        packed=stored.packed[rows],
        content_hashes=stored.content_hashes[rows],
        runs=stored.runs[rows],
    )


# --- writing runs --------------------------------------------------------------------------------------------


class _FileCounter:
    def __init__(self, first: int) -> None:
        self.next = first

    def __call__(self) -> int:
        number = self.next
        self.next += 1
        return number


@dataclass(frozen=True)
class _WrittenFile:
    temporary: Path
    name: str
    rows: int


class _PartWriter:
    """Write tables into temporary part files of at most PART_ROWS rows; fsync each when it is full."""

    def __init__(self, path: Path, schema: pa.Schema, counter: _FileCounter) -> None:
        self.path = path
        self.schema = schema
        self.counter = counter
        self.finished: list[_WrittenFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._current: tuple[Path, str] | None = None
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        offset = 0
        while offset < table.num_rows:
            if self._writer is None:
                name = f"part-{self.counter():06d}.parquet"
                temporary = self.path / f".{name}.tmp"
                self._writer = pq.ParquetWriter(temporary, self.schema, compression="zstd")
                self._current, self._rows = (temporary, name), 0
            piece = table.slice(offset, PART_ROWS - self._rows)
            self._writer.write_table(piece)
            self._rows += piece.num_rows
            offset += piece.num_rows
            if self._rows >= PART_ROWS:
                self._finish()

    def _finish(self) -> None:
        assert self._writer is not None and self._current is not None
        self._writer.close()
        _fsync_path(self._current[0])
        self.finished.append(_WrittenFile(self._current[0], self._current[1], self._rows))
        self._writer, self._current = None, None

    def close(self) -> list[_WrittenFile]:
        if self._writer is not None:
            self._finish()
        return self.finished

    def discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except (pa.ArrowException, OSError):
                pass
            if self._current is not None:
                _unlink_quietly(self._current[0])
            self._writer, self._current = None, None
        for written in self.finished:
            _unlink_quietly(written.temporary)


def _compact(path: Path, params: SignatureParams, sources: Sequence[Path], removals: pa.Table,
             counter: _FileCounter) -> list[_WrittenFile]:
    """Stream the live rows of ``sources`` (in order) into new temporary parts, row group by row group."""
    schema = part_schema(params)
    id_runs = [_open_part(source.parent, source.name) for source in sources]
    try:
        keys = pa.concat_tables([part.read(columns=["id", "run"]) for part in id_runs]) if id_runs else None
    finally:
        for part in id_runs:
            part.close()
    keep = np.empty(0, np.int64) if keys is None else np.sort(_live_rows(keys["id"], keys["run"], removals))
    writer = _PartWriter(path, schema, counter)
    try:
        buffered: list[pa.Table] = []
        buffered_rows = 0
        offset = 0
        for source in sources:
            parquet = _open_part(source.parent, source.name)
            try:
                for group in range(parquet.num_row_groups):
                    rows = parquet.metadata.row_group(group).num_rows
                    low, high = np.searchsorted(keep, [offset, offset + rows])
                    if high > low:
                        table = parquet.read_row_group(group, columns=list(_PART_COLUMNS))
                        if high - low < rows:
                            table = table.take(pa.array(keep[low:high] - offset, pa.int64()))
                        buffered.append(table.replace_schema_metadata(None))
                        buffered_rows += table.num_rows
                    offset += rows
                    if buffered_rows >= ROW_GROUP_ROWS:
                        writer.write(pa.concat_tables(buffered).cast(schema))
                        buffered, buffered_rows = [], 0
            finally:
                parquet.close()
        if buffered:
            writer.write(pa.concat_tables(buffered).cast(schema))
        return writer.close()
    except BaseException:
        writer.discard()
        raise


def _commit_files(path: Path, written: Iterable[_WrittenFile]) -> None:
    """Rename fsynced temporary files to their final names and make the renames durable."""
    for item in written:
        os.replace(item.temporary, path / item.name)
    _fsync_path(path, directory=True)


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class StoreRun:
    """One sign run: write new or changed documents, remove gone ones; commit on a clean exit.

    Hold it in a ``with`` block: leaving it normally commits (parts, then the manifest, atomically);
    an exception discards everything written and the store stays as it was. The writer lock is held
    from :meth:`Store.begin_run` to the end of the block.
    """

    def __init__(self, store: Store, lock: _WriterLock, manifest: Manifest, params: SignatureParams,
                 replace: bool) -> None:
        self.store = store
        self.params = params
        self.replace = replace
        self.number = manifest.last_run + 1
        self.id_root = manifest.id_root  # set it to record the root of a store's first run that names files
        self.rows_written = 0
        self.record: RunRecord | None = None
        self._lock = lock
        self._manifest = manifest
        self._counter = _FileCounter(manifest.next_file)
        self._schema = part_schema(params)
        self._parts = _PartWriter(store.path, self._schema, self._counter)
        self._written_ids: list[pa.Array] = []
        self._removed: list[str] = []
        self._index: DocumentIndex | None = None
        self._temporaries: list[Path] = []
        self._open = True

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
            self._index = _document_index(
                *_read_snapshot(self.store.path, self._manifest, ["id", "path", "size", "mtime_ns", "content_hash"])
            )
        return self._index

    def write(self, batch: DocumentBatch) -> None:
        """Add new or changed documents; a changed document's older row stops being live at commit."""
        assert self._open, "the run is over"
        if not batch.ids:
            return
        table = _batch_table(batch, self.params, self._schema, self.number)
        try:
            self._parts.write(table)
        except OSError as error:
            raise StoreError(f"cannot write {self.store.path}: {error.strerror or error}") from error
        self._written_ids.append(table.column("id").combine_chunks())
        self.rows_written += len(batch.ids)

    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents (those gone from the corpus); ids not stored are ignored, ids written in this run win."""
        assert self._open, "the run is over"
        self._removed.extend(ids)

    def abort(self) -> None:
        """Discard what this run wrote and release the lock (also on KeyboardInterrupt)."""
        if not self._open:
            return
        self._open = False
        try:
            self._parts.discard()
            for temporary in self._temporaries:
                _unlink_quietly(temporary)
        finally:
            self._lock.release()

    def commit(self) -> RunRecord:
        """Make the run durable and visible: one atomic manifest replace; compacts when due."""
        assert self._open, "the run is over"
        try:
            record = self._commit()
        except BaseException:
            self.abort()
            raise
        self._open = False
        self._lock.release()
        return record

    def _commit(self) -> RunRecord:
        path, before = self.store.path, self._manifest
        try:
            new_parts = self._parts.close()
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from error
        written = pa.chunked_array(self._written_ids, pa.string())
        if len(written) > 1:
            unique = pc.unique(written)
            if len(unique) < len(written):
                counts = pc.value_counts(written)
                repeated = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))[0].as_py()
                raise ValueError(f"run {self.number} wrote document id {repeated!r} more than once")
        touched = len(written) > 0 or bool(self._removed) or self.replace
        live_before = self.document_index()._ids if touched else pa.array([], pa.string())
        changed = int(pc.sum(pc.is_in(written, value_set=live_before)).as_py() or 0) if len(written) else 0
        added = len(written) - changed
        removals = pa.table({"id": pa.array([], pa.string()), "run": pa.array([], pa.int64())})
        if self.replace:
            removed = before.documents - changed
        else:
            requested = pc.unique(pa.array(self._removed, pa.string())) if self._removed else pa.array([], pa.string())
            effective = pc.and_(pc.is_in(requested, value_set=live_before),
                                pc.invert(pc.is_in(requested, value_set=written)))
            removed_ids = requested.filter(effective)
            removed = len(removed_ids)
            if removed:
                removals = pa.table({"id": removed_ids, "run": pa.array(np.full(removed, self.number, np.int64))})
        documents = before.documents + added - removed if not self.replace else len(written)

        old_parts = () if self.replace else before.parts
        old_removals = () if self.replace else before.removals
        removal_files: list[_WrittenFile] = []
        if removals.num_rows:
            name = f"_removed-{self._counter():06d}.parquet"
            temporary = path / f".{name}.tmp"
            self._temporaries.append(temporary)
            pq.write_table(removals, temporary, compression="zstd")
            _fsync_path(temporary)
            removal_files.append(_WrittenFile(temporary, name, removals.num_rows))
        parts = old_parts + tuple(PartFile(w.name, w.rows, self.replace) for w in new_parts)
        listed_removals = old_removals + tuple(RemovalFile(w.name, w.rows, self.number) for w in removal_files)
        rows = sum(part.rows for part in parts)
        deltas = sum(not part.compacted for part in parts) + len(listed_removals)
        compacting = not self.replace and (
            deltas > MAX_DELTA_FILES or (rows > 0 and rows - documents > MAX_DEAD_FRACTION * rows)
        )
        if compacting:
            all_removals = pa.concat_tables([
                _read_files(path, [r.file for r in old_removals], ["id", "run"], _removal_schema()), removals,
            ])
            sources = [path / p.file for p in old_parts] + [w.temporary for w in new_parts]
            compacted = _compact(path, self.params, sources, all_removals, self._counter)
            self._temporaries.extend(w.temporary for w in compacted)
            _commit_files(path, compacted)
            parts = tuple(PartFile(w.name, w.rows, True) for w in compacted)
            listed_removals = ()
            documents = sum(w.rows for w in compacted)
        else:
            _commit_files(path, [*new_parts, *removal_files])
        self.record = RunRecord(run=self.number, time=_utc_now(), added=added, changed=changed, removed=removed,
                                documents=documents, compacted=compacting, replaced=self.replace)
        manifest = Manifest(params=self.params, parts=parts, removals=listed_removals,
                            runs=(*before.runs, self.record), next_file=self._counter.next, documents=documents,
                            id_root=self.id_root)
        _write_manifest(path, manifest)
        # Committed. Files no longer listed (and unused temporaries) are garbage now; a failure to delete
        # them is harmless (the next run does it).
        self.store._manifest = manifest
        self._parts.discard()
        for temporary in self._temporaries:
            _unlink_quietly(temporary)
        try:
            _clean_garbage(path, manifest)
        except OSError:
            pass
        return self.record


# --- opening and creating ------------------------------------------------------------------------------------


def open_store(path: str | os.PathLike[str]) -> Store:
    """Open the store at ``path`` (a format 2 directory or a format 1 file), reading only its manifest or footer."""
    path = Path(path)
    if path.is_dir():
        manifest = Manifest.from_json(path, _read_manifest_bytes(path))
        return Store(path, FORMAT_VERSION, manifest.params, manifest)
    if not path.exists():
        raise StoreError(f"store {path} does not exist; create it with: dedup sign INPUT -o {path}")
    parquet = _open_parquet(path)
    version, params = _parse_metadata(path, parquet.schema_arrow.metadata)
    if version != LEGACY_FORMAT_VERSION:
        raise StoreError(f"{path} is one part of a directory store; pass the directory {path.parent}")
    return Store(path, version, params, None, legacy_rows=parquet.metadata.num_rows)


def _refuse_foreign_directory(path: Path) -> None:
    foreign = [name for name in sorted(os.listdir(path)) if not _is_ours(name)]
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
    path = Path(path)
    if path.exists() and not path.is_dir():
        try:
            existing = open_store(path)
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
        _refuse_foreign_directory(path)  # before the lock file is added to someone else's directory
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from error
    lock = _WriterLock(path, lock_timeout)
    lock.acquire()
    try:
        if (path / MANIFEST_NAME).exists():  # created by a concurrent run between our check and the lock
            if exist_ok:
                return open_store(path)
            raise StoreError(f"store {path} already exists; sign into it, or choose another path")
        _refuse_foreign_directory(path)
        _clean_garbage(path, None)
        _write_manifest(path, Manifest(params=params))
    finally:
        lock.release()
    return open_store(path)


def compact(path: str | os.PathLike[str], lock_timeout: float | None = 0.0) -> bool:
    """Compact the store at ``path`` (see :meth:`Store.compact`)."""
    return open_store(path).compact(lock_timeout)


def read_store_params(path: str | os.PathLike[str]) -> SignatureParams:
    """The parameters of the store at ``path``, reading only its manifest (or a format 1 file's footer)."""
    return open_store(path).params


def read_store(path: str | os.PathLike[str], since_run: int | None = None) -> StoredSignatures:
    """Read the live rows of a store in ascending id order, checking that this version understands it.

    Args:
        since_run: keep only the rows written by runs after this one (0: every row of a format 2 store);
            a run the store never had is a :class:`UsageError`.
    """
    return open_store(path).read(since_run)


def write_records_parquet(records: Iterable[dict[str, Any]], fields: Sequence[str], destination: Any) -> int:
    """Write ``find`` records as one Parquet table to a path or a binary stream; returns the row count.

    ``fields`` fixes the column order (and the columns of an empty result, all strings then).
    """
    rows = list(records)
    if rows:
        table = pa.Table.from_pylist(rows).select(list(fields))
    else:
        table = pa.table({name: pa.array([], pa.string()) for name in fields})
    pq.write_table(table, destination, compression="zstd")
    return len(rows)
