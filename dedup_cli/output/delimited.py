"""Writing records as JSON Lines, or as TSV and CSV with a header row.

Groups in TSV/CSV become one row per member (JSON Lines keeps the member list in one record).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
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
