"""Integer columns read from Arrow's buffers and numpy arrays handed to Arrow, without pandas: the same values as
Arrow's own conversions, whatever the chunks, slices and offsets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import dedup_cli
from dedup_cli.store.format import int64_array, integer_dtype, integers

SIZES = st.lists(st.integers(0, 40), min_size=0, max_size=5)


@settings(max_examples=80, deadline=None)
@given(sizes=SIZES, start=st.integers(0, 10), seed=st.integers(0, 2**32 - 1))
def test_integers_are_the_columns_values_across_chunks_and_slices(sizes: list[int], start: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    chunks = [pa.array(rng.integers(-2**62, 2**62, size, dtype=np.int64)) for size in sizes]
    column = pa.chunked_array(chunks, type=pa.int64())
    column = column.slice(min(start, len(column)))  # a slice starts inside a chunk: an offset into its buffer
    expected = np.array(column.to_pylist(), dtype=np.int64)
    got = integers(column)
    assert got.dtype == np.int64 and np.array_equal(got, expected)
    got[:1] = 7  # owned and writable: not Arrow's read-only buffer


def test_unsigned_and_narrow_columns_keep_their_values() -> None:
    hashes = pa.array(np.array([0, 2**63 + 5, 2**64 - 1], dtype=np.uint64))
    assert integers(hashes, np.uint64).tolist() == [0, 2**63 + 5, 2**64 - 1]
    assert integers(pa.array(np.array([3, -1, 9], dtype=np.int32))).tolist() == [3, -1, 9]
    assert integers(pa.array([4, None, 6], pa.int64()), np.float64)[[0, 2]].tolist() == [4.0, 6.0]


@given(values=st.lists(st.integers(-2**63, 2**63 - 1), max_size=30), step=st.integers(1, 3))
def test_int64_array_is_pa_array(values: list[int], step: int) -> None:
    array = np.array(values, dtype=np.int64)[::step]  # not contiguous: copied first
    assert int64_array(array).equals(pa.array(array, pa.int64()))
    table = pa.table({"x": pa.array(range(40))})
    taken = [index % 40 for index in array.tolist()]
    assert table.take(int64_array(np.array(taken, np.int64))).column("x").to_pylist() == taken


INTEGER_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def test_every_integer_type_is_read_with_its_own_width_and_sign() -> None:
    for arrow_type in INTEGER_TYPES:
        arrows_dtype = pa.array([0], arrow_type).to_numpy().dtype
        info = np.iinfo(arrows_dtype)
        values = pa.array([info.min, 0, 1, info.max], arrow_type).slice(1)  # an offset into the buffer
        assert integer_dtype(arrow_type) == arrows_dtype, arrow_type
        assert integers(values, arrows_dtype).tolist() == [0, 1, int(info.max)], arrow_type


def test_the_library_never_asks_pyarrow_for_pandas_dtypes() -> None:
    # DataType.to_pandas_dtype imports pandas in pyarrow 16 and 25, even for integers; the command line hides
    # pandas, and a core install has none, so `sign` and `find` failed there. pyarrow 26, which the suite runs
    # with, no longer imports it: a check of the source, beside tests/test_oldest_versions.py's of behaviour.
    package = Path(dedup_cli.__file__).parent
    callers = [str(path.relative_to(package)) for path in package.rglob("*.py")
               if ".to_pandas_dtype(" in path.read_text(encoding="utf-8")]
    assert callers == []
