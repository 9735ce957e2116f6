"""Whether reading did the job asked of it: a run that read nothing of non-empty inputs, skipped every record of
an input, was given an input that holds nothing (stdin or a file named by itself with no byte, a file of records
with no record) or found no file at all, or was given an option the inputs' format ignores did the wrong job, and
says so rather than succeed (an empty input is allowed where an empty batch is normal: ``allow_empty``).

Skipping a bad record among good ones is the reading's ordinary work (counted and reported); with ``strict`` any
skip is an error. The checks run on a run's :class:`~dedup_cli.inputs.report.ReadReport` once its inputs are read,
before anything is stored or written, so a refused run leaves the store as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from dedup_cli.errors import InputError, OptionError
from dedup_cli.inputs.byte_streams import READ_ERRORS, open_decompressed
from dedup_cli.inputs.json_arrays import array_values
from dedup_cli.inputs.locations import STDIN, STDIN_NAME, display_name
from dedup_cli.inputs.name_formats import format_and_compression
from dedup_cli.inputs.report import ReadReport, emptiness
from dedup_cli.objectstore.urls import absolute
from dedup_cli.options.checks import counted, literal
from dedup_cli.options.input_options import InputOptions

RECORD_OPTIONS = {"id_field": "JSON Lines records", "text_field": "JSON Lines records", "id_column": "Parquet rows",
                  "text_column": "Parquet rows"}
"""The options that say how to read records, and what they apply to: a whole text file is one document, and
ignores them."""

_SKIPPED = {"binary": ("binary file", None), "unreadable": ("unreadable file", None),
            "malformed": ("malformed record", None), "duplicate_ids": ("duplicate id", None),
            "held_elsewhere": ("id stored from another source", "ids stored from another source"),
            "oversized": ("document too large", "documents too large")}

FIRST_RECORD_BYTES = 1 << 20
"""How much of a JSON Lines input is read to name the fields of its first record."""


def check_options_apply(options: InputOptions, report: ReadReport, inputs: Sequence[str]) -> None:
    """Refuse a record option (:data:`RECORD_OPTIONS`) given for inputs that are all whole text files.

    Raises:
        OptionError: such an option was given, and every file the walk found is plain text (stdin, whose
            format the reading may find from its bytes, is not judged here).
    """
    if STDIN in inputs or set(report.formats) != {"text"}:
        return
    defaults = InputOptions()
    for name, applies in RECORD_OPTIONS.items():
        value = getattr(options, name)
        if value != getattr(defaults, name):
            files = counted(report.formats["text"], "input file")
            raise OptionError(name, value, f"{{{name}}} {literal(value)} applies to {applies}, but the {files} are "
                              "plain text (a file is one document), so it would be ignored; leave it out, or name "
                              "the record files (or {input_format} jsonl or parquet)")


def check_reading(report: ReadReport, strict: bool = False, done: str = "nothing was stored",
                  inputs: Sequence[str] | None = None, allow_empty: bool = True) -> None:
    """Refuse a run whose reading did the wrong job: nothing read although inputs were skipped, every record of an
    input skipped, (unless ``allow_empty``) an input of ``inputs`` that held nothing or no file found at all
    (:func:`empty_inputs`), or (``strict``) anything skipped. ``done`` says what the refusal left (for the
    message).

    Raises:
        InputError: naming the input, what was skipped and why (the first reason), and ``done``.
    """
    skipped = report.skipped
    if not skipped:
        if not allow_empty:
            _check_not_empty(report, inputs or (), done)
        return
    wholly = report.wholly_skipped
    if wholly:
        raise InputError(_wholly_skipped(report, wholly) + f"; {done}")
    # A record whose id another source keeps is known to the store, as an unchanged one is: not a failed read.
    if not report.documents and not report.unchanged and report.count("held_elsewhere") < skipped:
        raise InputError(f"no document was read: {_skipped_words(report)} skipped ({_example(report)}); {done}")
    if not allow_empty:
        _check_not_empty(report, inputs or (), done)
    if strict:
        raise InputError(f"{literal(_skipped_words(report))} skipped ({literal(_example(report))}); {{strict}} makes "
                         f"any skip an error; {literal(done)}", options=True)


ALLOW_EMPTY_HINT = "if an empty input is normal for this job, pass {allow_empty}"
"""How a refusal of an empty input ends."""


def empty_inputs(empty: Sequence[tuple[str, str]], records: dict[str, list[int]], failed: set[str],
                 inputs: Sequence[str]) -> list[tuple[str, str]]:
    """The inputs that held nothing, as (name, what) for messages: stdin and the files named in ``inputs`` among
    ``empty`` (those read with no byte: a file found in a folder is a document, if an empty one), and the inputs of
    ``records`` that held no record (entered with none read and none skipped), but those in ``failed`` (binary,
    unreadable: said otherwise)."""
    named = {display_name(absolute(name)) for name in inputs if name != STDIN}
    found = [(name, what) for name, what in empty if name == STDIN_NAME or name in named]
    noted = {name for name, _ in found}
    found += [(name, _no_record(name)) for name, (documents, skipped) in records.items()
              if not documents and not skipped and name not in noted and name not in failed]
    return [("stdin" if name == STDIN_NAME else name, what) for name, what in found]


def refuse_empty(empty: Sequence[tuple[str, str]], done: str) -> None:
    """Refuse a run given the inputs ``empty`` that held nothing (:func:`empty_inputs`), if any.

    Raises:
        InputError: naming the first, what it held and how many others did, ``done`` and the way to allow it.
    """
    if empty:
        name, what = empty[0]
        others = f" (and {counted(len(empty) - 1, 'other input')})" if len(empty) > 1 else ""
        raise InputError(f"{literal(name)} {literal(what)}{others}; {literal(done)}; {ALLOW_EMPTY_HINT}", options=True)


def _no_record(name: str) -> str:
    """What an input of records that held none is: ``is empty (0 bytes)`` when its file is, else ``holds no
    record`` (blank lines, a header row alone, a Parquet file without rows)."""
    try:
        if name != STDIN_NAME and os.stat(name).st_size == 0:
            return emptiness(None)
    except (OSError, ValueError):
        pass
    return "holds no record"


def _check_not_empty(report: ReadReport, inputs: Sequence[str], done: str) -> None:
    """Refuse a run given an input that held nothing (:func:`empty_inputs`), or that found nothing to read.

    Raises:
        InputError: naming the first such input and what it held, ``done`` and the way to allow it.
    """
    failed = {name for name in report.binary} | {name for name, _ in report.unreadable}
    if report.unlisted.get("binary") or report.unlisted.get("unreadable"):
        failed |= set(report.records_by_input)  # not all of them named: judge none by its counts
    refuse_empty(empty_inputs(report.empty_inputs, report.records_by_input, failed, inputs), done)
    if not report.documents and not report.unchanged and not report.skipped:
        where = ", ".join(display_name(name) for name in inputs if name != STDIN) or "the inputs"
        raise InputError(f"no document was read: no file to read was found in {literal(where)}; {literal(done)}; "
                         f"{ALLOW_EMPTY_HINT}", options=True)


def _skipped_words(report: ReadReport) -> str:
    """``1 binary file, 3 malformed records``: what was skipped, by kind."""
    return ", ".join(counted(report.count(kind), *_SKIPPED[kind]) for kind in _SKIPPED if report.count(kind))


def _example(report: ReadReport) -> str:
    """The first input or record skipped, and why."""
    if report.binary:
        return f"e.g. {report.binary[0]} is binary"
    if report.unreadable:
        return "e.g. cannot read {}: {}".format(*report.unreadable[0])
    if report.malformed:
        return "e.g. {}: {}".format(*report.malformed[0])
    if report.duplicate_ids:
        where, identifier = report.duplicate_ids[0]
        return f"e.g. {where}: id {identifier!r} was already read"
    if report.held_elsewhere:
        where, identifier, other = report.held_elsewhere[0]
        return f"e.g. {where}: id {identifier!r} is stored from another source, {other}"
    if report.oversized:
        where, size = report.oversized[0]
        limit = report.max_document_bytes
        return f"e.g. {where}: {size} bytes or more, over the limit of {limit}"
    return "not listed"


def _wholly_skipped(report: ReadReport, names: list[str]) -> str:
    """Every record of ``names[0]`` (and of the others) skipped: how many, the first reason, and the fields its
    first record has when the reason is a missing field."""
    name = names[0]
    records = report.records_by_input[name][1]
    where, reason = next(((where, why) for where, why in report.malformed if _of(where, name)), ("", ""))
    if not where:
        where, reason = next(((where, f"{size} bytes or more, over the limit of {report.max_document_bytes}")
                              for where, size in report.oversized if _of(where, name)), ("", ""))
    others = f" (and of {counted(len(names) - 1, 'other input')})" if len(names) > 1 else ""
    text = f"every record of {name}{others} was skipped: {counted(records, 'record')}" + (
        f", e.g. {where}: {reason}" if where else "")
    fields = _first_record_fields(name) if reason.startswith("no ") else None
    if fields is not None:
        text += f"; its first record has the fields {', '.join(json.dumps(f) for f in fields) or 'none'}"
    return text


def _of(where: str, name: str) -> bool:
    """Whether the location ``where`` (``FILE:LINE``, ``FILE row N``, ``FILE element N``, or the input itself) is
    in the input ``name``."""
    return where == name or where.startswith((name + ":", name + " row ", name + " element "))


def _first_record_fields(name: str) -> list[str] | None:
    """The fields of the first record of the JSON Lines or JSON array input ``name`` (None when stdin, another
    format, or not readable now)."""
    file_format, compression = format_and_compression(name)
    if name == STDIN_NAME or file_format not in ("jsonl", "json"):
        return None
    try:
        if file_format == "json":
            first = array_values(name, {1}).get(1)
            return list(first) if isinstance(first, dict) else None
        with open_decompressed(name, compression) as (stream, _, _):
            head = stream.read(FIRST_RECORD_BYTES)
        line = next(line for line in head.splitlines() if line.strip())
        record = json.loads(line)
    except (*READ_ERRORS, ValueError, StopIteration, RecursionError):
        return None
    return list(record) if isinstance(record, dict) else None
