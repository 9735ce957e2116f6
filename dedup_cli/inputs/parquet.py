"""Reading Parquet inputs: a text column (and an id column) in batches of rows.

Each row is a document; its ``text_column`` holds the text, read in batches of :data:`PARQUET_BATCH_ROWS`
rows (a cell is held with its batch). Text cells are decoded like files (UTF-8, invalid bytes replaced).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.errors import InputError
from dedup_cli.inputs.decoding import decode
from dedup_cli.inputs.locations import Source, record_location
from dedup_cli.inputs.records import Document, make_document
from dedup_cli.inputs.report import ReadReport
from dedup_cli.options.checks import literal
from dedup_cli.options.reading import InputOptions

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
        where = literal(f"column {column!r} of {source.display}")
        if column not in names:
            raise InputError(literal(f"{source.display} has no column {column!r} (its columns: {', '.join(names)}); ")
                             + f"name the column with {{{option}}}", options=True)
        data_type = _value_type(schema.field(column).type)
        text_like = any(test(data_type) for test in _TEXT_TYPES)
        if option == "text_column" and not text_like:
            raise InputError(f"{where} holds {literal(data_type)}, not text; name a string column with "
                             "{text_column}", options=True)
        if option == "id_column" and not (text_like or pa.types.is_integer(data_type)):
            raise InputError(f"{where} holds {literal(data_type)}; ids must be strings or integers; name another "
                             "column with {id_column}", options=True)


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


def read_parquet(handle: Any, status: os.stat_result | None, source: Source, options: InputOptions,
                 report: ReadReport) -> Iterator[tuple[str, Document]]:
    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as error:
        report.note("unreadable", (source.display, f"not a readable Parquet file ({' '.join(str(error).split())})"))
        return
    check_columns(parquet.schema_arrow, source, options)
    text_column, id_column = options.text_column, options.id_column
    columns = [text_column] if id_column is None or id_column == text_column else [text_column, id_column]
    limit = options.max_document_bytes
    mtime_ns = status.st_mtime_ns if status is not None else 0
    groups = range(*source.row_groups) if source.row_groups is not None else range(parquet.num_row_groups)
    row = source.first_row
    start = report.input_done
    rows = max(sum(parquet.metadata.row_group(group).num_rows for group in groups), 1)
    share = source.size  # the part of the file's bytes this source stands for
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=list(groups), columns=columns,
                                      use_threads=False):
        report.input_done = start + share * (row - source.first_row) // rows
        texts = column_values(batch.column(text_column))
        ids = column_values(batch.column(id_column)) if id_column is not None else None
        for offset, raw in enumerate(texts):
            where = f"{source.display} row {row}"
            number, row = row, row + 1
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
        with open(source.path, "rb") as handle:
            metadata = pq.ParquetFile(handle).metadata
            return [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]
    except (pa.ArrowException, OSError):
        return None
