"""Records for ``find`` results and writers for JSON Lines, TSV and CSV.

Field names are stable and documented in the README; scripts may rely on them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any, TextIO

import numpy as np

from dedup_cli.grouping import Groups
from dedup_cli.scoring import ScoredPairs

OUTPUT_KINDS = ("groups", "pairs")
FORMATS = ("jsonl", "tsv", "csv")

PAIR_FIELDS = ("id_a", "id_b", "estimate", "stderr", "ci_low", "ci_high", "matches")
GROUP_FIELDS = ("group", "size", "members")
GROUP_ROW_FIELDS = ("group", "size", "id")


def _round(value: float) -> float:
    return round(float(value), 6)


def pair_records(pairs: ScoredPairs, ids: list[str]) -> Iterator[dict[str, Any]]:
    """One record per accepted pair, most similar first, ties in id order (store order is id order)."""
    for p in np.lexsort((pairs.second, pairs.first, -pairs.estimate)):
        yield {
            "id_a": ids[pairs.first[p]],
            "id_b": ids[pairs.second[p]],
            "estimate": _round(pairs.estimate[p]),
            "stderr": _round(pairs.stderr[p]),
            "ci_low": _round(pairs.ci_low[p]),
            "ci_high": _round(pairs.ci_high[p]),
            "matches": int(pairs.matches[p]),
        }


def group_records(groups: Groups, ids: list[str]) -> Iterator[dict[str, Any]]:
    """One record per group: its 1-based id, size and member ids in id order."""
    for index in range(len(groups)):
        members = groups.group(index)
        yield {"group": index + 1, "size": int(members.size), "members": [ids[m] for m in members]}


def write_records(records: Iterator[dict[str, Any]], kind: str, fmt: str, stream: TextIO, header: bool = True) -> int:
    """Write records in ``fmt``; groups in TSV/CSV become one row per member. Returns rows written."""
    if fmt == "jsonl":
        count = 0
        for record in records:
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        return count
    fields = PAIR_FIELDS if kind == "pairs" else GROUP_ROW_FIELDS
    writer = csv.writer(stream, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    if header:
        writer.writerow(fields)
    count = 0
    for record in records:
        rows = (
            [[record["group"], record["size"], member] for member in record["members"]]
            if kind == "groups"
            else [[record[name] for name in fields]]
        )
        writer.writerows(rows)
        count += len(rows)
    return count
