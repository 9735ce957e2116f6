"""Documents numbered on the cluster, for a store too large for the driver to number (past
:data:`NUMBERED_IN_DRIVER` stored rows).

A sample sort of the ids alone: every piece reads its ``id``, ``run`` and ``shingle_count`` columns (and the
removal files their ``id`` and ``run``); splitters drawn from a sample of the ids cut them into ranges of ids, and
one exchange brings each id's rows together. Each range applies the live-row rule of docs/store-format.md (the
store's own :func:`dedup_cli.store.store_pieces.live_positions`) and lists its live rows in id order; the driver
adds up the ranges' counts, and each range sends the number of each live row back to its piece by a second exchange. No
signature moves, and no process holds every id: each piece ends up with the number of each of its rows (−1 for a
dead row), as the driver's numbering would have given it.
"""

from __future__ import annotations

import dask
import numpy as np

from dedup_cli.array_primitives import evenly_spaced, splitters
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, column_part, exchange, take
from dedup_cli.engine.dask.ranges import NumberedPieces, empty_documents, even_ranges, read_documents
from dedup_cli.params import SignatureParams
from dedup_cli.store.names import Names
from dedup_cli.store.store import Store
from dedup_cli.store.store_pieces import ROWS_PER_PIECE, StorePiece, live_positions, read_piece, store_pieces

NUMBERED_IN_DRIVER = 20_000_000
"""Stored rows (live or not) up to which the driver numbers a store itself (about 190 bytes a row at the
numbering's peak, 3.8 GB at that size); past it the ids are sorted on the cluster."""
SAMPLE = 256
"""Ids sampled from each piece to draw the splitters from."""


def _rows(piece: StorePiece, index: int, removal: bool) -> Table:
    """A piece's ids, runs and counts, with where each row is (piece, row) and whether it is a removal."""
    columns = read_piece(piece, ["id", "run"] if removal else ["id", "run", "shingle_count"])
    count = columns["id"].size
    return {"id": columns["id"], "run": columns["run"].astype(np.int64),
            "shingle_count": columns.get("shingle_count", np.zeros(count, np.int64)).astype(np.int64),
            "piece": np.full(count, index, np.int64), "row": np.arange(count, dtype=np.int64),
            "removed": np.full(count, removal)}


def _sample(rows: Table) -> np.ndarray:
    return np.array(list(evenly_spaced(rows["id"], SAMPLE)), dtype=object)


def _route_id(rows: Table, cuts: np.ndarray) -> np.ndarray:
    ids = rows["id"]
    if isinstance(ids, Names):
        return ids.ranks(cuts.tolist())
    return np.asarray(np.searchsorted(cuts, np.asarray(ids), side="right"))


def _live(rows: Table) -> Table:
    """The live rows of one range of ids, in id order: their piece, row, count and run."""
    writes = ~rows["removed"]
    removed, kept = take(rows, ~writes), take(rows, writes)
    order = live_positions(kept["id"], kept["run"], removed["id"], removed["run"])
    return {name: kept[name][order] for name in ("piece", "row", "shingle_count", "run")}


def _summary(live: Table) -> np.ndarray:
    """int64[6]: live rows, eligible ones, the largest count, the first and the last run, the smallest count of
    an eligible row (the largest int64 when none is)."""
    counts, runs = live["shingle_count"], live["run"]
    none = np.iinfo(np.int64).max
    if not counts.size:
        return np.array([0, 0, 0, none, np.iinfo(np.int64).min, none], np.int64)
    eligible = counts[counts > 0]
    return np.array([counts.size, eligible.size, counts.max(), runs.min(), runs.max(),
                     eligible.min() if eligible.size else none], np.int64)


def _numbered(live: Table, first: int) -> Table:
    return {"piece": live["piece"], "row": live["row"], "doc": np.arange(first, first + live["piece"].size)}


def _row_numbers(numbered: Table, rows: int) -> np.ndarray:
    numbers = np.full(rows, -1, np.int64)
    if numbered:
        numbers[numbered["row"]] = numbered["doc"]
    return numbers


def numbered_on_cluster(params: SignatureParams, pieces: list[StorePiece], removals: list[StorePiece],
                        rows_per_piece: int) -> NumberedPieces:
    """The live documents of the store of ``pieces`` and ``removals``, numbered by rank of id on the cluster (see
    the module docstring): each piece with a task's result that gives the number of each of its rows."""
    read = [dask.delayed(_rows)(piece, index, False) for index, piece in enumerate(pieces)]
    read += [dask.delayed(_rows)(piece, -1, True) for piece in removals]
    read = list(settled(*read))
    samples = np.sort(np.concatenate(dask.compute(*[dask.delayed(_sample)(rows) for rows in read])))
    ranges = max(1, len(pieces))
    live = list(settled(*exchange(read, _route_id, ranges, splitters(samples, ranges), then=_live)))
    summaries = np.array(dask.compute(*[dask.delayed(_summary)(part) for part in live]), np.int64).reshape(-1, 6)
    documents = int(summaries[:, 0].sum())
    if not documents:
        return empty_documents(params)
    firsts = np.r_[0, np.cumsum(summaries[:, 0])[:-1]]
    numbered = [dask.delayed(_numbered)(part, int(first)) for part, first in zip(live, firsts, strict=True)]
    per_piece = exchange(numbered, column_part, len(pieces), "piece")
    numbers = settled(*[dask.delayed(_row_numbers)(part, piece.rows) for part, piece in zip(per_piece, pieces,
                                                                                           strict=True)])
    held = summaries[summaries[:, 0] > 0]
    shortest = int(held[:, 5].min())
    return NumberedPieces(params, documents, int(held[:, 1].sum()), int(held[:, 2].max()),
                     (int(held[:, 3].min()), int(held[:, 4].max())), even_ranges(documents, rows_per_piece), False,
                     list(zip(pieces, numbers, strict=True)),
                     min_shingle_count=0 if shortest == np.iinfo(np.int64).max else shortest)


def store_documents(store: Store, rows_per_piece: int = ROWS_PER_PIECE) -> NumberedPieces:
    """The live documents of ``store``, numbered in the driver (:func:`dedup_cli.engine.dask.ranges.
    read_documents`), or past :data:`NUMBERED_IN_DRIVER` stored rows on the cluster."""
    pieces, removals = store_pieces(store, rows_per_piece)
    if sum(piece.rows for piece in pieces) > NUMBERED_IN_DRIVER:
        return numbered_on_cluster(store.params, pieces, removals, rows_per_piece)
    return read_documents(store, rows_per_piece)
