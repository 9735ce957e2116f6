"""Reading Parquet inputs: a text column (and an id column) in batches of rows.

Each row is a document; its ``text_column`` holds the text, read in batches of :data:`PARQUET_BATCH_ROWS`
rows (a cell is held with its batch) and handed on in parts (:func:`parquet_rows`) to be turned into documents
where they are signed (:func:`row_documents`). Text cells are decoded like files (UTF-8, invalid bytes
replaced).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.atomic_files import open_input
from dedup_cli.errors import InputError
from dedup_cli.inputs.byte_streams import READ_ERRORS
from dedup_cli.inputs.decoding import decode
from dedup_cli.inputs.locations import Source, record_location
from dedup_cli.inputs.records import Document, make_document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.inputs.store_folders import is_store_file
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions

PARQUET_BATCH_ROWS = 256

_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
               pa.types.is_string_view, pa.types.is_binary_view)


def _value_type(data_type: pa.DataType) -> pa.DataType:
    return data_type.value_type if pa.types.is_dictionary(data_type) else data_type


def check_columns(schema: pa.Schema, source: Source, options: InputOptions) -> None:
    """Stop the run when a named column is missing or of the wrong type: the options are wrong, not the row."""
    names = schema.names
    for column, option in ((options.text_column, "text_column"), (options.id_column, "id_column")):
        if column is None:
            continue
        # Named as the user named it: --text-field (one name for every format), unless a Parquet-only one was given.
        named = option.replace("_column", "_field") if column == getattr(options, option.replace("_column", "_field")) \
            else option
        where = literal(f"column {column!r} of {source.display}")
        if column not in names:
            raise InputError(literal(f"{source.display} has no column {column!r} (its columns: {', '.join(names)}); ")
                             + f"name the column with {{{named}}}", options=True)
        data_type = _value_type(schema.field(column).type)
        text_like = any(test(data_type) for test in _TEXT_TYPES)
        if option == "text_column" and not text_like:
            raise InputError(f"{where} holds {literal(data_type)}, not text; name a string column with "
                             f"{{{named}}}", options=True)
        if option == "id_column" and not (text_like or pa.types.is_integer(data_type)):
            raise InputError(f"{where} holds {literal(data_type)}; ids must be strings or integers; name another "
                             f"column with {{{named}}}", options=True)


def check_parquet(source: Source, options: InputOptions) -> bool:
    """Whether the Parquet file ``source`` is a single-file dedup store (to leave out of the inputs); else stop the
    run when it lacks a named column (:func:`check_columns`). A file that cannot be read is reported later."""
    try:
        with open_input(source.path) as handle:  # a local file, or an object (s3://)
            schema = pq.read_schema(handle)
    except READ_ERRORS:
        return False
    if is_store_file(schema.metadata):
        return True
    check_columns(schema, source, options)
    return False


def column_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of a batch column; strings come as bytes, to decode (and repair) like files."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type) or pa.types.is_string_view(array.type):
        array = array.cast(pa.binary())
    elif pa.types.is_large_string(array.type):
        array = array.cast(pa.large_binary())
    return array.to_pylist()


def row_identifier(value: int | bytes) -> str:
    """The id a row's ``id_column`` value gives (an integer in decimal, a string with bad bytes as ``\\xNN``)."""
    return str(value) if isinstance(value, int) else str(value, "utf-8", "backslashreplace")


@dataclass(frozen=True)
class ParquetRows:
    """Consecutive rows of a Parquet input, as read: the text column (and the id column) from ``first_row``."""

    first_row: int
    texts: pa.ChunkedArray  # one chunk per batch read (the dictionaries of dictionary columns may differ)
    ids: pa.ChunkedArray | None
    position: int  # the file's bytes on disk these rows account for, up to their last row (for progress)


def open_parquet(handle: Any, source: Source, report: ReadReport) -> pq.ParquetFile | None:
    """The Parquet file of an open input, or None when it is not one (noted in ``report``)."""
    try:
        return pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as error:
        report.note("unreadable", (source.display, f"not a readable Parquet file ({' '.join(str(error).split())})"))
        return None


def parquet_rows(parquet: pq.ParquetFile, source: Source, options: InputOptions, rows_per_part: int,
                 bytes_per_part: int) -> Iterator[ParquetRows]:
    """The rows of a Parquet file in parts of about ``rows_per_part`` rows or ``bytes_per_part`` bytes of text.

    Raises :class:`InputError` when a named column is missing.
    """
    check_columns(parquet.schema_arrow, source, options)
    text_column, id_column = options.text_column, options.id_column
    columns = [text_column] if id_column is None or id_column == text_column else [text_column, id_column]
    # A source may stand for some row groups only (a distributed engine's share of a large file).
    groups = range(*source.row_groups) if source.row_groups is not None else range(parquet.num_row_groups)
    total = max(sum(parquet.metadata.row_group(group).num_rows for group in groups), 1)
    first = row = source.first_row
    texts, ids, held = [], [], 0
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=list(groups), columns=columns,
                                      use_threads=False):
        texts.append(batch.column(text_column))
        ids.append(batch.column(id_column) if id_column is not None else None)
        row += batch.num_rows
        held += texts[-1].nbytes
        if row - first >= rows_per_part or held >= bytes_per_part:
            yield _rows(first, texts, ids, source.size * (row - source.first_row) // total)
            first, texts, ids, held = row, [], [], 0
    if texts:
        yield _rows(first, texts, ids, source.size)


def _rows(first: int, texts: list[pa.Array], ids: list[pa.Array | None], position: int) -> ParquetRows:
    return ParquetRows(first, pa.chunked_array(texts), None if ids[0] is None else pa.chunked_array(ids), position)


def _values(column: pa.ChunkedArray) -> list[Any]:
    return [value for chunk in column.chunks for value in column_values(chunk)]


def row_documents(rows: ParquetRows, source: Source, options: InputOptions, mtime_ns: int, report: ReadReport
                  ) -> Iterator[tuple[str, Document]]:
    """(location for messages, document) of each row; null or empty ids, null texts and rows over
    ``max_document_bytes`` are noted in ``report`` instead."""
    text_column, id_column = options.text_column, options.id_column
    limit = options.max_document_bytes
    texts = _values(rows.texts)
    ids = _values(rows.ids) if rows.ids is not None else None
    for offset, raw in enumerate(texts):
        number = rows.first_row + offset
        where = f"{source.display} row {number}"
        if raw is None:
            report.note("malformed", (where, f"{text_column!r} is null"))
            continue
        report.bytes_read += len(raw)
        if limit is not None and len(raw) > limit:
            report.note("oversized", (where, len(raw)))
            continue
        identifier = f"{source.id}:{number}"
        if ids is not None:
            value = ids[offset]
            if value is None:
                report.note("malformed", (where, f"{id_column!r} is null"))
                continue
            identifier = row_identifier(value)
            if not identifier:
                report.note("malformed", (where, f"{id_column!r} is empty"))
                continue
        text, replaced = decode(raw)
        if replaced:
            report.note("invalid_utf8", where)
        location = record_location(source.path, "row", number, text_column)
        yield where, make_document(identifier, location, text, mtime_ns, None if replaced else raw)


def row_group_sizes(source: Source) -> list[int] | None:
    """The rows of each row group of a Parquet source, from its footer; None when it cannot be read."""
    try:
        with open_input(source.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
            return [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
    except (pa.ArrowException, OSError):
        return None
