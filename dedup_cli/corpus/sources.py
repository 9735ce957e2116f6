"""Filtering one input source into its output, whatever its format: the unit an engine maps over the inputs.

A whole file (one document) is hard-linked (or copied) unless it is dropped; it is read only when it is to be
dropped, to check that its content is still the one signed. Line, CSV, TSV and Parquet files are filtered record by
record (:mod:`dedup_cli.corpus.lines`, :mod:`dedup_cli.corpus.table_filter`, :mod:`dedup_cli.corpus.parquet_filter`),
a JSON array element by element (:mod:`dedup_cli.corpus.array_filter`), and compressed lines and records are written
compressed the same way. A file the store never read (added since signing, or skipped by ``sign``) is copied whole.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, BinaryIO

from dedup_cli.atomic_files import OutputError, open_input
from dedup_cli.corpus.array_filter import filter_array
from dedup_cli.corpus.lines import filter_lines
from dedup_cli.corpus.parquet_filter import filter_parquet
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.corpus.table_filter import filter_table
from dedup_cli.corpus.writers import compressed, link_or_copy, output_file
from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import READ_ERRORS, Counted, open_decompressed, read_capped
from dedup_cli.inputs.delimited import TABLE_FORMATS
from dedup_cli.inputs.files import read_whole
from dedup_cli.inputs.json_arrays import starts_an_array
from dedup_cli.inputs.locations import STDIN, Source
from dedup_cli.inputs.report import ReadReport, emptiness
from dedup_cli.inputs.stdin import stdin_stream
from dedup_cli.options.input_options import InputOptions


@contextmanager
def _opened(source: Source, stdin: Any, data: bytes | None = None) -> Iterator[tuple[Any, Any, Callable[[], int]]]:
    """The source's decompressed bytes, its ``stat`` (None for stdin) and how much of it was consumed; ``data``:
    stdin already read."""
    if source.path != STDIN:
        with open_decompressed(source.path, source.compression) as opened:
            yield opened
        return
    stream = Counted(stdin if data is None else io.BytesIO(data))
    yield stream, None, stream.position


def _whole_file(source: Source, decisions: Decisions, target: str | BinaryIO, stdin: Any,
                annotate: bool) -> SourceOutcome:
    """A file that is one document (or stdin read as one): linked or copied unless dropped (never, to annotate:
    a whole file has no fields to mark)."""
    outcome = SourceOutcome(records=1)
    position = int(decisions.lookup([source.id])[0])
    data = stdin.read() if source.path == STDIN else None
    dropped = False
    if position >= 0:
        content_hash = None
        if decisions.drop[position]:
            with _opened(source, stdin, data) as (stream, status, _):
                document = next(iter(read_whole(stream, status, source, None, ReadReport())), None)
            content_hash = None if document is None else document[1].content_hash
        dropped = decisions.settle(outcome, position, content_hash, source.display)
    if data is not None:
        with output_file(target) as out:
            out.write(b"" if dropped and not annotate else data)
    elif not dropped or annotate:
        link_or_copy(source.path, target)
    return outcome


def _json_file(source: Source, options: InputOptions, decisions: Decisions, target: str | BinaryIO, stdin: Any,
               annotate: bool) -> SourceOutcome:
    """A JSON file: an array of records filtered element by element (:mod:`dedup_cli.corpus.array_filter`); under
    ``auto``, one that starts no array is one document, as ``sign`` read it; under ``json`` it is copied."""
    with _opened(source, stdin) as (stream, _, _):
        data = read_capped(stream, b"", None)
    assert data is not None
    if not starts_an_array(data) and options.input_format != "json" and source.path != STDIN:
        return _whole_file(dataclasses.replace(source, format="text"), decisions, target, stdin, annotate)
    with output_file(target) as out, compressed(out, source.compression) as writer:
        return filter_array(data, source, options, decisions, writer, annotate)


def filter_source(source: Source, decisions: Decisions, options: InputOptions, target: str | BinaryIO,
                  annotate: bool = False, signed: bool = True, stdin: Any = None,
                  progress: Callable[[int], None] | None = None) -> SourceOutcome:
    """Write what to keep of ``source`` to ``target``, in the source's format and compression.

    Args:
        source: one input file, or stdin, as planned by :func:`dedup_cli.inputs.discovery.plan_sources`.
        decisions: what to drop (to annotate: every grouped document).
        options: how the store's sign runs read the documents (formats, id and text fields).
        target: the output file's path (its directory is created), or an open binary stream.
        annotate: keep every record; add the ``dedup_*`` fields to JSON Lines records and Parquet rows.
        signed: False for a file the store never read: copied whole, unread.
        stdin: the binary stream read for the source ``-``.
        progress: told how many bytes of the input (on disk; none for stdin) were just read.

    Raises:
        InputError: the source could not be read to its end.
    """
    done = 0

    def advance(position: Callable[[], int]) -> Callable[[], None]:
        def tick() -> None:
            nonlocal done
            now = position()
            if progress is not None and now > done:
                progress(now - done)
                done = now
        return tick

    try:
        with ExitStack() as opened:
            nothing = None
            if signed and source.path == STDIN:  # compressed or JSON Lines, told as sign told it
                counted = Counted(stdin)
                stdin, source = opened.enter_context(stdin_stream(counted, source, options))
                nothing = None if stdin.peek(1) else emptiness(source.compression, counted.consumed)
            elif source.format in ("text", "json") and source.compression is None and not source.size:
                nothing = emptiness(None)
            if not signed:
                link_or_copy(source.path, target)
                outcome = SourceOutcome(unsigned=[source.display])
            elif source.format == "text":
                outcome = _whole_file(source, decisions, target, stdin, annotate)
            elif source.format == "json":
                outcome = _json_file(source, options, decisions, target, stdin, annotate)
            elif source.format == "parquet":
                with open_input(source.path) as handle, output_file(target) as out:
                    outcome = filter_parquet(handle, source, options, decisions, out, annotate)
            elif source.format in TABLE_FORMATS:
                with (_opened(source, stdin) as (stream, _, position), output_file(target) as out,
                      compressed(out, source.compression) as writer):
                    outcome = filter_table(stream, source, options, decisions, writer, annotate, advance(position))
            else:
                with (_opened(source, stdin) as (stream, _, position), output_file(target) as out,
                      compressed(out, source.compression) as writer):
                    outcome = filter_lines(stream, source, options, decisions, writer, annotate, advance(position))
    except OutputError:
        raise  # the output's failure, reported by the caller with the output's name
    except READ_ERRORS as error:
        raise read_failure(source, error) from error
    if nothing is not None:
        outcome.empty.append((source.display, nothing))
    elif signed and source.format != "text" and not outcome.records:
        outcome.no_record.append(source.display)
    if progress is not None and source.size > done:
        progress(source.size - done)
    return outcome


def read_failure(source: Source, error: BaseException) -> InputError:
    """The error of an input that could not be read to its end (nothing is written then)."""
    reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
    return InputError(f"cannot read {source.display} to its end ({reason}); nothing was written")
