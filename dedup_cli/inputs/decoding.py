r"""Decoding bytes into text, and JSON Lines records into (id, text); the fields of dedup's TSV.

UTF-8; a byte-order mark at the start of a file is dropped; invalid bytes (and lone surrogates in JSON strings)
become U+FFFD and the document is still read, but listed in ``ReadReport.invalid_utf8``.

TSV fields are those of PostgreSQL's text format: never quoted; a backslash, tab, line feed or carriage return in a
field is written ``\\``, ``\t``, ``\n``, ``\r`` (:func:`tsv_field`, for the outputs) and read back by
:func:`tsv_unescape` (for ``filter --members``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from dedup_cli.inputs.locations import display_name

BOM = b"\xef\xbb\xbf"
_SURROGATES = re.compile("[\ud800-\udfff]")


def decode(raw: bytes | bytearray | memoryview) -> tuple[str, bool]:
    """UTF-8 text of ``raw``, and whether invalid bytes had to be replaced by U+FFFD."""
    try:
        return str(raw, "utf-8"), False
    except UnicodeDecodeError:
        return str(raw, "utf-8", "replace"), True


def clean(text: str) -> tuple[str, bool]:
    """Replace lone surrogates (JSON can hold ``"\\ud800"``; UTF-8 cannot) with U+FFFD."""
    # A text that encodes as UTF-8 holds no surrogate: checked at the speed of the codec (an ASCII text at once),
    # where the search for one costs several times more (it was most of re-reading a JSON Lines record).
    if text.isascii():
        return text, False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text), True
    return text, False


def whole_text(raw: bytearray | bytes) -> tuple[str, bool, memoryview]:
    view = memoryview(raw)
    if bytes(view[:3]) == BOM:
        view = view[3:]
    text, replaced = decode(view)
    return text, replaced, view


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def json_record(line: str, id_field: str | None, text_field: str) -> tuple[str | None, str]:
    """(id or None, text) of one JSON Lines record; ValueError with a one-line reason when malformed."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON ({error.msg}: column {error.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON (nested too deeply)") from None
    return record_fields(record, id_field, text_field)


def record_fields(record: Any, id_field: str | None, text_field: str) -> tuple[str | None, str]:
    """(id or None, text) of a parsed JSON record (a line of JSON Lines, an element of a JSON array); ValueError
    with a one-line reason when it is not an object with a string text field and a usable id."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, found {_json_type(record)}")
    if text_field not in record:
        raise ValueError(f'no "{text_field}" field; name the text field with --text-field')
    text = record[text_field]
    if not isinstance(text, str):
        raise ValueError(f'"{text_field}" is {_json_type(text)}, not a string')
    if id_field is None:
        return None, text
    if id_field not in record:
        raise ValueError(f'no "{id_field}" field (--id-field)')
    value = record[id_field]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f'"{id_field}" is {_json_type(value)}; ids must be strings or integers')
    if value == "":
        raise ValueError(f'"{id_field}" is empty')
    return display_name(str(value)), text


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_TSV_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_TSV_MEANINGS = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def tsv_field(value: Any) -> str:
    r"""A value as one TSV field: empty for None, else its text with backslash, tab, ``\n`` and ``\r`` escaped."""
    if value is None:
        return ""
    return value.translate(_TSV_ESCAPES) if isinstance(value, str) else str(value)


def tsv_unescape(field: str) -> str:
    """The text a TSV field written by :func:`tsv_field` stands for (a backslash before another character is
    dropped, as PostgreSQL reads it)."""
    if "\\" not in field:
        return field
    return _TSV_ESCAPED.sub(lambda match: _TSV_MEANINGS.get(match.group(1), match.group(1)), field)
