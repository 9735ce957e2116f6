"""Documents as columns: the texts of a reading task end to end in one UTF-8 buffer, and what identifies each.

What signing needs of a document is its bytes and a few numbers; a Python object per document (its ``str``, a
:class:`~dedup_cli.inputs.records.Document`) costs as much as signing a short one. So readers that can
(whole files, JSON Lines parsed a block at a time, plain lines) append each document's UTF-8 bytes as they read
them to a :class:`ColumnsBuilder`, and the compiled kernel signs the buffer as it is, with no text decoded or
encoded again. ``Document`` objects are made from the columns only where they are wanted one at a time
(:meth:`TextColumns.documents`); the numpy kernel decodes the texts it needs (:meth:`TextColumns.texts`).

Everything here has the meaning the fields of ``Document`` have (:mod:`dedup_cli.inputs.records`): the buffer
holds each text as UTF-8 (a byte-order mark dropped, invalid bytes replaced by U+FFFD), the content hash is
xxh3-64 of those bytes, ``size`` is a whole file's size on disk or a record's UTF-8 length.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import xxhash

from dedup_cli.inputs.locations import display_name
from dedup_cli.inputs.records import Document

# Python's str.isspace for ASCII: these bytes, and no others below 0x80. A text is empty when it has no other
# character (a non-ASCII first character is checked by decoding it).
_NOT_ASCII_SPACE = re.compile(rb"[^\t\n\x0b\x0c\r\x1c-\x1f ]")
_ASCII_SPACES = np.zeros(256, dtype=np.bool_)
_ASCII_SPACES[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


def blank(data: bytes | memoryview, start: int, end: int) -> bool:
    """Whether the UTF-8 text ``data[start:end]`` is empty or white space only (``not text or text.isspace()``)."""
    found = _NOT_ASCII_SPACE.search(data, start, end)
    if found is None:
        return True
    at = found.start()
    # The first character that is not ASCII white space: a UTF-8 character has at most 4 bytes.
    if data[at] < 0x80 or not str(data[at : min(at + 4, end)], "utf-8", "replace")[0].isspace():
        return False
    return str(data[start:end], "utf-8", "replace").isspace()


def ascii_texts(data: bytes | memoryview, offsets: np.ndarray, all_ascii: bool | None = None) -> np.ndarray:
    """bool[n]: which of the texts ``data[offsets[d]:offsets[d + 1]]`` have no byte ≥ 0x80 (``all_ascii``: whether
    ``data`` has none, when known)."""
    ascii_flags = np.ones(offsets.size - 1, dtype=np.bool_)
    if all_ascii is None:
        all_ascii = data.isascii() if isinstance(data, bytes) else bool(np.all(np.frombuffer(data, np.uint8) < 0x80))
    if not all_ascii:
        beyond = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) >= 0x80)
        ascii_flags[np.searchsorted(offsets, beyond, side="right") - 1] = False
    return ascii_flags


def blank_texts(data: bytes | memoryview, offsets: np.ndarray) -> np.ndarray:
    """bool[n]: which of the texts ``data[offsets[d]:offsets[d + 1]]`` are empty or white space only; only the
    texts that start with white space or a non-ASCII byte are looked at one by one."""
    starts, lengths = offsets[:-1], np.diff(offsets)
    empty = lengths == 0
    first = np.frombuffer(data, dtype=np.uint8)[np.minimum(starts, max(len(data) - 1, 0))] if len(data) else starts
    unsure = np.flatnonzero(~empty & (_ASCII_SPACES[first] | (first >= 0x80)))
    bounds = offsets.tolist()
    for document in unsure.tolist():
        empty[document] = blank(data, bounds[document], bounds[document + 1])
    return empty


@dataclass
class LineWheres:
    """Where each record of a line task was read, as messages name it (``FILE:LINE``), made when asked."""

    display: str
    numbers: np.ndarray  # int64[n], the line of each record

    def __getitem__(self, position: int) -> str:
        return f"{self.display}:{int(self.numbers[position])}"

    def __len__(self) -> int:
        return len(self.numbers)


@dataclass
class FileWheres:
    """Where each document of a task of whole files was read (the file's name), made when asked."""

    paths: Sequence[str]  # the task's files
    positions: np.ndarray  # int64[n], the file of each document among them

    def __getitem__(self, position: int) -> str:
        return display_name(self.paths[int(self.positions[position])])

    def __len__(self) -> int:
        return len(self.positions)


Wheres = LineWheres | FileWheres | list[str]


@dataclass
class TextColumns:
    """n documents as columns: texts end to end (``data[offsets[d]:offsets[d + 1]]``, UTF-8) and their fields.

    ``ids``, ``locations`` (``Document.path``) and ``wheres`` (for messages) are sequences of n strings;
    ``sizes``, ``mtimes_ns``, ``content_hashes`` (int64, int64, uint64), ``empty`` (bool: empty or white
    space only) and ``ascii`` (bool: no byte ≥ 0x80, so nothing to normalise) are arrays of n.
    """

    ids: list[str]
    locations: list[str]
    wheres: Wheres
    data: bytes | memoryview
    offsets: np.ndarray
    sizes: np.ndarray
    mtimes_ns: np.ndarray
    content_hashes: np.ndarray
    empty: np.ndarray
    ascii: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def texts(self, positions: Sequence[int] | None = None) -> list[str]:
        """The texts (of ``positions``, default all) as ``str``: what the numpy kernel reads."""
        bounds = self.offsets.tolist()
        view = memoryview(self.data)
        chosen = range(len(self.ids)) if positions is None else positions
        return [str(view[bounds[d] : bounds[d + 1]], "utf-8") for d in chosen]

    def documents(self) -> list[Document]:
        """One :class:`Document` per row."""
        return [Document(identifier, location, text, int(size), int(mtime), int(content_hash))
                for identifier, location, text, size, mtime, content_hash in zip(
                    self.ids, self.locations, self.texts(), self.sizes.tolist(), self.mtimes_ns.tolist(),
                    self.content_hashes.tolist(), strict=True)]

    def take(self, positions: np.ndarray) -> TextColumns:
        """The documents at ``positions`` (int64, increasing), with their texts in a buffer of their own."""
        if len(positions) == len(self.ids):
            return self
        bounds = self.offsets.tolist()
        view = memoryview(self.data)
        chosen = positions.tolist()
        data = b"".join(view[bounds[d] : bounds[d + 1]] for d in chosen)
        offsets = np.zeros(len(chosen) + 1, dtype=np.int64)
        np.cumsum(np.diff(self.offsets)[positions], out=offsets[1:])
        wheres = [self.wheres[d] for d in chosen]
        return TextColumns([self.ids[d] for d in chosen], [self.locations[d] for d in chosen], wheres, data,
                           offsets, self.sizes[positions], self.mtimes_ns[positions],
                           self.content_hashes[positions], self.empty[positions], self.ascii[positions])


@dataclass
class ColumnsBuilder:
    """Collects documents one by one (their UTF-8 bytes, not decoded) into :class:`TextColumns`."""

    ids: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    pieces: list[bytes | memoryview] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    mtimes_ns: list[int] = field(default_factory=list)
    content_hashes: list[int] = field(default_factory=list)
    ascii: list[bool] = field(default_factory=list)

    def add(self, identifier: str, location: str, where: str, utf8: bytes | memoryview, size: int,
            mtime_ns: int, ascii_text: bool) -> None:
        """One document: its UTF-8 bytes (valid), the size to record, its file's modification time, and whether
        it is ASCII."""
        self.ids.append(identifier)
        self.locations.append(location)
        self.wheres.append(where)
        self.pieces.append(utf8)
        self.lengths.append(len(utf8))
        self.sizes.append(size)
        self.mtimes_ns.append(mtime_ns)
        self.content_hashes.append(xxhash.xxh3_64_intdigest(utf8))
        self.ascii.append(ascii_text)

    def add_document(self, where: str, document: Document) -> None:
        """A document already read as a :class:`Document` (its text encoded here)."""
        utf8 = document.text.encode("utf-8")
        self.ids.append(document.id)
        self.locations.append(document.path)
        self.wheres.append(where)
        self.pieces.append(utf8)
        self.lengths.append(len(utf8))
        self.sizes.append(document.size)
        self.mtimes_ns.append(document.mtime_ns)
        self.content_hashes.append(document.content_hash)
        self.ascii.append(document.text.isascii())

    def extend(self, columns: TextColumns) -> None:
        """Documents already in columns (a block of records parsed at once)."""
        self.ids.extend(columns.ids)
        self.locations.extend(columns.locations)
        self.wheres.extend(columns.wheres[d] for d in range(len(columns)))
        self.pieces.append(columns.data)
        self.lengths.extend(np.diff(columns.offsets).tolist())
        self.sizes.extend(columns.sizes.tolist())
        self.mtimes_ns.extend(columns.mtimes_ns.tolist())
        self.content_hashes.extend(columns.content_hashes.tolist())
        self.ascii.extend(columns.ascii.tolist())

    def build(self, wheres: Wheres | None = None) -> TextColumns:
        """The columns (``wheres``: the locations for messages, when they are not those added)."""
        count = len(self.ids)
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.array(self.lengths, dtype=np.int64), out=offsets[1:])
        data = b"".join(self.pieces)
        return TextColumns(self.ids, self.locations, self.wheres if wheres is None else wheres, data, offsets,
                           np.array(self.sizes, dtype=np.int64), np.array(self.mtimes_ns, dtype=np.int64),
                           np.array(self.content_hashes, dtype=np.uint64), blank_texts(data, offsets),
                           np.array(self.ascii, dtype=np.bool_))


def columns_of(documents: Sequence[Document], wheres: Sequence[str]) -> TextColumns:
    """Documents already read (stdin, Parquet rows) as columns."""
    builder = ColumnsBuilder()
    for where, document in zip(wheres, documents, strict=True):
        builder.add_document(where, document)
    return builder.build()


def concatenate(parts: Sequence[TextColumns]) -> TextColumns:
    """Columns one after the other."""
    if len(parts) == 1:
        return parts[0]
    builder = ColumnsBuilder()
    for part in parts:
        builder.extend(part)
    return builder.build()
