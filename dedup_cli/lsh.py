"""LSH banding: choosing bands × rows for a threshold, band keys, and candidate pairs.

The k minwise values are split into ``bands`` bands of ``rows`` values; two documents are a candidate
pair when all rows of at least one band agree (Mining of Massive Datasets, Sec. 3.4). With per-row
agreement probability p, Pr(candidate) = 1 − (1 − p^rows)^bands. For b-bit values p is E_b, not R:
unrelated documents agree on a b-bit row with probability about 1/2^b (SPEC, LSH banding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dedup_cli.arrays import sorted_unique
from dedup_cli.errors import UsageError
from dedup_cli.hashing import mix64

# Pairs are accumulated as codes i·n + j and de-duplicated whenever this many have piled up.
_DEDUPLICATE_EVERY = 1 << 24


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

    With only one of ``bands``/``rows`` given, the other takes as many values as the signature allows.
    Raises :class:`UsageError` naming the options when they need more than ``num_perm`` values.
    """
    if bands is None and rows is None:
        return choose_banding(threshold, num_perm, band_bits, recall)
    for value, option in ((bands, "--bands"), (rows, "--rows")):
        if value is not None and value < 1:
            raise UsageError(f"{option} {value} must be at least 1")
    if rows is None:
        assert bands is not None
        rows, option = num_perm // bands, f"--bands {bands}"
    elif bands is None:
        bands, option = num_perm // rows, f"--rows {rows}"
    else:
        option = f"--bands {bands} × --rows {rows}"
    if bands < 1 or rows < 1 or bands * rows > num_perm:
        raise UsageError(
            f"{option} needs {max(bands, 1) * max(rows, 1)} values but signatures hold {num_perm} (--num-perm); "
            f"choose bands × rows ≤ {num_perm}"
        )
    return Banding(bands, rows, band_bits)


def band_keys(values: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per band and document: uint64[bands, n_docs].

    ``values`` is uint[n_docs, k]. A band whose rows fit in 64 bits is packed exactly; wider bands are
    combined with a multiply-and-mix hash (collisions have probability ~2^-64).
    """
    n_docs, k = values.shape
    if bands * rows > k:
        raise UsageError(f"--bands {bands} × --rows {rows} exceeds the {k} values per signature; use fewer")
    value_bits = values.dtype.itemsize * 8
    keys = np.empty((bands, n_docs), dtype=np.uint64)
    for band in range(bands):
        # Widen one band at a time: widening all k columns at once would cost 8 bytes per value.
        block = values[:, band * rows : (band + 1) * rows].astype(np.uint64)
        key = np.zeros(n_docs, dtype=np.uint64)
        if rows * value_bits <= 64:
            for row in range(rows):
                key |= block[:, row] << np.uint64(row * value_bits)
        else:
            for row in range(rows):
                key = mix64(key * np.uint64(0x9E3779B97F4A7C15) + block[:, row])
        keys[band] = key
    return keys


def _bucket_pairs(
    sorted_docs: np.ndarray, sorted_keys: np.ndarray, max_bucket: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """All pairs within runs of equal keys; runs longer than ``max_bucket`` are cut to it."""
    n = sorted_keys.size
    if n < 2:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, 0
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    lengths = np.diff(np.r_[starts, n])
    oversized = int(np.count_nonzero(lengths > max_bucket))
    lengths = np.minimum(lengths, max_bucket)
    keep = lengths >= 2
    starts, lengths = starts[keep], lengths[keep]
    if starts.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, oversized
    # Every member at offset o of a run of length L pairs with the L − 1 − o members after it.
    member_run = np.repeat(np.arange(starts.size), lengths)
    member_offset = np.arange(member_run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    member_position = starts[member_run] + member_offset
    partners = lengths[member_run] - 1 - member_offset
    first = np.repeat(member_position, partners)
    step = np.arange(first.size) - np.repeat(np.cumsum(partners) - partners, partners) + 1
    second = first + step
    return sorted_docs[first], sorted_docs[second], oversized


@dataclass
class CandidateResult:
    """Candidate pairs (i < j, sorted, unique) and how many buckets were cut."""

    first: np.ndarray  # int64[n_pairs]
    second: np.ndarray  # int64[n_pairs]
    oversized_buckets: int


def candidate_pairs(
    values: np.ndarray, bands: int, rows: int, eligible: np.ndarray | None = None, max_bucket: int = 1000
) -> CandidateResult:
    """Candidate pairs from banding ``values`` (uint[n_docs, k]); only ``eligible`` documents take part.

    A bucket holding more than ``max_bucket`` documents (boilerplate shared by everything) contributes
    only the pairs among its first ``max_bucket`` members, and is counted in ``oversized_buckets``.
    """
    n_docs = values.shape[0]
    docs = np.arange(n_docs) if eligible is None else np.flatnonzero(eligible)
    # Keys of all documents, then each band's eligible ones: selecting rows of ``values`` first would copy
    # the whole signature matrix.
    keys = band_keys(values, bands, rows)
    codes: list[np.ndarray] = []
    pending = 0
    oversized = 0
    for all_keys in keys:
        band_key = all_keys if docs.size == n_docs else all_keys[docs]
        order = np.argsort(band_key, kind="stable")
        first, second, cut = _bucket_pairs(docs[order], band_key[order], max_bucket)
        oversized += cut
        low, high = np.minimum(first, second), np.maximum(first, second)
        codes.append(low.astype(np.uint64) * np.uint64(n_docs) + high.astype(np.uint64))
        pending += low.size
        if pending > _DEDUPLICATE_EVERY:
            codes = [sorted_unique(np.concatenate(codes))]
            pending = codes[0].size
    unique = sorted_unique(np.concatenate(codes)) if codes else np.empty(0, dtype=np.uint64)
    return CandidateResult(
        first=(unique // np.uint64(n_docs)).astype(np.int64),
        second=(unique % np.uint64(n_docs)).astype(np.int64),
        oversized_buckets=oversized,
    )
