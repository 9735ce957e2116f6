"""Reading a ``find --output members`` file (JSON Lines, TSV, CSV or Parquet), for ``filter --members``.

The format is recognised from the content: Parquet by its magic bytes, JSON Lines by a first line that opens an
object, else TSV (a tab in the first line; fields escaped as ``find`` writes them, never quoted) or CSV (quoted
fields may hold line breaks). A TSV/CSV header row names the columns; without one (``find
--no-header``) they are in ``find``'s order: id, group, action, group_size, representative, then store and
representative_store (with ``--against``). Rows of the reference store (``store`` = ``reference``) are skipped:
only the new store's documents are ever dropped.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.atomic_files import open_input, rereadable
from dedup_cli.errors import InputError
from dedup_cli.inputs.decoding import tsv_unescape
from dedup_cli.inputs.locations import display_name
from dedup_cli.options.checks import literal

MEMBER_FIELDS = ("id", "group", "action", "group_size", "representative", "store", "representative_store")
ACTIONS = ("keep", "drop", "gone")


@dataclass
class Members:
    """The new store's grouped documents a members file lists, in its order."""

    ids: list[str]
    groups: np.ndarray  # int64[m]
    drop: np.ndarray  # bool[m]
    representatives: list[str]


def _rows(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) of every record of the file (or pipe: read whole first)."""
    source = rereadable(path)
    with open_input(source) if isinstance(source, str) else source as handle:
        magic = handle.read(4)
        handle.seek(0)
        if magic == b"PAR1":
            for number, record in enumerate(pq.read_table(handle).to_pylist()):
                yield f"row {number}", record
            return
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
        first = next((line for line in text if line.strip()), None)
        if first is None:
            return
        if first.lstrip().startswith("{"):
            lines = (line for line in text if line.strip())
            for number, line in enumerate([first, *lines], start=1):
                try:
                    yield f"record {number}", json.loads(line)
                except ValueError as error:
                    raise ValueError(f"record {number} is not JSON ({error})") from None
            return
        rows: Iterator[list[str]]
        if _is_tsv(first):  # dedup's TSV: a row a line, fields escaped, never quoted
            rows = ([tsv_unescape(field) for field in line.rstrip("\r\n").split("\t")]
                    for line in itertools.chain([first], text) if line.strip())
        else:  # CSV: a quoted field may hold line breaks, blank lines too
            rows = (row for row in _csv_rows(itertools.chain([first], text)) if row)
        header = next(rows)
        names = header if "id" in header and "action" in header else list(MEMBER_FIELDS[: len(header)])
        if names is not header:
            yield "row 1", dict(zip(names, header, strict=False))
        for number, row in enumerate(rows, start=2):
            yield f"row {number}", dict(zip(names, row, strict=False))


NUL_STAND_IN = "\uffff"
"""What a NUL character of a CSV members file is read as under Python 3.10, whose csv module refuses NUL ("line
contains NUL") where 3.11's reads it as any other character, and an id may hold one: a Unicode noncharacter, which
no text is meant to hold."""


def _csv_rows(lines: Iterator[str]) -> Iterator[list[str]]:
    """The CSV rows of ``lines``, NUL characters included on every Python (see :data:`NUL_STAND_IN`)."""
    if sys.version_info >= (3, 11):
        yield from csv.reader(lines)
        return

    def standing_in(line: str) -> str:
        if NUL_STAND_IN in line:
            raise ValueError("it holds U+FFFF, which Python 3.10 cannot read beside NUL; read it with Python 3.11 "
                             "or later")
        return line.replace("\0", NUL_STAND_IN)

    for row in csv.reader(map(standing_in, lines)):
        yield [field.replace(NUL_STAND_IN, "\0") for field in row]


def _is_tsv(first: str) -> bool:
    """Whether the first row of a members file is TSV rather than CSV (a CSV row may hold a quoted tab): it holds a
    tab, and split on tabs it is a header, or as many fields as ``find`` writes, or more fields than as CSV."""
    fields = first.rstrip("\r\n").split("\t")
    if len(fields) < 2:
        return False
    if ("id" in fields and "action" in fields) or len(fields) in (len(MEMBER_FIELDS) - 2, len(MEMBER_FIELDS)):
        return True
    return len(next(_csv_rows(iter([first])), [])) < len(fields)


def _check(where: str, record: Any) -> tuple[str, int, bool, str]:
    if not isinstance(record, dict):
        raise ValueError(f"{where} is not a record")
    missing = [name for name in ("id", "group", "action", "representative") if record.get(name) in (None, "")]
    if missing:
        raise ValueError(f"{where} has no {missing[0]!r}")
    if record["action"] not in ACTIONS:
        raise ValueError(f"{where}: action {record['action']!r} is not keep, drop or gone")
    try:
        group = int(record["group"])
    except (TypeError, ValueError):
        raise ValueError(f"{where}: group {record['group']!r} is not a number") from None
    return str(record["id"]), group, record["action"] == "drop", str(record["representative"])


def read_members(path: str) -> Members:
    """The new store's documents listed in the members file ``path``, with their groups and actions.

    Raises:
        InputError: the file cannot be read, or a record is not a member record (named by its row).
    """
    ids: list[str] = []
    groups: list[int] = []
    drop: list[bool] = []
    representatives: list[str] = []
    try:
        for where, record in _rows(path):
            identifier, group, dropped, representative = _check(where, record)
            if record.get("store") == "reference":
                continue
            ids.append(identifier)
            groups.append(group)
            drop.append(dropped)
            representatives.append(representative)
    except OSError as error:
        raise InputError(f"cannot read {{members}} {literal(display_name(path))}: "
                         f"{literal(error.strerror or error)}", options=True) from error
    except (ValueError, pa.ArrowException, csv.Error) as error:
        raise InputError(literal(f"{display_name(path)} is not a members file ({' '.join(str(error).split())}); ")
                         + "pass one written by dedup find --output members (to {members})", options=True) from error
    return Members(ids, np.array(groups, np.int64), np.array(drop, bool), representatives)
