"""What one ``find`` decides before its first stage, the same for every engine: the plan both engines follow.

Given the options, the store's parameters and what numbering the documents learned of them (how many there are,
how many are eligible, where a reference store's documents start, the largest shingle count, the span of runs),
:func:`plan_find` decides once:

- b, the bits the estimates use (``FindOptions.bits_for`` the stored bits);
- whether the values come from one permutation hashing with densification, whose variances the intervals and
  bounds use (:func:`dedup_cli.estimates.pairs.densification_of`);
- the banding (:func:`find_banding`: for ``ways=3`` chosen for the per-pair recall that the triples need; with one
  permutation hashing for the S-curve of the corpus's shortest documents), or none for ``--candidates all``;
- R0 − margin (:func:`dedup_cli.candidates.candidate_triples.pair_floor`), the lowest estimate a pair may have and
  still be an edge of a candidate triple, or be kept by ``--candidates all`` for one: every stage that needs it
  reads it from the plan (:meth:`FindPlan.triple_floor`);
- which estimator the 2-way estimates use (:func:`estimator_name`, for the summary);
- what a stage kept in ``--work-dir`` depends on besides the stores (:meth:`FindPlan.depends_on`), the same
  fields for both engines, to which an engine adds what its kept files depend on alone (the Dask engine: the
  divisions its kept frames are read back with);
- the fields of the ``FindResult`` that do not depend on how the stages ran (:meth:`FindPlan.result_fields`).

The local engine (:mod:`dedup_cli.engine.local.find`) and the Dask engine (:mod:`dedup_cli.engine.dask.find`) take
every such decision from here, so that they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dedup_cli.candidates.banding import Banding, BandingChoice, PairSizes, resolve_banding
from dedup_cli.candidates.candidate_triples import pair_floor
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.estimates.dense import DENSE_R
from dedup_cli.estimates.densified import Densification, largest_sharing_factor
from dedup_cli.estimates.half_bit import is_half_bit
from dedup_cli.estimates.pairs import densification_of
from dedup_cli.estimates.simultaneous import DECISION_LEVEL, rescue_level
from dedup_cli.options.finding import FindOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.manifest import RunInput
from dedup_cli.verification import Verification

KEPT_STAGES = ("scored", "decisions")
"""The stages of find after the candidates that ``--work-dir`` keeps, in order (the candidates' rounds are kept
by the candidate stage itself, keyed by their bands)."""


def estimator_name(max_ratio: float, bits: float = 8) -> str:
    """Which estimator and coefficients the 2-way estimates used, for the summary: ``max_ratio`` is the largest
    r = f/D of the store's documents (the sparse limit r ≈ 0 holds below :data:`DENSE_R`)."""
    kind = "b = 1/2 (XOR bits, Li & König eq. 25)" if is_half_bit(bits) else "b-bit"
    if max_ratio > DENSE_R:
        return f"{kind} with precise r = f/D (max r = {max_ratio:.3g})"
    return f"{kind}, sparse limit (r ≈ 0)"


def estimated_positions(params: SignatureParams, bits: float) -> int:
    """k of the 2-way estimates: the positions they compare, which with b = 1/2 are the XOR bits (half the
    values, unless the store holds only XOR bits)."""
    return params.num_perm // 2 if is_half_bit(bits) and not params.xor_pairs else params.num_perm


def shortest_sizes(params: SignatureParams, shortest: int | None) -> PairSizes | None:
    """The pairs a banding of ``params``' values must reach its recall for: two documents of ``shortest`` shingles
    (the corpus's fewest), when the values are densified one permutation hashing (whose S-curve is flattest for
    the shortest documents, :func:`dedup_cli.candidates.banding.row_spread`); None otherwise or when unknown."""
    densification = densification_of(params)
    if densification is None or not shortest:
        return None
    return PairSizes(densification.bins, float(shortest), float(shortest))


def find_banding(options: FindOptions, threshold: float, params: SignatureParams, documents: int,
                 shortest: int | None = None) -> BandingChoice:
    """The banding ``find`` with ``options`` uses at ``threshold`` on ``documents`` eligible documents, the
    shortest of ``shortest`` shingles: for ``ways=3`` chosen for the per-pair recall that gives the triples
    ``options.recall``, and for one permutation hashing so that pairs of the shortest documents reach it
    (:func:`shortest_sizes`)."""
    recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
    return resolve_banding(threshold, params.num_perm, params.stored_bits, recall, options.bands, options.rows,
                           documents=documents, sizes=shortest_sizes(params, shortest))


@dataclass(frozen=True)
class FindPlan:
    """What a ``find`` decided before its first stage (see the module docstring); built by :func:`plan_find`."""

    options: FindOptions
    params: SignatureParams
    bits: float  # b, or 0.5 for b = 1/2
    choice: BandingChoice | None  # None with --candidates all
    pair_floor: float  # R0 − margin at this b and k
    documents: int  # live documents, the reference store's too
    eligible: int  # of them, those with at least one shingle
    reference_start: int | None  # with --against: the reference store's first document (its documents come last)
    run_span: tuple[int, int] | None  # the first and last run of the documents
    estimator: str
    densification: Densification | None  # the bins of one permutation hashing, or None (kperm, integer sets)
    # How the store's runs (then the reference store's) gave records their ids: a source changed since it was
    # signed is read again so, and each record found by its id (:mod:`dedup_cli.inputs.liveness`).
    id_schemes: tuple[RunInput | None, ...] = ()

    @property
    def threshold(self) -> float:
        return self.options.threshold

    @property
    def banding(self) -> Banding | None:
        return None if self.choice is None else self.choice.banding

    @property
    def triple_floor(self) -> float | None:
        """R0 − margin with ``ways=3`` (the scored pairs below it are of no use to a triple), else None."""
        return self.pair_floor if self.options.ways == 3 else None

    def depends_on(self, stage: str, **engine_fields: object) -> dict[str, object]:
        """What the kept ``stage`` ("scored" or "decisions") depends on besides the stores: the same fields for
        every engine, and ``engine_fields``, what only one engine's kept files depend on. A kept stage is reused
        only when all of it matches (:class:`dedup_cli.store.checkpoints.WorkDir`), so work kept by another
        engine or another version is recomputed, never read."""
        if stage not in KEPT_STAGES:
            raise ValueError(f"stage {stage!r} is not one of {KEPT_STAGES}")
        options = self.options
        depends: dict[str, object] = dict(
            method=options.candidates, max_bucket=options.max_bucket, threshold=self.threshold, bits=self.bits,
            banding=None if self.banding is None else (self.banding.bands, self.banding.rows),
            new_since=options.new_since, only_across=options.only_across, ways=options.ways,
            reference_start=self.reference_start, **engine_fields)
        if stage == "decisions":
            depends["verify"] = options.verify
            if rescue_level(options.recall) != DECISION_LEVEL:  # the default recall keeps the keys it always had
                depends["rescue_level"] = rescue_level(options.recall)
        return depends

    def key(self, work: WorkDir | None, stage: str, **engine_fields: object) -> str | None:
        """The fingerprint of the kept ``stage`` in ``work`` (:meth:`depends_on`), or None without a work folder."""
        return None if work is None else work.key(stage, **self.depends_on(stage, **engine_fields))

    def result_fields(self, candidates: int, oversized_buckets: int, verification: Verification | None,
                      aliases: int) -> dict[str, Any]:
        """The fields of a ``FindResult`` that do not depend on how the stages ran, given what the stages
        counted: the candidate pairs, the buckets cut, the exact checks and the aliases left out."""
        return dict(
            bits=self.bits, threshold=self.threshold, banding=self.banding, candidates=int(candidates),
            oversized_buckets=int(oversized_buckets), eligible=self.eligible, verification=verification,
            aliases=int(aliases), seconds=0.0, estimator=self.estimator, against=self.options.against,
            banding_choice=self.choice, documents=self.documents, run_span=self.run_span,
            reference_documents=None if self.reference_start is None else self.documents - self.reference_start)


def plan_find(options: FindOptions, params: SignatureParams, documents: int, eligible: int,
              reference_start: int | None, max_shingle_count: int, run_span: tuple[int, int] | None,
              id_schemes: tuple[RunInput | None, ...] = (), min_shingle_count: int = 0) -> FindPlan:
    """The plan of a ``find`` with ``options`` (checked against the store) of ``documents`` numbered documents,
    ``eligible`` of them with a shingle (the fewest ``min_shingle_count``, 0 when unknown), a reference store's
    from ``reference_start`` on; ``id_schemes``: how the stores' runs gave ids
    (:attr:`dedup_cli.store.store.Store.id_scheme`, in store order)."""
    bits = options.bits_for(params.stored_bits)
    choice = None if options.candidates != "lsh" else find_banding(options, options.threshold, params, eligible,
                                                                    min_shingle_count)
    densification = densification_of(params)
    sharing = 1.0 if densification is None else largest_sharing_factor(densification.bins)
    return FindPlan(
        options=options, params=params, bits=bits, choice=choice, densification=densification,
        pair_floor=pair_floor(options.threshold, estimated_positions(params, bits), bits, sharing=sharing),
        documents=int(documents), eligible=int(eligible),
        reference_start=None if reference_start is None else int(reference_start), run_span=run_span,
        estimator=estimator_name(float(max_shingle_count) / float(params.universe), bits), id_schemes=id_schemes)
