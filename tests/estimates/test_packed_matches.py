"""Matches counted on b-bit values packed into uint64 words are the matches counted on the values themselves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.estimates.pairs import count_matches, count_packed_matches
from dedup_cli.minhash.packing import pack_values, packed_to_words


@settings(max_examples=80, deadline=None)
@given(bits=st.sampled_from([1, 2, 3, 4, 5, 8, 16]), pairs=st.integers(0, 40), num_perm=st.integers(1, 130),
       agree=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
def test_packed_matches_are_the_matches(bits: int, pairs: int, num_perm: int, agree: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 1 << bits, (2 * pairs, num_perm), dtype=np.uint64)
    # Pairs that agree on a share of their positions, so that every count from 0 to k is reached.
    same = rng.random((pairs, num_perm)) < agree
    values[pairs:][same] = values[:pairs][same]
    first, second = np.arange(pairs), np.arange(pairs, 2 * pairs)
    words = packed_to_words(pack_values(values, bits))
    assert np.array_equal(count_packed_matches(words[first], words[second], bits, num_perm),
                          count_matches(values, first, second))
