"""The format a file's name says: its format suffix, looked for inside a compression suffix (``x.jsonl.gz`` is
JSON Lines read through gzip), what ``--input-format auto`` reads each file found as."""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from itertools import accumulate

from dedup_cli.inputs.byte_streams import COMPRESSION_SUFFIXES

FORMAT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
                   ".parquet": "parquet"}
_KNOWN_ENDINGS = (*FORMAT_SUFFIXES, *COMPRESSION_SUFFIXES)
# A known ending at the end of a name, in names joined by NUL (which no path holds): one scan of a batch's names
# finds the few that may not be plain text, where a test per name cost the walk 1.5 µs a file. IGNORECASE matches
# at least what ``lower()`` does on these ASCII endings; format_and_compression has the last word.
_ENDING_IN_JOINED = re.compile("(?:" + "|".join(re.escape(ending) for ending in _KNOWN_ENDINGS) + ")(?=\0)",
                               re.IGNORECASE)


def format_and_compression(name: str) -> tuple[str, str | None]:
    """(the format ``auto`` gives a file name, its compression), looking inside a compression suffix:
    ``x.jsonl.gz`` → ("jsonl", "gzip"); from one look at the suffix or two."""
    if not name[-8:].lower().endswith(_KNOWN_ENDINGS):  # most names: a slice, not a path split
        return "text", None
    stem, suffix = os.path.splitext(name)
    compressed = COMPRESSION_SUFFIXES.get(suffix.lower())
    if compressed is not None:
        stem, suffix = os.path.splitext(stem)
    return FORMAT_SUFFIXES.get(suffix.lower(), "text"), compressed


def known_endings(paths: list[str]) -> list[int]:
    """The positions of the paths that end with a known format or compression suffix (and maybe a few more)."""
    joined = "\0".join(paths) + "\0"
    found = [match.start() for match in _ENDING_IN_JOINED.finditer(joined)]
    if not found:
        return []
    ends = list(accumulate(len(path) + 1 for path in paths))  # where each path's NUL is, plus one
    return sorted({bisect_right(ends, at) for at in found})
