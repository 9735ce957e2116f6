"""The Parquet signature store: one row per document, parameters in the file metadata, atomic writes.

Columns: ``id`` (string, unique, ascending), ``path`` (where the document was read, for verification),
``size``, ``mtime_ns`` and ``content_hash`` (xxh3-64 of the raw bytes; for incremental runs), ``shingle_count``
(f, the exact number of distinct shingles; 0 marks a document with no shingle) and ``signature`` (the k
minwise values, lowest ``bits`` bits each, packed by :func:`dedup_cli.signatures.pack_values`). The key
``dedup`` of the file metadata holds JSON: the format version and every :class:`SignatureParams` field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli import __version__
from dedup_cli.errors import StoreError
from dedup_cli.signatures import SignatureParams, lowest_bits, unpack_values

FORMAT_VERSION = 1
METADATA_KEY = b"dedup"


def store_schema(params: SignatureParams) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.string()),
            ("path", pa.string()),
            ("size", pa.int64()),
            ("mtime_ns", pa.int64()),
            ("content_hash", pa.uint64()),
            ("shingle_count", pa.int64()),
            ("signature", pa.binary(params.signature_bytes)),
        ],
        metadata={
            METADATA_KEY: json.dumps(
                {"format_version": FORMAT_VERSION, "dedup_version": __version__, "params": params.to_dict()}
            ).encode()
        },
    )


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


class StoreWriter:
    """Write a store to a temporary file beside ``path`` and rename it into place only on success.

    An existing store at ``path`` is untouched until the final rename, so an interrupted or failed run
    leaves it as it was.
    """

    def __init__(self, path: str | os.PathLike[str], params: SignatureParams) -> None:
        self.path = Path(path)
        self.params = params
        self.schema = store_schema(params)
        self.temp_path = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._writer: pq.ParquetWriter | None = None
        self.rows_written = 0

    def __enter__(self) -> StoreWriter:
        try:
            self._writer = pq.ParquetWriter(self.temp_path, self.schema, compression="zstd")
        except OSError as error:
            raise StoreError(f"cannot write {self.path}: {error.strerror or error}") from error
        return self

    def write(self, batch: DocumentBatch) -> None:
        assert self._writer is not None, "use StoreWriter as a context manager"
        count = len(batch.ids)
        signatures = np.ascontiguousarray(batch.signatures, dtype=np.uint8)
        signature_array = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(self.params.signature_bytes), count, [None, pa.py_buffer(signatures.tobytes())]
        )
        table = pa.Table.from_arrays(
            [
                pa.array(batch.ids, pa.string()),
                pa.array(batch.paths, pa.string()),
                pa.array(batch.sizes, pa.int64()),
                pa.array(batch.mtimes_ns, pa.int64()),
                pa.array(batch.content_hashes, pa.uint64()),
                pa.array(batch.shingle_counts, pa.int64()),
                signature_array,
            ],
            schema=self.schema,
        )
        self._writer.write_table(table)
        self.rows_written += count

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        assert self._writer is not None
        try:
            self._writer.close()
            if kind is None:
                with open(self.temp_path, "rb") as written:
                    os.fsync(written.fileno())
                os.replace(self.temp_path, self.path)
        except OSError as failure:
            if kind is None:
                raise StoreError(f"cannot write {self.path}: {failure.strerror or failure}") from failure
        finally:
            if self.temp_path.exists():
                self.temp_path.unlink()


@dataclass
class StoredSignatures:
    """A store read into memory: ids in ascending order, packed signatures and their parameters."""

    params: SignatureParams
    ids: list[str]
    paths: list[str]
    shingle_counts: np.ndarray  # int64[n_docs]
    packed: np.ndarray  # uint8[n_docs, signature_bytes]
    content_hashes: np.ndarray | None = None  # uint64[n_docs], xxh3-64 of the bytes that were signed

    def __len__(self) -> int:
        return len(self.ids)

    def values(self, bits: int | None = None) -> np.ndarray:
        """The stored minwise values, or only their lowest ``bits`` bits: uint[n_docs, k]."""
        values = unpack_values(self.packed, self.params.bits, self.params.num_perm)
        return values if bits is None else lowest_bits(values, bits)


def _parse_metadata(path: Path, metadata: dict[bytes, bytes] | None) -> SignatureParams:
    if not metadata or METADATA_KEY not in metadata:
        raise StoreError(f"{path} is a Parquet file but not a dedup store; create one with: dedup sign INPUT -o {path}")
    try:
        header: dict[str, Any] = json.loads(metadata[METADATA_KEY])
        version = int(header["format_version"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again") from error
    if version > FORMAT_VERSION:
        raise StoreError(
            f"{path} uses store format {version}, newer than this dedup ({__version__}) reads "
            f"(format {FORMAT_VERSION}); upgrade dedup"
        )
    try:
        return SignatureParams.from_dict(header["params"])
    except (ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} has damaged dedup metadata ({error}); sign the corpus again") from error


def _one_line(error: BaseException) -> str:
    """Arrow's messages can span lines; a StoreError is one line (errors.py)."""
    return " ".join(str(error).split())


def _open_parquet(path: Path) -> pq.ParquetFile:
    if not path.exists():
        raise StoreError(f"store {path} does not exist; create it with: dedup sign INPUT -o {path}")
    if path.is_dir():
        raise StoreError(f"store {path} is a directory; pass the .parquet file written by dedup sign")
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise StoreError(
            f"{path} is not a readable Parquet file ({_one_line(error)}); pass a store written by dedup sign"
        ) from error


def read_store_params(path: str | os.PathLike[str]) -> SignatureParams:
    """The parameters of the store at ``path``, reading only its footer."""
    path = Path(path)
    return _parse_metadata(path, _open_parquet(path).schema_arrow.metadata)


def read_store(path: str | os.PathLike[str]) -> StoredSignatures:
    """Read a whole store, checking that it is a dedup store this version understands."""
    path = Path(path)
    parquet = _open_parquet(path)
    params = _parse_metadata(path, parquet.schema_arrow.metadata)
    try:
        table = parquet.read(columns=["id", "path", "content_hash", "shingle_count", "signature"])
    except (pa.ArrowException, OSError) as error:
        raise StoreError(f"{path} is damaged ({_one_line(error)}); sign the corpus again") from error
    signature_column = table.column("signature").combine_chunks()
    if signature_column.type != pa.binary(params.signature_bytes):
        raise StoreError(f"{path}: signature column does not match its parameters; sign the corpus again")
    width = params.signature_bytes
    data = np.frombuffer(signature_column.buffers()[1], dtype=np.uint8)
    offset = signature_column.offset * width
    packed = data[offset : offset + len(signature_column) * width].reshape(len(signature_column), width)
    return StoredSignatures(
        params=params,
        ids=table.column("id").to_pylist(),
        paths=table.column("path").to_pylist(),
        shingle_counts=table.column("shingle_count").to_numpy().astype(np.int64),
        packed=packed,
        content_hashes=table.column("content_hash").to_numpy(),
    )
