"""Reading whole files (one document each) and the lines of line files (lines, JSON Lines, integer sets).

A file (or stdin) with a NUL byte in its first :data:`BINARY_SNIFF_BYTES` bytes, after decompression, is
binary and skipped. With ``max_document_bytes``, a document whose bytes exceed it (a whole file after
decompression, or one line) is skipped and reported; at most limit + 1 bytes of it are held (an uncompressed
file's size is taken from ``stat`` without reading it). Without a limit one document is held at a time, twice
over while it is decoded. Blank lines are not documents.

Whole files read for signing (:func:`read_files`) stay bytes: a plain file costs four system calls (open,
fstat, one read, close) and a few checks, and its bytes go to the signing kernel as they are, without a ``str``
or a :class:`~dedup_cli.inputs.records.Document` being made (:mod:`dedup_cli.inputs.columns`).
"""

from __future__ import annotations

import io
import os
import stat as stat_module
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dedup_cli.inputs.byte_streams import READ_ERRORS, compression, open_decompressed, read_capped
from dedup_cli.inputs.columns import ColumnsBuilder, FileWheres, TextColumns
from dedup_cli.inputs.decoding import BOM, clean, decode, json_record, whole_text
from dedup_cli.inputs.locations import STDIN, Source, display_name, location_path, record_location
from dedup_cli.inputs.records import Document, IntegerSet, make_document
from dedup_cli.inputs.remote import fetch_documents
from dedup_cli.inputs.report import ReadReport, emptiness
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.input_options import InputOptions

BINARY_SNIFF_BYTES = 8192


class PlainFile:
    """A file read with the system's calls alone: open, fstat, read, close. Python's buffered ``open`` adds a
    second fstat and, for a file smaller than its buffer, a second read: six calls a file instead of four, a
    third of the time of reading many small files."""

    def __init__(self, path: str) -> None:
        self.descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def read(self, size: int) -> bytes:
        return os.read(self.descriptor, size)

    def status(self) -> os.stat_result:
        return os.fstat(self.descriptor)

    def __enter__(self) -> PlainFile:
        return self

    def __exit__(self, *exception: object) -> None:
        os.close(self.descriptor)


def _whole_bytes(stream: Any, status: os.stat_result | None, compressed: bool, where: str, limit: int | None,
                 report: ReadReport) -> tuple[Any, Any, bool] | None:
    """(the bytes of a whole file as read, the same without a byte-order mark, whether they hold invalid UTF-8);
    None when it is binary or over ``limit`` (noted in ``report`` as ``where``)."""
    regular = status is not None and stat_module.S_ISREG(status.st_mode)
    if limit is not None and not compressed and regular and status is not None and status.st_size > limit:
        report.note("oversized", (where, status.st_size))  # known from stat: nothing read
        return None
    plain = regular and not compressed
    expected = status.st_size if plain and status is not None else -1
    # A plain file is read in one call (its size and one byte more, to see it did not grow); anything else
    # starts with the bytes that say whether it is binary.
    head = stream.read(expected + 1 if plain else BINARY_SNIFF_BYTES)
    if head.find(b"\0", 0, BINARY_SNIFF_BYTES) >= 0:
        report.bytes_read += min(len(head), BINARY_SNIFF_BYTES)
        report.note("binary", where)
        return None
    raw = head if len(head) == expected else read_capped(stream, head, limit)
    if raw is None:
        report.bytes_read += (limit or 0) + 1
        report.note("oversized", (where, (limit or 0) + 1))
        return None
    report.bytes_read += len(raw)
    return _checked_utf8(raw)


def _checked_utf8(raw: bytes | bytearray) -> tuple[Any, Any, bool]:
    """(``raw``, its text's bytes without a byte-order mark, whether they hold invalid UTF-8)."""
    if raw.isascii():  # most files: valid, and nothing to drop
        return raw, raw, False
    view = memoryview(raw)
    if raw.startswith(BOM):
        view = view[3:]
    try:
        str(view, "utf-8")
    except UnicodeDecodeError:
        return raw, view, True
    return raw, view, False


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _read_plain(path: str, limit: int | None) -> tuple[os.stat_result, bytes] | None:
    """A regular plain file within ``limit`` read whole in one call (its size and one byte more, to see it did
    not grow), with its ``stat``; None when it is something else (the general path reads it then)."""
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        if not stat_module.S_ISREG(status.st_mode) or (limit is not None and status.st_size > limit):
            return None
        raw = os.read(descriptor, status.st_size + 1)
    finally:
        os.close(descriptor)
    if len(raw) != status.st_size or raw.find(b"\0", 0, BINARY_SNIFF_BYTES) >= 0:
        return None  # changed while read, or binary: read again, and reported, as any other file
    return status, raw


def _fetched_objects(paths: Sequence[str]) -> dict[str, tuple[bytes, os.stat_result] | OSError]:
    """The bytes and status of the uncompressed objects among ``paths``, or the error reading each; {} when all
    are local files (each costs one substring test here)."""
    objects = [path for path in paths if "://" in path and is_url(path) and compression(path) is None]
    return fetch_documents(objects) if objects else {}


def read_files(ids: Sequence[str], paths: Sequence[str], limit: int | None, report: ReadReport) -> TextColumns:
    """The documents of whole files (plain or compressed; ``ids`` and ``paths`` aligned) as columns; a file that
    cannot be read, is binary or over ``limit`` is noted in ``report`` instead.

    A plain file costs four system calls (open, fstat, one read, close) and, when it is ASCII (most are), no
    more than appending its bytes: that is the loop's first branch; every other case takes the general one.
    Objects in object storage (``s3://``) are fetched together first, one GET each and many in flight, and their
    bytes read as a file's (:func:`dedup_cli.inputs.remote.fetch_documents`); compressed ones are streamed."""
    builder = ColumnsBuilder()
    positions: list[int] = []
    fetched = _fetched_objects(paths)
    for position, (identifier, path) in enumerate(zip(ids, paths, strict=True)):
        packed = compression(path)
        status: os.stat_result | None
        try:
            got = fetched.get(path) if fetched else None
            plain = _read_plain(path, limit) if packed is None and got is None else None
            if plain is not None:
                status, raw = plain
                report.bytes_read += len(raw)
                if not raw:
                    report.note("empty_inputs", (display_name(path), emptiness(None)))
                if raw.isascii():
                    # An ASCII path without '#' is its own location (location_path's cache only misses here).
                    location = path if path.isascii() and "#" not in path else location_path(path)
                    builder.add(identifier, location, "", raw, status.st_size, status.st_mtime_ns, True)
                    positions.append(position)
                    continue
                read: tuple[Any, Any, bool] | None = _checked_utf8(raw)
            elif got is not None:
                if isinstance(got, OSError):
                    raise got
                content, status = got
                read = _whole_bytes(io.BytesIO(content), status, False, display_name(path), limit, report)
            elif packed is None:
                with PlainFile(path) as stream:
                    status = stream.status()
                    read = _whole_bytes(stream, status, False, display_name(path), limit, report)
            else:
                with open_decompressed(path, packed) as (stream, status, _):
                    read = _whole_bytes(stream, status, True, display_name(path), limit, report)
        except READ_ERRORS as error:
            note_unreadable(report, Source(identifier, path, display_name(path), "text", packed), error)
            continue
        if read is None:
            continue
        raw, utf8, invalid = read
        if not raw:
            report.note("empty_inputs", (display_name(path), emptiness(packed, status.st_size if status else 0)))
        if invalid:
            report.note("invalid_utf8", display_name(path))
            utf8 = str(utf8, "utf-8", "replace").encode("utf-8")
        regular = status is not None and stat_module.S_ISREG(status.st_mode)
        # The size on disk, as stat reports it, so an incremental run can compare it without reading.
        size = status.st_size if regular and status is not None else len(raw)
        builder.add(identifier, location_path(path), "", utf8, size, status.st_mtime_ns if status is not None else 0,
                    raw.isascii())
        positions.append(position)
    return builder.build(FileWheres(paths, np.array(positions, dtype=np.int64)))


def read_whole(stream: Any, status: os.stat_result | None, source: Source, limit: int | None,
               report: ReadReport) -> Iterator[tuple[str, Document]]:
    """The document of one whole file (or stdin) as a :class:`Document`, unless it is binary or over ``limit``."""
    where = source.display
    read = _whole_bytes(stream, status, source.compression is not None, where, limit, report)
    if read is None:
        return
    raw = read[0]
    if not raw:
        report.note("empty_inputs", (where, emptiness(source.compression, status.st_size if status else 0)))
    text, replaced, view = whole_text(raw)
    if replaced:
        report.note("invalid_utf8", where)
    location = STDIN if source.path == STDIN else location_path(source.path)
    mtime_ns = status.st_mtime_ns if status is not None else 0
    regular = status is not None and stat_module.S_ISREG(status.st_mode)
    # The size on disk, as stat reports it, so an incremental run can compare it without reading.
    size = status.st_size if regular and status is not None else len(raw)
    yield where, make_document(source.id, location, text, mtime_ns, None if replaced else view, size)


def note_unreadable(report: ReadReport, source: Source, error: BaseException) -> None:
    """Report ``source`` as unreadable (or damaged, when compressed data ends or breaks) with the OS's reason."""
    reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
    if source.compression is not None and getattr(error, "errno", None) is None:
        reason = f"damaged {source.compression} data ({reason}); documents before the damage were read"
    report.note("unreadable", (source.display, reason))


def line_document(line: bytes, number: int, source: Source, options: InputOptions, mtime_ns: int,
                  report: ReadReport) -> Document | IntegerSet | None:
    """The document of line ``number`` (not blank) of a lines, JSON Lines or integer-set ``source``; None when
    the line is malformed (noted in ``report``, like repaired text)."""
    where = f"{source.display}:{number}"
    if source.format == "sets":
        from dedup_cli.inputs.sets import integer_set  # only for integer sets: signing text never loads it

        try:
            return integer_set(line, record_location(source.path, "line", number), mtime_ns, options.universe or 0)
        except (ValueError, OverflowError) as error:
            report.note("malformed", (where, str(error).split("\n")[0]))
            return None
    jsonl = source.format == "jsonl"
    text, replaced = decode(line)
    identifier: str | None = None
    utf8: bytes | None = None if replaced else line
    if jsonl:
        try:
            identifier, text = json_record(text, options.id_field, options.text_field)
        except ValueError as error:
            report.note("malformed", (where, str(error)))
            return None
        try:  # only a text holding a lone surrogate (JSON "\ud800") cannot be encoded
            utf8 = text.encode("utf-8")
        except UnicodeEncodeError:
            text, utf8 = clean(text)[0], None
            replaced = True
    if replaced:
        report.note("invalid_utf8", where)
    location = record_location(source.path, "line", number, options.text_field if jsonl else None)
    return make_document(identifier or f"{source.id}:{number}", location, text, mtime_ns, utf8)
