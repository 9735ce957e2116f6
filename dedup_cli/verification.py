"""Exact verification: re-read the documents of uncertain pairs and compute their true resemblance.

A pair whose confidence interval straddles the threshold is the one worth an exact check (Dembele & Lo
2017: the estimate is a random variable; docs/estimators.md, "Intervals"). Documents are re-read from the
locations the store recorded, each file once, shingled exactly as when signed, and compared as sets, all pairs
at once. A document that cannot be read, or whose bytes changed since it was signed (content hash), is left
unverified rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.estimates.exact import pair_resemblances, triple_resemblances
from dedup_cli.inputs.reread import reread_documents
from dedup_cli.inputs.sets import reread_sets
from dedup_cli.options.vocabulary import VERIFY_MODES
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.text.shingles import batch_shingles


@dataclass
class Verification:
    """Exact resemblances of the checked pairs (NaN where a document could not be re-read)."""

    exact: np.ndarray  # float64[n_pairs]
    checked: int
    unverifiable_documents: list[str]


def exact_sets(store: StoredSignatures, rows: np.ndarray) -> list[np.ndarray | None]:
    """The shingle sets (or integer sets) of documents ``rows`` as signed, aligned with ``rows``; None where a
    document is gone or changed."""
    params = store.params
    hashes = None if store.content_hashes is None else [int(store.content_hashes[row]) for row in rows]
    locations = [store.paths[row] for row in rows]
    if params.input_kind == "sets":
        return reread_sets(locations, hashes)
    texts: list[str | None] = ([store.texts[row] for row in rows.tolist()] if store.texts is not None
                               else reread_documents(locations, hashes))
    readable = [index for index, text in enumerate(texts) if text is not None]
    shingles, offsets = batch_shingles([text for text in texts if text is not None], params.shingle_size,
                                       params.shingle_unit, params.tokenisation, params.short_documents)
    sets: list[np.ndarray | None] = [None] * len(texts)
    for place, index in enumerate(readable):
        sets[index] = shingles[offsets[place] : offsets[place + 1]]
    return sets


def verify_pairs(store: StoredSignatures, first: np.ndarray, second: np.ndarray) -> Verification:
    """Exact resemblance of each pair (first[p], second[p]); each document is read once."""
    rows = sorted_unique(np.concatenate([first, second]))
    sets = exact_sets(store, rows)
    exact = pair_resemblances(sets, np.searchsorted(rows, first), np.searchsorted(rows, second))
    unverifiable = sorted(store.ids[row] for row, members in zip(rows.tolist(), sets, strict=True) if members is None)
    return Verification(exact=exact, checked=int(np.count_nonzero(~np.isnan(exact))),
                        unverifiable_documents=unverifiable)


def verify_triples(store: StoredSignatures, docs: np.ndarray) -> Verification:
    """Exact 3-way resemblance |A ∩ B ∩ C| / |A ∪ B ∪ C| of each triple (rows of int64[n, 3]); each document is
    read once, as for pairs."""
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    rows = sorted_unique(docs.reshape(-1))
    sets = exact_sets(store, rows)
    exact = triple_resemblances(sets, np.searchsorted(rows, docs))
    unverifiable = sorted(store.ids[row] for row, members in zip(rows.tolist(), sets, strict=True) if members is None)
    return Verification(exact=exact, checked=int(np.count_nonzero(~np.isnan(exact))),
                        unverifiable_documents=unverifiable)


def pairs_to_verify(mode: str, threshold: float, estimate: np.ndarray, ci_low: np.ndarray,
                    ci_high: np.ndarray, unsure: np.ndarray | None = None) -> np.ndarray:
    """Which scored candidates to check exactly: bool[n_pairs].

    ``borderline``: the interval straddles R0 (on either side of the estimate, so a true duplicate that
    the estimate put just below R0 is rescued too), or the pair is ``unsure``: estimated ≥ R0, its lower bound
    for all the run's candidates at once does not clear R0
    (:meth:`dedup_cli.estimates.simultaneous.SimultaneousBound.unsure`); ``all``: those plus every pair
    estimated ≥ R0.
    """
    if mode not in VERIFY_MODES:
        raise ValueError(f"unknown verify mode {mode!r}")
    if mode == "none":
        return np.zeros(estimate.size, dtype=bool)
    borderline = (ci_low < threshold) & (ci_high >= threshold)
    if unsure is not None:
        borderline = borderline | unsure
    return borderline | (estimate >= threshold) if mode == "all" else borderline
