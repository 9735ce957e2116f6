"""What reading produces: a decoded document, or an integer set, with what identifies it and its content hash.

Content hash
    ``Document.content_hash`` is xxh3-64 of the document's text encoded as UTF-8 (:func:`text_hash`), for
    files and records alike; for a UTF-8 file without a byte-order mark this is the hash of its bytes, as
    in stores written before records existed. ``Document.size`` is a whole file's size on disk (what
    ``stat`` reports, so unchanged files can be recognised without reading them) and a record's UTF-8 length.
    ``IntegerSet.content_hash`` is xxh3-64 of its sorted distinct elements (:func:`set_hash`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash


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


def text_hash(text: str) -> int:
    """``Document.content_hash`` of a text: xxh3-64 of its UTF-8 encoding."""
    return xxhash.xxh3_64_intdigest(text.encode("utf-8"))


def make_document(identifier: str, location: str, text: str, mtime_ns: int, utf8: Any = None,
                  size: int | None = None) -> Document:
    """``utf8``: the text's UTF-8 bytes when already at hand (saves encoding a large document again);
    ``size``: the file's size, for a whole file (default: the length of the UTF-8 text)."""
    encoded = text.encode("utf-8") if utf8 is None else utf8
    return Document(id=identifier, path=location, text=text, size=len(encoded) if size is None else size,
                    mtime_ns=mtime_ns, content_hash=xxhash.xxh3_64_intdigest(encoded))
