"""Packing b-bit values, signature parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dedup_cli.errors import UsageError
from dedup_cli.minhash.packing import lowest_bits, pack_values, unpack_values
from dedup_cli.params import SignatureParams


@given(
    hnp.arrays(np.uint64, st.tuples(st.integers(0, 5), st.integers(1, 40)), elements=st.integers(0, 2**64 - 1)),
    st.integers(1, 64),
)
def test_pack_unpack_round_trip(values: np.ndarray, bits: int) -> None:
    packed = pack_values(values, bits)
    assert packed.shape == (values.shape[0], (values.shape[1] * bits + 7) // 8)
    assert np.array_equal(unpack_values(packed, bits, values.shape[1]), lowest_bits(values, bits))


def test_pack_layout_is_little_endian_within_values() -> None:
    values = np.array([[1, 2, 3, 0]], dtype=np.uint64)
    # 2 bits each: 01, 10, 11, 00 → bits (LSB first) 1 0 0 1 1 1 0 0 → byte 0b00111001.
    assert pack_values(values, 2).tolist() == [[0b00111001]]


def test_lowest_bits_of_narrower_stored_values() -> None:
    values = np.array([[0xFF, 0x0F]], dtype=np.uint8)
    assert lowest_bits(values, 2).tolist() == [[3, 3]]


def test_params_round_trip_and_differences() -> None:
    params = SignatureParams(num_perm=64, bits=4)
    assert SignatureParams.from_dict(params.to_dict()) == params
    assert params.signature_bytes == 32
    assert params.differences(SignatureParams(num_perm=128, bits=4)) == ["num_perm: 64 vs 128"]


def test_params_pin_the_rule_for_short_documents() -> None:
    from dedup_cli.options.input_options import InputOptions
    from dedup_cli.options.signing import SignOptions

    assert SignatureParams().short_documents == "whole"  # new stores
    stored = SignatureParams().to_dict()
    del stored["short_documents"]
    old = SignatureParams.from_dict(stored)
    assert old.short_documents == "none"  # what stores signed before used
    assert old.differences(SignatureParams()) == ["short_documents: none vs whole"]
    # A run into a store keeps its rule, for text and integer sets alike.
    assert SignatureParams.from_options(SignOptions(), old).short_documents == "none"
    assert SignatureParams.from_options(SignOptions()).short_documents == "whole"
    sets = SignOptions(input=InputOptions(input_format="sets", universe=100))
    assert SignatureParams.from_options(sets, dataclasses.replace(SignatureParams.for_sets(100),
                                                                  short_documents="none")).short_documents == "none"
    with pytest.raises(ValueError, match="short_documents 'some'"):
        SignatureParams(short_documents="some")


@pytest.mark.parametrize("fields", [{"num_perm": 0}, {"bits": 65}, {"shingle_size": 0}, {"shingle_unit": "line"}])
def test_params_reject_out_of_range(fields: dict) -> None:
    with pytest.raises(UsageError):
        SignatureParams(**fields)
