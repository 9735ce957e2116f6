"""A store in pieces, for an engine that reads it in parallel: runs of row groups of its files, as numpy columns.

The pieces are the listed parts (in manifest order) cut at row-group boundaries into runs of about
``rows_per_piece`` rows, and the removal files; a format 1 store is one file cut the same way. Listing them reads
the manifest and the Parquet footers only. :func:`read_piece` reads some columns of one piece into numpy arrays
(the Dask engine's unit of work), its signatures as packed bytes straight from Arrow's buffers: they move between
processes as plain arrays rather than one Python object per row. Which rows are live is the engine's to decide, by
the rule of docs/store-format.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dedup_cli.errors import StoreError
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import one_line, packed_signatures
from dedup_cli.store.manifest import Manifest
from dedup_cli.store.names import Names
from dedup_cli.store.places import folder_of
from dedup_cli.store.snapshot import live_rows, open_part
from dedup_cli.store.store import Store

ROWS_PER_PIECE = 1 << 17
"""Rows a piece aims at: 33 MB of signatures at k = 256, B = 8, so a task holds a few pieces at most."""


@dataclass(frozen=True)
class StorePiece:
    """Consecutive row groups of one file of a store; ``legacy`` for a format 1 file (no ``run`` column)."""

    path: str
    row_groups: tuple[int, ...]
    rows: int
    legacy: bool = False


def _cut(path: str, legacy: bool, rows_per_piece: int) -> list[StorePiece]:
    folder, name = path.rsplit("/", 1)
    parquet = open_part(folder_of(folder), name, legacy)
    try:
        sizes = [parquet.metadata.row_group(group).num_rows for group in range(parquet.num_row_groups)]
    finally:
        parquet.close()
    pieces: list[StorePiece] = []
    groups: list[int] = []
    rows = 0
    for group, size in enumerate(sizes):
        if size == 0:
            continue
        groups.append(group)
        rows += size
        if rows >= rows_per_piece:
            pieces.append(StorePiece(path, tuple(groups), rows, legacy))
            groups, rows = [], 0
    if groups:
        pieces.append(StorePiece(path, tuple(groups), rows, legacy))
    return pieces


def store_pieces(store: Store, rows_per_piece: int = ROWS_PER_PIECE) -> tuple[list[StorePiece], list[StorePiece]]:
    """The pieces of the parts (in manifest order) and of the removal files of ``store``'s current manifest."""
    if store.manifest is None:  # format 1: one file, every row live
        return _cut(str(store.path.resolve()), True, rows_per_piece), []
    folder = store.path.resolve()

    def cut(manifest: Manifest) -> tuple[list[StorePiece], list[StorePiece]]:
        parts = [piece for part in manifest.parts for piece in _cut(str(folder / part.file), False, rows_per_piece)]
        removals = [piece for removal in manifest.removals
                    for piece in _cut(str(folder / removal.file), False, rows_per_piece)]
        return parts, removals

    # A listed file gone: the pieces of the newer manifest of a compaction that deleted it, else the store is
    # damaged (Store.reading says which).
    return store.reading(cut)


def _piece_table(piece: StorePiece, columns: Sequence[str]) -> pa.Table:
    folder, name = piece.path.rsplit("/", 1)
    try:
        parquet = open_part(folder_of(folder), name, piece.legacy)
    except FileNotFoundError:
        raise StoreError(f"{folder} changed while it was read ({name} is gone); run again") from None
    try:
        return parquet.read_row_groups(list(piece.row_groups), columns=list(columns), use_threads=False)
    except (pa.ArrowException, OSError, KeyError) as error:
        raise StoreError(f"{folder} is damaged ({name}: {one_line(error)}); sign the corpus again into a new "
                         "store") from error
    finally:
        parquet.close()


def read_piece_signatures(piece: StorePiece, params: SignatureParams) -> tuple[np.ndarray, np.ndarray]:
    """(shingle counts int64[n], packed signatures uint8[n, S]) of a piece's rows in file order: what banding
    reads, straight from Arrow's buffers (no data frame, no copy of the signatures)."""
    table = _piece_table(piece, ["shingle_count", "signature"])
    folder = folder_of(piece.path.rsplit("/", 1)[0])
    counts = table.column("shingle_count").to_numpy().astype(np.int64, copy=False)
    return counts, packed_signatures(table.column("signature"), params, folder)


def read_piece_values(piece: StorePiece, params: SignatureParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shingle counts int64[n], runs int64[n], packed signatures uint8[n, S]) of a piece's rows in file order,
    straight from Arrow's buffers (runs are 0 throughout a format 1 file)."""
    table = _piece_table(piece, ["shingle_count", "signature"] if piece.legacy else ["shingle_count", "run",
                                                                                      "signature"])
    folder = folder_of(piece.path.rsplit("/", 1)[0])
    counts = table.column("shingle_count").to_numpy().astype(np.int64, copy=False)
    runs = (np.zeros(table.num_rows, np.int64) if piece.legacy
            else table.column("run").to_numpy().astype(np.int64, copy=False))
    return counts, runs, packed_signatures(table.column("signature"), params, folder)


def read_piece_batches(piece: StorePiece, params: SignatureParams, runs: bool = False
                       ) -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
    """(shingle counts int64[n], runs int64[n] or None, packed signatures uint8[n, S]) of each record batch of a
    piece's rows in file order: views of Arrow's buffers batch by batch, where :func:`read_piece_values` joins the
    batches into one copy (``runs``: read them too, 0 throughout a format 1 file)."""
    stored = ["shingle_count", "signature"] + (["run"] if runs and not piece.legacy else [])
    table = _piece_table(piece, stored)
    folder = folder_of(piece.path.rsplit("/", 1)[0])
    for batch in table.to_batches():
        counts = batch.column("shingle_count").to_numpy().astype(np.int64, copy=False)
        batch_runs = None
        if runs:
            batch_runs = (np.zeros(batch.num_rows, np.int64) if piece.legacy
                          else batch.column("run").to_numpy().astype(np.int64, copy=False))
        yield counts, batch_runs, packed_signatures(batch.column("signature"), params, folder)


def read_piece(piece: StorePiece, columns: Sequence[str], params: SignatureParams | None = None,
               rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``columns`` of a piece's rows (``rows``: only those, by position), in file order, as numpy arrays by name.

    ``signature`` is the packed signatures uint8[n, S] (``params`` says their width); ``run`` is 0 throughout a
    format 1 file; ``id`` and ``path`` are :class:`dedup_cli.store.names.Names` (Arrow strings, which cross
    processes as buffers). A piece whose file is gone (a compaction committed since the pieces were listed) is a
    :class:`StoreError`.
    """
    stored = [name for name in columns if not (piece.legacy and name == "run")]
    table = _piece_table(piece, stored)
    if rows is not None:
        table = table.take(pa.array(rows, pa.int64()))
    folder = folder_of(piece.path.rsplit("/", 1)[0])
    data: dict[str, Any] = {}
    for column in columns:
        if column == "run" and piece.legacy:
            data["run"] = np.zeros(table.num_rows, dtype=np.int64)
        elif column == "signature":
            assert params is not None
            data[column] = packed_signatures(table.column("signature"), params, folder)
        elif column in ("id", "path"):
            data[column] = Names(table.column(column))
        else:
            data[column] = table.column(column).to_numpy()
    return data


def live_positions(ids: Names | np.ndarray, runs: np.ndarray, removed_ids: Names | np.ndarray | None = None,
                   removed_runs: np.ndarray | None = None) -> np.ndarray:
    """:func:`live_rows` of columns (``ids`` and ``removed_ids``: :class:`Names`, or arrays of str): positions of
    the live rows among ``ids``, ordered by ascending id."""
    removals = None
    if removed_ids is not None and len(removed_ids):
        removals = pa.table({"id": Names.of(removed_ids).array.cast(pa.string()),
                             "run": pa.array(np.asarray(removed_runs, np.int64))})
    return live_rows(pa.chunked_array([Names.of(ids).array.cast(pa.string())]),
                     pa.chunked_array([pa.array(np.asarray(runs, np.int64))]), removals)
