"""What stdin holds, told from its first bytes: its compression, and whether it is JSON Lines.

Stdin has no name to read a format from, so:

- **Compression** is told by the magic number its first bytes start with: gzip ``1f 8b``, bzip2 ``BZh`` and a digit
  1–9, xz ``fd 37 7a 58 5a 00``, zstd ``28 b5 2f fd`` (the codecs read from files); the rest is read through the
  decompressor.
- **JSON Lines** (``--input-format auto`` only): after a byte-order mark and any white space (blank lines
  included), the first byte is ``{`` and the first line that is not blank parses as a JSON object.
- **A JSON array** (``auto`` only): the first byte is ``[`` and the whole of stdin, read into memory (as a text
  document is), parses as one JSON array (:mod:`dedup_cli.inputs.json_arrays`).

Anything else is one text document. With ``--id-field`` and no ``--input-format``, stdin that is recognised as
neither is refused, since a text document has no field to take an id from.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dedup_cli.errors import UsageError
from dedup_cli.inputs.byte_streams import MAGIC_BYTES, Prefixed, decompressing, read_head, sniffed_compression
from dedup_cli.inputs.decoding import BOM
from dedup_cli.inputs.json_arrays import Damage, array_elements, array_text, starts_an_array
from dedup_cli.inputs.locations import Source
from dedup_cli.options.input_options import InputOptions

# The first line is looked at up to this many bytes: a longer one is taken for text, not JSON Lines.
FIRST_LINE_BYTES = 16 << 20
_WHITE_SPACE = b" \t\r\n\x0b\x0c"
# Stdin is read ahead in blocks of the size the check for binary input looks at: no more of an endless stream
# (or of one over --max-document-bytes) is read than before.
_SNIFF_BLOCK = 8192


@contextmanager
def stdin_stream(raw: Any, source: Source, options: InputOptions) -> Iterator[tuple[Any, Source]]:
    """Stdin's bytes, decompressed, and its source with the compression and format found (see the module
    docstring). ``raw``: stdin as a raw stream (read with ``read(n)``).

    Raises:
        UsageError: ``options.id_field`` with ``auto``, and stdin is neither JSON Lines nor a JSON array.
    """
    head = read_head(raw, MAGIC_BYTES)
    compression = sniffed_compression(head)
    with decompressing(Prefixed(head, raw), compression) as stream:
        found = dataclasses.replace(source, compression=compression)
        if options.input_format != "auto" or source.format != "text":
            yield _buffered(b"", stream), found
            return
        first = _first_line(stream)
        array = starts_an_array(first)
        if array:
            first += stream.read()  # all of it, as a text document would be read
        if array and _is_array(first):
            found = dataclasses.replace(found, format="json")
        elif is_json_object(first) or (options.id_field is not None and not _has_text(first)):
            found = dataclasses.replace(found, format="jsonl")  # (white space alone is a batch of no record)
        elif options.id_field is not None:
            raise UsageError("{id_field} applies to records, but stdin is neither JSON Lines (its first line is not a "
                             "JSON object) nor a JSON array; name its format with {input_format}", options=True)
        yield _buffered(first, stream), found


def _buffered(head: bytes, stream: Any) -> io.BufferedReader:
    """``head`` then the rest of ``stream``, read in full blocks (a pipe's reads return what is there, and the check
    for binary input looks at a whole first block)."""
    return io.BufferedReader(Prefixed(head, stream), _SNIFF_BLOCK)


def _first_line(stream: Any) -> bytes:
    """The bytes of ``stream`` up to the end of its first line that is not blank (at most
    :data:`FIRST_LINE_BYTES` of it), or only up to its first byte that is not white space when that is not ``{``."""
    held = b""
    start = 0  # where the line being looked at starts
    while len(held) - start <= FIRST_LINE_BYTES:
        opening = (held[3:] if held.startswith(BOM) else held).lstrip(_WHITE_SPACE)[:1]
        if opening and opening != b"{":
            return held
        newline = held.find(b"\n", start)
        if newline >= 0:
            if held[start:newline].strip(_WHITE_SPACE) and held[start:newline] != BOM:
                return held
            start = newline + 1
            continue
        data = stream.read(_SNIFF_BLOCK)
        if not data:
            return held
        held += data
    return held


def _is_array(data: bytes) -> bool:
    """Whether ``data`` is one JSON array, whole."""
    return not any(isinstance(item, Damage) for item in array_elements(array_text(data)))


def _has_text(head: bytes) -> bool:
    """Whether ``head`` holds a byte other than white space and a byte-order mark."""
    return bool((head[3:] if head.startswith(BOM) else head).strip(_WHITE_SPACE))


def is_json_object(head: bytes) -> bool:
    """Whether the first line of ``head`` that is not blank is a JSON object (see the module docstring)."""
    text = head[3:] if head.startswith(BOM) else head
    text = text.lstrip(_WHITE_SPACE)
    if not text.startswith(b"{"):
        return False
    line = text.split(b"\n", 1)[0]
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False
