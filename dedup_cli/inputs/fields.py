"""A numeric field of stored records, re-read from their locations: what ``--keep-field`` compares.

Only the documents asked for are read (the members of groups, never the corpus), each file once, the way
verification re-reads texts (:mod:`dedup_cli.inputs.reread`): a JSON Lines record's field, a JSON array
element's field, a CSV or TSV record's column (a number when its text reads as one), or a Parquet row's column. A
value is missing, with a reason, when the document is a whole file or a plain line (no fields), was read from
stdin, is gone or no longer decodes, changed since it was signed (its content hash), or the field is absent, null
or not a number. A file that is there but cannot be read now (an I/O or server error) stops the run with one line
naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import READ_ERRORS, compression, open_decompressed
from dedup_cli.inputs.decoding import clean, decode
from dedup_cli.inputs.delimited import TABLE_FORMATS, reread_records
from dedup_cli.inputs.json_arrays import array_values
from dedup_cli.inputs.locations import STDIN, Location, parse_location
from dedup_cli.inputs.records import text_hash
from dedup_cli.inputs.reread import is_change, reread_cells, reread_lines, unreadable


def _number(value: Any, field: str) -> float | str:
    """The value as a float, or why it is not a number."""
    if value is None:
        return f"{field!r} is missing or null"
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return f"{field!r} is {type(value).__name__}, not a number"
    number = float(value)
    return number if math.isfinite(number) else f"{field!r} is not finite"


def _json_records(path: str, numbers: set[int], text_field: str, field: str) -> dict[int, tuple[str | None, Any]]:
    """(text, field value) of JSON Lines records ``numbers``; text None where the line is no longer a record."""
    found: dict[int, tuple[str | None, Any]] = {}
    for number, line in reread_lines(path, numbers, None).items():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and isinstance(record.get(text_field), str):
            found[number] = (clean(record[text_field])[0], record.get(field))
    return found


def _array_records(path: str, numbers: set[int], text_field: str, field: str) -> dict[int, tuple[str | None, Any]]:
    """(text, field value) of the elements ``numbers`` of a JSON array; text None where one is no longer a record."""
    return {number: (clean(value[text_field])[0], value.get(field))
            for number, value in array_values(path, numbers).items()
            if isinstance(value, dict) and isinstance(value.get(text_field), str)}


def _table_records(path: str, kind: str, numbers: set[int], text_column: str, field: str
                   ) -> dict[int, tuple[str | None, Any]]:
    """(text, field value) of CSV or TSV records ``numbers``: a value that reads as a number is that number."""
    with open_decompressed(path, compression(path)) as (stream, _, _):
        records = reread_records(stream, kind, numbers, [text_column, field])
    return {number: (text, _table_value(value)) for number, (text, value) in records.items()}


def _table_value(value: str | None) -> Any:
    """A CSV or TSV cell as a number when it is one (every cell is text), else as it is (None when empty)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _parquet_rows(path: str, numbers: set[int], text_column: str, field: str) -> dict[int, tuple[str | None, Any]]:
    cells = reread_cells(path, numbers, [text_column, field])
    return {number: (None if text is None else decode(text)[0], value) for number, (text, value) in cells.items()}


def _file_values(where: Location, numbers: set[int], field: str) -> dict[int, tuple[str | None, Any]] | str:
    """The records of one file, or why none of them has a value."""
    if where.path == STDIN:
        return "read from stdin, it cannot be re-read"
    if where.kind == "file" or where.name is None:
        return "a whole file or a plain line has no fields"
    try:
        if where.kind == "line":
            return _json_records(where.path, numbers, where.name, field)
        if where.kind == "json":
            return _array_records(where.path, numbers, where.name, field)
        if where.kind in TABLE_FORMATS:
            return _table_records(where.path, where.kind, numbers, where.name, field)
        return _parquet_rows(where.path, numbers, where.name, field)
    except InputError as error:
        return str(error)
    except READ_ERRORS as error:
        if not is_change(error):  # there but unreadable now: ranking it lowest would keep another member
            raise unreadable(where.path, error, f"for its field {field!r}") from error
        return f"cannot be read ({getattr(error, 'strerror', None) or ' '.join(str(error).split())})"


def field_values(locations: Sequence[str], content_hashes: Sequence[int] | None, field: str
                 ) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """The numeric ``field`` of the records at ``locations`` (``Document.path`` values), each file read once.

    Args:
        locations: where each document was read.
        content_hashes: their stored content hashes (a record that changed since has no value), or None.
        field: the JSON field or Parquet column.

    Returns:
        float64[n] values (NaN where missing), and (position, reason) for each missing one.
    """
    parsed = [parse_location(location) for location in locations]
    files: dict[tuple[str, str, str | None], list[int]] = {}
    for index, where in enumerate(parsed):
        files.setdefault((where.path, where.kind, where.name), []).append(index)
    values = np.full(len(parsed), np.nan)
    problems: list[tuple[int, str]] = []
    for indices in files.values():
        records = _file_values(parsed[indices[0]], {parsed[index].number for index in indices}, field)
        for index in indices:
            expected = None if content_hashes is None else int(content_hashes[index])
            outcome = records if isinstance(records, str) else _value(records.get(parsed[index].number), expected,
                                                                      field)
            if isinstance(outcome, str):
                problems.append((index, outcome))
            else:
                values[index] = outcome
    return values, problems


def _value(record: tuple[str | None, Any] | None, content_hash: int | None, field: str) -> float | str:
    """A record's value, or why it has none."""
    if record is None or record[0] is None:
        return "the record is gone"
    if content_hash is not None and text_hash(record[0]) != content_hash:
        return "changed since it was signed"
    return _number(record[1], field)
