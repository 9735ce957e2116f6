"""The rules that decide ``find``'s pairs, once, for every engine: which pairs are accepted, which documents are
one file under two names, which documents and pairs a report must touch.

Each is a function of columns (numpy arrays), so that the local engine calls it on its whole run and the Dask
engine on each part of a table, with the same answer.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.inputs.reread import same_file_aliases


def decide(estimate: np.ndarray, exact: np.ndarray, threshold: float) -> np.ndarray:
    """bool[m]: accepted pairs, by the exact resemblance where it is known, else by the estimate."""
    return np.where(~np.isnan(exact), exact >= threshold, estimate >= threshold)


def alias_documents(paths: list[str], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """int64[a]: documents of these pairs that are a lower document's file under another name (a link).

    One file under two names is one document, not a duplicate pair: only its first id is reported.
    """
    return same_file_aliases(paths, sorted_unique(np.concatenate([first, second])))


def without(documents: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """bool[m]: pairs touching none of ``documents``."""
    return ~(np.isin(first, documents) | np.isin(second, documents))


def new_documents(runs: np.ndarray, new_since: int | None, reference: np.ndarray | None) -> np.ndarray | None:
    """bool[n_docs]: the documents reports must touch (written after ``new_since``, and not the reference
    store's), or None when every pair counts."""
    new = None if new_since is None else runs > new_since
    if reference is not None:
        new = ~reference if new is None else new & ~reference
    return new


def wanted(docs: np.ndarray, new: np.ndarray | None, reference: np.ndarray | None, only_across: bool) -> np.ndarray:
    """bool[m]: pairs or triples (int64[m, 2 or 3]) to report: touching a ``new`` document, and with
    ``only_across`` holding documents of both stores."""
    keep = np.ones(docs.shape[0], bool) if new is None else new[docs].any(axis=1)
    if reference is not None and only_across:
        keep &= reference[docs].any(axis=1) & ~reference[docs].all(axis=1)
    return keep
