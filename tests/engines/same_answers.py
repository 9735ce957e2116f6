"""What ``find`` writes, in every output and format, from one result: the bytes two engines must agree on."""

from __future__ import annotations

import io
import re

from dedup_cli.cli.record_writers import write_records, write_records_parquet
from dedup_cli.engine.stages.results import RECORD_FIELDS, FindResult, find_records

FORMATS = ("jsonl", "tsv", "csv", "parquet")


def written(result: FindResult) -> dict[tuple[str, str], bytes]:
    """The bytes ``dedup find --output KIND --format FORMAT`` writes for ``result``, for every kind and format."""
    kinds = ["groups", "pairs", "members"] + (["triples"] if result.accepted_triples is not None else [])
    found = {}
    for kind in kinds:
        for fmt in FORMATS:
            if fmt == "parquet":
                stream = io.BytesIO()
                write_records_parquet(find_records(kind, result), RECORD_FIELDS[kind], stream)
                found[kind, fmt] = stream.getvalue()
            else:
                text = io.StringIO()
                write_records(find_records(kind, result), kind, fmt, text)
                found[kind, fmt] = text.getvalue().encode()
    return found


def assert_same_answers(local: FindResult, remote: FindResult) -> None:
    """Both results write the same bytes everywhere, and their summaries count the same things."""
    expected, got = written(local), written(remote)
    assert expected.keys() == got.keys()
    for key in expected:
        assert got[key] == expected[key], f"{key} differs"
    assert (remote.candidates, remote.eligible, remote.oversized_buckets, remote.aliases, remote.estimator,
            remote.document_count) == (local.candidates, local.eligible, local.oversized_buckets, local.aliases,
                                       local.estimator, local.document_count)
    assert remote.banding == local.banding and remote.banding_choice == local.banding_choice
    if local.verification is None:
        assert remote.verification is None
    else:
        assert remote.verification is not None
        assert remote.verification.checked == local.verification.checked
        assert remote.verification.unverifiable_documents == local.verification.unverifiable_documents


def without_time(line: str) -> str:
    """A summary line with its seconds blanked, and the name of the file it says it wrote: the engines agree on
    everything but the time they took (and the tests give each engine's output a name of its own)."""
    return re.sub(r"(; wrote .* to )\S+$", r"\1FILE", re.sub(r"\d+\.\d+ s", "T s", line), flags=re.MULTILINE)
