"""The all-pairs kernel: packing, bit-parallel match counts, blocked all-pairs search, count thresholds.

Every result is checked against a brute-force reference: ``(values[i] == values[j]).sum()`` for counts, all
n(n − 1)/2 pairs for the search, and ``estimate_2way`` at every count for the thresholds. Fixed seeds.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.candidates import allpairs, match_bounds
from dedup_cli.candidates.allpairs import (
    _MismatchBits,
    all_pairs,
    count_matches_packed,
    pack_blocks,
)
from dedup_cli.candidates.match_bounds import min_matches_for_threshold
from dedup_cli.estimates.pairs import count_matches
from dedup_cli.estimates.two_way import estimate_2way
from dedup_cli.minhash.packing import lowest_bits, value_dtype

ALL_BITS = [1, 2, 3, 4, 5, 7, 8, 16, 32, 64]


def block_capacity(bits: int) -> int:
    """How many b-bit values one uint64 word holds: floor(64 / b)."""
    return 64 // bits


def random_values(rng: np.random.Generator, n_docs: int, k: int, bits: int) -> np.ndarray:
    """uint[n_docs, k] b-bit values in the smallest dtype, as ``StoredSignatures.values(bits)`` gives."""
    high = np.iinfo(np.uint64).max if bits == 64 else (1 << bits) - 1
    return rng.integers(0, high, size=(n_docs, k), dtype=np.uint64, endpoint=True).astype(value_dtype(bits))


def planted_values(rng: np.random.Generator, n_docs: int, k: int, bits: int) -> np.ndarray:
    """Random documents plus near-copies sharing 100 %, 95 %, 80 %, 60 % or 40 % of positions."""
    values = random_values(rng, n_docs, k, bits)
    for index in range(1, n_docs, 5):
        source = rng.integers(0, index)
        shared = rng.random(k) < rng.choice([1.0, 0.95, 0.8, 0.6, 0.4])
        values[index] = np.where(shared, values[source], values[index])
    return values


def brute_force_counts(values: np.ndarray) -> np.ndarray:
    """int64[n_docs, n_docs]: positions where documents i and j agree."""
    return (values[:, None, :] == values[None, :, :]).sum(axis=2)


def brute_force_pairs(
    values: np.ndarray, needed: np.ndarray, eligible: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair i < j, both eligible, with count ≥ max(needed[i], needed[j]), in (i, j) order."""
    counts = brute_force_counts(values)
    first, second = np.triu_indices(values.shape[0], 1)
    keep = counts[first, second] >= np.maximum(needed[first], needed[second])
    if eligible is not None:
        keep &= eligible[first] & eligible[second]
    return first[keep], second[keep], counts[first, second][keep]


def assert_same_pairs(found: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...]) -> None:
    for got, want in zip(found, expected, strict=True):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------------------------
# Packing and counting
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", ALL_BITS)
def test_packed_counts_equal_brute_force(bits: int) -> None:
    rng = np.random.default_rng(bits)
    capacity = block_capacity(bits)
    k = 3 * capacity + 1 if capacity > 1 else 37  # a partly filled last word
    values = planted_values(rng, 40, k, bits)
    packed = pack_blocks(values, bits)
    assert packed.dtype == np.uint64 and packed.shape == (40, -(-k // capacity))
    first, second = np.triu_indices(40, 1)
    counts = count_matches_packed(packed, bits, k, first, second)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, brute_force_counts(values)[first, second])
    np.testing.assert_array_equal(counts, count_matches(values, first, second))
    assert np.all(count_matches_packed(packed, bits, k, np.arange(40), np.arange(40)) == k)


@pytest.mark.parametrize("bits", ALL_BITS)
@pytest.mark.parametrize("method", ["fold", "carry"])
def test_both_block_reductions_mark_exactly_the_differing_blocks(bits: int, method: str) -> None:
    rng = np.random.default_rng(bits)
    capacity = block_capacity(bits)
    values = random_values(rng, 2000, capacity, bits)
    # Most blocks zero, some differing in one bit only (the high, the low or a middle one), some random.
    values[rng.random(values.shape) < 0.5] = 0
    one_bit = rng.random(values.shape) < 0.2
    values[one_bit] = (np.uint64(1) << rng.integers(0, bits, one_bit.sum()).astype(np.uint64)).astype(values.dtype)
    words = pack_blocks(values, bits)[:, 0].copy()
    _MismatchBits(bits, method)(words, np.empty_like(words))
    np.testing.assert_array_equal(np.bitwise_count(words), np.count_nonzero(values, axis=1))


def test_block_layout_and_zero_padding() -> None:
    # b = 3: 21 blocks per word, the 64th bit and the last word's unused blocks stay zero.
    values = np.zeros((1, 22), dtype=np.uint8)
    values[0, 0], values[0, 1], values[0, 20], values[0, 21] = 1, 5, 7, 6
    packed = pack_blocks(values, 3)
    assert packed.tolist() == [[1 | 5 << 3 | 7 << 60, 6]]


def test_only_the_lowest_bits_are_packed() -> None:
    rng = np.random.default_rng(3)
    full = random_values(rng, 30, 50, 64)
    full[1] = full[0] ^ np.uint64(1 << 5)  # differs only above the lowest 4 bits
    first, second = np.triu_indices(30, 1)
    counts = count_matches_packed(pack_blocks(full, 4), 4, 50, first, second)
    np.testing.assert_array_equal(counts, count_matches(lowest_bits(full, 4), first, second))
    assert counts[0] == 50


def test_count_matches_packed_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allpairs, "_COMPARISON_BYTES", 100)  # a handful of pairs per chunk
    rng = np.random.default_rng(4)
    values = planted_values(rng, 30, 70, 2)
    first, second = rng.integers(0, 30, 500), rng.integers(0, 30, 500)
    counts = count_matches_packed(pack_blocks(values, 2), 2, 70, first, second)
    np.testing.assert_array_equal(counts, count_matches(values, first, second))
    assert count_matches_packed(pack_blocks(values, 2), 2, 70, first[:0], second[:0]).shape == (0,)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(1, 64), st.integers(1, 150), st.integers(2, 12), st.integers(0, 2**32 - 1))
def test_packed_counts_property(bits: int, k: int, n_docs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = planted_values(rng, n_docs, k, bits)
    if bits > 2:  # small alphabets agree by chance anyway; make sure wide ones share some values
        values[:, rng.random(k) < 0.3] = 0
    first, second = np.triu_indices(n_docs, 1)
    np.testing.assert_array_equal(
        count_matches_packed(pack_blocks(values, bits), bits, k, first, second),
        brute_force_counts(values)[first, second],
    )


def test_bad_arguments() -> None:
    values = np.zeros((3, 8), dtype=np.uint8)
    for bits in (0, 65, 2.5, True):
        with pytest.raises(ValueError):
            pack_blocks(values, bits)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        pack_blocks(np.zeros(8, dtype=np.uint8), 2)
    with pytest.raises(ValueError):
        count_matches_packed(pack_blocks(values, 2), 2, 100, np.zeros(1), np.zeros(1))
    with pytest.raises(ValueError):
        all_pairs(values, 2, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError):
        all_pairs(values, 2, 0, eligible=np.ones(2, dtype=bool))
    with pytest.raises(ValueError):
        min_matches_for_threshold(0.5, 0, 2)


# ----------------------------------------------------------------------------------------------
# All pairs
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("memory_bytes", [1, 3_000, 256 << 20])
def test_all_pairs_equals_brute_force(bits: int, memory_bytes: int) -> None:
    rng = np.random.default_rng(100 + bits)
    k = 200 if bits <= 8 else 50
    n_docs = 40 if memory_bytes == 1 else 90  # one pair per tile: keep the number of numpy calls small
    values = planted_values(rng, n_docs, k, bits)
    for threshold in (0.0, 0.5, 0.9):
        needed = min_matches_for_threshold(threshold, k, bits)
        found = all_pairs(values, bits, needed, memory_bytes=memory_bytes)
        expected = brute_force_pairs(values, np.full(n_docs, needed))
        assert_same_pairs(found, expected)
        assert np.all(found[0] < found[1])
    assert expected[0].size > 0  # the planted copies are found


def test_all_pairs_boundary_counts_and_thinning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs at exactly the minimum count are kept, one below is dropped, whether or not a tile is thinned.

    Near-copies agree early and differ late (they survive the part-way check and must still be judged on
    all words), so the thinned path and the dense path both see pairs on either side of the minimum.
    """
    rng = np.random.default_rng(7)
    bits, k, n_docs = 8, 256, 400
    values = random_values(rng, n_docs, k, bits)
    needed = 160
    for index in range(1, n_docs, 7):
        shared = needed + int(rng.integers(-2, 3))  # 158 … 162 positions, the shared ones first
        values[index, :shared] = values[index - 1, :shared]
        values[index, shared:] = values[index - 1, shared:] + 1  # uint8 wraps: differs everywhere else
    thinned: list[int] = []
    finish = allpairs._TileKernel._finish_sparse

    def spy(self: allpairs._TileKernel, first_word: int, rows: np.ndarray, *rest: np.ndarray) -> tuple:
        thinned.append(rows.size)
        return finish(self, first_word, rows, *rest)

    monkeypatch.setattr(allpairs._TileKernel, "_finish_sparse", spy)
    expected = brute_force_pairs(values, np.full(n_docs, needed))
    assert set(expected[2].tolist()) == {160, 161, 162}
    for memory_bytes in (256 << 20, 20_000):
        thinned.clear()
        assert_same_pairs(all_pairs(values, bits, needed, memory_bytes=memory_bytes), expected)
        assert any(size > 0 for size in thinned)  # some tiles were thinned with survivors left


@pytest.mark.parametrize("bits", [1, 2, 8])
def test_per_document_minimum_and_eligible(bits: int) -> None:
    rng = np.random.default_rng(11 + bits)
    k, n_docs = 100, 80
    values = planted_values(rng, n_docs, k, bits)
    typical = min_matches_for_threshold(0.6, k, bits)
    needed = rng.integers(typical - 10, typical + 10, n_docs)
    needed[::13] = k + 1  # can pair with nobody
    needed[5] = -3  # needs nothing of itself; its partner's minimum still applies
    eligible = rng.random(n_docs) < 0.8
    eligible[1:11:5] = True
    for memory_bytes in (1, 5_000, 256 << 20):
        assert_same_pairs(all_pairs(values, bits, needed, memory_bytes=memory_bytes),
                          brute_force_pairs(values, needed))
        assert_same_pairs(
            all_pairs(values, bits, needed, eligible=eligible, memory_bytes=memory_bytes),
            brute_force_pairs(values, needed, eligible),
        )
        assert_same_pairs(
            all_pairs(values, bits, typical, eligible=eligible, memory_bytes=memory_bytes),
            brute_force_pairs(values, np.full(n_docs, typical), eligible),
        )
    # A constant per-document minimum is the scalar one.
    assert_same_pairs(all_pairs(values, bits, np.full(n_docs, typical)), all_pairs(values, bits, typical))


def test_progress_adds_up_to_every_document() -> None:
    rng = np.random.default_rng(12)
    values = planted_values(rng, 50, 64, 2)
    for eligible in (None, np.arange(50) % 3 == 1, np.zeros(50, dtype=bool)):
        calls: list[int] = []
        all_pairs(values, 2, 40, eligible=eligible, memory_bytes=500, progress=calls.append)
        assert sum(calls) == 50 and all(isinstance(c, int) and c >= 0 for c in calls)
        if eligible is None:
            assert len(calls) > 1


def test_degenerate_inputs() -> None:
    for n_docs in (0, 1):
        first, second, matches = all_pairs(np.zeros((n_docs, 16), dtype=np.uint8), 1, 0)
        assert first.size == second.size == matches.size == 0 and first.dtype == np.int64
    identical = np.zeros((4, 16), dtype=np.uint8)
    first, second, matches = all_pairs(identical, 2, 16)
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert np.all(matches == 16)
    assert all_pairs(identical, 2, 17)[0].size == 0  # more than k matches: nothing


# ----------------------------------------------------------------------------------------------
# Minimum match count for a threshold
# ----------------------------------------------------------------------------------------------


def smallest_passing(threshold: float, k: int, bits: int, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """int64[...]: smallest m with estimate_2way(m/k, r1, r2, bits) ≥ threshold, k + 1 if none (by scanning)."""
    counts = np.arange(k + 1)
    estimates = estimate_2way(counts[:, None] / k, r1[None, :], r2[None, :], bits)  # [k + 1, pairs]
    passes = estimates >= threshold
    return np.where(passes.any(axis=0), passes.argmax(axis=0), k + 1)


@pytest.mark.parametrize("k", [1, 7, 64, 200, 256, 1000])
@pytest.mark.parametrize("bits", [1, 2, 3, 8, 32, 64])
def test_min_matches_exact_at_boundaries(k: int, bits: int) -> None:
    attainable = [float(estimate_2way(m / k, 0.0, 0.0, bits)) for m in (0, 1, k // 3, k // 2, k - 1, k)]
    thresholds = [0.0, 0.3, 0.5, 0.8, 0.9, 0.95, 1.0, -1.0, 1.5]
    for value in attainable:  # exactly on an attainable estimate, and one ulp either side
        thresholds += [value, math.nextafter(value, -math.inf), math.nextafter(value, math.inf)]
    for threshold in thresholds:
        m = min_matches_for_threshold(threshold, k, bits)
        assert isinstance(m, int) and 0 <= m <= k + 1
        if m <= k:
            assert estimate_2way(m / k, 0.0, 0.0, bits) >= threshold
        if m >= 1:
            assert estimate_2way((m - 1) / k, 0.0, 0.0, bits) < threshold
        assert m == smallest_passing(threshold, k, bits, np.zeros(1), np.zeros(1))[0]


def test_min_matches_sparse_closed_form() -> None:
    # ceil(k (C + (1 − C) R0)), C = 2^-b (eq. 9, sparse limit), away from rounding boundaries.
    for k, bits, threshold in [(256, 1, 0.5), (256, 2, 0.5), (256, 8, 0.8), (200, 3, 0.7), (1000, 1, 0.33)]:
        c = 2.0**-bits
        expected = math.ceil(k * (c + (1 - c) * threshold))
        assert min_matches_for_threshold(threshold, k, bits) == expected
    assert min_matches_for_threshold(0.5, 256, 1) == 192  # exactly on the boundary: 192/256 gives R̂ = 0.5
    assert min_matches_for_threshold(0.5, 256, 2) == 160


def test_min_matches_dense_scalar_r() -> None:
    for r in (1e-6, 0.01, 0.3, 0.9, 1.0):
        for k, bits, threshold in [(256, 1, 0.5), (128, 2, 0.8), (300, 4, 0.6)]:
            m = min_matches_for_threshold(threshold, k, bits, r)
            assert isinstance(m, int)
            assert estimate_2way(m / k, r, r, bits) >= threshold - 1e-9
            assert estimate_2way((m - 1) / k, r, r, bits) < threshold


@pytest.mark.parametrize("bits", [1, 2, 8])
@pytest.mark.parametrize("spread", ["few", "many", "coarse"])
def test_per_document_minimum_is_conservative_for_every_partner(
    bits: int, spread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(20 + bits)
    k, threshold = 256, 0.5
    if spread == "few":  # fewer distinct r than runs: the bound is the exact minimum over partners
        r = rng.choice([0.0, 1e-9, 9e-4, 1e-3, 0.0084, 0.05, 0.3, 0.5, 1.0], size=60)
    elif spread == "many":  # more distinct r than runs: partners are grouped, the bound may be a count low
        r = np.concatenate([rng.random(400) ** 4, [0.0, 1.0, 9e-4, 1e-3]])
    else:  # three wide runs: only the corners of each run's (w, β) box keep the bound conservative
        monkeypatch.setattr(match_bounds, "_PARTNER_GROUPS", 3)
        r = np.concatenate([rng.random(300) ** 4, 10 ** rng.uniform(-7, 0, 100)])
    needed = min_matches_for_threshold(threshold, k, bits, r)
    assert needed.dtype == np.int64 and needed.shape == r.shape
    first, second = np.triu_indices(r.size, 1)
    exact = smallest_passing(threshold, k, bits, r[first], r[second])
    assert np.all(np.maximum(needed[first], needed[second]) <= exact)  # no pair is ever lost
    # How tight: against the best partner of each document (itself included, as its r may recur).
    best = np.array([smallest_passing(threshold, k, bits, np.full(r.size, value), r).min() for value in r])
    assert np.all(best >= needed)
    if spread != "coarse":
        assert (best - needed).max() <= 1


def test_per_document_minimum_with_a_non_monotone_partner() -> None:
    # R̂ at a fixed count is not monotone in the partner's r: with b = 1, r = 1e-4 reaches R̂ = 0.5 with 192
    # of 256 matches beside a partner of r = 2.7e-5 but needs all 256 beside r = 1 (a set that small cannot
    # resemble the whole universe), so a bound taken at the largest r would lose the first pair.
    k, bits, threshold = 256, 1, 0.5
    r = np.array([1e-4, 2.7e-5, 1.0])
    needed = min_matches_for_threshold(threshold, k, bits, r)
    exact = smallest_passing(threshold, k, bits, r[:1], r[1:2])[0]
    at_largest = smallest_passing(threshold, k, bits, r[:1], r[2:])[0]
    assert (exact, at_largest) == (192, 256)
    assert max(needed[0], needed[1]) <= exact


def test_all_pairs_with_dense_minimum_loses_no_pair() -> None:
    """The path the lead wires: per-document minimum → all_pairs → exact re-scoring keeps every pair."""
    rng = np.random.default_rng(30)
    k, bits, threshold, n_docs = 128, 2, 0.5, 120
    values = planted_values(rng, n_docs, k, bits)
    r = rng.random(n_docs) ** 3
    needed = min_matches_for_threshold(threshold, k, bits, r)
    first, second, matches = all_pairs(values, bits, needed, memory_bytes=4_000)
    all_first, all_second = np.triu_indices(n_docs, 1)
    all_matches = brute_force_counts(values)[all_first, all_second]
    accepted = estimate_2way(all_matches / k, r[all_first], r[all_second], bits) >= threshold
    found = set(zip(first.tolist(), second.tolist(), strict=True))
    assert set(zip(all_first[accepted].tolist(), all_second[accepted].tolist(), strict=True)) <= found
    assert accepted.sum() > 0


def test_temporaries_stay_within_memory_bytes() -> None:
    """Peak allocation grows with the input (values, packed words), not with the n²/2 pairs."""
    rng = np.random.default_rng(40)
    values = planted_values(rng, 1500, 64, 2)  # 1.1 million pairs
    for memory_bytes in (20_000, 400_000):
        tracemalloc.start()
        try:
            first, _, _ = all_pairs(values, 2, 48, memory_bytes=memory_bytes)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert first.size > 0
        assert peak < memory_bytes + 2 * values.nbytes + (64 << 10)
