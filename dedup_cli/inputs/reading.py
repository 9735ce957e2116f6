"""Reading inputs: every format, one document at a time, with duplicate ids and change detection.

Formats (:data:`dedup_cli.options.INPUT_FORMATS`): ``text`` (a file is one document), ``lines`` (each
non-blank line is one document), ``jsonl`` (each line is a JSON object whose ``text_field`` holds the text),
``parquet`` (each row; its ``text_column`` holds the text), ``sets`` (integer sets, one a line). How inputs
are found and named is :mod:`dedup_cli.inputs.discovery`; where each document came from is recorded as a
location (:mod:`dedup_cli.inputs.locations`) so that it can be re-read.
"""

from __future__ import annotations

import os
import stat as stat_module
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from dedup_cli.inputs.discovery import Source, plan_sources
from dedup_cli.inputs.files import read_lines, read_whole
from dedup_cli.inputs.locations import STDIN, location_path
from dedup_cli.inputs.parquet import read_parquet
from dedup_cli.inputs.records import Document, IntegerSet
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.streams import READ_ERRORS, Counted, Position, open_decompressed
from dedup_cli.options.reading import InputOptions

Unchanged = Callable[[str, str, os.stat_result], bool]
"""Told (id, location, stat) of a whole text file before it is read; True skips it as already signed."""


def _over_limit(status: os.stat_result, limit: int | None) -> bool:
    """Whether a plain file is too large, known from ``stat`` alone."""
    return limit is not None and stat_module.S_ISREG(status.st_mode) and status.st_size > limit


def _read_source(source: Source, options: InputOptions, report: ReadReport, stdin: BinaryIO,
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


def _read_source_documents(source: Source, options: InputOptions, report: ReadReport, stdin: BinaryIO,
                           unchanged: Unchanged | None) -> Iterator[tuple[str, Document | IntegerSet]]:
    if source.format == "parquet" and source.compression is not None:
        report.note("unreadable", (source.display, f"Parquet cannot be read through {source.compression} "
                                                   "compression (it compresses its own columns); decompress it"))
        return
    limit = options.max_document_bytes
    try:
        if source.path == STDIN:
            consumed = Counted(stdin)
            if source.format == "text":
                yield from read_whole(consumed, None, source, limit, report)
                report.input_done += consumed.consumed
            else:
                yield from _read_records(consumed, None, source, options, report, consumed.position)
            return
        if source.format == "text" and source.compression is None:
            # The common case, many small plain files: opened directly, without the decompression layer.
            with open(source.path, "rb") as plain:
                plain_status = os.fstat(plain.fileno())
                if (unchanged is not None and not _over_limit(plain_status, limit)
                        and unchanged(source.id, location_path(source.path), plain_status)):
                    report.unchanged += 1
                    return
                yield from read_whole(plain, plain_status, source, limit, report)
            return
        with open_decompressed(source.path, source.compression) as (stream, status, position):
            if (source.format == "text" and unchanged is not None and status is not None and limit is None
                    and unchanged(source.id, location_path(source.path), status)):
                report.unchanged += 1
                return
            if source.format == "text":
                yield from read_whole(stream, status, source, limit, report)
            else:
                yield from _read_records(stream, status, source, options, report, position)
    except READ_ERRORS as error:
        reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
        if source.compression is not None and getattr(error, "errno", None) is None:
            reason = f"damaged {source.compression} data ({reason}); documents before the damage were read"
        report.note("unreadable", (source.display, reason))


def _read_records(stream: Any, status: os.stat_result | None, source: Source, options: InputOptions,
                  report: ReadReport, position: Position) -> Iterator[tuple[str, Document | IntegerSet]]:
    if source.format == "parquet":
        return read_parquet(stream, status, source, options, report)
    return read_lines(stream, status, source, options, report, position)


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
    sources = plan_sources(inputs, options, report, stream)
    return read_sources(sources, options, report, stream, unchanged)


def read_sources(sources: Sequence[Source], options: InputOptions, report: ReadReport,
                 stdin: BinaryIO | None = None, unchanged: Unchanged | None = None) -> Iterator[Document | IntegerSet]:
    """Stream the documents of planned ``sources`` (:func:`dedup_cli.inputs.discovery.plan_sources`), in order;
    a distributed engine reads its share of them with this, as :func:`read_inputs` reads them all."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    report.max_document_bytes = options.max_document_bytes
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
