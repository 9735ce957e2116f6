"""Writing ``find``'s records in each ``--format``: JSON Lines, TSV and CSV with a header row, or one Parquet table.

Groups in TSV/CSV become one row per member (JSON Lines and Parquet keep the member list in one record).
pyarrow is imported only when Parquet is written.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from dedup_cli.engine.results import FIELDS


def write_records(records: Iterator[dict[str, Any]], kind: str, fmt: str, stream: TextIO, header: bool = True,
                  fields: Sequence[str] | None = None) -> int:
    """Write records in ``fmt``; groups in TSV/CSV become one row per member. Returns rows written.

    ``fields``: the TSV/CSV columns (default: those of ``kind``; groups with a ``stores`` list add ``store``).
    """
    if fmt == "jsonl":
        count = 0
        for record in records:
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        return count
    fields = FIELDS[kind] if fields is None else fields
    writer = csv.writer(stream, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    if header:
        writer.writerow(fields)
    count = 0
    for record in records:
        if kind == "groups":
            stores = record.get("stores") or [None] * len(record["members"])
            rows = [[record["group"], record["size"], member, *([store] if store else [])]
                    for member, store in zip(record["members"], stores, strict=True)]
        else:
            rows = [["" if record[name] is None else record[name] for name in fields]]
        writer.writerows(rows)
        count += len(rows)
    return count


def write_records_parquet(records: Iterable[dict[str, Any]], fields: Sequence[str], destination: Any) -> int:
    """Write ``find`` records as one Parquet table to a path or a binary stream; returns the row count.

    ``fields`` fixes the column order (and the columns of an empty result, all strings then).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(records)
    if rows:
        table = pa.Table.from_pylist(rows).select(list(fields))
    else:
        table = pa.table({name: pa.array([], pa.string()) for name in fields})
    pq.write_table(table, destination, compression="zstd")
    return len(rows)
