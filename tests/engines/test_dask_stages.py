"""The Dask engine's stages one by one: numbered documents against ``Store.read``, candidates against the local
engine's, the planning of sign tasks, by hand and on the cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import dask
import numpy as np
import pytest
from distributed import Client
from helpers import REPO, StoreWriter

import dedup_cli as dedup
from dedup_cli.candidates.buckets import candidate_pairs as local_candidate_pairs
from dedup_cli.engine.dask import candidates as dask_candidates
from dedup_cli.engine.dask import exchange as dask_exchange
from dedup_cli.engine.dask import id_sort
from dedup_cli.engine.dask.exchange import exchange, joined
from dedup_cli.engine.dask.ranges import name_ranges, value_ranges
from dedup_cli.engine.dask.sign import plan_tasks
from dedup_cli.inputs.locations import Source
from dedup_cli.minhash.packing import pack_values, unpack_words
from dedup_cli.options.engine_choice import EngineOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import create_store, open_store

PARAMS = SignatureParams(num_perm=64, bits=8)


def batch(ids: list[str], values: np.ndarray, counts: np.ndarray | None = None) -> DocumentBatch:
    n = len(ids)
    return DocumentBatch(ids=ids, paths=[f"/nowhere/{i}" for i in ids], sizes=np.zeros(n, np.int64),
                         mtimes_ns=np.zeros(n, np.int64), content_hashes=np.arange(n, dtype=np.uint64),
                         shingle_counts=np.full(n, 50, np.int64) if counts is None else counts,
                         signatures=pack_values(values, 8))


def frames_of(path: Path, rows_per_piece: int = 7):
    return id_sort.store_documents(open_store(path), rows_per_piece)


def assert_frames_read_like_the_store(path: Path, in_order: bool) -> None:
    """Every range of documents, its values (8 bits of 8: the whole signature) and its names, is the store's."""
    frames = frames_of(path)
    expected = open_store(path).read()
    values = [part.compute() for part in value_ranges(frames, 8)]
    names = [part.compute() for part in name_ranges(frames)]
    assert frames.in_order is in_order and frames.documents == len(expected)
    for ranged in (values, names):  # each range holds its own documents, in order
        assert [part["doc"].tolist() for part in ranged] == [
            list(range(low, high)) for low, high in zip(frames.divisions[:-1], [*frames.divisions[1:-1],
                                                                               frames.documents], strict=True)]
    values_joined, names_joined = joined(values), joined(names)
    assert names_joined["id"].tolist() == expected.ids and names_joined["path"].tolist() == expected.paths
    assert np.array_equal(unpack_words(values_joined["words"], 8, PARAMS.num_perm),
                          np.frombuffer(expected.packed.tobytes(), np.uint8).reshape(len(expected), -1))
    assert np.array_equal(values_joined["run"], expected.runs)
    assert np.array_equal(names_joined["content_hash"], expected.content_hashes)
    assert frames.eligible == int(np.count_nonzero(expected.shingle_counts > 0))


@pytest.mark.parametrize("in_driver", [True, False], ids=["numbered-in-the-driver", "numbered-on-the-cluster"])
def test_documents_are_numbered_by_rank_of_id(client: Client, engine: EngineOptions, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, in_driver: bool) -> None:
    if not in_driver:  # a store past what the driver numbers: its ids sorted on the cluster
        monkeypatch.setattr(id_sort, "NUMBERED_IN_DRIVER", 0)
    # Row groups of 4 rows cut into pieces of 7 or more; run 2 interleaves ids, changes doc-03 and removes doc-05.
    values = np.random.default_rng(1).integers(0, 256, size=(12, 64), dtype=np.uint8)
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        for start in range(0, 10, 4):
            stop = min(start + 4, 10)
            run.write(batch([f"doc-{i:02d}" for i in range(start, stop)], values[start:stop]))
    assert_frames_read_like_the_store(path, in_order=in_driver)
    with open_store(path).begin_run(PARAMS) as run:
        run.write(batch(["doc-03", "doc-10", "doc-01b"], values[[11, 10, 9]], np.array([50, 0, 50])))
        run.remove(["doc-05", "doc-99"])
    assert_frames_read_like_the_store(path, in_order=False)
    legacy = tmp_path / "legacy.parquet"
    with StoreWriter(legacy, PARAMS) as writer:
        writer.write(batch(["a", "b", "c"], values[:3]))
    assert_frames_read_like_the_store(legacy, in_order=in_driver)
    empty = tmp_path / "empty"
    create_store(empty, PARAMS)
    assert frames_of(empty).documents == 0
    assert dedup.find(empty, dedup.FindOptions(engine=engine)).pair_count == 0


@pytest.mark.parametrize(("bands", "rows", "band_memory", "share_documents", "in_order", "split_bands"), [
    (16, 3, 1 << 30, 5_000_000, True, False),   # one round, two shares (one per worker)
    (16, 3, 5_000, 5_000_000, True, False),     # a band a round
    (16, 3, 100_000, 700, True, False),         # several shares on each worker, a few bands a round
    (6, 10, 1 << 30, 5_000_000, False, False),  # 80-bit bands: hashed 64-bit keys; out of order: rows numbered
    (16, 3, 100_000, 700, False, False),        # several shares of pieces whose rows are numbered out of order
    (16, 3, 1 << 30, 5_000_000, True, True),    # split by bands: one round, eight bands a worker
    (16, 3, 5_000, 5_000_000, True, True),      # split by bands: a band a worker a round
    (5, 10, 1 << 30, 5_000_000, True, True),    # split by bands, hashed keys, an odd number of bands
    (16, 3, 1 << 30, 5_000_000, False, True),   # out of order: pieces read where they are, rows numbered
])
def test_candidates_are_the_local_engines(client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          bands: int, rows: int, band_memory: int, share_documents: int,
                                          in_order: bool, split_bands: bool) -> None:
    # 3,000 random documents; 400 share their first 30 values, 50 of those have no shingle; buckets over 100 are
    # cut. 10 rows of 8 bits are 80-bit bands: hashed keys.
    generator = np.random.default_rng(8)
    values = generator.integers(0, 256, size=(3_000, 64), dtype=np.uint8)
    shared = generator.permutation(3_000)[:400]
    values[shared, :30] = values[shared[0], :30]
    values[1:3000:7, :rows] = values[0, :rows]  # and some chance-like collisions in band 0
    counts = np.full(3_000, 50, np.int64)
    counts[shared[:50]] = 0
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        starts = range(0, 3_000, 700) if in_order else reversed(range(0, 3_000, 700))
        for start in starts:
            stop = min(start + 700, 3_000)
            run.write(batch([f"d{i:05d}" for i in range(start, stop)], values[start:stop], counts[start:stop]))
    expected = local_candidate_pairs(values, bands, rows, counts > 0, 100)
    monkeypatch.setattr(dask_candidates, "ROWS_PER_PARTITION", 5_000)
    monkeypatch.setattr(dask_candidates, "SHARE_DOCUMENTS", share_documents)
    monkeypatch.setattr(dask_candidates, "BAND_SPLIT_DOCUMENTS", 10_000 if split_bands else 0)
    frames = frames_of(path, 500)
    assert frames.in_order is in_order
    candidates = dask_candidates.candidate_pairs(frames, bands, rows, 100, band_memory)
    codes = np.sort(joined([part.compute() for part in candidates.codes])["code"])
    found = candidates.stats
    assert found.oversized_buckets == expected.oversized_buckets > 0
    expected_codes = expected.first.astype(np.uint64) * np.uint64(3_000) + expected.second.astype(np.uint64)
    assert np.array_equal(codes, expected_codes)
    assert found.band_keys == frames.eligible * bands
    if split_bands:
        # Nothing but the pairs moved; 5,000 bytes is under one band of every document, so a band a worker.
        assert found.shares == 2 and found.fingerprint_bytes == found.crossing_rows == 0
        assert found.rounds == (1 if band_memory > 10**6 else bands // 2)
        return
    assert found.shares == 2 if share_documents > 3_000 else 2 < found.shares <= 6  # of about 700 documents
    # A worker's keys of a round stay within band_memory: 5,000 bytes is under one band (1,500 documents a
    # worker, 12 bytes a key while sorting), so a band a round; 100,000 bytes, a few bands.
    assert found.rounds == 1 if band_memory > 10**6 else found.rounds == bands if band_memory == 5_000 else \
        2 < found.rounds < bands
    # Only fingerprints and the rows of crossing buckets moved: far fewer than the band rows.
    assert 0 < found.fingerprint_bytes < found.band_keys * 2 and found.crossing_rows < found.band_keys / 4


def test_candidate_stats_round_trip_through_a_work_folder_array() -> None:
    stats = dask_candidates.CandidateStats(2, 3, 4, 5, 6, 7, 12, 9, 1)
    kept = stats.as_array()
    assert kept.dtype == np.int64 and kept.tolist() == [2, 3, 4, 5, 6, 7, 12, 9, 1]
    assert dask_candidates.CandidateStats.of_array(kept) == stats


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


@pytest.mark.parametrize(("sources", "parts"), [(3, 7), (5, 2), (1, 30), (4, 1)])
def test_an_exchange_in_two_stages_gives_what_one_stage_gives(client: Client, monkeypatch: pytest.MonkeyPatch,
                                                              sources: int, parts: int) -> None:
    """Past its limit of cuts an exchange runs through groups of destinations first: every part gets the same
    rows in the same order (sources in order, each source's rows in order) as in one stage."""
    generator = np.random.default_rng(parts)
    tables = [{"value": generator.integers(0, 1000, 50), "row": np.arange(50) + 100 * source}
              for source in range(sources)]

    def route(table: dict, count: int) -> np.ndarray:
        return table["value"] % count

    one = dask.compute(*exchange([dask.delayed(table) for table in tables], route, parts, parts))
    monkeypatch.setattr(dask_exchange, "STAGED_TASKS", 1)
    two = dask.compute(*exchange([dask.delayed(table) for table in tables], route, parts, parts))
    assert len(one) == len(two) == parts
    for part, (expected, got) in enumerate(zip(one, two, strict=True)):
        assert got["row"].tolist() == expected["row"].tolist()
        assert (expected["value"] % parts == part).all()
    assert sorted(np.concatenate([part["row"] for part in two]).tolist()) == sorted(
        np.concatenate([table["row"] for table in tables]).tolist())
