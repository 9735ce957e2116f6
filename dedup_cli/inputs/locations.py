"""Where a document was read (its location, recorded by the store) and the names shown for files.

Locations (``Document.path``, what a store records and :mod:`dedup_cli.inputs.reread` resolves)
    ``PATH`` for a whole file, ``PATH#line=N`` (lines), ``PATH#line=N&field=NAME`` (jsonl),
    ``PATH#row=N&column=NAME`` (parquet), ``PATH#csv=N&column=NAME`` and ``PATH#tsv=N&column=NAME`` (record N of
    a CSV or TSV file, counted from 1 after its header), ``PATH#json=N&field=NAME`` (element N of a JSON array,
    from 1), NAME percent-encoded. PATH is absolute; when it is not
    valid UTF-8 or contains ``#`` it is written as a ``file://`` URI with every other byte percent-encoded, which
    round-trips exactly. Stdin is ``-`` or ``-#line=N…`` and cannot be re-read.

Names
    File names that are not UTF-8 are decoded with surrogateescape (:func:`os.fsdecode`) and their
    undecodable bytes are written ``\\xNN`` in ids and messages (``caf\\xe9.txt``).
"""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

STDIN = "-"
STDIN_NAME = "<stdin>"

_FRAGMENT = re.compile(r"#(line|row|csv|tsv|json)=(\d+)(?:&(field|column)=([^&#]*))?\Z")
_URI_PREFIX = "file://"


def display_name(name: str) -> str:
    """``name`` as a valid Unicode string: bytes that are not UTF-8 (surrogate-escaped) written ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte, e.g. from JSON "\ud800"
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=256)  # called for every record of a file
def location_path(path: str) -> str:
    """A path as a store can hold it: itself, or a ``file://`` URI when it is not UTF-8 or holds ``#``."""
    if "#" not in path and display_name(path) == path:
        return path
    return _URI_PREFIX + urllib.parse.quote(path.encode("utf-8", "surrogateescape"), safe="/")


def path_of_location(text: str) -> str:
    if text.startswith(_URI_PREFIX):
        return os.fsdecode(urllib.parse.unquote_to_bytes(text[len(_URI_PREFIX):]))
    return text


@functools.lru_cache(maxsize=256)
def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="", errors="surrogateescape")


def record_location(path: str, kind: str, number: int, name: str | None = None) -> str:
    """The location of line/row/record ``number`` of ``path`` (``-`` for stdin); ``kind``: line, row, csv/tsv (a
    record) or json (an element of an array); ``name`` is the field or column."""
    base = STDIN if path == STDIN else location_path(path)
    if kind == "json":
        return f"{base}#json={number}&field={_quote(name or '')}"
    if kind in ("csv", "tsv"):
        return f"{base}#{kind}={number}&column={_quote(name or '')}"
    if kind == "row":
        return f"{base}#row={number}&column={_quote(name or '')}"
    return f"{base}#line={number}" + (f"&field={_quote(name)}" if name is not None else "")


@dataclass(frozen=True)
class Location:
    path: str  # an OS path, or "-"
    kind: str  # "file", "line", "row", "csv"/"tsv" (a record) or "json" (an element of an array)
    number: int = 0
    name: str | None = None  # jsonl field, or parquet, CSV or TSV column


def parse_location(location: str) -> Location:
    match = _FRAGMENT.search(location)
    if match is not None:
        kind, number, key, value = match.groups()
        if (kind, key) in (("line", None), ("line", "field"), ("row", "column"), ("csv", "column"), ("tsv", "column"),
                           ("json", "field")):
            name = None if value is None else urllib.parse.unquote(value, errors="surrogateescape")
            return Location(path_of_location(location[: match.start()]), kind, int(number), name)
    return Location(path_of_location(location), "file")


def infer_id_root(ids: Sequence[str], locations: Sequence[str]) -> str | None:
    """The directory a store's file ids were made relative to, read off its first row that shows it.

    For stores written before the root was recorded: a whole file's location is ROOT/ID, a record's
    ``FILE:LINE`` id has the location ROOT/FILE#line=…. None when no row shows it (stdin, named ids).
    """
    for identifier, location in zip(ids, locations, strict=True):
        where = parse_location(location)
        if where.path == STDIN:
            continue
        relative = identifier if where.kind == "file" else identifier.rpartition(":")[0]
        path = where.path
        if relative and display_name(path) == path and path.endswith("/" + relative):
            return where.path[: len(where.path) - len(relative) - 1] or "/"
    return None


def where_read(location: str) -> str:
    """A location as messages name it: ``FILE``, ``FILE:LINE`` or ``FILE row N`` (as the reader reports it)."""
    where = parse_location(location)
    name = "<stdin>" if where.path == STDIN else display_name(where.path)
    if where.kind == "line":
        return f"{name}:{where.number}"
    if where.kind in ("csv", "tsv"):
        return f"{name} record {where.number}"
    if where.kind == "json":
        return f"{name} element {where.number}"
    return f"{name} row {where.number}" if where.kind == "row" else name


@dataclass(frozen=True)
class Source:
    id: str  # document id (files) or the FILE part of record ids
    path: str  # OS path to open, or "-"
    display: str  # for messages
    format: str  # text, lines, jsonl, csv, tsv, parquet or sets
    compression: str | None
    size: int = 0  # bytes on disk (0 for stdin), for progress
    status: os.stat_result | None = None  # ``os.stat`` when the file was listed (None for stdin, or if it failed)
    # Parquet read in parts: row groups start … stop − 1 only, the first of them holding row ``first_row``.
    row_groups: tuple[int, int] | None = None
    first_row: int = 0
    # A line or CSV/TSV file read in pieces: this piece's reading tasks (chunks of whole lines or records, cut as
    # :func:`dedup_cli.inputs.task_planning.file_pieces` cuts them), read as they are rather than planned again.
    chunks: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class FileRun:
    """Whole text files found one after another in one directory, in id order, each one document: what the walk
    hands the local engine's planning in place of a :class:`Source` per file (lists, so that the driver's work
    per file stays a few list operations). ``statuses``: ``os.stat`` of each (None when it failed, or was not
    made: the file is reported when read); ``sizes``: their sizes on disk (0 where the stat failed); both None
    until the files are stated (:func:`dedup_cli.inputs.discovery.stat_run`)."""

    ids: list[str]
    paths: list[str]
    statuses: list[os.stat_result | None] | None
    sizes: list[int] | None
