"""Records for ``find`` results and writers for JSON Lines, TSV and CSV.

Field names are stable and documented in the README; scripts may rely on them. Document indices are in
store order, which is id order, so sorting by index sorts by id.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

if TYPE_CHECKING:
    from dedup_cli.finding import FindResult

OUTPUT_KINDS = ("groups", "pairs", "triples", "members")
FORMATS = ("jsonl", "tsv", "csv", "parquet")

FIELDS = {
    "pairs": ("id_a", "id_b", "estimate", "stderr", "ci_low", "ci_high", "matches", "exact"),
    "triples": ("id_a", "id_b", "id_c", "estimate", "stderr", "ci_low", "ci_high", "matches",
                "estimate_ab", "estimate_ac", "estimate_bc"),
    "members": ("id", "group", "action", "group_size", "representative"),
    # Groups in TSV/CSV: one row per member (JSON Lines and Parquet keep the member list in one record).
    "groups": ("group", "size", "id"),
}
# Columns of JSON Lines records and Parquet output, in order.
RECORD_FIELDS = {**FIELDS, "groups": ("group", "size", "weakest", "representative", "members")}


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 6)


def pair_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted pair, most similar first, ties in id order."""
    pairs, ids = result.pairs, result.store.ids
    for p in np.lexsort((pairs.second, pairs.first, -pairs.estimate)):
        yield {
            "id_a": ids[pairs.first[p]],
            "id_b": ids[pairs.second[p]],
            "estimate": _round(pairs.estimate[p]),
            "stderr": _round(pairs.stderr[p]),
            "ci_low": _round(pairs.ci_low[p]),
            "ci_high": _round(pairs.ci_high[p]),
            "matches": int(pairs.matches[p]),
            "exact": _round(result.exact[p]),
        }


def triple_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted triple (already ordered by descending estimate)."""
    found, ids = result.triples, result.store.ids
    if found is None:
        return
    for t in range(found.docs.shape[0]):
        a, b, c = (ids[d] for d in found.docs[t])
        yield {
            "id_a": a, "id_b": b, "id_c": c,
            "estimate": _round(found.estimate[t]),
            "stderr": _round(found.stderr[t]),
            "ci_low": _round(found.ci_low[t]),
            "ci_high": _round(found.ci_high[t]),
            "matches": int(found.matches[t]),
            "estimate_ab": _round(found.pairwise[t, 0]),
            "estimate_ac": _round(found.pairwise[t, 1]),
            "estimate_bc": _round(found.pairwise[t, 2]),
        }


def group_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per group: id (from 1), size, weakest internal estimate, representative, members."""
    groups, ids = result.groups, result.store.ids
    for index in range(len(groups)):
        members = groups.group(index)
        yield {
            "group": index + 1,
            "size": int(members.size),
            "weakest": _round(result.weakest[index]),
            "representative": ids[result.kept[index]],
            "members": [ids[m] for m in members],
        }


def member_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per grouped document: its group and whether it is kept or may be dropped."""
    groups, ids = result.groups, result.store.ids
    for index in range(len(groups)):
        members = groups.group(index)
        kept = int(result.kept[index])
        for member in members:
            yield {
                "id": ids[member],
                "group": index + 1,
                "action": "keep" if member == kept else "drop",
                "group_size": int(members.size),
                "representative": ids[kept],
            }


RECORDS = {"pairs": pair_records, "triples": triple_records, "groups": group_records, "members": member_records}


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
