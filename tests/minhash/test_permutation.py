"""Tests for seeded permutations of a stated universe (keyed Feistel network with cycle walking)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paper_formulas import collision_probability_2way

from dedup_cli.estimates.dense import collision_probability_3way
from dedup_cli.minhash import universe as permutation
from dedup_cli.minhash.universe import UniversePermutations


def permute(family: UniversePermutations, values: np.ndarray | list[int]) -> np.ndarray:
    """uint64[k, n]: π_j(values[i]) at [j, i], each value a set of its own, whose minimum is its image."""
    return family.min_values(values, np.arange(len(values) + 1)).T


def min_law(universe: int, size: int) -> np.ndarray:
    """float64[D]: Pr(min π(S) = t) for a uniformly random permutation π and |S| = size.

    Pr(min = t) = C(D − 1 − t, size − 1) / C(D, size): the minimum is t and the other elements are above it.
    """
    t = np.arange(universe)
    log_c = np.vectorize(
        lambda n, k: math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) if n >= k else -np.inf
    )
    return np.exp(log_c(universe - 1 - t, size - 1) - log_c(universe, size))


@pytest.mark.parametrize("universe", [2, 3, 4, 5, 1000, 4096, 4097, 65537])
def test_bijection_on_the_universe(universe: int) -> None:
    permuted = permute(UniversePermutations(universe, num_perm=6, seed=7), np.arange(universe))
    assert permuted.dtype == np.uint64 and permuted.shape == (6, universe)
    expected = np.arange(universe, dtype=np.uint64)
    for row in permuted:
        np.testing.assert_array_equal(np.sort(row), expected)


def test_large_universe_stays_in_range() -> None:
    universe = (1 << 62) - 12345  # 62 bits: 31-bit halves, a few cycle walks
    values = np.random.default_rng(0).integers(0, universe, 10_000, dtype=np.uint64)
    permuted = permute(UniversePermutations(universe, num_perm=4, seed=1), values)
    assert np.all(permuted < np.uint64(universe))
    # Injective on the sample (a collision among 10^4 random images of a bijection would be a bug).
    assert all(np.unique(row).size == np.unique(values).size for row in permuted)


def test_deterministic_and_distinct() -> None:
    values = np.arange(1000)
    first = permute(UniversePermutations(1000, num_perm=8, seed=42), values)
    np.testing.assert_array_equal(first, permute(UniversePermutations(1000, num_perm=8, seed=42), values))
    other_seed = permute(UniversePermutations(1000, num_perm=8, seed=43), values)
    assert all(not np.array_equal(a, b) for a, b in zip(first, other_seed, strict=True))
    # Permutation j depends on (seed, j) only: rows differ from each other, and more permutations extend
    # the family without changing the first ones.
    assert len({row.tobytes() for row in first}) == 8
    np.testing.assert_array_equal(permute(UniversePermutations(1000, num_perm=16, seed=42), values)[:8], first)


def test_dataclass_is_frozen_and_comparable() -> None:
    family = UniversePermutations(100, num_perm=2, seed=3)
    assert family == UniversePermutations(100, num_perm=2, seed=3)
    assert family != UniversePermutations(100, num_perm=2, seed=4)
    with pytest.raises(AttributeError):
        family.seed = 5  # type: ignore[misc]


def test_minimum_has_the_law_of_a_random_subset_ranking() -> None:
    """E[min] = (D + 1)/(f + 1) − 1 and the whole law C(D − 1 − t, f − 1)/C(D, f), within 4 SE."""
    universe, size, num_perm = 4097, 10, 5000
    subset = np.random.default_rng(1).choice(universe, size, replace=False)
    minima = UniversePermutations(universe, num_perm, seed=2).min_values(subset, np.array([0, size]))[0]
    minima = minima.astype(np.float64)
    mean = (universe + 1) / (size + 1) - 1
    variance = size * (universe + 1) * (universe - size) / ((size + 1) ** 2 * (size + 2))
    assert abs(minima.mean() - mean) < 4 * math.sqrt(variance / num_perm)
    # The CDF at its deciles.
    law = min_law(universe, size)
    cdf = np.cumsum(law)
    for quantile in np.arange(0.1, 1.0, 0.1):
        t = int(np.searchsorted(cdf, quantile))
        p = cdf[t]
        assert abs(np.mean(minima <= t) - p) < 4 * math.sqrt(p * (1 - p) / num_perm), quantile


@pytest.mark.parametrize(("universe", "size"), [(1 << 40, 100), (4097, 1000)])
def test_low_bits_of_minima(universe: int, size: int) -> None:
    """Lowest 2 bits of minima: uniform for sparse sets, and the exact finite-D law for dense ones.

    For a dense set the minimum is small and its low bits are not uniform (Pr(z ≡ 0) = A_{j,b}-like);
    the permutation must reproduce that law, not flatten it.
    """
    num_perm = 4000
    rng = np.random.default_rng(3)
    subset = rng.choice(universe, size, replace=False) if universe < 1 << 32 else rng.integers(0, universe, size)
    subset = np.unique(subset)
    assert subset.size == size
    minima = UniversePermutations(universe, num_perm, seed=4).min_values(subset, np.array([0, size]))[0]
    observed = np.bincount((minima & np.uint64(3)).astype(np.int64), minlength=4) / num_perm
    if universe < 1 << 32:
        law = min_law(universe, size)
        expected = np.array([law[residue::4].sum() for residue in range(4)])
        assert expected[0] > 0.3  # dense: far from uniform
    else:
        expected = np.full(4, 0.25)
    standard_error = np.sqrt(expected * (1 - expected) / num_perm)
    assert np.all(np.abs(observed - expected) < 4 * standard_error), (observed, expected)


def test_b_bit_collisions_match_exact_dense_probabilities() -> None:
    """End to end: minima of three dense sets under these permutations collide as collisions.py predicts.

    D = 2^12, r ≈ 0.50, 0.45, 0.37; 4000 permutations (4 standard errors; the finite-D deviation from the
    large-D formulas is ≈ 1/D, a twentieth of the standard error here).
    """
    universe, num_perm = 1 << 12, 4000
    sizes = {1: 650, 2: 400, 3: 300, 4: 150, 5: 200, 6: 250, 7: 900}  # Venn region sizes by mask
    elements = np.random.default_rng(5).permutation(universe)
    region_of = {}
    start = 0
    for mask, size in sizes.items():
        region_of[mask] = elements[start : start + size]
        start += size
    sets = [np.concatenate([region_of[mask] for mask in sizes if mask >> i & 1]) for i in range(3)]
    offsets = np.cumsum([0] + [s.size for s in sets])
    minima = UniversePermutations(universe, num_perm, seed=6).min_values(np.concatenate(sets), offsets)
    r1, r2, r3 = (s.size / universe for s in sets)
    s12, s13, s23 = (sum(n for mask, n in sizes.items() if mask & pair == pair) / universe for pair in (3, 5, 6))
    s = sizes[7] / universe
    for bits in (1, 2, 3):
        low = minima & np.uint64((1 << bits) - 1)
        exact = {
            (0, 1): collision_probability_2way(r1, r2, s12, bits),
            (0, 2): collision_probability_2way(r1, r3, s13, bits),
            (1, 2): collision_probability_2way(r2, r3, s23, bits),
        }
        for (i, j), probability in exact.items():
            observed = np.mean(low[i] == low[j])
            assert abs(observed - probability) < 4 * math.sqrt(probability * (1 - probability) / num_perm)
        probability = collision_probability_3way(r1, r2, r3, s12, s13, s23, s, bits)
        observed = np.mean((low[0] == low[1]) & (low[1] == low[2]))
        assert abs(observed - probability) < 4 * math.sqrt(probability * (1 - probability) / num_perm)


# --------------------------------------------------------------------------------------------------
# min_values: CSR layout, chunking, empty sets
# --------------------------------------------------------------------------------------------------


def brute_force_minima(family: UniversePermutations, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    permuted = permute(family, values)
    rows = []
    for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
        if stop > start:
            rows.append(permuted[:, start:stop].min(axis=1))
        else:
            rows.append(np.full(family.num_perm, family.universe, dtype=np.uint64))
    return np.array(rows, dtype=np.uint64).reshape(len(rows), family.num_perm)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.lists(st.integers(0, 999), max_size=12), max_size=8),
    st.integers(1, 5),
    st.integers(1, 40),
)
def test_min_values_matches_brute_force(sets: list[list[int]], num_perm: int, chunk: int) -> None:
    family = UniversePermutations(1000, num_perm, seed=9)
    values = np.array([x for members in sets for x in members], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(members) for members in sets]).astype(np.int64)
    # A tiny chunk budget makes sets straddle chunk edges, which must be merged with earlier minima.
    original = permutation._ELEMENTS_PER_CHUNK
    permutation._ELEMENTS_PER_CHUNK = chunk
    try:
        minima = family.min_values(values, offsets)
    finally:
        permutation._ELEMENTS_PER_CHUNK = original
    assert minima.shape == (len(sets), num_perm) and minima.dtype == np.uint64
    np.testing.assert_array_equal(minima, brute_force_minima(family, values, offsets))


def test_empty_sets_have_no_minimum() -> None:
    family = UniversePermutations(50, num_perm=3, seed=1)
    minima = family.min_values(np.array([4, 9, 4], dtype=np.uint64), np.array([0, 0, 2, 2, 3, 3]))
    assert np.all(minima[[0, 2, 4]] == 50)  # D: larger than any real minimum
    assert np.all(minima[[1, 3]] < 50)
    assert family.min_values(np.array([], dtype=np.uint64), np.array([0, 0])).tolist() == [[50, 50, 50]]
    assert family.min_values(np.array([], dtype=np.uint64), np.array([0])).shape == (0, 3)


def test_accepts_any_integer_dtype() -> None:
    family = UniversePermutations(1000, num_perm=2, seed=1)
    expected = permute(family, np.array([1, 500, 999], dtype=np.uint64))
    np.testing.assert_array_equal(permute(family, [1, 500, 999]), expected)
    np.testing.assert_array_equal(permute(family, np.array([1, 500, 999], dtype=np.int16)), expected)


# --------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------


def test_value_outside_universe_is_named() -> None:
    family = UniversePermutations(1000, num_perm=2, seed=1)
    with pytest.raises(ValueError, match=r"value 1000 is outside the universe \[0, 1000\)"):
        permute(family, np.array([3, 1000, 7], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"value 5000 is outside the universe"):
        family.min_values(np.array([1, 5000]), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"value -1 is outside the universe"):
        permute(family, np.array([-1, 3]))
    with pytest.raises(ValueError, match="integers"):
        permute(family, np.array([0.5]))


def test_malformed_offsets() -> None:
    family = UniversePermutations(1000, num_perm=2, seed=1)
    values = np.arange(5)
    for offsets in ([1, 5], [0, 4], [0, 3, 2, 5], []):
        with pytest.raises(ValueError, match="offsets"):
            family.min_values(values, np.array(offsets, dtype=np.int64))


@pytest.mark.parametrize(
    ("universe", "num_perm", "seed"), [(1, 4, 0), ((1 << 62) + 1, 4, 0), (100, 0, 0), (100, 4, -1), (100.0, 4, 0)]
)
def test_bad_parameters(universe: int, num_perm: int, seed: int) -> None:
    with pytest.raises(ValueError):
        UniversePermutations(universe, num_perm, seed)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.integers(0, 63), min_size=1, max_size=40), min_size=2, max_size=10), st.integers(1, 6))
def test_the_table_of_a_small_universe_gives_the_same_minima(sets: list[list[int]], num_perm: int) -> None:
    # When a batch holds at least D elements, π_j(x) is read from a table of every x; it must be the network's.
    family = UniversePermutations(64, num_perm, seed=3)
    values = np.array([x for members in sets for x in members] * 2, dtype=np.uint64)  # at least 64 elements
    values = np.concatenate([values, np.arange(64, dtype=np.uint64)])
    offsets = np.array([0, *np.cumsum([len(members) for members in sets]), 2 * sum(map(len, sets)), values.size])
    original = permutation._TABLE_ENTRIES
    try:
        permutation._TABLE_ENTRIES = 0
        direct = UniversePermutations(64, num_perm, seed=3).min_values(values, offsets)
    finally:
        permutation._TABLE_ENTRIES = original
    tabled = family.min_values(values, offsets)
    assert family._table  # the table was built and used
    np.testing.assert_array_equal(tabled, direct)
    np.testing.assert_array_equal(tabled, brute_force_minima(family, values, offsets))
