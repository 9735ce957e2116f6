"""The Dask engine's stages one by one: numbered frames against ``Store.read``, candidates against the local
engine's, the planning of sign tasks, by hand and on the cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from distributed import Client
from helpers import StoreWriter

import dedup_cli as dedup
from dedup_cli.candidates.buckets import candidate_pairs as local_candidate_pairs
from dedup_cli.engine.dask import candidates as dask_candidates
from dedup_cli.engine.dask.candidates import BucketLayout, band_rows, bucket_layout, bucket_pair_codes
from dedup_cli.engine.dask.frames import read_documents
from dedup_cli.engine.dask.sign import plan_tasks
from dedup_cli.inputs.locations import Source
from dedup_cli.minhash.packing import pack_values
from dedup_cli.options.engines import EngineOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.pieces import frame_words, packed_to_words, store_pieces, word_columns, words_to_packed
from dedup_cli.store.store import create_store, open_store

REPO = Path(__file__).resolve().parents[2]
PARAMS = SignatureParams(num_perm=64, bits=8)


def batch(ids: list[str], values: np.ndarray, counts: np.ndarray | None = None) -> DocumentBatch:
    n = len(ids)
    return DocumentBatch(ids=ids, paths=[f"/nowhere/{i}" for i in ids], sizes=np.zeros(n, np.int64),
                         mtimes_ns=np.zeros(n, np.int64), content_hashes=np.arange(n, dtype=np.uint64),
                         shingle_counts=np.full(n, 50, np.int64) if counts is None else counts,
                         signatures=pack_values(values, 8))


def frames_of(path: Path, rows_per_piece: int = 7):
    store = open_store(path)
    pieces, removals = store_pieces(store, rows_per_piece)
    return read_documents(store.params, pieces, removals)


def assert_frames_read_like_the_store(path: Path, in_order: bool) -> None:
    frames = frames_of(path)
    expected = open_store(path).read()
    values, names = frames.values.compute(), frames.names.compute()
    assert frames.in_order is in_order and frames.documents == len(expected)
    assert names["id"].tolist() == expected.ids and names["path"].tolist() == expected.paths
    assert np.array_equal(values.index.to_numpy(), np.arange(len(expected)))
    assert np.array_equal(words_to_packed(frame_words(values, frames.words), expected.params.signature_bytes),
                          expected.packed)
    assert np.array_equal(values["run"].to_numpy(), expected.runs)
    assert np.array_equal(names["content_hash"].to_numpy(), expected.content_hashes)
    assert frames.eligible == int(np.count_nonzero(expected.shingle_counts > 0))


def test_documents_are_numbered_by_rank_of_id(client: Client, engine: EngineOptions, tmp_path: Path) -> None:
    # Row groups of 4 rows cut into pieces of 7 or more; run 2 interleaves ids, changes doc-03 and removes doc-05.
    values = np.random.default_rng(1).integers(0, 256, size=(12, 64), dtype=np.uint8)
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        for start in range(0, 10, 4):
            stop = min(start + 4, 10)
            run.write(batch([f"doc-{i:02d}" for i in range(start, stop)], values[start:stop]))
    assert_frames_read_like_the_store(path, in_order=True)
    with open_store(path).begin_run(PARAMS) as run:
        run.write(batch(["doc-03", "doc-10", "doc-01b"], values[[11, 10, 9]], np.array([50, 0, 50])))
        run.remove(["doc-05", "doc-99"])
    assert_frames_read_like_the_store(path, in_order=False)
    legacy = tmp_path / "legacy.parquet"
    with StoreWriter(legacy, PARAMS) as writer:
        writer.write(batch(["a", "b", "c"], values[:3]))
    assert_frames_read_like_the_store(legacy, in_order=True)
    empty = tmp_path / "empty"
    create_store(empty, PARAMS)
    assert frames_of(empty).documents == 0
    assert dedup.find(empty, dedup.FindOptions(engine=engine)).pair_count == 0


def test_band_rows_and_bucket_pairs_by_hand() -> None:
    params = SignatureParams(num_perm=4, bits=8)
    values = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7, 3, 4], [1, 2, 3, 4]], dtype=np.uint8)
    words = packed_to_words(pack_values(values, 8))
    frame = pd.DataFrame({"shingle_count": [5, 5, 5, 0], "w0": words[:, 0]}, index=pd.Index([10, 11, 12, 13]))
    wide = BucketLayout(None, np.dtype(np.uint64), np.dtype(np.int64))
    emitted = band_rows(frame, params, word_columns(4), 2, 0, 2, wide)
    # Document 13 has no shingle; bands of 2 rows: keys pack value 0 | value 1 << 8.
    assert emitted["doc"].tolist() == [10, 11, 12, 10, 11, 12]
    assert emitted["band"].tolist() == [0, 0, 0, 1, 1, 1]
    assert emitted["key"].tolist() == [1 + 2 * 256, 1 + 2 * 256, 7 + 7 * 256, 3 + 4 * 256, 9 + 9 * 256, 3 + 4 * 256]
    codes, cut = bucket_pair_codes(emitted, documents=20, max_bucket=10)
    assert codes["code"].tolist() == [10 * 20 + 11, 10 * 20 + 12] and cut == 0
    # A bucket of three members {1, 4, 9} capped at 2 keeps only the pair of its first two in document order.
    bucket = pd.DataFrame({"band": np.zeros(3, np.int16), "key": np.full(3, 5, np.uint64), "doc": [9, 4, 1]})
    codes, cut = bucket_pair_codes(bucket, documents=10, max_bucket=2)
    assert codes["code"].tolist() == [1 * 10 + 4] and cut == 1
    # Packed: band 1's key 3 + 4·256 goes above bit 16.
    packed = band_rows(frame, params, word_columns(4), 2, 0, 2, BucketLayout(16, np.dtype(np.uint32),
                                                                              np.dtype(np.int32)))
    assert packed["bucket"].tolist()[:2] == [1 + 2 * 256, 1 + 2 * 256]
    assert packed["bucket"].tolist()[3] == (1 << 16) + 3 + 4 * 256


def test_bucket_layout_by_hand() -> None:
    # 35 bands × 3 rows of 8-bit values: 24 key bits + 6 band bits = 30 → uint32 bucket, int32 document.
    layout = bucket_layout(35, 3, 8, 10**6)
    assert (layout.key_bits, layout.bucket_dtype, layout.doc_dtype, layout.row_bytes) == (24, np.uint32, np.int32, 8)
    assert bucket_layout(48, 4, 8, 10**6).row_bytes == 12  # 32 + 6 bits: uint64
    assert bucket_layout(48, 4, 8, 2**31).doc_dtype == np.int64
    assert bucket_layout(35, 3, 2, 10).key_bits == 24  # 2-bit values still take a byte each in band keys
    # 8 rows of 8 bits fill a 64-bit key: separate band and key columns (2 + 8 + 4 bytes).
    assert bucket_layout(25, 8, 8, 10).key_bits is None and bucket_layout(25, 8, 8, 10).row_bytes == 14


@pytest.mark.parametrize(("bands", "rows", "rows_per_round"), [(16, 3, 10**9), (16, 3, 7_000), (6, 10, 10**9)])
def test_candidates_are_the_local_engines(client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          bands: int, rows: int, rows_per_round: int) -> None:
    # 3,000 random documents; 400 share their first 30 values, 50 of those have no shingle; buckets over 100 are
    # cut. 10 rows of 8 bits are 80-bit bands: hashed keys and separate band columns.
    generator = np.random.default_rng(8)
    values = generator.integers(0, 256, size=(3_000, 64), dtype=np.uint8)
    shared = generator.permutation(3_000)[:400]
    values[shared, :30] = values[shared[0], :30]
    values[1:3000:7, :rows] = values[0, :rows]  # and some chance-like collisions in band 0
    counts = np.full(3_000, 50, np.int64)
    counts[shared[:50]] = 0
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        for start in range(0, 3_000, 700):
            stop = min(start + 700, 3_000)
            run.write(batch([f"d{i:05d}" for i in range(start, stop)], values[start:stop], counts[start:stop]))
    expected = local_candidate_pairs(values, bands, rows, counts > 0, 100)
    monkeypatch.setattr(dask_candidates, "ROWS_PER_ROUND", rows_per_round)
    monkeypatch.setattr(dask_candidates, "ROWS_PER_PARTITION", 5_000)
    found = dask_candidates.candidate_pairs(frames_of(path, 500), bands, rows, 100)
    codes = np.sort(found.codes.compute()["code"].to_numpy())
    assert found.rounds == (1 if rows_per_round > 10**8 else 8)  # 7,000 rows a round: 2 bands of 3,000 documents
    assert found.oversized_buckets == expected.oversized_buckets > 0
    expected_codes = expected.first.astype(np.uint64) * np.uint64(3_000) + expected.second.astype(np.uint64)
    assert np.array_equal(codes, expected_codes)


def test_sign_tasks_cut_files_in_order_and_parquet_by_row_groups() -> None:
    def source(name: str, size: int, fmt: str = "text") -> Source:
        return Source(name, f"/in/{name}", name, fmt, None, size)

    sources = [source("a", 40), source("b", 40), source("c", 100), source("d.parquet", 250, "parquet"),
               source("e", 10)]
    tasks = plan_tasks(sources, lambda source: [10, 10, 10, 10, 10], task_bytes=100)
    assert [[s.id for s in task] for task in tasks] == [["a", "b"], ["c"], ["d.parquet"], ["d.parquet"],
                                                        ["d.parquet", "e"]]
    pieces = [s for task in tasks for s in task if s.id == "d.parquet"]
    assert [(p.row_groups, p.first_row, p.size) for p in pieces] == [((0, 2), 0, 100), ((2, 4), 20, 100),
                                                                     ((4, 5), 40, 50)]
    assert [[s.id for s in task] for task in plan_tasks(sources[3:4], lambda source: None, 100)] == [["d.parquet"]]


def test_the_parts_of_one_run_count_once_for_compaction(engine: EngineOptions, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from dedup_cli.engine.dask import sign as dask_sign
    from dedup_cli.store import compaction

    monkeypatch.setattr(dask_sign, "TASK_BYTES", 4_000)
    monkeypatch.setattr(compaction, "MAX_DELTA_FILES", 3)
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO / "sample_corpora" / "devils-dictionary", corpus)
    store = tmp_path / "store"
    for round_ in range(3):
        (corpus / f"new-{round_}.txt").write_text(f"a new entry number {round_} with a few words in it " * 3)
        report = dedup.sign([str(corpus)], store, dedup.SignOptions(engine=engine))
        assert report.run is not None and not report.run.compacted
    manifest = open_store(store).manifest
    assert manifest is not None and len(manifest.parts) > 3  # a part per task, three runs
