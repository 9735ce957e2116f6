"""Reading inputs: finding files, stable document ids, and the decoding policy.

Ids are paths relative to the deepest directory that holds every input (for one directory, relative to
it), with ``/`` separators, so a store is the same wherever the corpus is mounted. Directories are walked
recursively in sorted order, hidden entries (names starting with ``.``) and symbolic links to directories
are skipped (no loops). Text is decoded as UTF-8 with invalid bytes replaced; a file with a NUL byte in its
first 8 KiB is treated as binary and skipped.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

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
