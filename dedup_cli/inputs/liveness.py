"""Which stored documents are gone: the text they were signed from can no longer be read where it was read.

A store keeps a document until a sign run with ``--prune`` removes it, so a file renamed or deleted, or a record
whose line moved (a ``FILE:LINE`` id now pointing at another record, or past the end), leaves its old id behind.
Such a document must never be kept in place of a live one: the live copy would be dropped, and the only text left
would be one that does not exist (docs/outputs.md, "Gone documents").

The check costs a ``stat`` per file, not a read per document: each distinct file of the documents asked about is
stat-ed once (objects: one listing per prefix holding many of them, else a request each). A document whose file
is missing is gone; one whose file still has the modification time recorded when it was signed is live (the file
has not changed since). Only the rest, whose file changed since they were signed, are re-read. A record is found
by what identifies it: where ids name records by a field (``--id-field``), the file is read again as the store's
runs read it and the record found by its id, wherever it is now (a record deleted or inserted above it moves it,
and another record may now hold its old place, even with the same text); where the id is the place (``FILE:LINE``,
and a whole file), the text at its location is read (:func:`dedup_cli.inputs.reread.reread_documents`, each file
once, and a file of records only up to the last line asked for). Either way it is gone unless the text found has
the recorded content hash. A document that cannot be re-read at all (stdin, signed from memory, a FIFO or a
device, which only the reader that opens it first can read), or whose file cannot be looked at or read now
(permission denied, an I/O error), is taken as live: nothing says it is gone, and whether the run can go on
without reading it is for the exact checks to say.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

import numpy as np

from dedup_cli.errors import InputError
from dedup_cli.inputs.locations import STDIN, path_of_location
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.reread import GONE_ERRORS, reread_documents
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.input_options import InputOptions

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
                   content_hashes: np.ndarray | None, ids: Sequence[str] | None = None,
                   readings: Sequence[InputOptions | None] | None = None) -> np.ndarray:
    """bool[m]: which of these documents are gone since they were signed (see the module docstring).

    Args:
        locations: the documents' recorded locations (``Document.path``; ``""`` for one signed from memory).
        mtimes_ns: int64[m], the modification time recorded for each (None: unknown, every file is re-read).
        content_hashes: uint64[m], the content hash recorded for each (None: only missing files count).
        ids: the documents' ids, and ``readings``: how their store's runs read records (None where unknown): a
            record of a changed file whose ids are named by a field is found by its id.
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
        named = np.zeros(count, bool)
        if ids is not None and readings is not None:
            named[changed] = [_names_records(readings[row]) and "#" in locations[row] for row in changed.tolist()]
        for rows in _by_file(files, np.flatnonzero(named)):
            gone[rows] = _not_found_by_id(files[rows[0]], readings[rows[0]], [ids[row] for row in rows],  # type: ignore[index]
                                          hashes[rows])
        at_places = changed[~named[changed]]
        try:
            gone[at_places] = _unread(locations, hashes, at_places)
        except InputError:  # one file cannot be read now: the others are still told apart, file by file
            for rows in _by_file(files, at_places):
                try:
                    gone[rows] = _unread(locations, hashes, rows)
                except InputError:
                    pass
    return gone


def _by_file(files: Sequence[str], rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` (int64) grouped by their file, each group ascending."""
    grouped: dict[str, list[int]] = {}
    for row in rows.tolist():
        grouped.setdefault(files[row], []).append(row)
    return [np.array(group, np.int64) for group in grouped.values()]


def _names_records(reading: InputOptions | None) -> bool:
    """Whether records read so are named by a field (an id of their own, not their place)."""
    return reading is not None and (reading.id_field is not None or reading.id_column is not None
                                    or reading.input_format == "sets")


def _not_found_by_id(file: str, reading: InputOptions | None, ids: Sequence[str], hashes: np.ndarray) -> np.ndarray:
    """bool[len(ids)]: which of these records the file (read whole, as the store's runs read it) no longer holds
    with the recorded content hash. A file that cannot be read now tells nothing: none is gone."""
    from dedup_cli.inputs.reading import read_inputs  # only a changed file of named records needs it

    assert reading is not None
    found: dict[str, int] = {}
    try:
        for document in read_inputs([path_of_location(file)], reading, ReadReport()):
            found.setdefault(document.id, document.content_hash)
    except (InputError, OSError):
        return np.zeros(len(ids), bool)
    return np.array([found.get(identifier) != int(content_hash)
                     for identifier, content_hash in zip(ids, hashes.tolist(), strict=True)], bool)


def _unread(locations: Sequence[str], content_hashes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """bool[len(rows)]: which documents ``rows`` no longer read as the text they were signed from."""
    texts = reread_documents([locations[row] for row in rows.tolist()], content_hashes[rows].tolist())
    return np.fromiter((text is None for text in texts), dtype=bool, count=rows.size)
