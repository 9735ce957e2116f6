"""JSON files that hold an array of records: each element one record, read as a line of JSON Lines is read.

A ``.json`` file (or one ``--input-format json`` names, or stdin whose whole content is a JSON array) whose first
character, after a byte-order mark and white space, is ``[`` is an array of records. Element N (from 1) is the
record whose id is its ``id_field``, else ``FILE:N``; its text is its ``text_field``; its location is
``PATH#json=N&field=NAME``, so that it can be re-read; an element that is not an object with the text field is
skipped and named ``FILE element N``, as a malformed line of JSON Lines is. Where the array stops parsing (a file
cut short), the elements before are read and the rest is reported once. A ``.json`` file that does not start an
array (one object, a number) is one text document under ``auto``, as every other file is.

An array has no line ends to cut it at without parsing it, so a file is read and parsed whole, by one process: its
bytes, its text and its records are held at once. JSON Lines is the format for a large corpus.

The text is decoded with ``surrogateescape``, so that each element's span, encoded back, is the bytes it was read
from (``filter`` copies kept elements byte for byte); the bytes that are not UTF-8 become U+FFFD in the records'
texts, as in every format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dedup_cli.inputs.byte_streams import compression, open_decompressed, read_capped
from dedup_cli.inputs.decoding import BOM, clean, record_fields
from dedup_cli.inputs.locations import STDIN, Source, record_location
from dedup_cli.inputs.records import Document, make_document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.input_options import InputOptions

_WHITE_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, position: int) -> int:
    """The first position at or after ``position`` that is not JSON's white space."""
    found = _WHITE_SPACE.match(text, position)
    return position if found is None else found.end()


def starts_an_array(data: bytes | bytearray) -> bool:
    """Whether ``data`` (a file's first bytes or all of them) starts a JSON array: ``[`` first, after a byte-order
    mark and white space."""
    head = bytes(data[:3]) == BOM
    return bytes(data[3 if head else 0:]).lstrip(b" \t\n\r")[:1] == b"["


def array_text(data: bytes | bytearray) -> str:
    """The text of a JSON array file, every byte kept (``surrogateescape``: encoded back, the same bytes)."""
    return bytes(data).decode("utf-8", "surrogateescape")


def text_bytes(text: str) -> bytes:
    """Text of :func:`array_text` back to the bytes it was read from."""
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Element:
    """Element ``number`` (from 1) of an array: its value, and where its JSON text starts and ends in the text."""

    number: int
    start: int
    end: int
    value: Any


@dataclass(frozen=True)
class Damage:
    """Where an array stops parsing: the number the next element would have had, the position, and why."""

    number: int
    start: int
    reason: str


def array_elements(text: str) -> Iterator[Element | Damage]:
    """The elements of the JSON array ``text`` (from :func:`array_text`, starting as :func:`starts_an_array`
    says), in order, each with its span; then, if the array does not parse to its end, one :class:`Damage`."""
    opening = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if not text.startswith("[", opening):
        yield Damage(1, opening, "not a JSON array (it does not start with '[')")
        return
    position = _skip(text, opening + 1)
    number = 1
    if text.startswith("]", position):
        end = _skip(text, position + 1)
        if end < len(text):
            yield Damage(number, end, "text after the end of the array")
        return
    while True:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as error:
            yield Damage(number, position, f"invalid JSON ({error.msg}: character {error.pos + 1} of the file)")
            return
        except RecursionError:
            yield Damage(number, position, "invalid JSON (nested too deeply)")
            return
        yield Element(number, position, end, value)
        position = _skip(text, end)
        if text.startswith(",", position):
            position = _skip(text, position + 1)
            number += 1
            continue
        if text.startswith("]", position):
            after = _skip(text, position + 1)
            if after < len(text):
                yield Damage(number + 1, after, "text after the end of the array")
            return
        yield Damage(number + 1, position, f"expected ',' or ']' after element {number}")
        return


def element_where(source: Source, number: int) -> str:
    """How messages name element ``number`` of ``source``: ``FILE element N``."""
    return f"{source.display} element {number}"


def damage_note(source: Source, damage: Damage) -> tuple[str, str]:
    """The malformed note of where an array stops parsing (the elements after it are not read)."""
    return element_where(source, damage.number), f"{damage.reason}; the rest of the array is not read"


def element_document(element: Element, text: str, source: Source, options: InputOptions, mtime_ns: int,
                     report: ReadReport) -> Document | None:
    """The record of one element, as ``sign`` reads it; None when it is not one (noted in ``report``: not an
    object, no text field, a bad id, or over ``options.max_document_bytes``)."""
    where = element_where(source, element.number)
    limit = options.max_document_bytes
    if limit is not None and (size := len(text_bytes(text[element.start:element.end]))) > limit:
        report.note("oversized", (where, size))
        return None
    try:
        identifier, body = record_fields(element.value, options.id_field, options.text_field)
    except ValueError as error:
        report.note("malformed", (where, str(error)))
        return None
    body, replaced = clean(body)  # bytes that were not UTF-8, and JSON's lone surrogates ("\ud800")
    if replaced:
        report.note("invalid_utf8", where)
    location = record_location(STDIN if source.path == STDIN else source.path, "json", element.number,
                               options.text_field)
    return make_document(identifier or f"{source.id}:{element.number}", location, body, mtime_ns)


def array_documents(data: bytes | bytearray, source: Source, options: InputOptions, mtime_ns: int,
                    report: ReadReport) -> Iterator[tuple[str, Document, int]]:
    """(where, document, the element's end in bytes so far) of each record of the array ``data``; what is not a
    record, and where the array stops parsing, noted in ``report``."""
    text = array_text(data)
    for item in array_elements(text):
        if isinstance(item, Damage):
            report.note("malformed", damage_note(source, item))
            return
        document = element_document(item, text, source, options, mtime_ns, report)
        if document is not None:
            yield element_where(source, item.number), document, item.end


def array_values(path: str, numbers: set[int]) -> dict[int, Any]:
    """The values of elements ``numbers`` of the JSON array file ``path`` (read whole, up to the last asked for);
    {} when it no longer holds an array. Raises what reading it raises."""
    with open_decompressed(path, compression(path)) as (stream, _, _):
        data = read_capped(stream, b"", None)
    assert data is not None
    if not starts_an_array(data):
        return {}
    found: dict[int, Any] = {}
    last = max(numbers)
    for item in array_elements(array_text(data)):
        if isinstance(item, Damage) or item.number > last:
            break
        if item.number in numbers:
            found[item.number] = item.value
    return found
