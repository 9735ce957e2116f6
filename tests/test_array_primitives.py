"""The primitives every stage shares: the one code of a pair, membership in sorted values, and a sample sort's keys
and splitters, against their plain definitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.array_primitives import among, code_pairs, evenly_spaced, pair_codes, sort_keys, splitters


@settings(max_examples=80, deadline=None)
@given(documents=st.integers(2, 1 << 31), count=st.integers(0, 50), seed=st.integers(0, 2**32 - 1))
def test_pair_codes_round_trip_and_sort_as_the_pairs(documents: int, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    first = rng.integers(0, documents - 1, count)
    second = first + 1 + (rng.integers(0, 1 << 62, count) % (documents - 1 - first))
    codes = pair_codes(first, second, documents)
    assert codes.dtype == np.uint64
    back = code_pairs(codes, documents)
    assert np.array_equal(back[0], first) and np.array_equal(back[1], second)
    assert np.array_equal(np.argsort(codes, kind="stable"), np.lexsort((second, first)))


def test_among_finds_values_and_their_places() -> None:
    found, where = among(np.array([3, 9, 1, 12]), np.array([1, 3, 7, 9]))
    assert found.tolist() == [True, True, True, False]
    assert where[found].tolist() == [1, 3, 0]
    assert among(np.array([5]), np.empty(0, np.int64))[0].tolist() == [False]


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 60), seed=st.integers(0, 2**32 - 1))
def test_sort_keys_order_rows_as_their_columns(count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    estimate = rng.choice([-0.5, 0.0, 0.25, 0.5, 1.0, np.inf], count)
    first = rng.integers(0, 5, count)
    second = rng.integers(0, 1 << 40, count)
    keys = sort_keys([estimate, first, second])
    assert keys.shape == (count,)
    assert np.array_equal(np.sort(keys), keys[np.lexsort((second, first, estimate))])


def test_a_sample_and_its_splitters_cut_into_even_parts() -> None:
    values = np.arange(100)
    assert evenly_spaced(values, 5).tolist() == [0, 24, 49, 74, 99]
    assert evenly_spaced(values[:3], 5).tolist() == [0, 1, 2] and evenly_spaced(values[:0], 5).size == 0
    cuts = splitters(values, 4)
    assert cuts.tolist() == [25, 50, 75]
    assert np.bincount(np.searchsorted(cuts, values, side="right")).tolist() == [25, 25, 25, 25]
    assert splitters(values[:0], 4).size == 0
