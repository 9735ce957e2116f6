"""Filtering Parquet inputs: the kept rows of each record batch, written with the input's schema and codec.

Rows are read in batches of every column; a mask from the decisions filters each batch. Ids ``FILE:ROW`` are
matched by row number without reading the row; ids from ``id_column`` by value, a batch at a time. Only the text
of rows to drop is decoded (to check the content hash). With ``annotate``, every row is kept and three columns are
added: ``dedup_group`` (int64, null outside groups), ``dedup_keep`` (bool) and ``dedup_representative`` (string).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.corpus.lines import ANNOTATION_FIELDS
from dedup_cli.corpus.record_decisions import Decisions, SourceOutcome
from dedup_cli.errors import InputError
from dedup_cli.inputs.decoding import decode
from dedup_cli.inputs.locations import Source, location_path
from dedup_cli.inputs.parquet_inputs import check_columns, column_values, row_identifier
from dedup_cli.inputs.records import text_hash
from dedup_cli.options.checks import literal
from dedup_cli.options.input_options import InputOptions

PARQUET_FILTER_ROWS = 1 << 16
ANNOTATION_TYPES = (pa.int64(), pa.bool_(), pa.string())
_CODECS = {"uncompressed": "none", "lz4_raw": "lz4"}


def _codec(parquet: pq.ParquetFile) -> str:
    """The compression of the input's first column chunk, as ``ParquetWriter`` names it (zstd when unknown)."""
    if parquet.metadata.num_row_groups == 0 or parquet.metadata.num_columns == 0:
        return "zstd"
    name = str(parquet.metadata.row_group(0).column(0).compression).lower()
    name = _CODECS.get(name, name)
    return name if name in ("none", "snappy", "gzip", "brotli", "lz4", "zstd") else "zstd"


def _annotated_schema(schema: pa.Schema, source: Source) -> pa.Schema:
    for name, data_type in zip(ANNOTATION_FIELDS, ANNOTATION_TYPES, strict=True):
        if name in schema.names:
            raise InputError(literal(f"{source.display} already has a column {name!r}; ") +
                             "{annotate} would add it again", options=True)
        schema = schema.append(pa.field(name, data_type))
    return schema


def _row_positions(batch: pa.RecordBatch, row: int, source: Source, options: InputOptions,
                   decisions: Decisions, seen: set[str], outcome: SourceOutcome) -> tuple[np.ndarray, np.ndarray]:
    """int64[rows]: the decision of each row of ``batch`` (the rows from ``row`` on), -1 where none; and bool[rows]:
    the rows whose id an earlier row already had (``seen``: the ids read so far; noted in ``outcome``)."""
    if options.id_column is None:
        positions = np.full(batch.num_rows, -1, np.int64)
        numbers, found = decisions.numbered(source.id, row, row + batch.num_rows)
        positions[numbers - row] = found
        return positions, np.zeros(batch.num_rows, bool)
    values = column_values(batch.column(options.id_column))
    ids = [None if value is None else row_identifier(value) for value in values]
    repeated = decisions.repeated(ids, seen, location_path(source.path),
                                  [f"{source.display} row {row + offset}" for offset in range(len(ids))], outcome)
    for offset in np.flatnonzero(repeated).tolist():
        ids[offset] = None
    return decisions.lookup(ids), repeated


def output_schema(parquet: pq.ParquetFile, source: Source, options: InputOptions, annotate: bool) -> pa.Schema:
    """The schema of the output of the Parquet input ``parquet``: its own, with the annotation columns added when
    ``annotate`` (its columns checked first)."""
    check_columns(parquet.schema_arrow, source, options)
    return _annotated_schema(parquet.schema_arrow, source) if annotate else parquet.schema_arrow


def filter_batch(batch: pa.RecordBatch, row: int, source: Source, options: InputOptions, decisions: Decisions,
                 annotate: bool, schema: pa.Schema, outcome: SourceOutcome, seen: set[str]) -> pa.RecordBatch:
    """The rows of ``batch`` (the input's rows from ``row`` on) to keep, or every row annotated; noted in
    ``outcome``. Only the text of rows to drop is decoded, to check its content hash. A row whose id an earlier
    row had (``seen``: the ids read so far) is skipped, as ``sign`` skipped it; annotated, it is kept, not to keep."""
    size = batch.num_rows
    positions, repeated = _row_positions(batch, row, source, options, decisions, seen, outcome)
    hits = np.flatnonzero(positions >= 0)
    texts = column_values(batch.column(options.text_column).take(pa.array(hits, pa.int64())))
    dropped = np.zeros(size, bool)
    for offset, text in zip(hits.tolist(), texts, strict=True):
        content_hash = None if text is None else text_hash(decode(text)[0])
        dropped[offset] = decisions.settle(outcome, int(positions[offset]), content_hash,
                                           f"{source.display} row {row + offset}")
    outcome.records += size
    if annotate:
        values = [(None, False, None) if r else decisions.annotation(int(p), bool(d))
                  for p, d, r in zip(positions, dropped, repeated, strict=True)]
        columns = [pa.array([value[i] for value in values], data_type)
                   for i, data_type in enumerate(ANNOTATION_TYPES)]
        return pa.RecordBatch.from_arrays([*batch.columns, *columns], schema=schema)
    dropped |= repeated
    return batch.filter(pa.array(~dropped)) if dropped.any() else batch


def parquet_writer(out: BinaryIO, parquet: pq.ParquetFile, schema: pa.Schema) -> pq.ParquetWriter:
    """The writer of a filtered copy of ``parquet``: ``schema``, and the codec of its first column chunk."""
    return pq.ParquetWriter(out, schema, compression=_codec(parquet))


def filter_parquet(handle: Any, source: Source, options: InputOptions, decisions: Decisions, out: BinaryIO,
                   annotate: bool = False, progress: Callable[[], None] | None = None) -> SourceOutcome:
    """Write the rows of the Parquet file ``handle`` (``source``) to keep to ``out``, in order, with its schema.

    One row group is written per batch of :data:`PARQUET_FILTER_ROWS` input rows (the batches run across the
    input's row groups), whatever it keeps. Arguments as :func:`dedup_cli.corpus.lines.filter_lines`;
    ``progress`` is called after each batch.
    """
    outcome = SourceOutcome()
    parquet = pq.ParquetFile(handle)
    schema = output_schema(parquet, source, options, annotate)
    row = 0
    seen: set[str] = set()
    with parquet_writer(out, parquet, schema) as writer:
        for batch in parquet.iter_batches(batch_size=PARQUET_FILTER_ROWS, use_threads=False):
            writer.write_batch(filter_batch(batch, row, source, options, decisions, annotate, schema, outcome, seen))
            row += batch.num_rows
            if progress is not None:
                progress()
    return outcome
