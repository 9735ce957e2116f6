"""CSV and TSV inputs: a header row naming the columns, then one record a row.

A record's text is its ``text_field`` column (default ``text``) and its id its ``id_field`` column, else ``FILE:N``.

CSV
    Read as Python's ``csv`` module reads it with its default dialect (RFC 4180, and what it does with what RFC
    4180 leaves out). A quote matters only where a field starts: there it opens a quoted field, which may hold the
    delimiter, newlines and quotes (doubled, ``""``), and ends at a quote not doubled. A quote inside an unquoted
    field (``12" pipe``, ``a,b"c``) is a plain character, and so is what follows a closing quote (``"a"b`` reads
    ``ab``). A record ends at a newline (``\\n``) outside quotes; carriage returns just before it are part of the
    line end. A record that is not one by these rules is skipped, named and counted: its last quoted field not
    closed before the end of the file, or a carriage return outside quotes anywhere but at the record's end
    (``csv`` would end a record there; here records end at newlines alone, so that a chunk planner can find them).
TSV
    Read as ``dedup filter`` writes it back: one record a line, fields split at every tab, no quoting and no
    escapes. A quote or a backslash is a plain character, so a field never holds a tab or a newline.

Where records end
    A chunk planner must cut a file only where a record ends, and for CSV that depends on every quote before the
    cut. :class:`~dedup_cli.inputs.record_ends.RecordEnds` finds the ends from the bytes alone, vectorised, carrying
    the quote state from block to block (the module says how), so the process that plans a run makes one pass
    over the file (:func:`table_chunks`) and the workers parse the records of their chunks; the cuts, and so the
    store, are the same whatever the number of workers. Signing, re-reading (:func:`reread_records`) and
    ``filter`` (:func:`iter_raw_records`) find the same records with the same scan, so they number them alike.

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
from dedup_cli.inputs.byte_streams import READ_ERRORS, extended, trimmed
from dedup_cli.inputs.chunks import LineChunk
from dedup_cli.inputs.decoding import BOM, clean, decode, tsv_field
from dedup_cli.inputs.locations import Source, display_name, record_location
from dedup_cli.inputs.record_ends import RecordEnds
from dedup_cli.inputs.records import Document, make_document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal

DELIMITERS = {"csv": ",", "tsv": "\t"}
TABLE_FORMATS = tuple(DELIMITERS)
UNCLOSED = "not one CSV record (a quoted field is not closed before the end of the file); check its quotes"
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


def split_records(data: bytes | bytearray, kind: str) -> tuple[list[bytes], bool]:
    """The records of ``data`` (whole records of a ``kind`` file, from a record's start), each with its newline (the
    last may lack one), and whether the last is closed (False: it ends inside a quoted field)."""
    scanner = RecordEnds(kind, file_start=False)
    ends = scanner.scan(data, final=True).tolist()
    starts = [0, *ends]
    if not ends or ends[-1] < len(data):
        ends.append(len(data))
    return [bytes(data[start:end]) for start, end in zip(starts, ends, strict=False)], not scanner.inside


def record_content(raw: bytes) -> bytes:
    """A record without its ``\\n`` or ``\\r\\n``."""
    if raw.endswith(b"\n"):
        return raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    return raw


def parse_record(content: bytes, kind: str) -> tuple[list[str], bool]:
    """The fields of one record of a ``kind`` file (without its newline; closed, if CSV), and whether invalid UTF-8
    had to be replaced; ValueError with a one-line reason when it is not one record."""
    text, replaced = decode(content)
    if kind == "tsv":
        return text.split("\t"), replaced
    csv = _csv()
    try:
        return next(csv.reader([text]), []), replaced
    except csv.Error as error:
        # The one error of the default dialect on a record cut where its newlines say: a carriage return outside
        # quotes, where csv would end the record and this reader does not (records end at newlines alone).
        reason = ("a carriage return outside quotes" if "new-line" in str(error)
                  else str(error).split(" - ")[0])
        raise ValueError(f"not one CSV record ({reason}); check its quotes") from None


def parse_header(raw: bytes, source: Source, closed: bool = True) -> tuple[str, ...]:
    """The column names of a header record (a byte-order mark dropped); InputError when it is not one record
    (``closed`` False: it ends inside a quoted field)."""
    content = record_content(raw)
    if content.startswith(BOM):
        content = content[3:]
    try:
        if not closed:
            raise ValueError(UNCLOSED)
        return tuple(parse_record(content, source.format)[0])
    except ValueError as error:
        raise InputError(f"{source.display}: its header is {error}") from None


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
                    positions: tuple[int, int | None] | None = None, closed: bool = True) -> Document | None:
    """The document of record ``number`` (not blank, without its newline); None when it is malformed or lacks the
    text column (noted in ``report``). ``positions``: :func:`column_positions`, when already found; ``closed``
    False: the record ends inside a quoted field (the end of the file came first)."""
    where = f"{source.display} record {number}"
    text_position, id_position = positions or column_positions(header, source, text_field, id_field)
    try:
        if not closed:
            raise ValueError(UNCLOSED)
        fields, replaced = parse_record(content, source.format)
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
    counted in ``report.blank_lines``, records over ``limit`` bytes skipped as oversized, and a last record that
    ends inside a quoted field (the file's end came first) skipped as malformed."""
    positions = column_positions(header, source, text_field, id_field)
    records, closed = split_records(data, source.format)
    last = len(records) - 1
    for offset, raw in enumerate(records):
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
                                   positions, closed or offset < last)
        if document is not None:
            yield f"{source.display} record {number}", document


def table_chunks(stream: Any, head: bytes, position: Any, in_place: bool, chunk_bytes: int, chunk_records: int,
                 kind: str) -> Iterator[bytes | LineChunk]:
    """The header record of a CSV or TSV (``kind``) stream (its bytes, first), then its records cut into chunks:
    each ends at the first record end at or after ``chunk_bytes`` bytes, or after ``chunk_records`` records,
    whichever comes first, so the cuts depend on the bytes alone, not on how reads return them. A chunk's
    ``first_line`` is the number of its first record. With ``in_place`` (a plain file read from its start) the
    chunks say where their records are rather than holding them (and how many newlines they hold, to notice a file
    that changed).

    ``stream``: read with ``read(n)``, after ``head`` (its first bytes, already read); ``position``: how much of
    the file on disk has been consumed. An empty stream gives nothing; a read error (damaged compressed data) ends
    the chunks after the whole records read before it, then propagates. ValueError (its reason) when the header
    is the whole file and ends inside a quoted field.
    """
    held = bytearray(head)
    scanner = RecordEnds(kind)
    ends = np.empty(0, dtype=np.int64)  # record ends in ``held`` found so far
    header = True
    first, offset = 1, 0  # the number of held's first record, and where held starts in the stream
    ended = False
    damage: BaseException | None = None
    while True:
        found = scanner.scan(held, final=ended)
        ends = np.concatenate([ends, found]) if found.size else ends
        while True:
            if header:
                if not ends.size and (not ended or not held):
                    break  # an empty file has no header
                if not ends.size and scanner.inside:
                    raise ValueError(UNCLOSED)
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
            held = trimmed(held, cut)
            ends = ends[count:] - cut
            scanner.cut(cut)
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
            held = trimmed(held, 0, int(ends[-1]) if ends.size else 0)
            scanner.rewind(len(held))
        if not block:
            ended = True
        held = extended(held, block)


def iter_raw_records(stream: Any, kind: str) -> Iterator[tuple[int, bytes, bool]]:
    """(number, the record as read with its newline, whether it is closed) of every record of a CSV or TSV
    (``kind``) stream, the header as 0: what :func:`table_chunks` cuts, one record at a time (one block of records
    is held at a time). Only the last record may be open: it ends inside a quoted field."""
    held = bytearray()
    scanner = RecordEnds(kind)
    number = 0
    while True:
        block = stream.read(_BLOCK)
        held = extended(held, block)
        start = 0
        for end in scanner.scan(held, final=not block).tolist():
            yield number, bytes(held[start:end]), True
            number += 1
            start = end
        if not block:
            if start < len(held):
                yield number, bytes(held[start:]), not scanner.inside
            return
        held = trimmed(held, start)
        scanner.cut(start)


def reread_records(stream: Any, kind: str, numbers: set[int], columns: list[str]) -> dict[int, list[str | None]]:
    """The values of ``columns`` (None where a record lacks one) of records ``numbers`` of a CSV or TSV stream
    (``kind``), decoded as when they were signed; a record that is blank or malformed is absent, and so is every
    record when the header no longer has the first column (the text)."""
    found: dict[int, list[str | None]] = {}
    last = max(numbers)
    positions: list[int] = []
    for number, raw, closed in iter_raw_records(stream, kind):
        content = record_content(raw)
        if number == 0:
            if not closed:
                return found
            header = parse_record(content[3:] if content.startswith(BOM) else content, kind)[0]
            if columns[0] not in header:
                return found
            positions = [header.index(column) if column in header else -1 for column in columns]
        elif number in numbers and closed and content and not content.isspace():
            try:
                fields, replaced = parse_record(content, kind)
            except ValueError:
                continue
            if len(fields) > positions[0]:
                values = [fields[at] if 0 <= at < len(fields) else None for at in positions]
                found[number] = [clean(value)[0] if replaced and value is not None else value for value in values]
        if number >= last:
            break
    return found


def format_annotations(values: tuple[Any, ...], kind: str) -> bytes:
    """The ``dedup_*`` values of one record as fields to append to it (each preceded by the delimiter), written as
    the format writes a field: quoted where needed in CSV; in TSV, which has no quoting, a tab, newline, carriage
    return or backslash of a value (an id may hold one) escaped as ``find`` writes TSV, so the record stays one
    line with one field a value."""
    shown = ["" if value is None else ("true" if value is True else "false" if value is False else str(value))
             for value in values]
    if kind == "tsv":
        return "".join("\t" + tsv_field(field) for field in shown).encode("utf-8")
    quoted = ['"' + field.replace('"', '""') + '"' if any(character in field for character in ',"\n\r') else field
              for field in shown]
    return "".join("," + field for field in quoted).encode("utf-8")
