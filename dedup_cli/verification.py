"""Exact verification: re-read the documents of uncertain pairs and compute their true resemblance.

A pair whose confidence interval straddles the threshold is the one worth an exact check (Dembele & Lo
2017: the estimate is a random variable; SPEC, "The law of the estimate"). Documents are re-read from the
paths the store recorded, shingled exactly as when signed, and compared as sets. A document that cannot be
read, or whose bytes changed since it was signed (content hash), is left unverified rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dedup_cli.arrays import sorted_unique
from dedup_cli.corpus import reread_documents, reread_sets
from dedup_cli.shingling import document_shingles
from dedup_cli.storage import StoredSignatures

VERIFY_MODES = ("borderline", "all", "none")


@dataclass
class Verification:
    """Exact resemblances of the checked pairs (NaN where a document could not be re-read)."""

    exact: np.ndarray  # float64[n_pairs]
    checked: int
    unverifiable_documents: list[str]


def exact_sets(store: StoredSignatures, rows: np.ndarray) -> dict[int, np.ndarray | None]:
    """The shingle sets of documents ``rows`` as signed; None where a document is gone or changed."""
    params = store.params
    hashes = None if store.content_hashes is None else [int(store.content_hashes[row]) for row in rows]
    locations = [store.paths[row] for row in rows]
    if params.input_kind == "sets":
        return dict(zip(rows.tolist(), reread_sets(locations, hashes), strict=True))
    texts = reread_documents(locations, hashes)
    return {
        row: None if text is None else document_shingles(text, params.shingle_size, params.shingle_unit)
        for row, text in zip(rows.tolist(), texts, strict=True)
    }


def verify_pairs(
    store: StoredSignatures,
    first: np.ndarray,
    second: np.ndarray,
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Exact resemblance of each pair (first[p], second[p]); each document is read once."""
    exact = np.full(first.size, np.nan)
    sets = exact_sets(store, sorted_unique(np.concatenate([first, second])))
    for index, (a, b) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
        set_a, set_b = sets[a], sets[b]
        if set_a is None or set_b is None or (set_a.size == 0 and set_b.size == 0):
            continue
        shared = np.intersect1d(set_a, set_b, assume_unique=True).size
        exact[index] = shared / (set_a.size + set_b.size - shared)
        if progress is not None:
            progress(1)
    unverifiable = sorted(store.ids[row] for row, value in sets.items() if value is None)
    return Verification(exact=exact, checked=int(np.count_nonzero(~np.isnan(exact))),
                        unverifiable_documents=unverifiable)


def pairs_to_verify(mode: str, threshold: float, estimate: np.ndarray, ci_low: np.ndarray,
                    ci_high: np.ndarray) -> np.ndarray:
    """Which scored candidates to check exactly: bool[n_pairs].

    ``borderline``: the interval straddles R0 (on either side of the estimate, so a true duplicate that
    the estimate put just below R0 is rescued too); ``all``: those plus every pair estimated ≥ R0.
    """
    if mode not in VERIFY_MODES:
        raise ValueError(f"unknown verify mode {mode!r}")
    if mode == "none":
        return np.zeros(estimate.size, dtype=bool)
    borderline = (ci_low < threshold) & (ci_high >= threshold)
    return borderline | (estimate >= threshold) if mode == "all" else borderline
