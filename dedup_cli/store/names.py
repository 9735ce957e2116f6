"""A column of names (ids, locations) that crosses processes as Arrow strings, not as a Python object a row.

The Dask engine's tables are dicts of numpy columns; a numpy column of ``str`` objects is pickled one string at a
time whenever it moves to another worker, 0.18 s a million names and back again. :class:`Names` holds them as one
Arrow large-string array, read straight from the store's Parquet pieces: it pickles as a few buffers (about ten
times faster), and takes, filters, slices and joins in Arrow's own code. It answers what the engine asks of a
column (``len``, ``size``, an index, a mask or positions, ``tolist``); anything else sees an object array
(``__array__``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash


class Names:
    """Strings as one Arrow large-string array (see the module docstring)."""

    __slots__ = ("array",)

    def __init__(self, array: pa.Array | pa.ChunkedArray) -> None:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        if array.type != pa.large_string():
            array = array.cast(pa.large_string())
        self.array = array

    @classmethod
    def of(cls, values: Names | pa.Array | pa.ChunkedArray | Sequence[str] | np.ndarray) -> Names:
        """Names from Arrow, from another :class:`Names`, or from strings."""
        if isinstance(values, Names):
            return values
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            return cls(values)
        return cls(pa.array(list(values), pa.large_string()))

    def __len__(self) -> int:
        return len(self.array)

    @property
    def size(self) -> int:
        return len(self.array)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (int, np.integer)):
            return self.array[int(index)].as_py()
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.array))
            if step == 1:
                return Names(self.array.slice(start, max(stop - start, 0)))
            index = np.arange(start, stop, step)
        positions = np.asarray(index)
        if positions.dtype == bool:
            return Names(self.array.filter(pa.array(positions, pa.bool_())))
        return Names(self.array.take(pa.array(positions.astype(np.int64, copy=False), pa.int64())))

    def __iter__(self) -> Iterator[str]:
        return iter(self.array.to_pylist())

    def tolist(self) -> list[str]:
        return self.array.to_pylist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.array(self.array.to_pylist(), dtype=object)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Names) and self.array.equals(other.array)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Names({self.array.to_pylist()[:5]}{'…' if len(self) > 5 else ''}, {len(self)} in all)"

    @staticmethod
    def joined(parts: Sequence[Names]) -> Names:
        """The names of ``parts`` one after another."""
        return Names(pa.concat_arrays([part.array for part in parts]) if parts else pa.array([], pa.large_string()))

    def hashes(self) -> np.ndarray:
        """uint64[n]: the xxh3-64 of each name's UTF-8 bytes, the same in every process (Python's own ``hash`` of a
        str is salted per process). One C call a name: 0.09 s a million, where a polynomial hash in numpy over
        Arrow's buffers took 0.8 s. A collision is rare, and is for the caller to rule out by comparing names."""
        digest = xxhash.xxh3_64_intdigest
        return np.fromiter((digest(name.encode("utf-8", "surrogatepass")) for name in self.array.to_pylist()),
                           np.uint64, len(self.array))

    def ranks(self, splitters: Sequence[str]) -> np.ndarray:
        """int64[n]: how many of ``splitters`` (ascending) each name is at or after (numpy's ``searchsorted`` with
        ``side="right"``), by one Arrow sort of the names with the splitters put before their equals."""
        count = len(splitters)
        if not count:
            return np.zeros(len(self), np.int64)
        import pyarrow.compute as pc

        merged = pa.concat_arrays([pa.array(list(splitters), pa.large_string()), self.array])
        order = pc.sort_indices(pa.table({"name": merged, "kind": pa.array(np.r_[np.zeros(count, np.int8),
                                                                                  np.ones(len(self), np.int8)])}),
                                sort_keys=[("name", "ascending"), ("kind", "ascending")]).to_numpy()
        before = np.cumsum(order < count)
        ranks = np.empty(len(self), np.int64)
        named = order >= count
        ranks[order[named] - count] = before[named]
        return ranks
