"""Deciding the scored pairs on the workers: exact checks of the borderline ones, then aliases of one file.

**Exact checks.** The pairs :func:`dedup_cli.verification.pairs_to_verify` selects (those whose interval straddles
R0) meet the locations and content hashes of their documents by two range joins and are re-read where they are,
by :func:`dedup_cli.verification.verify_pairs`, the local engine's code; the workers must see the documents at
the paths the store recorded (a shared filesystem). Their exact resemblances return to the scored pairs'
partitions, whose divisions they share.

**Aliases** (one file under two names, never a duplicate): the documents of the accepted pairs are stat-ed where
they are and grouped by (device, inode) with one shuffle; in each group every document but the first is an alias,
as :func:`dedup_cli.inputs.reread.same_file_aliases` decides for the local engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import DocumentFrames
from dedup_cli.engine.dask.joins import attach, scored_meta
from dedup_cli.engine.stages.find import decide, without
from dedup_cli.inputs.reread import file_identity
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import pairs_to_verify, verify_pairs

_PAIR_META = pd.DataFrame({"first": pd.Series([], dtype=np.int64), "second": pd.Series([], dtype=np.int64)})


@dataclass
class Checked:
    """Exact checks done on the cluster: how many pairs were decided exactly, and the documents that could not
    be re-read (sorted ids)."""

    checked: int
    unverifiable_documents: list[str]


def mini_store(params: SignatureParams, docs: np.ndarray, ids: np.ndarray, paths: np.ndarray,
               hashes: np.ndarray) -> StoredSignatures:
    """The few documents a task needs, as a store of their own (ids, locations, hashes; no signatures)."""
    return StoredSignatures(params=params, ids=[str(x) for x in ids], paths=[str(x) for x in paths],
                            shingle_counts=np.zeros(docs.size, np.int64),
                            packed=np.empty((docs.size, 0), np.uint8), content_hashes=hashes.astype(np.uint64))


def _documents_of(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct documents of a partition of pairs with names attached (``a_…`` first, ``b_…`` second)."""
    docs = np.concatenate([frame["first"].to_numpy(dtype=np.int64), frame.index.to_numpy(dtype=np.int64)])
    docs, where = np.unique(docs, return_index=True)
    def column(name: str) -> np.ndarray:
        return np.concatenate([frame[f"a_{name}"].to_numpy(), frame[f"b_{name}"].to_numpy()])[where]
    return docs, column("id"), column("path"), column("content_hash")


def verify_partition(frame: pd.DataFrame, params: SignatureParams) -> tuple[pd.DataFrame, list[str]]:
    """Exact resemblance of the pairs of one partition (index: second document), and the ids not re-read."""
    if frame.empty:
        return pd.DataFrame({"first": pd.Series([], dtype=np.int64), "exact": pd.Series([], dtype=np.float64)},
                            index=pd.Index([], dtype=np.int64, name="second")), []
    docs, ids, paths, hashes = _documents_of(frame)
    store = mini_store(params, docs, ids, paths, hashes)
    first = np.searchsorted(docs, frame["first"].to_numpy(dtype=np.int64))
    second = np.searchsorted(docs, frame.index.to_numpy(dtype=np.int64))
    verification = verify_pairs(store, first, second)
    result = pd.DataFrame({"first": frame["first"].to_numpy(dtype=np.int64), "exact": verification.exact},
                          index=frame.index)
    return result, verification.unverifiable_documents


def _borderline(frame: pd.DataFrame, mode: str, threshold: float) -> pd.DataFrame:
    check = pairs_to_verify(mode, threshold, frame["estimate"].to_numpy(), frame["ci_low"].to_numpy(),
                            frame["ci_high"].to_numpy())
    return pd.DataFrame({"first": frame["first"].to_numpy()[check], "second": frame.index.to_numpy()[check]})


def _with_exact(scored: pd.DataFrame, exact: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """A scored partition with ``exact`` (NaN where unchecked) and ``decided`` columns."""
    scored = scored.copy()
    values = np.full(len(scored), np.nan)
    if len(exact):
        keys = pd.MultiIndex.from_arrays([scored["first"].to_numpy(), scored.index.to_numpy()])
        found = pd.MultiIndex.from_arrays([exact["first"].to_numpy(), exact.index.to_numpy()])
        where = found.get_indexer(keys)
        values = np.where(where >= 0, exact["exact"].to_numpy()[np.maximum(where, 0)], np.nan)
    scored["exact"] = values
    scored["decided"] = decide(scored["estimate"].to_numpy(), values, threshold)
    return scored


def check_and_decide(scored: dd.DataFrame, frames: DocumentFrames, mode: str, threshold: float,
                     shuffle_method: str | None) -> tuple[dd.DataFrame, Checked | None]:
    """The scored pairs with ``exact`` and ``decided`` columns, after the exact checks ``mode`` asks for."""
    names = frames.names
    parts = scored.to_delayed()
    meta = scored_meta({"exact": np.dtype(np.float64), "decided": np.dtype(bool)})
    if mode == "none":
        empty = pd.DataFrame({"first": pd.Series([], dtype=np.int64), "exact": pd.Series([], dtype=np.float64)})
        decided = [dask.delayed(_with_exact)(part, empty, threshold) for part in parts]
        return dd.from_delayed(decided, meta=meta, divisions=scored.divisions, verify_meta=False), None
    wanted = scored.map_partitions(_borderline, mode, threshold, meta=_PAIR_META)
    with_first = attach(wanted, "first", names, "a_", frames.divisions, shuffle_method).reset_index()
    both = attach(with_first, "second", names, "b_", frames.divisions, shuffle_method)
    steps = [dask.delayed(verify_partition, nout=2)(part, frames.params) for part in both.to_delayed()]
    # ``both`` shares ``scored``'s divisions (ranges of the second document), so partition i meets partition i.
    decided = [dask.delayed(_with_exact)(part, step[0], threshold) for part, step in zip(parts, steps, strict=True)]
    *decided, unverifiable, checked = settled(
        *decided, dask.delayed(lambda lists: sorted(set().union(*lists)))([step[1] for step in steps]),
        dask.delayed(sum)([dask.delayed(lambda frame: int(np.count_nonzero(~np.isnan(frame["exact"]))))(step[0])
                           for step in steps]))
    unverifiable, checked = dask.compute(unverifiable, checked)
    frame = dd.from_delayed(decided, meta=meta, divisions=scored.divisions, verify_meta=False)
    return frame, Checked(int(checked), list(unverifiable))


def _decided_documents(frame: pd.DataFrame, reference_start: int | None) -> pd.DataFrame:
    """The documents of a partition's accepted pairs inside one store (across two stores one file under two names
    is a duplicate to report, as the local engine says)."""
    decided = frame["decided"].to_numpy()
    if reference_start is not None:
        decided = decided & ((frame["first"].to_numpy() < reference_start) == (frame.index.to_numpy() <
                                                                               reference_start))
    docs = np.concatenate([frame["first"].to_numpy()[decided], frame.index.to_numpy()[decided]])
    return pd.DataFrame({"doc": sorted_unique(np.asarray(docs, dtype=np.int64))})


def _file_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """(doc, device, inode) of the documents of a partition that are whole files that exist."""
    docs, devices, inodes = [], [], []
    for doc, location in zip(frame.index.to_numpy().tolist(), frame["path"].tolist(), strict=True):
        identity = file_identity(str(location))
        if identity is not None:
            docs.append(doc)
            devices.append(identity[0])
            inodes.append(identity[1])
    return pd.DataFrame({"doc": np.array(docs, np.int64), "device": np.array(devices, np.uint64),
                         "inode": np.array(inodes, np.uint64)})


def _later_of_each_file(frame: pd.DataFrame) -> pd.DataFrame:
    ordered = frame.sort_values(["device", "inode", "doc"])
    return pd.DataFrame({"doc": ordered["doc"].to_numpy()[ordered.duplicated(["device", "inode"]).to_numpy()]})


def aliases(decided: dd.DataFrame, frames: DocumentFrames, shuffle_method: str | None) -> np.ndarray:
    """int64[a], ascending: documents of the accepted pairs (inside one store) that are a lower document's file
    under another name."""
    docs = decided.map_partitions(_decided_documents, frames.reference_start,
                                  meta=pd.DataFrame({"doc": pd.Series([], dtype=np.int64)}))
    docs = docs.drop_duplicates(split_out=decided.npartitions, shuffle_method=shuffle_method)
    located = docs.set_index("doc", divisions=list(frames.divisions), shuffle_method=shuffle_method).merge(
        frames.names[["path"]], left_index=True, right_index=True, how="inner")
    keys = located.map_partitions(_file_keys, meta=pd.DataFrame({
        "doc": pd.Series([], dtype=np.int64), "device": pd.Series([], dtype=np.uint64),
        "inode": pd.Series([], dtype=np.uint64)}))
    grouped = keys.shuffle(on=["device", "inode"], shuffle_method=shuffle_method)
    found = grouped.map_partitions(_later_of_each_file, meta=pd.DataFrame({"doc": pd.Series([], dtype=np.int64)}))
    return np.sort(found["doc"].compute().to_numpy(dtype=np.int64))


def accept(decided: dd.DataFrame, alias_documents: np.ndarray) -> dd.DataFrame:
    """The ``decided`` flags less every pair that touches an alias."""
    if alias_documents.size == 0:
        return decided

    def drop(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        untouched = without(alias_documents, frame["first"].to_numpy(), frame.index.to_numpy())
        frame["decided"] = frame["decided"].to_numpy() & untouched
        return frame

    return decided.map_partitions(drop, meta=decided._meta)
