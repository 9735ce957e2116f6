"""The store's file format: names, the Parquet schema of its parts, the row batches runs write, metadata.

Layout (format 2, docs/store-format.md): the store path (e.g. ``sigs.parquet``) is a directory in the
Parquet-dataset convention that pyarrow.dataset, Dask and Spark read; files starting with ``_`` or ``.`` are not
data. It holds ``_dedup_manifest.json`` (the commit point), ``_dedup.lock``, parts ``part-NNNNNN.parquet`` and
removal files ``_removed-NNNNNN.parquet``. Format 1 was a single Parquet file with the parameters in its
metadata; it is still read (:mod:`dedup_cli.store.legacy`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401 - pa.array(ndarray) imports it at first use; a Ctrl-C landing in an import can be lost
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.errors import NotAStore, StoreError
from dedup_cli.options.vocabulary import STORE_LOCK, STORE_MANIFEST, STORE_METADATA_KEY
from dedup_cli.params import SignatureParams
from dedup_cli.version import __version__

FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1
METADATA_KEY = STORE_METADATA_KEY

MANIFEST_NAME = STORE_MANIFEST
LOCK_NAME = STORE_LOCK
# In object storage a file's name also carries the token of the run that wrote it (written once, never renamed).
PART_NAME = re.compile(r"part-\d{6,}(?:-[0-9a-f]{8,})?\.parquet")
REMOVAL_NAME = re.compile(r"_removed-\d{6,}(?:-[0-9a-f]{8,})?\.parquet")
# A temporary file; parts written by a distributed run's tasks carry the run's token (and an attempt's) too.
TEMPORARY_NAME = re.compile(
    r"\.(part-\d{6,}\.parquet|_removed-\d{6,}\.parquet|_dedup_manifest\.json)(\.[0-9a-f]+)?\.tmp")

LIVE_ROW_RULE = (
    "per id, the row with the highest run wins; it is live unless a removal of that id has a higher run"
)

# Compaction policy and file sizes (module constants so that tests can make them small).
PART_COLUMNS = ("id", "path", "size", "mtime_ns", "content_hash", "shingle_count", "signature", "run")


def store_schema(params: SignatureParams, format_version: int = LEGACY_FORMAT_VERSION) -> pa.Schema:
    """The Arrow schema of a single-file store (format 1), or with ``FORMAT_VERSION`` of a part (with ``run``)."""
    columns = [
        ("id", pa.string()),
        ("path", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("content_hash", pa.uint64()),
        ("shingle_count", pa.int64()),
        ("signature", pa.binary(params.signature_bytes)),
    ]
    if format_version >= 2:
        columns.append(("run", pa.int64()))
    header = {"format_version": format_version, "dedup_version": __version__, "params": params.to_dict()}
    return pa.schema(columns, metadata={METADATA_KEY: json.dumps(header).encode()})


def part_schema(params: SignatureParams) -> pa.Schema:
    """The Arrow schema of a format 2 part: the format 1 columns and ``run``."""
    return store_schema(params, FORMAT_VERSION)


@dataclass
class DocumentBatch:
    """Signed documents ready to be written; arrays are aligned by row."""

    ids: list[str]
    paths: list[str]
    sizes: np.ndarray  # int64[n]
    mtimes_ns: np.ndarray  # int64[n]
    content_hashes: np.ndarray  # uint64[n]
    shingle_counts: np.ndarray  # int64[n]
    signatures: np.ndarray  # uint8[n, signature_bytes]

    def take(self, rows: list[int]) -> DocumentBatch:
        """The batch of ``rows`` (positions, in the order given); itself when that is every row."""
        if len(rows) == len(self.ids):
            return self
        positions = np.asarray(rows, dtype=np.int64)
        return DocumentBatch([self.ids[row] for row in rows], [self.paths[row] for row in rows],
                             self.sizes[positions], self.mtimes_ns[positions], self.content_hashes[positions],
                             self.shingle_counts[positions], self.signatures[positions])


def batch_table(batch: DocumentBatch, params: SignatureParams, schema: pa.Schema, run: int | None) -> pa.Table:
    count = len(batch.ids)
    signatures = np.ascontiguousarray(batch.signatures, dtype=np.uint8)
    if signatures.shape != (count, params.signature_bytes):
        raise ValueError(
            f"signatures are uint8{list(signatures.shape)}; {count} documents at these parameters need "
            f"uint8[{count}, {params.signature_bytes}]"
        )
    signature_array = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(params.signature_bytes), count, [None, pa.py_buffer(signatures.tobytes())]
    )
    arrays = [
        pa.array(batch.ids, pa.string()),
        pa.array(batch.paths, pa.string()),
        pa.array(batch.sizes, pa.int64()),
        pa.array(batch.mtimes_ns, pa.int64()),
        pa.array(batch.content_hashes, pa.uint64()),
        pa.array(batch.shingle_counts, pa.int64()),
        signature_array,
    ]
    if run is not None:
        arrays.append(pa.array(np.full(count, run, dtype=np.int64)))
    return pa.Table.from_arrays(arrays, schema=schema)


def one_line(error: BaseException) -> str:
    """Arrow's messages can span lines; a StoreError is one line (errors.py)."""
    return " ".join(str(error).split())


def parse_metadata(path: object, metadata: dict[bytes, bytes] | None) -> tuple[int, SignatureParams]:
    if not metadata or METADATA_KEY not in metadata:
        raise NotAStore(str(path), f"{path} is a Parquet file but not a dedup store")
    try:
        header: dict[str, Any] = json.loads(metadata[METADATA_KEY])
        version = int(header["format_version"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again into a new "
                         "store") from error
    if version > FORMAT_VERSION:
        raise StoreError(
            f"{path} uses store format {version}, newer than this dedup ({__version__}) reads "
            f"(format {FORMAT_VERSION}); upgrade dedup"
        )
    try:
        return version, SignatureParams.from_dict(header["params"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again into a new "
                         "store") from error


def open_parquet(path: Path) -> pq.ParquetFile:
    """A single-file store (format 1) opened for reading, its pages' checksums verified when it has them."""
    try:
        return pq.ParquetFile(path, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as error:
        problem = f"{path} is not a readable Parquet file ({one_line(error)})"
        if not _parquet_magic(path):  # not a damaged store: another kind of file, maybe a corpus
            raise NotAStore(path, problem) from error
        raise StoreError(f"{problem}; pass a store written by dedup sign") from error


def _parquet_magic(path: Path) -> bool:
    """Whether the file begins as every Parquet file does (``PAR1``)."""
    try:
        with open(path, "rb") as stream:
            return stream.read(4) == b"PAR1"
    except OSError:
        return False


def column_problem(schema: pa.Schema, removal: bool = False, legacy: bool = False) -> str | None:
    """What keeps a Parquet file of ``schema`` from being a part (or a removal file, or a format 1 store) that
    dedup wrote, in words (a column missing, or of another type); None when nothing does. The signature's width
    is checked against the parameters where signatures are read."""
    expected = REMOVAL_COLUMN_TYPES if removal else PART_COLUMN_TYPES
    for name, wanted in expected.items():
        if legacy and name == "run":
            continue
        index = schema.get_field_index(name)
        if index < 0:
            if schema.get_all_field_indices(name):
                return f"it has two columns {name!r}"
            return f"it has no column {name!r} (its columns: {', '.join(schema.names) or 'none'})"
        found = schema.field(index).type
        if isinstance(wanted, pa.DataType) and found != wanted:
            return f"its column {name!r} is {found}, not {wanted}"
        if not isinstance(wanted, pa.DataType) and not wanted(found):
            return f"its column {name!r} is {found}, not fixed-size binary"
    return None


def integer_dtype(arrow_type: pa.DataType) -> np.dtype:
    """The numpy dtype of an Arrow integer type, from its width and sign (``to_pandas_dtype`` imports pandas in
    some pyarrow versions, and fails where pandas is missing)."""
    return np.dtype(f"{'int' if pa.types.is_signed_integer(arrow_type) else 'uint'}{arrow_type.bit_width}")


def integers(column: pa.ChunkedArray | pa.Array, dtype: np.dtype | type = np.int64) -> np.ndarray:
    """``dtype``[n] (int64 unless told) of an integer column without nulls, read from Arrow's buffers
    (``to_numpy`` imports pandas, a fifth of a second, the first time it is called in a process)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        if chunk.null_count or not pa.types.is_integer(chunk.type):
            parts.append(chunk.to_numpy(zero_copy_only=False).astype(dtype))  # not a column a store writes
            continue
        stored = integer_dtype(chunk.type)
        parts.append(np.frombuffer(chunk.buffers()[1], dtype=stored, count=len(chunk),
                                   offset=chunk.offset * stored.itemsize))
    if not parts:
        return np.empty(0, dtype)
    # A copy, owned and writable (the buffers are Arrow's, read-only).
    return np.concatenate(parts).astype(dtype, copy=False) if len(parts) > 1 else parts[0].astype(dtype)


def int64_array(values: np.ndarray) -> pa.Array:
    """``values`` as an Arrow int64 array over the same memory (``pa.array`` of a numpy array imports pandas)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])


def packed_signatures(column: pa.ChunkedArray | pa.Array, params: SignatureParams, path: object) -> np.ndarray:
    """uint8[n, signature_bytes], a view of the Arrow buffer."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type != pa.binary(params.signature_bytes):
        raise StoreError(f"{path}: signature column does not match its parameters; sign the corpus again into a "
                         "new store")
    width = params.signature_bytes
    if len(column) == 0:
        return np.empty((0, width), dtype=np.uint8)
    data = np.frombuffer(column.buffers()[1], dtype=np.uint8)
    offset = column.offset * width
    return data[offset : offset + len(column) * width].reshape(len(column), width)


PART_COLUMN_TYPES: dict[str, Any] = {
    "id": pa.string(), "path": pa.string(), "size": pa.int64(), "mtime_ns": pa.int64(), "content_hash": pa.uint64(),
    "shingle_count": pa.int64(), "signature": pa.types.is_fixed_size_binary, "run": pa.int64(),
}
REMOVAL_COLUMN_TYPES: dict[str, Any] = {"id": pa.string(), "run": pa.int64()}


def removal_schema() -> pa.Schema:
    return pa.schema([("id", pa.string()), ("run", pa.int64())])
