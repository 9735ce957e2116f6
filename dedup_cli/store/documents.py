"""A store's live documents numbered by rank of id and read a row group at a time, for a ``find`` that never holds
the whole store: the signatures stream past once per round of bands, and only the documents it reports are read
whole.

Documents are numbered as :meth:`dedup_cli.store.store.Store.read` orders them (ascending id; with several
stores, each store's documents after the previous store's), so every stage numbers pairs, buckets and groups the
way the in-memory reading does and the answers are the same. Numbering reads the ``id`` and ``run`` columns of
the whole store once (and the removal files), keeps only the number of each row (nothing when the rows are in id
order already, one sorted part or a format 1 file), the shingle counts and runs, about 16 bytes a document.

The files one manifest lists are opened once and held open until :meth:`NumberedDocuments.close`, so a compaction
that commits and deletes them meanwhile takes nothing away from this reader (POSIX keeps an unlinked file readable
through an open handle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.array_primitives import shared_empty
from dedup_cli.errors import StoreError
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import int64_array, integers, one_line, open_parquet, packed_signatures
from dedup_cli.store.manifest import Manifest
from dedup_cli.store.places import Folder, in_objects
from dedup_cli.store.snapshot import SIGNATURE_COLUMNS, StoredSignatures, live_rows, open_part, stored_signatures
from dedup_cli.store.store import Store

# Runs a function over tasks, giving back the results in order: ``map``, or one that runs them in worker processes.
Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]]


@dataclass
class _File:
    """One opened file of a store: its row groups' sizes and where its rows start among the store's rows."""

    handle: pq.ParquetFile
    group_rows: np.ndarray  # int64[groups]
    first_row: int
    legacy: bool
    name: str = ""  # the file's name in the store's folder


@dataclass
class _Numbered:
    """One store's files and the number of each of its rows."""

    store: Store
    files: list[_File]
    first_doc: int  # the number of this store's first document
    documents: int
    row_of_doc: np.ndarray | None  # int64[documents]: the row each document is (None: document d is row d)
    doc_of_row: np.ndarray | None  # int64[rows]: the document each row is, -1 when dead (None: row r is document r)


def _open_files(store: Store, manifest: Manifest | None) -> list[_File]:
    """The files ``manifest`` lists, opened (a format 1 store's one file when it is None); FileNotFoundError
    passes through, for :meth:`Store.reading` to tell a compaction from a damaged store."""
    if manifest is None:
        handle = open_parquet(Path(str(store.path)))  # format 1 stores are local files
        return [_File(handle, _group_rows(handle), 0, True, Path(str(store.path)).name)]
    files: list[_File] = []
    try:
        first = 0
        for part in manifest.parts:
            handle = open_part(store.path, part.file)
            files.append(_File(handle, _group_rows(handle), first, False, part.file))
            first += int(files[-1].group_rows.sum())
    except BaseException:
        for opened in files:
            opened.handle.close()
        raise
    return files


def _group_rows(handle: pq.ParquetFile) -> np.ndarray:
    metadata = handle.metadata
    return np.array([metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)], np.int64)


def _read(file: _File, group: int, columns: Sequence[str], path: Folder) -> pa.Table:
    stored = [name for name in columns if not (file.legacy and name == "run")]
    try:
        table = file.handle.read_row_group(group, columns=stored, use_threads=False)
    except (pa.ArrowException, OSError, KeyError) as error:
        raise StoreError(f"{path} is damaged ({one_line(error)}); sign the corpus again into a new store") from error
    if file.legacy and "run" in columns:
        table = table.append_column("run", int64_array(np.zeros(table.num_rows, np.int64)))
    return table.replace_schema_metadata(None)


def _columns(files: list[_File], names: Sequence[str], path: Folder) -> dict[str, pa.ChunkedArray]:
    """Some columns of every row group, read together (one read of each row group for all of them)."""
    tables = [_read(file, group, names, path) for file in files for group in range(file.group_rows.size)]
    return {name: pa.chunked_array([chunk for table in tables for chunk in table.column(name).chunks],
                                   type=tables[0].column(name).type if tables else pa.int64())
            for name in names}


def _removals(store: Store, manifest: Manifest) -> pa.Table | None:
    if not manifest.removals:
        return None
    tables = []
    for removal in manifest.removals:
        handle = open_part(store.path, removal.file)
        try:
            tables.append(handle.read(columns=["id", "run"]).replace_schema_metadata(None))
        finally:
            handle.close()
    return pa.concat_tables(tables)


def _numbers_in_workers(files: list[_File], path: Folder, mapper: Mapper) -> tuple[np.ndarray, np.ndarray, bool]:
    """(shingle counts, runs, whether the ids ascend throughout) of every row of ``files``, each row group read by
    ``mapper``'s workers, which write the counts and runs into shared memory and check their ids' order; the
    driver compares only the ids where row groups meet."""
    import pyarrow.compute as pc  # imported here, before the workers are forked, and not by a one-row store

    tasks = [(file, group, file.first_row + int(file.group_rows[:group].sum()))
             for file in files for group in range(file.group_rows.size)]
    rows = sum(int(file.group_rows.sum()) for file in files)
    counts, runs = shared_empty(rows, np.int64), shared_empty(rows, np.int64)

    def read(task: tuple[_File, int, int]) -> tuple[bool, str | None, str | None]:
        file, group, start = task
        table = _read(file, group, ["shingle_count", "run", "id"], path)
        stop = start + table.num_rows
        counts[start:stop] = integers(table.column("shingle_count"))
        runs[start:stop] = integers(table.column("run"))
        ids = table.column("id")
        if table.num_rows == 0:
            return True, None, None
        ascending = table.num_rows == 1 or bool(pc.all(pc.less(ids.slice(0, table.num_rows - 1), ids.slice(1))).as_py())
        return ascending, ids[0].as_py(), ids[-1].as_py()

    found = [result for result in mapper(read, tasks) if result[1] is not None]
    # Python compares str by code point, which is the UTF-8 byte order Arrow's ``less`` compares in.
    in_order = all(ascending for ascending, _, _ in found) and all(
        str(before[2]) < str(after[1]) for before, after in zip(found[:-1], found[1:], strict=True))
    return counts, runs, in_order


class NumberedDocuments:
    """The live documents of one or more stores of the same parameters, numbered by (store, id) (see the
    module docstring). Use as a context manager, or call :meth:`close`.

    Attributes:
        params: the stores' signature parameters.
        documents: live documents in all.
        shingle_counts: int64[documents], by document number.
        runs: int64[documents], the run that wrote each document (0 in format 1 stores).
        store_starts: int64[stores + 1], the number of each store's first document, then ``documents``.
    """

    def __init__(self, stores: Sequence[Store], mapper: Mapper | None = None) -> None:
        """``mapper``: how to read the row groups of a store of local files for numbering (in worker processes
        forked from this one, :meth:`stored` says how); None: here."""
        self.params: SignatureParams = stores[0].params
        self._stores: list[_Numbered] = []
        counts, runs = [], []
        first_doc = 0
        try:
            for store in stores:
                # A listed file gone: read the newer manifest of a compaction that deleted it, else the store is
                # damaged (Store.reading says which).
                number = partial(self._number, store, first_doc, mapper)
                numbered, store_counts, store_runs = number(None) if store.manifest is None else \
                    store.reading(number)
                self._stores.append(numbered)
                counts.append(store_counts)
                runs.append(store_runs)
                first_doc += numbered.documents
        except BaseException:
            self.close()
            raise
        self.documents = first_doc
        self.shingle_counts = counts[0] if len(counts) == 1 else np.concatenate(counts) if counts else \
            np.empty(0, np.int64)
        self.runs = runs[0] if len(runs) == 1 else np.concatenate(runs) if runs else np.empty(0, np.int64)
        self.store_starts = np.array([s.first_doc for s in self._stores] + [first_doc], np.int64)

    def _number(self, store: Store, first_doc: int, mapper: Mapper | None, manifest: Manifest | None
                ) -> tuple[_Numbered, np.ndarray, np.ndarray]:
        """One store numbered from the files ``manifest`` lists (None: a format 1 store)."""
        files = _open_files(store, manifest)
        try:
            legacy = manifest is None
            removals = None if manifest is None else _removals(store, manifest)
            groups = sum(file.group_rows.size for file in files)
            if mapper is not None and not legacy and removals is None and groups > 1 and not in_objects(store.path):
                counts, row_runs, in_order = _numbers_in_workers(files, store.path, mapper)
                keep = None if in_order else live_rows(_columns(files, ["id"], store.path)["id"],
                                                       pa.chunked_array([int64_array(row_runs)]), None)
            else:
                columns = _columns(files, ["shingle_count", "run"] + ([] if legacy else ["id"]), store.path)
                counts = integers(columns["shingle_count"])
                row_runs = integers(columns["run"])
                keep = np.arange(counts.size, dtype=np.int64) if legacy else live_rows(columns["id"],
                                                                                      columns["run"], removals)
        except BaseException:
            for file in files:
                file.handle.close()
            raise
        rows = counts.size
        # Every row, in row order (positions, all distinct): ascending is enough, and needs no array of positions.
        in_order = keep is None or (keep.size == rows and bool(np.all(keep[1:] > keep[:-1])))
        doc_of_row = None
        if not in_order:
            assert keep is not None
            doc_of_row = np.full(rows, -1, np.int64)
            doc_of_row[keep] = np.arange(keep.size, dtype=np.int64)
        documents = rows if keep is None else int(keep.size)
        numbered = _Numbered(store, files, first_doc, documents, None if in_order else keep, doc_of_row)
        return numbered, counts[keep] if not in_order else counts, row_runs[keep] if not in_order else row_runs

    def __enter__(self) -> NumberedDocuments:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for numbered in self._stores:
            for file in numbered.files:
                file.handle.close()
        self._stores = []

    def row_documents(self, store: int = 0) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
        """Per file of the store numbered ``store``, in the order they were read: (its name, its row groups'
        sizes, the document each of its rows is, −1 for a dead row; None when the store's rows are its documents
        in order, row r document r). What an engine that reads the files in pieces elsewhere needs to number
        their rows as this numbering does."""
        numbered = self._stores[store]
        return [(file.name, file.group_rows,
                 None if numbered.doc_of_row is None else
                 numbered.doc_of_row[file.first_row : file.first_row + int(file.group_rows.sum())])
                for file in numbered.files]

    @property
    def row_groups(self) -> int:
        """Row groups in all, what one pass over the signatures reads (for progress)."""
        return sum(file.group_rows.size for numbered in self._stores for file in numbered.files)

    @property
    def reads_in_workers(self) -> bool:
        """Whether forked worker processes may read shares of :meth:`signatures` through the files opened here:
        local files are read at offsets (``pread``), which processes can share; an object store's reader holds a
        connection, which they cannot."""
        return not any(in_objects(numbered.store.path) for numbered in self._stores)

    def signatures(self, part: int = 0, parts: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(docs int64[m], packed uint8[m, S]) of the live rows of each row group in turn, in file order; with
        ``parts`` > 1 only the row groups numbered ``part``, ``part + parts``, … (counted over all files), the
        share of one of ``parts`` readers. A row group with no live row (every one replaced or removed by later
        runs, until a compaction drops them) is not read: it yields empty arrays."""
        number = -1
        nothing = np.empty(0, np.int64), np.empty((0, self.params.signature_bytes), np.uint8)
        for numbered in self._stores:
            for file in numbered.files:
                first = file.first_row
                for group, rows in enumerate(file.group_rows.tolist()):
                    number += 1
                    if number % parts != part:
                        first += rows
                        continue
                    start, first = first, first + rows
                    local = None if numbered.doc_of_row is None else numbered.doc_of_row[start:first]
                    alive = None if local is None else local >= 0
                    if alive is not None and not alive.any():
                        yield nothing
                        continue
                    table = _read(file, group, ["signature"], numbered.store.path)
                    packed = packed_signatures(table.column("signature"), self.params, numbered.store.path)
                    if local is None:
                        yield np.arange(start, first, dtype=np.int64) + numbered.first_doc, packed
                    else:
                        yield local[alive] + numbered.first_doc, packed[alive]

    def stored(self, docs: np.ndarray, columns: Sequence[str] = SIGNATURE_COLUMNS,
               mapper: Mapper | None = None, forked: bool = False) -> StoredSignatures:
        """The documents ``docs`` (int64, ascending, unique) as a store of their own, in that order: ids,
        locations, counts, signatures, content hashes, runs and times, read from the row groups that hold them.

        ``mapper(read, groups)``: the tables ``read(group)`` of the row groups in order, however it computes them
        (in worker processes when :attr:`reads_in_workers`); the built-in ``map`` by default. ``forked``: the
        mapper's workers are forked from this process, so they write the signatures and numbers into shared
        memory and send back only the ids and locations (:meth:`_stored_in_shared_memory`)."""
        reads: list[tuple[_File, int, np.ndarray | None, Folder]] = []
        order: list[np.ndarray] = []
        for numbered in self._stores:
            low, high = np.searchsorted(docs, [numbered.first_doc, numbered.first_doc + numbered.documents])
            local = docs[low:high] - numbered.first_doc
            if local.size == 0:
                continue
            rows = local if numbered.row_of_doc is None else numbered.row_of_doc[local]
            by_row = np.argsort(rows, kind="stable")
            sorted_rows = rows[by_row]
            for file in numbered.files:
                starts = file.first_row + np.r_[0, np.cumsum(file.group_rows)[:-1]]
                for group, (start, size) in enumerate(zip(starts.tolist(), file.group_rows.tolist(), strict=True)):
                    a, b = np.searchsorted(sorted_rows, [start, start + size])
                    if b == a:
                        continue
                    reads.append((file, group, sorted_rows[a:b] - start if b - a < size else None,
                                  numbered.store.path))
            order.append(by_row + low)

        if forked and reads and tuple(columns) == SIGNATURE_COLUMNS:
            return self._stored_in_shared_memory(docs, reads, np.concatenate(order), mapper or map)

        def read(task: tuple[_File, int, np.ndarray | None, Folder]) -> pa.Table:
            file, group, taken, path = task
            table = _read(file, group, columns, path)
            return table if taken is None else table.take(int64_array(taken))

        tables: list[pa.Table] = list((mapper or map)(read, reads))
        if not tables:
            path = self._stores[0].store.path if self._stores else Path(".")
            return stored_signatures(_empty(self.params, columns), self.params, path)
        table = pa.concat_tables(tables)
        del tables
        inverse = _document_order(np.concatenate(order))  # the rows came in row order
        if inverse is not None:
            table = table.take(int64_array(inverse))
        return stored_signatures(table, self.params, self._stores[0].store.path)


    def _stored_in_shared_memory(self, docs: np.ndarray, reads: list[tuple[_File, int, np.ndarray | None, Folder]],
                                 arrived: np.ndarray, mapper: Mapper) -> StoredSignatures:
        """:meth:`stored` with forked readers: each writes its rows' signatures, counts, runs, hashes and times
        into arrays in shared memory at its rows' place, and sends back a table of their ids and locations
        alone (the signatures are most of the bytes: pickled through a pipe, they cost the driver as much as
        reading them)."""
        sizes = [int(file.group_rows[group]) if taken is None else taken.size for file, group, taken, _ in reads]
        starts = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        rows = int(starts[-1])
        packed = shared_empty((rows, self.params.signature_bytes), np.uint8)
        numbers = {name: shared_empty(rows, np.uint64 if name == "content_hash" else np.int64)
                   for name in ("shingle_count", "run", "content_hash", "mtime_ns")}
        params = self.params

        def read(task: tuple[tuple[_File, int, np.ndarray | None, Folder], int]) -> pa.Table:
            (file, group, taken, path), start = task
            table = _read(file, group, SIGNATURE_COLUMNS, path)
            if taken is not None:
                table = table.take(int64_array(taken))
            stop = start + table.num_rows
            packed[start:stop] = packed_signatures(table.column("signature"), params, path)
            for name, column in numbers.items():
                column[start:stop] = integers(table.column(name), column.dtype)
            return table.select(["id", "path"])

        names = pa.concat_tables(list(mapper(read, list(zip(reads, starts[:-1].tolist(), strict=True)))))
        inverse = _document_order(arrived)  # the rows came in row order
        if inverse is not None:
            names = names.take(int64_array(inverse))
            packed = packed[inverse]
            numbers = {name: column[inverse] for name, column in numbers.items()}
        return StoredSignatures(params=params, ids=names.column("id").to_pylist(),
                                paths=names.column("path").to_pylist(), shingle_counts=numbers["shingle_count"],
                                packed=packed, content_hashes=numbers["content_hash"], runs=numbers["run"],
                                mtimes_ns=numbers["mtime_ns"])


def _document_order(arrived: np.ndarray) -> np.ndarray | None:
    """The rows read, in the order they arrived (``arrived[i]``: the place among the documents asked for of the
    i-th row), put back in document order: the positions to take, or None when they arrived in it (the rows are
    in id order already: one sorted part, or a format 1 file)."""
    if arrived.size < 2 or bool(np.all(arrived[1:] > arrived[:-1])):
        return None
    inverse = np.empty(arrived.size, np.int64)
    inverse[arrived] = np.arange(arrived.size, dtype=np.int64)
    return inverse


def _empty(params: SignatureParams, columns: Sequence[str]) -> pa.Table:
    from dedup_cli.store.format import part_schema

    return part_schema(params).empty_table().select(list(columns)).replace_schema_metadata(None)
