"""LSH banding: the S-curve, and choosing bands × rows for a threshold and a corpus size.

The k minwise values are split into ``bands`` bands of ``rows`` values; two documents are a candidate
pair when all rows of at least one band agree (Mining of Massive Datasets, Sec. 3.4). With per-row
agreement probability p, Pr(candidate) = 1 − (1 − p^rows)^bands. For b-bit values p is E_b, not R:
unrelated documents agree on a b-bit row with probability about 1/2^b (docs/estimators.md, "Banding"). Rows of
XOR bits (a store signed with b = 1/2) agree with probability T = (1 + R²)/2 instead (Li & König 2010, eq. 23).

Corpus size. Two unrelated documents (R = 0) share a band key with probability E_B(0)^rows = 2^(−B·rows)
and become a candidate with probability P_0 = 1 − (1 − 2^(−B·rows))^bands ≈ bands · 2^(−B·rows), so n
documents give C(n, 2) · P_0 chance candidates: quadratic in n for a fixed banding.
:func:`choose_banding_for_corpus` keeps them at most :data:`CHANCE_FRACTION` · n by asking for more rows as n
grows (each row divides P_0 by 2^B), then for as many bands as the recall at R0 needs; where that budget does
not bind (about 9.6·10^4 documents at R0 = 0.5, k = 256, B = 8) the choice is :func:`choose_banding`'s.

Document size. Values made by one permutation hashing with densification copy a few minima into many positions
when the documents have fewer shingles than k, so the number of agreeing rows varies more than a binomial's and
the S-curve is flatter (:class:`PairSizes`, :func:`row_spread`): given the pair's sizes, the curve is averaged over
the per-row agreement probability, whose spread makes the count's variance that of
:mod:`dedup_cli.estimates.densified`. ``find`` chooses its banding for the corpus's shortest documents.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dedup_cli.estimates.densified import sharing_factor, union_size
from dedup_cli.options.vocabulary import (
    DEFAULT_NUM_PERM,
    DEFAULT_STORED_BITS,
    HALF_BIT,
    MAX_NUM_PERM,  # no larger k is ever recommended
)


def row_agreement_probability(resemblance: np.ndarray | float, band_bits: float) -> np.ndarray:
    """E_b in the sparse limit: 1/2^b + (1 − 1/2^b)·R (Li & König 2010, eq. 4 with C_1 = C_2 = 2^-b); for rows of
    XOR bits (``band_bits`` = :data:`HALF_BIT`, a store signed with b = 1/2) T = E_1² + (1 − E_1)² = (1 + R²)/2
    (eq. 23): two XOR bits agree when both of their 1-bit values agree or both differ."""
    resemblance = np.asarray(resemblance, dtype=np.float64)
    if band_bits == HALF_BIT:
        return 0.5 * (1.0 + resemblance * resemblance)
    chance = 2.0 ** -min(band_bits, 64)
    return chance + (1.0 - chance) * resemblance


@dataclass(frozen=True)
class PairSizes:
    """Pairs of documents of ``first`` and ``second`` shingles (floats or float64 arrays that broadcast against the
    resemblances), signed by one permutation hashing with densification into ``bins`` bins (k, or 2k for a store
    of k XOR bits): what the S-curve of such values depends on besides R (:func:`row_spread`)."""

    bins: int
    first: ArrayLike
    second: ArrayLike


# A pair of resemblance strictly between 0 and 1 has a union of two shingles at least; the S-curve of a pair of
# one-shingle documents is R's own (0 or 1), whatever the spread.
_SMALLEST_UNION = 2.0
# The three points and weights of the mixture over the per-row agreement probability: those of the normal
# distribution's three-point Gauss–Hermite rule (mean, variance and kurtosis of a normal).
_MIXTURE_OFFSETS = (-math.sqrt(3.0), 0.0, math.sqrt(3.0))
_MIXTURE_WEIGHTS = (1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0)


def row_spread(resemblance: np.ndarray | float, band_bits: float, sizes: PairSizes) -> np.ndarray:
    """σ², the variance of the per-row agreement probability p over densified pairs of these sizes: float64[...].

    The rows of one pair are exchangeable (the bins are symmetric), so its S-curve is an average over the number
    X of agreeing positions; as a mixture of binomials, X | p ~ Binomial(k, p), Var(X) = k E(1 − E) + k (k − 1) σ².
    Matched to Var(X) on densified bins, k E(1 − E) + k (1 − 2^-B)² (ψ − 1) R (1 − R) for rows of B bits (eq. D4)
    and k_x T(1 − T)(φ_T − 1) more than the binomial for XOR bits (eq. D5), σ² = (extra)/(k − 1), and 0 where
    densification makes X vary less than a binomial (ψ < 1, documents with many more shingles than k: the
    independent S-curve is then a little pessimistic).
    """
    R = np.clip(np.asarray(resemblance, dtype=np.float64), 0.0, 1.0)
    union = np.maximum(np.asarray(union_size(R, sizes.first, sizes.second), dtype=np.float64), _SMALLEST_UNION)
    psi = np.asarray(sharing_factor(union, sizes.bins), dtype=np.float64)
    if band_bits == HALF_BIT:
        positions = sizes.bins // 2
        p = row_agreement_probability(R, band_bits)
        excess = p * (1.0 - p) * (psi - 1.0) * R * R / (1.0 + R * R)  # T (1 − T)(φ_T − 1), φ_T of eq. D5
    else:
        positions = sizes.bins
        chance = 2.0 ** -min(band_bits, 64)
        excess = (1.0 - chance) ** 2 * (psi - 1.0) * R * (1.0 - R)
    return np.maximum(excess, 0.0) / max(positions - 1, 1)


def candidate_probability(resemblance: np.ndarray | float, bands: int, rows: int, band_bits: float,
                          sizes: PairSizes | None = None) -> np.ndarray:
    """The S-curve 1 − (1 − p^rows)^bands with p = E_b (MMDS Sec. 3.4.2); for densified pairs of ``sizes``, its
    average over p = E_b + δ, δ at −√3 σ, 0, √3 σ with weights 1/6, 2/3, 1/6, σ² of :func:`row_spread`."""
    p = row_agreement_probability(resemblance, band_bits)
    if sizes is None:
        return _s_curve(p, bands, rows)
    spread = np.sqrt(row_spread(resemblance, band_bits, sizes))
    curve = np.zeros(np.broadcast_shapes(np.shape(p), np.shape(spread)))
    for offset, weight in zip(_MIXTURE_OFFSETS, _MIXTURE_WEIGHTS, strict=True):
        curve += weight * _s_curve(np.clip(p + offset * spread, 0.0, 1.0), bands, rows)
    return curve


def _s_curve(p: np.ndarray, bands: int | np.ndarray, rows: int) -> np.ndarray:
    """1 − (1 − p^rows)^bands."""
    # At R = 1, p = 1 and log1p(−1) = −inf gives the right limit 1; it is not worth a warning on stderr.
    with np.errstate(divide="ignore"):
        return -np.expm1(bands * np.log1p(-(p**rows)))


@dataclass(frozen=True)
class Banding:
    """A choice of bands × rows and what it promises."""

    bands: int
    rows: int
    band_bits: float

    def recall_at(self, resemblance: float, sizes: PairSizes | None = None) -> float:
        """The probability that a pair of this resemblance becomes a candidate: the S-curve 1 − (1 − p^r)^b, p the
        chance that one row of b-bit values agrees (MMDS Sec. 3.4.2), for densified pairs of ``sizes`` averaged
        over p (:func:`candidate_probability`)."""
        return float(candidate_probability(resemblance, self.bands, self.rows, self.band_bits, sizes))


def choose_banding(threshold: float, num_perm: int, band_bits: float, recall: float = 0.99,
                   sizes: PairSizes | None = None) -> Banding:
    """The bands × rows with recall ≥ ``recall`` at R = ``threshold`` and the fewest false candidates.

    For each rows, the fewest bands that reach the recall are taken (more bands only add candidates);
    among those, the choice minimises the area under the S-curve below the threshold, weighting the
    unrelated pairs at R = 0 as heavily as the whole area because they are the vast majority of pairs.
    When no choice fits in ``num_perm`` values, the one with the highest recall is returned. With ``sizes`` the
    S-curve is that of densified pairs of those sizes (:func:`candidate_probability`).
    """
    grid = np.linspace(0.0, threshold, 201)
    best: tuple[float, Banding] | None = None
    fallback: tuple[float, Banding] | None = None
    p_threshold = float(row_agreement_probability(threshold, band_bits))
    for rows in range(1, num_perm + 1):
        max_bands = num_perm // rows
        if p_threshold**rows <= 0.0:
            continue
        # p^rows can be so small that the band count needed is astronomically large (or infinite).
        needed_bands = bands_for_recall(threshold, rows, band_bits, recall, sizes, most=max_bands)
        needed = int(needed_bands) if needed_bands <= max_bands else max_bands + 1
        bands = min(needed, max_bands)
        banding = Banding(bands, rows, band_bits)
        if needed > max_bands:
            achieved = banding.recall_at(threshold, sizes)
            if fallback is None or achieved > fallback[0]:
                fallback = (achieved, banding)
            continue
        curve = candidate_probability(grid, bands, rows, band_bits, sizes)
        area = float(np.trapezoid(curve, grid)) / max(threshold, 1e-12)
        cost = area + float(curve[0])
        if best is None or cost < best[0]:
            best = (cost, banding)
    if best is not None:
        return best[1]
    assert fallback is not None
    return fallback[1]


# Chance candidates allowed per document. Per document, banding already moves ``bands`` band keys (35 at
# R0 = 0.5); a candidate pair costs one pair code and two signature look-ups when it is scored. At 0.1 · n chance
# candidates those add a few per cent to the work of banding and stay below the true candidates of a corpus with
# even 5 % near-duplicates; 0.01 · n would buy nothing measurable but need a row more about log2(10)/B rows sooner.
CHANCE_FRACTION = 0.1


# Bands wider than 64 bits are hashed to 64-bit keys (``buckets.band_keys``), which collide with probability 2^-64.
_KEY_BITS = 64


def _band_collision(rows: int, band_bits: float) -> float:
    """The probability that two unrelated documents share one band's key: E_B(0)^rows (+ 2^-64 when hashed)."""
    q = float(row_agreement_probability(0.0, band_bits)) ** rows
    return q + 2.0**-_KEY_BITS if rows * math.ceil(band_bits) > _KEY_BITS else q  # an XOR bit is one stored bit


def chance_probability(bands: int, rows: int, band_bits: float) -> float:
    """P_0 = 1 − (1 − E_B(0)^rows)^bands: the probability that two unrelated documents become a candidate."""
    return float(-math.expm1(bands * math.log1p(-_band_collision(rows, band_bits))))


def expected_chance_candidates(documents: int, bands: int, rows: int, band_bits: float) -> float:
    """C(n, 2) · P_0: the expected number of candidate pairs among ``documents`` unrelated documents."""
    return documents * (documents - 1) / 2.0 * chance_probability(bands, rows, band_bits)


def bands_for_recall(threshold: float, rows: int, band_bits: float, recall: float, sizes: PairSizes | None = None,
                     most: int | None = None) -> float:
    """The fewest bands with 1 − (1 − E_B(R0)^rows)^bands ≥ ``recall``, rounded as :func:`choose_banding` does;
    ``math.inf`` when E_B(R0)^rows underflows (no number of bands reaches the recall). With ``sizes``, the fewest
    bands whose S-curve for densified pairs of those sizes reaches it (searched up to ``most`` bands, 2^20 when
    None; ``math.inf`` beyond)."""
    hit = float(row_agreement_probability(threshold, band_bits)) ** rows
    if hit >= 1.0 and sizes is None:
        return 1.0
    if hit <= 0.0:
        return math.inf
    if sizes is not None:
        return _bands_for_mixture(threshold, rows, band_bits, recall, sizes, 1 << 20 if most is None else most)
    needed = math.log1p(-recall) / math.log1p(-hit)
    return float(math.ceil(needed)) if math.isfinite(needed) else math.inf


def _bands_for_mixture(threshold: float, rows: int, band_bits: float, recall: float, sizes: PairSizes,
                       most: int) -> float:
    """The fewest bands ≤ ``most`` whose densified S-curve (:func:`candidate_probability`) reaches ``recall`` at
    R0, by bisection (the curve grows with the bands); ``math.inf`` when ``most`` do not."""
    def reaches(bands: int) -> bool:
        return float(candidate_probability(threshold, bands, rows, band_bits, sizes)) >= recall

    if most < 1 or not reaches(most):
        return math.inf
    low, high = 0, most  # reaches(high), not reaches(low)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return float(high)


def _max_bands_for_budget(documents: int, rows: int, band_bits: float, budget: float) -> float:
    """The most bands whose chance candidates stay within ``budget``: C(n, 2) · (1 − (1 − q)^bands) ≤ budget."""
    pairs = documents * (documents - 1) / 2.0
    if budget >= pairs:
        return math.inf
    q = _band_collision(rows, band_bits)
    return math.floor(math.log1p(-budget / pairs) / math.log1p(-q) * (1 + 1e-12)) if q > 0.0 else math.inf


def required_num_perm(threshold: float, band_bits: float, recall: float, documents: int | None,
                      chance_fraction: float = CHANCE_FRACTION) -> int | None:
    """The smallest k for which some bands × rows reaches ``recall`` at R0 within ``chance_fraction`` · n chance
    candidates (any number of them without ``documents``); None when no k ≤ 2^16 does.

    For each rows, the fewest bands for the recall (:func:`bands_for_recall`) must not exceed the most bands the
    budget allows; rows are tried until bands · rows alone exceeds the best k found (or 2^16).
    """
    best: int | None = None
    for rows in range(1, MAX_NUM_PERM + 1):
        needed = bands_for_recall(threshold, rows, band_bits, recall)
        if needed * rows > MAX_NUM_PERM or (best is not None and rows > best):
            break
        if documents is None or needed <= _max_bands_for_budget(documents, rows, band_bits,
                                                                 chance_fraction * documents):
            best = int(needed) * rows if best is None else min(best, int(needed) * rows)
    return best


LAYOUT_BITS = (8, 16, 32)
"""The stored bits a store layout is chosen among: whole bytes, which band keys and the estimators read without
unpacking bits (any B from 1 to 64 can be asked for)."""


@dataclass(frozen=True)
class StoreLayout:
    """A store's k values of B bits each."""

    num_perm: int
    stored_bits: int

    @property
    def signature_bytes(self) -> int:
        return (self.num_perm * self.stored_bits + 7) // 8


def cheapest_layout(threshold: float, recall: float, documents: int | None, num_perm: int,
                    stored_bits: float) -> StoreLayout | None:
    """The cheapest store that serves ``recall`` at R0 with at most :data:`CHANCE_FRACTION` chance candidates a
    document among ``documents``, for a store of ``num_perm`` values of ``stored_bits`` bits that does not: the
    fewest signature bytes among the same bytes in wider values (fewer of them, at least the banding's), the same
    values wider, and more values as wide (:func:`required_num_perm` each); ties to more values, whose estimate is
    the more precise. None when none of :data:`LAYOUT_BITS` up to 2^16 values does."""
    now = StoreLayout(num_perm, math.ceil(stored_bits))
    found: list[StoreLayout] = []
    for bits in LAYOUT_BITS:
        needed = required_num_perm(threshold, bits, recall, documents)
        if needed is None:
            continue
        if bits > stored_bits:
            same_bytes = now.signature_bytes * 8 // bits
            found += [StoreLayout(same_bytes, bits)] if same_bytes >= needed else []
            found += [StoreLayout(num_perm, bits)] if num_perm >= needed else []
        if bits >= stored_bits:
            found.append(StoreLayout(max(needed, num_perm), bits))
    return min(found, key=lambda layout: (layout.signature_bytes, -layout.num_perm), default=None)


def layout_for_documents(documents: int, threshold: float = 0.5, recall: float = 0.99) -> StoreLayout:
    """A new store's layout for about ``documents`` documents (``sign --docs``): the most values that fit in the
    default's signature bytes (256) with a banding that serves ``find --threshold`` R0 (0.5 by default: higher
    thresholds need fewer rows) within the chance budget, the narrowest values first, as they give the most values:
    256 of 8 bits up to about 10^5 documents, then 128 of 16 bits (enough at R0 0.5 to 10^10 and beyond). When
    none fits, the cheapest layout that does (:func:`cheapest_layout`)."""
    default = StoreLayout(DEFAULT_NUM_PERM, DEFAULT_STORED_BITS)
    for bits in LAYOUT_BITS:
        num_perm = default.signature_bytes * 8 // bits
        needed = required_num_perm(threshold, bits, recall, documents)
        if needed is not None and needed <= num_perm:
            return StoreLayout(num_perm, bits)
    return cheapest_layout(threshold, recall, documents, default.num_perm, default.stored_bits) or default


@dataclass(frozen=True)
class BandingChoice:
    """The banding ``find`` uses (or ``plan`` explains) and what it promises for a corpus of ``documents``.

    ``chosen`` is False when the bands or rows were given. Without a corpus size (``documents`` None) the
    budget is not known: ``chance_candidates``, ``budget`` and ``required_num_perm`` are None and
    ``meets_budget`` is True. ``required_num_perm`` is the smallest k that meets both the recall and the budget
    (None when none ≤ 2^16 does), as ``sign --num-perm`` takes it: for rows of XOR bits, twice the XOR bits.
    """

    banding: Banding
    chosen: bool
    recall_target: float
    recall: float
    documents: int | None = None
    chance_candidates: float | None = None
    budget: float | None = None
    required_num_perm: int | None = None
    sizes: PairSizes | None = None  # the densified pairs the recall is for (the corpus's shortest documents)

    @property
    def meets_recall(self) -> bool:
        """Whether the banding reaches the recall asked for at R0."""
        return self.recall >= self.recall_target

    @property
    def shingles(self) -> int | None:
        """The shingles of the shortest documents the recall is for (one permutation hashing), else None."""
        return None if self.sizes is None else int(np.min(self.sizes.first))

    @property
    def meets_budget(self) -> bool:
        """Whether the chance candidates expected stay within the budget (0.1 a document), when one is set."""
        return self.chance_candidates is None or self.budget is None or self.chance_candidates <= self.budget


def choose_banding_for_corpus(threshold: float, num_perm: int, band_bits: float, documents: int, recall: float = 0.99,
                              chance_fraction: float = CHANCE_FRACTION, sizes: PairSizes | None = None) -> Banding:
    """Bands × rows with recall ≥ ``recall`` at R0 and at most ``chance_fraction`` · n expected chance candidates.

    Among the bandings that meet both, the one :func:`choose_banding` prefers (least normalised area under the
    S-curve on [0, R0] plus the curve at R = 0), so that where the budget does not bind the choice is the
    per-pair one. For each rows only the fewest bands reaching the recall are considered (more bands only add
    candidates). When no banding within k meets both: the recall-meeting banding with the fewest chance
    candidates (the recall is what was asked for), else the highest recall, as :func:`choose_banding` does.

    Args:
        threshold: R0 in (0, 1].
        num_perm: k, the values per signature.
        band_bits: B, the stored bits per value that band keys use.
        documents: n, the documents that take part (those with at least one shingle).
        recall: the S-curve's required height at R0, in (0, 1).
        chance_fraction: chance candidates allowed per document.
        sizes: with values made by one permutation hashing, the sizes of the pairs the recall must hold for
            (the S-curve of :func:`candidate_probability`); None for k independent permutations.
    """
    budget = chance_fraction * documents
    grid = np.linspace(0.0, threshold, 201)
    best: tuple[float, Banding] | None = None
    fewest_chance: tuple[float, Banding] | None = None
    for rows in range(1, num_perm + 1):
        needed = bands_for_recall(threshold, rows, band_bits, recall, sizes, most=num_perm // rows)
        if needed > num_perm // rows:
            continue
        banding = Banding(int(needed), rows, band_bits)
        chance = expected_chance_candidates(documents, banding.bands, rows, band_bits)
        if fewest_chance is None or chance < fewest_chance[0]:
            fewest_chance = (chance, banding)
        if chance > budget:
            continue
        curve = candidate_probability(grid, banding.bands, rows, band_bits, sizes)
        cost = float(np.trapezoid(curve, grid)) / max(threshold, 1e-12) + float(curve[0])
        if best is None or cost < best[0]:
            best = (cost, banding)
    chosen = best or fewest_chance
    return chosen[1] if chosen is not None else choose_banding(threshold, num_perm, band_bits, recall, sizes)


def resolve_banding(threshold: float, num_perm: int, band_bits: float, recall: float, bands: int | None = None,
                    rows: int | None = None, documents: int | None = None,
                    sizes: PairSizes | None = None) -> BandingChoice:
    """The banding ``find`` uses and ``plan`` explains: chosen for ``recall`` at R0 (and, given the number of
    ``documents``, for at most :data:`CHANCE_FRACTION` of a chance candidate per document), or as given; with
    ``sizes``, for the S-curve of densified pairs of those sizes (:class:`PairSizes`), the recall too.

    With only one of ``bands``/``rows`` given, the other takes as many values as the signature allows. The
    options were checked by :func:`dedup_cli.options.checks.check_banding`; a banding that does not fit in
    ``num_perm`` values is a ValueError here.
    """
    chosen = bands is None and rows is None
    if chosen:
        banding = (choose_banding(threshold, num_perm, band_bits, recall, sizes) if documents is None
                   else choose_banding_for_corpus(threshold, num_perm, band_bits, documents, recall, sizes=sizes))
    else:
        if rows is None:
            assert bands is not None
            rows = num_perm // bands
        elif bands is None:
            bands = num_perm // rows
        if bands < 1 or rows < 1 or bands * rows > num_perm:
            raise ValueError(f"bands {bands} × rows {rows} does not fit in the {num_perm} values of a signature")
        banding = Banding(bands, rows, band_bits)
    choice = BandingChoice(banding, chosen, recall, banding.recall_at(threshold, sizes), sizes=sizes)
    if documents is None:
        return choice
    required = required_num_perm(threshold, band_bits, recall, documents)
    if required is not None and band_bits == HALF_BIT:
        required *= 2  # each XOR bit combines two permutations
    return dataclasses.replace(
        choice, documents=documents, budget=CHANCE_FRACTION * documents,
        chance_candidates=expected_chance_candidates(documents, banding.bands, banding.rows, band_bits),
        required_num_perm=required,
    )
