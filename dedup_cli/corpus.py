"""Reading inputs: finding files, reading documents in several formats, stable ids, the decoding policy.

Inputs are files and directories, ``-`` (stdin) and the paths listed in a ``--files-from`` file (newline- or
NUL-separated). Directories are walked recursively in sorted order; hidden entries (names starting with ``.``)
and symbolic links to directories are skipped, so a link to an ancestor cannot loop. Formats
(:data:`INPUT_FORMATS`): ``text`` (a file is one document), ``lines`` (each non-blank line is one document),
``jsonl`` (each line is a JSON object whose ``text_field`` holds the text), ``parquet`` (each row; its
``text_column`` holds the text; read in batches of :data:`PARQUET_BATCH_ROWS` rows). ``auto`` chooses by
name: ``.jsonl``/``.ndjson`` → jsonl, ``.parquet`` → parquet, anything else → text; stdin is text.
``.gz``, ``.bz2``, ``.xz`` and ``.zst`` files are decompressed while reading, and the format is chosen from
the name inside the suffix (``x.jsonl.gz`` is JSON Lines).

Ids
    A file's id is its path relative to the deepest directory holding every input, with ``/`` separators,
    so a store is the same wherever the corpus is mounted. A record's id is the value of ``id_field`` /
    ``id_column`` (a string, or an integer written in decimal); without one it is ``FILE:LINE`` (jsonl,
    lines; lines count from 1) or ``FILE:ROW`` (parquet; rows count from 0, as in Arrow and pandas), FILE
    being the file's id. Stdin is ``-`` (text) or ``-:LINE`` (records). File names that are not UTF-8 are
    decoded with surrogateescape (:func:`os.fsdecode`) and their undecodable bytes are written ``\\xNN`` in
    ids and messages (``caf\\xe9.txt``); the rare real name containing that text would collide, and the later
    document is then skipped as a duplicate id. The first document with an id is kept; later ones are skipped
    and reported with their location.

Locations (``Document.path``, what a store records and :func:`reread_document` resolves)
    ``PATH`` for a whole file, ``PATH#line=N`` (lines), ``PATH#line=N&field=NAME`` (jsonl),
    ``PATH#row=N&column=NAME`` (parquet), NAME percent-encoded. PATH is absolute; when it is not valid UTF-8
    or contains ``#`` it is written as a ``file://`` URI with every other byte percent-encoded, which
    round-trips exactly. Stdin is ``-`` or ``-#line=N…`` and cannot be re-read.

Decoding
    UTF-8; a byte-order mark at the start of a file is dropped; invalid bytes (and lone surrogates in JSON
    strings) become U+FFFD and the document is still read, but listed in ``ReadReport.invalid_utf8``. A file
    (or stdin) with a NUL byte in its first 8 KiB, after decompression, is binary and skipped (Parquet
    excepted). Line formats split on ``\\n`` and drop a trailing ``\\r``; blank lines are not documents.

Content hash
    ``Document.content_hash`` is xxh3-64 of the document's text encoded as UTF-8 (:func:`text_hash`), for
    files and records alike; for a UTF-8 file without a byte-order mark this is the hash of its bytes, as
    in stores written before records existed. ``Document.size`` is a whole file's size on disk (what
    ``stat`` reports, so unchanged files can be recognised without reading them) and a record's UTF-8 length.

Size limit
    With ``max_document_bytes``, a document whose bytes exceed it (a whole file after decompression, one
    line, or one Parquet cell) is skipped and reported; at most limit + 1 bytes of it are held (an
    uncompressed file's size is taken from ``stat`` without reading it). Without a limit one document is
    held at a time, twice over while it is decoded; a Parquet cell is held with its batch of rows.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import io
import json
import lzma
import os
import re
import stat as stat_module
import sys
import urllib.parse
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from dedup_cli.arrays import sorted_unique
from dedup_cli.errors import InputError, UsageError

BINARY_SNIFF_BYTES = 8192
INPUT_FORMATS = ("auto", "text", "lines", "jsonl", "parquet", "sets")
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
FORMAT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
PARQUET_BATCH_ROWS = 256
MAX_LISTED = 1000
"""How many items of each kind a :class:`ReadReport` lists; beyond that it only counts them."""
STDIN = "-"
STDIN_NAME = "<stdin>"

_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20
_FRAGMENT = re.compile(r"#(line|row)=(\d+)(?:&(field|column)=([^&#]*))?\Z")
_SURROGATES = re.compile("[\ud800-\udfff]")
_URI_PREFIX = "file://"
# What reading a damaged or vanished file can raise: OS errors, truncated or corrupt compressed data.
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, pa.ArrowException)


@dataclass(frozen=True)
class SourceFile:
    """A file to read and the id its document will have."""

    id: str
    path: str


@dataclass(frozen=True)
class Document:
    """One decoded document and what identifies it.

    ``path`` is its location (see the module docstring); ``content_hash`` is xxh3-64 of ``text`` encoded as
    UTF-8; ``size`` is the file's size on disk for a whole file (as ``stat`` gives it, compressed or not),
    the bytes read for stdin, and the length of the UTF-8 text for a record; ``mtime_ns`` is the
    modification time of its file (0 for stdin).
    """

    id: str
    path: str
    text: str
    size: int
    mtime_ns: int
    content_hash: int

    @property
    def is_empty(self) -> bool:
        """Empty or white space only: it has no shingle and is never grouped."""
        return not self.text or self.text.isspace()


@dataclass(frozen=True)
class InputOptions:
    """How to find and read inputs; the defaults read files and directories as plain text.

    Attributes:
        input_format: one of :data:`INPUT_FORMATS`.
        id_field, text_field: JSON Lines keys of the id (None: ``FILE:LINE``) and of the text.
        id_column, text_column: Parquet columns of the id (None: ``FILE:ROW``) and of the text.
        files_from: a file listing inputs, one a line (``-``: stdin); ``null_separated``: NUL-separated.
        include, exclude: glob patterns for files found in directories or listed by ``files_from``.
        max_document_bytes: skip (and report) documents larger than this; None for no limit.
    """

    input_format: str = "auto"
    id_field: str | None = None
    text_field: str = "text"
    id_column: str | None = None
    text_column: str = "text"
    files_from: str | None = None
    null_separated: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_document_bytes: int | None = None
    universe: int | None = None
    id_root: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if self.input_format not in INPUT_FORMATS:
            raise UsageError(f"unknown input format {self.input_format!r}; choose one of {', '.join(INPUT_FORMATS)}")
        if self.input_format == "sets":
            if self.universe is None:
                raise UsageError("--input-format sets needs --universe D, the number of possible elements")
            if self.text_field != "text" or self.text_column != "text":
                raise UsageError("--text-field and --text-column do not apply to --input-format sets; "
                                 "a set line holds an id and its elements")
        elif self.universe is not None:
            raise UsageError("--universe applies only to --input-format sets; text shingles are hashed into 2^64")
        if self.max_document_bytes is not None and self.max_document_bytes < 1:
            raise UsageError(f"--max-document-bytes {self.max_document_bytes} must be at least 1")
        if not self.text_field or not self.text_column:
            raise UsageError("--text-field and --text-column must name a field; the default is text")
        if self.id_field is not None and self.input_format not in ("auto", "jsonl"):
            raise UsageError(f"--id-field applies to JSON Lines, not --input-format {self.input_format}; "
                             "for Parquet use --id-column")
        if self.id_column is not None and self.input_format not in ("auto", "parquet"):
            raise UsageError(f"--id-column applies to Parquet, not --input-format {self.input_format}; "
                             "for JSON Lines use --id-field")
        if self.null_separated and self.files_from is None:
            raise UsageError("-0/--null applies to --files-from; add --files-from FILE (or -)")


@dataclass
class ReadReport:
    """What was read and what was skipped, for the summary and the exit code.

    Each list holds at most ``max_listed`` items (locations as in messages: ``FILE``, ``FILE:LINE``,
    ``FILE row N``); :meth:`count` gives the true number.
    """

    binary: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    malformed: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    duplicate_ids: list[tuple[str, str]] = field(default_factory=list)  # (location, id)
    oversized: list[tuple[str, int]] = field(default_factory=list)  # (location, bytes: at least this many)
    invalid_utf8: list[str] = field(default_factory=list)  # read, with U+FFFD for the invalid bytes
    bytes_read: int = 0
    files_found: int = 0
    documents: int = 0
    empty_documents: int = 0  # read, but empty or white space only: no shingle, never grouped
    blank_lines: int = 0  # blank lines of jsonl/lines inputs: not documents
    unchanged: int = 0  # whole files an incremental run skipped by size and mtime, without reading them
    id_root: str | None = None  # the directory file ids are relative to (None when no file was named)
    input_bytes: int | None = None  # the inputs' size on disk, for progress (None when stdin is read)
    input_done: int = 0  # how much of ``input_bytes`` has been read or skipped so far
    max_document_bytes: int | None = None
    max_listed: int = MAX_LISTED
    unlisted: dict[str, int] = field(default_factory=dict)

    SKIPPED_KINDS = ("binary", "unreadable", "malformed", "duplicate_ids", "oversized")

    def note(self, kind: str, item: Any) -> None:
        """Record one item of ``kind`` (a list attribute), or only count it once the list is full."""
        items = getattr(self, kind)
        if len(items) < self.max_listed:
            items.append(item)
        else:
            self.unlisted[kind] = self.unlisted.get(kind, 0) + 1

    def count(self, kind: str) -> int:
        """How many items of ``kind`` there were, listed or not."""
        return len(getattr(self, kind)) + self.unlisted.get(kind, 0)

    @property
    def skipped(self) -> int:
        """Inputs skipped for any reason (binary, unreadable, malformed, duplicate id, too large)."""
        return sum(self.count(kind) for kind in self.SKIPPED_KINDS)

    def warnings(self) -> list[str]:
        """One line per listed item, for stderr; then how many more of each kind were not listed."""
        limit = self.max_document_bytes
        lines = [f"skipped binary file {path}" for path in self.binary]
        lines += [f"cannot read {path}: {reason}" for path, reason in self.unreadable]
        lines += [f"skipped {where}: {reason}" for where, reason in self.malformed]
        lines += [f"skipped {where}: id {identifier!r} was already read" for where, identifier in self.duplicate_ids]
        lines += [f"skipped {where}: {size} bytes or more exceed --max-document-bytes {limit}; raise the limit "
                  "to read it" for where, size in self.oversized]
        lines += [f"read {where} with U+FFFD in place of invalid UTF-8" for where in self.invalid_utf8]
        names = {"binary": "binary files", "unreadable": "unreadable files", "malformed": "malformed records",
                 "duplicate_ids": "duplicate ids", "oversized": "documents too large", "invalid_utf8":
                 "documents with invalid UTF-8"}
        lines += [f"... and {count} more {names[kind]}" for kind, count in sorted(self.unlisted.items())]
        return lines

    def summary(self) -> str:
        """One line: documents read, bytes, and every kind of skipped or repaired input that occurred."""
        parts = [f"read {self.documents} documents from {self.files_found} inputs ({self.bytes_read / 1e6:.1f} MB)"]
        skipped = [(self.count("binary"), "binary"), (self.count("unreadable"), "unreadable"),
                   (self.count("malformed"), "malformed"), (self.count("duplicate_ids"), "duplicate id"),
                   (self.count("oversized"), "too large")]
        named = [f"{count} {what}" for count, what in skipped if count]
        parts.append(f"skipped {', '.join(named)}" if named else "nothing skipped")
        if self.count("invalid_utf8"):
            parts.append(f"{self.count('invalid_utf8')} with invalid UTF-8 replaced")
        if self.empty_documents:
            parts.append(f"{self.empty_documents} empty")
        return "; ".join(parts)


# --- names, ids and locations ----------------------------------------------------------------------------


def display_name(name: str) -> str:
    """``name`` as a valid Unicode string: bytes that are not UTF-8 (surrogate-escaped) written ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte, e.g. from JSON "\ud800"
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _location_path(path: str) -> str:
    """A path as a store can hold it: itself, or a ``file://`` URI when it is not UTF-8 or holds ``#``."""
    if "#" not in path and display_name(path) == path:
        return path
    return _URI_PREFIX + urllib.parse.quote(path.encode("utf-8", "surrogateescape"), safe="/")


def _path_of_location(text: str) -> str:
    if text.startswith(_URI_PREFIX):
        return os.fsdecode(urllib.parse.unquote_to_bytes(text[len(_URI_PREFIX):]))
    return text


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="", errors="surrogateescape")


def record_location(path: str, kind: str, number: int, name: str | None = None) -> str:
    """The location of line/row ``number`` of ``path`` (``-`` for stdin); ``name`` is the field or column."""
    base = STDIN if path == STDIN else _location_path(path)
    if kind == "row":
        return f"{base}#row={number}&column={_quote(name or '')}"
    return f"{base}#line={number}" + (f"&field={_quote(name)}" if name is not None else "")


@dataclass(frozen=True)
class _Location:
    path: str  # an OS path, or "-"
    kind: str  # "file", "line" or "row"
    number: int = 0
    name: str | None = None  # jsonl field or parquet column


def _parse_location(location: str) -> _Location:
    match = _FRAGMENT.search(location)
    if match is not None:
        kind, number, key, value = match.groups()
        if (kind, key) in (("line", None), ("line", "field"), ("row", "column")):
            name = None if value is None else urllib.parse.unquote(value, errors="surrogateescape")
            return _Location(_path_of_location(location[: match.start()]), kind, int(number), name)
    return _Location(_path_of_location(location), "file")


def infer_id_root(ids: Sequence[str], locations: Sequence[str]) -> str | None:
    """The directory a store's file ids were made relative to, read off its first row that shows it.

    For stores written before the root was recorded: a whole file's location is ROOT/ID, a record's
    ``FILE:LINE`` id has the location ROOT/FILE#line=…. None when no row shows it (stdin, named ids).
    """
    for identifier, location in zip(ids, locations, strict=True):
        where = _parse_location(location)
        if where.path == STDIN:
            continue
        relative = identifier if where.kind == "file" else identifier.rpartition(":")[0]
        path = where.path
        if relative and display_name(path) == path and path.endswith("/" + relative):
            return where.path[: len(where.path) - len(relative) - 1] or "/"
    return None


def detect_format(name: str) -> str:
    """The format ``auto`` gives a file name, looking inside a compression suffix: ``x.jsonl.gz`` → jsonl."""
    stem, suffix = os.path.splitext(name)
    if suffix.lower() in COMPRESSION_SUFFIXES:
        stem, suffix = os.path.splitext(stem)
    return FORMAT_SUFFIXES.get(suffix.lower(), "text")


def _compression(name: str) -> str | None:
    return COMPRESSION_SUFFIXES.get(os.path.splitext(name)[1].lower())


# --- decoding ---------------------------------------------------------------------------------------------


def text_hash(text: str) -> int:
    """``Document.content_hash`` of a text: xxh3-64 of its UTF-8 encoding."""
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def _decode(raw: bytes | bytearray | memoryview) -> tuple[str, bool]:
    """UTF-8 text of ``raw``, and whether invalid bytes had to be replaced by U+FFFD."""
    try:
        return str(raw, "utf-8"), False
    except UnicodeDecodeError:
        return str(raw, "utf-8", "replace"), True


def _clean(text: str) -> tuple[str, bool]:
    """Replace lone surrogates (JSON can hold ``"\\ud800"``; UTF-8 cannot) with U+FFFD."""
    if _SURROGATES.search(text) is None:
        return text, False
    return _SURROGATES.sub("\ufffd", text), True


def _document(identifier: str, location: str, text: str, mtime_ns: int, utf8: Any = None,
              size: int | None = None) -> Document:
    """``utf8``: the text's UTF-8 bytes when already at hand (saves encoding a large document again);
    ``size``: the file's size, for a whole file (default: the length of the UTF-8 text)."""
    encoded = text.encode("utf-8") if utf8 is None else utf8
    return Document(id=identifier, path=location, text=text, size=len(encoded) if size is None else size,
                    mtime_ns=mtime_ns, content_hash=xxhash.xxh3_64_intdigest(encoded))


def _whole_text(raw: bytearray | bytes) -> tuple[str, bool, memoryview]:
    view = memoryview(raw)
    if bytes(view[:3]) == _BOM:
        view = view[3:]
    text, replaced = _decode(view)
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


def _json_record(line: str, id_field: str | None, text_field: str) -> tuple[str | None, str]:
    """(id or None, text) of one JSON Lines record; ValueError with a one-line reason when malformed."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON ({error.msg}: column {error.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON (nested too deeply)") from None
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


# --- streams ----------------------------------------------------------------------------------------------


class _Prefixed(io.RawIOBase):
    """A raw stream that yields ``head`` (already read, to sniff for binary) and then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: Any) -> None:
        super().__init__()
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


Position = Callable[[], int]
"""How many bytes of a file on disk have been consumed so far (compressed bytes for a compressed file)."""


@contextmanager
def _open_decompressed(path: str, compression: str | None
                       ) -> Iterator[tuple[Any, os.stat_result | None, Position]]:
    """The decompressed bytes of ``path`` as a readable stream, the file's ``stat``, and its :data:`Position`."""
    handle = open(path, "rb")  # noqa: SIM115 - closed below, after any decompressor wrapping it
    position = handle.tell
    try:
        try:
            status: os.stat_result | None = os.fstat(handle.fileno())
        except (OSError, AttributeError, io.UnsupportedOperation):
            status = None
        if compression is None:
            yield handle, status, position
        elif compression == "gzip":
            with gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                yield stream, status, position
        elif compression == "bz2":
            with bz2.BZ2File(handle) as stream:
                yield stream, status, position
        elif compression == "xz":
            with lzma.LZMAFile(handle) as stream:
                yield stream, status, position
        else:
            native = pa.CompressedInputStream(pa.PythonFile(handle, mode="r"), compression)
            try:
                yield native, status, position
            finally:
                native.close()
    finally:
        handle.close()


def _read_capped(stream: Any, head: bytes, limit: int | None) -> bytearray | None:
    """``head`` and the rest of ``stream``; None as soon as more than ``limit`` bytes have been seen."""
    raw = bytearray(head)
    while limit is None or len(raw) <= limit:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return raw
        raw += chunk
    return None


def _iter_lines(stream: Any, limit: int | None) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number from 1, the line without ``\\n``/``\\r\\n`` or None when over ``limit``, bytes consumed).

    A line over the limit is consumed in chunks and never held whole. A byte-order mark opening line 1 is
    dropped. Reading and re-reading both count lines here, so their numbers agree.
    """
    number = 0
    while True:
        line = stream.readline() if limit is None else stream.readline(limit + 2)
        if not line:
            return
        number += 1
        consumed = len(line)
        if limit is not None and consumed == limit + 2 and not line.endswith(b"\n"):
            while True:
                chunk = stream.readline(_CHUNK)
                consumed += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield number, None, consumed
            continue
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        if number == 1 and line.startswith(_BOM):
            line = line[3:]
        if limit is not None and len(line) > limit:
            yield number, None, consumed
            continue
        yield number, line, consumed


# --- finding inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    id: str  # document id (files) or the FILE part of record ids
    path: str  # OS path to open, or "-"
    display: str  # for messages
    format: str  # text, lines, jsonl, parquet or sets
    compression: str | None
    size: int = 0  # bytes on disk (0 for stdin), for progress


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def _id_root(paths: Sequence[str], id_root: str | None) -> str:
    """The directory ids are relative to: ``id_root`` when given (every path must lie under it), else the
    deepest directory holding every path.

    A store keeps the root of its first run, so a document keeps its id whichever other inputs a later run
    names; an input outside that root could only get an id that depends on the inputs, so it is refused.
    """
    if id_root is None:
        return os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in paths])
    root = os.path.abspath(id_root)
    for path in paths:
        if os.path.commonpath([root, path]) != root:
            raise UsageError(
                f"input {display_name(path)} lies outside {display_name(root)}, the directory the store's ids are "
                "relative to; sign it into another store, or name inputs under that directory"
            )
    return root


def _find(named: Sequence[str], listed: Sequence[str], include: Sequence[str], exclude: Sequence[str],
          report: ReadReport, id_root: str | None = None) -> list[SourceFile]:
    """Files under ``named`` and ``listed`` paths, sorted by id (see :func:`discover_files`).

    A named path that does not exist stops the run; a listed one is reported unreadable and skipped, since
    a list made by ``find`` may name a file deleted since. Ids are relative to :func:`_id_root`, which is
    recorded in ``report.id_root``.
    """
    named_absolute = []
    for name in named:
        if not os.path.lexists(name):
            raise InputError(f"input {display_name(name)} does not exist; check the path")
        named_absolute.append(os.path.abspath(name))
    listed_absolute = []
    for name in listed:
        if os.path.lexists(name):
            listed_absolute.append(os.path.abspath(name))
        else:
            report.note("unreadable", (display_name(name), "does not exist (listed in --files-from)"))
    everything = named_absolute + listed_absolute
    if not everything:
        return []
    root = _id_root(everything, id_root)
    report.id_root = root

    def record_unreadable(error: OSError) -> None:
        report.note("unreadable", (display_name(str(error.filename)), error.strerror or str(error)))

    def wanted(relative: str) -> bool:
        return not (include and not _matches(relative, include)) and not (exclude and _matches(relative, exclude))

    found: dict[str, str] = {}  # relative path as the OS spells it → absolute path
    for path, always in [(p, True) for p in named_absolute] + [(p, False) for p in listed_absolute]:
        if not os.path.isdir(path):
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if always or wanted(display_name(relative)):
                found[relative] = path
            continue
        for directory, subdirectories, files in os.walk(path, onerror=record_unreadable):
            subdirectories[:] = sorted(
                d for d in subdirectories
                if not d.startswith(".") and not os.path.islink(os.path.join(directory, d))
            )
            # Every walked directory lies under root, so its relative part is computed once, not per file
            # (os.path.relpath per file was a tenth of the time of signing small files).
            base = os.path.relpath(directory, root).replace(os.sep, "/")
            prefix = "" if base == "." else base + "/"
            for name in sorted(files):
                if name.startswith("."):
                    continue
                relative = prefix + name
                if wanted(display_name(relative)):
                    found[relative] = os.path.join(directory, name)
    # Ids are the displayed names; two OS names may display alike, and the later one is then a duplicate id.
    keys = sorted(found, key=lambda relative: (display_name(relative), relative))
    return [SourceFile(display_name(relative), found[relative]) for relative in keys]


def discover_files(
    inputs: Sequence[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    report: ReadReport | None = None,
) -> list[SourceFile]:
    """List the files named by ``inputs`` (files or directories), sorted by id.

    ``include``/``exclude`` are glob patterns matched against the path relative to the input root or the
    file name; they filter files found inside directories (a file named on the command line is always
    read). Raises :class:`InputError` for an input that does not exist.
    """
    if not inputs:
        raise InputError("no input given; name files or directories to sign")
    return _find(inputs, (), include, exclude, report if report is not None else ReadReport())


def _read_file_list(files_from: str, null_separated: bool, stdin: BinaryIO) -> list[str]:
    """The paths listed in ``files_from`` (``-``: stdin), decoded like file names (surrogateescape)."""
    try:
        if files_from == STDIN:
            data = stdin.read()
        else:
            with open(files_from, "rb") as handle:
                data = handle.read()
    except OSError as error:
        raise InputError(f"cannot read --files-from {display_name(files_from)}: {error.strerror or error}") from error
    if null_separated:
        entries = data.split(b"\0")
    else:
        entries = [line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")]
    return [os.fsdecode(entry) for entry in entries if entry]


def _plan(inputs: Sequence[str], options: InputOptions, report: ReadReport,
          stdin: BinaryIO) -> list[_Source]:
    """Check the inputs and list what to read, in order (stdin first, then files by id)."""
    named = list(inputs)
    if not named and options.files_from is None:
        raise InputError("no input given; name files or directories, - for stdin, or --files-from FILE")
    if named.count(STDIN) > 1:
        raise UsageError("- (stdin) is named more than once; name it once")
    reads_stdin = STDIN in named
    if reads_stdin and options.files_from == STDIN:
        raise UsageError("stdin cannot hold both documents (-) and the --files-from list; put the list in a file")
    stdin_format = "text" if options.input_format == "auto" else options.input_format
    if reads_stdin and stdin_format == "parquet":
        raise UsageError("Parquet cannot be read from stdin (it needs a seekable file); save it to a file first")
    listed = _read_file_list(options.files_from, options.null_separated, stdin) if options.files_from else []
    files = _find([n for n in named if n != STDIN], listed, options.include, options.exclude, report,
                  options.id_root)
    sources = [_Source(STDIN, STDIN, STDIN_NAME, stdin_format, None)] if reads_stdin else []
    for file in files:
        file_format = detect_format(file.path) if options.input_format == "auto" else options.input_format
        try:
            size = os.stat(file.path).st_size
        except OSError:
            size = 0  # reported when it is read
        sources.append(_Source(file.id, file.path, display_name(file.path), file_format, _compression(file.path),
                               size))
    for source in sources:  # stop before any work when a Parquet file lacks a named column
        if source.format == "parquet" and source.compression is None:
            try:
                with open(source.path, "rb") as handle:
                    schema = pq.read_schema(handle)
            except _READ_ERRORS:
                continue  # reported when it is read
            _check_columns(schema, source, options)
    report.files_found += len(sources)
    report.input_bytes = None if reads_stdin else sum(source.size for source in sources)
    return sources


# --- reading ----------------------------------------------------------------------------------------------


def _read_whole(stream: Any, status: os.stat_result | None, source: _Source, limit: int | None,
                report: ReadReport) -> Iterator[tuple[str, Document]]:
    where = source.display
    if (limit is not None and source.compression is None and status is not None
            and stat_module.S_ISREG(status.st_mode) and status.st_size > limit):
        report.note("oversized", (where, status.st_size))  # known from stat: nothing read
        return
    head = stream.read(BINARY_SNIFF_BYTES)
    if b"\0" in head:
        report.bytes_read += len(head)
        report.note("binary", where)
        return
    whole_file = (status is not None and stat_module.S_ISREG(status.st_mode) and source.compression is None
                  and len(head) == status.st_size)
    raw = head if whole_file else _read_capped(stream, head, limit)  # a small file is all in ``head``
    if raw is None:
        report.bytes_read += (limit or 0) + 1
        report.note("oversized", (where, (limit or 0) + 1))
        return
    report.bytes_read += len(raw)
    text, replaced, view = _whole_text(raw)
    if replaced:
        report.note("invalid_utf8", where)
    location = STDIN if source.path == STDIN else _location_path(source.path)
    mtime_ns = status.st_mtime_ns if status is not None else 0
    # The size on disk, as stat reports it, so an incremental run can compare it without reading.
    size = status.st_size if status is not None and stat_module.S_ISREG(status.st_mode) else len(raw)
    yield where, _document(source.id, location, text, mtime_ns, None if replaced else view, size)


def _read_lines(stream: Any, status: os.stat_result | None, source: _Source, options: InputOptions,
                report: ReadReport, position: Position) -> Iterator[tuple[str, Document | IntegerSet]]:
    head = stream.read(BINARY_SNIFF_BYTES)
    if b"\0" in head:
        report.bytes_read += len(head)
        report.note("binary", source.display)
        return
    mtime_ns = status.st_mtime_ns if status is not None else 0
    jsonl = source.format == "jsonl"
    start = report.input_done
    reader = io.BufferedReader(_Prefixed(head, stream), buffer_size=1 << 16)
    for number, line, consumed in _iter_lines(reader, options.max_document_bytes):
        report.bytes_read += consumed
        report.input_done = start + position()
        where = f"{source.display}:{number}"
        if line is None:
            report.note("oversized", (where, consumed))
            continue
        if not line or line.isspace():
            report.blank_lines += 1
            continue
        if source.format == "sets":
            try:
                integer_set = _integer_set(line, record_location(source.path, "line", number), mtime_ns,
                                           options.universe or 0)
            except (ValueError, OverflowError) as error:
                report.note("malformed", (where, str(error).split("\n")[0]))
                continue
            yield where, integer_set
            continue
        text, replaced = _decode(line)
        identifier: str | None = None
        if jsonl:
            try:
                identifier, text = _json_record(text, options.id_field, options.text_field)
            except ValueError as error:
                report.note("malformed", (where, str(error)))
                continue
            text, surrogates = _clean(text)
            replaced = replaced or surrogates
        if replaced:
            report.note("invalid_utf8", where)
        location = record_location(source.path, "line", number, options.text_field if jsonl else None)
        utf8 = None if replaced or jsonl else line
        yield where, _document(identifier or f"{source.id}:{number}", location, text, mtime_ns, utf8)


_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
               pa.types.is_string_view, pa.types.is_binary_view)


def _value_type(data_type: pa.DataType) -> pa.DataType:
    return data_type.value_type if pa.types.is_dictionary(data_type) else data_type


def _check_columns(schema: pa.Schema, source: _Source, options: InputOptions) -> None:
    """Stop the run when a named column is missing or of the wrong type: the options are wrong, not the row."""
    names = schema.names
    for column, option in ((options.text_column, "--text-column"), (options.id_column, "--id-column")):
        if column is None:
            continue
        if column not in names:
            raise InputError(f"{source.display} has no column {column!r} (its columns: {', '.join(names)}); "
                             f"name the column with {option}")
        data_type = _value_type(schema.field(column).type)
        text_like = any(test(data_type) for test in _TEXT_TYPES)
        if option == "--text-column" and not text_like:
            raise InputError(f"column {column!r} of {source.display} holds {data_type}, not text; "
                             "name a string column with --text-column")
        if option == "--id-column" and not (text_like or pa.types.is_integer(data_type)):
            raise InputError(f"column {column!r} of {source.display} holds {data_type}; ids must be strings or "
                             "integers; name another column with --id-column")


def _column_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of a batch column; strings come as bytes, to decode (and repair) like files."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type) or pa.types.is_string_view(array.type):
        array = array.cast(pa.binary())
    elif pa.types.is_large_string(array.type):
        array = array.cast(pa.large_binary())
    return array.to_pylist()


def _read_parquet(handle: Any, status: os.stat_result | None, source: _Source, options: InputOptions,
                  report: ReadReport) -> Iterator[tuple[str, Document]]:
    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as error:
        report.note("unreadable", (source.display, f"not a readable Parquet file ({' '.join(str(error).split())})"))
        return
    _check_columns(parquet.schema_arrow, source, options)
    text_column, id_column = options.text_column, options.id_column
    columns = [text_column] if id_column is None or id_column == text_column else [text_column, id_column]
    limit = options.max_document_bytes
    mtime_ns = status.st_mtime_ns if status is not None else 0
    row = 0
    start, rows = report.input_done, max(parquet.metadata.num_rows, 1)
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns, use_threads=False):
        report.input_done = start + source.size * row // rows
        texts = _column_values(batch.column(text_column))
        ids = _column_values(batch.column(id_column)) if id_column is not None else None
        for offset, raw in enumerate(texts):
            where = f"{source.display} row {row}"
            number, row = row, row + 1
            if raw is None:
                report.note("malformed", (where, f"{text_column!r} is null"))
                continue
            report.bytes_read += len(raw)
            if limit is not None and len(raw) > limit:
                report.note("oversized", (where, len(raw)))
                continue
            identifier = f"{source.id}:{number}"
            if ids is not None:
                value = ids[offset]
                if value is None:
                    report.note("malformed", (where, f"{id_column!r} is null"))
                    continue
                identifier = str(value) if isinstance(value, int) else str(value, "utf-8", "backslashreplace")
                if not identifier:
                    report.note("malformed", (where, f"{id_column!r} is empty"))
                    continue
            text, replaced = _decode(raw)
            if replaced:
                report.note("invalid_utf8", where)
            location = record_location(source.path, "row", number, text_column)
            yield where, _document(identifier, location, text, mtime_ns, None if replaced else raw)


Unchanged = Callable[[str, str, os.stat_result], bool]
"""Told (id, location, stat) of a whole text file before it is read; True skips it as already signed."""


def _over_limit(status: os.stat_result, limit: int | None) -> bool:
    """Whether a plain file is too large, known from ``stat`` alone."""
    return limit is not None and stat_module.S_ISREG(status.st_mode) and status.st_size > limit


def _read_source(source: _Source, options: InputOptions, report: ReadReport, stdin: BinaryIO,
                 unchanged: Unchanged | None = None) -> Iterator[tuple[str, Document | IntegerSet]]:
    """(location for messages, document) of every document in ``source``; problems go to ``report``.

    A whole text file that ``unchanged`` accepts is skipped unread, unless this run's rules would skip it
    anyway (a plain file over the size limit, judged from ``stat``), so that whether a stored document
    counts as seen (for ``--prune``) never depends on its modification time. Compressed files are read
    when there is a size limit: their size is only known after decompression.
    """
    start = report.input_done
    try:
        yield from _read_source_documents(source, options, report, stdin, unchanged)
    finally:
        report.input_done = max(report.input_done, start + source.size)


def _read_source_documents(source: _Source, options: InputOptions, report: ReadReport, stdin: BinaryIO,
                           unchanged: Unchanged | None) -> Iterator[tuple[str, Document | IntegerSet]]:
    if source.format == "parquet" and source.compression is not None:
        report.note("unreadable", (source.display, f"Parquet cannot be read through {source.compression} "
                                                   "compression (it compresses its own columns); decompress it"))
        return
    limit = options.max_document_bytes
    try:
        if source.path == STDIN:
            consumed = _Counted(stdin)
            if source.format == "text":
                yield from _read_whole(consumed, None, source, limit, report)
                report.input_done += consumed.consumed
            else:
                yield from _read_records(consumed, None, source, options, report, consumed.position)
            return
        if source.format == "text" and source.compression is None:
            # The common case, many small plain files: opened directly, without the decompression layer.
            with open(source.path, "rb") as plain:
                plain_status = os.fstat(plain.fileno())
                if (unchanged is not None and not _over_limit(plain_status, limit)
                        and unchanged(source.id, _location_path(source.path), plain_status)):
                    report.unchanged += 1
                    return
                yield from _read_whole(plain, plain_status, source, limit, report)
            return
        with _open_decompressed(source.path, source.compression) as (stream, status, position):
            if (source.format == "text" and unchanged is not None and status is not None and limit is None
                    and unchanged(source.id, _location_path(source.path), status)):
                report.unchanged += 1
                return
            if source.format == "text":
                yield from _read_whole(stream, status, source, limit, report)
            else:
                yield from _read_records(stream, status, source, options, report, position)
    except _READ_ERRORS as error:
        reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
        if source.compression is not None and getattr(error, "errno", None) is None:
            reason = f"damaged {source.compression} data ({reason}); documents before the damage were read"
        report.note("unreadable", (source.display, reason))


def _read_records(stream: Any, status: os.stat_result | None, source: _Source, options: InputOptions,
                  report: ReadReport, position: Position) -> Iterator[tuple[str, Document | IntegerSet]]:
    if source.format == "parquet":
        return _read_parquet(stream, status, source, options, report)
    return _read_lines(stream, status, source, options, report, position)


class _Counted(io.RawIOBase):
    """A stream that counts the bytes read through it (stdin has no position to ask)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.consumed += len(data)
        return bytes(data)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def position(self) -> int:
        return self.consumed


def read_inputs(inputs: Sequence[str], options: InputOptions, report: ReadReport, stdin: BinaryIO | None = None,
                unchanged: Unchanged | None = None) -> Iterator[Document | IntegerSet]:
    """Stream the documents of ``inputs`` (paths, directories and ``-``) read as ``options`` say.

    Inputs are checked and listed now (raising :class:`InputError` for a named input that does not exist or
    a Parquet file without a named column, :class:`UsageError` for contradictory options) and
    ``report.files_found`` is set; documents are then read one at a time as the iterator is consumed. Skipped
    inputs and records, repaired text and the byte count go to ``report``; a document whose id was already
    read is skipped (the ids read so far are kept in a set for this). ``stdin`` defaults to ``sys.stdin.buffer``.

    Order: stdin first, then files by id, records in file order (so record ids are not sorted). With
    ``unchanged``, a whole text file it accepts is skipped unread and counted in ``report.unchanged``.
    """
    stream = stdin if stdin is not None else sys.stdin.buffer
    report.max_document_bytes = options.max_document_bytes
    sources = _plan(inputs, options, report, stream)
    return _read_planned(sources, options, report, stream, unchanged)


def _read_planned(sources: Sequence[_Source], options: InputOptions, report: ReadReport,
                  stdin: BinaryIO, unchanged: Unchanged | None) -> Iterator[Document | IntegerSet]:
    seen: set[str] = set()
    for source in sources:
        for where, document in _read_source(source, options, report, stdin, unchanged):
            if document.id in seen:
                report.note("duplicate_ids", (where, document.id))
                continue
            seen.add(document.id)
            report.documents += 1
            if document.is_empty:
                report.empty_documents += 1
            yield document


def read_documents(files: Sequence[SourceFile], report: ReadReport) -> Iterator[Document]:
    """Read each file as one text document (decompressing ``.gz``/``.bz2``/``.xz``/``.zst``).

    Binary and unreadable files are recorded in ``report`` and skipped.
    """
    for file in files:
        source = _Source(file.id, file.path, display_name(file.path), "text", _compression(file.path))
        for _, document in _read_source(source, InputOptions(input_format="text"), report, sys.stdin.buffer):
            assert isinstance(document, Document)
            report.documents += 1
            yield document


# --- re-reading (exact verification) ----------------------------------------------------------------------


def _reread_lines(path: str, numbers: set[int], field_name: str | None) -> dict[int, str]:
    """Texts of lines ``numbers`` of ``path``, one pass; a line that is blank or no longer a record is absent."""
    found: dict[int, str] = {}
    last = max(numbers)
    with _open_decompressed(path, _compression(path)) as (stream, _, _):
        reader = io.BufferedReader(_Prefixed(b"", stream), buffer_size=1 << 16)
        for number, line, _ in _iter_lines(reader, None):
            if number in numbers and line is not None:
                text, _ = _decode(line)
                if field_name is None:
                    found[number] = text
                else:
                    try:
                        found[number] = _clean(_json_record(text, None, field_name)[1])[0]
                    except ValueError:
                        pass
            if number >= last:
                break
    return found


def _reread_rows(path: str, numbers: set[int], column: str) -> dict[int, str]:
    """Texts of rows ``numbers`` (from 0) of column ``column`` of the Parquet file ``path``."""
    found: dict[int, str] = {}
    with open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        if column not in parquet.schema_arrow.names:
            raise InputError(f"{display_name(path)} no longer has a column {column!r}")
        start = 0
        for group in range(parquet.metadata.num_row_groups):
            size = parquet.metadata.row_group(group).num_rows
            wanted = sorted(n - start for n in numbers if start <= n < start + size)
            if wanted:
                values = _column_values(parquet.read_row_group(group, columns=[column]).column(column))
                for offset in wanted:
                    if values[offset] is not None:
                        found[start + offset] = _decode(values[offset])[0]
            start += size
    return found


def _reread_group(path: str, kind: str, name: str | None, numbers: set[int]) -> dict[int, str]:
    if path == STDIN:
        raise InputError("the document was read from stdin and cannot be re-read; sign files to verify exactly")
    try:
        if kind == "file":
            with _open_decompressed(path, _compression(path)) as (stream, _, _):
                raw = _read_capped(stream, b"", None)
            assert raw is not None
            return {0: _whole_text(raw)[0]}
        if kind == "line":
            return _reread_lines(path, numbers, name)
        return _reread_rows(path, numbers, name or "")
    except _READ_ERRORS as error:
        reason = getattr(error, "strerror", None) or " ".join(str(error).split())
        raise InputError(f"cannot read {display_name(path)}: {reason}") from error


def same_file_aliases(locations: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """The ``rows`` (int64 positions into ``locations``) whose document is a whole file that another of ``rows``
    with a lower position also is, on disk (the same device and inode: a hard or symbolic link).

    Such a pair is one file under two ids, never a duplicate to delete. Files that cannot be found are
    taken to be distinct. Returns int64[m], ascending.
    """
    first_row: dict[tuple[int, int], int] = {}
    aliases: list[int] = []
    for row in np.sort(rows).tolist():
        where = _parse_location(locations[row])
        if where.kind != "file" or where.path == STDIN:
            continue
        try:
            status = os.stat(where.path)
        except OSError:
            continue
        key = (status.st_dev, status.st_ino)
        if key in first_row:
            aliases.append(row)
        else:
            first_row[key] = row
    return np.array(aliases, dtype=np.int64)


def reread_documents(locations: Sequence[str], content_hashes: Sequence[int] | None = None) -> list[str | None]:
    """The texts at ``locations`` (``Document.path`` values), reading each file once; None where one is gone.

    With ``content_hashes`` (``Document.content_hash``, aligned with ``locations``) a text that changed since
    it was read is None too. Stdin documents are always None.
    """
    parsed = [_parse_location(location) for location in locations]
    groups: dict[tuple[str, str, str | None], set[int]] = {}
    for where in parsed:
        groups.setdefault((where.path, where.kind, where.name), set()).add(where.number)
    texts: dict[tuple[str, str, str | None], dict[int, str]] = {}
    for key, numbers in groups.items():
        try:
            texts[key] = _reread_group(*key, numbers)
        except InputError:
            texts[key] = {}
    result: list[str | None] = []
    for index, where in enumerate(parsed):
        text = texts[(where.path, where.kind, where.name)].get(where.number)
        if text is not None and content_hashes is not None and text_hash(text) != int(content_hashes[index]):
            text = None
        result.append(text)
    return result


def reread_document(location: str, content_hash: int | None = None) -> str | None:
    """The text at ``location`` (a ``Document.path``) read again with the same decoding, or None.

    None when it cannot be re-read: stdin, a missing or unreadable file, a line or row that is gone or no
    longer a record, or (given ``content_hash``) a text that changed since it was signed.
    """
    return reread_documents([location], None if content_hash is None else [content_hash])[0]


def read_text(path: str | Path) -> str:
    """Read one document again (for exact verification), like :func:`reread_document` but raising.

    Raises :class:`InputError` naming the location when it cannot be re-read.
    """
    location = str(path)
    where = _parse_location(location)
    texts = _reread_group(where.path, where.kind, where.name, {where.number})
    if where.number not in texts:
        unit = "row" if where.kind == "row" else "line"
        raise InputError(f"cannot re-read {display_name(location)}: {unit} {where.number} of "
                         f"{display_name(where.path)} is gone or no longer holds a text")
    return texts[where.number]


@dataclass(frozen=True)
class IntegerSet:
    """One set of integers over a stated universe (e.g. a word as the set of documents containing it).

    Read from one line of a JSON Lines (``{"id": "w", "elements": [3, 17]}``) or TSV (``w<TAB>3 17``) file;
    ``path`` is that line's location (``PATH#line=N``), ``size`` the line's bytes, ``content_hash`` xxh3-64 of
    the distinct elements (:func:`set_hash`), so an edited line is noticed and a reordered one is not.
    """

    id: str
    path: str
    elements: np.ndarray  # uint64[f], sorted, distinct, each < universe
    size: int
    mtime_ns: int
    content_hash: int

    @property
    def is_empty(self) -> bool:
        return self.elements.size == 0


def set_hash(elements: np.ndarray) -> int:
    """``IntegerSet.content_hash``: xxh3-64 of the sorted distinct elements as little-endian uint64."""
    return xxhash.xxh3_64_intdigest(np.ascontiguousarray(elements, dtype="<u8").tobytes())


def _parse_set_line(line: str) -> tuple[str, np.ndarray]:
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


def _integer_set(line: bytes, location: str, mtime_ns: int, universe: int) -> IntegerSet:
    identifier, values = _parse_set_line(_decode(line)[0].strip())
    if values.size and (values[0] < 0 or values[-1] >= universe):
        bad = int(values[0] if values[0] < 0 else values[-1])
        raise ValueError(f"element {bad} outside the universe [0, {universe})")
    elements = values.astype(np.uint64)
    return IntegerSet(identifier, location, elements, len(line), mtime_ns, set_hash(elements))


_LEGACY_SET_LOCATION = re.compile(r"(.*):(\d+)\Z")


def reread_sets(locations: Sequence[str], content_hashes: Sequence[int] | None = None) -> list[np.ndarray | None]:
    """The elements (uint64, sorted) of the sets at ``locations`` (a set store's ``path`` values), each file
    read once; None where a set is gone, malformed now, or (given ``content_hashes``) changed since signed.

    Stores written before set rows had locations hold ``FILE:LINE`` (relative to where ``sign`` ran) and a
    content hash of 0; those are read as they are, unchecked.
    """
    wanted: list[tuple[str, int]] = []
    for location in locations:
        where = _parse_location(location)
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
            lines[path] = {} if path == STDIN else _reread_lines(path, wanted_numbers, None)
        except _READ_ERRORS:
            lines[path] = {}
    result: list[np.ndarray | None] = []
    for index, (path, number) in enumerate(wanted):
        line = lines[path].get(number)
        elements: np.ndarray | None = None
        if line is not None:
            try:
                elements = _parse_set_line(line.strip())[1].astype(np.uint64)
            except (ValueError, OverflowError):
                elements = None
        expected = 0 if content_hashes is None else int(content_hashes[index])
        if elements is not None and expected and set_hash(elements) != expected:
            elements = None
        result.append(elements)
    return result
