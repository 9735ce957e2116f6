"""A chunk of lines (JSON Lines, or plain lines) turned into documents a block at a time, in columns.

Parsing JSON Lines record by record (``json.loads``, a ``dict`` per record, the text encoded again) costs more
than signing the text. Here a whole chunk of lines is parsed at once by Arrow's JSON reader into a column of
texts that is already the UTF-8 buffer the compiled kernel signs: no Python object per record but the id and
location strings a store keeps, and no text decoded or encoded.

The block parser must read every chunk exactly as the record-by-record parser
(:func:`dedup_cli.inputs.files.line_document`) does, or not at all: :func:`parse_block` returns None whenever it
cannot vouch for that, and the caller reads the chunk line by line, which names each bad line ``FILE:LINE``
with its reason. It declines a chunk that holds

* invalid UTF-8 (the line parser reads it with U+FFFD and reports it), or a byte-order mark after line 1;
* a first value that is not an object (``null``, ``[]``, ``1``, ``"a"``, ``true``): Arrow refuses most, but its
  block parser (pyarrow 26 and earlier at least) crashes the process on a block whose first value is ``null``,
  whatever follows (``null``, ``nullx``, ``null {"text": "a"}``), so such a chunk never reaches it;
* a line Arrow rejects, or one that yields more or fewer than one record (``{"text": "a"} {"text": "b"}``);
* a record without the text field, with a null or non-string text, or (with an id field) a missing, null,
  empty, fractional or boolean id, or ids of two types;
* a line nested so deeply (500 levels or more) that Python's parser might refuse it where Arrow would not;
* a line longer than ``max_document_bytes`` (skipped, with a message, line by line).

Arrow refuses, like Python, duplicate keys (after unescaping), lone surrogates (``"\\ud800"``), raw control
characters in strings and trailing commas; lines of white space only are skipped by both. Integer ids become
their decimal digits, as ``str(int)`` writes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import xxhash

from dedup_cli.inputs.columns import LineWheres, TextColumns, ascii_texts, blank_texts
from dedup_cli.inputs.decoding import BOM
from dedup_cli.inputs.locations import Source, record_location

MAX_DEPTH = 500  # nesting Arrow reads and Python might not (its recursion limit is about 1000 frames)
_SPACE = np.zeros(256, dtype=np.bool_)
_SPACE[[9, 10, 11, 12, 13, 32]] = True  # bytes.isspace: what makes a line blank
_FIRST_TOKEN = re.compile(rb"[^ \t\r\n]")  # the first byte that is not JSON white space (RFC 8259, section 2)


@dataclass
class Block:
    """The documents of a chunk, and what the line-by-line reader would have counted besides them."""

    columns: TextColumns
    blank_lines: int


def _lines(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(int64 start, int64 end) of each line of ``data``, the end before its ``\\n`` (and a ``\\r`` before that)."""
    array = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(array == 0x0A)
    starts = np.concatenate([[0], newlines + 1])
    ends = np.concatenate([newlines, [len(data)]])
    if starts[-1] == len(data):  # the chunk ends with a newline: no line after it
        starts, ends = starts[:-1], ends[:-1]
    ended = ends < len(data)  # lines that had a newline
    carriage = np.zeros(ends.size, dtype=np.bool_)
    has_byte = ends > starts
    carriage[has_byte] = array[ends[has_byte] - 1] == 0x0D
    ends = ends - (carriage & ended)
    return starts.astype(np.int64), ends.astype(np.int64)


def _blank(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """bool[lines]: empty or white space only (``bytes.isspace``); only lines opening with white space are read."""
    blank = ends <= starts
    if not len(data):
        return blank
    first = np.frombuffer(data, dtype=np.uint8)[np.minimum(starts, len(data) - 1)]
    for line in np.flatnonzero(~blank & _SPACE[first]).tolist():
        blank[line] = data[int(starts[line]) : int(ends[line])].isspace()
    return blank


def _too_deep(data: bytes, starts: np.ndarray, records: int) -> bool:
    """Whether some line may nest ``MAX_DEPTH`` levels: it would hold that many opening brackets."""
    array = np.frombuffer(data, dtype=np.uint8)
    openers = np.count_nonzero(array == 0x7B) + np.count_nonzero(array == 0x5B)
    if openers - records + 1 < MAX_DEPTH:  # every record opens one object at least
        return False
    positions = np.flatnonzero((array == 0x7B) | (array == 0x5B))
    per_line = np.bincount(np.searchsorted(starts, positions, side="right") - 1, minlength=starts.size)
    return bool(per_line.max(initial=0) >= MAX_DEPTH)


def opens_with_object(data: bytes) -> bool:
    """Whether the first JSON value of ``data`` (after JSON white space) opens an object: what Arrow's block parser
    needs to read it, and to not crash on it (see the module docstring). One search that stops at that byte."""
    first = _FIRST_TOKEN.search(data)
    return first is not None and data[first.start()] == 0x7B


def _read(data: bytes, fields: list[tuple[str, pa.DataType]]) -> pa.Table | None:
    """``data`` parsed by Arrow with the given fields (others ignored), in one block; None if Arrow refuses."""
    import pyarrow.json as pa_json  # 50 ms with pyarrow.compute: only when JSON Lines are read

    schema = pa.schema(fields)
    try:
        return pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
            parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowException, ValueError, UnicodeDecodeError):
        return None


def _json_records(data: bytes, records: int, text_field: str, id_field: str | None
                  ) -> tuple[pa.StringArray, list[str] | None] | None:
    """(texts, ids) of the JSON records of ``data``, or None when the line parser must read them."""
    import pyarrow.compute as pc

    fields: list[tuple[str, pa.DataType]] = [(text_field, pa.string())]
    table = None
    for id_type in ([None] if id_field is None or id_field == text_field else [pa.string(), pa.int64()]):
        table = _read(data, fields + ([] if id_type is None else [(id_field, id_type)]))  # type: ignore[list-item]
        if table is not None:
            break
    if table is None or table.num_rows != records:
        return None
    texts = table.column(text_field).combine_chunks()
    if texts.null_count:
        return None
    if id_field is None:
        return texts, None
    values = table.column(id_field).combine_chunks()
    if values.null_count:
        return None
    if pa.types.is_integer(values.type):
        values = pc.cast(values, pa.string())
    elif pc.any(pc.equal(pc.binary_length(values), 0)).as_py():
        return None
    return texts, values.to_pylist()


def parse_block(data: bytes, first_line: int, source: Source, text_field: str, id_field: str | None,
                limit: int | None, mtime_ns: int) -> Block | None:
    """The documents of ``data``, whole lines of ``source`` (a ``jsonl`` or ``lines`` input) from line
    ``first_line``, as the line-by-line reader gives them; None when it must read them instead (see above).

    ``text_field``, ``id_field``: the JSON fields of the text and the id; ``limit``: ``max_document_bytes``.
    """
    if len(data) >= 1 << 31:  # beyond Arrow's block size
        return None
    marked = first_line == 1 and data.startswith(BOM)  # a byte-order mark opening the file is not part of line 1
    chunk_ascii = data.isascii()
    if not chunk_ascii:  # ASCII (most chunks) holds neither a byte-order mark nor invalid UTF-8
        if data.find(BOM, 3 if marked else 0) >= 0:
            return None
        try:
            str(data, "utf-8")
        except UnicodeDecodeError:
            return None
    starts, ends = _lines(data)
    if marked:
        starts[0] += 3
        ends[0] = max(ends[0], 3)
        data = b"   " + data[3:]  # white space to the JSON parser, and every offset stays where it was
    if limit is not None and np.any(ends - starts > limit):
        return None
    blank = _blank(data, starts, ends)
    kept = np.flatnonzero(~blank)
    numbers = first_line + kept
    jsonl = source.format == "jsonl"
    if jsonl:
        if kept.size and not opens_with_object(data):
            return None
        if _too_deep(data, starts, kept.size):
            return None
        parsed = _json_records(data, kept.size, text_field, id_field) if kept.size else None
        if parsed is None and kept.size:
            return None
        texts, ids = parsed if parsed is not None else (pa.array([], pa.string()), None)
        arrow_offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32, count=len(texts) + 1,
                                      offset=texts.offset * 4)
        first, last = int(arrow_offsets[0]), int(arrow_offsets[-1])
        text_data = texts.buffers()[2]
        # The texts as Arrow parsed them, not copied: the kernel reads them there.
        # (Arrow exports its bytes as signed chars: cast, so that indexing gives 0-255 as with bytes.)
        buffer: bytes | memoryview = (b"" if text_data is None else
                                      memoryview(text_data.slice(first, last - first)).cast("B"))
        offsets = arrow_offsets.astype(np.int64) - first
    else:
        ids = None
        view = memoryview(data)
        bounds = zip(starts[kept].tolist(), ends[kept].tolist(), strict=True)
        buffer = b"".join(view[start:end] for start, end in bounds)
        offsets = np.zeros(kept.size + 1, dtype=np.int64)
        np.cumsum(ends[kept] - starts[kept], out=offsets[1:])
    listed = numbers.tolist()
    if ids is None:
        ids = [f"{source.id}:{number}" for number in listed]
    field = text_field if jsonl else None
    base = record_location(source.path, "line", 0, field)
    head, tail = base.split("#line=0", 1)
    locations = [f"{head}#line={number}{tail}" for number in listed]
    view = memoryview(buffer)
    bounds_list = offsets.tolist()
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(view[bounds_list[d] : bounds_list[d + 1]])
                          for d in range(len(listed))), dtype=np.uint64, count=len(listed))
    lengths = np.diff(offsets)
    columns = TextColumns(ids, locations, LineWheres(source.display, numbers.astype(np.int64)), buffer, offsets,
                          lengths, np.full(len(listed), mtime_ns, dtype=np.int64), hashes,
                          blank_texts(buffer, offsets),
                          # JSON escapes (\u00e9) make non-ASCII texts of ASCII lines; plain lines are their texts
                          ascii_texts(buffer, offsets, True if chunk_ascii and not jsonl else None))
    return Block(columns, int(np.count_nonzero(blank)))
