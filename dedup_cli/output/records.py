"""The records ``find`` reports: one dict per group, pair, triple or grouped document, with stable fields.

Field names are stable and documented in the README; scripts may rely on them. Document indices are in
store order, which is id order, so sorting by index sorts by id.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from dedup_cli.commands.filter import FilterReport
from dedup_cli.engine.results import FindResult

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
# With ``against``, which store each id is from ("new" or "reference"), after the usual fields.
STORE_FIELDS = {"pairs": ("store_a", "store_b"), "triples": ("store_a", "store_b", "store_c"),
                "members": ("store", "representative_store"), "groups": ("store",)}
RECORD_STORE_FIELDS = {**STORE_FIELDS, "groups": ("representative_store", "stores")}
STORE_NAMES = ("new", "reference")


def fields_of(kind: str, result: FindResult, delimited: bool) -> tuple[str, ...]:
    """The fields of ``kind`` records, in order: TSV/CSV columns (``delimited``) or JSON Lines and Parquet ones."""
    base, extra = (FIELDS, STORE_FIELDS) if delimited else (RECORD_FIELDS, RECORD_STORE_FIELDS)
    return base[kind] + (extra[kind] if result.reference is not None else ())


def _stores(result: FindResult, rows: Any) -> list[str]:
    """The store each document of ``rows`` is from (for records with ``against``)."""
    assert result.reference is not None
    return [STORE_NAMES[int(origin)] for origin in result.reference[rows]]


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 6)


def pair_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted pair, most similar first, ties in id order."""
    pairs, ids = result.pairs, result.store.ids
    for p in np.lexsort((pairs.second, pairs.first, -pairs.estimate)):
        record = {
            "id_a": ids[pairs.first[p]],
            "id_b": ids[pairs.second[p]],
            "estimate": _round(pairs.estimate[p]),
            "stderr": _round(pairs.stderr[p]),
            "ci_low": _round(pairs.ci_low[p]),
            "ci_high": _round(pairs.ci_high[p]),
            "matches": int(pairs.matches[p]),
            "exact": _round(result.exact[p]),
        }
        if result.reference is not None:
            record["store_a"], record["store_b"] = _stores(result, [pairs.first[p], pairs.second[p]])
        yield record


def triple_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted triple (already ordered by descending estimate)."""
    found, ids = result.triples, result.store.ids
    if found is None:
        return
    for t in range(found.docs.shape[0]):
        a, b, c = (ids[d] for d in found.docs[t])
        record = {
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
        if result.reference is not None:
            record["store_a"], record["store_b"], record["store_c"] = _stores(result, found.docs[t])
        yield record


def group_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per group: id (from 1), size, weakest internal estimate, representative, members."""
    groups, ids = result.groups, result.store.ids
    for index in range(len(groups)):
        members = groups.group(index)
        record = {
            "group": index + result.first_group,
            "size": int(members.size),
            "weakest": _round(result.weakest[index]),
            "representative": ids[result.kept[index]],
            "members": [ids[m] for m in members],
        }
        if result.reference is not None:
            record["representative_store"] = _stores(result, [result.kept[index]])[0]
            record["stores"] = _stores(result, members)
        yield record


def member_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per grouped document: its group and whether it is kept or may be dropped (a reference
    store's documents are always kept)."""
    groups, ids, reference = result.groups, result.store.ids, result.reference
    for index in range(len(groups)):
        members = groups.group(index)
        kept = int(result.kept[index])
        for member in members:
            record = {
                "id": ids[member],
                "group": index + result.first_group,
                "action": "keep" if member == kept or (reference is not None and reference[member]) else "drop",
                "group_size": int(members.size),
                "representative": ids[kept],
            }
            if reference is not None:
                record["store"], record["representative_store"] = _stores(result, [member, kept])
            yield record


REMOVED_FIELDS = ("id", "group", "representative", "similarity", "verified")


def removed_fields(report: FilterReport) -> tuple[str, ...]:
    """The fields of ``filter --removed`` records: with ``against``, also the representative's store."""
    return REMOVED_FIELDS + (("representative_store",) if report.against is not None else ())


def removed_records(report: FilterReport) -> Iterator[dict[str, Any]]:
    """One record per document ``filter`` dropped, in group order: its group, the kept member and the
    similarity to it (the exact resemblance where it was verified, else the b-bit estimate)."""
    removed = report.removed
    if removed is None:
        return
    for index, identifier in enumerate(removed.ids):
        record = {
            "id": identifier,
            "group": int(removed.groups[index]),
            "representative": removed.representatives[index],
            "similarity": _round(removed.similarity[index]),
            "verified": bool(removed.verified[index]),
        }
        if removed.representative_stores is not None:
            record["representative_store"] = removed.representative_stores[index]
        yield record


RECORDS = {"pairs": pair_records, "triples": triple_records, "groups": group_records, "members": member_records}


def find_records(kind: str, result: FindResult) -> Iterator[dict[str, Any]]:
    """The records of ``kind``, from the result, or one chunk after another when its output is streamed."""
    if result.streamed is None:
        yield from RECORDS[kind](result)
        return
    for chunk in result.streamed.chunks(kind):
        yield from RECORDS[kind](chunk)
