"""Elias–Fano coding of sorted sets: what is decoded is what was encoded, in about 2 + log2(U/n) bits a value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.candidates.elias_fano import decode, encode, pack_fields, unpack_fields


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(0, 3000), st.integers(0, 2**32 - 1))
def test_decoding_gives_back_the_set(universe_bits: int, size: int, seed: int) -> None:
    universe = 1 << universe_bits
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, universe, size=size, dtype=np.uint64, endpoint=False) if universe_bits < 64 else \
        rng.integers(0, 2**63, size=size, dtype=np.uint64) * np.uint64(2)
    values = np.unique(drawn)
    coded = encode(values, universe)
    assert np.array_equal(decode(coded), values)
    if values.size:
        # n·l low bits, and a unary bitmap of n ones among fewer than n + U/2^l < 3n bits (2^l > U/2n).
        bound = values.size * (max(0, (universe // values.size).bit_length() - 1) + 3)
        assert 8 * (coded.lows.nbytes + coded.highs.nbytes) <= bound + 16


def test_hand_made_set() -> None:
    # U = 32, n = 4: l = ⌊log2 8⌋ = 3 low bits; highs 0, 1, 1, 3 in unary at bits 0, 2, 3, 6.
    coded = encode(np.array([1, 9, 14, 30], np.uint64), 32)
    assert coded.low_bits == 3
    assert np.unpackbits(coded.highs, count=coded.high_length, bitorder="little").tolist() == [1, 0, 1, 1, 0, 0, 1]
    assert decode(coded).tolist() == [1, 9, 14, 30]
    with pytest.raises(ValueError, match="not below the universe"):
        encode(np.array([32], np.uint64), 32)
    assert math.isclose(encode(np.arange(0, 1 << 20, 16, dtype=np.uint64), 1 << 20).low_bits, 4)


@pytest.mark.parametrize("width", [1, 3, 7, 8, 9, 13, 31, 32, 33, 57, 63, 64])
def test_fields_are_packed_lowest_bit_first_one_after_another(width: int) -> None:
    # The stream bit by bit: value i's bit b at position i·width + b, bytes filled lowest bit first.
    rng = np.random.default_rng(width)
    for count in (1, 7, 8, 9, 1001):
        values = rng.integers(0, 2**63, size=count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        bits = (values[:, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)
        expected = np.packbits(bits.astype(np.uint8).ravel(), bitorder="little")
        stream = pack_fields(values, width)
        assert np.array_equal(stream, expected), (width, count)
        kept = values if width == 64 else values & np.uint64((1 << width) - 1)
        assert np.array_equal(unpack_fields(stream, count, width), kept), (width, count)
