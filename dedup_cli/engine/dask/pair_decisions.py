"""Deciding the scored pairs on the workers: exact checks of the borderline ones, then aliases of one file.

**Exact checks.** The pairs :func:`dedup_cli.verification.pairs_to_verify` selects (those whose interval straddles
R0) meet the locations and content hashes of their documents by two range joins and are re-read where they are,
by :func:`dedup_cli.verification.verify_pairs`, the local engine's code; the workers must see the documents at
the paths the store recorded (a shared filesystem). Their exact resemblances return to the scored pairs'
partitions, whose divisions they share.

**Aliases** (one file under two names, never a duplicate): the documents of the accepted pairs are stat-ed where
they are and grouped by (device, inode) with one shuffle; in each group every document but the first is an alias,
as :func:`dedup_cli.inputs.reread.same_file_aliases` decides for the local engine.

**Gathered** (:func:`decide_gathered`): when the scored pairs are few enough for the driver (``--gather-limit``),
they come to it whole with their documents' names, found partition by partition without a shuffle, and the same
functions run on chunks of them: the exact checks and the file checks as tasks on the workers (which see the
files), the rest (selecting, deciding, grouping by file) vectorised here. Five shuffles over every document
partition, each with its barrier, become a few tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import get_client

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import DocumentFrames, names_of
from dedup_cli.engine.dask.joins import attach, scored_meta
from dedup_cli.engine.local.forked import chunk_bounds
from dedup_cli.engine.stages.find import decide, without
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.inputs.reread import file_identity
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import pairs_to_verify, verify_pairs

CHUNK_PAIRS = 4096
"""Borderline pairs a gathered exact-check task re-reads at least (fewer tasks when they are fewer)."""
CHUNK_FILES = 65536
"""Documents a gathered file-check task stats at most."""
TASKS_PER_WORKER = 4
"""Gathered check tasks a worker gets at most, so that a slow one leaves the others work."""

_PAIR_META = pd.DataFrame({"first": pd.Series([], dtype=np.int64), "second": pd.Series([], dtype=np.int64)})


@dataclass
class Checked:
    """Exact checks done on the cluster: how many pairs were decided exactly, and the documents that could not
    be re-read (sorted ids)."""

    checked: int
    unverifiable_documents: list[str]


def _no_exact() -> pd.DataFrame:
    """No exact resemblances: a frame of ``first`` and ``exact``, indexed by the second document."""
    return pd.DataFrame({"first": pd.Series([], dtype=np.int64), "exact": pd.Series([], dtype=np.float64)},
                        index=pd.Index([], dtype=np.int64, name="second"))


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
        return _no_exact(), []
    docs, ids, paths, hashes = _documents_of(frame)
    store = mini_store(params, docs, ids, paths, hashes)
    first = np.searchsorted(docs, frame["first"].to_numpy(dtype=np.int64))
    second = np.searchsorted(docs, frame.index.to_numpy(dtype=np.int64))
    verification = verify_pairs(store, first, second)
    result = pd.DataFrame({"first": frame["first"].to_numpy(dtype=np.int64), "exact": verification.exact},
                          index=frame.index)
    return result, verification.unverifiable_documents


def _borderline(frame: pd.DataFrame, mode: str, threshold: float, bound: SimultaneousBound) -> pd.DataFrame:
    estimate, ci_low, ci_high = (frame[name].to_numpy() for name in ("estimate", "ci_low", "ci_high"))
    unsure = bound.unsure(threshold, estimate, ci_low, frame["matches"].to_numpy(), frame["r1"].to_numpy(),
                          frame["r2"].to_numpy(), ci_high)
    check = pairs_to_verify(mode, threshold, estimate, ci_low, ci_high, unsure)
    return pd.DataFrame({"first": frame["first"].to_numpy()[check], "second": frame.index.to_numpy()[check]})


def _with_exact(scored: pd.DataFrame, exact: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """A scored partition with ``exact`` (NaN where unchecked) and ``decided`` columns."""
    values = np.full(len(scored), np.nan)
    if len(exact):
        # Pairs as codes first · 2^32 + second (document numbers are below 2^32), found by a binary search.
        keys = _pair_codes(scored["first"].to_numpy(), scored.index.to_numpy())
        found = _pair_codes(exact["first"].to_numpy(), exact.index.to_numpy())
        order = np.argsort(found, kind="stable")
        where = np.minimum(np.searchsorted(found, keys, sorter=order), found.size - 1)
        hit = found[order[where]] == keys
        values = np.where(hit, exact["exact"].to_numpy()[order[where]], np.nan)
    return scored.assign(exact=values, decided=decide(scored["estimate"].to_numpy(), values, threshold))


def _pair_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return (first.astype(np.uint64) << np.uint64(32)) | second.astype(np.uint64)


def check_and_decide(scored: dd.DataFrame, frames: DocumentFrames, mode: str, threshold: float,
                     bound: SimultaneousBound, shuffle_method: str | None) -> tuple[dd.DataFrame, Checked | None]:
    """The scored pairs with ``exact`` and ``decided`` columns, after the exact checks ``mode`` asks for (with
    ``bound``, the run's simultaneous bound, as the local engine's)."""
    names = frames.names
    parts = scored.to_delayed()
    meta = scored_meta({"exact": np.dtype(np.float64), "decided": np.dtype(bool)})
    if mode == "none":
        empty = _no_exact()
        decided = [dask.delayed(_with_exact)(part, empty, threshold) for part in parts]
        return dd.from_delayed(decided, meta=meta, divisions=scored.divisions, verify_meta=False), None
    wanted = scored.map_partitions(_borderline, mode, threshold, bound, meta=_PAIR_META)
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


def without_aliases(frame: pd.DataFrame, alias_documents: np.ndarray) -> pd.DataFrame:
    """A partition of decided pairs with the ``decided`` flags less every pair that touches an alias (a copy)."""
    frame = frame.copy()
    untouched = without(alias_documents, frame["first"].to_numpy(), frame.index.to_numpy())
    frame["decided"] = frame["decided"].to_numpy() & untouched
    return frame


def accept(decided: dd.DataFrame, alias_documents: np.ndarray) -> dd.DataFrame:
    """The ``decided`` flags less every pair that touches an alias."""
    if alias_documents.size == 0:
        return decided
    return decided.map_partitions(without_aliases, alias_documents, meta=decided._meta)


@dataclass
class GatheredDecisions:
    """The decisions stage run in the driver: the scored pairs with ``exact`` and ``decided`` columns (index: the
    second document, in partition order), their documents' names (index: doc) when they were read, the aliases
    left out, and the exact checks done (None with ``--verify none``)."""

    decided: pd.DataFrame
    names: pd.DataFrame | None
    aliases: np.ndarray
    checked: Checked | None


def _tasks(items: int, per_task: int) -> int:
    """How many tasks share ``items``: at most :data:`TASKS_PER_WORKER` a worker, at least ``per_task`` items each
    (one task at least)."""
    workers = max(1, len(get_client().scheduler_info()["workers"]))
    return max(1, min(TASKS_PER_WORKER * workers, -(-items // per_task)))


def _with_names(pairs: pd.DataFrame, names: pd.DataFrame) -> pd.DataFrame:
    """Borderline pairs (``first``, ``second``) as :func:`check_and_decide` joins them: index the second document,
    the names of the first as ``a_…`` columns and of the second as ``b_…``."""
    first, second = pairs["first"].to_numpy(dtype=np.int64), pairs["second"].to_numpy(dtype=np.int64)
    rows_a, rows_b = np.searchsorted(names.index.to_numpy(), first), np.searchsorted(names.index.to_numpy(), second)
    columns: dict[str, object] = {"first": first}
    for prefix, rows in (("a_", rows_a), ("b_", rows_b)):
        columns.update({prefix + name: names[name].to_numpy()[rows] for name in ("id", "path", "content_hash")})
    return pd.DataFrame(columns, index=pd.Index(second, name="second"))


def _exact_gathered(scored: pd.DataFrame, names: pd.DataFrame, mode: str, threshold: float,
                    bound: SimultaneousBound, params: SignatureParams) -> tuple[pd.DataFrame, Checked]:
    """The exact resemblances of the borderline pairs of ``scored`` (a frame of ``first`` and ``exact``, index
    second), re-read by tasks on the workers, and what was checked."""
    wanted = _with_names(_borderline(scored, mode, threshold, bound), names)
    bounds = chunk_bounds(len(wanted), _tasks(len(wanted), CHUNK_PAIRS)) if len(wanted) else []
    steps = [dask.delayed(verify_partition, nout=2)(wanted.iloc[start:stop], params) for start, stop in bounds]
    done = dask.compute(*steps)
    exact = pd.concat([frame for frame, _ in done]) if done else _no_exact()
    unverifiable = sorted(set().union(*[missing for _, missing in done]))
    return exact, Checked(int(np.count_nonzero(~np.isnan(exact["exact"].to_numpy()))), unverifiable)


def _aliases_gathered(decided: pd.DataFrame, names: pd.DataFrame, reference_start: int | None) -> np.ndarray:
    """:func:`aliases` of gathered pairs: their documents stat-ed by tasks on the workers, grouped here."""
    docs = _decided_documents(decided, reference_start)["doc"].to_numpy(dtype=np.int64)
    if docs.size == 0:
        return np.empty(0, np.int64)
    located = pd.DataFrame({"path": names["path"].to_numpy()[np.searchsorted(names.index.to_numpy(), docs)]},
                           index=pd.Index(docs, name="doc"))
    bounds = chunk_bounds(docs.size, _tasks(docs.size, CHUNK_FILES))
    keys = pd.concat(dask.compute(*[dask.delayed(_file_keys)(located.iloc[start:stop]) for start, stop in bounds]))
    return np.sort(_later_of_each_file(keys)["doc"].to_numpy(dtype=np.int64))


def decide_gathered(scored: pd.DataFrame, frames: DocumentFrames, mode: str, threshold: float,
                    bound: SimultaneousBound) -> GatheredDecisions:
    """:func:`check_and_decide`, :func:`aliases` and :func:`accept` of the scored pairs gathered into the driver
    (a frame of :func:`dedup_cli.engine.dask.joins.scored_meta`, index the second document): the same decisions
    from the same functions, without a shuffle."""
    docs = sorted_unique(np.concatenate([scored["first"].to_numpy(dtype=np.int64),
                                         scored.index.to_numpy(dtype=np.int64)]))
    names = names_of(frames, docs)
    checked = None
    if mode == "none":
        exact = _no_exact()
    else:
        exact, checked = _exact_gathered(scored, names, mode, threshold, bound, frames.params)
    decided = _with_exact(scored, exact, threshold)
    alias_documents = _aliases_gathered(decided, names, frames.reference_start)
    if alias_documents.size:
        decided = without_aliases(decided, alias_documents)
    return GatheredDecisions(decided, names, alias_documents, checked)
