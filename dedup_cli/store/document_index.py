"""The live documents of a store without their signatures: what an incremental sign run compares the corpus with.

An id belongs to the source that gave it (docs/inputs.md, "Ids"): :meth:`DocumentIndex.source_of` says whether a
document read is from its stored copy's source, from another while that one is gone (the id moves), or from another
that still holds it (skipped); :class:`GoneSources` says which sources a run takes as gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dedup_cli.store.format import integers

SAME_SOURCE, MOVED, HELD_ELSEWHERE = 0, 1, 2
"""What a document read says of the stored one with its id (:meth:`DocumentIndex.source_of`): read from the
same source; its stored source is gone, so the id moves to the new one; or its stored source still holds it, so
the one read is skipped."""


def source_of(location: str) -> str:
    """The source of a location (:mod:`dedup_cli.inputs.locations`): the file, URL or stdin (``-``), without a
    record's ``#line=``/``#row=`` part (a ``#`` in a path is percent-encoded, so the first ``#`` starts it)."""
    return location.partition("#")[0]


@dataclass(frozen=True)
class GoneSources:
    """Which stored sources a run takes as gone, so that their ids may move to another source: a file that no
    longer exists; and with ``prune``, every source not under the run's ``inputs`` (absolute paths, ``-``),
    whose documents the prune removes anyway. ``inputs`` None: the run named its files in a list
    (``files_from``), which is not looked through. Stdin and object storage are taken as still there."""

    prune: bool = False
    inputs: tuple[str, ...] | None = ()

    def __call__(self, source: str) -> bool:
        import os

        from dedup_cli.inputs.locations import STDIN, path_of_location
        from dedup_cli.objectstore.urls import is_url

        path = path_of_location(source)
        if self.prune and self.inputs is not None and not any(
                path == named or (named != STDIN and path.startswith(named.rstrip("/") + "/"))
                for named in self.inputs):
            return True
        return path != STDIN and not is_url(path) and not os.path.lexists(path)


@dataclass
class DocumentIndex:
    """The live documents of a store without their signatures, in ascending id order.

    What an incremental run compares the corpus against: whether a file is unchanged before reading it
    (same location, size and modification time), whether a document read changed (its content hash), and the
    stored documents that are gone (:meth:`absent`). This is the one place change detection is decided.
    """

    sizes: np.ndarray  # int64[n]
    mtimes_ns: np.ndarray  # int64[n]
    content_hashes: np.ndarray  # uint64[n]
    runs: np.ndarray  # int64[n]
    id_array: pa.Array = field(repr=False)  # string[n]
    path_array: pa.Array = field(repr=False)  # string[n]
    # int64[n]: where each live row is among the listed parts' rows (as :func:`read_snapshot` numbers them), so
    # that a run can copy a stored row (:meth:`dedup_cli.store.runs.StoreRun.stored_signatures`); None: unknown.
    positions: np.ndarray | None = field(default=None, repr=False)
    gone: GoneSources = field(default_factory=GoneSources)  # the run's: which stored sources are gone
    _rows: dict[str, int] | None = field(default=None, repr=False)
    _paths: list[str] | None = field(default=None, repr=False)
    _gone: dict[str, bool] = field(default_factory=dict, repr=False)  # source → gone, asked once per source

    def __len__(self) -> int:
        return len(self.id_array)

    @property
    def ids(self) -> list[str]:
        return self.id_array.to_pylist()

    @property
    def paths(self) -> list[str]:
        return self.path_array.to_pylist()

    def subset(self, rows: np.ndarray | Sequence[int]) -> DocumentIndex:
        """The index of the documents at ``rows`` alone (int64 rows of this one), as a task that meets only them
        is given it: its rows are numbered anew, and it knows where they are in the parts no more."""
        taken = pa.array(np.asarray(rows, np.int64), pa.int64())
        picked = np.asarray(rows, np.int64)
        return DocumentIndex(self.sizes[picked], self.mtimes_ns[picked], self.content_hashes[picked],
                             self.runs[picked], self.id_array.take(taken), self.path_array.take(taken),
                             gone=self.gone)

    def ids_at(self, rows: np.ndarray) -> list[str]:
        """The ids of ``rows`` (int64[m] positions, or bool[n])."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return self.id_array.take(pa.array(rows, pa.int64())).to_pylist()

    def row(self, identifier: str) -> int | None:
        """The row of ``identifier``, or None when it is not stored.

        Files are looked up one at a time as they are listed, so the ids are put in a dict once, at the first
        look-up, rather than searched each time.
        """
        if self._rows is None:
            self._rows = {stored: row for row, stored in enumerate(self.ids)}
        return self._rows.get(identifier)

    def file_unchanged(self, identifier: str, location: str, size: int, mtime_ns: int) -> bool:
        """Before reading: stored under ``identifier`` with the same location, size and modification time.

        The cheap first test of an incremental run; a file that fails it is read, and
        :meth:`content_changed` then decides whether it must be signed again.
        """
        row = self.row(identifier)
        if row is None:
            return False
        if self._paths is None:
            self._paths = self.paths
        return (self._paths[row] == location and int(self.sizes[row]) == size
                and int(self.mtimes_ns[row]) == mtime_ns)

    def rows_by_source(self) -> dict[str, np.ndarray]:
        """The rows (int64, ascending) of the documents of each source (:func:`source_of` of their locations)."""
        sources = _sources(self.path_array).dictionary_encode()
        codes = sources.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(sources.dictionary) + 1))
        return {source: order[bounds[code]:bounds[code + 1]]
                for code, source in enumerate(sources.dictionary.to_pylist())}

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """int64[n]: the row of each of ``ids``, -1 where it is not stored."""
        if self._rows is None:
            self.row("")
        assert self._rows is not None
        get = self._rows.get
        return np.fromiter((get(identifier, -1) for identifier in ids), dtype=np.int64, count=len(ids))

    def source_of(self, row: int, location: str) -> int:
        """Whether the document read at ``location`` comes from the source of the stored one at ``row``
        (:data:`SAME_SOURCE`), from another while that one is gone (:data:`MOVED`: the id moves, and the
        document is signed again even if its content is the same, so that its new location is recorded) or
        still there (:data:`HELD_ELSEWHERE`: the one read is skipped). One id rule across runs as within one: an
        id belongs to the source that gave it first (docs/store-format.md, "Ids and sources")."""
        if self._paths is None:
            self._paths = self.paths
        stored = self._paths[row]
        if stored == location:
            return SAME_SOURCE
        source = source_of(stored)
        if source == source_of(location):
            return SAME_SOURCE
        gone = self._gone.get(source)
        if gone is None:
            gone = self._gone[source] = self.gone(source)
        return MOVED if gone else HELD_ELSEWHERE

    def location(self, row: int) -> str:
        """The stored location of the document at ``row``."""
        if self._paths is None:
            self._paths = self.paths
        return self._paths[row]

    def content_changed(self, identifier: str, content_hash: int) -> bool:
        """After reading: new, or its content hash differs from the stored one."""
        row = self.row(identifier)
        return row is None or int(self.content_hashes[row]) != content_hash

    def stdin_documents(self) -> int:
        """How many of the documents were read from stdin (their locations start with ``-``)."""
        import pyarrow.compute as pc

        return int(pc.sum(pc.starts_with(self.path_array, "-")).as_py() or 0) if len(self) else 0

    def places_of(self, rows: np.ndarray, locations: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Whether each document read at ``locations`` is at the stored place of the document at ``rows`` (int64,
        aligned), and whether it is in the same source: (bool[m], bool[m])."""
        import pyarrow.compute as pc

        stored = self.path_array.take(pa.array(np.asarray(rows, np.int64), pa.int64()))
        read = pa.array(list(locations), pa.string())
        same_place = pc.equal(stored, read).to_numpy(zero_copy_only=False)
        same_source = pc.equal(_sources(stored), _sources(read)).to_numpy(zero_copy_only=False)
        return same_place, same_source

    def absent(self, ids: Sequence[str], columns: Sequence[pa.Array] = ()) -> np.ndarray:
        """bool[n]: the stored documents whose id is not among ``ids`` nor in ``columns`` (the ones a prune
        removes)."""
        import pyarrow.compute as pc

        # Columns of either Arrow string type (a task's ids come as large strings): one type to look up in.
        values = pa.concat_arrays([pa.array(ids, pa.string()),
                                   *(column.cast(pa.string()) if column.type != pa.string() else column
                                     for column in columns)])
        return ~pc.is_in(self.id_array, value_set=values).to_numpy(zero_copy_only=False)


def index_of_rows(table: pa.Table, keep: np.ndarray) -> DocumentIndex:
    # Every row live: the table as it is (its rows in the parts' order, looked up by id all the same).
    taken = table.take(pa.array(keep, pa.int64())) if keep.size != table.num_rows else table
    positions = np.asarray(keep, np.int64) if keep.size != table.num_rows else np.arange(table.num_rows)
    columns = {name: taken.column(name).combine_chunks() for name in taken.column_names}
    return DocumentIndex(
        sizes=integers(columns["size"]),
        mtimes_ns=integers(columns["mtime_ns"]),
        content_hashes=integers(columns["content_hash"], np.uint64),
        runs=integers(columns["run"]),
        id_array=columns["id"],
        path_array=columns["path"],
        positions=positions,
    )


def _sources(locations: pa.Array) -> pa.Array:
    """The source of each location (:func:`source_of`)."""
    import pyarrow.compute as pc

    return pc.replace_substring_regex(locations, pattern="#.*", replacement="")
