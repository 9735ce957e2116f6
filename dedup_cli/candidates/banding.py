"""LSH banding: the S-curve, and choosing bands × rows for a threshold.

The k minwise values are split into ``bands`` bands of ``rows`` values; two documents are a candidate
pair when all rows of at least one band agree (Mining of Massive Datasets, Sec. 3.4). With per-row
agreement probability p, Pr(candidate) = 1 − (1 − p^rows)^bands. For b-bit values p is E_b, not R:
unrelated documents agree on a b-bit row with probability about 1/2^b (docs/estimators.md, "Banding").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def row_agreement_probability(resemblance: np.ndarray | float, band_bits: int) -> np.ndarray:
    """E_b in the sparse limit: 1/2^b + (1 − 1/2^b)·R (Li & König 2010, eq. 4 with C_1 = C_2 = 2^-b)."""
    chance = 2.0 ** -min(band_bits, 64)
    return chance + (1.0 - chance) * np.asarray(resemblance, dtype=np.float64)


def candidate_probability(resemblance: np.ndarray | float, bands: int, rows: int, band_bits: int) -> np.ndarray:
    """The S-curve 1 − (1 − p^rows)^bands with p = E_b (MMDS Sec. 3.4.2)."""
    p = row_agreement_probability(resemblance, band_bits)
    # At R = 1, p = 1 and log1p(−1) = −inf gives the right limit 1; it is not worth a warning on stderr.
    with np.errstate(divide="ignore"):
        return -np.expm1(bands * np.log1p(-(p**rows)))


@dataclass(frozen=True)
class Banding:
    """A choice of bands × rows and what it promises."""

    bands: int
    rows: int
    band_bits: int

    def recall_at(self, resemblance: float) -> float:
        return float(candidate_probability(resemblance, self.bands, self.rows, self.band_bits))


def choose_banding(threshold: float, num_perm: int, band_bits: int, recall: float = 0.99) -> Banding:
    """The bands × rows with recall ≥ ``recall`` at R = ``threshold`` and the fewest false candidates.

    For each rows, the fewest bands that reach the recall are taken (more bands only add candidates);
    among those, the choice minimises the area under the S-curve below the threshold, weighting the
    unrelated pairs at R = 0 as heavily as the whole area because they are the vast majority of pairs.
    When no choice fits in ``num_perm`` values, the one with the highest recall is returned.
    """
    grid = np.linspace(0.0, threshold, 201)
    best: tuple[float, Banding] | None = None
    fallback: tuple[float, Banding] | None = None
    p_threshold = float(row_agreement_probability(threshold, band_bits))
    for rows in range(1, num_perm + 1):
        max_bands = num_perm // rows
        hit = p_threshold**rows
        if hit >= 1.0:
            needed = 1
        elif hit <= 0.0:
            continue
        else:
            # p^rows can be so small that the band count needed is astronomically large (or infinite).
            needed_bands = math.log1p(-recall) / math.log1p(-hit)
            needed = math.ceil(needed_bands) if needed_bands <= max_bands else max_bands + 1
        bands = min(needed, max_bands)
        banding = Banding(bands, rows, band_bits)
        if needed > max_bands:
            achieved = banding.recall_at(threshold)
            if fallback is None or achieved > fallback[0]:
                fallback = (achieved, banding)
            continue
        curve = candidate_probability(grid, bands, rows, band_bits)
        area = float(np.trapezoid(curve, grid)) / max(threshold, 1e-12)
        cost = area + float(curve[0])
        if best is None or cost < best[0]:
            best = (cost, banding)
    if best is not None:
        return best[1]
    assert fallback is not None
    return fallback[1]


def resolve_banding(threshold: float, num_perm: int, band_bits: int, recall: float,
                    bands: int | None = None, rows: int | None = None) -> Banding:
    """The banding ``find`` uses and ``plan`` explains: chosen for ``recall`` at R0, or as given.

    With only one of ``bands``/``rows`` given, the other takes as many values as the signature allows. The
    options were checked by :func:`dedup_cli.options.check_banding`; a banding that does not fit in
    ``num_perm`` values is a ValueError here.
    """
    if bands is None and rows is None:
        return choose_banding(threshold, num_perm, band_bits, recall)
    if rows is None:
        assert bands is not None
        rows = num_perm // bands
    elif bands is None:
        bands = num_perm // rows
    if bands < 1 or rows < 1 or bands * rows > num_perm:
        raise ValueError(f"bands {bands} × rows {rows} does not fit in the {num_perm} values of a signature")
    return Banding(bands, rows, band_bits)
