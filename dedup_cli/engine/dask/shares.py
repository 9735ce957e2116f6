"""The document split of the candidate stage (:mod:`dedup_cli.engine.dask.candidates`, steps 1 to 3): how the
store's pieces are cut into shares, and the accessors that hand each owner its part of a share's results; the
steps themselves run on the workers from :mod:`dedup_cli.candidates.crossing_rounds`."""

from __future__ import annotations

import numpy as np

from dedup_cli.candidates.crossing_rounds import ShareSplit
from dedup_cli.candidates.elias_fano import EliasFano
from dedup_cli.engine.dask.ranges import NumberedPieces


def split_codes(split: ShareSplit) -> np.ndarray:
    return split.codes


def split_oversized(split: ShareSplit) -> int:
    return split.oversized


def rows_for(split: ShareSplit, owner: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return split.rows[owner]


def sets_for(sets: list[list[EliasFano]], owner: int) -> list[EliasFano]:
    return sets[owner]


def partition_rows(numbered: NumberedPieces) -> np.ndarray:
    """int64[pieces]: the rows of each piece of the store the candidate stage reads where it is."""
    return np.array([piece.rows for piece, _ in numbered.pieces], np.int64)


def plan_shares(numbered: NumberedPieces, workers: int, share_documents: int) -> list[list[int]]:
    """Pieces (by index) of each share: consecutive, about equal in rows, a whole number per worker, at most
    ``share_documents`` documents a share."""
    documents = numbered.documents
    per_worker = -(-documents // (workers * share_documents)) if documents else 1
    count = max(1, workers * per_worker) if documents > share_documents or workers > 1 else 1
    rows = partition_rows(numbered)
    firsts = np.r_[0, np.cumsum(rows)[:-1]].astype(np.int64)
    which = np.minimum(firsts * count // max(int(rows.sum()), 1), count - 1)
    shares = [np.flatnonzero(which == share).tolist() for share in range(count)]
    return [share for share in shares if share]
