"""The records ``filter --removed`` writes: one dict per dropped document, with stable fields.

``find``'s own records are :func:`dedup_cli.engine.stages.results.find_records`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dedup_cli.api.filter import FilterReport
from dedup_cli.engine.stages.results import round_value

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
            "similarity": round_value(removed.similarity[index]),
            "verified": bool(removed.verified[index]),
        }
        if removed.representative_stores is not None:
            record["representative_store"] = removed.representative_stores[index]
        yield record


