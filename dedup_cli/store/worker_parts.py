"""Parts of a sign run written by the worker processes of one machine, and what the run's driver needs of them.

Each worker appends the new and changed rows of the tasks it signs to one open part of its own
(:class:`RunParts`), rolled at :data:`dedup_cli.store.parts.PART_ROWS` rows, and tells the driver what each task
read as columns (:class:`ReadIds`: the ids as one Arrow array, and their 64-bit hashes). The driver finds the ids
read twice in one sort of the hashes (:func:`later_copies`), rewrites the rare parts holding rows of such ids
without them (:func:`drop_part_rows`), joins the parts of a small run (:func:`merge_parts`) and adopts the parts
into the run (:meth:`dedup_cli.store.runs.StoreRun.adopt_parts`): nothing of them is visible before its commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dedup_cli.errors import StoreError
from dedup_cli.params import SignatureParams
from dedup_cli.store import parts as part_files
from dedup_cli.store.format import DocumentBatch, batch_table, part_schema
from dedup_cli.store.parts import WrittenFile
from dedup_cli.store.places import Folder, ParquetSink, new_name, parquet_file, remove, where_written, write_table

ROW_GROUP_ROWS = 8192
"""Rows a worker writes to its part at a time (one Parquet row group): a row group per task of a few hundred
documents costs five times the CPU of writing the same rows in groups of thousands."""


@dataclass(frozen=True)
class ReadIds:
    """The ids of the documents a task read, in order, as one Arrow column (it travels between processes as a
    few buffers, not a Python string per id), and their 64-bit hashes, which find ids read twice in one sort."""

    ids: pa.Array
    hashes: np.ndarray  # int64[n]

    @classmethod
    def of(cls, ids: Sequence[str]) -> ReadIds:
        return cls(pa.array(ids, pa.string()), np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids)))

    def __len__(self) -> int:
        return len(self.ids)

    def where(self, mask: np.ndarray) -> ReadIds:
        """The ids at the positions ``mask`` (bool[n]) marks."""
        return ReadIds(self.ids.filter(pa.array(mask, pa.bool_())), self.hashes[mask])

    def at(self, positions: np.ndarray) -> list[str]:
        """The ids at ``positions`` (int64), as strings."""
        return self.ids.take(pa.array(positions, pa.int64())).to_pylist()

    @staticmethod
    def joined(parts: Sequence[ReadIds]) -> ReadIds:
        """Ids of several tasks one after the other."""
        if len(parts) == 1:
            return parts[0]
        chunks = [part.ids for part in parts if len(part)]
        ids = pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())
        hashes = np.concatenate([part.hashes for part in parts]) if parts else np.empty(0, np.int64)
        return ReadIds(ids, hashes)


class RunParts:
    """The parts one worker process writes for a run: its tasks' rows appended to one open part, rolled at
    :data:`dedup_cli.store.parts.PART_ROWS` rows (the rows of one task stay in one part), under names that only a
    commit makes visible (a part is adopted by the run's driver, :meth:`StoreRun.adopt_parts`).

    The file number of each part is the one the driver reserved for the task that opens it, so parts of
    different workers never share a name without any coordination between them.
    """

    def __init__(self, path: Folder, params: SignatureParams, run: int, token: str | None,
                 part_rows: int | None = None) -> None:
        self.path = path
        self.params = params
        self.run = run
        self.token = token
        self.part_rows = part_files.PART_ROWS if part_rows is None else part_rows
        self.schema = part_schema(params)
        self._sink: ParquetSink | None = None
        self._name = ""
        self._rows = 0
        self._waiting: list[pa.Table] = []
        self._waiting_rows = 0
        self.finished: list[WrittenFile] = []  # the parts closed, in order

    def add(self, batch: DocumentBatch, number: int) -> tuple[str | None, int]:
        """Append the rows of one task; ``number`` is the task's reserved file number, used if a new part opens.
        Returns the part's name and the row its first row has in it (None when there are no rows)."""
        try:
            return self._add(batch, number)
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error

    def _add(self, batch: DocumentBatch, number: int) -> tuple[str | None, int]:
        count = len(batch.ids)
        if not count:
            return None, 0
        if self._sink is not None and self._rows + count > self.part_rows:
            self._finish()
        if self._sink is None:
            self._name = new_name(f"part-{number:06d}", self.token, self.path)
            self._sink = ParquetSink(where_written(self.path, self._name), self.schema)
            self._rows = 0
        first = self._rows
        self._waiting.append(batch_table(batch, self.params, self.schema, self.run))
        self._rows += count
        self._waiting_rows += count
        if self._waiting_rows >= ROW_GROUP_ROWS:
            self._flush()
        return self._name, first

    def _flush(self) -> None:
        assert self._sink is not None
        if self._waiting:
            self._sink.write_table(pa.concat_tables(self._waiting).combine_chunks())
            self._waiting, self._waiting_rows = [], 0

    def _finish(self) -> WrittenFile:
        assert self._sink is not None
        self._flush()
        self._sink.close()
        self._sink = None
        self.finished.append(WrittenFile(where_written(self.path, self._name), self._name, self._rows))
        return self.finished[-1]

    def close(self) -> WrittenFile | None:
        """Make the open part whole (fsynced, or uploaded); it, or None when no part is open."""
        try:
            return self._finish() if self._sink is not None else None
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error

    def discard(self) -> None:
        """Abandon the open part."""
        if self._sink is not None:
            sink, self._sink = self._sink, None
            sink.discard()


def part_file(path: Folder, name: str, rows: int) -> WrittenFile:
    """The part ``name`` a worker wrote for a run into ``path``, closed, with ``rows`` rows."""
    return WrittenFile(where_written(path, name), name, rows)


def later_copies(read: ReadIds) -> np.ndarray:
    """The positions (int64, ascending) of the ids read before at an earlier position: all but the first of each.

    Only the positions whose 64-bit hash occurs more than once are compared as strings (exact on collisions), so
    without repeated ids this is one sort of the hashes.
    """
    hashes = read.hashes
    if len(hashes) < 2 or bool(np.all(np.diff(np.sort(hashes)) != 0)):
        return np.empty(0, dtype=np.int64)
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    repeated = ordered[1:] == ordered[:-1]
    flagged = np.zeros(len(ordered), dtype=np.bool_)
    flagged[1:] |= repeated
    flagged[:-1] |= repeated
    candidates = np.sort(order[flagged])  # reading order: the first of each id comes first
    first: set[str] = set()
    later = []
    for position, identifier in zip(candidates.tolist(), read.at(candidates), strict=True):
        if identifier in first:
            later.append(position)
        else:
            first.add(identifier)
    return np.array(later, dtype=np.int64)


def drop_part_rows(written: WrittenFile, params: SignatureParams, rows: np.ndarray) -> WrittenFile | None:
    """Rewrite a part a worker wrote without its rows at ``rows`` (int64 positions); None if none is left.

    The part is not listed yet, so it is rewritten where it is: a run killed meanwhile leaves only garbage."""
    table = parquet_file(written.temporary).read()
    dropped = np.zeros(table.num_rows, dtype=bool)
    dropped[rows] = True
    kept = table.filter(pa.array(~dropped)).replace_schema_metadata(None).cast(part_schema(params))
    if not kept.num_rows:
        remove(written.temporary)
        return None
    try:
        write_table(kept, written.temporary)
    except OSError as error:
        raise StoreError(f"cannot write {written.temporary}: {error.strerror or error}") from error
    return WrittenFile(written.temporary, written.name, kept.num_rows)


def merge_parts(written: Sequence[WrittenFile], rows: Sequence[tuple[str, np.ndarray]]) -> WrittenFile | None:
    """Parts workers wrote for a run (not listed yet) joined into the lowest numbered, the others deleted: the rows
    ``rows`` names (the part's name, int64 positions in it), in that order. None if no row is left.

    Given in task order, the part is the same file whatever the number of workers that wrote the rows."""
    tables = {file.name: parquet_file(file.temporary).read().replace_schema_metadata(None) for file in written}
    pieces = [tables[name].take(pa.array(positions, pa.int64())) for name, positions in rows if len(positions)]
    first = min(written, key=lambda file: file.name)  # the lowest number: the first task's
    for file in written:
        if file is not first:
            remove(file.temporary)
    if not pieces:
        remove(first.temporary)
        return None
    joined = pa.concat_tables(pieces).combine_chunks()
    try:
        write_table(joined, first.temporary)
    except OSError as error:
        raise StoreError(f"cannot write {first.temporary}: {error.strerror or error}") from error
    return WrittenFile(first.temporary, first.name, joined.num_rows)
