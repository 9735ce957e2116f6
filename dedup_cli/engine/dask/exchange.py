"""Tables of numpy columns, and the one all-to-all exchange the Dask engine's stages meet through.

A table is a dict of equal-length numpy arrays (a 2-D array is a column of rows, e.g. packed b-bit values; ids and
locations are :class:`dedup_cli.store.names.Names`, Arrow strings that move as buffers): what
every task of the engine takes and gives, so the stages are the local engine's array functions and nothing
converts to and from data frames. Where data must meet across workers (pairs with their documents, pairs with
pairs, documents with their ranges), one exchange runs: each source task cuts its table by destination, and each
destination task joins its cuts, so what moves is exactly the rows that change hands, with no index, schema or
data-frame conversion on the way (docs/scaling.md, "What each stage moves").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.table_kinds import Table, TableKind
from dedup_cli.store.names import Names


def row_count(table: Table) -> int:
    """How many rows ``table`` holds."""
    return len(next(iter(table.values()))) if table else 0


def counted(parts: Sequence[Any]) -> int:
    """Rows of delayed tables, counted where they are."""
    return int(sum(dask.compute(*[dask.delayed(row_count)(part) for part in parts])))


def take(table: Table, index: np.ndarray | slice) -> Table:
    """The rows ``index`` (a mask, positions or a slice) of every column."""
    return {name: column[index] for name, column in table.items()}


def joined(tables: Sequence[Table], kind: TableKind | None = None) -> Table:
    """The tables one after another (an empty table when all are empty), which must all hold the same columns,
    and with ``kind`` its declared ones (:meth:`dedup_cli.engine.dask.table_kinds.TableKind.check`)."""
    held = [table for table in tables if table]
    for table in held:
        if kind is not None:
            kind.check(table)
        elif set(table) != set(held[0]):
            raise ValueError(f"tables of columns {sorted(held[0])} and {sorted(table)} cannot be joined")
    full = [table for table in held if row_count(table)]
    if not full:
        return held[0] if held else {}
    if len(full) == 1:
        return full[0]
    return {name: concatenated([table[name] for table in full]) for name in full[0]}


def concatenated(columns: Sequence[Any]) -> Any:
    """Columns one after another: numpy arrays, or :class:`Names` (joined as Arrow strings)."""
    if columns and all(isinstance(column, Names) for column in columns):
        return Names.joined(columns)
    return np.concatenate([np.asarray(column) for column in columns])


def cut(table: Table, destination: np.ndarray, parts: int) -> list[Table]:
    """``table``'s rows cut by ``destination`` (int[n], each in 0 … parts − 1), each cut in the rows' order."""
    if parts == 1:
        return [table]
    order = np.argsort(destination, kind="stable")
    bounds = np.searchsorted(destination[order], np.arange(parts + 1))
    return [take(table, order[bounds[index] : bounds[index + 1]]) for index in range(parts)]


def by_range(values: np.ndarray, divisions: Sequence[int]) -> np.ndarray:
    """The range (of ``divisions``: each range's first value, then the last value) each of ``values`` lies in."""
    return np.searchsorted(np.asarray(divisions[1:-1], np.int64), values, side="right")


def by_hash(values: np.ndarray, parts: int) -> np.ndarray:
    """A destination for each of ``values`` (uint64 or int64) spread evenly, whatever their order (Fibonacci
    hashing: the high bits of the product with 2^64/φ)."""
    mixed = values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((mixed >> np.uint64(32)) % np.uint64(max(1, parts))).astype(np.int64)


STAGED_TASKS = 1 << 16
"""Sources × destinations above which an exchange runs in two stages: first into about √destinations groups of
consecutive destinations, then each group into its own, so that the cuts stay near sources · √destinations tasks
(what the scheduler holds) rather than sources · destinations."""


def column_range(table: Table, column: str, divisions: Sequence[int]) -> np.ndarray:
    """A route: each row to the range (of ``divisions``) its ``column`` lies in."""
    return by_range(table[column], divisions)


def column_part(table: Table, column: str) -> np.ndarray:
    """A route: each row to the part its ``column`` names."""
    return table[column]


def column_hash(table: Table, column: str, parts: int) -> np.ndarray:
    """A route: each row to one of ``parts`` by a hash of its ``column`` (equal values meet)."""
    return by_hash(table[column], parts)


def _cut_task(table: Table, route: Callable[..., np.ndarray], parts: int, args: tuple) -> list[Table]:
    return cut(table, route(table, *args), parts)


def _group_route(table: Table, route: Callable[..., np.ndarray], parts: int, groups: int, args: tuple
                 ) -> np.ndarray:
    return route(table, *args) * groups // parts


def _within_group(table: Table, route: Callable[..., np.ndarray], first: int, args: tuple) -> np.ndarray:
    return route(table, *args) - first


def exchange(sources: Sequence[Any], route: Callable[..., np.ndarray], parts: int, *args: Any,
             then: Callable[[Table], Table] | None = None, kind: TableKind | None = None) -> list[Any]:
    """The delayed tables ``sources`` exchanged into ``parts`` delayed tables: row r of a source goes to part
    ``route(source, *args)[r]``; each part joins what it gets in source order (checked as ``kind``), then applies
    ``then``. Past :data:`STAGED_TASKS` cuts it runs in two stages, with the same result (each cut keeps its rows'
    order)."""
    def finish(cuts: list[Table]) -> Table:
        table = joined(cuts, kind)
        return then(table) if then is not None else table

    if parts == 1:
        return [dask.delayed(finish)(list(sources))]
    groups = max(2, math.isqrt(parts))
    if len(sources) * parts > STAGED_TASKS and groups < parts:
        # Group g holds the destinations d with d · groups // parts = g: consecutive, from first[g] on.
        first = [-(-group * parts // groups) for group in range(groups + 1)]
        grouped = exchange(sources, _group_route, groups, route, parts, groups, args, kind=kind)
        finished = []
        for group, table in enumerate(grouped):
            size = first[group + 1] - first[group]
            finished += exchange([table], _within_group, size, route, first[group], args, then=then, kind=kind)
        return finished
    split = [dask.delayed(_cut_task, nout=parts)(source, route, parts, args) for source in sources]
    return [dask.delayed(finish)([pieces[index] for pieces in split]) for index in range(parts)]
