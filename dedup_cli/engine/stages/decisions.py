"""The rules that decide ``find``'s pairs, once, for every engine: which pairs to check exactly, which are accepted,
which documents are one file under two names, which documents and pairs a report must touch, and which decided
pairs the end of find needs.

Each is a function of columns (numpy arrays, or the columns of a :class:`dedup_cli.estimates.pairs.ScoredPairs`),
so that the local engine calls it on its whole run and the Dask engine on each part of a table, with the same
answer; where the engines differ is only where the columns are and how they meet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dedup_cli.array_primitives import first_of_runs, sorted_unique
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.inputs.reread import file_identity
from dedup_cli.verification import pairs_to_verify


def to_check(scored: ScoredPairs, mode: str, threshold: float, bound: SimultaneousBound | None) -> np.ndarray:
    """bool[m]: the scored pairs ``--verify`` ``mode`` checks exactly (:func:`dedup_cli.verification.
    pairs_to_verify`): with ``bound`` (the run's b, k and candidate count) also those it cannot clear, and those
    below R0 its recall rescues."""
    unsure = None if bound is None else bound.unsure(threshold, scored.estimate, scored.ci_low, scored.matches,
                                                     scored.r1, scored.r2, scored.ci_high)
    return pairs_to_verify(mode, threshold, scored.estimate, scored.ci_low, scored.ci_high, unsure)


def decide(estimate: np.ndarray, exact: np.ndarray, threshold: float) -> np.ndarray:
    """bool[m]: accepted pairs, by the exact resemblance where it is known, else by the estimate."""
    return np.where(~np.isnan(exact), exact >= threshold, estimate >= threshold)


def alias_candidates(first: np.ndarray, second: np.ndarray, decided: np.ndarray, across: np.ndarray | None
                     ) -> np.ndarray:
    """int64[d], ascending: the documents of the accepted pairs that may be one file under two names, those of
    pairs inside one store (``across``: bool[m], the pairs across two stores, where one file under two names is a
    duplicate to report; None with one store)."""
    inside = decided if across is None else decided & ~across
    return sorted_unique(np.concatenate([first[inside], second[inside]]))


def file_keys(docs: np.ndarray, locations: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int64 doc, uint64 device, uint64 inode) of the documents ``docs`` (at ``locations``, aligned) that are whole
    files that exist now, each stat-ed where it is read (:func:`dedup_cli.inputs.reread.file_identity`)."""
    found = [(doc, identity) for doc, location in zip(np.asarray(docs).tolist(), locations, strict=True)
             if (identity := file_identity(str(location))) is not None]
    return (np.array([doc for doc, _ in found], np.int64), np.array([key[0] for _, key in found], np.uint64),
            np.array([key[1] for _, key in found], np.uint64))


def later_of_each_file(docs: np.ndarray, devices: np.ndarray, inodes: np.ndarray) -> np.ndarray:
    """int64[a], ascending: every document but the lowest of each file (device, inode): one file under two names
    (a hard or symbolic link) is one document, never a duplicate to delete, and only its first id is reported."""
    order = np.lexsort((docs, inodes, devices))
    same = ~first_of_runs(devices[order]) & ~first_of_runs(inodes[order]) if order.size else order > 0
    return np.sort(docs[order][same])


def alias_documents(docs: np.ndarray, locations: Sequence[str]) -> np.ndarray:
    """int64[a], ascending: of the documents ``docs`` (at ``locations``), those that are a lower one's file under
    another name (:func:`file_keys`, :func:`later_of_each_file`)."""
    return later_of_each_file(*file_keys(docs, locations))


def without(documents: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """bool[m]: pairs touching none of ``documents``."""
    return ~(np.isin(first, documents) | np.isin(second, documents))


def accepted(decided: np.ndarray, first: np.ndarray, second: np.ndarray, aliases: np.ndarray) -> np.ndarray:
    """bool[m]: the ``decided`` pairs less every pair that touches an alias (:func:`alias_documents`)."""
    return decided & without(aliases, first, second) if aliases.size else decided


def new_documents(runs: np.ndarray, new_since: int | None, reference: np.ndarray | None) -> np.ndarray | None:
    """bool[n]: of documents written by ``runs`` (``reference``: which are the reference store's), those reports
    must touch (written after ``new_since``, and not the reference store's), or None when every pair counts."""
    new = None if new_since is None else runs > new_since
    if reference is not None:
        new = ~reference if new is None else new & ~reference
    return new


def wanted(new: np.ndarray | None, reference: np.ndarray | None, only_across: bool) -> np.ndarray | None:
    """bool[m]: pairs or triples to report, from each member's flags (bool[m, 2 or 3]: ``new``, the members
    reports must touch, :func:`new_documents`; ``reference``, the reference store's): touching a new document,
    and with ``only_across`` holding documents of both stores; None when every one counts."""
    keep: np.ndarray | None = None if new is None else np.asarray(new.any(axis=1))
    if reference is not None and only_across:
        across = reference.any(axis=1) & ~reference.all(axis=1)
        keep = np.asarray(across) if keep is None else keep & across
    return keep


def may_matter(scored: ScoredPairs, mode: str, threshold: float, bound: SimultaneousBound | None,
               floor: float | None) -> np.ndarray:
    """bool[m]: the scored pairs the decisions and the end of find may need: those estimated ≥ R0 (accepted unless
    an exact check says otherwise), those ``mode`` checks exactly, and with triples (``floor``, R0 − margin) those
    within the margin. The others are rejected whatever happens."""
    keep = scored.estimate >= (threshold if floor is None else min(threshold, floor))
    if mode != "none":
        keep |= to_check(scored, mode, threshold, bound)
    return keep


def needed(decided: np.ndarray, estimate: np.ndarray, floor: float | None) -> np.ndarray:
    """bool[m]: the decided pairs the end of find needs: accepted, or (for triples) with an estimate of at least
    ``floor``, R0 − margin (``FindPlan.triple_floor``; None without triples)."""
    return decided if floor is None else decided | (estimate >= floor)
