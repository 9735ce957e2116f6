"""Filtering line inputs (JSON Lines, lines, integer sets): the kept lines copied byte for byte, in order.

Lines are read in batches. When ids are ``FILE:LINE`` (no id field) the lines to check are found from their
numbers, a batch at a time, and only those are decoded; otherwise each line is read as ``sign`` reads it
(:func:`dedup_cli.inputs.files.line_document`) for its id. Blank and malformed lines are never documents, so they
are kept. A record whose id an earlier record of the input already had, or another input holds, is skipped, as
``sign`` skips it (the store holds the first: :meth:`Decisions.repeated`); ``annotate`` keeps it with
``dedup_keep`` false. With ``annotate`` every JSON object gets the three ``dedup_*`` fields, added before its
closing brace so that the rest of the line stays as it was.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, TypeVar

import numpy as np

from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import Prefixed, iter_raw_lines
from dedup_cli.inputs.files import line_document
from dedup_cli.inputs.locations import Source, location_path
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions

LINE_BATCH = 4096
T = TypeVar("T")
ANNOTATION_FIELDS = ("dedup_group", "dedup_keep", "dedup_representative")

Line = tuple[int, bytes, bytes]  # (number from 1, the line as read, its content: see iter_raw_lines)


def filter_lines(stream: Any, source: Source, options: InputOptions, decisions: Decisions, out: BinaryIO,
                 annotate: bool = False, progress: Callable[[], None] | None = None,
                 first_line: int = 1, seen: set[str] | None = None) -> SourceOutcome:
    """Write the lines of ``source`` (its decompressed bytes ``stream``) to keep to ``out``, in order.

    Args:
        stream: the source's bytes, decompressed.
        source: the input, as planned by :func:`dedup_cli.inputs.discovery.plan_sources`.
        options: how its documents were read when signed (id field, text field).
        decisions: what to drop.
        out: where kept lines go.
        annotate: keep every line; add the ``dedup_*`` fields to JSON objects.
        progress: called after each batch of lines.
        first_line: the number of the stream's first line in its file (a part of a file read from a line on).
        seen: the ids read before the stream (a part of a file: those of earlier parts that it repeats), told of
            the ids the stream reads (named ids only: ``FILE:LINE`` ids cannot repeat).
    """
    outcome = SourceOutcome()
    seen = set() if seen is None else seen
    reader = io.BufferedReader(Prefixed(b"", stream), buffer_size=1 << 16)
    write_in_batches(iter_raw_lines(reader, first_line),
                     lambda batch: _filter_batch(batch, source, options, decisions, annotate, outcome, seen),
                     out, progress)
    return outcome


def write_in_batches(items: Iterable[T], filter_batch: Callable[[list[T]], bytes], out: BinaryIO,
                     progress: Callable[[], None] | None = None) -> None:
    """Write ``filter_batch`` of each :data:`LINE_BATCH` items in turn to ``out``, calling ``progress`` after each
    full batch: one record at a time would cost a write and a decision call each."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == LINE_BATCH:
            out.write(filter_batch(batch))
            batch = []
            if progress is not None:
                progress()
    if batch:
        out.write(filter_batch(batch))


def _document(line: Line, source: Source, options: InputOptions) -> Any:
    """The document of a line as ``sign`` read it, or None (blank or malformed: not a document)."""
    number, _, content = line
    if not content or content.isspace():
        return None
    return line_document(content, number, source, options, 0, ReadReport())


def _filter_batch(batch: list[Line], source: Source, options: InputOptions, decisions: Decisions, annotate: bool,
                  outcome: SourceOutcome, seen: set[str]) -> bytes:
    outcome.records += sum(1 for _, _, content in batch if content and not content.isspace())
    documents: list[Any] | None = None
    repeated = np.zeros(len(batch), bool)
    if options.id_field is None and source.format != "sets":  # ids are FILE:LINE: match the numbers
        first = batch[0][0]
        positions = np.full(len(batch), -1, np.int64)
        numbers, found = decisions.numbered(source.id, first, first + len(batch))
        positions[numbers - first] = found
    else:
        documents = [_document(line, source, options) for line in batch]
        ids = [None if document is None else document.id for document in documents]
        repeated = decisions.repeated(ids, seen, location_path(source.path),
                                      [f"{source.display}:{number}" for number, _, _ in batch], outcome)
        positions = decisions.lookup([None if skip else identifier for identifier, skip in
                                      zip(ids, repeated.tolist(), strict=True)])
    dropped = np.zeros(len(batch), bool)
    for index in np.flatnonzero(positions >= 0).tolist():
        document = documents[index] if documents is not None else _document(batch[index], source, options)
        dropped[index] = decisions.settle(outcome, int(positions[index]),
                                          None if document is None else document.content_hash,
                                          f"{source.display}:{batch[index][0]}")
    if annotate:
        values = [(None, False, None) if skip else decisions.annotation(int(position), bool(drop))
                  for position, drop, skip in zip(positions, dropped, repeated, strict=True)]
        return b"".join(_annotated(line, value, source) for line, value in zip(batch, values, strict=True))
    dropped |= repeated
    if not dropped.any():
        return b"".join(raw for _, raw, _ in batch)
    return b"".join(raw for (_, raw, _), drop in zip(batch, dropped, strict=True) if not drop)


def _annotated(line: Line, values: tuple[Any, ...], source: Source) -> bytes:
    """The line with the ``dedup_*`` fields added at the end of its JSON object (other lines as they are)."""
    number, raw, content = line
    if not content.lstrip().startswith(b"{"):
        return raw
    try:
        record = json.loads(content)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(record, dict):
        return raw
    for name in ANNOTATION_FIELDS:
        if name in record:
            raise InputError(literal(f"{source.display}:{number} already has a field {name!r}; ") +
                             "{annotate} would add it again", options=True)
    fields = ", ".join(f"{json.dumps(name)}: {json.dumps(value, ensure_ascii=False)}"
                       for name, value in zip(ANNOTATION_FIELDS, values, strict=True)).encode()
    body = raw.rstrip()
    return body[:-1] + (b", " if record else b"") + fields + b"}" + raw[len(body):]
