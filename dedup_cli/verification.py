"""Exact verification: re-read the documents of uncertain pairs and compute their true resemblance.

A pair whose confidence interval straddles the threshold is the one worth an exact check (Dembele & Lo
2017: the estimate is a random variable; docs/estimators.md, "Intervals"). Documents are re-read from the
locations the store recorded, each file once, shingled exactly as when signed, and held as sorted 64-bit hashes
end to end (:class:`ExactSets`: a document in many pairs, and in triples, is read once a run), and the pairs and
triples are intersected in batches by numpy (:mod:`dedup_cli.estimates.exact`). A document that cannot be read,
or whose bytes changed since it was signed (content hash), is left unverified rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.estimates.exact import FlatSets, Split, flat_pair_resemblances, flat_triple_resemblances
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


Mapper = Callable[[Callable[[np.ndarray], FlatSets], Sequence[np.ndarray]], Iterator[FlatSets]]
"""How :class:`ExactSets` reads shares of documents: ``mapper(read, shares)`` gives ``read(share)`` of each
share, in order (an engine's workers, or None for this process)."""


def read_sets(store: StoredSignatures, rows: np.ndarray) -> FlatSets:
    """The shingle sets (or integer sets) of documents ``rows`` as signed, in the order of ``rows``, end to end;
    unknown where a document is gone or changed since it was signed.

    Each file is read once (:func:`dedup_cli.inputs.reread.reread_documents`) and all the texts are shingled in
    one batch (:func:`dedup_cli.text.shingles.batch_shingles`, whose flat output is kept as it is).
    """
    params = store.params
    hashes = None if store.content_hashes is None else [int(store.content_hashes[row]) for row in rows]
    locations = [store.paths[row] for row in rows]
    if params.input_kind == "sets":
        return FlatSets.of(reread_sets(locations, hashes))
    texts: list[str | None] = ([store.texts[row] for row in rows.tolist()] if store.texts is not None
                               else reread_documents(locations, hashes))
    known = np.array([text is not None for text in texts], dtype=bool)
    shingles, offsets = batch_shingles([text for text in texts if text is not None], params.shingle_size,
                                       params.shingle_unit, params.tokenisation, params.short_documents)
    sizes = np.zeros(len(texts), dtype=np.int64)
    sizes[known] = np.diff(offsets)
    return FlatSets(shingles, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), known)


class ExactSets:
    """The exact sets of a store's documents, each read and shingled once a run however many pairs and triples
    need it, and held end to end (:class:`dedup_cli.estimates.exact.FlatSets`) in the order of the rows.

    Args:
        store: the documents (locations, content hashes, parameters; or texts in memory).
        mapper: reads shares of the documents not held yet in an engine's workers (each share a contiguous run of
            them, about equal in shingles), or None to read them here; the sets are the same either way.
        workers: how many shares at most; share: the fewest documents a share holds (fewer shares when there are
            fewer documents).
        split: how the lookups of the pairs and triples checked may be shared by workers, or None (here).
    """

    def __init__(self, store: StoredSignatures, mapper: Mapper | None = None, workers: int = 1,
                 share: int = 1, split: Split | None = None) -> None:
        self.store = store
        self.mapper = mapper
        self.workers = workers
        self.share = max(1, share)
        self.split = split
        self.rows = np.empty(0, dtype=np.int64)  # ascending
        self.sets = FlatSets.joined([])

    def _read(self, rows: np.ndarray) -> FlatSets:
        workers = min(self.workers, rows.size // self.share)
        if self.mapper is None or workers <= 1:
            return read_sets(self.store, rows)
        # Shares of about equal shingle counts (the work of shingling), each a contiguous run of rows.
        weights = np.cumsum(np.maximum(self.store.shingle_counts[rows], 1))
        cuts = np.searchsorted(weights, weights[-1] * np.arange(1, workers) / workers)
        shares = [share for share in np.split(rows, cuts) if share.size]
        return FlatSets.joined(list(self.mapper(lambda share: read_sets(self.store, share), shares)))

    def of(self, rows: np.ndarray) -> tuple[FlatSets, np.ndarray]:
        """The held sets, with those of ``rows`` (int64) read first where they are not yet, and the position of
        each of ``rows`` among them (int64, aligned with ``rows``)."""
        rows = np.asarray(rows, dtype=np.int64)
        wanted = sorted_unique(rows)
        missing = wanted[~np.isin(wanted, self.rows, assume_unique=True)]
        if missing.size and not self.rows.size:  # the first read: held as read, in the order of the rows
            self.sets, self.rows = self._read(missing), missing
        elif missing.size:
            everything = np.concatenate([self.rows, missing])
            order = np.argsort(everything, kind="stable")
            self.sets = FlatSets.joined([self.sets, self._read(missing)]).take(order)
            self.rows = everything[order]
        return self.sets, np.searchsorted(self.rows, rows)

    def unverifiable(self, rows: np.ndarray) -> list[str]:
        """The sorted ids of those of ``rows`` (held) that could not be re-read."""
        wanted = sorted_unique(np.asarray(rows, dtype=np.int64))
        gone = wanted[~self.sets.known[np.searchsorted(self.rows, wanted)]]
        return sorted(self.store.ids[row] for row in gone.tolist())


def verify_pairs(store: StoredSignatures, first: np.ndarray, second: np.ndarray,
                 sets: ExactSets | None = None) -> Verification:
    """Exact resemblance of each pair (first[p], second[p]) (:func:`dedup_cli.estimates.exact.
    flat_pair_resemblances`); each document is read once, and not at all when ``sets`` holds it already."""
    sets = ExactSets(store) if sets is None else sets
    held, places = sets.of(np.concatenate([first, second]))
    exact = flat_pair_resemblances(held, places[: first.size], places[first.size :], sets.split)
    return Verification(exact=exact, checked=int(np.count_nonzero(~np.isnan(exact))),
                        unverifiable_documents=sets.unverifiable(np.concatenate([first, second])))


def verify_triples(store: StoredSignatures, docs: np.ndarray, sets: ExactSets | None = None) -> Verification:
    """Exact 3-way resemblance |A ∩ B ∩ C| / |A ∪ B ∪ C| of each triple (rows of int64[n, 3];
    :func:`dedup_cli.estimates.exact.flat_triple_resemblances`); each document is read once, as for pairs, and not
    at all when ``sets`` holds it already (the pairs' checks read it)."""
    sets = ExactSets(store) if sets is None else sets
    docs = np.asarray(docs, dtype=np.int64).reshape(-1, 3)
    held, places = sets.of(docs.reshape(-1))
    exact = flat_triple_resemblances(held, places.reshape(-1, 3), sets.split)
    return Verification(exact=exact, checked=int(np.count_nonzero(~np.isnan(exact))),
                        unverifiable_documents=sets.unverifiable(docs.reshape(-1)))


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
