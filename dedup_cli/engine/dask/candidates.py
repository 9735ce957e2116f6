"""Candidate pairs by shuffles: band rows gathered by bucket, pairs within buckets, pairs de-duplicated.

The same pairs as :func:`dedup_cli.candidates.buckets.candidate_pairs` (MMDS Sec. 3.4: a pair is a candidate when
all rows of some band agree), computed where the signatures are:

1. **band rows**: each partition emits one row (bucket, doc) per eligible document and band, for a few bands at a
   time, so that only one round's rows exist at once (NeMo Curator's ``buckets_per_shuffle`` idea); keys are
   :func:`dedup_cli.candidates.buckets.band_keys` of the band's columns;
2. **shuffle on the bucket**: every bucket lands whole in one partition;
3. **pairs within buckets**: members sorted by (bucket, doc), so a bucket lists its members in document (id)
   order; a bucket of more than ``max_bucket`` members keeps the pairs among its first ``max_bucket`` and is
   counted, as the local engine does (:func:`dedup_cli.candidates.buckets.bucket_pairs`); pairs become codes
   first · n + second;
4. **shuffle on the code**: the same pair found in several bands meets itself and is kept once.

Bytes shuffled per band row: the band number above the key in one integer when both fit in 64 bits (uint32 when
in 32), and the document as int32 below 2^31 documents: 8 bytes at 35 × 3 of 8-bit values, 12 at 48 × 4;
otherwise (int16 band, uint64 key, document), 14 or 18 bytes. Then 8 bytes per band collision, the pair codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.candidates.buckets import band_keys, bucket_pairs
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import DocumentFrames
from dedup_cli.minhash.packing import unpack_values, value_dtype
from dedup_cli.params import SignatureParams
from dedup_cli.primitives import sorted_unique
from dedup_cli.store.pieces import frame_words, words_to_packed

ROWS_PER_ROUND = 100_000_000
"""Band rows one round may create over all partitions (0.8–1.8 GB of payload, which p2p keeps on disk)."""
ROWS_PER_TASK = 2_000_000
"""Band rows one partition may emit per round: that task also splits them into shards for the shuffle (about
four copies at once), and 7 M rows got workers with a 1.5 GiB limit killed where 2 M did not."""
ROWS_PER_PARTITION = 2_000_000
"""Rows per partition after a shuffle: a partition is sorted whole in one task (about 60 bytes a row with the
sort's temporaries), so this bounds a task's memory to about 120 MB whatever the corpus size."""

_CODE_META = pd.DataFrame({"code": pd.Series([], dtype=np.uint64)})


@dataclass(frozen=True)
class BucketLayout:
    """How band rows are encoded: ``key_bits`` None means separate band and key columns."""

    key_bits: int | None
    bucket_dtype: np.dtype
    doc_dtype: np.dtype

    @property
    def row_bytes(self) -> int:
        return (2 + 8 if self.key_bits is None else self.bucket_dtype.itemsize) + self.doc_dtype.itemsize

    @property
    def on(self) -> list[str]:
        return ["band", "key"] if self.key_bits is None else ["bucket"]

    def meta(self) -> pd.DataFrame:
        if self.key_bits is None:
            return pd.DataFrame({"band": pd.Series([], dtype=np.int16), "key": pd.Series([], dtype=np.uint64),
                                 "doc": pd.Series([], dtype=self.doc_dtype)})
        return pd.DataFrame({"bucket": pd.Series([], dtype=self.bucket_dtype),
                             "doc": pd.Series([], dtype=self.doc_dtype)})


def bucket_layout(bands: int, rows: int, stored_bits: int, documents: int) -> BucketLayout:
    """The narrowest exact encoding of (band, key, doc) rows (see the module docstring)."""
    key_bits = min(64, rows * value_dtype(stored_bits).itemsize * 8)  # band_keys packs values at their dtype's stride
    band_bits = max(1, (bands - 1).bit_length())
    doc_dtype = np.dtype(np.int32 if documents < 2**31 else np.int64)
    if key_bits + band_bits > 64:
        return BucketLayout(None, np.dtype(np.uint64), doc_dtype)
    return BucketLayout(key_bits, np.dtype(np.uint32 if key_bits + band_bits <= 32 else np.uint64), doc_dtype)


@dataclass
class Candidates:
    """Unique candidate pairs as codes first · documents + second (first < second), and what finding them cost.

    ``codes`` has one uint64 column ``code``, hash-partitioned, each partition ascending; it is persisted.
    """

    codes: dd.DataFrame
    documents: int
    oversized_buckets: int
    rounds: int
    band_rows: int  # band rows shuffled on their bucket
    band_row_bytes: int
    shuffled_codes: int  # pair codes shuffled to be de-duplicated, 8 bytes each


def band_rows(frame: pd.DataFrame, params: SignatureParams, words: list[str], rows: int, first_band: int,
              last_band: int, layout: BucketLayout) -> pd.DataFrame:
    """(bucket, doc) rows for the eligible documents of one partition and bands ``first_band`` … ``last_band − 1``."""
    eligible = frame["shingle_count"].to_numpy() > 0  # a document with no shingle resembles nothing
    docs = frame.index.to_numpy(dtype=np.int64)[eligible].astype(layout.doc_dtype)
    if docs.size == 0:
        return layout.meta()
    packed = words_to_packed(frame_words(frame, words)[eligible], params.signature_bytes)
    values = unpack_values(packed, params.bits, params.num_perm)
    count = last_band - first_band
    keys = band_keys(values[:, first_band * rows : last_band * rows], count, rows)  # uint64[count, n]
    band = np.arange(first_band, last_band, dtype=np.uint64)
    if layout.key_bits is None:
        return pd.DataFrame({"band": np.repeat(band.astype(np.int16), docs.size), "key": keys.ravel(),
                             "doc": np.tile(docs, count)})
    keys |= band[:, None] << np.uint64(layout.key_bits)  # the band above the key: one exact integer
    return pd.DataFrame({"bucket": keys.ravel().astype(layout.bucket_dtype), "doc": np.tile(docs, count)})


def bucket_pair_codes(frame: pd.DataFrame, documents: int, max_bucket: int) -> tuple[pd.DataFrame, int]:
    """Pair codes within the whole buckets of one partition (unique here), and the buckets cut."""
    doc = frame["doc"].to_numpy().astype(np.int64)
    if "bucket" in frame.columns:
        bucket = frame["bucket"].to_numpy()
        order = np.lexsort((doc, bucket))  # by bucket, members in document order; buckets of bands differ
        groups = [(doc[order], bucket[order])]
    else:
        band, key = frame["band"].to_numpy(), frame["key"].to_numpy()
        order = np.lexsort((doc, key, band))
        band, key, doc = band[order], key[order], doc[order]
        starts = np.flatnonzero(np.r_[True, band[1:] != band[:-1]]) if band.size else np.empty(0, np.int64)
        stops = np.r_[starts[1:], band.size]
        groups = [(doc[a:b], key[a:b]) for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]  # per band
    codes, oversized = [], 0
    for members, keys in groups:
        first, second, cut = bucket_pairs(members, keys, max_bucket)
        oversized += cut
        codes.append(first.astype(np.uint64) * np.uint64(documents) + second.astype(np.uint64))
    unique = sorted_unique(np.concatenate(codes)) if codes else np.empty(0, dtype=np.uint64)
    return pd.DataFrame({"code": unique}), oversized


def unique_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """A partition of codes, ascending and without repeats."""
    return pd.DataFrame({"code": sorted_unique(frame["code"].to_numpy(dtype=np.uint64))})


def candidate_pairs(frames: DocumentFrames, bands: int, rows: int, max_bucket: int,
                    shuffle_method: str | None = None) -> Candidates:
    """The candidate pairs of banding the stored values into ``bands`` × ``rows`` (bands · rows ≤ k)."""
    params, documents = frames.params, frames.documents
    layout = bucket_layout(bands, rows, params.bits, documents)
    largest = int(np.max(np.diff(frames.divisions))) + 1
    per_round = max(1, min(ROWS_PER_ROUND // max(documents, 1), ROWS_PER_TASK // max(largest, 1)))
    collected: list[dd.DataFrame] = []
    oversized = emitted_rows = shuffled_codes = rounds = 0
    for first_band in range(0, bands, per_round):
        last_band = min(bands, first_band + per_round)
        emitted = frames.values.map_partitions(band_rows, params, frames.words, rows, first_band, last_band, layout,
                                               meta=layout.meta(), align_dataframes=False)
        outputs = max(1, -(-documents * (last_band - first_band) // ROWS_PER_PARTITION))
        gathered = emitted.shuffle(on=layout.on, npartitions=outputs, shuffle_method=shuffle_method).to_delayed()
        steps = [dask.delayed(bucket_pair_codes, nout=2)(part, documents, max_bucket) for part in gathered]
        # One computation per round: its codes stay on the workers, and only then are the next round's band
        # rows made, so at most one round's rows exist at a time.
        *parts, cut, made, emitted_count = settled(
            *[step[0] for step in steps],
            dask.delayed(sum)([step[1] for step in steps]),
            dask.delayed(sum)([dask.delayed(len)(step[0]) for step in steps]),
            dask.delayed(sum)([dask.delayed(len)(part) for part in gathered]),
        )
        cut, made, emitted_count = dask.compute(cut, made, emitted_count)
        oversized += int(cut)
        shuffled_codes += int(made)
        emitted_rows += int(emitted_count)
        collected.append(dd.from_delayed(parts, meta=_CODE_META, verify_meta=False))
        rounds += 1
    merged = dd.concat(collected) if len(collected) > 1 else collected[0]
    outputs = max(1, -(-shuffled_codes // ROWS_PER_PARTITION))
    deduplicated = merged.shuffle(on="code", npartitions=outputs, shuffle_method=shuffle_method)
    (codes,) = settled(deduplicated.map_partitions(unique_codes, meta=_CODE_META))
    return Candidates(codes, documents, oversized, rounds, emitted_rows, layout.row_bytes, shuffled_codes)
