"""Writing records as JSON Lines, or as TSV and CSV with a header row.

Groups in TSV/CSV become one row per member (JSON Lines keeps the member list in one record).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any, TextIO

from dedup_cli.output.records import FIELDS


def write_records(records: Iterator[dict[str, Any]], kind: str, fmt: str, stream: TextIO, header: bool = True) -> int:
    """Write records in ``fmt``; groups in TSV/CSV become one row per member. Returns rows written."""
    if fmt == "jsonl":
        count = 0
        for record in records:
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        return count
    fields = FIELDS[kind]
    writer = csv.writer(stream, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    if header:
        writer.writerow(fields)
    count = 0
    for record in records:
        rows = (
            [[record["group"], record["size"], member] for member in record["members"]]
            if kind == "groups"
            else [["" if record[name] is None else record[name] for name in fields]]
        )
        writer.writerows(rows)
        count += len(rows)
    return count
