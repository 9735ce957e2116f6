"""Names: ids and locations as Arrow strings, which cross processes as a few buffers rather than a Python object a
row, and answer what the Dask engine's tables ask of a column."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.store.names import Names

words = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6), max_size=30)


@settings(max_examples=150, deadline=None)
@given(words, words, st.data())
def test_names_take_filter_slice_join_and_rank_as_object_arrays_do(values: list[str], splitters: list[str],
                                                                    data: st.DataObject) -> None:
    names, plain = Names.of(values), np.array(values, dtype=object)
    positions = np.array(data.draw(st.lists(st.integers(0, max(len(values) - 1, 0)), max_size=10)) if values else [],
                         np.int64)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))), bool)
    assert names[positions].tolist() == plain[positions].tolist()
    assert names[mask].tolist() == plain[mask].tolist()
    assert names[1:-1].tolist() == plain[1:-1].tolist() and names[::2].tolist() == plain[::2].tolist()
    assert Names.joined([names, names[mask]]).tolist() == np.concatenate([plain, plain[mask]]).tolist()
    ordered = sorted(splitters)
    expected = np.searchsorted(np.array(ordered, dtype=object), plain, side="right") if values else []
    assert names.ranks(ordered).tolist() == list(expected)
    assert pickle.loads(pickle.dumps(names)) == names and np.asarray(names).tolist() == values


def test_names_pickle_as_a_few_buffers_whatever_their_number() -> None:
    """A worker sends a column of names to another as its Arrow buffers (offsets, bytes), out of band: a few buffers
    whatever the rows, where an object array pickles each string on its own."""
    for rows in (10, 100_000):
        values = [f"/data/corpus/part-{n % 16:02d}.jsonl#line={n}&field=text" for n in range(rows)]
        buffers: list[pickle.PickleBuffer] = []
        pickle.dumps(Names.of(values), protocol=5, buffer_callback=buffers.append)
        assert 1 <= len(buffers) <= 3
        assert sum(memoryview(buffer).nbytes for buffer in buffers) >= sum(len(v) for v in values)
