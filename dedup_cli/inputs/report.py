"""What reading did: the documents and bytes read, and every input skipped or repaired, for the summary.

One report serves every input format, text and integer sets alike; ``dedup_cli.cli.summaries`` words it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LISTED = 1000
"""How many items of each kind a :class:`ReadReport` lists; beyond that it only counts them."""


def emptiness(compression: str | None, size_on_disk: int = 0) -> str:
    """What an input with no byte to read is, for messages: ``is empty (0 bytes)``, or for compressed data that
    decompresses to nothing ``is empty (gzip data that decompresses to nothing)``."""
    if compression is None or not size_on_disk:
        return "is empty (0 bytes)"
    return f"is empty ({compression} data that decompresses to nothing)"


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
    # (location, id, where the store's copy was read): the id is stored from another source, which keeps it
    held_elsewhere: list[tuple[str, str, str]] = field(default_factory=list)
    oversized: list[tuple[str, int]] = field(default_factory=list)  # (location, bytes: at least this many)
    invalid_utf8: list[str] = field(default_factory=list)  # read, with U+FFFD for the invalid bytes
    # (name, what: :func:`emptiness`): stdin, and every whole file, that held no byte. An empty file among others is
    # a document with no shingle; stdin, or a file named by itself, that held nothing is a run that did the wrong
    # job (:func:`dedup_cli.inputs.skips.check_reading`).
    empty_inputs: list[tuple[str, str]] = field(default_factory=list)
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
    # Per input of records (lines, JSON Lines, Parquet, sets; stdin too), by its name in messages: [records read
    # as documents, records skipped]: an input whose every record was skipped, or that held none (each is entered
    # when it is planned), is a run that did the wrong job.
    records_by_input: dict[str, list[int]] = field(default_factory=dict)
    # The files the walk found, by the format they are read in (text, jsonl, parquet, ...); stdin is not counted.
    formats: dict[str, int] = field(default_factory=dict)
    # The dedup stores the walk found among the inputs and left out (directories, or single-file stores), in the
    # order found: a store's files are never documents (:mod:`dedup_cli.inputs.store_folders`).
    stores_left_out: list[str] = field(default_factory=list)

    def leave_out_store(self, name: str) -> None:
        """Note the store ``name`` as left out of the inputs (once)."""
        if name not in self.stores_left_out:
            self.stores_left_out.append(name)

    SKIPPED_KINDS = ("binary", "unreadable", "malformed", "duplicate_ids", "held_elsewhere", "oversized")

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

    LISTED_KINDS = (*SKIPPED_KINDS, "invalid_utf8", "empty_inputs")
    COUNTS = ("bytes_read", "documents", "empty_documents", "blank_lines", "unchanged")
    RECORD_SKIPS = ("malformed", "duplicate_ids", "oversized")  # what skips one record, not a whole input

    def tally_input(self, name: str, documents: int) -> None:
        """Count, for the input ``name``, ``documents`` read and the records this report has skipped so far (a
        task's own report: what reading that task of the input skipped)."""
        skipped = sum(self.count(kind) for kind in self.RECORD_SKIPS)
        counts = self.records_by_input.setdefault(name, [0, 0])
        counts[0] += documents
        counts[1] += skipped

    def merge(self, other: ReadReport) -> None:
        """Add what another reader of part of the inputs saw (one task of a distributed run), listed after ours."""
        for kind in self.LISTED_KINDS:
            for item in getattr(other, kind):
                self.note(kind, item)
            if other.unlisted.get(kind):
                self.unlisted[kind] = self.unlisted.get(kind, 0) + other.unlisted[kind]
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name, (documents, skipped) in other.records_by_input.items():
            counts = self.records_by_input.setdefault(name, [0, 0])
            counts[0] += documents
            counts[1] += skipped
        for file_format, files in other.formats.items():
            self.count_format(file_format, files)

    def count_format(self, file_format: str, files: int = 1) -> None:
        """Count ``files`` more files read in ``file_format`` (fewer, when negative; a format counted to 0 is
        dropped, so that the formats are those read)."""
        files += self.formats.get(file_format, 0)
        if files:
            self.formats[file_format] = files
        else:
            self.formats.pop(file_format, None)

    @property
    def skipped(self) -> int:
        """Inputs skipped for any reason (binary, unreadable, malformed, duplicate id, id stored from another
        source, too large)."""
        return sum(self.count(kind) for kind in self.SKIPPED_KINDS)

    @property
    def wholly_skipped(self) -> list[str]:
        """The inputs of records none of which was read: every record skipped (malformed, too large, ...)."""
        return [name for name, (documents, skipped) in self.records_by_input.items() if not documents and skipped]
