"""b-bit values packed into bytes by shifts, and into uint64 words: the same bytes as the general packer, and back."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.minhash.packing import pack_bits, pack_values, packed_to_words, unpack_words, value_words


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from([1, 2, 4, 8]), rows=st.integers(0, 5), words=st.integers(1, 6),
       seed=st.integers(0, 2**32 - 1))
def test_packing_by_shifts_is_the_general_packer(bits: int, rows: int, words: int, seed: int) -> None:
    # Whole values (any bits above the lowest b) in, every width that divides 8, and k = 8·words.
    values = np.random.default_rng(seed).integers(0, 256, (rows, 8 * words), dtype=np.uint8)
    assert np.array_equal(pack_bits(values, bits), pack_values(values & np.uint8((1 << bits) - 1), bits))
    assert np.array_equal(pack_bits(values, bits), pack_values(values, bits))


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from([1, 2, 3, 4, 8, 16]), rows=st.integers(0, 5), num_perm=st.integers(1, 70),
       seed=st.integers(0, 2**32 - 1))
def test_words_unpack_to_the_values_packed(bits: int, rows: int, num_perm: int, seed: int) -> None:
    values = np.random.default_rng(seed).integers(0, 1 << bits, (rows, num_perm), dtype=np.uint64)
    words = packed_to_words(pack_values(values, bits))
    assert words.dtype == np.uint64 and words.shape == (rows, value_words(bits, num_perm))
    assert np.array_equal(unpack_words(words, bits, num_perm), values)
