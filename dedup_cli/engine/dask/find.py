"""``find`` on a Dask cluster: the backend of :func:`dedup_cli.engine.find_driver.run_find` whose tables live in
parts on the workers and meet through exchanges.

read (pieces of the store, numbered by rank of id) → band keys per piece, candidates by sharing the buckets a
few bands at a time, de-duplicated by an exchange on the pair → scores by two range joins → exact checks of the
borderline pairs on the workers → decisions, aliases → the end of find (triples, groups, representatives) on the
gathered edges when they are few (:mod:`.end_gathered`), else per connected component on the workers
(:mod:`.end_on_workers`). When the scored pairs themselves are few (``--gather-limit``), they are gathered before
the decisions, which then run in the driver on them with their checks as tasks on the workers
(:func:`dedup_cli.engine.dask.pair_decisions.decide_gathered`).

Every task holds tables of numpy arrays (:mod:`.exchange`) and calls the shared stages on its part of the data;
documents are numbered as the local engine numbers them, and the steps, their order, what is kept in
``--work-dir`` and the result's common fields are the driver's, the local engine's too (docs/scaling.md, "The
Dask engine"). What is this engine's is :class:`DaskFind`: where each step runs and where its tables meet.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask import end_gathered, end_on_workers, pair_decisions
from dedup_cli.engine.dask.candidates import CandidateStats, candidate_pairs
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, counted, joined, row_count, take
from dedup_cli.engine.dask.id_sort import store_documents
from dedup_cli.engine.dask.joins import score_candidates
from dedup_cli.engine.dask.kept_parts import keep_parts, kept_parts
from dedup_cli.engine.dask.ranges import NumberedPieces, value_ranges, with_reference
from dedup_cli.engine.dask.table_kinds import DECIDED, SCORED
from dedup_cli.engine.find_driver import run_find
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.resume import Resume, kept_verification, verification_arrays
from dedup_cli.engine.stages.conclude import conclude, concluded_result, store_runs
from dedup_cli.engine.stages.decisions import new_documents
from dedup_cli.engine.stages.filter import member_details
from dedup_cli.engine.stages.plan import FindPlan, plan_find
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.minhash.packing import value_words
from dedup_cli.options.finding import FindOptions
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.store import Store
from dedup_cli.verification import Verification


@dataclass
class Laps:
    """Each stage's seconds, as the result's ``profile`` holds them."""

    profile: dict[str, float] = field(default_factory=dict)
    clock: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.profile[f"{stage}_seconds"] = now - self.clock
        self.clock = now


@dataclass
class ScoredParts:
    """The scored stage: the scored candidate pairs (delayed tables, a part a range of the second document), the
    b-bit values they were scored with (a part a range of documents), what finding the candidates cost, and how
    many pairs were scored."""

    scored: list[Any]
    values: list[Any]
    stats: CandidateStats
    count: int

    @property
    def oversized(self) -> int:
        return int(self.stats.oversized_buckets)


@dataclass
class DecidedParts:
    """The decisions stage: the scored pairs with ``exact`` and ``decided`` columns (delayed tables, a part a range
    of the second document, or decided in the driver one table, with its documents' names), the aliases left out,
    and the exact checks done (None with ``--verify none``)."""

    parts: list[Any]
    aliases: np.ndarray
    verification: Verification | None
    table: Table | None = None  # decided in the driver
    names: Table | None = None  # decided in the driver: the names of the table's documents
    sizes: list[int] = field(default_factory=list)  # decided in the driver: the rows of each scored part it took


def find(store: Store, options: FindOptions, progress: Progress = silent, reference: Store | None = None
         ) -> FindResult:
    """Find near-duplicates in ``store`` (and with ``options.against``, against the ``reference`` store) on the
    current Dask client's cluster (options already checked).

    The result's ``profile`` holds each stage's seconds and the rows and payload bytes its exchanges moved.
    """
    laps = Laps()
    progress.stage("reading the store's pieces", None)
    stores = [store] if reference is None else [store, reference]
    numbered = read_numbered(store, reference)
    laps.lap("read")
    work = None if options.work_dir is None else WorkDir(options.work_dir, stores)
    return run_find(DaskFind(numbered, options, stores, work, laps), work, progress)


def read_numbered(store: Store, reference: Store | None) -> NumberedPieces:
    """The store's live documents (then the reference store's), numbered as the local engine numbers them."""
    numbered = store_documents(store)
    if reference is not None:
        numbered = with_reference(numbered, store_documents(reference))
    return numbered


def plan_numbered(numbered: NumberedPieces, options: FindOptions, stores: Sequence[Store] = ()) -> FindPlan:
    """The plan (:mod:`dedup_cli.engine.stages.plan`) of a ``find`` of the documents of ``numbered`` (of
    ``stores``)."""
    return plan_find(options, numbered.params, numbered.documents, numbered.eligible, numbered.reference_start,
                     numbered.max_shingle_count, numbered.run_span, tuple(store.id_scheme for store in stores),
                     numbered.min_shingle_count)


class DaskFind:
    """The Dask engine as :class:`dedup_cli.engine.find_driver.FindBackend`: tables in parts on the workers, a
    part a range of documents, meeting by exchanges; what is few enough gathered into the driver."""

    def __init__(self, numbered: NumberedPieces, options: FindOptions, stores: Sequence[Store],
                 work: WorkDir | None, laps: Laps) -> None:
        self.numbered, self.work, self.laps = numbered, work, laps
        self.plan = plan_numbered(numbered, options, stores)
        # The kept parts are ranges of the second document: they depend on the divisions too.
        self.kept_by: dict[str, object] = {"divisions": numbered.divisions}

    def scores(self, resume: Resume, progress: Progress) -> ScoredParts:
        """The candidate pairs in rounds of bands, then scored by two range joins."""
        numbered, plan = self.numbered, self.plan
        options = plan.options
        bits = int(plan.bits)  # whole: FindOptions keeps b = 1/2 to the local engine
        assert plan.banding is not None  # FindOptions keeps --candidates all to the local engine
        found = candidate_pairs(numbered, plan.banding.bands, plan.banding.rows, options.max_bucket,
                                options.band_memory, progress, resume, reduce_bits=bits)
        self.laps.lap("candidates")
        progress.stage("scoring the candidate pairs", None)
        # The b-bit values: read with the first round's keys, else (every round kept by an earlier run) read now.
        values = found.reduced if found.reduced is not None else list(settled(*value_ranges(numbered, bits)))
        pairs_only = options.ways == 2  # triangles need every pair: triples are left out only at the end
        start = numbered.reference_start
        scored = list(settled(*score_candidates(found.codes, values, numbered.divisions, numbered.documents, bits,
                                                numbered.params, options.new_since if pairs_only else None,
                                                start if pairs_only else None, options.only_across,
                                                plan.densification)))
        return ScoredParts(scored, values, found.stats, counted(scored))

    def keep_scores(self, scored: ScoredParts, key: str) -> None:
        assert self.work is not None
        keep_parts(self.work, "scored", key, scored.scored, {"stats": scored.stats.as_array()})

    def kept_scores(self, kept: dict[str, np.ndarray], key: str, progress: Progress) -> ScoredParts:
        assert self.work is not None
        self.laps.profile["candidates_seconds"] = 0.0
        parts = kept_parts(self.work, "scored", key, kept, SCORED)
        values = list(settled(*value_ranges(self.numbered, int(self.plan.bits))))
        return ScoredParts(parts, values, CandidateStats.of_array(kept["stats"]), counted(parts))

    def decisions(self, scored: ScoredParts, bound: SimultaneousBound, progress: Progress) -> DecidedParts:
        """On the workers, or when the scored pairs are few enough for the driver (``--gather-limit``) here on
        those that may matter, with the exact checks and file checks as tasks on the workers and no exchange."""
        self.laps.lap("scoring")
        progress.stage("exact checks and decisions", None)
        numbered, plan = self.numbered, self.plan
        mode, threshold = plan.options.verify, plan.threshold
        if self._in_driver(scored):
            parts = dask.compute(*[dask.delayed(pair_decisions.may_matter)(part, mode, threshold, bound,
                                                                           plan.triple_floor)
                                   for part in scored.scored])
            gathered = pair_decisions.decide_gathered(joined(parts), numbered, mode, threshold, bound)
            return DecidedParts([], gathered.aliases, gathered.verification, gathered.decided, gathered.names,
                                [int(part["first"].size) for part in parts])
        decided, verification = pair_decisions.check_and_decide(scored.scored, numbered, mode, threshold, bound)
        aliases = pair_decisions.aliases(decided, numbered)
        decided = list(settled(*[dask.delayed(pair_decisions.accept)(part, aliases) for part in decided]))
        return DecidedParts(decided, aliases, verification)

    def keep_decisions(self, decided: DecidedParts, key: str) -> None:
        """Kept in parts as the scored pairs are (those decided in the driver cut back into them), so that a run
        that decides on the workers resumes from what one that decided in the driver kept, and the reverse."""
        assert self.work is not None
        parts = decided.parts
        if decided.table is not None:
            bounds = np.r_[0, np.cumsum(decided.sizes)]
            parts = [dask.delayed(take(decided.table, slice(start, stop)))
                     for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]
        keep_parts(self.work, "decisions", key, parts,
                   {"aliases": decided.aliases, **verification_arrays(decided.verification)})

    def kept_decisions(self, kept: dict[str, np.ndarray], key: str, scored: ScoredParts, progress: Progress
                       ) -> DecidedParts:
        """Read back in parts whichever way they were decided: the end gathers what it needs of them."""
        assert self.work is not None
        self.laps.lap("scoring")
        return DecidedParts(kept_parts(self.work, "decisions", key, kept, DECIDED), kept["aliases"],
                            kept_verification(kept))

    def conclusion(self, scored: ScoredParts, decided: DecidedParts, common: dict[str, Any], progress: Progress
                   ) -> FindResult:
        """On the gathered edges when they are few, else per connected component on the workers."""
        plan, numbered, floor = self.plan, self.numbered, self.plan.triple_floor
        if decided.table is not None:
            needed = [end_gathered.needed(decided.table, floor)]
            needed_count = row_count(needed[0])
        else:
            needed = list(settled(*[dask.delayed(end_gathered.needed)(part, floor) for part in decided.parts]))
            needed_count = counted(needed)
        self.laps.lap("decisions")
        # Whether the scored pairs were few enough to be decided in the driver (as they were, or would have been
        # had the decisions not been read back from a work folder).
        self.laps.profile["decisions_in_driver"] = float(self._in_driver(scored))
        _profile(self.laps.profile, numbered, plan, scored.stats, scored.count, needed_count)
        # Past ``gather_limit`` pairs (about 100 bytes each with their documents), the end runs per connected
        # component on the workers and the output streams from them in chunks no larger.
        if needed_count > plan.options.gather_limit:
            result = end_on_workers.conclude_on_cluster(needed, needed_count, numbered, scored.values,
                                                        decided.aliases, plan, common)
        else:
            result = concluded_gathered(joined(dask.compute(*needed)), numbered, scored.values, decided.aliases,
                                        plan, common, decided.names)
        self.laps.lap("end")
        result.profile = self.laps.profile
        return result

    def _in_driver(self, scored: ScoredParts) -> bool:
        return scored.count <= self.plan.options.gather_limit


def _profile(profile: dict[str, float], numbered: NumberedPieces, plan: FindPlan, stats: CandidateStats,
             candidates: int, needed_count: int) -> int:
    """Add to ``profile`` the rows and payload bytes the stages moved; the buckets cut."""
    word_bytes = 8 * value_words(int(plan.bits), numbered.params.num_perm)
    profile.update(documents=numbered.documents, partitions=numbered.ranges, rounds=stats.rounds,
                   shares=stats.shares, band_keys=stats.band_keys, fingerprint_bytes=stats.fingerprint_bytes,
                   fingerprint_bytes_across=stats.fingerprint_bytes_across, crossing_rows=stats.crossing_rows,
                   crossing_bytes=stats.crossing_rows * stats.crossing_row_bytes, pair_codes=stats.shuffled_codes,
                   pair_code_bytes=8 * stats.shuffled_codes, candidates=int(candidates),
                   join_bytes=int(candidates) * (16 + 32 + word_bytes), in_order=float(numbered.in_order),
                   needed_pairs=int(needed_count))
    return int(stats.oversized_buckets)


def concluded_gathered(needed: Table, numbered: NumberedPieces, values: list[Any], alias_documents: np.ndarray,
                       plan: FindPlan, common: dict[str, Any], names: Table | None = None) -> FindResult:
    """The end of find on the ``needed`` pairs gathered into this process (``names``: their documents' names,
    when read already), by the local engine's :func:`dedup_cli.engine.stages.conclude.conclude`."""
    bits = int(plan.bits)
    got = end_gathered.gather(needed, numbered, values, bits, names)
    start = numbered.reference_start
    in_reference = None if start is None else got.docs >= start
    new = new_documents(store_runs(got.store), plan.options.new_since, in_reference)
    local_aliases = np.searchsorted(got.docs, alias_documents[np.isin(alias_documents, got.docs)])
    done = conclude(got.store, got.values, end_gathered.ratios(got.store), got.scored, got.exact, got.decided,
                    local_aliases, new, plan, in_reference)
    # The gathered store holds b-bit values, not signatures: what filter needs of each member is found here.
    return concluded_result(got.store, done, in_reference, common, member_details=member_details(
        got.store, got.values, done.pairs, done.exact, done.groups, done.kept, bits))
