"""The sampling design of ``eval``: strata over every eligible pair of a store, their allocation, and the draw.

The population is every pair of documents with at least one shingle, C(n, 2) pairs. It splits into the banded
pairs, binned by their estimated resemblance R̂ (one stratum per bin of width 1/``bins`` that holds any, R̂
clipped to [0, 1]), and one stratum of every other pair, the low end, drawn uniformly. The banded pairs are the
candidates of ``find``'s banding together with those of a looser banding (:func:`frame_banding`) that reaches
down the S-curve's foot, so that pairs of moderate resemblance that ``find`` does not make candidates are in an R̂
stratum too, instead of lost among the unrelated pairs. ``sample`` pairs are allocated equally across the strata,
a stratum smaller than its share is taken whole and what it leaves is shared among the others (docs/evaluation.md,
"Allocation"); within each stratum the pairs are a simple random sample without replacement. Everything is drawn
from one seeded generator, so the same store, options and seed give the same sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import among, code_pairs, pair_codes
from dedup_cli.candidates.banding import Banding, candidate_probability

MIN_PER_STRATUM = 2  # the fewest units that estimate a stratum's variance
ENUMERATE_PAIRS = 2_000_000  # below this many pairs the unbanded ones are listed; above, drawn by rejection
FRAME_CHANCE_PAIRS = 100_000  # the looser banding may add this many chance pairs (unrelated ones) …
FRAME_CHANCE_PER_DOCUMENT = 10  # … or this many per document, whichever is more


def frame_banding(documents: int, num_perm: int, band_bits: float) -> Banding | None:
    """The loosest banding whose chance candidates stay within budget: the most bands of the fewest rows.

    Fewer rows per band reach further down the S-curve (a pair of resemblance R shares a row with probability
    E = 2^-B + (1 − 2^-B) R), and more bands raise it everywhere; unrelated pairs (R = 0) become candidates with
    probability 1 − (1 − 2^(-B·rows))^bands, so the expected number of them, over C(``documents``, 2) pairs, must
    stay within max(:data:`FRAME_CHANCE_PAIRS`, :data:`FRAME_CHANCE_PER_DOCUMENT` · documents). None when no
    banding fits (then only find's candidates are banded).
    """
    pairs = documents * (documents - 1) / 2
    budget = max(FRAME_CHANCE_PAIRS, FRAME_CHANCE_PER_DOCUMENT * documents)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if pairs * float(candidate_probability(0.0, bands, rows, band_bits)) <= budget:
            return Banding(bands, rows, band_bits)
    return None


REACH_CAPTURE = 0.99  # the share of a resemblance's pairs the banded strata must hold for it to be "reached"


def reach(bandings: list[Banding]) -> float:
    """The lowest resemblance (to 0.01) from which the banded strata hold ≥ 99 % of the pairs, as predicted.

    A pair of resemblance R is banded when some banding makes it a candidate, with probability at least the largest
    of their S-curves (MMDS §3.4.2). Below this R, most such pairs are in the unbanded stratum, which a uniform sample
    meets only in proportion to their share of all pairs: measurements there can miss them (docs/evaluation.md).
    """
    grid = np.round(np.linspace(0.0, 1.0, 101), 2)
    caught = np.max([candidate_probability(grid, b.bands, b.rows, b.band_bits) for b in bandings], axis=0)
    return float(grid[np.argmax(caught >= REACH_CAPTURE)])


def resemblance_bins(values: np.ndarray, bins: int) -> np.ndarray:
    """int64[m]: the bin of each resemblance in ``bins`` equal bins of [0, 1] (values clipped; 1.0 in the last)."""
    clipped = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
    return np.minimum((clipped * bins).astype(np.int64), bins - 1)


def allocate(sizes: np.ndarray, sample: int, minimum: int = MIN_PER_STRATUM) -> np.ndarray:
    """Equal allocation capped at each stratum's size: int64[H] units to draw from strata of ``sizes`` units.

    Every stratum gets the same share c of ``sample``, except that a stratum with fewer than c units is taken
    whole; c is the largest share with Σ min(N_h, c) ≤ ``sample`` (water filling), and the units rounding leaves
    over go to the largest strata. Each stratum gets at least min(``minimum``, N_h) units, so that its variance
    can be estimated, even when that exceeds ``sample``. With Σ N_h ≤ ``sample`` every stratum is taken whole.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.sum() <= sample:
        return sizes.copy()
    order = np.argsort(sizes, kind="stable")
    counts = np.zeros_like(sizes)
    left, strata_left = sample, sizes.size
    for position, stratum in enumerate(order.tolist()):
        share = left // strata_left
        if sizes[stratum] <= share:
            counts[stratum] = sizes[stratum]
        else:
            # This stratum and every larger one get the equal share; the remainder goes to the largest.
            rest = order[position:]
            counts[rest] = share
            spare = left - share * rest.size
            counts[rest[::-1][:spare]] += 1
            break
        left -= int(sizes[stratum])
        strata_left -= 1
    return np.maximum(counts, np.minimum(sizes, minimum))


@dataclass(frozen=True)
class Stratum:
    """One stratum of the pair population: the banded pairs of one R̂ bin, or the pairs no banding found."""

    name: str
    banded: bool
    low: float | None  # the R̂ bin, for banded strata
    high: float | None
    population: int  # N_h
    drawn: int  # n_h before any pair was found unmeasurable


@dataclass(frozen=True)
class Draw:
    """The pairs drawn and where they came from."""

    first: np.ndarray  # int64[n], first < second
    second: np.ndarray  # int64[n]
    stratum: np.ndarray  # int64[n], index into ``strata``
    candidate: np.ndarray  # bool[n], a candidate of find's banding
    strata: list[Stratum]
    population: int  # every eligible pair, C(n_eligible, 2)


def unbanded_pairs(eligible: np.ndarray, banded_codes: np.ndarray, count: int, num_docs: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A simple random sample of ``count`` eligible pairs that are not banded: (int64 first, int64 second).

    Small populations are listed and sampled; large ones by rejection: ordered pairs (i, j), i ≠ j, drawn uniformly
    from the eligible documents are uniform over unordered pairs; banded pairs are rejected, and the first ``count``
    distinct pairs left, by exchangeability, are a uniform sample without replacement.

    Args:
        eligible: int64[n_e], the documents taking part.
        banded_codes: uint64[c], sorted codes (:func:`dedup_cli.array_primitives.pair_codes`) of the banded pairs.
        count: pairs to draw (at most the number of unbanded pairs).
    """
    n_eligible = eligible.size
    total = n_eligible * (n_eligible - 1) // 2
    if count <= 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    if total <= ENUMERATE_PAIRS:
        left, right = np.triu_indices(n_eligible, 1)
        codes = pair_codes(eligible[left], eligible[right], num_docs)
        codes = codes[~among(codes, banded_codes)[0]]
        chosen = np.sort(rng.choice(codes, size=count, replace=False))
    else:
        found = np.empty(0, dtype=np.uint64)
        while found.size < count:
            batch = 2 * count + 64
            i = rng.integers(0, n_eligible, size=batch)
            j = rng.integers(0, n_eligible - 1, size=batch)
            j += j >= i  # j uniform over the others
            codes = pair_codes(eligible[np.minimum(i, j)], eligible[np.maximum(i, j)], num_docs)
            codes = codes[~among(codes, banded_codes)[0]]
            # Keep the order of first appearance: the first ``count`` distinct pairs are a uniform sample.
            merged = np.concatenate([found, codes])
            _, first_seen = np.unique(merged, return_index=True)
            found = merged[np.sort(first_seen)]
        chosen = np.sort(found[:count])
    return code_pairs(chosen, num_docs)


def draw_pairs(codes: np.ndarray, estimate: np.ndarray, candidate: np.ndarray, eligible: np.ndarray,
               sample: int, seed: int, bins: int) -> Draw:
    """Stratify every eligible pair and draw ``sample`` of them (see the module docstring).

    Args:
        codes: uint64[c], the banded pairs' sorted, distinct codes (:func:`dedup_cli.array_primitives.pair_codes`).
        estimate: float64[c], each banded pair's R̂ (on all stored bits), the stratification variable.
        candidate: bool[c], which banded pairs are candidates of find's banding.
        eligible: bool[n_docs], the documents with at least one shingle.
        sample: pairs to draw in all.
        seed: the generator's seed.
        bins: R̂ bins of [0, 1] for the banded strata.
    """
    num_docs = eligible.size
    rng = np.random.default_rng(seed)
    documents = np.flatnonzero(eligible).astype(np.int64)
    population = documents.size * (documents.size - 1) // 2
    binned = resemblance_bins(estimate, bins)
    bin_sizes = np.bincount(binned, minlength=bins)
    used = np.flatnonzero(bin_sizes)
    outside = population - codes.size
    sizes = np.concatenate([bin_sizes[used], [outside] if outside > 0 else []]).astype(np.int64)
    counts = allocate(sizes, sample)
    strata: list[Stratum] = []
    chosen_codes: list[np.ndarray] = []
    flags: list[np.ndarray] = []
    for index, bin_index in enumerate(used.tolist()):
        members = np.flatnonzero(binned == bin_index)
        chosen = np.sort(rng.choice(members, size=int(counts[index]), replace=False))
        low, high = bin_index / bins, (bin_index + 1) / bins
        strata.append(Stratum(f"banded, R̂ in [{low:.2g}, {high:.2g}{']' if high >= 1 else ')'}", True, low, high,
                              int(sizes[index]), int(counts[index])))
        chosen_codes.append(codes[chosen])
        flags.append(candidate[chosen])
    if outside > 0:
        first, second = unbanded_pairs(documents, codes, int(counts[-1]), num_docs, rng)
        strata.append(Stratum("not banded", False, None, None, int(outside), int(counts[-1])))
        chosen_codes.append(pair_codes(first, second, num_docs))
        flags.append(np.zeros(first.size, dtype=bool))
    drawn = np.concatenate(chosen_codes) if chosen_codes else np.empty(0, dtype=np.uint64)
    labels = np.repeat(np.arange(len(strata), dtype=np.int64), [piece.size for piece in chosen_codes])
    return Draw(*code_pairs(drawn, num_docs), labels, np.concatenate(flags) if flags else np.empty(0, dtype=bool),
                strata, population)
