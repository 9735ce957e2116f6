"""The single-file (format 1) signature store: round trips, metadata, bad stores and atomic writes.

The directory store (format 2) and its runs are tested in test_incremental_store.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import StoreWriter, read_store_params

from dedup_cli.errors import StoreError
from dedup_cli.minhash.packing import lowest_bits, pack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import FORMAT_VERSION, LEGACY_FORMAT_VERSION, METADATA_KEY, DocumentBatch
from dedup_cli.store.store import read_store


def make_batch(
    rng: np.random.Generator, params: SignatureParams, start: int, count: int
) -> tuple[DocumentBatch, np.ndarray]:
    """A batch of ``count`` documents with ids doc-{start:05d}…, and the full-width values it packs."""
    values = rng.integers(0, 2**64, size=(count, params.num_perm), dtype=np.uint64, endpoint=False)
    batch = DocumentBatch(
        ids=[f"doc-{index:05d}" for index in range(start, start + count)],
        paths=[f"corpus/ünïcode dir/{index}.txt" for index in range(start, start + count)],
        sizes=rng.integers(0, 10**6, size=count, dtype=np.int64),
        mtimes_ns=rng.integers(0, 2**62, size=count, dtype=np.int64),
        content_hashes=rng.integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False),
        shingle_counts=rng.integers(0, 10**5, size=count, dtype=np.int64),
        signatures=pack_values(values, params.bits),
    )
    return batch, values


def write_store(
    path: Path, params: SignatureParams, batch_sizes: tuple[int, ...] = (3, 5), seed: int = 0
) -> list[DocumentBatch]:
    rng = np.random.default_rng(seed)
    batches = []
    start = 0
    with StoreWriter(path, params) as writer:
        for size in batch_sizes:
            batch, _ = make_batch(rng, params, start, size)
            writer.write(batch)
            batches.append(batch)
            start += size
    return batches


# --- round trip --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 2, 8, 13])
def test_round_trip_across_batches(tmp_path: Path, bits: int) -> None:
    params = SignatureParams(num_perm=50, bits=bits, seed=7)  # 50 · 13 bits is not a whole number of bytes
    rng = np.random.default_rng(bits)
    path = tmp_path / "sigs.parquet"
    batches, values = [], []
    with StoreWriter(path, params) as writer:
        for start, count in ((0, 4), (4, 1), (5, 0), (5, 7)):
            batch, full = make_batch(rng, params, start, count)
            writer.write(batch)
            batches.append(batch)
            values.append(full)
        assert writer.rows_written == 12
    store = read_store(path)
    assert store.params == params
    assert len(store) == 12
    assert store.ids == [identifier for batch in batches for identifier in batch.ids]
    assert store.paths == [where for batch in batches for where in batch.paths]
    assert store.shingle_counts.dtype == np.int64
    assert np.array_equal(store.shingle_counts, np.concatenate([batch.shingle_counts for batch in batches]))
    assert store.packed.dtype == np.uint8 and store.packed.shape == (12, params.signature_bytes)
    assert np.array_equal(store.packed, np.concatenate([batch.signatures for batch in batches]))
    expected = lowest_bits(np.concatenate(values), bits)
    assert np.array_equal(store.values(), expected)
    assert np.array_equal(store.values(1), lowest_bits(expected, 1))


def test_round_trip_other_columns(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=16, bits=4)
    path = tmp_path / "sigs.parquet"
    batches = write_store(path, params)
    table = pq.read_table(path)
    assert table.column("size").to_pylist() == [int(v) for b in batches for v in b.sizes]
    assert table.column("mtime_ns").to_pylist() == [int(v) for b in batches for v in b.mtimes_ns]
    assert table.column("content_hash").to_pylist() == [int(v) for b in batches for v in b.content_hashes]
    assert pq.ParquetFile(path).metadata.num_row_groups == 2  # one per written batch


def test_empty_store_round_trip(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=16, bits=8)
    path = tmp_path / "empty.parquet"
    with StoreWriter(path, params):
        pass
    store = read_store(path)
    assert len(store) == 0 and store.packed.shape == (0, 16)
    assert store.values().shape == (0, 16)


def test_metadata_holds_format_version_and_params(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=64, bits=2, seed=99, shingle_size=3, shingle_unit="char")
    path = tmp_path / "sigs.parquet"
    write_store(path, params)
    header = json.loads(pq.read_schema(path).metadata[METADATA_KEY])
    # StoreWriter writes the single-file layout (format 1); directory stores are format 2.
    assert header["format_version"] == LEGACY_FORMAT_VERSION == 1 and FORMAT_VERSION == 2
    assert header["params"] == params.to_dict()
    assert "dedup_version" in header
    assert read_store_params(path) == params


def test_read_store_params_reads_only_the_footer(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=32, bits=8)
    path = tmp_path / "sigs.parquet"
    write_store(path, params, batch_sizes=(40,))
    # Parquet: "PAR1", column chunks, footer, footer length (4 bytes), "PAR1". Overwrite everything before
    # the footer: only a reader of the footer alone still succeeds.
    data = bytearray(path.read_bytes())
    (footer_length,) = struct.unpack("<I", data[-8:-4])
    data_end = len(data) - 8 - footer_length
    data[4:data_end] = b"\xa5" * (data_end - 4)
    path.write_bytes(bytes(data))
    assert read_store_params(path) == params
    assert "damaged" in _store_error(path)


# --- bad stores --------------------------------------------------------------------------------------------


def _store_error(path: Path, reader=read_store) -> str:
    with pytest.raises(StoreError) as caught:
        reader(path)
    message = str(caught.value)
    assert str(path) in message
    assert "\n" not in message  # one line, as errors.py promises, even when Arrow's own message is not
    return message


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_missing_store(tmp_path: Path, reader) -> None:
    message = _store_error(tmp_path / "nowhere.parquet", reader)
    assert "does not exist" in message and "dedup sign" in message


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_directory_instead_of_store(tmp_path: Path, reader) -> None:
    message = _store_error(tmp_path, reader)
    assert "is a directory" in message


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_not_a_parquet_file(tmp_path: Path, reader) -> None:
    path = tmp_path / "random.parquet"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, size=4096, dtype=np.uint8).tobytes())
    message = _store_error(path, reader)
    assert "not a readable Parquet file" in message


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_empty_file(tmp_path: Path, reader) -> None:
    path = tmp_path / "empty.parquet"
    path.write_bytes(b"")
    assert "not a readable Parquet file" in _store_error(path, reader)


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_truncated_store(tmp_path: Path, reader) -> None:
    path = tmp_path / "sigs.parquet"
    write_store(path, SignatureParams(num_perm=64, bits=8), batch_sizes=(50, 50))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "not a readable Parquet file" in _store_error(path, reader)


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_foreign_parquet_file(tmp_path: Path, reader) -> None:
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "n": [1, 2]}), path)
    message = _store_error(path, reader)
    assert "not a dedup store" in message and "dedup sign" in message


def _rewrite_metadata(path: Path, header: bytes) -> None:
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: header}), path)


@pytest.mark.parametrize("reader", [read_store, read_store_params])
def test_newer_format_version_asks_to_upgrade(tmp_path: Path, reader) -> None:
    path = tmp_path / "future.parquet"
    params = SignatureParams(num_perm=16, bits=8)
    write_store(path, params)
    header = json.loads(pq.read_schema(path).metadata[METADATA_KEY])
    header["format_version"] = 999
    _rewrite_metadata(path, json.dumps(header).encode())
    message = _store_error(path, reader)
    assert "999" in message and "upgrade" in message


@pytest.mark.parametrize(
    "header",
    [b"{not json", b'{"params": {}}', b'{"format_version": 1, "params": {"num_perm": 0}}', b'{"format_version": 1}'],
    ids=["not-json", "no-version", "bad-params", "no-params"],
)
def test_damaged_metadata(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "damaged.parquet"
    write_store(path, SignatureParams(num_perm=16, bits=8))
    _rewrite_metadata(path, header)
    assert "damaged dedup metadata" in _store_error(path)


def test_signature_width_disagreeing_with_params(tmp_path: Path) -> None:
    path = tmp_path / "sigs.parquet"
    write_store(path, SignatureParams(num_perm=16, bits=8))
    header = json.loads(pq.read_schema(path).metadata[METADATA_KEY])
    header["params"]["num_perm"] = 32
    _rewrite_metadata(path, json.dumps(header).encode())
    assert "does not match its parameters" in _store_error(path)


def test_writing_into_a_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "sigs.parquet"
    with pytest.raises(StoreError, match="cannot write"):
        with StoreWriter(path, SignatureParams(num_perm=16, bits=8)):
            pass
    assert not (tmp_path / "no").exists()


# --- atomic writes -----------------------------------------------------------------------------------------


def test_failure_inside_the_writer_leaves_the_existing_store(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=32, bits=4)
    path = tmp_path / "sigs.parquet"
    write_store(path, params, seed=1)
    before = path.read_bytes()
    rng = np.random.default_rng(2)
    with pytest.raises(RuntimeError, match="interrupted"):
        with StoreWriter(path, params) as writer:
            writer.write(make_batch(rng, params, 0, 20)[0])
            assert path.read_bytes() == before  # nothing touches the store before the final rename
            raise RuntimeError("interrupted")
    assert path.read_bytes() == before
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["sigs.parquet"]


def test_failure_without_an_existing_store_leaves_nothing(tmp_path: Path) -> None:
    params = SignatureParams(num_perm=32, bits=4)
    with pytest.raises(KeyboardInterrupt):
        with StoreWriter(tmp_path / "sigs.parquet", params) as writer:
            writer.write(make_batch(np.random.default_rng(3), params, 0, 5)[0])
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_successful_write_replaces_the_store(tmp_path: Path) -> None:
    path = tmp_path / "sigs.parquet"
    write_store(path, SignatureParams(num_perm=32, bits=4), batch_sizes=(9,), seed=1)
    new_params = SignatureParams(num_perm=64, bits=13)
    batches = write_store(path, new_params, batch_sizes=(2, 3), seed=4)
    store = read_store(path)
    assert store.params == new_params
    assert store.ids == batches[0].ids + batches[1].ids
    assert np.array_equal(store.packed, np.concatenate([batch.signatures for batch in batches]))
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["sigs.parquet"]
