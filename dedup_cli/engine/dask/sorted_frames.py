"""The store's documents as frames: numbered in the driver, or, for a store too large for that, sorted by id on the
cluster.

The driver numbers a store of up to :data:`NUMBERED_IN_DRIVER` rows itself (:func:`dedup_cli.engine.dask.frames.
read_documents`: the local engine's numbering, about 190 bytes a row at its peak, 3.8 GB at that size). Past it,
the rows themselves are sorted on ``id`` by one shuffle (range partitions from sampled quantiles, so the rows of one
id meet in one partition), the live-row rule is applied per partition (docs/store-format.md), and the live rows are
numbered and kept on the cluster, spilling to disk beyond the workers' memory: every row moves once (its
signature, id, location and 40 bytes), and no process holds every document. Such a store has no pieces read
where they are (``DocumentFrames.pieces`` is empty): its stages read these frames.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import (
    NAME_COLUMNS,
    VALUE_COLUMNS,
    DocumentFrames,
    empty_frames,
    frame_meta,
    joined_span,
    read_documents,
    with_reference,
)
from dedup_cli.params import SignatureParams
from dedup_cli.store.store import Store
from dedup_cli.store.store_pieces import ROWS_PER_PIECE, StorePiece, read_piece, store_pieces

NUMBERED_IN_DRIVER = 20_000_000
"""Stored rows (live or not) up to which the driver numbers a store itself."""
_STRING = "str"  # pandas' Arrow-backed strings, what read_piece gives


def store_frames(store: Store, rows_per_piece: int = ROWS_PER_PIECE, shuffle_method: str | None = None
                 ) -> DocumentFrames:
    """The live documents of ``store`` as frames: numbered in the driver, or past :data:`NUMBERED_IN_DRIVER`
    stored rows sorted on the cluster."""
    pieces, removals = store_pieces(store, rows_per_piece)
    if sum(piece.rows for piece in pieces) > NUMBERED_IN_DRIVER:
        return sorted_documents(store.params, pieces, removals, shuffle_method)
    return read_documents(store, rows_per_piece, shuffle_method)


def store_and_reference(new: DocumentFrames, reference: DocumentFrames, shuffle_method: str | None = None
                        ) -> DocumentFrames:
    """:func:`dedup_cli.engine.dask.frames.with_reference`, or, when either store was sorted on the cluster, its
    partitions and the other's renumbered where they are."""
    if any(frames.documents and not frames.pieces for frames in (new, reference)):
        return _concatenated(new, reference)
    return with_reference(new, reference, shuffle_method)


def _full_meta(params: SignatureParams) -> pd.DataFrame:
    """Every column the sort moves: the names, the values, and whether the row is a removal."""
    frame = pd.concat([frame_meta(params, True), frame_meta(params, False)], axis=1).reset_index(drop=True)
    frame["removed"] = pd.Series([], dtype=bool)
    return frame


def _piece_rows(piece: StorePiece, params: SignatureParams, removal: bool) -> pd.DataFrame:
    """Every column of a piece, for the sort; a removal file's rows carry ``removed`` and zeros."""
    meta = _full_meta(params)
    if removal:
        frame = read_piece(piece, ["id", "run"])
        frame["path"] = pd.Series([""] * len(frame), dtype=_STRING)
        for name in meta.columns:
            if name not in frame:
                frame[name] = np.zeros(len(frame), dtype=meta[name].dtype)
        frame["removed"] = True
    else:
        frame = read_piece(piece, [*NAME_COLUMNS, *VALUE_COLUMNS, "signature"], params)
        frame["removed"] = False
    return frame[list(meta.columns)]


def live(frame: pd.DataFrame) -> pd.DataFrame:
    """The live rows of one id-range partition, ascending id (docs/store-format.md, "Which rows are live").

    Per id the row with the highest run wins; it is dead when a removal of that id has a higher run.
    """
    writes = frame[~frame["removed"].to_numpy()]
    removals = frame[frame["removed"].to_numpy()]
    writes = writes.sort_values(["id", "run"], ascending=[True, False])  # a lexicographic, stable sort
    writes = writes[~writes["id"].duplicated(keep="first").to_numpy()]
    if len(removals):
        latest = removals.groupby("id", sort=False, observed=True)["run"].max()
        removed_at = writes["id"].map(latest).to_numpy(dtype=np.float64, na_value=np.nan)
        writes = writes[~(removed_at > writes["run"].to_numpy())]  # NaN (no removal) compares False: kept
    return writes.drop(columns="removed")


def _number(frame: pd.DataFrame, firsts: list[int], partition_info: dict | None = None) -> pd.DataFrame:
    """A partition of the sorted live rows with its documents' numbers in a ``doc`` column."""
    assert partition_info is not None
    first = firsts[partition_info["number"]]
    frame = frame.reset_index(drop=True)
    frame.insert(0, "doc", np.arange(first, first + len(frame), dtype=np.int64))
    return frame


def sorted_documents(params: SignatureParams, pieces: list[StorePiece], removals: list[StorePiece],
                     shuffle_method: str | None) -> DocumentFrames:
    """The live documents of the store of ``pieces`` and ``removals``, sorted, numbered and kept on the cluster."""
    meta = _full_meta(params)
    rows = [dd.from_map(_piece_rows, pieces, params=params, removal=False, meta=meta, enforce_metadata=False)]
    if removals:
        rows.append(dd.from_map(_piece_rows, removals, params=params, removal=True, meta=meta,
                                enforce_metadata=False))
    combined = dd.concat(rows) if len(rows) > 1 else rows[0]
    (ordered,) = settled(combined.sort_values("id", shuffle_method=shuffle_method).map_partitions(
        live, meta=meta.drop(columns="removed")))
    lengths = ordered.map_partitions(len).compute().to_numpy().astype(np.int64)
    if not lengths.sum():
        return empty_frames(params)
    keep = [index for index, length in enumerate(lengths) if length > 0]
    if len(keep) < len(lengths):
        ordered = ordered.partitions[keep]
    offsets = np.r_[0, np.cumsum(lengths[keep])].astype(np.int64)
    divisions = (*(int(x) for x in offsets[:-1]), int(offsets[-1]) - 1)
    meta_values, meta_names = frame_meta(params, False), frame_meta(params, True)
    numbered_meta = pd.concat([meta_names, meta_values], axis=1).reset_index()
    numbered = ordered.map_partitions(_number, offsets[:-1].tolist(), meta=numbered_meta, align_dataframes=False)
    # The documents are numbered in order, so their ranges are the divisions: no shuffle, no pass over the data.
    (frame,) = settled(numbered.set_index("doc", sorted=True, divisions=list(divisions)))
    values, names = frame[list(meta_values.columns)], frame[list(meta_names.columns)]
    counts = frame["shingle_count"]
    eligible, most, first_run, last_run = dask.compute((counts > 0).sum(), counts.max(), frame["run"].min(),
                                                       frame["run"].max())
    return DocumentFrames(params, int(offsets[-1]), int(eligible), int(most), (int(first_run), int(last_run)),
                          divisions, values, names, False)


def _shifted(frame: pd.DataFrame, offset: int) -> pd.DataFrame:
    frame = frame.copy(deep=False)
    frame.index = pd.Index(frame.index.to_numpy(dtype=np.int64) + offset, name="doc")
    return frame


def _concatenated(new: DocumentFrames, reference: DocumentFrames) -> DocumentFrames:
    """A store's frames and a reference store's numbered on from ``new.documents``, either sorted on the cluster:
    the reference's partitions renumbered where they are, the pieces of neither read where they are."""
    start = new.documents
    divisions = (*new.divisions[:-1], *(division + start for division in reference.divisions)) if new.documents \
        else tuple(division + start for division in reference.divisions)
    parts = {kind: ([*getattr(new, kind).to_delayed()] if new.documents else []) + [
        dask.delayed(_shifted)(part, start) for part in getattr(reference, kind).to_delayed()]
        for kind in ("values", "names")}
    values, names = (dd.from_delayed(parts[kind], meta=getattr(new, kind)._meta, divisions=divisions,
                                     verify_meta=False) for kind in ("values", "names"))
    return DocumentFrames(new.params, start + reference.documents, new.eligible + reference.eligible,
                          max(new.max_shingle_count, reference.max_shingle_count),
                          joined_span(new.run_span, reference.run_span), divisions, values, names, False,
                          reference_start=start)
