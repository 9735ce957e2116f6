"""Reading inputs: finding files, stable document ids, and the decoding policy.

Ids are paths relative to the deepest directory that holds every input (for one directory, relative to
it), with ``/`` separators, so a store is the same wherever the corpus is mounted. Directories are walked
recursively in sorted order, hidden entries (names starting with ``.``) and symbolic links to directories
are skipped (no loops). Text is decoded as UTF-8 with invalid bytes replaced; a file with a NUL byte in its
first 8 KiB is treated as binary and skipped.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xxhash

from dedup_cli.arrays import sorted_unique
from dedup_cli.errors import InputError

BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class SourceFile:
    """A file to read and the id its document will have."""

    id: str
    path: str


@dataclass(frozen=True)
class Document:
    """One decoded document and what identifies its bytes."""

    id: str
    path: str
    text: str
    size: int
    mtime_ns: int
    content_hash: int


@dataclass
class ReadReport:
    """What was skipped while reading, for the summary and the exit code."""

    binary: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    bytes_read: int = 0


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


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
    absolute = []
    for name in inputs:
        if not os.path.lexists(name):
            raise InputError(f"input {name} does not exist; check the path")
        absolute.append(os.path.abspath(name))
    root = os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in absolute])
    report = report if report is not None else ReadReport()

    def record_unreadable(error: OSError) -> None:
        report.unreadable.append((str(error.filename), error.strerror or str(error)))

    found: dict[str, SourceFile] = {}
    for path in absolute:
        if not os.path.isdir(path):
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            found[relative] = SourceFile(relative, path)
            continue
        for directory, subdirectories, files in os.walk(path, onerror=record_unreadable):
            subdirectories[:] = sorted(
                d for d in subdirectories
                if not d.startswith(".") and not os.path.islink(os.path.join(directory, d))
            )
            for name in sorted(files):
                if name.startswith("."):
                    continue
                full = os.path.join(directory, name)
                relative = os.path.relpath(full, root).replace(os.sep, "/")
                if include and not _matches(relative, include):
                    continue
                if exclude and _matches(relative, exclude):
                    continue
                found[relative] = SourceFile(relative, full)
    return [found[key] for key in sorted(found)]


def read_documents(files: Sequence[SourceFile], report: ReadReport) -> Iterator[Document]:
    """Decode each file; binary and unreadable files are recorded in ``report`` and skipped."""
    for source in files:
        try:
            with open(source.path, "rb") as handle:
                raw = handle.read()
                stat = os.fstat(handle.fileno())
        except OSError as error:
            report.unreadable.append((source.path, error.strerror or str(error)))
            continue
        report.bytes_read += len(raw)
        if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
            report.binary.append(source.path)
            continue
        yield Document(
            id=source.id,
            path=source.path,
            text=raw.decode("utf-8-sig", errors="replace"),
            size=len(raw),
            mtime_ns=stat.st_mtime_ns,
            content_hash=xxhash.xxh3_64_intdigest(raw),
        )


def read_text(path: str | Path) -> str:
    """Read one document again (for exact verification), with the same decoding policy."""
    try:
        return Path(path).read_bytes().decode("utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from error


@dataclass(frozen=True)
class IntegerSet:
    """One set of integers over a stated universe (e.g. a word as the set of documents containing it)."""

    id: str
    elements: np.ndarray  # uint64[f], sorted, distinct, each < universe
    source: str  # "FILE:LINE"


@dataclass
class SetReadReport:
    """Records skipped while reading set files: ``(FILE:LINE, reason)``."""

    malformed: list[tuple[str, str]] = field(default_factory=list)
    duplicate_ids: list[str] = field(default_factory=list)
    bytes_read: int = 0


def _parse_set_line(line: str, json_lines: bool) -> tuple[str, list[int]]:
    """Parse ``{"id": ..., "elements": [...]}`` or ``id<TAB>int int ...``; raise ValueError when malformed."""
    if json_lines:
        record = json.loads(line)
        if not isinstance(record, dict) or "id" not in record or "elements" not in record:
            raise ValueError('expected an object with "id" and "elements"')
        elements = record["elements"]
        if not isinstance(elements, list) or not all(isinstance(e, int) and not isinstance(e, bool) for e in elements):
            raise ValueError('"elements" must be a list of integers')
        return str(record["id"]), elements
    identifier, separator, rest = line.partition("\t")
    if not separator or not identifier:
        raise ValueError("expected an id, a tab, then integers separated by spaces")
    return identifier, [int(token) for token in rest.split()]


def read_integer_sets(paths: Sequence[str], universe: int, report: SetReadReport) -> Iterator[IntegerSet]:
    """Read sets from JSON Lines or TSV files; malformed lines and repeated ids are skipped and recorded.

    A line is JSON when it starts with ``{``, TSV otherwise, so one reader serves both. Elements must lie
    in [0, universe).
    """
    seen: set[str] = set()
    for path in paths:
        try:
            handle = open(path, encoding="utf-8", errors="replace")
        except OSError as error:
            raise InputError(f"cannot read {path}: {error.strerror or error}") from error
        with handle:
            for number, raw in enumerate(handle, start=1):
                report.bytes_read += len(raw)
                line = raw.strip()
                if not line:
                    continue
                where = f"{path}:{number}"
                try:
                    identifier, elements = _parse_set_line(line, line.startswith("{"))
                    values = sorted_unique(np.array(elements, dtype=np.int64)) if elements else np.empty(0, np.int64)
                except (ValueError, OverflowError) as error:
                    report.malformed.append((where, str(error).split("\n")[0]))
                    continue
                if values.size and (values[0] < 0 or values[-1] >= universe):
                    bad = int(values[0] if values[0] < 0 else values[-1])
                    report.malformed.append((where, f"element {bad} outside the universe [0, {universe})"))
                    continue
                if identifier in seen:
                    report.duplicate_ids.append(where)
                    continue
                seen.add(identifier)
                yield IntegerSet(identifier, values.astype(np.uint64), where)


def reread_set(source: str) -> np.ndarray:
    """The elements of the set recorded at ``FILE:LINE`` (a set store's ``path``), for exact checks."""
    path, _, number = source.rpartition(":")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for current, line in enumerate(handle, start=1):
                if current == int(number):
                    _, elements = _parse_set_line(line.strip(), line.lstrip().startswith("{"))
                    return sorted_unique(np.array(elements, dtype=np.int64))
    except (OSError, ValueError) as error:
        raise InputError(f"cannot re-read the set at {source}: {error}") from error
    raise InputError(f"cannot re-read the set at {source}: the file is shorter now")
