"""CSV and TSV inputs: a header row naming the columns, then one record a row.

Fields follow RFC 4180: a field may be quoted with ``"``, a quote inside a quoted field is doubled, and a quoted
field may hold the delimiter, quotes and newlines. TSV is read the same way with a tab as the delimiter (its
fields may be quoted too). A record's text is its ``text_field`` column (default ``text``) and its id its
``id_field`` column, else ``FILE:N``.

Where records end
    A record ends at a newline outside quotes. Whether a newline is inside quotes is the parity of the quote
    characters before it in the file: in a well-formed file each quote opens or closes a quoted field or is one of
    a doubled pair, so an even count means outside. A cut anywhere else would need the quote state at the cut,
    which only a pass from the file's start can tell, so the process that plans a run makes that one pass
    (:func:`record_ends`: the positions of a block's newlines and of its quotes, two numpy comparisons, and the
    quotes before each newline, one ``searchsorted``, the parity carried from block to block) and cuts the file
    only at record ends (:func:`table_chunks`). The cuts depend on the bytes alone, so the store is the same
    whatever the number of workers. A quote inside an unquoted field (``a,b"c``), which RFC 4180 does not allow,
    flips the parity: the rows after it, up to the next such quote, are then one record, most likely skipped as
    malformed, rather than guessed at.

Numbers
    Records are numbered from 1 after the header (record 0), however many lines their quoted fields span: a
    record's number is not its line number once a field holds a newline. A blank record is counted and is not a
    document, as a blank line of JSON Lines. Ids without an id column are ``FILE:N``; a record's location is
    ``PATH#csv=N&column=TEXT`` (``#tsv=`` for TSV).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import READ_ERRORS
from dedup_cli.inputs.chunks import LineChunk
from dedup_cli.inputs.decoding import BOM, clean, decode
from dedup_cli.inputs.locations import Source, display_name, record_location
from dedup_cli.inputs.records import Document, make_document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal

DELIMITERS = {"csv": ",", "tsv": "\t"}
TABLE_FORMATS = tuple(DELIMITERS)
_QUOTE = 0x22
_NEWLINE = 0x0A
_BLOCK = 1 << 16  # as line files are read: a damaged compressed file loses no more than a line file would
_IN_PLACE_BLOCK = 1 << 20  # a plain file: larger reads, fewer calls


@functools.cache
def _csv() -> Any:
    """The ``csv`` module, imported when CSV is first read (``find`` re-reads no CSV on most runs). The module refuses
    fields over 128 KiB by default; a document's text may be much longer (its limit is --max-document-bytes), and
    that limit is the module's own state: raised once, here."""
    import csv

    csv.field_size_limit(2**31 - 1)
    return csv


def record_ends(data: bytes | bytearray | memoryview, inside: bool = False) -> tuple[np.ndarray, bool]:
    """Where the records of ``data`` end: int64[k], the position just past each newline outside quotes, and
    whether ``data`` ends inside quotes; ``inside``: whether it starts inside quotes (see the module docstring)."""
    array = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(array == _NEWLINE)
    quotes = np.flatnonzero(array == _QUOTE)
    if quotes.size == 0:
        return (newlines + 1 if not inside else newlines[:0]), inside
    before = np.searchsorted(quotes, newlines) + int(inside)
    return newlines[(before & 1) == 0] + 1, bool((quotes.size + int(inside)) & 1)


def split_records(data: bytes | bytearray) -> list[bytes]:
    """The records of ``data`` (whole records, from outside quotes), each with its newline (the last may lack one)."""
    ends = record_ends(data)[0].tolist()
    starts = [0, *ends]
    if not ends or ends[-1] < len(data):
        ends.append(len(data))
    return [bytes(data[start:end]) for start, end in zip(starts, ends, strict=False)]


def record_content(raw: bytes) -> bytes:
    """A record without its ``\\n`` or ``\\r\\n``."""
    if raw.endswith(b"\n"):
        return raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    return raw


def parse_record(content: bytes, delimiter: str) -> tuple[list[str], bool]:
    """The fields of one record (without its newline), and whether invalid UTF-8 had to be replaced;
    ValueError with a one-line reason when it is not one record."""
    text, replaced = decode(content)
    csv = _csv()
    try:
        return next(csv.reader([text], delimiter=delimiter), []), replaced
    except csv.Error as error:
        reason = str(error).split(" - ")[0]
        raise ValueError(f"not one {'CSV' if delimiter == ',' else 'TSV'} record ({reason}); check its quotes") \
            from None


def parse_header(raw: bytes, source: Source) -> tuple[str, ...]:
    """The column names of a header record (a byte-order mark dropped); InputError when it is not one record."""
    content = record_content(raw)
    if content.startswith(BOM):
        content = content[3:]
    try:
        return tuple(parse_record(content, DELIMITERS[source.format])[0])
    except ValueError as error:
        raise InputError(f"{source.display}: its header {error}") from None


def column_positions(header: tuple[str, ...], source: Source, text_field: str, id_field: str | None
                     ) -> tuple[int, int | None]:
    """(the position of the text column, of the id column or None); InputError naming the file when the header
    lacks one."""
    positions: list[int | None] = []
    for name, option in ((text_field, "text_field"), (id_field, "id_field")):
        if name is None:
            positions.append(None)
            continue
        if name not in header:
            shown = ", ".join(repr(column) for column in header[:20]) + (", …" if len(header) > 20 else "")
            raise InputError(literal(f"{source.display} has no column {name!r} in its header (its columns: {shown}); ")
                             + f"name the column with {{{option}}}", options=True)
        positions.append(header.index(name))
    assert positions[0] is not None
    return positions[0], positions[1]


def record_document(content: bytes, number: int, source: Source, header: tuple[str, ...], text_field: str,
                    id_field: str | None, mtime_ns: int, report: ReadReport,
                    positions: tuple[int, int | None] | None = None) -> Document | None:
    """The document of record ``number`` (not blank, without its newline); None when it is malformed or lacks the
    text column (noted in ``report``). ``positions``: :func:`column_positions`, when already found."""
    where = f"{source.display} record {number}"
    text_position, id_position = positions or column_positions(header, source, text_field, id_field)
    try:
        fields, replaced = parse_record(content, DELIMITERS[source.format])
    except ValueError as error:
        report.note("malformed", (where, str(error)))
        return None
    if len(fields) <= text_position:
        report.note("malformed", (where, f"no {text_field!r} column (the record has {len(fields)} fields, the "
                                         f"header {len(header)})"))
        return None
    identifier = None
    if id_position is not None:
        if len(fields) <= id_position or fields[id_position] == "":
            report.note("malformed", (where, f"no {id_field!r} value (--id-field)"))
            return None
        identifier = display_name(fields[id_position])
    text = fields[text_position]
    if replaced:
        report.note("invalid_utf8", where)
        text = clean(text)[0]
    location = record_location(source.path, source.format, number, text_field)
    return make_document(identifier or f"{source.id}:{number}", location, text, mtime_ns)


def table_documents(data: bytes, first: int, source: Source, header: tuple[str, ...], text_field: str,
                    id_field: str | None, limit: int | None, mtime_ns: int, report: ReadReport
                    ) -> Iterator[tuple[str, Document]]:
    """(where, document) of the whole records in ``data``, the first of them record ``first``; blank records are
    counted in ``report.blank_lines``, records over ``limit`` bytes skipped as oversized."""
    positions = column_positions(header, source, text_field, id_field)
    for offset, raw in enumerate(split_records(data)):
        number = first + offset
        report.bytes_read += len(raw)
        content = record_content(raw)
        if limit is not None and len(content) > limit:
            report.note("oversized", (f"{source.display} record {number}", len(content)))
            continue
        if not content or content.isspace():
            report.blank_lines += 1
            continue
        document = record_document(content, number, source, header, text_field, id_field, mtime_ns, report,
                                   positions)
        if document is not None:
            yield f"{source.display} record {number}", document


def table_chunks(stream: Any, head: bytes, position: Any, in_place: bool, chunk_bytes: int, chunk_records: int
                 ) -> Iterator[bytes | LineChunk]:
    """The header record of a CSV or TSV stream (its bytes, first), then its records cut into chunks: each ends at
    the first record end at or after ``chunk_bytes`` bytes, or after ``chunk_records`` records, whichever comes
    first, so the cuts depend on the bytes alone, not on how reads return them. A chunk's ``first_line`` is the
    number of its first record. With ``in_place`` (a plain file read from its start) the chunks say where their
    records are rather than holding them (and how many newlines they hold, to notice a file that changed).

    ``stream``: read with ``read(n)``, after ``head`` (its first bytes, already read); ``position``: how much of
    the file on disk has been consumed. An empty stream gives nothing; a read error (damaged compressed data) ends
    the chunks after the whole records read before it, then propagates.
    """
    held = bytearray(head)
    ends = np.empty(0, dtype=np.int64)  # record ends in ``held`` found so far
    scanned, inside = 0, False
    header = True
    first, offset = 1, 0  # the number of held's first record, and where held starts in the stream
    ended = False
    damage: BaseException | None = None
    while True:
        found, inside = record_ends(memoryview(held)[scanned:], inside)
        ends = np.concatenate([ends, found + scanned]) if found.size else ends
        scanned = len(held)
        while True:
            if header:
                if not ends.size and (not ended or not held):
                    break  # an empty file has no header
                cut = int(ends[0]) if ends.size else len(held)
                yield bytes(held[:cut])
                count = 1 if ends.size else 0
                header = False
            else:
                by_bytes = int(np.searchsorted(ends, chunk_bytes))
                cuts = [(int(ends[by_bytes]), by_bytes + 1)] if by_bytes < ends.size else []
                if ends.size >= chunk_records:
                    cuts.append((int(ends[chunk_records - 1]), chunk_records))
                if not cuts:
                    if not ended or not held:
                        break
                    tail = not ends.size or int(ends[-1]) < len(held)  # a last record without a newline
                    cuts = [(len(held), int(ends.size) + tail)]
                cut, count = min(cuts)
                if in_place:
                    yield LineChunk(b"", first, (), position(), offset, cut, held.count(b"\n", 0, cut))
                else:
                    yield LineChunk(bytes(held[:cut]), first, (), position())
                first += count
            del held[:cut]
            ends = ends[count:] - cut
            scanned -= cut
            offset += cut
        if ended:
            if damage is not None:
                raise damage
            return
        try:
            block = stream.read(_IN_PLACE_BLOCK if in_place else _BLOCK)
        except READ_ERRORS as error:
            # Damaged compressed data: the whole records before the damage are cut as at the end, then it is raised.
            damage, block = error, b""
            del held[int(ends[-1]) if ends.size else 0 :]
            scanned = len(held)
        if not block:
            ended = True
        held += block


def iter_raw_records(stream: Any) -> Iterator[tuple[int, bytes]]:
    """(number, the record as read with its newline) of every record of a CSV or TSV stream, the header as 0: what
    :func:`table_chunks` cuts, one record at a time (one block of records is held at a time)."""
    held = bytearray()
    inside = False
    number = 0
    while True:
        block = stream.read(_BLOCK)
        scanned = len(held)
        held += block
        if not block:
            if held:
                yield number, bytes(held)
            return
        found, inside = record_ends(memoryview(held)[scanned:], inside)
        if not found.size:
            continue
        ends = (found + scanned).tolist()
        start = 0
        for end in ends:
            yield number, bytes(held[start:end])
            number += 1
            start = end
        del held[:start]


def reread_records(stream: Any, kind: str, numbers: set[int], columns: list[str]) -> dict[int, list[str | None]]:
    """The values of ``columns`` (None where a record lacks one) of records ``numbers`` of a CSV or TSV stream
    (``kind``), decoded as when they were signed; a record that is blank or malformed is absent, and so is every
    record when the header no longer has the first column (the text)."""
    found: dict[int, list[str | None]] = {}
    last = max(numbers)
    delimiter = DELIMITERS[kind]
    positions: list[int] = []
    for number, raw in iter_raw_records(stream):
        content = record_content(raw)
        if number == 0:
            header = parse_record(content[3:] if content.startswith(BOM) else content, delimiter)[0]
            if columns[0] not in header:
                return found
            positions = [header.index(column) if column in header else -1 for column in columns]
        elif number in numbers and content and not content.isspace():
            try:
                fields, replaced = parse_record(content, delimiter)
            except ValueError:
                continue
            if len(fields) > positions[0]:
                values = [fields[at] if 0 <= at < len(fields) else None for at in positions]
                found[number] = [clean(value)[0] if replaced and value is not None else value for value in values]
        if number >= last:
            break
    return found


def format_annotations(values: tuple[Any, ...], delimiter: str) -> bytes:
    """The ``dedup_*`` values of one record as fields to append to it (each preceded by the delimiter)."""
    shown = ["" if value is None else ("true" if value is True else "false" if value is False else str(value))
             for value in values]
    written = _joined(shown, delimiter)
    return (delimiter + written).encode("utf-8")


def _joined(fields: list[str], delimiter: str) -> str:
    """Fields as one record (quoted where needed), without a newline."""
    quoted = []
    for field in fields:
        if any(character in field for character in (delimiter, '"', "\n", "\r")):
            field = '"' + field.replace('"', '""') + '"'
        quoted.append(field)
    return delimiter.join(quoted)
