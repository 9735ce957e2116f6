"""The end of ``find``, once the candidates are scored and decided: triples, groups, weakest links and
representatives (:func:`conclude`), on any subset of the documents numbered in id order.

Every stage here depends only on the order of the documents, never on their number, so an engine may call
:func:`conclude` on all of a store (the local engine) or on the documents of whole components (the Dask engine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.candidates.candidate_triples import EstimatedPairs, candidate_triples
from dedup_cli.candidates.triangles import WEDGE_BATCH
from dedup_cli.candidates.triple_recall import TRIPLE_MARGIN_Z
from dedup_cli.engine.stages.decisions import decide, wanted
from dedup_cli.engine.stages.group_members import gone_fields, gone_members, keep_field_values
from dedup_cli.engine.stages.plan import FindPlan
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.densified import Densification
from dedup_cli.estimates.guards import THREE_WAY_BITS_MESSAGE
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.simultaneous import DECISION_LEVEL, simultaneous_level
from dedup_cli.estimates.triple_scores import ScoredTriples, score_triples
from dedup_cli.groups.components import Groups, group_components
from dedup_cli.groups.representatives import keep_ranks, representatives, weakest_estimates
from dedup_cli.groups.strict import strict_groups
from dedup_cli.groups.witnesses import witness_groups
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import ExactSets, Verification, pairs_to_verify, verify_triples


def find_triples(
    values: np.ndarray,
    pairs: EstimatedPairs,
    r: np.ndarray,
    threshold: float,
    bits: int,
    z: float = TRIPLE_MARGIN_Z,
    level: float = 0.95,
    max_wedges: int = WEDGE_BATCH,
    floor: float | None = None,
    densification: Densification | None = None,
) -> ScoredTriples:
    """Triples with 3-way estimate R̂ ≥ R0, sorted by descending estimate, then by documents.

    The whole 3-way step after the candidate pairs: keep candidate pairs with R̂_ij ≥ R0 − margin, take the
    triangles (:func:`dedup_cli.candidates.candidate_triples.candidate_triples`), score them
    (:func:`dedup_cli.estimates.triple_scores.score_triples`), keep R̂ ≥ R0. For ≥ 0.99 of triples with R ≥ R0 to
    become candidates, the banding must have been chosen with the per-pair recall of
    :func:`dedup_cli.candidates.triple_recall.pair_recall_for_triples`.

    Cost: about 1.5 µs per candidate triple (counting, estimates; intervals only for the kept ones), e.g.
    5 s for 3.3·10^6 candidates from 50 000 documents at R0 = 0.5, b = 2. A cluster of d mutual
    near-duplicates yields C(d, 3) candidates (1.7·10^8 for d = 1000).

    Args:
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value.
        pairs: every candidate pair, scored on ``values`` (``dedup_cli.estimates.pairs.score_pairs``).
        r: float64[n_docs], r = f/D.
        threshold: R0 in (0, 1].
        bits: b ≥ 2.
        z: the pair margin in standard errors.
        level: confidence level of the intervals.
        max_wedges: wedges per batch of :func:`dedup_cli.candidates.triangles.triangles`.
        floor: R0 − margin (``FindPlan.pair_floor``), or None to compute it from ``z``.
        densification: the bins of one permutation hashing the values come from (``FindPlan.densification``).

    Raises:
        ValueError: bits < 2, or a threshold outside (0, 1].
    """
    if bits < 2:
        raise ValueError(THREE_WAY_BITS_MESSAGE)
    num_docs, num_perm = values.shape
    candidates = candidate_triples(pairs, num_docs, threshold, bits, num_perm, z=z, max_wedges=max_wedges,
                                   floor=floor)
    return triples_at_threshold(values, candidates, r, threshold, bits, level, densification=densification)


def triples_at_threshold(values: np.ndarray, candidates: np.ndarray, r: np.ndarray, threshold: float, bits: int,
                         level: float = 0.95, straddling: bool = False,
                         densification: Densification | None = None) -> ScoredTriples:
    """The candidate triples (int64[t, 3]) scored, those with R̂ ≥ R0 (with ``straddling``, and those below whose
    interval reaches R0: the ones an exact check may accept) sorted by descending estimate, then by documents (the
    second half of :func:`find_triples`)."""
    accepted = score_triples(values, candidates, r, bits, level, threshold=threshold, straddling=straddling,
                             densification=densification)
    order = np.lexsort((accepted.docs[:, 2], accepted.docs[:, 1], accepted.docs[:, 0], -accepted.estimate))
    return accepted.select(order)


def count_candidate_triples(values: np.ndarray, pairs: EstimatedPairs, plan: FindPlan) -> int:
    """How many candidate triples ``find`` with ``plan`` scores among these pairs and documents: the count the
    simultaneous bound of the triples divides by (a distributed engine sums it over its parts first)."""
    num_docs, num_perm = values.shape
    return int(candidate_triples(pairs, num_docs, plan.threshold, int(plan.bits), num_perm,
                                 floor=plan.triple_floor).shape[0])


@dataclass(frozen=True)
class TripleChecks:
    """How ``find`` checks triples: the documents (to re-read), their b-bit values and r (to bound the triples
    again), R0, ``--verify``, the number of candidate triples the run scored, and the sets the pairs' checks read
    (so that a document is read once a run), if any."""

    store: StoredSignatures
    values: np.ndarray  # uint[n_docs, k]
    r: np.ndarray  # float64[n_docs]
    bits: int
    threshold: float
    mode: str
    candidates: int
    sets: ExactSets | None = None
    densification: Densification | None = None  # the bins of one permutation hashing, or None

    def unsure(self, triples: ScoredTriples) -> np.ndarray:
        """bool[t]: the triples estimated ≥ R0 whose own lower end clears R0 but whose lower end at the level for
        all the candidate triples at once (:func:`dedup_cli.estimates.simultaneous.simultaneous_level`) does not."""
        unsure = np.zeros(len(triples), dtype=bool)
        sure = np.flatnonzero((triples.estimate >= self.threshold) & (triples.ci_low >= self.threshold))
        if sure.size:
            level = simultaneous_level(DECISION_LEVEL, self.candidates)
            wide = score_triples(self.values, triples.docs[sure], self.r, self.bits, level,
                                 densification=self.densification)
            unsure[sure] = wide.ci_low < self.threshold
        return unsure


def checked_triples(checks: TripleChecks, triples: ScoredTriples) -> ScoredTriples:
    """``triples`` with the exact 3-way resemblance of those ``checks.mode`` selects, as for pairs
    (:func:`dedup_cli.verification.pairs_to_verify`: ``borderline`` those whose interval straddles R0 or that the
    bound for all the candidate triples at once does not clear, ``all`` those and every triple estimated ≥ R0),
    re-read (:func:`dedup_cli.verification.verify_triples`); NaN elsewhere, and where a document cannot be
    re-read."""
    threshold, mode, store = checks.threshold, checks.mode, checks.store
    if mode == "none" or len(triples) == 0:
        return triples
    check = pairs_to_verify(mode, threshold, triples.estimate, triples.ci_low, triples.ci_high,
                            checks.unsure(triples))
    if not check.any():
        return triples
    exact = triples.exact.copy()
    exact[check] = verify_triples(store, triples.docs[check], checks.sets).exact
    return dataclasses.replace(triples, exact=exact)


def decided_triples(checks: TripleChecks, triples: ScoredTriples) -> ScoredTriples:
    """The triples accepted once checked (:func:`checked_triples`): by the exact 3-way resemblance where it is
    known, else by the estimate (:func:`dedup_cli.engine.stages.decisions.decide`), in the same order."""
    triples = checked_triples(checks, triples)
    return triples.select(decide(triples.estimate, triples.exact, checks.threshold))


def group(num_docs: int, first: np.ndarray, second: np.ndarray, similarity: np.ndarray, method: str,
          triple_ok: Callable[[np.ndarray], np.ndarray] | None = None) -> Groups:
    """Groups of the accepted pairs: connected components, or strict groups (every pair, and with
    ``triple_ok`` every triple, accepted). The witness rule starts from the components (:func:`conclude` splits
    them once it knows which documents are live)."""
    if method == "strict":
        return strict_groups(num_docs, first, second, similarity, triple_ok)
    return group_components(num_docs, first, second)


def store_runs(store: StoredSignatures) -> np.ndarray:
    """int64[n_docs]: the sign run that wrote each document (0 for a format 1 store)."""
    return store.runs if store.runs is not None else np.zeros(len(store), dtype=np.int64)


def _wanted(docs: np.ndarray, new: np.ndarray, reference: np.ndarray | None, only_across: bool) -> np.ndarray:
    """bool[m]: the pairs or triples (int64[m, 2 or 3]) to report (:func:`dedup_cli.engine.stages.decisions.
    wanted` of their members' flags)."""
    keep = wanted(new[docs], None if reference is None else reference[docs], only_across)
    return np.ones(docs.shape[0], bool) if keep is None else keep


@dataclass
class Concluded:
    """What ``find`` reports once the candidates are scored and decided: accepted pairs (with their exact
    resemblance where checked), triples, groups, each group's weakest link and kept member."""

    pairs: ScoredPairs
    exact: np.ndarray  # float64[n_accepted], NaN where not checked
    triples: ScoredTriples | None
    groups: Groups
    weakest: np.ndarray  # float64[n_groups]
    kept: np.ndarray  # int64[n_groups]
    keep_field_problems: list[tuple[str, str]]  # (id, reason): grouped documents without a value to keep by
    gone: np.ndarray  # int64[g]: grouped documents gone or changed since they were signed, ascending


def conclude(store: StoredSignatures, values: np.ndarray, r: np.ndarray, scored: ScoredPairs,
             exact_all: np.ndarray, decided: np.ndarray, aliases: np.ndarray, new: np.ndarray | None,
             plan: FindPlan, reference: np.ndarray | None = None, triple_candidates: int | None = None,
             sets: ExactSets | None = None) -> Concluded:
    """The stages after the decisions: accepted pairs, triples (``ways=3``), ``new_since`` and ``against``,
    groups, weakest links and representatives.

    Grouped documents that are gone since they were signed (:func:`gone_members`) stay in their pairs and groups
    (what the store says of them), but a group keeps a live member before any gone one, whatever the keep policy:
    a live document is never dropped in favour of one that cannot be read.

    Every array is indexed by document number in (store, id) order; the documents may be all of a store (the
    local engine) or only those a distributed engine gathered (any subset holding every document of ``scored``,
    numbered in the same order), which gives the same answer because each stage depends only on the order of
    the documents, never on their number.

    Args:
        store: the documents (ids, locations, counts, runs, times; signatures are not read here).
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value; r: float64[n_docs], r = f/D.
        scored: every scored candidate pair that was not dropped for ``new_since`` (only those with
            R̂ ≥ R0 − margin matter for triples, only the ``decided`` ones for pairs and groups).
        exact_all: float64[m], exact resemblance of the checked candidates (NaN elsewhere).
        decided: bool[m], the accepted candidates (aliases already left out).
        aliases: int64[a], documents that are another document's file under a second name.
        new: bool[n_docs], the documents reports must touch
            (:func:`dedup_cli.engine.stages.decisions.new_documents`), or None.
        plan: the find's plan: its options, b and, for triples, R0 − margin.
        reference: bool[n_docs] with ``against``: the reference store's documents.
        triple_candidates: the candidate triples of the whole run, for the triples' simultaneous bound, when these
            documents are a part of it (a distributed engine's components); None: the ones found here.
        sets: the exact sets the pairs' checks read (numbered as ``store``), for the triples' checks, or None.
    """
    options, bits, threshold = plan.options, plan.bits, plan.threshold
    accepted = scored.select(decided)
    exact = exact_all[decided]
    found_triples = None
    checks = None
    if options.ways == 3:
        candidates = candidate_triples(scored, values.shape[0], threshold, int(bits), values.shape[1],
                                       floor=plan.triple_floor)
        checks = TripleChecks(store, values, r, int(bits), threshold, options.verify,
                              candidates.shape[0] if triple_candidates is None else triple_candidates, sets,
                              plan.densification)
        found_triples = triples_at_threshold(values, candidates, r, threshold, int(bits),
                                             straddling=options.verify != "none", densification=plan.densification)
        if aliases.size:
            found_triples = found_triples.select(np.asarray(~np.isin(found_triples.docs, aliases).any(axis=1)))
        if new is not None:
            # Triangles need the old-old pairs too, so triples are filtered only now.
            found_triples = found_triples.select(_wanted(found_triples.docs, new, reference, options.only_across))
            accepted_new = _wanted(np.c_[accepted.first, accepted.second], new, reference, options.only_across)
            exact = exact[accepted_new]
            accepted = accepted.select(accepted_new)
        found_triples = decided_triples(checks, found_triples)

    # What is known of each accepted pair: its exact resemblance where it was checked, else its estimate.
    similarity = np.where(np.isnan(exact), accepted.estimate, exact)
    triple_ok = None
    if options.grouping == "strict" and checks is not None:
        strict_checks = checks

        def triple_ok(docs: np.ndarray) -> np.ndarray:
            triples = checked_triples(strict_checks, score_triples(values, docs, r, int(bits),
                                                                   densification=plan.densification))
            return decide(triples.estimate, triples.exact, threshold)
    groups = group(len(store), accepted.first, accepted.second, similarity, options.grouping, triple_ok)
    scores, problems = None, list[tuple[str, str]]()
    if options.keep_field is not None:
        scores, problems = keep_field_values(store, groups.members, options.keep_field)
    gone = gone_members(store, groups.members, plan.id_schemes, reference)
    live = None
    if gone.size:
        live = np.ones(len(store), bool)
        live[gone] = False
    if options.grouping == "witness":  # the components, split into each kept document and those it witnesses
        ranks = keep_ranks(groups.members, len(store), options.keep_policy, store.shingle_counts, store_runs(store),
                           store.mtimes_ns, scores, reference, live)
        groups = witness_groups(len(store), accepted.first, accepted.second, ranks)
    kept = representatives(groups, options.keep_policy, store.shingle_counts, store_runs(store), store.mtimes_ns,
                           scores, reference, live)
    return Concluded(pairs=accepted, exact=exact, triples=found_triples, groups=groups,
                     weakest=weakest_estimates(groups, accepted.first, accepted.second, similarity), kept=kept,
                     keep_field_problems=problems, gone=gone)


def concluded_result(store: StoredSignatures, done: Concluded, reference: np.ndarray | None,
                     common: dict[str, Any], **more: Any) -> FindResult:
    """The :class:`FindResult` of what :func:`conclude` found on the documents of ``store`` (``reference``: which of
    them are the reference store's), with the fields that do not depend on how the stages ran (``common``,
    :meth:`dedup_cli.engine.stages.plan.FindPlan.result_fields`) and ``more`` (a chunk's place in a streamed
    output, what filter needs of each member): the one place a result is built, for every engine."""
    return FindResult(store=store, accepted=done.pairs, exact=done.exact, accepted_triples=done.triples,
                      grouping=done.groups, weakest=done.weakest, kept=done.kept,
                      keep_field_problems=done.keep_field_problems, reference=reference,
                      **{**gone_fields(store, done.gone), **common, **more})


def nothing_found(plan: FindPlan) -> FindResult:
    """What ``find`` with ``plan`` finds among no documents (stores without a live one): :func:`conclude` of no
    pairs, and no exact check, as the stages give it."""
    params = plan.params
    store = StoredSignatures(params=params, ids=[], paths=[], shingle_counts=np.empty(0, np.int64),
                             packed=np.empty((0, params.signature_bytes), np.uint8))
    none = np.empty(0)
    scored = ScoredPairs(*[np.empty(0, np.int64)] * 3, *[none] * 6)
    reference = None if plan.reference_start is None else np.zeros(0, bool)
    done = conclude(store, store.values(plan.bits), none, scored, none, np.zeros(0, bool), np.empty(0, np.int64),
                    None, plan, reference)
    verification = None if plan.options.verify == "none" else Verification(none, 0, [])
    return concluded_result(store, done, reference, plan.result_fields(0, 0, verification, 0))
