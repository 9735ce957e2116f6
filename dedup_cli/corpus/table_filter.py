"""Filtering CSV and TSV inputs: the header and the kept records copied byte for byte, in order.

Records are found as ``sign`` found them (:func:`dedup_cli.inputs.delimited.iter_raw_records`: in CSV a newline
outside quotes ends one, so a quoted field keeps its newlines; in TSV every newline does) and read in batches. When
ids are ``FILE:N`` the records to check are found from their numbers, a batch at a time, and only those are parsed;
otherwise each record is parsed for its id. Blank and malformed records are never documents, so they are kept, byte
for byte. With ``annotate`` the header gets three columns, ``dedup_group``, ``dedup_keep`` and
``dedup_representative``, and every record their values (empty, ``true``, empty for a record in no group), added
before its line end and written as the format writes a field
(:func:`dedup_cli.inputs.delimited.format_annotations`); a last record left inside an open quote is kept as it is,
since a value added to it would fall inside its quotes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from dedup_cli.corpus.lines import ANNOTATION_FIELDS, write_in_batches
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.errors import InputError
from dedup_cli.inputs.delimited import (
    DELIMITERS,
    format_annotations,
    iter_raw_records,
    parse_header,
    record_content,
    record_document,
)
from dedup_cli.inputs.locations import Source, location_path
from dedup_cli.inputs.records import Document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions

Record = tuple[int, bytes, bool]  # (number: 0 for the header, the record as read with its line end, closed)


def filter_table(stream: Any, source: Source, options: InputOptions, decisions: Decisions, out: BinaryIO,
                 annotate: bool = False, progress: Callable[[], None] | None = None) -> SourceOutcome:
    """Write the header and the records of the CSV or TSV ``source`` (its decompressed bytes ``stream``) to keep to
    ``out``, in order; ``options``: how its documents were read when signed (id and text columns)."""
    outcome = SourceOutcome()
    header: tuple[str, ...] = ()
    seen: set[str] = set()

    def records() -> Iterator[Record]:
        """The records after the header, which is written (and parsed) as it is met: before any record."""
        nonlocal header
        for number, raw, closed in iter_raw_records(stream, source.format):
            if number == 0:
                header = parse_header(raw, source, closed)
                out.write(_annotated_header(raw, header, source) if annotate else raw)
            else:
                yield number, raw, closed

    write_in_batches(records(), lambda batch: _filter_batch(batch, source, header, options, decisions, annotate,
                                                            outcome, seen), out, progress)
    return outcome


def _annotated_header(raw: bytes, header: tuple[str, ...], source: Source) -> bytes:
    for name in ANNOTATION_FIELDS:
        if name in header:
            raise InputError(literal(f"{source.display} already has a column {name!r}; ") +
                             "{annotate} would add it again", options=True)
    content = record_content(raw)
    delimiter = DELIMITERS[source.format]
    return content + (delimiter + delimiter.join(ANNOTATION_FIELDS)).encode() + (raw[len(content):] or b"\n")


def _document(record: Record, source: Source, header: tuple[str, ...], options: InputOptions) -> Document | None:
    """The document of a record as ``sign`` read it, or None (blank or malformed: not a document)."""
    number, raw, closed = record
    content = record_content(raw)
    if not content or content.isspace():
        return None
    return record_document(content, number, source, header, options.text_field, options.id_field, 0, ReadReport(),
                           closed=closed)


def _filter_batch(batch: list[Record], source: Source, header: tuple[str, ...], options: InputOptions,
                  decisions: Decisions, annotate: bool, outcome: SourceOutcome, seen: set[str]) -> bytes:
    outcome.records += sum(1 for _, raw, _ in batch if not record_content(raw).isspace() and record_content(raw))
    documents: list[Document | None] | None = None
    repeated = np.zeros(len(batch), bool)
    if options.id_field is None:  # ids are FILE:N: match the numbers
        first = batch[0][0]
        positions = np.full(len(batch), -1, np.int64)
        numbers, found = decisions.numbered(source.id, first, first + len(batch))
        positions[numbers - first] = found
    else:
        documents = [_document(record, source, header, options) for record in batch]
        ids = [None if document is None else document.id for document in documents]
        # A repeated id (in this input, or held by another) is skipped, as sign skips it.
        repeated = decisions.repeated(ids, seen, location_path(source.path),
                                      [f"{source.display} record {number}" for number, _, _ in batch], outcome)
        positions = decisions.lookup([None if skip else identifier for identifier, skip in
                                      zip(ids, repeated.tolist(), strict=True)])
    dropped = np.zeros(len(batch), bool)
    for index in np.flatnonzero(positions >= 0).tolist():
        document = documents[index] if documents is not None else _document(batch[index], source, header, options)
        dropped[index] = decisions.settle(outcome, int(positions[index]),
                                          None if document is None else document.content_hash,
                                          f"{source.display} record {batch[index][0]}")
    if annotate:
        pieces = []
        for (_, raw, closed), position, drop, skip in zip(batch, positions, dropped, repeated, strict=True):
            content = record_content(raw)
            if not content or content.isspace() or not closed:
                pieces.append(raw)
                continue
            annotation = (None, False, None) if skip else decisions.annotation(int(position), bool(drop))
            values = format_annotations(annotation, source.format)
            pieces.append(content + values + (raw[len(content):] or b"\n"))
        return b"".join(pieces)
    dropped |= repeated
    if not dropped.any():
        return b"".join(raw for _, raw, _ in batch)
    return b"".join(raw for (_, raw, _), drop in zip(batch, dropped, strict=True) if not drop)
