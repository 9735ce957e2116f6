"""Pairs meet their documents: range joins on document numbers, and candidate pairs scored where they meet.

Document frames are partitioned by ranges of document numbers with known divisions; a pair frame is sent to the
range of one of its documents (one shuffle of the pairs, nothing of the documents moves) and merged partition by
partition. Scoring sends each candidate pair to its first document's range, then with that document's b-bit
signature to its second's: per candidate 16 + 16 + ⌈k·b/8⌉ bytes shuffled (96 at k = 256, b = 2), against the
stored ⌈k·B/8⌉ bytes a document (256 at B = 8) that stay where they are.

When every candidate pair is in one partition (at most 2·10^6 codes, which one task sorts anyway), no shuffle
runs: that task cuts the pairs by the range of their second document and lists the documents each range must
give; each document partition gives those rows of its b-bit values (a task each), one task joins them, and each
range's pairs are scored against them in a task of its own. On a machine or a cluster, that is a few tasks a
partition and the candidates' documents' values moved once to each worker, where two shuffles each cost a run on
every worker and a barrier.

The match count k·Ê_b (Li & König 2010, Sec. 2) comes from the packed b-bit words by XOR and popcount; the
estimate, its standard error and interval from :func:`dedup_cli.estimates.pairs.score_matches`, the function the
local engine's :func:`dedup_cli.estimates.pairs.score_pairs` ends with, so both give the same floats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.dask.frames import bit_columns, take_rows
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.estimates.pairs import ScoredPairs, score_matches
from dedup_cli.minhash.packing import unpack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.store_pieces import frame_words, words_to_packed

if TYPE_CHECKING:
    from dedup_cli.engine.dask.candidates import Candidates

PAIR_CHUNK = 1 << 17
"""Pairs compared per numpy step: bounds the [pairs, words] temporaries."""

SMALL_SHUFFLE_PAIRS = 1_000_000
SMALL_SHUFFLE_PARTITIONS = 16
"""Up to these many candidate pairs (codes before de-duplication) and document partitions, scoring's two shuffles
run by tasks rather than peer to peer (unless the caller chose a method)."""

SCORE_COLUMNS = tuple(ScoredPairs.__dataclass_fields__)


def packed_matches(a: np.ndarray, b: np.ndarray, bits: int, num_perm: int) -> np.ndarray:
    """Positions whose b-bit values agree, from packed uint64 words: int64[n].

    When b divides 64 no value straddles two words: a value differs exactly when its b-bit field of a XOR b is
    non-zero, so each field's bits are OR-ed into its lowest bit and counted (padding is zero on both sides).
    """
    if 64 % bits == 0 and bits < 64:
        difference = a ^ b
        folded = difference.copy()
        for shift in range(1, bits):
            folded |= difference >> np.uint64(shift)
        lowest = np.uint64(sum(1 << i for i in range(0, 64, bits)))
        return num_perm - np.bitwise_count(folded & lowest).sum(axis=1, dtype=np.int64)
    width = (num_perm * bits + 7) // 8
    values_a = unpack_values(words_to_packed(a, width), bits, num_perm)
    values_b = unpack_values(words_to_packed(b, width), bits, num_perm)
    return np.count_nonzero(values_a == values_b, axis=1).astype(np.int64)


def by_document(frame: dd.DataFrame, column: str, divisions: tuple[int, ...], shuffle_method: str | None
                ) -> dd.DataFrame:
    """Rows sent to the range partition of the document in ``column``, which becomes the index."""
    return frame.set_index(column, divisions=list(divisions), shuffle_method=shuffle_method)


def attach(pairs: dd.DataFrame, column: str, documents: dd.DataFrame, prefix: str, divisions: tuple[int, ...],
           shuffle_method: str | None) -> dd.DataFrame:
    """``pairs`` with the columns of ``documents`` (indexed by doc) for the document in ``column``, each renamed
    ``prefix`` + name: an inner join, partitioned by the range of that document, which becomes the index.

    The join runs partition by partition, so the result keeps ``divisions``: Dask's own merge of two frames with
    known divisions drops a repeated last division (the last range holding one document, as when the last run
    signed one file whose id sorts last), and a frame of one partition fewer no longer meets the frames that keep
    them, partition i with partition i.
    """
    indexed = by_document(pairs, column, divisions, shuffle_method)
    renamed = documents.rename(columns={name: prefix + name for name in documents.columns})
    meta = indexed._meta.merge(renamed._meta, left_index=True, right_index=True, how="inner")
    joined = indexed.map_partitions(pd.DataFrame.merge, renamed, left_index=True, right_index=True, how="inner",
                                    meta=meta, align_dataframes=False)
    return joined.rename_axis(column)


def _pairs(frame: pd.DataFrame, documents: int, reference_start: int | None, only_across: bool) -> pd.DataFrame:
    """Pair codes as (first, second); with a reference store from document ``reference_start`` on, less the pairs
    inside it (and with ``only_across`` those inside the store too), as the local engine leaves them out."""
    codes = frame["code"].to_numpy(dtype=np.uint64)
    first = (codes // np.uint64(documents)).astype(np.int64)
    second = (codes % np.uint64(documents)).astype(np.int64)
    if reference_start is not None:
        keep = first < reference_start  # first < second: the pair holds a document of the store
        if only_across:
            keep &= second >= reference_start
        first, second = first[keep], second[keep]
    return pd.DataFrame({"first": first, "second": second})


def scored_frame(scored: ScoredPairs, index: np.ndarray | None = None) -> pd.DataFrame:
    """ScoredPairs as a data frame with :data:`SCORE_COLUMNS` (index: ``index``, named second)."""
    frame = pd.DataFrame({name: getattr(scored, name) for name in SCORE_COLUMNS})
    if index is not None:
        frame.index = pd.Index(index, dtype=np.int64, name="second")
    return frame


def score_partition(frame: pd.DataFrame, bits: int, num_perm: int, universe: int, new_since: int | None,
                    level: float = 0.95, reference_start: int | None = None) -> pd.DataFrame:
    """Score the pairs of one partition (index: the second document), each row holding both documents' packed
    b-bit words (``a_s…``, ``b_s…``), shingle counts and runs; with ``new_since`` (pairs only) the pairs touching
    no newer document of the store (below ``reference_start``) are left out first, as the local engine drops them
    before scoring."""
    if new_since is not None:
        newer_first = frame["a_run"].to_numpy() > new_since
        newer_second = frame["b_run"].to_numpy() > new_since
        if reference_start is not None:
            newer_first &= frame["first"].to_numpy() < reference_start
            newer_second &= frame.index.to_numpy() < reference_start
        frame = frame[newer_first | newer_second]
    first, second = frame["first"].to_numpy(dtype=np.int64), frame.index.to_numpy(dtype=np.int64)
    matches = np.empty(len(frame), dtype=np.int64)
    columns_a, columns_b = bit_columns("a_s", bits, num_perm), bit_columns("b_s", bits, num_perm)
    for start in range(0, len(frame), PAIR_CHUNK):
        chunk = frame.iloc[start : start + PAIR_CHUNK]
        matches[start : start + len(chunk)] = packed_matches(frame_words(chunk, columns_a),
                                                             frame_words(chunk, columns_b), bits, num_perm)
    r1 = set_size_ratios(frame["a_shingle_count"].to_numpy(), universe)
    r2 = set_size_ratios(frame["b_shingle_count"].to_numpy(), universe)
    return scored_frame(score_matches(first, second, matches, r1, r2, num_perm, bits, level), index=second)


def scored_meta(extra: dict[str, np.dtype] | None = None) -> pd.DataFrame:
    empty = ScoredPairs(*([np.empty(0, np.int64)] * 3), *([np.empty(0)] * 6))
    frame = scored_frame(empty, index=np.empty(0, np.int64))
    for name, dtype in (extra or {}).items():
        frame[name] = pd.Series([], dtype=dtype)
    return frame


def score_candidates(reduced: dd.DataFrame, candidates: Candidates, divisions: tuple[int, ...], bits: int,
                     params: SignatureParams, new_since: int | None, shuffle_method: str | None,
                     reference_start: int | None = None, only_across: bool = False) -> dd.DataFrame:
    """Every candidate pair scored (:data:`SCORE_COLUMNS`), indexed and range-partitioned by its second document.

    ``reduced`` is :func:`dedup_cli.engine.dask.frames.reduce_bits` of the document frame (persisted: both joins
    read it). With ``reference_start`` (pairs only: a reference store's documents from there on), the pairs the
    local engine leaves out before scoring are left out here too (:func:`_pairs`, :func:`score_partition`).
    """
    if candidates.codes.npartitions == 1:
        return _score_without_shuffles(reduced, candidates, divisions, bits, params, new_since, reference_start,
                                       only_across)
    if shuffle_method is None and candidates.shuffled_codes <= SMALL_SHUFFLE_PAIRS \
            and len(divisions) - 1 <= SMALL_SHUFFLE_PARTITIONS:
        # Few pairs into few partitions: a shuffle by tasks (a handful of tiny ones) costs less than Dask's default
        # peer-to-peer shuffle, whose fixed cost (a run on every worker, a barrier) is paid whatever the size.
        shuffle_method = "tasks"
    pairs = candidates.codes.map_partitions(_pairs, candidates.documents, reference_start, only_across,
                                            meta=pd.DataFrame({"first": pd.Series([], dtype=np.int64),
                                                               "second": pd.Series([], dtype=np.int64)}))
    with_first = attach(pairs, "first", reduced, "a_", divisions, shuffle_method).reset_index()
    both = attach(with_first, "second", reduced, "b_", divisions, shuffle_method)
    return both.map_partitions(score_partition, bits, params.num_perm, params.universe, new_since,
                               reference_start=reference_start, meta=scored_meta())


def _ranges_of_pairs(codes: pd.DataFrame, documents: int, reference_start: int | None, only_across: bool,
                     divisions: tuple[int, ...]) -> tuple[list[np.ndarray], list[pd.DataFrame]]:
    """The pairs of one partition of codes cut by the document range (partition) of their second document, each
    ordered by (second, first), and per range the documents of any pair that lie in it (ascending)."""
    pairs = _pairs(codes, documents, reference_start, only_across)
    first, second = pairs["first"].to_numpy(dtype=np.int64), pairs["second"].to_numpy(dtype=np.int64)
    order = np.lexsort((first, second))
    first, second = first[order], second[order]
    bounds = np.asarray(divisions[1:-1], dtype=np.int64)
    docs = sorted_unique(np.concatenate([first, second]))
    doc_ranges = np.split(docs, np.searchsorted(docs, bounds, side="left"))
    cuts = np.searchsorted(second, bounds, side="left")
    pair_ranges = [pd.DataFrame({"first": part_first, "second": part_second})
                   for part_first, part_second in zip(np.split(first, cuts), np.split(second, cuts), strict=True)]
    return doc_ranges, pair_ranges


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts)


def _score_range(pairs: pd.DataFrame, values: pd.DataFrame, bits: int, num_perm: int, universe: int,
                 new_since: int | None, reference_start: int | None) -> pd.DataFrame:
    """:func:`score_partition` of one range's pairs, each given both documents' rows of ``values`` (index: doc,
    ascending) as ``a_…`` and ``b_…`` columns, as the two joins give them."""
    index = values.index.to_numpy(dtype=np.int64)
    first, second = pairs["first"].to_numpy(dtype=np.int64), pairs["second"].to_numpy(dtype=np.int64)
    rows_a, rows_b = np.searchsorted(index, first), np.searchsorted(index, second)
    columns: dict[str, np.ndarray] = {"first": first}
    for name in values.columns:
        column = values[name].to_numpy()
        columns[f"a_{name}"], columns[f"b_{name}"] = column[rows_a], column[rows_b]
    frame = pd.DataFrame(columns, index=pd.Index(second, name="second"))
    return score_partition(frame, bits, num_perm, universe, new_since, reference_start=reference_start)


def _score_without_shuffles(reduced: dd.DataFrame, candidates: Candidates, divisions: tuple[int, ...], bits: int,
                            params: SignatureParams, new_since: int | None, reference_start: int | None,
                            only_across: bool) -> dd.DataFrame:
    """:func:`score_candidates` of codes that are one partition (the module docstring): no shuffle."""
    (codes,) = candidates.codes.to_delayed()
    partitions = len(divisions) - 1
    ranges = dask.delayed(_ranges_of_pairs, nout=2)(codes, candidates.documents, reference_start, only_across,
                                                    divisions)
    doc_ranges, pair_ranges = ranges[0], ranges[1]
    rows = [dask.delayed(take_rows)(part, doc_ranges[index]) for index, part in enumerate(reduced.to_delayed())]
    values = dask.delayed(_joined)(rows)
    scored = [dask.delayed(_score_range)(pair_ranges[index], values, bits, params.num_perm, params.universe,
                                         new_since, reference_start) for index in range(partitions)]
    return dd.from_delayed(scored, meta=scored_meta(), divisions=divisions, verify_meta=False)
