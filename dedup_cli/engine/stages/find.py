"""The stages of ``find`` up to the decisions, each a function from arrays to arrays, so that engines can compose
them: set-size ratios, candidate pairs (LSH banding or every pair), scores, and exact checks of the borderline
pairs, in up to ``jobs`` forked workers (:mod:`dedup_cli.forked`) where the local engine asks for them.

The rules that decide pairs are :mod:`dedup_cli.engine.stages.decisions`; everything after the decisions (triples,
groups, representatives) is :mod:`dedup_cli.engine.stages.conclude` (docs/architecture.md, "Engines").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dedup_cli import forked
from dedup_cli.array_primitives import sorted_unique
from dedup_cli.candidates.allpairs import all_pairs
from dedup_cli.candidates.banding import Banding
from dedup_cli.candidates.buckets import CandidateResult, bands_pair_codes, candidate_pairs
from dedup_cli.candidates.match_bounds import min_matches_for_threshold, min_xor_matches_for_threshold
from dedup_cli.engine.stages.decisions import to_check
from dedup_cli.engine.stages.plan import FindPlan, estimated_positions
from dedup_cli.estimates.densified import Densification
from dedup_cli.estimates.exact import FlatSets, Split
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.estimates.pairs import ScoredPairs, score_pairs
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.forked import chunk_bounds, forked_map, useful_workers
from dedup_cli.objectstore.urls import is_url
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import ExactSets, Verification, verify_pairs


def set_size_ratios(shingle_counts: np.ndarray, universe: int) -> np.ndarray:
    """r = f/D of every document: float64[n_docs] (≈ 0 for hashed text; it enters C_1,b and C_2,b)."""
    return shingle_counts.astype(np.float64) / float(universe)


def lsh_candidates(stored_values: np.ndarray, banding: Banding, eligible: np.ndarray,
                   max_bucket: int, jobs: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Candidate pairs of banding the stored B-bit values: (int64[m] first, int64[m] second, buckets cut).

    With ``jobs`` > 1 forked workers (which inherit the values) each band a share of the bands; the union of their
    sorted distinct pairs is the same set, sorted and distinct, whatever ``jobs`` is."""
    bands, rows = banding.bands, banding.rows
    workers = min(useful_workers(jobs, int(np.count_nonzero(eligible)), forked.BANDED_DOCUMENTS), bands)
    if workers <= 1:
        found = candidate_pairs(stored_values, bands, rows, eligible, max_bucket)
        return found.first, found.second, found.oversized_buckets
    if bands * rows > stored_values.shape[1]:
        raise ValueError(f"bands {bands} × rows {rows} exceeds the {stored_values.shape[1]} values per signature")
    docs = np.flatnonzero(eligible)

    def pair(share: range) -> tuple[np.ndarray, int]:
        return bands_pair_codes(stored_values, share, rows, docs, max_bucket)

    shares = [range(worker, bands, workers) for worker in range(workers)]
    parts = list(forked_map(pair, shares, workers, "the candidate stage"))
    codes = sorted_unique(np.concatenate([codes for codes, _ in parts]))
    found = CandidateResult.of_codes(codes, stored_values.shape[0], sum(cut for _, cut in parts))
    return found.first, found.second, found.oversized_buckets


def every_pair_candidates(values: np.ndarray, bits: float, floor: float, r: np.ndarray, eligible: np.ndarray,
                          progress: Callable[[int], None] | None = None, jobs: int = 1
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Every eligible pair whose b-bit match count can reach ``floor``, R0 − margin (``FindPlan.pair_floor``):
    (int64[m] first, int64[m] second).

    The margin keeps the pairs a triple or an exact check may still need
    (:func:`dedup_cli.candidates.candidate_triples.pair_margin`, at k = ``values.shape[1]``). With ``jobs`` > 1, forked
    workers compare blocks of rows of the upper triangle (worker w the blocks w, w + jobs, …, which balances the
    shrinking rows), handed back in order: the same pairs. With b = 1/2 ``values`` are the XOR bits, compared as
    1-bit values.
    """
    num_perm = values.shape[1]
    floor = max(floor, 1e-9)
    if is_half_bit(bits):
        needed = min_xor_matches_for_threshold(floor, num_perm, r)
        bits = 1
    else:
        needed = min_matches_for_threshold(floor, num_perm, int(bits), r)
    workers = useful_workers(jobs, int(np.count_nonzero(eligible)), forked.COMPARED_DOCUMENTS)
    mapper = None
    if workers > 1:
        def mapper(block: Callable[[int], Any], starts: Sequence[int]) -> Iterator[Any]:
            return forked_map(block, starts, workers, "the comparison of every pair")
    first, second, _ = all_pairs(values, int(bits), needed, eligible, progress=progress, mapper=mapper)
    return first, second


def score_in_chunks(values: np.ndarray, first: np.ndarray, second: np.ndarray, r: np.ndarray, bits: float,
                    jobs: int = 1, level: float = 0.95, densification: Densification | None = None) -> ScoredPairs:
    """:func:`dedup_cli.estimates.pairs.score_pairs` of contiguous chunks of the pairs in up to ``jobs`` forked
    workers (which inherit ``values``), joined in order: every field is computed pair by pair, so the arrays are
    the same whatever ``jobs`` is. ``densification``: the bins of one permutation hashing (the plan's)."""
    workers = useful_workers(jobs, first.size, forked.SCORED_PAIRS)
    if workers <= 1:
        return score_pairs(values, first, second, r, bits, level, densification)

    def score(bounds: tuple[int, int]) -> ScoredPairs:
        start, stop = bounds
        return score_pairs(values, first[start:stop], second[start:stop], r, bits, level, densification)

    parts = list(forked_map(score, chunk_bounds(first.size, workers), workers, "scoring"))
    return ScoredPairs(**{name: np.concatenate([getattr(part, name) for part in parts])
                          for name in ScoredPairs.__dataclass_fields__})


def exact_sets(store: StoredSignatures, jobs: int = 1) -> ExactSets:
    """The run's :class:`dedup_cli.verification.ExactSets` of ``store``: documents read and shingled once, with
    ``jobs`` > 1 in forked workers a share of the documents each (contiguous runs of rows of about equal shingle
    counts), so that a document in many pairs, or in pairs and triples, is read by one process once; the lookups of
    the pairs and triples are shared by forked workers too (runs of ``forked.CHECKED_ELEMENTS`` elements at least).
    Documents in object storage are read in this process (a forked worker cannot share its connections), and so are
    documents without a location (signed from memory: nothing to re-read, nothing worth a worker)."""
    if jobs <= 1:
        return ExactSets(store)
    split = Split(lambda count, runs: forked_map(count, runs, len(runs), "the exact checks"), jobs,
                  forked.CHECKED_ELEMENTS)
    if store.texts is not None:
        return ExactSets(store, split=split)

    def mapper(read: Callable[[np.ndarray], FlatSets], shares: Sequence[np.ndarray]) -> Iterator[FlatSets]:
        locations = [store.paths[row] for share in shares for row in share.tolist()]
        if not any(locations) or any(is_url(location) for location in locations):  # nothing to re-read, or remote
            return iter([read(np.concatenate(shares))])
        return forked_map(read, shares, len(shares), "the exact checks")

    return ExactSets(store, mapper, jobs, forked.CHECKED_DOCUMENTS, split)


def verify_in_chunks(store: StoredSignatures, first: np.ndarray, second: np.ndarray, jobs: int = 1,
                     sets: ExactSets | None = None) -> Verification:
    """:func:`dedup_cli.verification.verify_pairs` with the documents read by :func:`exact_sets` (in up to ``jobs``
    forked workers, or the run's ``sets``), and the pairs intersected here in batches: each pair's exact
    resemblance depends on its two documents alone, so the result is the same whatever ``jobs`` is."""
    return verify_pairs(store, first, second, exact_sets(store, jobs) if sets is None else sets)


def verify_borderline(store: StoredSignatures, scored: ScoredPairs, threshold: float,
                      mode: str, jobs: int = 1, bound: SimultaneousBound | None = None,
                      sets: ExactSets | None = None) -> tuple[np.ndarray, Verification | None]:
    """Exact resemblance of the pairs ``mode`` selects (NaN elsewhere): float64[m], and what was checked; with
    ``jobs`` worker processes (:func:`verify_in_chunks`), or the run's ``sets``. With ``bound`` (the run's b, k and
    candidate count) the pairs it cannot clear are checked too (:func:`dedup_cli.engine.stages.decisions.
    to_check`)."""
    exact = np.full(scored.first.size, np.nan)
    if mode == "none":
        return exact, None
    check = to_check(scored, mode, threshold, bound)
    verification = verify_in_chunks(store, scored.first[check], scored.second[check], jobs, sets)
    exact[check] = verification.exact
    return exact, verification


def decision_bound(plan: FindPlan, candidates: int) -> SimultaneousBound:
    """The simultaneous bound of a find with ``plan`` that scored ``candidates`` pairs: both engines decide with
    it, counting the same candidates (and checking, for a recall above 0.99, the pairs its estimate may have put
    below R0 by chance)."""
    return SimultaneousBound(plan.bits, estimated_positions(plan.params, plan.bits), int(candidates),
                             recall=plan.options.recall, densification=plan.densification)
