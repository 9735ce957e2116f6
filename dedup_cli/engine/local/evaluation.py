"""``eval`` on find's stages: candidates, a stratified sample of pairs, their exact checks, and what they show.

The run (docs/evaluation.md): band the store as ``find`` would (:func:`find_stages.lsh_candidates`), score the
candidates on all stored bits to stratify them, draw the sample (:mod:`dedup_cli.evaluation.design`), re-read its
documents (:mod:`dedup_cli.verification`), then measure on the pairs that could be re-read: the errors of R̂_b for
each evaluated b, the S-curve, and precision and recall of ``find`` with and without ``--verify borderline`` at R0
and over a sweep of thresholds (or, with a truth file, of the pairs ``find`` actually reports).

Everything after the draw works on at most ``sample`` pairs in this process. What grows with the store goes through
:class:`LocalPairs`, the part an engine replaces: the eligible documents and their r = f/D, the candidate pairs of
a banding, scores of given pairs, the stored values of given documents, the exact resemblance of given pairs
(re-read where the documents are), and the pairs ``find`` accepts at a threshold (for a truth file).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dedup_cli.array_primitives import among, code_pairs, pair_codes, sorted_unique
from dedup_cli.candidates.banding import Banding, PairSizes
from dedup_cli.candidates.recall_costs import compared_recalls
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.stages import find as stages
from dedup_cli.engine.stages.decisions import decide, to_check
from dedup_cli.engine.stages.plan import estimated_positions, find_banding
from dedup_cli.engine.stages.results import EvalResult, EvalSample
from dedup_cli.errors import DedupError
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.estimates.pairs import ScoredPairs, densification_of
from dedup_cli.estimates.simultaneous import DEFAULT_RECALL, SimultaneousBound
from dedup_cli.evaluation.accuracy import (
    STORAGE_BITS,
    estimator_accuracy,
    pair_variance,
    prefix_matches,
    storage_tradeoff,
)
from dedup_cli.evaluation.design import Draw, draw_pairs, frame_banding, reach
from dedup_cli.evaluation.recall_curves import RecallCurve, recall_curve
from dedup_cli.evaluation.retrieval import (
    Retrieval,
    counted_retrieval,
    s_curve,
    sampled_retrieval,
    share_a_band,
)
from dedup_cli.evaluation.survey import StratifiedSample
from dedup_cli.inputs.truth import Truth, read_truth
from dedup_cli.minhash.packing import estimator_values, xor_bits
from dedup_cli.options.evaluating import EvalOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.store.store import Store

EVALUATED_BITS = (1, 2, 4)  # besides the stored bits and find's b
SWEEP_THRESHOLDS = tuple(round(0.1 + 0.05 * step, 2) for step in range(18))  # 0.1, 0.15, …, 0.95
RESEMBLANCE_BINS = 10  # bins of R̂ (strata) and of the exact R (what is reported)
VERIFY_MODES = ("none", "borderline")
LEVEL = 0.95  # find's intervals, and the level of eval's own


class LocalPairs:
    """What ``eval`` asks of a store, answered in this process with find's stages (the engine's part).

    Args:
        store: the live rows.
        max_bucket: LSH buckets with more documents are cut to this many, as in ``find``.
        jobs: worker processes of the candidate stage, scoring and exact checks (``find``'s parallel stages).
    """

    def __init__(self, store: StoredSignatures, max_bucket: int, jobs: int = 1) -> None:
        self.jobs = jobs
        self.store = store
        self.params = store.params
        self.stored_values = store.values()
        self.eligible = store.shingle_counts > 0
        self.shortest = int(store.shingle_counts[self.eligible].min()) if self.eligible.any() else 0
        self.densification = densification_of(store.params)  # one permutation hashing: eqs. D4–D6
        self.r = stages.set_size_ratios(store.shingle_counts, store.params.universe)
        self.max_bucket = max_bucket
        self.unverifiable: set[str] = set()
        # Every document re-read once for the whole run: the sample, the truth's outsiders and each verify mode.
        self.sets = stages.exact_sets(store, jobs)
        # The last banding's candidates and scores: eval asks for the same ones for each b and verify mode in turn.
        self._candidates: tuple[Banding, tuple[np.ndarray, np.ndarray, int]] | None = None
        self._scored: tuple[Banding, float, ScoredPairs] | None = None

    def candidates(self, banding: Banding) -> tuple[np.ndarray, np.ndarray, int]:
        """The candidate pairs of ``banding``: (int64 first, int64 second, buckets cut), as ``find`` finds them."""
        if self._candidates is None or self._candidates[0] != banding:
            self._candidates = banding, stages.lsh_candidates(self.stored_values, banding, self.eligible,
                                                              self.max_bucket, self.jobs)
        return self._candidates[1]

    def score(self, first: np.ndarray, second: np.ndarray, bits: float) -> ScoredPairs:
        """Matches, R̂_b and its interval for the pairs (first[p], second[p]); b = 1/2 on the XOR bits."""
        return stages.score_in_chunks(estimator_values(self.stored_values, bits, self.params.xor_pairs), first,
                                      second, self.r, bits, self.jobs, level=LEVEL, densification=self.densification)

    def signatures(self, rows: np.ndarray) -> np.ndarray:
        """The stored B-bit values of documents ``rows``: uint[len(rows), k]."""
        return self.stored_values[rows]

    def exact(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """float64[m]: the exact resemblance of each pair, NaN where a document cannot be re-read or changed."""
        verification = stages.verify_in_chunks(self.store, first, second, self.jobs, self.sets)
        self.unverifiable.update(verification.unverifiable_documents)
        return verification.exact

    def accepted(self, banding: Banding, threshold: float, bits: float, verify: str, recall: float = DEFAULT_RECALL
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The pairs ``find --recall recall`` accepts (before same-file aliases are dropped): candidates, scores,
        exact checks."""
        if self._scored is None or self._scored[:2] != (banding, bits):
            first, second, _ = self.candidates(banding)
            self._scored = banding, bits, self.score(first, second, bits)
        scored = self._scored[2]
        bound = SimultaneousBound(bits, estimated_positions(self.params, bits), scored.first.size, recall=recall,
                                  densification=self.densification)
        exact, verification = stages.verify_borderline(self.store, scored, threshold, verify, self.jobs, bound,
                                                       self.sets)
        if verification is not None:
            self.unverifiable.update(verification.unverifiable_documents)
        decided = decide(scored.estimate, exact, threshold)
        return scored.first[decided], scored.second[decided]


def find_reports(scored: ScoredPairs, exact: np.ndarray, candidate: np.ndarray, threshold: float, verify: str,
                 bound: SimultaneousBound | None = None) -> np.ndarray:
    """bool[n]: whether ``find`` reports each sampled pair, its exact resemblance known.

    The pairs ``--verify`` would re-read are decided by their exact value, the others by the estimate, with find's
    own rule (:func:`dedup_cli.verification.pairs_to_verify`, :func:`dedup_cli.engine.stages.decisions.decide`,
    and ``bound``, the simultaneous bound of find's candidate count, where it is known): the exact checks are
    simulated on the sample instead of run over every candidate, which gives the same decisions.
    """
    checked = to_check(scored, verify, threshold, bound)
    return candidate & decide(scored.estimate, np.where(checked, exact, np.nan), threshold)


def truth_retrieval(pairs: LocalPairs, truth: Truth, banding: Banding, threshold: float, bits: float, verify: str,
                    recall: float = DEFAULT_RECALL) -> Retrieval:
    """Precision and recall of the pairs ``find`` reports, counted against a truth file.

    A reported pair the file does not list is re-read and judged by its exact resemblance (so an omission of the
    file is not counted against ``find``), and counted among the true pairs when it reaches the threshold.
    """
    num_docs = len(pairs.store)
    listed_codes = pair_codes(truth.first, truth.second, num_docs)
    order = np.argsort(listed_codes)
    listed_codes, listed_values = listed_codes[order], truth.resemblance[order]
    first, second = pairs.accepted(banding, threshold, bits, verify, recall)
    codes = pair_codes(first, second, num_docs)
    listed, where = among(codes, listed_codes)
    value = np.where(listed, listed_values[where] if listed_codes.size else 0.0, np.nan)
    outside = ~listed
    value[outside] = pairs.exact(first[outside], second[outside])
    found = np.nan_to_num(value, nan=0.0) >= threshold  # a pair that cannot be re-read is not confirmed
    true = int(np.count_nonzero(listed_values >= threshold)) + int(np.count_nonzero(found & outside))
    return counted_retrieval(codes.size, true, int(np.count_nonzero(found)), int(np.count_nonzero(outside)),
                             threshold, bits, verify)


def _prefix_matches(left: np.ndarray, right: np.ndarray, bits: float, prefixes: list[int], xor_stored: bool
                    ) -> np.ndarray:
    """int64[n, len(prefixes)]: the agreeing b-bit values of each pair among its first k' positions (permutations).

    b = 1/2 compares the XOR bits of the first k' positions, k'/2 of them: j paired with j + k'/2 there, or, in a
    store of XOR bits (j paired with j + k/2 already), its first k'/2 XOR bits.
    """
    if not is_half_bit(bits):
        return prefix_matches(estimator_values(left, bits), estimator_values(right, bits), np.array(prefixes))
    if xor_stored:
        return prefix_matches(left, right, np.array([prefix // 2 for prefix in prefixes]))
    return np.stack([prefix_matches(xor_bits(left[:, :prefix]), xor_bits(right[:, :prefix]),
                                    np.array([prefix // 2]))[:, 0] for prefix in prefixes], axis=1)


def _banding_for(options: EvalOptions, threshold: float, params: SignatureParams, documents: int,
                 shortest: int = 0) -> Banding:
    """The banding ``find`` would use at ``threshold`` on this store (chosen for its ``documents`` too, and with one
    permutation hashing for its ``shortest`` documents): the one its plan chooses
    (:func:`dedup_cli.engine.stages.plan.find_banding`)."""
    return find_banding(options.find, threshold, params, documents, shortest).banding


@dataclass
class Banded:
    """find's candidates, the banded pairs (its and the looser banding's) and the sample drawn from them."""

    banding: Banding
    frame: Banding | None  # the looser banding, when there is one
    candidates: int
    oversized: int
    banded: int  # distinct pairs of both bandings
    draw: Draw


@dataclass
class Measured:
    """The sampled pairs whose exact resemblance was measured, and what the estimators say of them."""

    design: StratifiedSample
    left: np.ndarray  # int64[n]
    right: np.ndarray  # int64[n]
    exact: np.ndarray  # float64[n]
    candidate: np.ndarray  # bool[n]: find's candidates
    scores: dict[float, ScoredPairs]  # per evaluated b


def evaluate(pairs: LocalPairs, options: EvalOptions, store: str, truth: Truth | None = None,
             progress: Progress = silent) -> EvalResult:
    """Draw the sample, re-read it and measure (see the module docstring).

    Args:
        pairs: the store's pairs (:class:`LocalPairs`, or an engine's equivalent).
        options: checked against the store's parameters by :func:`dedup_cli.api.eval.evaluate`.
        store: the store's path, for the report.
        truth: the pairs of a truth file, to count precision and recall against.
        progress: told each stage as it begins.
    """
    params = pairs.params
    # num_perm: the values a signature holds (bands take them); permutations: the k the estimators' variances and
    # the storage lines count (twice num_perm for a store of XOR bits, whose stored_bits is 1/2)
    stored_bits, permutations = params.stored_bits, params.permutations
    threshold = options.find.threshold
    bits = options.find.bits_for(stored_bits)
    # b = 1/2 is measured when it is find's b (its XOR bits come from the lowest stored bit)
    evaluated = sorted({b for b in (*EVALUATED_BITS, stored_bits, bits) if b <= stored_bits})
    eligible = int(np.count_nonzero(pairs.eligible))
    banded = banded_sample(pairs, options, eligible, progress)
    measured = measure_sample(pairs, banded, evaluated, progress)
    sizes = measured_sizes(pairs, measured)
    left_values, right_values = pairs.signatures(measured.left), pairs.signatures(measured.right)
    at_threshold, sweep = retrievals(pairs, options, measured, banded.banding, left_values, right_values, evaluated,
                                     eligible, truth, banded.candidates)
    # k/4, k/2 and k permutations, two at least (b = 1/2 pairs them) and k at most (a store of k = 1 has one)
    prefixes = sorted({min(max(share, 2), permutations) for share in (permutations // 4, permutations // 2)}
                      | {permutations})
    matches = {b: _prefix_matches(left_values, right_values, b, prefixes, params.xor_pairs) for b in evaluated}
    design, exact = measured.design, measured.exact
    r1, r2 = pairs.r[measured.left], pairs.r[measured.right]
    storage = storage_tradeoff(design, exact, r1, r2, matches, prefixes, threshold,
                               sorted(set(STORAGE_BITS) | set(evaluated)))
    draw, banding, frame = banded.draw, banded.banding, banded.frame
    return EvalResult(
        store=store, documents=len(pairs.store), eligible=eligible, num_perm=permutations, stored_bits=stored_bits,
        threshold=threshold, bits=bits, evaluated_bits=evaluated, banding=banding, frame=frame,
        reach=reach([banding] if frame is None else [banding, frame]),
        candidates=banded.candidates, banded=banded.banded, oversized_buckets=banded.oversized,
        population=draw.population, sample=options.sample,
        seed=options.seed, strata=draw.strata, measured=design.measured, unverifiable=sorted(pairs.unverifiable),
        pairs=EvalSample(measured.left, measured.right, design.stratum, design.weights, measured.candidate, exact,
                         measured.scores),
        estimators=[estimator_accuracy(design, b, exact, measured.scores[b].estimate, measured.scores[b].ci_low,
                                       measured.scores[b].ci_high,
                                       pair_variance(exact, r1, r2, b, permutations, pairs.densification),
                                       RESEMBLANCE_BINS)
                    for b in evaluated],
        s_curve=s_curve(design, exact, measured.candidate, banding, RESEMBLANCE_BINS, sizes),
        accuracy_source="sample" if truth is None else "truth",
        at_threshold=at_threshold, sweep=sweep, storage=storage, truth=truth,
        recall_curves=compared_recall_curves(options, params, measured, left_values, right_values, eligible,
                                             pairs.shortest, sizes),
    )


def measured_sizes(pairs: LocalPairs, measured: Measured) -> PairSizes | None:
    """The shingle counts of each measured pair's documents, which the S-curve of one permutation hashing depends
    on (:class:`dedup_cli.candidates.banding.PairSizes`); None for k independent permutations."""
    if pairs.densification is None:
        return None
    counts = pairs.store.shingle_counts.astype(np.float64)
    return PairSizes(pairs.densification.bins, counts[measured.left], counts[measured.right])


def compared_recall_curves(options: EvalOptions, params: SignatureParams, measured: Measured,
                           left_values: np.ndarray, right_values: np.ndarray, eligible: int, shortest: int = 0,
                           sizes: PairSizes | None = None) -> list[RecallCurve]:
    """The measured recall against R above R0 of the banding find chooses for the default recall and for the one
    asked for (or for 0.99 and 0.999): the sampled pairs sharing one of its bands are its candidates. None when
    the bands or rows were given (no recall chooses them). ``shortest``: the store's fewest shingles, which find's
    banding is chosen for; ``sizes``: the measured pairs', for their predicted S-curve."""
    find = options.find
    if find.bands is not None or find.rows is not None:
        return []
    curves = []
    for recall in compared_recalls(find.recall):
        banding = find_banding(replace(find, recall=recall), find.threshold, params, eligible, shortest).banding
        shared = share_a_band(left_values, right_values, banding)
        curves.append(recall_curve(measured.design, measured.exact, shared, recall, banding, find.threshold,
                                   sizes=sizes))
    return curves


def banded_sample(pairs: LocalPairs, options: EvalOptions, eligible: int, progress: Progress) -> Banded:
    """find's candidates and the looser banding's, scored with the stored bits into strata of R̂, and the
    sample drawn from the strata."""
    params, num_docs = pairs.params, len(pairs.store)
    banding = _banding_for(options, options.find.threshold, params, eligible, pairs.shortest)
    progress.stage(f"candidates, {banding.bands}×{banding.rows} bands", None)
    first, second, oversized = pairs.candidates(banding)
    candidate_codes = pair_codes(first, second, num_docs)  # ascending, as the banding returns them
    frame = frame_banding(eligible, params.num_perm, params.stored_bits)
    codes = candidate_codes
    if frame is not None and frame != banding:
        frame_first, frame_second, _ = pairs.candidates(frame)
        codes = sorted_unique(np.concatenate([candidate_codes, pair_codes(frame_first, frame_second, num_docs)]))
    banded_first, banded_second = code_pairs(codes, num_docs)
    progress.stage(f"scoring {codes.size:,} banded pairs and drawing the sample", None)
    strata_estimate = pairs.score(banded_first, banded_second, params.stored_bits).estimate
    draw = draw_pairs(codes, strata_estimate, among(codes, candidate_codes)[0], pairs.eligible, options.sample,
                      options.seed, RESEMBLANCE_BINS)
    return Banded(banding, frame, int(first.size), oversized, int(codes.size), draw)


def measure_sample(pairs: LocalPairs, banded: Banded, evaluated: list[float], progress: Progress) -> Measured:
    """The sampled pairs re-read (those that could be, with their stratified design) and scored with each
    evaluated b."""
    draw = banded.draw
    progress.stage(f"re-reading the {draw.first.size:,} sampled pairs", None)
    exact = pairs.exact(draw.first, draw.second)
    progress.stage("measuring", None)
    measured = ~np.isnan(exact)
    design = StratifiedSample(draw.stratum[measured], np.array([s.population for s in draw.strata]), LEVEL)
    left, right = draw.first[measured], draw.second[measured]
    return Measured(design, left, right, exact[measured], draw.candidate[measured],
                    {b: pairs.score(left, right, b) for b in evaluated})


def retrievals(pairs: LocalPairs, options: EvalOptions, measured: Measured, banding: Banding,
               left_values: np.ndarray, right_values: np.ndarray, evaluated: list[float], eligible: int,
               truth: Truth | None, candidates: int | None = None) -> tuple[list[Retrieval], list[Retrieval]]:
    """Precision and recall of ``find`` at its threshold (per evaluated b and verify mode), and over the sweep of
    thresholds (at find's b): from the sample, or counted against a truth file. ``candidates``: find's candidate
    pairs at its threshold, for the bound its decisions use there (the sweep's other bandings decide per pair)."""
    params, threshold, recall = pairs.params, options.find.threshold, options.find.recall
    bits = options.find.bits_for(params.stored_bits)
    if truth is not None:
        at_threshold = [truth_retrieval(pairs, truth, banding, threshold, b, verify, recall)
                        for b in evaluated for verify in VERIFY_MODES]
        sweep = [truth_retrieval(pairs, truth, _banding_for(options, level, params, eligible, pairs.shortest), level,
                                 bits, verify,
                                 recall)
                 for level in SWEEP_THRESHOLDS if level >= truth.floor for verify in VERIFY_MODES]
        return at_threshold, sweep
    scores, exact, design = measured.scores, measured.exact, measured.design
    def bound(b: float) -> SimultaneousBound | None:
        return None if candidates is None else SimultaneousBound(b, estimated_positions(params, b), candidates,
                                                                 densification=pairs.densification,
                                                                 recall=recall)

    at_threshold = [sampled_retrieval(design, find_reports(scores[b], exact, measured.candidate, threshold, verify,
                                                           bound(b)),
                                      exact >= threshold, threshold, b, verify)
                    for b in evaluated for verify in VERIFY_MODES]
    sweep = []
    for level in SWEEP_THRESHOLDS:
        # Another threshold is another find: its own banding, whose candidates among the sampled pairs are the
        # pairs sharing one of its bands.
        shared = share_a_band(left_values, right_values, _banding_for(options, level, params, eligible,
                                                                      pairs.shortest))
        sweep += [sampled_retrieval(design, find_reports(scores[bits], exact, shared, level, verify),
                                    exact >= level, level, bits, verify) for verify in VERIFY_MODES]
    return at_threshold, sweep


def evaluate_store(store: Store, options: EvalOptions, name: str, progress: Progress = silent) -> EvalResult:
    """:func:`evaluate` of ``store`` read into this process (``name``: how the report names it), with its truth file
    if ``options`` name one.

    Raises:
        dedup_cli.errors.DedupError: a store with fewer than two documents that have shingles.
    """
    progress.stage("reading the store", None)
    stored = store.read()
    pairs = LocalPairs(stored, options.find.max_bucket, options.find.workers)
    if int(pairs.eligible.sum()) < 2:
        raise DedupError(f"{name} holds fewer than two documents with shingles; there is no pair to evaluate")
    truth = None if options.truth is None else read_truth(options.truth, stored.ids)
    return evaluate(pairs, options, name, truth, progress)
