"""Reading a snapshot: the parts and removals one manifest lists, and which of their rows are live.

The live-row rule (docs/store-format.md): among the rows of the listed parts with one id, the row with the
highest ``run`` wins (an id is written at most once per run); it is live unless a listed removal of that id has
a higher run. Readers take no lock: they read one manifest and its parts.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.errors import StoreError
from dedup_cli.minhash.packing import estimator_values, unpack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import (
    REMOVAL_NAME,
    column_problem,
    integers,
    one_line,
    packed_signatures,
    part_schema,
    removal_schema,
)
from dedup_cli.store.manifest import Manifest
from dedup_cli.store.places import Folder, parquet_source


def live_rows(ids: pa.ChunkedArray, runs: pa.ChunkedArray, removals: pa.Table | None) -> np.ndarray:
    """Positions of the live rows (see the module docstring), ordered by ascending id: int64[n_live].

    Args:
        ids, runs: the ``id`` and ``run`` columns of the parts, concatenated in manifest order.
        removals: a table with columns ``id`` and ``run``, or None.
    """
    count = len(ids)
    if count == 0:
        return np.empty(0, dtype=np.int64)
    no_removals = removals is None or removals.num_rows == 0
    if no_removals and count == 1:
        return np.arange(count, dtype=np.int64)
    import pyarrow.compute as pc  # 30-50 ms, not paid by a run that starts a store nor one of a single document
    if no_removals and pc.all(pc.less(ids.slice(0, count - 1), ids.slice(1))).as_py():
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


_READ_ERRORS = (pa.ArrowException, OSError, KeyError, UnicodeDecodeError)
"""What Arrow raises on a damaged file: a bad checksum or a short read (OSError), an undecodable footer or page."""


def damaged(path: Folder, name: str, reason: str) -> StoreError:
    return StoreError(f"{path} is damaged ({name}: {reason}); sign the corpus again into a new store")


def missing_file(path: Folder, missing: FileNotFoundError) -> StoreError:
    """A file the manifest lists is gone, and no newer manifest replaced it (a compaction would have): the store is
    damaged, and reading again would meet the same gap."""
    name = PurePath(str(missing.filename)).name
    return StoreError(f"{path} is damaged ({name} is listed in its manifest but missing); sign the corpus again "
                      "into a new store")


class StorePart(pq.ParquetFile):
    """A listed file of a store (a part, or a removal file), opened for reading: its columns are checked against
    what dedup writes when it is opened, its pages' checksums as they are read, and a file that cannot be read is
    a :class:`StoreError` naming it, whichever of the readers below meets it.

    A local file is verified once per open: a row group's column read again (``find`` streams the signatures
    once per round of bands) is read without verifying, through the same open file, whose bytes a store never
    rewrites; verifying costs as much again as reading (docs/store-format.md).
    """

    def __init__(self, path: Folder, name: str, legacy: bool = False) -> None:
        source = parquet_source(path / name)
        self._file = pa.OSFile(source) if isinstance(source, str) else None  # Arrow's own, shared by both readers
        try:
            super().__init__(source if self._file is None else self._file, page_checksum_verification=True)
        except BaseException:
            if self._file is not None:
                self._file.close()
            raise
        self.folder, self.name = path, name
        self._verified: set[tuple[int, str]] = set()  # (row group, column) already read and verified
        self._unverified: pq.ParquetFile | None = None
        problem = column_problem(self.schema_arrow, removal=REMOVAL_NAME.fullmatch(name) is not None, legacy=legacy)
        if problem is not None:
            self.close()
            raise damaged(path, name, f"not a file dedup wrote: {problem}")

    def close(self, force: bool = False) -> None:
        super().close(force=True)
        if self._unverified is not None:
            self._unverified.close(force=True)
        if self._file is not None:
            self._file.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except FileNotFoundError:
            raise  # gone from object storage since it was opened (a compaction): the callers read again
        except _READ_ERRORS as error:
            raise damaged(self.folder, self.name, one_line(error)) from error

    def read(self, *arguments: Any, **options: Any) -> pa.Table:
        with self._reading():
            return super().read(*arguments, **options)

    def read_row_group(self, i: int, columns: Sequence[str] | None = None, **options: Any) -> pa.Table:
        read = {(i, name) for name in (self.schema_arrow.names if columns is None else columns)}
        with self._reading():
            if self._file is None or not read <= self._verified:
                table = super().read_row_group(i, columns=columns, **options)
                self._verified |= read
                return table
            if self._unverified is None:
                self._unverified = pq.ParquetFile(self._file, metadata=self.metadata)
            return self._unverified.read_row_group(i, columns=columns, **options)

    def read_row_groups(self, *arguments: Any, **options: Any) -> pa.Table:
        with self._reading():
            return super().read_row_groups(*arguments, **options)


def open_part(path: Folder, name: str, legacy: bool = False) -> StorePart:
    """Open one listed file (``legacy``: a format 1 store, which has no ``run`` column); FileNotFoundError passes
    through (a compaction may have deleted it)."""
    try:
        return StorePart(path, name, legacy)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "listed but missing", name) from None
    except _READ_ERRORS as error:
        raise damaged(path, name, one_line(error)) from error


def read_files(path: Folder, names: Sequence[str], columns: Sequence[str], schema: pa.Schema) -> pa.Table:
    tables = []
    for name in names:
        parquet = open_part(path, name)
        try:
            tables.append(parquet.read(columns=list(columns)))
        except (pa.ArrowException, OSError, KeyError) as error:
            raise StoreError(
                f"{path} is damaged ({name}: {one_line(error)}); sign the corpus again into a new store"
            ) from error
        finally:
            parquet.close()
    if not tables:
        return schema.empty_table().select(list(columns))
    try:
        return pa.concat_tables([table.replace_schema_metadata(None) for table in tables])
    except pa.ArrowInvalid as error:
        raise StoreError(f"{path} is damaged (parts disagree: {one_line(error)}); sign the corpus again into a "
                         "new store") from error


def read_snapshot(path: Folder, manifest: Manifest, columns: Sequence[str]) -> tuple[pa.Table, np.ndarray]:
    """The listed parts' ``columns`` (plus id and run) and the positions of their live rows, in id order."""
    wanted = list(dict.fromkeys([*columns, "id", "run"]))
    table = read_files(path, [p.file for p in manifest.parts], wanted, part_schema(manifest.params))
    removals = read_files(path, [r.file for r in manifest.removals], ["id", "run"], removal_schema())
    return table, live_rows(table.column("id"), table.column("run"), removals)


def may_hold_stdin(path: Folder, manifest: Manifest) -> bool:
    """Whether a listed part may hold documents read from stdin, by the statistics of its ``path`` column alone: a
    location starting with ``-`` sorts before every path and URL."""
    for part in manifest.parts:
        parquet = open_part(path, part.file)
        try:
            column = parquet.schema_arrow.get_field_index("path")
            for group in range(parquet.num_row_groups):
                statistics = parquet.metadata.row_group(group).column(column).statistics
                if statistics is None or not statistics.has_min_max:
                    return True
                least = statistics.min
                if least.startswith(b"-") if isinstance(least, bytes) else str(least).startswith("-"):
                    return True
        finally:
            parquet.close()
    return False


# --- stores --------------------------------------------------------------------------------------------------


def selected_rows(files: Sequence[Folder], positions: np.ndarray, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The rows at ``positions`` (int64, ascending, numbered across ``files`` in order) of ``columns``, one table
    per row group that holds some of them; the other row groups are not read."""
    offset = 0
    for file in files:
        parquet = open_part(file.parent, file.name)
        try:
            for group in range(parquet.num_row_groups):
                rows = parquet.metadata.row_group(group).num_rows
                low, high = np.searchsorted(positions, [offset, offset + rows])
                if high > low:
                    table = parquet.read_row_group(group, columns=list(columns))
                    if high - low < rows:
                        table = table.take(pa.array(positions[low:high] - offset, pa.int64()))
                    yield table.replace_schema_metadata(None)
                offset += rows
        finally:
            parquet.close()


def read_rows(path: Folder, manifest: Manifest, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """``columns`` of the rows at ``rows`` (int64 positions in the listed parts, concatenated in manifest order,
    as :func:`read_snapshot` numbers them), in the order given; only the row groups holding them are read."""
    order = np.argsort(rows, kind="stable")
    try:
        pieces = list(selected_rows([path / part.file for part in manifest.parts], rows[order], columns))
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, KeyError) as error:
        raise StoreError(f"{path} is damaged ({one_line(error)}); sign the corpus again into a new store") from error
    if not pieces:
        return part_schema(manifest.params).empty_table().select(list(columns))
    inverse = np.empty(order.size, dtype=np.int64)
    inverse[order] = np.arange(order.size)
    return pa.concat_tables(pieces).take(pa.array(inverse, pa.int64()))


SIGNATURE_COLUMNS = ("id", "path", "mtime_ns", "content_hash", "shingle_count", "signature", "run")
"""The columns a :class:`StoredSignatures` holds."""


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
    mtimes_ns: np.ndarray | None = None  # int64[n_docs], the modification time of each document's file
    texts: list[str] | None = None  # the texts themselves, for documents signed in memory (None: re-read them)

    def __len__(self) -> int:
        return len(self.ids)

    def values(self, bits: float | None = None) -> np.ndarray:
        """The stored minwise values, or only their lowest ``bits`` bits: uint[n_docs, k]; with b = 1/2
        the XOR bits, uint8[n_docs, k/2] (:func:`dedup_cli.minhash.packing.xor_bits`)."""
        values = unpack_values(self.packed, self.params.bits, self.params.num_perm)
        return values if bits is None else estimator_values(values, bits, self.params.xor_pairs)


def stored_signatures(table: pa.Table, params: SignatureParams, path: Folder) -> StoredSignatures:
    """A table of :data:`SIGNATURE_COLUMNS`, one row per document, as :class:`StoredSignatures`."""
    return StoredSignatures(
        params=params,
        ids=table.column("id").to_pylist(),
        paths=table.column("path").to_pylist(),
        shingle_counts=integers(table.column("shingle_count")),
        packed=packed_signatures(table.column("signature"), params, path),
        content_hashes=integers(table.column("content_hash"), np.uint64),
        runs=integers(table.column("run")),
        mtimes_ns=integers(table.column("mtime_ns")),
    )


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def named_rows(ids: pa.ChunkedArray, keep: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The positions (among all rows) of the live rows named by ``names``, in that order, and the names that
    are not live ids."""
    import pyarrow.compute as pc  # 30-50 ms: imported by the commands that need it, not by every sign

    # A name that is not valid UTF-8 (an undecodable file name given on the command line) is no stored id.
    valid = [_is_utf8(name) for name in names]
    found = pc.index_in(pa.array([name if ok else None for name, ok in zip(names, valid, strict=True)],
                                 pa.string()), value_set=ids.take(pa.array(keep, pa.int64())))
    present = pc.is_valid(found).to_numpy(zero_copy_only=False)
    missing = [name for name, here in zip(names, present.tolist(), strict=True) if not here]
    return keep[pc.fill_null(found, 0).to_numpy()[present]], missing
