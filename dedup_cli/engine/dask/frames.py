"""A store's live rows as Dask data frames indexed by document number: the rank of the id, as the local engine counts.

The local engine reads the live rows in ascending id order and calls the i-th one document i; pair codes,
bucket cuts, component labels and the order of every output follow that number. Numbering the partitions the
same way is what lets both engines write the same bytes. Two frames share one set of divisions (ranges of
document numbers): ``values`` (shingle count, run, the packed signature as uint64 words), read by the stages
that touch every document, and ``names`` (id, location, content hash), joined only with the few documents that
are re-read or reported.

- **In order** (one sorted part, a format 1 file, or parts whose ids follow each other in manifest order, with
  no removal): a piece's first document number is the rows before it; nothing moves, and each stage reads the
  pieces again from the store rather than hold them.
- **Otherwise** (incremental runs interleave ids; JSON Lines ids come in file order): the parts' rows and the
  removals are sorted on ``id`` by one shuffle (range partitions from sampled quantiles, so the rows of one id
  meet in one partition), the live-row rule is applied per partition (docs/store-format.md), and the live rows
  are numbered and kept on the cluster, spilling to disk beyond the workers' memory.

Scoring and the end of find read of every document only its values' lowest b bits, packed (``s…`` columns:
:func:`reduce_bits`, about k·b/8 bytes a document); in order, they are made from the pieces' Arrow buffers, in the
same task that reads a piece for the candidate stage's first round.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.minhash.packing import pack_values, unpack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.store_pieces import (
    StorePiece,
    frame_words,
    packed_to_words,
    read_piece,
    read_piece_values,
    word_columns,
    words_to_packed,
)

VALUE_COLUMNS = ("shingle_count", "run")
REDUCE_ROWS = 16_384
"""Signatures reduced to their b-bit values at a time (4 MB of values at k = 256 and 8 bits)."""
NAME_COLUMNS = ("id", "path", "content_hash", "mtime_ns")
_STRING = "str"  # pandas' Arrow-backed strings, what read_piece gives


def _meta(params: SignatureParams, names: bool) -> pd.DataFrame:
    columns: dict[str, pd.Series] = {}
    if names:
        columns = {"id": pd.Series([], dtype=_STRING), "path": pd.Series([], dtype=_STRING),
                   "content_hash": pd.Series([], dtype=np.uint64), "mtime_ns": pd.Series([], dtype=np.int64)}
    else:
        columns = {"shingle_count": pd.Series([], dtype=np.int64), "run": pd.Series([], dtype=np.int64)}
        columns.update({name: pd.Series([], dtype=np.uint64) for name in word_columns(params.signature_bytes)})
    return pd.DataFrame(columns, index=pd.Index([], dtype=np.int64, name="doc"))


@dataclass
class DocumentFrames:
    """The live rows of a store, numbered by rank of id (see the module docstring)."""

    params: SignatureParams
    documents: int  # live documents
    eligible: int  # of them, documents with at least one shingle
    max_shingle_count: int
    run_span: tuple[int, int] | None  # the first and last run of the live documents
    divisions: tuple[int, ...]  # the first document of each partition, then the last document
    values: dd.DataFrame  # index doc; shingle_count, run, w0, w1, … (the packed signature)
    names: dd.DataFrame  # index doc; id, path, content_hash, mtime_ns
    in_order: bool
    pieces: list[tuple[StorePiece, int]] | None = None  # in order: each partition's piece and first document
    reference_start: int | None = None  # with a reference store: its first document (its documents come last)

    @property
    def words(self) -> list[str]:
        return word_columns(self.params.signature_bytes)

    def partition_documents(self, partitions: list[int]) -> int:
        """Documents in the partitions numbered ``partitions``."""
        ends = np.r_[np.asarray(self.divisions[1:-1], np.int64), self.divisions[-1] + 1]
        firsts = np.asarray(self.divisions[:-1], np.int64)
        return int(sum(ends[p] - firsts[p] for p in partitions))


def _bounds(piece: StorePiece) -> tuple[int, str | None, str | None, bool, int, int, int, int]:
    """(rows, first id, last id, ids strictly increasing, eligible, max shingle count, first and last run)."""
    frame = read_piece(piece, ["id", "shingle_count", "run"])
    if frame.empty:
        return 0, None, None, True, 0, 0, 0, 0
    ids = frame["id"]
    # Compared as Arrow strings (UTF-8 bytes order as code points do), not as a numpy array of Python strings.
    increasing = bool(len(ids) < 2 or (ids.array[1:] > ids.array[:-1]).all())
    counts, runs = frame["shingle_count"].to_numpy(), frame["run"].to_numpy()
    return (len(frame), str(ids.iloc[0]), str(ids.iloc[-1]), increasing, int(np.count_nonzero(counts > 0)),
            int(counts.max()), int(runs.min()), int(runs.max()))


def numbered_piece(piece: StorePiece, first: int, params: SignatureParams, names: bool) -> pd.DataFrame:
    """A piece's value columns (or name columns), indexed by the documents' numbers from ``first``."""
    columns = list(NAME_COLUMNS) if names else [*VALUE_COLUMNS, "signature"]
    frame = read_piece(piece, columns, params)
    frame.index = pd.Index(np.arange(first, first + len(frame), dtype=np.int64), name="doc")
    return frame


def _full_meta(params: SignatureParams) -> pd.DataFrame:
    """Every column the sort moves: the names, the values, and whether the row is a removal."""
    frame = pd.concat([_meta(params, True), _meta(params, False)], axis=1).reset_index(drop=True)
    frame["removed"] = pd.Series([], dtype=bool)
    return frame


def _piece_rows(piece: StorePiece, params: SignatureParams, removal: bool) -> pd.DataFrame:
    """Every column of a piece, for the sort; a removal file's rows carry ``removed`` and zeros."""
    meta = _full_meta(params)
    if removal:
        frame = read_piece(piece, ["id", "run"])
        frame["path"] = pd.Series([""] * len(frame), dtype=_STRING)
        for name in meta.columns:
            if name not in frame:
                frame[name] = np.zeros(len(frame), dtype=meta[name].dtype)
        frame["removed"] = True
    else:
        frame = read_piece(piece, [*NAME_COLUMNS, *VALUE_COLUMNS, "signature"], params)
        frame["removed"] = False
    return frame[list(meta.columns)]


def live(frame: pd.DataFrame) -> pd.DataFrame:
    """The live rows of one id-range partition, ascending id (docs/store-format.md, "Which rows are live").

    Per id the row with the highest run wins; it is dead when a removal of that id has a higher run.
    """
    writes = frame[~frame["removed"].to_numpy()]
    removals = frame[frame["removed"].to_numpy()]
    writes = writes.sort_values(["id", "run"], ascending=[True, False])  # a lexicographic, stable sort
    writes = writes[~writes["id"].duplicated(keep="first").to_numpy()]
    if len(removals):
        latest = removals.groupby("id", sort=False, observed=True)["run"].max()
        removed_at = writes["id"].map(latest).to_numpy(dtype=np.float64, na_value=np.nan)
        writes = writes[~(removed_at > writes["run"].to_numpy())]  # NaN (no removal) compares False: kept
    return writes.drop(columns="removed")


def _number(frame: pd.DataFrame, firsts: list[int], partition_info: dict | None = None) -> pd.DataFrame:
    """A partition of the sorted live rows with its documents' numbers in a ``doc`` column."""
    assert partition_info is not None
    first = firsts[partition_info["number"]]
    frame = frame.reset_index(drop=True)
    frame.insert(0, "doc", np.arange(first, first + len(frame), dtype=np.int64))
    return frame


def _ordered(params: SignatureParams, pieces: list[StorePiece], offsets: np.ndarray
             ) -> tuple[tuple[int, ...], dd.DataFrame, dd.DataFrame]:
    divisions = (*(int(x) for x in offsets[:-1]), int(offsets[-1]) - 1)
    frames = []
    for names in (False, True):
        frames.append(dd.from_map(numbered_piece, pieces, list(offsets[:-1].tolist()), params=params, names=names,
                                  meta=_meta(params, names), divisions=divisions, enforce_metadata=False))
    return divisions, frames[0], frames[1]


def read_documents(params: SignatureParams, pieces: list[StorePiece], removals: list[StorePiece],
                   shuffle_method: str | None = None) -> DocumentFrames:
    """The live rows of the store whose pieces are ``pieces`` and ``removals`` (:func:`store_pieces`).

    One pass over the ``id``, ``shingle_count`` and ``run`` columns decides whether the rows are already in id
    order; if not, the rows are sorted on the cluster (see the module docstring).
    """
    bounds = dask.compute(*[dask.delayed(_bounds)(piece) for piece in pieces]) if pieces else ()
    kept = [(piece, bound) for piece, bound in zip(pieces, bounds, strict=True) if bound[0] > 0]
    firsts = [bound[1] for _, bound in kept]
    lasts = [bound[2] for _, bound in kept]
    in_order = (not removals and all(bound[3] for _, bound in kept)
                and all(str(last) < str(first) for last, first in zip(lasts[:-1], firsts[1:], strict=True)))
    if in_order:
        if not kept:
            return _empty(params)
        rows = np.array([bound[0] for _, bound in kept], dtype=np.int64)
        offsets = np.r_[0, np.cumsum(rows)].astype(np.int64)
        ordered = [piece for piece, _ in kept]
        divisions, values, names = _ordered(params, ordered, offsets)
        return DocumentFrames(
            params, int(offsets[-1]), sum(bound[4] for _, bound in kept), max(bound[5] for _, bound in kept),
            (min(bound[6] for _, bound in kept), max(bound[7] for _, bound in kept)), divisions, values, names, True,
            list(zip(ordered, offsets[:-1].tolist(), strict=True)))
    return _sorted(params, [piece for piece, _ in kept], removals, shuffle_method)


def _shifted(frame: pd.DataFrame, offset: int) -> pd.DataFrame:
    frame = frame.copy(deep=False)
    frame.index = pd.Index(frame.index.to_numpy(dtype=np.int64) + offset, name="doc")
    return frame


def with_reference(new: DocumentFrames, reference: DocumentFrames) -> DocumentFrames:
    """The documents of a store, then those of a reference store numbered on from ``new.documents``: each store's
    documents by rank of id, the store's first, as the local engine numbers two stores. Nothing is read or moved:
    the reference's partitions are renumbered where they are (or, both in id order, its pieces listed after the
    store's)."""
    start = new.documents
    both = [frames for frames in (new, reference) if frames.documents]
    if len(both) < 2:
        only = both[0] if both else new
        if only is reference:
            only = _renumbered(reference, start)
        return dataclasses.replace(only, reference_start=start)
    spans = [span for span in (new.run_span, reference.run_span) if span is not None]
    divisions = (*new.divisions[:-1], *(division + start for division in reference.divisions))
    common: dict[str, Any] = dict(documents=start + reference.documents, eligible=new.eligible + reference.eligible,
                  max_shingle_count=max(new.max_shingle_count, reference.max_shingle_count),
                  run_span=(min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None,
                  in_order=new.in_order and reference.in_order, reference_start=start)
    if new.pieces is not None and reference.pieces is not None:
        pieces = new.pieces + [(piece, first + start) for piece, first in reference.pieces]
        offsets = np.array([first for _, first in pieces] + [start + reference.documents], np.int64)
        _, values, names = _ordered(new.params, [piece for piece, _ in pieces], offsets)
        return DocumentFrames(new.params, divisions=divisions, values=values, names=names, pieces=pieces, **common)
    values, names = (dd.from_delayed([*getattr(new, kind).to_delayed(),
                                      *[dask.delayed(_shifted)(part, start)
                                        for part in getattr(reference, kind).to_delayed()]],
                                     meta=getattr(new, kind)._meta, divisions=divisions, verify_meta=False)
                     for kind in ("values", "names"))
    return DocumentFrames(new.params, divisions=divisions, values=values, names=names, **common)


def _renumbered(frames: DocumentFrames, start: int) -> DocumentFrames:
    """``frames`` with every document number raised by ``start``."""
    divisions = tuple(division + start for division in frames.divisions)
    values, names = (dd.from_delayed([dask.delayed(_shifted)(part, start) for part in getattr(frames, kind)
                                      .to_delayed()], meta=getattr(frames, kind)._meta, divisions=divisions,
                                     verify_meta=False) for kind in ("values", "names"))
    pieces = None if frames.pieces is None else [(piece, first + start) for piece, first in frames.pieces]
    return dataclasses.replace(frames, divisions=divisions, values=values, names=names, pieces=pieces)


def _empty(params: SignatureParams) -> DocumentFrames:
    values = dd.from_pandas(_meta(params, False), npartitions=1)
    names = dd.from_pandas(_meta(params, True), npartitions=1)
    return DocumentFrames(params, 0, 0, 0, None, (0, 0), values, names, True)


def _sorted(params: SignatureParams, pieces: list[StorePiece], removals: list[StorePiece],
            shuffle_method: str | None) -> DocumentFrames:
    meta = _full_meta(params)
    rows = [dd.from_map(_piece_rows, pieces, params=params, removal=False, meta=meta, enforce_metadata=False)]
    if removals:
        rows.append(dd.from_map(_piece_rows, removals, params=params, removal=True, meta=meta,
                                enforce_metadata=False))
    combined = dd.concat(rows) if len(rows) > 1 else rows[0]
    (ordered,) = settled(combined.sort_values("id", shuffle_method=shuffle_method).map_partitions(
        live, meta=meta.drop(columns="removed")))
    lengths = ordered.map_partitions(len).compute().to_numpy().astype(np.int64)
    if not lengths.sum():
        return _empty(params)
    keep = [index for index, length in enumerate(lengths) if length > 0]
    if len(keep) < len(lengths):
        ordered = ordered.partitions[keep]
    offsets = np.r_[0, np.cumsum(lengths[keep])].astype(np.int64)
    divisions = (*(int(x) for x in offsets[:-1]), int(offsets[-1]) - 1)
    meta_values, meta_names = _meta(params, False), _meta(params, True)
    numbered_meta = pd.concat([meta_names, meta_values], axis=1).reset_index()
    numbered = ordered.map_partitions(_number, offsets[:-1].tolist(), meta=numbered_meta, align_dataframes=False)
    # The documents are numbered in order, so their ranges are the divisions: no shuffle, no pass over the data.
    (frame,) = settled(numbered.set_index("doc", sorted=True, divisions=list(divisions)))
    values, names = frame[list(meta_values.columns)], frame[list(meta_names.columns)]
    counts = frame["shingle_count"]
    eligible, most, first_run, last_run = dask.compute((counts > 0).sum(), counts.max(), frame["run"].min(),
                                                       frame["run"].max())
    return DocumentFrames(params, int(offsets[-1]), int(eligible), int(most), (int(first_run), int(last_run)),
                          divisions, values, names, False)


# --- the documents' b-bit values, what scoring and the end of find read of every document -----------------------

def bit_columns(prefix: str, bits: int, num_perm: int) -> list[str]:
    """Names of the uint64 columns holding k values of ``bits`` bits, packed."""
    return [f"{prefix}{i}" for i in range(((num_perm * bits + 7) // 8 + 7) // 8)]


def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """:func:`dedup_cli.minhash.packing.pack_values` of uint8[n, k] values (their lowest ``bits`` bits), by shifts
    when ``bits`` divides 8.

    Value j occupies bits j·b … j·b + b − 1 (least significant first), so byte q holds values q·(8/b) …; the
    general packer goes through one byte per bit, several times slower. The 8/b values of an output byte are read
    as one little-endian word, each byte masked to its lowest b bits, and folded in log2(8/b) steps: the step of
    2^s·(8 − b) bits moves each run of 2^s packed values next to the run below it, so after the last step the low
    byte holds all 8/b values in order; what lands above it is cut off by the final narrowing.
    """
    if values.dtype != np.uint8 or 8 % bits or values.shape[1] % (8 // bits):
        return pack_values(values, bits)
    per_byte = 8 // bits
    if per_byte == 1:
        return np.ascontiguousarray(values)
    words = np.ascontiguousarray(values).view(f"<u{per_byte}")
    word = words.dtype.type
    low = (1 << bits) - 1
    packed = words & word(int.from_bytes(bytes([low]) * per_byte, "little"))
    step, packed_values = 8 - bits, 1
    while packed_values < per_byte:
        packed |= packed >> word(step)
        step, packed_values = 2 * step, 2 * packed_values
    return packed.astype(np.uint8)


def reduce_bits(frame: pd.DataFrame, words: list[str], params: SignatureParams, bits: int) -> pd.DataFrame:
    """A partition of stored signatures → the lowest ``bits`` bits of each value packed as ``s…`` columns, with
    the shingle count and run (index: doc)."""
    return reduced_values(frame["shingle_count"].to_numpy(), frame["run"].to_numpy(),
                    words_to_packed(frame_words(frame, words), params.signature_bytes), frame.index, params, bits)


def reduce_piece(piece: StorePiece, first: int, params: SignatureParams, bits: int) -> pd.DataFrame:
    """:func:`reduce_bits` of a store piece whose first document is ``first``, read here straight from Arrow (no
    frame of the stored signatures is built)."""
    counts, runs, packed = read_piece_values(piece, params)
    index = pd.Index(np.arange(first, first + counts.size, dtype=np.int64), name="doc")
    return reduced_values(counts, runs, packed, index, params, bits)


def reduced_values(counts: np.ndarray, runs: np.ndarray, packed: np.ndarray, index: pd.Index,
                   params: SignatureParams, bits: int) -> pd.DataFrame:
    """Documents' stored signatures (``packed``), counts and runs as the frame :func:`reduce_bits` makes."""
    names = bit_columns("s", bits, params.num_perm)
    # Filled in place, then the frame's one block of words as it is (transposed, as pandas keeps a block): a frame
    # made column by column would copy every word into a block of its own making.
    reduced = np.empty((len(names), counts.size), np.uint64).T
    # A block of rows at a time: the temporaries (several bytes a value) stay small enough for malloc to hand the
    # same memory back block after block, where a piece's worth would be mapped, faulted in and unmapped anew.
    for start in range(0, counts.size, REDUCE_ROWS):
        values = unpack_values(packed[start : start + REDUCE_ROWS], params.bits, params.num_perm)
        reduced[start : start + REDUCE_ROWS] = packed_to_words(pack_bits(values, bits))  # lowest bits kept there
    frame = pd.DataFrame(reduced, index=index, columns=names, copy=False)
    frame.insert(0, "run", np.asarray(runs, np.int64))
    frame.insert(0, "shingle_count", np.asarray(counts, np.int64))
    return frame


def reduced_frame(frames: DocumentFrames, bits: int) -> dd.DataFrame:
    """:func:`reduce_bits` of every document: from the store's pieces when they are in order (each task reads its
    piece's counts, runs and signatures from Arrow), else of the sorted frame's partitions."""
    meta = reduced_meta(bits, frames.params.num_perm)
    if frames.pieces is None:
        return frames.values.map_partitions(reduce_bits, frames.words, frames.params, bits, meta=meta)
    pieces = [piece for piece, _ in frames.pieces]
    firsts = [first for _, first in frames.pieces]
    return dd.from_map(reduce_piece, pieces, firsts, params=frames.params, bits=bits, meta=meta,
                       divisions=frames.divisions, enforce_metadata=False)


def reduced_meta(bits: int, num_perm: int) -> pd.DataFrame:
    columns = {"shingle_count": pd.Series([], dtype=np.int64), "run": pd.Series([], dtype=np.int64)}
    columns.update({name: pd.Series([], dtype=np.uint64) for name in bit_columns("s", bits, num_perm)})
    return pd.DataFrame(columns, index=pd.Index([], dtype=np.int64, name="doc"))


def unpack_bits(frame: pd.DataFrame, prefix: str, bits: int, num_perm: int) -> np.ndarray:
    """The b-bit values uint[n, k] of a frame's packed ``prefix`` columns."""
    columns = bit_columns(prefix, bits, num_perm)
    return unpack_values(words_to_packed(frame_words(frame, columns), (num_perm * bits + 7) // 8), bits, num_perm)


def take_rows(frame: pd.DataFrame, docs: np.ndarray) -> pd.DataFrame:
    """The rows of ``docs`` of a partition indexed by document."""
    return frame.loc[docs]


def rows_of(frame: dd.DataFrame, divisions: tuple[int, ...], docs: np.ndarray) -> pd.DataFrame:
    """The rows of ``docs`` (int64, ascending) of a frame indexed by document with ``divisions``, in that order;
    each partition is asked only for its own documents."""
    cuts = np.searchsorted(docs, np.asarray(divisions[1:-1], dtype=np.int64), side="left")
    pieces = np.split(docs, cuts)
    parts = [dask.delayed(take_rows)(part, wanted) for part, wanted in zip(frame.to_delayed(), pieces, strict=True)
             if wanted.size]
    if not parts:
        return frame._meta
    return pd.concat(dask.compute(*parts))
