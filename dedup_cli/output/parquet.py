"""Writing records as one Parquet table (the columns of the JSON Lines records, in order)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_records_parquet(records: Iterable[dict[str, Any]], fields: Sequence[str], destination: Any) -> int:
    """Write ``find`` records as one Parquet table to a path or a binary stream; returns the row count.

    ``fields`` fixes the column order (and the columns of an empty result, all strings then).
    """
    rows = list(records)
    if rows:
        table = pa.Table.from_pylist(rows).select(list(fields))
    else:
        table = pa.table({name: pa.array([], pa.string()) for name in fields})
    pq.write_table(table, destination, compression="zstd")
    return len(rows)
