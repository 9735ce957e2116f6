"""LSH banding: the S-curve, choosing bands × rows, band keys and candidate pairs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dedup_cli.candidates import buckets
from dedup_cli.candidates.banding import Banding, candidate_probability, choose_banding
from dedup_cli.candidates.buckets import band_keys, candidate_pairs

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
NUM_PERMS = (64, 128, 256)
BAND_BITS = (1, 2, 8)


# --- the S-curve -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resemblance", "bands", "rows", "band_bits", "expected"),
    [
        # p = 1/2 + 1/2 · 0.5 = 0.75; p² = 0.5625; 1 − 0.4375⁴ = 1 − 0.0366363525390625.
        (0.5, 4, 2, 1, 0.9633636474609375),
        # p = 1/4 + 3/4 · 0.2 = 0.4; p³ = 0.064; 1 − 0.936² = 1 − 0.876096.
        (0.2, 2, 3, 2, 0.123904),
        # Unrelated documents, one band of one 8-bit row: p = 1/256.
        (0.0, 1, 1, 8, 0.00390625),
        # p = 1/4 + 3/4 · 0.75 = 13/16; one band of two rows: (13/16)² = 169/256.
        (0.75, 1, 2, 2, 169 / 256),
        # Identical documents are always candidates.
        (1.0, 3, 7, 1, 1.0),
        # 64 bits: p = R up to 2^-64; 1 − (1 − 0.5⁵)^20 = 1 − (31/32)^20.
        (0.5, 20, 5, 64, 1 - (31 / 32) ** 20),
    ],
)
def test_candidate_probability_hand_computed(
    resemblance: float, bands: int, rows: int, band_bits: int, expected: float
) -> None:
    assert float(candidate_probability(resemblance, bands, rows, band_bits)) == pytest.approx(expected, rel=1e-12)


def test_candidate_probability_is_vectorised_and_increasing() -> None:
    resemblance = np.linspace(0.0, 1.0, 101)
    curve = candidate_probability(resemblance, 20, 5, 2)
    assert curve.shape == resemblance.shape
    assert np.all(np.diff(curve) >= 0)
    assert np.all(np.diff(curve[curve < 0.999]) > 0)  # strictly increasing until it saturates at 1
    p = 0.25 + 0.75 * resemblance
    assert np.allclose(curve, 1 - (1 - p**5) ** 20, rtol=1e-12, atol=1e-15)


def test_banding_recall_at_is_the_s_curve() -> None:
    banding = Banding(bands=4, rows=2, band_bits=1)
    assert banding.recall_at(0.5) == pytest.approx(0.9633636474609375, rel=1e-12)


# --- choosing bands × rows ---------------------------------------------------------------------------------


@pytest.mark.parametrize("band_bits", BAND_BITS)
@pytest.mark.parametrize("num_perm", NUM_PERMS)
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_choose_banding_reaches_recall_within_num_perm(threshold: float, num_perm: int, band_bits: int) -> None:
    banding = choose_banding(threshold, num_perm, band_bits)
    assert banding.band_bits == band_bits
    assert banding.bands >= 1 and banding.rows >= 1
    assert banding.bands * banding.rows <= num_perm
    assert banding.recall_at(threshold) >= 0.99
    # The fewest bands for its rows: one band fewer misses the recall (more bands only add candidates).
    if banding.bands > 1:
        assert Banding(banding.bands - 1, banding.rows, band_bits).recall_at(threshold) < 0.99


@pytest.mark.parametrize("recall", [0.9, 0.999])
def test_choose_banding_honours_other_recalls(recall: float) -> None:
    banding = choose_banding(0.7, 128, 8, recall=recall)
    assert banding.recall_at(0.7) >= recall
    assert banding.bands * banding.rows <= 128


def test_threshold_one_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    # p = 1 at R = 1: log1p(−1) = −inf must give 1 without a RuntimeWarning on the user's stderr.
    banding = choose_banding(1.0, 128, 8)
    assert banding.recall_at(1.0) == 1.0
    assert float(candidate_probability(1.0, 5, 3, 1)) == 1.0
    assert [str(warning.message) for warning in recwarn] == []


def test_choose_banding_on_two_bits_is_unselective() -> None:
    # docs/estimators.md, "Banding": at R0 = 0.5, b = 2, k = 256, recall 0.99 leaves about 5 % of unrelated pairs.
    banding = choose_banding(0.5, 256, 2)
    assert 0.03 <= banding.recall_at(0.0) <= 0.07
    # Eight bits separate the same threshold from unrelated pairs far better.
    assert choose_banding(0.5, 256, 8).recall_at(0.0) < 1e-4


def _simulate_pairs(
    rng: np.random.Generator, num_pairs: int, num_perm: int, band_bits: int, resemblance: float
) -> np.ndarray:
    """Signatures of ``num_pairs`` pairs (rows 2i, 2i + 1) agreeing per position with probability E_b exactly.

    Document B copies each value of A with probability R and otherwise draws a fresh uniform b-bit value,
    which agrees by chance with probability 2^-b: E_b = 2^-b + (1 − 2^-b)·R (docs/estimators.md, "Two-way",
    sparse limit).
    """
    high = 1 << band_bits
    a = rng.integers(0, high, size=(num_pairs, num_perm), dtype=np.uint8 if band_bits <= 8 else np.uint64)
    redraw = rng.integers(0, high, size=a.shape, dtype=a.dtype)
    b = np.where(rng.random(a.shape) < resemblance, a, redraw)
    values = np.empty((2 * num_pairs, num_perm), dtype=a.dtype)
    values[0::2], values[1::2] = a, b
    return values


def _measured_recall(values: np.ndarray, banding: Banding, chunk_pairs: int = 250) -> float:
    """Fraction of the designed pairs (2i, 2i + 1) that became candidates; chance pairs across them are ignored."""
    num_pairs = values.shape[0] // 2
    found = 0
    for start in range(0, num_pairs, chunk_pairs):
        chunk = values[2 * start : 2 * min(start + chunk_pairs, num_pairs)]
        result = candidate_pairs(chunk, banding.bands, banding.rows)
        found += int(np.count_nonzero((result.first % 2 == 0) & (result.second == result.first + 1)))
    return found / num_pairs


def _resemblance_with_recall(banding: Banding, target: float) -> float:
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if banding.recall_at(middle) < target else (low, middle)
    return (low + high) / 2


@pytest.mark.parametrize("band_bits", BAND_BITS)
@pytest.mark.parametrize("threshold", (0.3, 0.5, 0.8, 0.95))
def test_predicted_recall_matches_measured_recall(threshold: float, band_bits: int) -> None:
    num_perm, num_pairs = 128, 2000
    banding = choose_banding(threshold, num_perm, band_bits)
    rng = np.random.default_rng([20100426, int(threshold * 100), band_bits])
    # At the threshold, and on the steep part of the S-curve where the prediction is most fragile.
    points = [threshold, _resemblance_with_recall(banding, 0.5), _resemblance_with_recall(banding, 0.15)]
    for resemblance in points:
        predicted = banding.recall_at(resemblance)
        measured = _measured_recall(_simulate_pairs(rng, num_pairs, num_perm, band_bits, resemblance), banding)
        # Binomial(num_pairs, predicted): 4 standard errors, plus half a point for the bisection.
        tolerance = 4 * math.sqrt(predicted * (1 - predicted) / num_pairs) + 0.005
        assert abs(measured - predicted) <= tolerance, (resemblance, banding, measured, predicted)


# --- band keys ---------------------------------------------------------------------------------------------


def test_band_keys_pack_narrow_bands_exactly() -> None:
    values = np.array([[1, 2, 3, 4, 9], [0xFF, 0, 0, 0xFF, 9]], dtype=np.uint8)
    keys = band_keys(values, bands=2, rows=2)
    assert keys.dtype == np.uint64 and keys.shape == (2, 2)
    # Row r of a band occupies bits 8r … 8r + 7 of the key; the fifth value is in no band.
    assert keys.tolist() == [[0x0201, 0x00FF], [0x0403, 0xFF00]]


def test_band_keys_pack_up_to_64_bits() -> None:
    values = np.array([[0x1111, 0x2222, 0x3333, 0x4444]], dtype=np.uint16)
    assert band_keys(values, bands=1, rows=4).tolist() == [[0x4444333322221111]]


@pytest.mark.parametrize(
    ("dtype", "rows"),
    [(np.uint8, 1), (np.uint8, 8), (np.uint8, 9), (np.uint16, 4), (np.uint16, 5), (np.uint64, 1), (np.uint64, 3)],
    ids=["u8x1-packed", "u8x8-packed", "u8x9-hashed", "u16x4-packed", "u16x5-hashed", "u64x1-packed", "u64x3-hashed"],
)
def test_band_keys_equal_rows_equal_keys_one_differing_row_different_key(dtype: type, rows: int) -> None:
    rng = np.random.default_rng(7)
    bands, n_docs = 3, 40
    info = np.iinfo(dtype)
    base = rng.integers(0, int(info.max), size=(1, bands * rows), dtype=dtype, endpoint=True)
    values = np.repeat(base, n_docs, axis=0)
    # Document d > 0 differs from document 0 in exactly one position, each in a different place or value.
    for doc in range(1, n_docs):
        position = (doc - 1) % (bands * rows)
        values[doc, position] = dtype(int(base[0, position]) ^ (1 + (doc - 1) // (bands * rows)))
    keys = band_keys(values, bands, rows)
    for doc in range(1, n_docs):
        changed_band = ((doc - 1) % (bands * rows)) // rows
        for band in range(bands):
            same = keys[band, doc] == keys[band, 0]
            assert same == (band != changed_band), (doc, band)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    st.sampled_from([(np.uint8, 4), (np.uint8, 8), (np.uint8, 12), (np.uint32, 2), (np.uint32, 3)]),
    st.integers(2, 30),
    st.integers(0, 2**32 - 1),
)
def test_band_keys_equal_exactly_when_bands_equal(layout: tuple[type, int], n_docs: int, seed: int) -> None:
    dtype, rows = layout
    bands = 2
    # A two-letter alphabet makes equal bands common.
    values = np.random.default_rng(seed).integers(0, 2, size=(n_docs, bands * rows)).astype(dtype)
    keys = band_keys(values, bands, rows)
    for band in range(bands):
        block = values[:, band * rows : (band + 1) * rows]
        rows_equal = (block[:, None, :] == block[None, :, :]).all(axis=2)
        assert np.array_equal(keys[band][:, None] == keys[band][None, :], rows_equal)


def test_band_keys_refuse_more_values_than_the_signature_holds() -> None:
    values = np.zeros((3, 10), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"bands 4 × rows 3 exceeds the 10 values"):
        band_keys(values, bands=4, rows=3)
    with pytest.raises(ValueError, match="exceeds the 10 values"):
        candidate_pairs(values, bands=11, rows=1)
    # Exactly k values is fine.
    assert band_keys(values, bands=5, rows=2).shape == (5, 3)


# --- candidate pairs ---------------------------------------------------------------------------------------


def _brute_force_pairs(values: np.ndarray, bands: int, rows: int, eligible: np.ndarray | None) -> list[tuple[int, int]]:
    """Every eligible pair i < j sharing all rows of at least one band (MMDS Sec. 3.4.1)."""
    n_docs = values.shape[0]
    allowed = np.ones(n_docs, dtype=bool) if eligible is None else eligible
    pairs = []
    for i, j in itertools.combinations(range(n_docs), 2):
        if not (allowed[i] and allowed[j]):
            continue
        if any(
            np.array_equal(values[i, band * rows : (band + 1) * rows], values[j, band * rows : (band + 1) * rows])
            for band in range(bands)
        ):
            pairs.append((i, j))
    return pairs


@st.composite
def banded_signatures(draw: st.DrawFn) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    rows = draw(st.integers(1, 4))
    bands = draw(st.integers(1, 4))
    k = bands * rows + draw(st.integers(0, 2))
    n_docs = draw(st.integers(0, 14))
    # uint64 makes bands of two or more rows hashed, uint8 keeps them packed.
    dtype = draw(st.sampled_from([np.uint8, np.uint64]))
    alphabet = draw(st.integers(1, 3))
    values = draw(hnp.arrays(dtype, (n_docs, k), elements=st.integers(0, alphabet - 1)))
    eligible = draw(st.none() | hnp.arrays(np.bool_, n_docs))
    return values, bands, rows, eligible


def _as_pairs(result: buckets.CandidateResult) -> list[tuple[int, int]]:
    return list(zip(result.first.tolist(), result.second.tolist(), strict=True))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(banded_signatures())
def test_candidate_pairs_equal_brute_force(case: tuple[np.ndarray, int, int, np.ndarray | None]) -> None:
    values, bands, rows, eligible = case
    result = candidate_pairs(values, bands, rows, eligible)
    pairs = _as_pairs(result)
    assert result.first.dtype == np.int64 and result.second.dtype == np.int64
    assert pairs == _brute_force_pairs(values, bands, rows, eligible)
    # Each pair once, first < second, sorted.
    assert all(first < second for first, second in pairs)
    assert pairs == sorted(set(pairs))
    assert result.oversized_buckets == 0


def test_candidate_pairs_small_example() -> None:
    values = np.array(
        [
            [1, 1, 5, 5],  # 0
            [1, 1, 6, 6],  # 1: band 0 with 0
            [2, 2, 5, 5],  # 2: band 1 with 0
            [1, 1, 5, 5],  # 3: both bands with 0, band 0 with 1, band 1 with 2
            [9, 9, 9, 9],  # 4: nothing
        ],
        dtype=np.uint8,
    )
    result = candidate_pairs(values, bands=2, rows=2)
    assert _as_pairs(result) == [(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]
    eligible = np.array([True, True, True, False, True])
    assert _as_pairs(candidate_pairs(values, 2, 2, eligible)) == [(0, 1), (0, 2)]


def test_candidate_pairs_ignore_ineligible_documents() -> None:
    values = np.zeros((6, 8), dtype=np.uint8)  # all identical
    eligible = np.array([False, True, False, True, True, False])
    result = candidate_pairs(values, 4, 2, eligible)
    assert _as_pairs(result) == [(1, 3), (1, 4), (3, 4)]
    assert _as_pairs(candidate_pairs(values, 4, 2, np.zeros(6, dtype=bool))) == []
    assert _as_pairs(candidate_pairs(values, 4, 2, np.array([False, False, True, False, False, False]))) == []


def test_candidate_pairs_of_no_documents() -> None:
    result = candidate_pairs(np.zeros((0, 8), dtype=np.uint8), 4, 2)
    assert result.first.size == 0 and result.second.size == 0 and result.oversized_buckets == 0


def test_max_bucket_caps_an_oversized_bucket() -> None:
    rng = np.random.default_rng(3)
    n_docs, rows = 50, 4
    # Band 0 is boilerplate shared by all 50 documents; band 1 is different for every document.
    values = np.empty((n_docs, 2 * rows), dtype=np.uint64)
    values[:, :rows] = 12345
    values[:, rows:] = rng.choice(2**40, size=(n_docs, rows), replace=False)
    result = candidate_pairs(values, bands=2, rows=rows, max_bucket=10)
    assert result.oversized_buckets == 1
    # Only the pairs among the first 10 members of the bucket (in document order): C(10, 2) = 45.
    assert _as_pairs(result) == list(itertools.combinations(range(10), 2))
    uncapped = candidate_pairs(values, bands=2, rows=rows, max_bucket=50)
    assert uncapped.first.size == 50 * 49 // 2 and uncapped.oversized_buckets == 0


def test_max_bucket_counts_each_oversized_bucket() -> None:
    values = np.zeros((12, 6), dtype=np.uint8)
    values[6:] = 1  # two buckets of 6 in each of 3 bands
    result = candidate_pairs(values, bands=3, rows=2, max_bucket=4)
    assert result.oversized_buckets == 6
    assert _as_pairs(result) == list(itertools.combinations(range(4), 2)) + list(
        itertools.combinations(range(6, 10), 2)
    )


def test_periodic_deduplication_does_not_change_the_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(11).integers(0, 2, size=(60, 12), dtype=np.uint8)
    expected = _as_pairs(candidate_pairs(values, 6, 2))
    monkeypatch.setattr(buckets, "DEDUPLICATE_EVERY", 5)
    assert _as_pairs(candidate_pairs(values, 6, 2)) == expected
    assert len(expected) > 100


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(np.uint8, 2), (np.uint8, 4), (np.uint8, 8), (np.uint8, 3), (np.uint16, 2),
                        (np.uint16, 4), (np.uint32, 2)]), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_band_keys_are_the_rows_shifted_into_place(kind: tuple[type, int], documents: int, seed: int) -> None:
    # The packed key read as one little-endian integer (the fast path) is the rows shifted into place.
    dtype, rows = kind
    values = np.random.default_rng(seed).integers(0, np.iinfo(dtype).max, (documents, 24), dtype=dtype,
                                                  endpoint=True)
    bands, width = 24 // rows, np.dtype(dtype).itemsize * 8
    expected = np.zeros((bands, documents), np.uint64)
    for band in range(bands):
        for row in range(rows):
            expected[band] |= values[:, band * rows + row].astype(np.uint64) << np.uint64(row * width)
    assert np.array_equal(band_keys(values, bands, rows), expected)
    if rows * width <= 32:
        assert np.array_equal(band_keys(values, bands, rows, np.uint32), expected.astype(np.uint32))


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1),
       wide=st.booleans())
def test_band_pairs_with_reused_sort_buffers_are_those_without(sizes: list[int], seed: int, wide: bool) -> None:
    # Bands of several sizes sorted one after another with one set of buffers (as a worker sorts its bands), and
    # keys written into an array in blocks of 7 documents (a block size that divides nothing here): the same
    # codes and cut buckets as fresh arrays give, and as a plain stable argsort.
    rng = np.random.default_rng(seed)
    buffers = buckets.SortBuffers(max(sizes))
    for n in sizes:
        keys = rng.integers(0, 40, n).astype(np.uint64 if wide else np.uint32)  # many collisions, some cut
        docs = np.sort(rng.choice(10 * n + 1, n, replace=False)).astype(np.int64)
        with_buffers = buckets.band_pair_codes(keys, docs, 30, 10 * n + 1, buffers)
        fresh = buckets.band_pair_codes(keys, docs, 30, 10 * n + 1)
        order = np.argsort(keys, kind="stable")
        first, second, cut = _pairs_by_argsort(keys[order], docs[order], 30)
        assert np.array_equal(with_buffers[0], fresh[0]) and with_buffers[1] == fresh[1] == cut
        assert np.array_equal(np.sort(with_buffers[0]), np.sort(first.astype(np.uint64) * np.uint64(10 * n + 1)
                                                                + second.astype(np.uint64)))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), prefixes=st.integers(1, 50), low=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_wide_keys_sharing_prefixes_bucket_as_a_stable_argsort(n: int, prefixes: int, low: int, seed: int) -> None:
    # 64-bit keys built so that key · SPREAD takes few distinct top bits: most neighbours in the one sort share
    # their prefix while their keys differ in the bits below it (and a few keys repeat): the buckets and their
    # members' order must still be exactly a stable argsort's.
    rng = np.random.default_rng(seed)
    position_bits = max(1, (n - 1).bit_length())
    top = rng.integers(0, prefixes, n).astype(np.uint64) << np.uint64(position_bits)
    mixed = top | rng.integers(0, low, n).astype(np.uint64)  # low bits within the position field: lost to it
    inverse = np.uint64(pow(int(buckets.SPREAD), -1, 1 << 64))
    keys = mixed * inverse
    docs = np.arange(n, dtype=np.int64) * 3
    order, sorted_keys = buckets.bucket_order(keys)
    assert np.array_equal(keys[order], sorted_keys)
    # The positions kept are in a stable argsort's order, and among them is every position whose key repeats.
    expected = np.argsort(keys, kind="stable")
    assert np.array_equal(order, expected[np.isin(expected, order)])
    distinct, counts = np.unique(keys, return_counts=True)
    assert np.isin(np.flatnonzero(np.isin(keys, distinct[counts > 1])), order).all()
    codes, cut = buckets.band_pair_codes(keys, docs, 30, 3 * n + 1)
    first, second, expected_cut = _pairs_by_argsort(keys[expected], docs[expected], 30)
    assert cut == expected_cut
    assert np.array_equal(np.sort(codes), np.sort(first.astype(np.uint64) * np.uint64(3 * n + 1)
                                                  + second.astype(np.uint64)))


def _pairs_by_argsort(sorted_keys: np.ndarray, sorted_docs: np.ndarray, max_bucket: int
                      ) -> tuple[np.ndarray, np.ndarray, int]:
    """Every pair within each run of equal keys (its first ``max_bucket`` members), by a loop over the runs."""
    first, second, cut, start = [], [], 0, 0
    for end in range(1, sorted_keys.size + 1):
        if end == sorted_keys.size or sorted_keys[end] != sorted_keys[start]:
            members = sorted_docs[start:end][:max_bucket]
            cut += int(end - start > max_bucket)
            for i, j in itertools.combinations(range(members.size), 2):
                first.append(members[i])
                second.append(members[j])
            start = end
    return np.array(first, np.int64), np.array(second, np.int64), cut


@pytest.mark.parametrize("rows_at_a_time", [1, 7, 4096])
def test_band_keys_written_in_blocks_are_the_returned_keys(rows_at_a_time: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "TRANSPOSE_ROWS", rows_at_a_time)
    values = np.random.default_rng(3).integers(0, 256, (1000, 64), dtype=np.uint8)
    out = np.zeros((12, 1000), np.uint32)
    assert buckets.band_keys(values[:, 8:56], 12, 4, np.uint32, out=out) is out
    assert np.array_equal(out, buckets.band_keys(values[:, 8:56], 12, 4, np.uint32))
    assert np.array_equal(out[3], values[:, 20:24].copy().view("<u4")[:, 0])  # band 3: values 12…15 of the slice


def test_large_arrays_come_from_huge_page_mappings_and_behave_as_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli import array_primitives

    monkeypatch.setattr(array_primitives, "HUGE_PAGE_BYTES", 1 << 12)
    small = array_primitives.large_empty(10, np.int64)
    large = array_primitives.large_empty((3, 4096), np.uint32)
    assert small.shape == (10,) and large.shape == (3, 4096) and large.dtype == np.uint32
    assert large.flags.c_contiguous and large.flags.writeable
    large[:] = 7
    assert int(large.sum()) == 7 * 3 * 4096
