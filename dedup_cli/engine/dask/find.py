"""``find`` on a Dask cluster: the local engine's array stages as tasks, meeting through exchanges.

read (pieces of the store, numbered by rank of id) → band keys per piece, candidates by sharing the buckets a
few bands at a time, de-duplicated by an exchange on the pair → scores by two range joins → exact checks of the
borderline pairs on the workers → decisions, aliases → the end of find (triples, groups, representatives) on the
gathered edges when they are few (:mod:`.end_gathered`), else per connected component on the workers
(:mod:`.end_on_workers`). When the scored pairs themselves are few (``--gather-limit``), they are gathered before
the decisions, which then run in the driver on them with their checks as tasks on the workers
(:func:`dedup_cli.engine.dask.pair_decisions.decide_gathered`).

Every task holds tables of numpy arrays (:mod:`.exchange`) and calls the local engine's functions on its part of
the data; documents are numbered as the local engine numbers them, and every decision made before the first stage
comes from the plan the local engine follows too (:mod:`dedup_cli.engine.stages.plan`), so the result is the same
(docs/scaling.md, "The Dask engine"). The steps (:func:`scored_candidates`, :func:`decided_candidates`,
:func:`concluded`) are the local engine's, in the same order.
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
from dedup_cli.engine.dask.exchange import Table, joined
from dedup_cli.engine.dask.id_sort import store_documents
from dedup_cli.engine.dask.joins import score_candidates
from dedup_cli.engine.dask.kept_parts import keep_parts, kept_parts
from dedup_cli.engine.dask.ranges import NumberedPieces, value_ranges, with_reference
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.resume import Resume, kept_verification, verification_arrays
from dedup_cli.engine.stages.conclude import conclude, concluded_result, nothing_found, store_runs
from dedup_cli.engine.stages.decisions import new_documents
from dedup_cli.engine.stages.filter import member_details
from dedup_cli.engine.stages.find import decision_bound
from dedup_cli.engine.stages.plan import FindPlan, plan_find
from dedup_cli.engine.stages.results import FindResult
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
    b-bit values they were scored with (a part a range of documents), and what finding the candidates cost."""

    scored: list[Any]
    values: list[Any]
    stats: CandidateStats


@dataclass
class DecidedParts:
    """The decisions stage: the scored pairs with ``exact`` and ``decided`` columns, the aliases left out, and
    the exact checks done (None with ``--verify none``)."""

    decided: list[Any]
    aliases: np.ndarray
    verification: Verification | None


def _count(table: Table) -> int:
    return int(table["first"].size)


def counted(parts: list[Any]) -> int:
    """Rows of delayed tables of pairs, counted where they are."""
    return int(sum(dask.compute(*[dask.delayed(_count)(part) for part in parts])))


def find(store: Store, options: FindOptions, progress: Progress = silent, reference: Store | None = None
         ) -> FindResult:
    """Find near-duplicates in ``store`` (and with ``options.against``, against the ``reference`` store) on the
    current Dask client's cluster (options already checked).

    The result's ``profile`` holds each stage's seconds and the rows and payload bytes its exchanges moved.
    """
    laps = Laps()
    progress.stage("reading the store's pieces", None)
    numbered = read_numbered(store, reference)
    plan = plan_numbered(numbered, options, (store,) if reference is None else (store, reference))
    if numbered.documents == 0:
        return nothing_found(plan)
    laps.lap("read")
    work = None if options.work_dir is None else WorkDir(options.work_dir, [store] if reference is None
                                                         else [store, reference])
    scores = scored_candidates(numbered, plan, work, progress, laps)
    laps.lap("scoring")
    progress.stage("exact checks and decisions", None)
    candidates = counted(scores.scored)
    if candidates <= options.gather_limit:
        # Few enough pairs for the driver: the decisions and the end of find run here on them, with the exact
        # checks and file checks as tasks on the workers, and no exchange.
        gathered = gathered_decisions(scores.scored, numbered, plan, candidates, work, progress)
        needed_pairs = end_gathered.needed(gathered.decided, plan.triple_floor)
        laps.lap("decisions")
        laps.profile["decisions_in_driver"] = 1.0
        cut = _profile(laps.profile, numbered, plan, scores.stats, candidates, int(needed_pairs["first"].size))
        common = plan.result_fields(candidates, cut, gathered.verification, gathered.aliases.size)
        progress.stage("groups", None)
        result = concluded_gathered(needed_pairs, numbered, scores.values, gathered.aliases, plan, common,
                                    gathered.names)
    else:
        decided = decided_candidates(scores.scored, numbered, plan, candidates, work, progress)
        needed = list(settled(*[dask.delayed(end_gathered.needed)(part, plan.triple_floor)
                                for part in decided.decided]))
        needed_count = counted(needed)
        laps.lap("decisions")
        laps.profile["decisions_in_driver"] = 0.0
        cut = _profile(laps.profile, numbered, plan, scores.stats, candidates, needed_count)
        common = plan.result_fields(candidates, cut, decided.verification, decided.aliases.size)
        progress.stage("groups", None)
        result = concluded(needed, needed_count, numbered, scores.values, decided.aliases, plan, common)
    laps.lap("end")
    if work is not None:
        work.finish(options.keep_work)
    result.profile = laps.profile
    return result


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
                     numbered.max_shingle_count, numbered.run_span, tuple(store.id_scheme for store in stores))


def scored_candidates(numbered: NumberedPieces, plan: FindPlan, work: WorkDir | None, progress: Progress, laps: Laps
                      ) -> ScoredParts:
    """The scored stage, kept by an earlier run in ``work`` or computed (and kept there): the candidate pairs in
    rounds of bands, then scored by two range joins."""
    def read(kept: dict[str, np.ndarray], key: str) -> ScoredParts:
        assert work is not None
        laps.profile["candidates_seconds"] = 0.0
        values = list(settled(*value_ranges(numbered, int(plan.bits))))
        return ScoredParts(kept_parts(work, "scored", key, kept), values,
                      CandidateStats.of_array(kept["stats"]))

    def keep(scores: ScoredParts, key: str) -> None:
        assert work is not None
        keep_parts(work, "scored", key, scores.scored, {"stats": scores.stats.as_array()})

    # The kept parts are ranges of the second document: they depend on the divisions too.
    return Resume(work, progress.note).stage("scored", plan.key(work, "scored", divisions=numbered.divisions),
                                             lambda: _scored(numbered, plan, work, progress, laps), keep, read)


def _scored(numbered: NumberedPieces, plan: FindPlan, work: WorkDir | None, progress: Progress, laps: Laps
            ) -> ScoredParts:
    """The candidate pairs in rounds of bands, then scored by two range joins."""
    options, params = plan.options, numbered.params
    bits = int(plan.bits)  # whole: FindOptions keeps b = 1/2 to the local engine
    assert plan.banding is not None  # FindOptions keeps --candidates all to the local engine
    found = candidate_pairs(numbered, plan.banding.bands, plan.banding.rows, options.max_bucket,
                            options.band_memory, progress, work, reduce_bits=bits)
    stats = found.stats()
    laps.lap("candidates")
    progress.stage("scoring the candidate pairs", None)
    # The b-bit values: read with the first round's keys, else (every round kept by an earlier run) read now.
    values = found.reduced if found.reduced is not None else list(settled(*value_ranges(numbered, bits)))
    pairs_only = options.ways == 2  # triangles need every pair: triples are left out only at the end
    start = numbered.reference_start
    scored = list(settled(*score_candidates(found.codes, values, numbered.divisions, numbered.documents, bits, params,
                                            options.new_since if pairs_only else None,
                                            start if pairs_only else None, options.only_across)))
    return ScoredParts(scored, values, stats)


def decided_candidates(scored: list[Any], numbered: NumberedPieces, plan: FindPlan, candidates: int,
                       work: WorkDir | None, progress: Progress) -> DecidedParts:
    """The decisions stage, kept by an earlier run in ``work`` or computed (and kept there): exact checks of the
    borderline pairs on the workers (``candidates``: how many were scored, for the simultaneous bound), the
    decisions, and the aliases left out."""
    def run() -> DecidedParts:
        decided, checked = pair_decisions.check_and_decide(scored, numbered, plan.options.verify, plan.threshold,
                                                           decision_bound(plan, candidates))
        alias_documents = pair_decisions.aliases(decided, numbered)
        decided = list(settled(*[dask.delayed(pair_decisions.accept)(part, alias_documents) for part in decided]))
        return DecidedParts(decided, alias_documents, checked)

    def keep(decisions: DecidedParts, key: str) -> None:
        _keep_decisions(work, key, decisions.decided, decisions.aliases, decisions.verification)

    def read(kept: dict[str, np.ndarray], key: str) -> DecidedParts:
        return DecidedParts(*_kept_decisions(work, key, kept))

    key = plan.key(work, "decisions", divisions=numbered.divisions)
    return Resume(work, progress.note).stage("decisions", key, run, keep, read)


def gathered_decisions(scored: list[Any], numbered: NumberedPieces, plan: FindPlan, candidates: int,
                       work: WorkDir | None, progress: Progress) -> pair_decisions.GatheredDecisions:
    """The decisions stage on the scored pairs gathered into the driver (:func:`dedup_cli.engine.dask.
    pair_decisions.decide_gathered`: those that may matter, :func:`dedup_cli.engine.dask.pair_decisions.
    may_matter`), kept by an earlier run in ``work`` or computed and kept there, in parts as the scored pairs are,
    so that a run that decides on the workers resumes from it too, and the reverse."""
    sizes: list[int] = []

    def run() -> pair_decisions.GatheredDecisions:
        bound = decision_bound(plan, candidates)
        mode = plan.options.verify
        # Only the pairs that may be accepted, checked or needed for triples come to the driver.
        parts = dask.compute(*[dask.delayed(pair_decisions.may_matter)(part, mode, plan.threshold, bound,
                                                                       plan.triple_floor) for part in scored])
        sizes.extend(int(part["first"].size) for part in parts)
        return pair_decisions.decide_gathered(joined(parts), numbered, mode, plan.threshold, bound)

    def keep(gathered: pair_decisions.GatheredDecisions, key: str) -> None:
        bounds = np.r_[0, np.cumsum(sizes)]
        pieces = [{name: column[start:stop] for name, column in gathered.decided.items()}
                  for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]
        _keep_decisions(work, key, [dask.delayed(piece) for piece in pieces], gathered.aliases,
                        gathered.verification)

    def read(kept: dict[str, np.ndarray], key: str) -> pair_decisions.GatheredDecisions:
        decided, alias_documents, checked = _kept_decisions(work, key, kept)
        return pair_decisions.GatheredDecisions(joined(dask.compute(*decided)), None, alias_documents, checked)

    key = plan.key(work, "decisions", divisions=numbered.divisions)
    return Resume(work, progress.note).stage("decisions", key, run, keep, read)


def _kept_decisions(work: WorkDir | None, key: str, kept: dict[str, np.ndarray]
                    ) -> tuple[list[Any], np.ndarray, Verification | None]:
    """The decisions stage an earlier run kept in ``work`` under ``key``: the decided pairs' parts, the aliases,
    the exact checks."""
    assert work is not None
    return kept_parts(work, "decisions", key, kept), kept["aliases"], kept_verification(kept)


def _keep_decisions(work: WorkDir | None, key: str, parts: list[Any], alias_documents: np.ndarray,
                    verification: Verification | None) -> None:
    """Keep the decisions stage in ``work``: the decided pairs' parts (delayed tables), the aliases and the exact
    checks."""
    assert work is not None
    keep_parts(work, "decisions", key, parts, {"aliases": alias_documents,
                                               **verification_arrays(verification)})


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


def concluded(needed: list[Any], needed_count: int, numbered: NumberedPieces, values: list[Any],
              alias_documents: np.ndarray, plan: FindPlan, common: dict[str, Any]) -> FindResult:
    """The end of find on the ``needed`` pairs: gathered into this process when they are few, else per connected
    component on the workers."""
    # Past ``gather_limit`` pairs (about 100 bytes each with their documents), the end runs per connected
    # component on the workers and the output streams from them in chunks no larger.
    if needed_count > plan.options.gather_limit:
        return end_on_workers.conclude_on_cluster(needed, needed_count, numbered, values, alias_documents, plan,
                                                  common)
    return concluded_gathered(joined(dask.compute(*needed)), numbered, values, alias_documents, plan, common)


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
