"""Which stored documents are gone: the text they were signed from can no longer be read where it was read.

A store keeps a document until a sign run with ``--prune`` removes it, so a file renamed or deleted, or a record
whose line moved (a ``FILE:LINE`` id now pointing at another record, or past the end), leaves its old id behind.
Such a document must never be kept in place of a live one: the live copy would be dropped, and the only text left
would be one that does not exist (docs/outputs.md, "Gone documents").

The check costs a ``stat`` per file, not a read per document: each distinct file of the documents asked about is
stat-ed once (objects: one listing per prefix holding many of them, else a request each). A document whose file
is missing is gone; one whose file still has the modification time recorded when it was signed is live (the file
has not changed since). Only the rest, whose file changed since they were
signed, are re-read (:func:`dedup_cli.inputs.reread.reread_documents`, each file once, and a file of records only
up to the last line asked for), and are gone unless the text at their location still has the recorded content
hash. A document that cannot be re-read at all (stdin, signed from memory, a FIFO or a device, which only the
reader that opens it first can read), or whose file cannot be looked at or read now (permission denied, an I/O
error), is taken as live: nothing says it is gone, and whether the run can go on without reading it is for the
exact checks to say.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

import numpy as np

from dedup_cli.errors import InputError
from dedup_cli.inputs.locations import STDIN, path_of_location
from dedup_cli.inputs.reread import GONE_ERRORS, reread_documents
from dedup_cli.objectstore.urls import is_url

_MISSING = -1  # the file is not there
_UNKNOWN = -2  # nothing to look at (stdin, a document signed from memory) or it cannot be looked at now
LISTED_OBJECTS = 8
"""Objects under one prefix from which the prefix is listed (a request per 1000 objects) rather than each asked
for (a request each)."""


def _file_mtime_ns(path: str) -> int:
    """The modification time (ns) of a local file, :data:`_MISSING` or :data:`_UNKNOWN`."""
    try:
        status = os.stat(path)
    except GONE_ERRORS:
        return _MISSING
    except OSError:
        return _UNKNOWN
    # A FIFO or a device is read once, by whoever opens it first: never here.
    return status.st_mtime_ns if stat.S_ISREG(status.st_mode) else _UNKNOWN


def _object_mtime_ns(url: str) -> int:
    """The modification time (ns) of an object, :data:`_MISSING` or :data:`_UNKNOWN`."""
    from dedup_cli.objectstore import objects  # only stores of objects pay for the client

    try:
        described = objects.info(url)
    except GONE_ERRORS:
        return _MISSING
    except OSError:
        return _UNKNOWN
    return _MISSING if described is None else described.mtime_ns


def _objects_mtime_ns(urls: list[str]) -> dict[str, int]:
    """:func:`_object_mtime_ns` of many objects: those of a prefix holding more than :data:`LISTED_OBJECTS` of them
    from one listing of it (an object the listing does not show is asked for on its own)."""
    from dedup_cli.objectstore import objects

    prefixes: dict[str, list[str]] = {}
    for url in urls:
        prefixes.setdefault(url.rpartition("/")[0] + "/", []).append(url)
    found: dict[str, int] = {}
    for prefix, members in prefixes.items():
        listed: dict[str, int] = {}
        if len(members) > LISTED_OBJECTS:
            try:
                listed = {item.url: item.mtime_ns for item in objects.listing(prefix, recursive=False)}
            except OSError:
                listed = {}
        for url in members:
            found[url] = listed[url] if url in listed else _object_mtime_ns(url)
    return found


def _mtimes_ns(location_files: list[str]) -> np.ndarray:
    """int64[f]: the modification time of each distinct file of the locations (``PATH``, ``-`` or ``""``),
    :data:`_MISSING` or :data:`_UNKNOWN`."""
    paths = [None if name in ("", STDIN) else path_of_location(name) for name in location_files]
    urls = [path for path in paths if path is not None and is_url(path)]
    remote = _objects_mtime_ns(urls) if urls else {}
    return np.array([_UNKNOWN if path is None else remote[path] if path in remote else _file_mtime_ns(path)
                     for path in paths], dtype=np.int64)


def gone_documents(locations: Sequence[str], mtimes_ns: np.ndarray | None,
                   content_hashes: np.ndarray | None) -> np.ndarray:
    """bool[m]: which of these documents are gone since they were signed (see the module docstring).

    Args:
        locations: the documents' recorded locations (``Document.path``; ``""`` for one signed from memory).
        mtimes_ns: int64[m], the modification time recorded for each (None: unknown, every file is re-read).
        content_hashes: uint64[m], the content hash recorded for each (None: only missing files count).
    """
    count = len(locations)
    gone = np.zeros(count, dtype=bool)
    if count == 0:
        return gone
    # A location is its file, then an optional ``#line=``/``#row=`` part (a ``#`` in a file name is percent-encoded).
    files = [location.partition("#")[0] for location in locations]
    distinct = list(dict.fromkeys(files))
    number = {name: index for index, name in enumerate(distinct)}
    file_times = _mtimes_ns(distinct)
    now = file_times[np.fromiter((number[name] for name in files), dtype=np.int64, count=count)]
    gone = now == _MISSING
    present = now >= 0
    recorded = np.full(count, _MISSING, np.int64) if mtimes_ns is None else np.asarray(mtimes_ns, np.int64)
    changed = np.flatnonzero(present & (now != recorded))
    if changed.size and content_hashes is not None:
        hashes = np.asarray(content_hashes, np.uint64)
        try:
            gone[changed] = _unread(locations, hashes, changed)
        except InputError:  # one file cannot be read now: the others are still told apart, file by file
            by_file: dict[str, list[int]] = {}
            for row in changed.tolist():
                by_file.setdefault(files[row], []).append(row)
            for rows in by_file.values():
                try:
                    gone[rows] = _unread(locations, hashes, np.array(rows, np.int64))
                except InputError:
                    pass
    return gone


def _unread(locations: Sequence[str], content_hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """bool[len(rows)]: which documents ``rows`` no longer read as the text they were signed from."""
    texts = reread_documents([locations[row] for row in rows.tolist()], content_hashes[rows].tolist())
    return np.fromiter((text is None for text in texts), dtype=bool, count=rows.size)
