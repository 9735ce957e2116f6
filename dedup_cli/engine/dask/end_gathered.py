"""The end of find when its edges are few: the pairs that matter and their documents, gathered into this process.

The accepted pairs (and with ``ways=3`` every scored pair within the triple margin of R0) come to the driver with
the documents they touch, renumbered 0 … m − 1 in document order, which is id order. The local engine's
:func:`dedup_cli.engine.stages.find.conclude` then finds the triples, groups, weakest links and representatives:
every stage there depends only on the order of the documents, so the answer is the local engine's.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.dask.frames import DocumentFrames, names_of, rows_of, unpack_bits
from dedup_cli.engine.dask.joins import SCORE_COLUMNS
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures


@dataclass
class Gathered:
    """Pairs and their documents in this process, documents renumbered 0 … m − 1 in id order."""

    docs: np.ndarray  # int64[m], the documents' numbers in the whole store, ascending
    store: StoredSignatures  # those documents' ids, locations, counts, signatures, hashes and runs
    values: np.ndarray  # uint[m, k], their b-bit values
    scored: ScoredPairs  # the gathered pairs, in (first, second) order, renumbered
    exact: np.ndarray  # float64[p], exact resemblance where checked
    decided: np.ndarray  # bool[p]


def needed(frame: pd.DataFrame, floor: float | None) -> pd.DataFrame:
    """The rows of a decided partition the end of find needs: accepted, or (for triples) with an estimate of at
    least ``floor``, R0 − margin (``FindPlan.triple_floor``; None without triples)."""
    keep = frame["decided"].to_numpy()
    if floor is not None:
        keep = keep | (frame["estimate"].to_numpy() >= floor)
    return frame[keep]


def documents_of(params: SignatureParams, frames: DocumentFrames, reduced: dd.DataFrame, bits: int,
                 docs: np.ndarray, names: pd.DataFrame | None = None) -> tuple[StoredSignatures, np.ndarray]:
    """The documents ``docs`` (ascending) as a store of their own, and their b-bit values uint[m, k]; ``names``:
    the names (index: doc) of these documents and maybe others, read already.

    The store holds no stored signatures (the end of find needs only the b-bit values), so the driver holds
    about 100 bytes and k·b/8 per document, not the B-bit signatures."""
    reduced_rows = rows_of(reduced, frames.divisions, docs)
    names = names_of(frames, docs) if names is None else names.loc[docs]
    bit_values = unpack_bits(reduced_rows, "s", bits, params.num_perm)
    store = StoredSignatures(
        params=params, ids=[str(x) for x in names["id"].tolist()], paths=[str(x) for x in names["path"].tolist()],
        shingle_counts=reduced_rows["shingle_count"].to_numpy(dtype=np.int64),
        packed=np.empty((docs.size, 0), np.uint8),
        content_hashes=names["content_hash"].to_numpy(dtype=np.uint64),
        runs=reduced_rows["run"].to_numpy(dtype=np.int64), mtimes_ns=names["mtime_ns"].to_numpy(dtype=np.int64))
    return store, bit_values


def gather(pairs: pd.DataFrame, params: SignatureParams, frames: DocumentFrames, reduced: dd.DataFrame,
           bits: int, names: pd.DataFrame | None = None) -> Gathered:
    """``pairs`` (gathered rows of the decided frame) and the documents they touch, renumbered (``names``: as
    :func:`documents_of` takes them)."""
    pairs = pairs.reset_index(drop=True)  # the index repeats the second document
    pairs = pairs.sort_values(["first", "second"], kind="stable")
    first, second = pairs["first"].to_numpy(dtype=np.int64), pairs["second"].to_numpy(dtype=np.int64)
    docs = sorted_unique(np.concatenate([first, second]))
    store, values = documents_of(params, frames, reduced, bits, docs, names)
    columns = {name: pairs[name].to_numpy() for name in SCORE_COLUMNS}
    columns["first"], columns["second"] = np.searchsorted(docs, first), np.searchsorted(docs, second)
    scored = ScoredPairs(**{name: np.asarray(columns[name]) for name in SCORE_COLUMNS})
    return Gathered(docs, store, values, scored, pairs["exact"].to_numpy(dtype=np.float64),
                    pairs["decided"].to_numpy(dtype=bool))


def ratios(store: StoredSignatures) -> np.ndarray:
    return set_size_ratios(store.shingle_counts, store.params.universe)
