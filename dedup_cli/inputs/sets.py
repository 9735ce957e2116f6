"""Integer sets: one set a line, as JSON (``{"id": "w", "elements": [3, 17]}``) or TSV (``w<TAB>3 17``).

A set's elements lie in [0, D) for the stated universe D; its content hash is that of its distinct elements,
so an edited line is noticed and a reordered one is not. Sets are re-read (for exact checks) a file at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.inputs.byte_streams import READ_ERRORS
from dedup_cli.inputs.decoding import decode
from dedup_cli.inputs.locations import STDIN, display_name, parse_location
from dedup_cli.inputs.records import IntegerSet, set_hash
from dedup_cli.inputs.reread import is_change, reread_lines, unreadable


def parse_set_line(line: str) -> tuple[str, np.ndarray]:
    """(id, distinct elements as int64, sorted) of ``{"id": ..., "elements": [...]}`` or ``id<TAB>int int ...``.

    A line is JSON when it starts with ``{``, TSV otherwise, so one reader serves both. Raises ValueError
    with a one-line reason when the line is malformed.
    """
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"invalid JSON ({error.msg}: column {error.colno})") from None
        if not isinstance(record, dict) or "id" not in record or "elements" not in record:
            raise ValueError('expected an object with "id" and "elements"')
        identifier, elements = record["id"], record["elements"]
        # One type test per element, in C (map), so booleans and floats are refused without a Python loop.
        if not isinstance(elements, list) or not set(map(type, elements)) <= {int}:
            raise ValueError('"elements" must be a list of integers')
        if isinstance(identifier, bool) or not isinstance(identifier, (str, int)) or identifier == "":
            raise ValueError('"id" must be a non-empty string or an integer')
        values = np.array(elements, dtype=np.int64)
        identifier = str(identifier)
    else:
        identifier, separator, rest = line.partition("\t")
        if not separator or not identifier:
            raise ValueError("expected an id, a tab, then integers separated by spaces")
        try:
            values = np.array(rest.split(), dtype=np.int64)
        except ValueError:
            raise ValueError("elements must be integers separated by spaces") from None
    return display_name(identifier), sorted_unique(values)


def integer_set(line: bytes, location: str, mtime_ns: int, universe: int) -> IntegerSet:
    identifier, values = parse_set_line(decode(line)[0].strip())
    if values.size and (values[0] < 0 or values[-1] >= universe):
        bad = int(values[0] if values[0] < 0 else values[-1])
        raise ValueError(f"element {bad} outside the universe [0, {universe})")
    elements = values.astype(np.uint64)
    return IntegerSet(identifier, location, elements, len(line), mtime_ns, set_hash(elements))


_LEGACY_SET_LOCATION = re.compile(r"(.*):(\d+)\Z")


def reread_sets(locations: Sequence[str], content_hashes: Sequence[int] | None = None) -> list[np.ndarray | None]:
    """The elements (uint64, sorted) of the sets at ``locations`` (a set store's ``path`` values), each file
    read once; None where a set is gone, malformed now, or (given ``content_hashes``) changed since signed.
    A file that is there but cannot be read now raises a one-line ``InputError`` naming it
    (:func:`dedup_cli.inputs.reread.is_change`).

    Stores written before set rows had locations hold ``FILE:LINE`` (relative to where ``sign`` ran) and a
    content hash of 0; those are read as they are, unchecked.
    """
    wanted: list[tuple[str, int]] = []
    for location in locations:
        where = parse_location(location)
        legacy = _LEGACY_SET_LOCATION.match(location) if where.kind == "file" else None
        if legacy is not None:
            wanted.append((legacy.group(1), int(legacy.group(2))))
        else:
            wanted.append((where.path, where.number if where.kind == "line" else 0))
    numbers: dict[str, set[int]] = {}
    for path, number in wanted:
        numbers.setdefault(path, set()).add(number)
    lines: dict[str, dict[int, str]] = {}
    for path, wanted_numbers in numbers.items():
        try:
            lines[path] = {} if path == STDIN else reread_lines(path, wanted_numbers, None)
        except READ_ERRORS as error:
            if not is_change(error):
                raise unreadable(path, error) from error
            lines[path] = {}
    result: list[np.ndarray | None] = []
    for index, (path, number) in enumerate(wanted):
        line = lines[path].get(number)
        elements: np.ndarray | None = None
        if line is not None:
            try:
                elements = parse_set_line(line.strip())[1].astype(np.uint64)
            except (ValueError, OverflowError):
                elements = None
        expected = 0 if content_hashes is None else int(content_hashes[index])
        if elements is not None and expected and set_hash(elements) != expected:
            elements = None
        result.append(elements)
    return result
