"""A store's live rows as Dask data frames indexed by document number: the rank of the id, as the local engine counts.

The local engine reads the live rows in ascending id order and calls the i-th one document i; pair codes,
bucket cuts, component labels and the order of every output follow that number. The Dask engine numbers them
with the local engine's own numbering (:class:`dedup_cli.store.documents.NumberedDocuments`), in the driver,
from the ``id``, ``run`` and ``shingle_count`` columns (the live-row rule of docs/store-format.md applied there),
and hands each piece of the store (runs of row groups of a file) the number of each of its rows. The stages that
touch every document read the pieces where they are with those numbers; no signature moves to be numbered.

Two frames share one set of divisions (ranges of document numbers): ``values`` (shingle count, run, the packed
signature as uint64 words) and ``names`` (id, location, content hash).

- **In order** (one sorted part, a format 1 file, or parts whose ids follow each other in manifest order, with
  no removal): a piece is a partition, its first document number the rows before it.
- **Otherwise** (parallel signing writes parts whose ids interleave; later runs replace rows): the divisions are
  ranges of about a piece's documents, and a frame that needs them is moved there by one shuffle of what it
  holds: the b-bit values scoring reads (k·b/8 + 16 bytes a document), the full signatures only for the
  document split of the candidate stage, and the names only when many pairs are decided on the workers (a few
  documents' names are read from the pieces where they are, :func:`names_of`).

Scoring and the end of find read of every document only its values' lowest b bits, packed (``s…`` columns:
:func:`reduce_bits`, about k·b/8 bytes a document), made from the pieces' Arrow buffers in the same task that
reads a piece for the candidate stage's first round.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.errors import StoreError
from dedup_cli.minhash.packing import pack_values, unpack_values
from dedup_cli.params import SignatureParams
from dedup_cli.store.documents import NumberedDocuments
from dedup_cli.store.store import Store
from dedup_cli.store.store_pieces import (
    ROWS_PER_PIECE,
    StorePiece,
    frame_words,
    packed_to_words,
    read_piece,
    read_piece_values,
    store_pieces,
    word_columns,
    words_to_packed,
)

VALUE_COLUMNS = ("shingle_count", "run")
REDUCE_ROWS = 16_384
"""Signatures reduced to their b-bit values at a time (4 MB of values at k = 256 and 8 bits)."""
NAME_COLUMNS = ("id", "path", "content_hash", "mtime_ns")
_STRING = "str"  # pandas' Arrow-backed strings, what read_piece gives


def frame_meta(params: SignatureParams, names: bool) -> pd.DataFrame:
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
    in_order: bool  # the pieces' rows are the documents in order, a piece a partition
    # Each piece of the store with the number of its rows: its first document's (in order), else each row's (−1
    # for a dead row), read where it is by the stages that touch every document.
    pieces: list[tuple[StorePiece, int | np.ndarray]] = dataclasses.field(default_factory=list)
    reference_start: int | None = None  # with a reference store: its first document (its documents come last)

    @property
    def words(self) -> list[str]:
        return word_columns(self.params.signature_bytes)



def piece_documents(numbers: int | np.ndarray, rows: int) -> np.ndarray:
    """int64[rows]: the document each row of a piece is (−1: a dead row), from its ``numbers``: the first
    document's number when its rows are documents in order, else the number of each row."""
    if isinstance(numbers, np.ndarray):
        return numbers
    return np.arange(numbers, numbers + rows, dtype=np.int64)


def numbered_piece(piece: StorePiece, numbers: int | np.ndarray, params: SignatureParams, names: bool
                   ) -> pd.DataFrame:
    """A piece's value columns (or name columns) of its live rows, indexed by the documents' numbers."""
    columns = list(NAME_COLUMNS) if names else [*VALUE_COLUMNS, "signature"]
    frame = read_piece(piece, columns, params)
    docs = piece_documents(numbers, len(frame))
    if isinstance(numbers, np.ndarray):
        live = docs >= 0
        frame, docs = frame[live], docs[live]
    frame.index = pd.Index(docs, name="doc")
    return frame


def _ranges(documents: int, per_range: int) -> tuple[int, ...]:
    """Divisions of ``documents`` documents into ranges of about ``per_range`` each."""
    parts = max(1, -(-documents // per_range))
    return (*(documents * part // parts for part in range(parts)), documents - 1)


def in_ranges(frame: dd.DataFrame, divisions: tuple[int, ...], shuffle_method: str | None = None) -> dd.DataFrame:
    """A frame indexed by document, its partitions pieces of the store (documents in any order), moved into the
    ranges ``divisions`` and sorted there: one shuffle of what it holds."""
    return frame.reset_index().set_index("doc", divisions=list(divisions), shuffle_method=shuffle_method)


def _frames(params: SignatureParams, pieces: list[tuple[StorePiece, int | np.ndarray]], documents: int,
            in_order: bool, shuffle_method: str | None, per_range: int = ROWS_PER_PIECE
            ) -> tuple[tuple[int, ...], dd.DataFrame, dd.DataFrame]:
    """(divisions, values, names) of the numbered pieces: in order, a piece a partition; else ranges of
    documents, each frame moved there by a shuffle when it is computed (the values only by the document split
    of the candidate stage, the names only when many pairs are decided on the workers)."""
    ordered = [piece for piece, _ in pieces]
    numbers = [number for _, number in pieces]
    if in_order:
        offsets = [*numbers, documents]
        divisions = (*(int(x) for x in offsets[:-1]), documents - 1)
    else:
        divisions = _ranges(documents, per_range)
    frames = []
    for names in (False, True):
        frame = dd.from_map(numbered_piece, ordered, numbers, params=params, names=names,
                            meta=frame_meta(params, names), divisions=divisions if in_order else None,
                            enforce_metadata=False)
        frames.append(frame if in_order else in_ranges(frame, divisions, shuffle_method))
    return divisions, frames[0], frames[1]


def read_documents(store: Store, rows_per_piece: int = ROWS_PER_PIECE, shuffle_method: str | None = None
                   ) -> DocumentFrames:
    """The live documents of ``store``, numbered by the local engine's numbering (:class:`dedup_cli.store.
    documents.NumberedDocuments`: this process reads the ``id``, ``run`` and ``shingle_count`` columns, about
    16 bytes a document kept), and its pieces, each with the number of each of its rows, for the workers to
    read where they are: no signature moves to be numbered."""
    pieces, _ = store_pieces(store, rows_per_piece)
    with NumberedDocuments([store]) as numbered:
        files = {name: (np.r_[0, np.cumsum(sizes)].astype(np.int64), docs)
                 for name, sizes, docs in numbered.row_documents()}
        counts, runs, documents = numbered.shingle_counts, numbered.runs, numbered.documents
    if not documents:
        return empty_frames(store.params)
    in_order = all(docs is None for _, docs in files.values())
    numbered_pieces: list[tuple[StorePiece, int | np.ndarray]] = []
    first = 0
    for piece in pieces:
        name = piece.path.rsplit("/", 1)[1]
        starts, docs = files.get(name, (None, None))
        if starts is None or max(piece.row_groups) + 1 >= starts.size:
            raise StoreError(f"{store.path} changed while it was read ({name}); run again")
        if in_order:
            numbered_pieces.append((piece, first))
        else:
            assert docs is not None
            numbered_pieces.append((piece, np.concatenate([docs[starts[group] : starts[group + 1]]
                                                           for group in piece.row_groups])))
        first += piece.rows
    divisions, values, names = _frames(store.params, numbered_pieces, documents, in_order, shuffle_method,
                                       rows_per_piece)
    return DocumentFrames(store.params, documents, int(np.count_nonzero(counts > 0)), int(counts.max()),
                          (int(runs.min()), int(runs.max())), divisions, values, names, in_order, numbered_pieces)


def with_reference(new: DocumentFrames, reference: DocumentFrames, shuffle_method: str | None = None
                   ) -> DocumentFrames:
    """The documents of a store, then those of a reference store numbered on from ``new.documents``: each store's
    documents by rank of id, the store's first, as the local engine numbers two stores. Nothing is read: the
    reference's pieces are listed after the store's, their numbers raised."""
    start = new.documents
    if not new.documents and not reference.documents:
        return dataclasses.replace(new, reference_start=start)
    pieces = new.pieces + [(piece, _raised(numbers, start)) for piece, numbers in reference.pieces]
    in_order = new.in_order and reference.in_order
    divisions, values, names = _frames(new.params, pieces, start + reference.documents, in_order, shuffle_method)
    return DocumentFrames(new.params, start + reference.documents, new.eligible + reference.eligible,
                          max(new.max_shingle_count, reference.max_shingle_count),
                          joined_span(new.run_span, reference.run_span), divisions, values, names, in_order, pieces,
                          start)


def joined_span(first: tuple[int, int] | None, second: tuple[int, int] | None) -> tuple[int, int] | None:
    """The runs of two stores' documents together, (first run, last run)."""
    spans = [span for span in (first, second) if span is not None]
    return (min(span[0] for span in spans), max(span[1] for span in spans)) if spans else None


def _raised(numbers: int | np.ndarray, start: int) -> int | np.ndarray:
    if isinstance(numbers, np.ndarray):
        return np.where(numbers >= 0, numbers + start, -1)
    return numbers + start


def empty_frames(params: SignatureParams) -> DocumentFrames:
    values = dd.from_pandas(frame_meta(params, False), npartitions=1)
    names = dd.from_pandas(frame_meta(params, True), npartitions=1)
    return DocumentFrames(params, 0, 0, 0, None, (0, 0), values, names, True, [])


def names_of(frames: DocumentFrames, docs: np.ndarray) -> pd.DataFrame:
    """The name columns of the documents ``docs`` (int64, ascending), in that order: in order, from the
    partitions that hold them; else read from every piece where it is, each keeping only its rows among ``docs``
    (no shuffle of every document's names for a few of them)."""
    if frames.in_order or not frames.pieces:  # in order, or sorted on the cluster: ranges of documents already
        return rows_of(frames.names, frames.divisions, docs)
    parts = [dask.delayed(_piece_names)(piece, numbers, docs, frames.params) for piece, numbers in frames.pieces]
    found = pd.concat(dask.compute(*parts)) if parts else frames.names._meta
    return found.sort_index()


def _piece_names(piece: StorePiece, numbers: np.ndarray | int, docs: np.ndarray, params: SignatureParams
                 ) -> pd.DataFrame:
    frame = numbered_piece(piece, numbers, params, names=True)
    return frame[np.isin(frame.index.to_numpy(), docs)]


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


def reduce_piece(piece: StorePiece, numbers: int | np.ndarray, params: SignatureParams, bits: int) -> pd.DataFrame:
    """:func:`reduce_bits` of a store piece's live rows (``numbers``: :func:`piece_documents`), read here straight
    from Arrow (no frame of the stored signatures is built)."""
    counts, runs, packed = read_piece_values(piece, params)
    docs = piece_documents(numbers, counts.size)
    if isinstance(numbers, np.ndarray):
        live = docs >= 0
        counts, runs, packed, docs = counts[live], runs[live], packed[live], docs[live]
    return reduced_values(counts, runs, packed, pd.Index(docs, name="doc"), params, bits)


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


def reduced_frame(frames: DocumentFrames, bits: int, shuffle_method: str | None = None) -> dd.DataFrame:
    """:func:`reduce_bits` of every document, each task reading a piece's counts, runs and signatures from Arrow;
    when the pieces are not in order, moved into the frames' ranges (k·b/8 + 16 bytes a document)."""
    meta = reduced_meta(bits, frames.params.num_perm)
    if not frames.pieces:  # sorted on the cluster: its values in ranges already
        return frames.values.map_partitions(reduce_bits, frames.words, frames.params, bits, meta=meta)
    pieces = [piece for piece, _ in frames.pieces]
    numbers = [number for _, number in frames.pieces]
    reduced = dd.from_map(reduce_piece, pieces, numbers, params=frames.params, bits=bits, meta=meta,
                          divisions=frames.divisions if frames.in_order else None, enforce_metadata=False)
    return reduced if frames.in_order else in_ranges(reduced, frames.divisions, shuffle_method)


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
