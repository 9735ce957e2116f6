"""The local engine's ``find``: the backend of :func:`dedup_cli.engine.find_driver.run_find` whose work runs here and
in workers forked from here.

The store is never held whole. Its documents are numbered by rank of id from the ``id`` and ``run`` columns
(:class:`dedup_cli.store.documents.NumberedDocuments`, about 16 bytes a document kept), the candidate pairs come
from the signatures streamed in rounds of bands (:mod:`dedup_cli.engine.local.band_rounds`), and only the documents of
candidate pairs are then read whole (ids, locations, signatures) into a store of their own, numbered in the same
order, on which scoring, exact checks, decisions and the end of find run: every stage there depends only on the
order of the documents, so the answer is the one of reading everything (docs/scaling.md). ``--candidates all``
compares every pair and so reads every eligible document.

The steps, their order, what is kept in ``--work-dir`` and the result's common fields are the driver's, the Dask
engine's too; what is this engine's is :class:`LocalFind`: where each step's columns are (here, renumbered to the
candidates' documents) and how its kept stages are written (one file of arrays each).

The local engine's ``sign`` is :mod:`dedup_cli.engine.local.sign_workers`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli import forked
from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.find_driver import run_find
from dedup_cli.engine.local.band_rounds import streamed_candidates
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.resume import Resume, kept_verification, verification_arrays
from dedup_cli.engine.stages import conclude as ending
from dedup_cli.engine.stages import decisions as rules
from dedup_cli.engine.stages import find as stages
from dedup_cli.engine.stages.plan import FindPlan, plan_find
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.forked import forked_map, useful_workers
from dedup_cli.options.finding import FindOptions
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.documents import Mapper, NumberedDocuments
from dedup_cli.store.numbering import Documents
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.store.store import Store
from dedup_cli.verification import ExactSets, Verification

SCORE_FIELDS = tuple(ScoredPairs.__dataclass_fields__)


def find(stores: Sequence[Store], options: FindOptions, progress: Progress = silent) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ R0 in a store (and a reference store) and group them.

    Args:
        stores: the store, then with ``options.against`` the reference store (same parameters, checked by
            :func:`dedup_cli.api.find.find`, which checked ``options`` against them too). Documents are
            numbered by (store, id): pairs inside the reference are left out (with ``only_across``, pairs inside
            the store too), and a group keeps a reference document.
        progress: told each stage as it begins, and its steps.
    """
    progress.stage("numbering the documents", None)
    with NumberedDocuments(stores, _numbering(options.workers)) as documents:
        return find_documents(documents, options, progress, stores)


def _numbering(jobs: int) -> Mapper | None:
    """How numbering reads a store's row groups: in up to ``jobs`` forked workers (one row group a task), each
    checking its ids' order and writing counts and runs into shared memory; None (here) with one job."""
    return None if jobs <= 1 else _forked_mapper(jobs, "numbering the documents")


def _forked_mapper(workers: int, stage: str) -> Mapper:
    """A mapper that runs its tasks in up to ``workers`` forked workers (:func:`dedup_cli.forked.
    forked_map`), results in task order; ``stage`` names them in a dead worker's message."""

    def mapped(read: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        return forked_map(read, tasks, min(workers, len(tasks)), stage)

    return mapped


@dataclass
class CandidateDocuments:
    """The candidates' documents read whole, numbered 0 … m − 1 in document order."""

    store: StoredSignatures
    values: np.ndarray  # uint[m, k], their b-bit values (the XOR bits with b = 1/2)
    r: np.ndarray  # float64[m], r = f/D


@dataclass
class ScoredCandidates:
    """The scored stage: the candidate pairs scored, as pairs of the candidates' documents ``docs``, read whole."""

    docs: np.ndarray  # int64[m], the candidates' documents, ascending
    oversized: int  # buckets cut
    scored: ScoredPairs  # first and second number the documents 0 … m − 1, in the order of ``docs``
    documents: CandidateDocuments

    @property
    def count(self) -> int:
        return int(self.scored.first.size)


@dataclass
class DecidedPairs:
    """The decisions stage: exact checks of the borderline pairs, accepted pairs, the aliases left out."""

    exact: np.ndarray  # float64[p], NaN where unchecked
    decided: np.ndarray  # bool[p], aliases left out
    aliases: np.ndarray  # int64[a], candidates' documents that are another's file under a second name
    verification: Verification | None
    sets: ExactSets | None = None  # the documents the exact checks read, for the triples' checks


def plan_documents(documents: Documents, options: FindOptions, stores: Sequence[Store] = ()) -> FindPlan:
    """The plan (:mod:`dedup_cli.engine.stages.plan`) of a ``find`` of numbered documents (of ``stores``)."""
    counts, runs = documents.shingle_counts, documents.runs
    eligible = counts[counts > 0]
    return plan_find(options, documents.params, documents.documents, int(eligible.size),
                     _reference_start(documents), int(counts.max()) if counts.size else 0,
                     (int(runs.min()), int(runs.max())) if runs.size else None,
                     tuple(store.id_scheme for store in stores), int(eligible.min()) if eligible.size else 0)


def find_documents(documents: Documents, options: FindOptions, progress: Progress = silent,
                   stores: Sequence[Store] = ()) -> FindResult:
    """:func:`find` of documents already numbered: a store's (and a reference store's), or texts signed in
    memory. ``stores``: the stores they come from, which a ``work_dir`` is keyed by (none in memory)."""
    work = None if options.work_dir is None or not stores else WorkDir(options.work_dir, stores)
    return run_find(LocalFind(documents, options, stores, work), work, progress)


class LocalFind:
    """The local engine as :class:`dedup_cli.engine.find_driver.FindBackend`: the numbered documents here, the
    candidates' documents read whole into this process, the stages in forked workers (``options.workers``)."""

    kept_by: dict[str, object] = {}

    def __init__(self, documents: Documents, options: FindOptions, stores: Sequence[Store], work: WorkDir | None
                 ) -> None:
        self.documents, self.work = documents, work
        self.plan = plan_documents(documents, options, stores)
        start = self.plan.reference_start
        self.reference = None if start is None else np.arange(documents.documents) >= start
        self.new = rules.new_documents(documents.runs, options.new_since, self.reference)

    def scores(self, resume: Resume, progress: Progress) -> ScoredCandidates:
        plan, documents = self.plan, self.documents
        first, second, oversized = _candidates(documents, plan, progress, resume)
        if self.new is not None and plan.options.ways == 2:
            # Only pairs touching a new document matter; dropping the others before scoring saves the work.
            pairs = np.c_[first, second]
            reference = None if self.reference is None else self.reference[pairs]
            touching = rules.wanted(self.new[pairs], reference, plan.options.only_across)
            if touching is not None:
                first, second = first[touching], second[touching]
        # From here on only the candidates' documents, numbered 0 … m − 1 in the same order.
        docs = sorted_unique(np.concatenate([first, second]))
        candidates = read_candidates(documents, docs, plan, progress)
        progress.stage("scoring", None)
        scored = stages.score_in_chunks(candidates.values, np.searchsorted(docs, first),
                                        np.searchsorted(docs, second), candidates.r, plan.bits,
                                        plan.options.workers, densification=plan.densification)
        return ScoredCandidates(docs, oversized, scored, candidates)

    def keep_scores(self, scored: ScoredCandidates, key: str) -> None:
        assert self.work is not None
        self.work.save("scored", key, {"docs": scored.docs, "oversized": np.array(scored.oversized),
                                       **{name: getattr(scored.scored, name) for name in SCORE_FIELDS}})

    def kept_scores(self, kept: dict[str, np.ndarray], key: str, progress: Progress) -> ScoredCandidates:
        scored = ScoredPairs(**{name: kept[name] for name in SCORE_FIELDS})
        return ScoredCandidates(kept["docs"], int(kept["oversized"]), scored,
                                read_candidates(self.documents, kept["docs"], self.plan, progress))

    def decisions(self, scored: ScoredCandidates, bound: SimultaneousBound, progress: Progress) -> DecidedPairs:
        progress.stage("exact checks", None)
        plan, pairs, store = self.plan, scored.scored, scored.documents.store
        sets = stages.exact_sets(store, plan.options.workers)
        exact, verification = stages.verify_borderline(store, pairs, plan.threshold, plan.options.verify,
                                                       plan.options.workers, bound, sets)
        decided = rules.decide(pairs.estimate, exact, plan.threshold)
        reference = self._of(scored, self.reference)
        across = None if reference is None else reference[pairs.first] != reference[pairs.second]
        docs = rules.alias_candidates(pairs.first, pairs.second, decided, across)
        aliases = rules.alias_documents(docs, [store.paths[doc] for doc in docs.tolist()])
        decided = rules.accepted(decided, pairs.first, pairs.second, aliases)
        return DecidedPairs(exact, decided, aliases, verification, sets)

    def keep_decisions(self, decided: DecidedPairs, key: str) -> None:
        assert self.work is not None
        self.work.save("decisions", key, {"exact": decided.exact, "decided": decided.decided,
                                          "aliases": decided.aliases, **verification_arrays(decided.verification)})

    def kept_decisions(self, kept: dict[str, np.ndarray], key: str, scored: ScoredCandidates, progress: Progress
                       ) -> DecidedPairs:
        return DecidedPairs(kept["exact"], kept["decided"], kept["aliases"], kept_verification(kept))

    def conclusion(self, scored: ScoredCandidates, decided: DecidedPairs, common: dict[str, Any],
                   progress: Progress) -> FindResult:
        candidates, reference = scored.documents, self._of(scored, self.reference)
        done = ending.conclude(candidates.store, candidates.values, candidates.r, scored.scored, decided.exact,
                               decided.decided, decided.aliases, self._of(scored, self.new), self.plan, reference,
                               sets=decided.sets)
        return ending.concluded_result(candidates.store, done, reference, common)

    @staticmethod
    def _of(scored: ScoredCandidates, flags: np.ndarray | None) -> np.ndarray | None:
        """Per-document ``flags`` of the candidates' documents only (as they are numbered from scoring on)."""
        return None if flags is None else flags[scored.docs]


def read_candidates(documents: Documents, docs: np.ndarray, plan: FindPlan, progress: Progress
                    ) -> CandidateDocuments:
    """The documents ``docs`` (the candidates') read whole, with their b-bit values and r."""
    progress.stage("reading the candidates' documents", None)
    mapper = _reader(documents, docs, plan.options.workers)
    store = documents.stored(docs, mapper=mapper, forked=mapper is not None)
    return CandidateDocuments(store, store.values(plan.bits),
                              stages.set_size_ratios(store.shingle_counts, documents.params.universe))


def _reference_start(documents: Documents) -> int | None:
    """The reference store's first document (numbered after the store's), or None without one."""
    return int(documents.store_starts[1]) if documents.store_starts.size > 2 else None


def _candidates(documents: Documents, plan: FindPlan, progress: Progress, resume: Resume
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """The candidate pairs (document numbers) and the buckets cut: by banding in rounds, or every pair."""
    options, bits = plan.options, plan.bits
    eligible = documents.shingle_counts > 0  # a document with no shingle resembles nothing
    if plan.banding is None:  # --candidates all
        keyed = np.flatnonzero(eligible)
        mapper = _reader(documents, keyed, options.workers)
        everything = documents.stored(keyed, mapper=mapper, forked=mapper is not None)
        advance = progress.stage("comparing every pair", int(keyed.size), "documents")
        ratios = stages.set_size_ratios(everything.shingle_counts, documents.params.universe)
        first, second = stages.every_pair_candidates(everything.values(bits), bits, plan.pair_floor, ratios,
                                                     np.ones(keyed.size, bool), advance, options.workers)
        return keyed[first], keyed[second], 0
    jobs = useful_workers(options.workers, plan.eligible, forked.BANDED_DOCUMENTS)
    found, _ = streamed_candidates(documents, eligible, plan.banding, options.max_bucket, progress,
                                   options.band_memory, resume, jobs)
    return found.first, found.second, found.oversized_buckets


def _reader(documents: Documents, docs: np.ndarray, jobs: int) -> Mapper | None:
    """How to read the row groups of the documents ``docs``: in up to ``jobs`` worker processes when they are
    enough and the store's files can be read by forked processes, else in this one (None)."""
    workers = useful_workers(jobs, int(docs.size), forked.READ_DOCUMENTS)
    if workers <= 1 or not documents.reads_in_workers:
        return None
    return _forked_mapper(workers, "reading the candidates' documents")
