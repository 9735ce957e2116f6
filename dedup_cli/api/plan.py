"""``plan``: what a threshold, b, k and the stored bits promise and cost, before any work.

``dedup plan`` explains the parameters of ``dedup find`` from the formulas alone, without reading a
corpus: the LSH banding and its S-curve (Mining of Massive Datasets, Sec. 3.4; per-row agreement
E_B, not R, because band keys use all B stored bits: docs/estimators.md, "Banding"), the estimator's standard
error at the threshold (Li & König 2010, eq. 11, sparse limit r → 0; for one permutation hashing and documents of
a given number of shingles, eq. D4 and the S-curve of such pairs: docs/estimators.md, "One permutation hashing"),
the storage factor of b bits
against full-width values (eq. 12), the bytes a document takes in the store, and, given the number
of documents, the expected number of candidate pairs and the memory ``find`` will need (docs/scaling.md).
Its text and JSON forms are :mod:`dedup_cli.cli.plan_report`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.candidates.banding import (
    CHANCE_FRACTION,
    Banding,
    BandingChoice,
    PairSizes,
    candidate_probability,
    cheapest_layout,
    required_num_perm,
    resolve_banding,
    row_agreement_probability,
)
from dedup_cli.candidates.recall_costs import RecallCost, compared_recalls, recall_costs
from dedup_cli.engine.find_memory import FindProcesses, MemoryPart, find_memory, phase_processes
from dedup_cli.estimates.densified import densified_variance_2way, densified_variance_half_bit
from dedup_cli.estimates.half_bit import (
    HALF_BIT,
    expected_xor_match,
    is_half_bit,
    storage_factor_half_bit,
    variance_half_bit,
)
from dedup_cli.estimates.two_way import expected_match_2way, storage_factor, variance_2way
from dedup_cli.minhash.packing import value_dtype
from dedup_cli.options.planning import PlanOptions
from dedup_cli.options.vocabulary import MAX_NUM_PERM

# The S-curve is tabulated at R = 0, 0.1, …, 1 (R = 0 stands for the unrelated pairs) and at R0.
CURVE_STEPS = 10

# Bytes a store row takes besides the signature, from the columns of ``store.format.part_schema``:
# size, mtime_ns, content_hash, shingle_count and run are 8 bytes each; id and path are strings, a
# 4-byte offset each plus their text. Uncompressed: zstd shrinks these columns (paths share
# prefixes, counts are small) but not the signature, whose bytes are uniformly random.
ROW_OVERHEAD_BYTES = 5 * 8 + 2 * 4


@dataclass(frozen=True)
class Plan:
    """What ``dedup find`` promises and costs for one choice of parameters (see :func:`plan`)."""

    threshold: float
    bits: float  # b, or 0.5 for b = 1/2
    num_perm: int  # k permutations
    stored_bits: float  # B, or 0.5 for a store of XOR bits (k/2 of them, banded with T = (1 + R²)/2)
    recall_target: float
    bands: int
    rows: int
    banding_chosen: bool  # True: by choose_banding; False: bands/rows given
    curve: tuple[tuple[float, float], ...]  # (R, Pr(candidate)), R ascending, R0 included
    row_agreement_at_threshold: float  # E_B at R0, per-row agreement of B-bit band values (T for XOR bits)
    recall_at_threshold: float  # Pr(candidate | R = R0)
    false_negative_rate: float  # 1 − recall at R0: pairs at R0 that never become candidates
    candidate_probability_unrelated: float  # Pr(candidate | R = 0)
    match_probability: float  # E_b at R0 for the estimator's b bits (eq. 4, sparse limit; T of eq. 23 for b = 1/2)
    standard_error: float  # sqrt(Var(R̂_b)) at R0 (eq. 11, sparse limit; eq. 26 for b = 1/2; eqs. D4, D5 with shingles)
    signature_bytes: int  # ceil(k·B/8); ceil(k/16) for a store of XOR bits
    row_overhead_bytes: int  # the store's other columns, without the id and path text
    estimator_signature_bytes: int  # ceil(k·b/8), ceil(k/16) for b = 1/2: what b alone would take in the store
    value_bytes: int  # v: bytes a stored B-bit value takes in memory (its numpy dtype; an XOR bit takes one)
    estimator_value_bytes: int  # v_b: bytes a b-bit value takes in memory
    storage_factor_32: float | None  # B(32)/B(b) at R0 (eq. 12); None at R0 = 1 where both vanish
    storage_factor_64: float | None  # B(64)/B(b)
    unused_values: int  # k − bands·rows: values that no band uses
    # B(b) at R0 for b = 1/2, 1, 2, 4, 8 and the plan's b (eq. 12, r → 0; B(1/2) = k·Var(R̂_1/2) of k XOR bits);
    # (b, B(b)), b ascending; B(b)/B(1/2) is the space b = 1/2 saves over b at equal accuracy
    storage_factors: tuple[tuple[float, float], ...] = ()
    recommend_half_bit: bool = False  # b = 1/2 stores less than every whole b at equal accuracy at R0
    docs: int | None = None
    pairs: int | None = None  # N(N − 1)/2
    expected_candidates: float | None = None  # N(N − 1)/2 · Pr(candidate | R = 0)
    memory: tuple[MemoryPart, ...] = ()
    memory_peak_bytes: int | None = None
    memory_peak_phase: str | None = None
    memory_peak_formula: str | None = None  # the sum of the terms in the peak
    jobs: int = 1  # find's worker processes (--jobs, one per core for 0)
    # with docs: j, the processes of the candidate stage, and j_c, those scoring (find forks a worker for enough
    # documents or pairs only); the memory terms and the peak are sums over the processes of their phase
    candidate_processes: int | None = None
    scoring_processes: int | None = None
    memory_processes: int | None = None  # the processes at the peak: the driver, and its workers when it forks any
    chance_fraction: float = CHANCE_FRACTION  # chance candidates per document a banding chosen for N allows
    chance_budget: float | None = None  # with docs: chance_fraction · N, the chance candidates the banding aims at
    required_num_perm: int | None = None  # with docs: the smallest k meeting both the recall and that budget
    # a chosen banding: the default recall's beside this one (or 0.99 beside 0.999), each with its recall at R0,
    # chance candidates (with docs) and bands relative to the lower recall's
    recall_costs: tuple[RecallCost, ...] = ()
    warnings: tuple[str, ...] = ()
    scheme: str = "oph"  # how the store is signed: oph (one permutation hashing, densified) or kperm
    shingles: int | None = None  # with oph, the documents' shingles the curve, error and banding are for

    @property
    def pair_sizes(self) -> PairSizes | None:
        """The densified pairs the S-curve and banding are for: two documents of :attr:`shingles` each, in k bins."""
        return _pair_sizes(self.scheme, self.shingles, self.num_perm)

    def candidate_probabilities(self, resemblances: np.ndarray) -> np.ndarray:
        """Pr(candidate) float64[n] at each R of float64[n] under this banding: the S-curve
        1 − (1 − E_B^rows)^bands (MMDS Sec. 3.4.2), for one permutation hashing and documents of :attr:`shingles`
        that of such pairs (:func:`dedup_cli.candidates.banding.candidate_probability`), of which :attr:`curve` is a
        table."""
        return candidate_probability(resemblances, self.bands, self.rows, self.stored_bits, self.pair_sizes)

    @property
    def bytes_per_document(self) -> int:
        """Signature plus the other columns of a store row (id and path text not counted)."""
        return self.signature_bytes + self.row_overhead_bytes


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _count(value: float) -> str:
    for unit, size in (("billion", 1e9), ("million", 1e6)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:,.0f}"


def banding_warnings(choice: BandingChoice, threshold: float, num_perm: int, flag: Callable[[str], str],
                     stored_bits: float | None = None, bits: float = 2) -> list[str]:
    """What a banding fails to promise for its corpus (recall at R0, or chance candidates within
    :data:`CHANCE_FRACTION` of the documents) and the cheapest store that keeps both (:func:`layout_fix`), options
    named by ``flag``; ``stored_bits`` and ``bits`` are the store's B and the estimator's b."""
    banding, documents = choice.banding, choice.documents
    shape = f"{banding.bands}×{banding.rows} bands"
    if documents is None or (choice.meets_budget and choice.meets_recall):
        return []
    chance = _count(choice.chance_candidates or 0.0)
    if not choice.chosen:
        if choice.meets_budget:
            return []
        return [f"{flag('bands')} {banding.bands} × {flag('rows')} {banding.rows} expect about {chance} candidates "
                f"between unrelated documents among {documents:,} (more than {CHANCE_FRACTION:g} per document); "
                "leave them out to choose a banding for the corpus size"]
    band_bits = banding.band_bits if stored_bits is None else stored_bits
    needs = layout_fix(threshold, choice.recall_target, documents, num_perm, band_bits, bits, flag)
    if not choice.meets_recall:
        return [f"recall at R0 = {threshold:g} is {recall_text(choice.recall, choice.recall_target)} ({shape}), "
                "below the target "
                f"{choice.recall_target:g}: no banding of k = {num_perm} values reaches it; {needs}"]
    return [f"{_layout_name(num_perm, band_bits)} are too few to keep chance candidates within "
            f"{CHANCE_FRACTION:g} per document at {documents:,} documents with recall {choice.recall_target:g} at "
            f"R0 = {threshold:g}: {shape} expect about {chance} candidates between unrelated documents; {needs}, "
            f"or raise {flag('threshold')}"]


def _layout_name(num_perm: int, stored_bits: float) -> str:
    return f"k = {num_perm} values of {'XOR bits' if is_half_bit(stored_bits) else f'{stored_bits:g} bits'}"


def layout_fix(threshold: float, recall: float, documents: int, num_perm: int, stored_bits: float, bits: float,
               flag: Callable[[str], str]) -> str:
    """The cheapest store that keeps both the recall at R0 and the chance budget at ``documents`` documents
    (:func:`dedup_cli.candidates.banding.cheapest_layout`), as ``sign`` options, with its bytes a document and the
    memory ``find`` then needs; or that none does."""
    layout = None if is_half_bit(stored_bits) else cheapest_layout(threshold, recall, documents, num_perm, stored_bits)
    if layout is None:
        return f"no store of up to {MAX_NUM_PERM} values of 8, 16 or 32 bits can; use a lower {flag('recall')}"
    now = _signature_bytes(num_perm, stored_bits)
    cost = ("as now" if layout.signature_bytes == now else f"{layout.signature_bytes / now:.2g}× now")
    estimator = int(min(bits, layout.stored_bits)) if not is_half_bit(bits) else 2
    fixed = plan(PlanOptions(threshold=threshold, bits=estimator, num_perm=layout.num_perm,
                             stored_bits=layout.stored_bits, recall=recall, docs=documents, jobs=1))
    memory = f"; find then needs about {_gigabytes(fixed.memory_peak_bytes)} at -j 1" if fixed.memory_peak_bytes else ""
    return (f"sign into a new store with {flag('bits')} {layout.stored_bits} {flag('num_perm')} {layout.num_perm} "
            f"({layout.signature_bytes} signature bytes a document, {cost}{memory})")


def _gigabytes(size: float | None) -> str:
    return f"{(size or 0) / 1e9:.3g} GB"


# The b whose storage factors ``plan`` compares (besides the plan's own b): b = 1/2 beside the usual whole ones.
COMPARED_BITS = (HALF_BIT, 1, 2, 4, 8)


def _storage_factor(threshold: float, bits: float) -> float:
    """B(b) at R0 in the sparse limit (Li & König 2010, eq. 12; for b = 1/2 its extension, k·Var(R̂_1/2) for k
    XOR bits: :func:`dedup_cli.estimates.half_bit.storage_factor_half_bit`)."""
    if is_half_bit(bits):
        return float(storage_factor_half_bit(threshold, 0.0, 0.0))
    return float(storage_factor(threshold, 0.0, 0.0, int(bits)))


@dataclass(frozen=True)
class _Accuracy:
    """What the estimator's b bits promise at R0, and what they cost against other b."""

    match_probability: float
    standard_error: float
    storage_factors: dict[float, float]  # b → B(b) at R0, b ascending
    storage_factor_32: float | None
    storage_factor_64: float | None
    recommend_half_bit: bool


def _pair_sizes(scheme: str, shingles: int | None, num_perm: int) -> PairSizes | None:
    """Two documents of ``shingles`` each in the ``num_perm`` bins of one permutation hashing, or None (kperm, or
    documents long enough not to matter)."""
    return PairSizes(num_perm, float(shingles), float(shingles)) if scheme == "oph" and shingles else None


def _accuracy(threshold: float, bits: float, num_perm: int, sizes: PairSizes | None = None) -> _Accuracy:
    """E_b and sqrt(Var(R̂_b)) at R0 (eq. 4 and 11, r → 0; T and eq. 26 for b = 1/2 on k/2 XOR bits; eqs. D4, D5
    for densified pairs of ``sizes``), and the storage factors B(b) at R0 (eq. 12) of the compared b, of 32 and 64
    bits against b, and whether b = 1/2 stores less than every whole b at equal accuracy."""
    if is_half_bit(bits):
        match = float(expected_xor_match(threshold, 0.0, 0.0))
        error = math.sqrt(float(variance_half_bit(threshold, 0.0, 0.0, num_perm // 2) if sizes is None else
                                densified_variance_half_bit(threshold, sizes.first, sizes.second, num_perm)))
    else:
        match = float(expected_match_2way(threshold, 0.0, 0.0, bits))
        error = math.sqrt(float(variance_2way(threshold, 0.0, 0.0, bits, num_perm) if sizes is None else
                                densified_variance_2way(threshold, sizes.first, sizes.second, bits, num_perm)))
    comparison = {b: _storage_factor(threshold, b) for b in sorted({*COMPARED_BITS, bits})}
    own_factor = comparison[bits]
    factors: list[float | None] = [
        _storage_factor(threshold, wide) / own_factor if own_factor > 0 else None for wide in (32, 64)
    ]
    whole = [factor for b, factor in comparison.items() if not is_half_bit(b)]
    recommend_half = threshold < 1.0 and comparison[HALF_BIT] < min(whole)
    return _Accuracy(match, error, comparison, factors[0], factors[1], recommend_half)


def _s_curve(threshold: float, banding: Banding, sizes: PairSizes | None = None) -> tuple[tuple[float, float], ...]:
    """(R, Pr(candidate)) at R = 0, 0.1, …, 1 and at R0, R ascending (MMDS Sec. 3.4.2; densified pairs of ``sizes``:
    :func:`dedup_cli.candidates.banding.candidate_probability`)."""
    grid = np.round(np.linspace(0.0, 1.0, CURVE_STEPS + 1), 12)
    resemblances = np.unique(np.append(grid, threshold))
    probabilities = candidate_probability(resemblances, banding.bands, banding.rows, banding.band_bits, sizes)
    return tuple((float(r), float(p)) for r, p in zip(resemblances, probabilities, strict=True))


def _signature_bytes(values: int, bits: float) -> int:
    """The bytes of k values of b bits, packed: ceil(k·b/8); ceil(k/16) for the k/2 XOR bits of b = 1/2."""
    if is_half_bit(bits):
        return (values // 2 + 7) // 8
    return (values * math.ceil(bits) + 7) // 8


def recall_text(value: float, target: float) -> str:
    """A recall with as many decimals as its target shows, and one more (4 at least), so that a recall below its
    target never prints as 1.0000 beside 0.999999."""
    decimals = max(4, len(f"{target:g}".partition(".")[2]) + 1) if target > 0.99 else 4
    return f"{value:.{decimals}f}"


def _needs(threshold: float, band_bits: float, recall: float) -> str:
    """The fix for a recall no banding of the values reaches: the smallest k that does, as ``sign --num-perm``
    takes it (twice the XOR bits for rows of XOR bits), or a lower recall."""
    required = required_num_perm(threshold, band_bits, recall, None)
    if required is None:
        return f"no --num-perm up to {MAX_NUM_PERM} can; use a lower --recall"
    required *= 2 if band_bits == HALF_BIT else 1
    return f"sign with --num-perm {required} or more, or use a lower --recall"


def _plan_warnings(options: PlanOptions, choice: BandingChoice, stored_bits: float) -> list[str]:
    """Values no band uses, a recall below its target, too many chance candidates for the corpus, and band values
    so few bits wide that unrelated pairs become candidates, each with its fix."""
    threshold, recall, values = options.threshold, options.recall, options.band_values
    banding = choice.banding
    at_threshold, unrelated = choice.recall, banding.recall_at(0.0)
    unused = values - banding.bands * banding.rows
    warnings: list[str] = []
    if unused:
        warnings.append(
            f"{banding.bands} bands × {banding.rows} rows use {banding.bands * banding.rows} of the {values} "
            f"values; the other {unused} never make a pair a candidate (the estimator still uses all {values})"
        )
    if at_threshold < recall and (not choice.chosen or options.docs is None):
        fix = ("choose more --bands or fewer --rows" if not choice.chosen
               else f"no banding of k = {values} values reaches it; {_needs(threshold, stored_bits, recall)}")
        warnings.append(f"recall at R0 = {threshold:g} is {recall_text(at_threshold, recall)}, below the target "
                        f"{recall:g}; {fix}")
    warnings += banding_warnings(choice, threshold, values, _flag, stored_bits, float(options.bits))
    if unrelated > 0.01 and is_half_bit(stored_bits):
        warnings.append(
            f"{unrelated:.1%} of unrelated pairs (R = 0) become candidates: XOR bits agree by chance half the time; "
            "sign with whole --bits (e.g. 8) for banding and estimate with find --bits 1/2"
        )
    elif unrelated > 0.01:
        warnings.append(
            f"{unrelated:.1%} of unrelated pairs (R = 0) become candidates: {stored_bits}-bit band values agree by "
            f"chance with probability 1/2^{stored_bits}; sign with more --bits (e.g. 8) so banding is selective"
        )
    return warnings


def _corpus_costs(docs: int, choice: BandingChoice, num_perm: int, bits: float, signature_bytes: int, jobs: int
                  ) -> dict[str, Any]:
    """The fields of a :class:`Plan` that need N: pairs, expected candidates, the chance budget and the k that keeps
    it, and the memory of ``find`` with ``jobs`` worker processes
    (:func:`dedup_cli.engine.find_memory.find_memory`)."""
    banding, stored_bits = choice.banding, choice.banding.band_bits
    pairs = docs * (docs - 1) // 2
    candidates = pairs * banding.recall_at(0.0)
    # Band collisions before de-duplication: every band finds its own pairs, overlaps and all.
    collisions = pairs * banding.bands * float(row_agreement_probability(0.0, stored_bits)) ** banding.rows
    compared = num_perm // 2 if is_half_bit(bits) else num_perm  # the values the estimator compares
    processes = FindProcesses.of(jobs, docs, candidates)
    parts, phase = find_memory(docs, compared, stored_bits, bits, banding.bands, banding.rows, signature_bytes,
                           candidates, collisions, processes)
    peak = [part for part in parts if part.in_peak]
    return dict(docs=docs, pairs=pairs, expected_candidates=candidates, memory=parts, chance_budget=choice.budget,
                required_num_perm=choice.required_num_perm, candidate_processes=processes.candidate_stage,
                scoring_processes=processes.scoring, memory_processes=phase_processes(phase, processes),
                memory_peak_bytes=sum(part.bytes for part in peak), memory_peak_phase=phase,
                memory_peak_formula=" + ".join(part.formula for part in peak))


def plan(options: PlanOptions | None = None) -> Plan:
    """Everything ``dedup find --threshold R0 --bits b`` promises and costs, from the formulas alone.

    Args:
        options: R0, b, k, the stored bits B, the target recall, the corpus size N, an optional banding and
            ``find``'s worker processes (default: ``PlanOptions()``); validated when they were made.

    Returns:
        A :class:`Plan`. The S-curve is 1 − (1 − E_B^rows)^bands with E_B = 2^-B + (1 − 2^-B)·R (MMDS
        Sec. 3.4; Li & König 2010, eq. 4, r → 0); the standard error is sqrt(E_b(1 − E_b)/(k(1 − C)²)),
        C = 2^-b (eq. 11); the storage factors are B(32)/B(b) and B(64)/B(b) at R0 (eq. 12). With
        ``options.shingles`` and one permutation hashing, the S-curve, the banding chosen from it and the standard
        error are those of pairs of documents of that many shingles (docs/estimators.md, "One permutation
        hashing").
    """
    options = PlanOptions() if options is None else options
    threshold, num_perm = options.threshold, options.num_perm
    bits, stored_bits = (HALF_BIT if b == HALF_BIT else int(b) for b in (float(options.bits),
                                                                         float(options.stored_bits)))
    values = options.band_values  # k, or k/2 XOR bits
    sizes = _pair_sizes(options.scheme, options.shingles, num_perm)  # densified pairs of short documents
    # One of bands/rows alone takes as many of the other as k allows, as find does.
    choice = resolve_banding(threshold, values, stored_bits, options.recall, options.bands, options.rows,
                             documents=options.docs, sizes=sizes)
    banding = choice.banding
    at_threshold = banding.recall_at(threshold, sizes)
    accuracy = _accuracy(threshold, bits, num_perm, sizes)
    signature_bytes = _signature_bytes(num_perm, stored_bits)
    corpus = ({} if options.docs is None
              else _corpus_costs(options.docs, choice, num_perm, bits, signature_bytes, options.workers))
    return Plan(
        threshold=threshold,
        bits=bits,
        num_perm=num_perm,
        stored_bits=stored_bits,
        recall_target=options.recall,
        bands=banding.bands,
        rows=banding.rows,
        banding_chosen=choice.chosen,
        curve=_s_curve(threshold, banding, sizes),
        row_agreement_at_threshold=float(row_agreement_probability(threshold, stored_bits)),
        recall_at_threshold=at_threshold,
        false_negative_rate=1.0 - at_threshold,
        candidate_probability_unrelated=banding.recall_at(0.0),
        match_probability=accuracy.match_probability,
        standard_error=accuracy.standard_error,
        signature_bytes=signature_bytes,
        row_overhead_bytes=ROW_OVERHEAD_BYTES,
        storage_factor_32=accuracy.storage_factor_32,
        storage_factor_64=accuracy.storage_factor_64,
        unused_values=values - banding.bands * banding.rows,
        storage_factors=tuple(accuracy.storage_factors.items()),
        recommend_half_bit=accuracy.recommend_half_bit,
        estimator_signature_bytes=_signature_bytes(num_perm, bits),
        value_bytes=value_dtype(math.ceil(stored_bits)).itemsize,
        estimator_value_bytes=value_dtype(math.ceil(bits)).itemsize,
        recall_costs=(recall_costs(threshold, values, stored_bits, compared_recalls(options.recall), options.docs,
                                   sizes) if choice.chosen else ()),
        warnings=tuple(_plan_warnings(options, choice, stored_bits)),
        scheme=options.scheme,
        shingles=options.shingles,
        jobs=options.workers,
        **corpus,
    )
