"""A store's live documents on a cluster: its pieces, each with the number of each row, and ranges of numbers.

The local engine reads the live rows in ascending id order and calls the i-th one document i; pair codes,
bucket cuts, component labels and the order of every output follow that number. The Dask engine numbers them the
same way, with the local engine's own numbering (:class:`dedup_cli.store.documents.NumberedDocuments`) in the
driver, or, for a store too large for that, by a sort of the ids alone on the cluster (:mod:`.id_sort`), and
hands each piece of the store (a run of row groups of one file) the number of each of its
rows (−1 for a dead row). The stages that touch every document read the pieces where they are with those numbers;
no signature moves to be numbered.

Documents are cut into ranges of consecutive numbers (``divisions``: the first document of each range, then the
last document). When the pieces' rows are the documents in order (one sorted part, a format 1 file, parts whose
ids follow each other, no removal) a piece is a range. Otherwise a table that the later stages need by range is
moved there by one exchange of what it holds: the b-bit values scoring reads (k·b/8 + 16 bytes a document), and
the names (id, location, content hash) only when many pairs are decided on the workers; a few documents' names are
read from the pieces where they are (:func:`names_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, by_range, column_range, exchange, joined, take
from dedup_cli.engine.dask.table_kinds import NAMES, VALUES, TableKind
from dedup_cli.errors import StoreError
from dedup_cli.minhash.packing import pack_bits, packed_to_words, unpack_values, value_words
from dedup_cli.params import SignatureParams
from dedup_cli.store.documents import NumberedDocuments
from dedup_cli.store.names import Names
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.store.store import Store
from dedup_cli.store.store_pieces import (
    ROWS_PER_PIECE,
    StorePiece,
    read_piece,
    read_piece_values,
    store_pieces,
)

REDUCE_ROWS = 16_384
"""Signatures reduced to their b-bit values at a time (4 MB of values at k = 256 and 8 bits)."""

# The numbers of a piece's rows: its first document's (rows in order), each row's (−1: dead), or a task's result
# that gives each row's (numbered on the cluster).
Numbers = Any


@dataclass
class NumberedPieces:
    """The live documents of a store (and of a reference store after them), numbered by rank of id, as the pieces
    of the stores that hold them: each piece with the number of each of its rows, and the ranges of numbers the
    later stages meet in."""

    params: SignatureParams
    documents: int  # live documents
    eligible: int  # of them, documents with at least one shingle
    max_shingle_count: int
    run_span: tuple[int, int] | None  # the first and last run of the live documents
    divisions: tuple[int, ...]  # the first document of each range, then the last document
    in_order: bool  # the pieces' rows are the documents in order, a piece a range
    pieces: list[tuple[StorePiece, Numbers]] = dataclasses.field(default_factory=list)
    reference_start: int | None = None  # with a reference store: its first document (its documents come last)
    min_shingle_count: int = 0  # the fewest shingles of an eligible document (0: none is eligible)
    names: list[Any] | None = dataclasses.field(default=None, repr=False)  # once read: :func:`name_ranges`

    @property
    def ranges(self) -> int:
        return len(self.divisions) - 1


def piece_documents(numbers: int | np.ndarray, rows: int) -> np.ndarray:
    """int64[rows]: the document each row of a piece is (−1: a dead row), from its ``numbers``: the first
    document's number when its rows are documents in order, else the number of each row."""
    if isinstance(numbers, np.ndarray):
        return numbers
    return np.arange(numbers, numbers + rows, dtype=np.int64)


def even_ranges(documents: int, per_range: int) -> tuple[int, ...]:
    """Divisions of ``documents`` documents into ranges of about ``per_range`` each."""
    parts = max(1, -(-documents // per_range))
    return (*(documents * part // parts for part in range(parts)), documents - 1)


def read_documents(store: Store, rows_per_piece: int = ROWS_PER_PIECE) -> NumberedPieces:
    """The live documents of ``store`` and its pieces, each with the number of each of its rows, for the workers
    to read where they are, numbered by the local engine's numbering in this process (it reads the ``id``,
    ``run`` and ``shingle_count`` columns and keeps about 16 bytes a document)."""
    pieces, _ = store_pieces(store, rows_per_piece)
    with NumberedDocuments([store]) as numbered:
        files = {name: (np.r_[0, np.cumsum(sizes)].astype(np.int64), docs)
                 for name, sizes, docs in numbered.row_documents()}
        counts, runs, documents = numbered.shingle_counts, numbered.runs, numbered.documents
    if not documents:
        return empty_documents(store.params)
    in_order = all(docs is None for _, docs in files.values())
    numbered_pieces: list[tuple[StorePiece, Numbers]] = []
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
    divisions = piece_divisions(numbered_pieces, documents) if in_order else even_ranges(documents, rows_per_piece)
    eligible = counts[counts > 0]
    return NumberedPieces(store.params, documents, int(eligible.size), int(counts.max()),
                          (int(runs.min()), int(runs.max())), divisions, in_order, numbered_pieces,
                          min_shingle_count=int(eligible.min()) if eligible.size else 0)


def piece_divisions(pieces: Sequence[tuple[StorePiece, Numbers]], documents: int) -> tuple[int, ...]:
    """The divisions of pieces whose rows are the documents in order: a piece a range."""
    return (*(int(numbers) for _, numbers in pieces), documents - 1)


def with_reference(new: NumberedPieces, reference: NumberedPieces, rows_per_piece: int = ROWS_PER_PIECE
                   ) -> NumberedPieces:
    """The documents of a store, then those of a reference store numbered on from ``new.documents``: each store's
    documents by rank of id, the store's first, as the local engine numbers two stores. Nothing is read: the
    reference's pieces are listed after the store's, their numbers raised."""
    start = new.documents
    if not new.documents and not reference.documents:
        return dataclasses.replace(new, reference_start=start)
    pieces = new.pieces + [(piece, _raised(numbers, start)) for piece, numbers in reference.pieces]
    documents = start + reference.documents
    in_order = new.in_order and reference.in_order
    divisions = piece_divisions(pieces, documents) if in_order else even_ranges(documents, rows_per_piece)
    shortest = [count for count in (new.min_shingle_count, reference.min_shingle_count) if count > 0]
    return NumberedPieces(new.params, documents, new.eligible + reference.eligible,
                     max(new.max_shingle_count, reference.max_shingle_count),
                     joined_span(new.run_span, reference.run_span), divisions, in_order, pieces, start,
                     min(shortest, default=0))


def joined_span(first: tuple[int, int] | None, second: tuple[int, int] | None) -> tuple[int, int] | None:
    """The runs of two stores' documents together, (first run, last run)."""
    spans = [span for span in (first, second) if span is not None]
    return (min(span[0] for span in spans), max(span[1] for span in spans)) if spans else None


def _raise(numbers: int | np.ndarray, start: int) -> int | np.ndarray:
    if isinstance(numbers, np.ndarray):
        return np.where(numbers >= 0, numbers + start, -1)
    return numbers + start


def _raised(numbers: Numbers, start: int) -> Numbers:
    if isinstance(numbers, (int, np.integer)):
        return int(numbers) + start
    if isinstance(numbers, np.ndarray):
        return _raise(numbers, start)
    return dask.delayed(_raise)(numbers, start)  # numbered on the cluster: raised there


def empty_documents(params: SignatureParams) -> NumberedPieces:
    return NumberedPieces(params, 0, 0, 0, None, (0, 0), True, [])


# --- the documents' b-bit values, what scoring and the end of find read of every document -----------------------

def reduced_values(counts: np.ndarray, runs: np.ndarray, packed: np.ndarray, docs: np.ndarray,
                   params: SignatureParams, bits: int) -> Table:
    """Documents' stored signatures (``packed``), counts and runs as the table of what scoring reads: ``doc``,
    ``shingle_count``, ``run`` and ``words``, the lowest ``bits`` bits of each value packed into uint64 words."""
    words = np.empty((counts.size, value_words(bits, params.num_perm)), np.uint64)
    # A block of rows at a time: the temporaries (several bytes a value) stay small enough for malloc to hand the
    # same memory back block after block, where a piece's worth would be mapped, faulted in and unmapped anew.
    for start in range(0, counts.size, REDUCE_ROWS):
        values = unpack_values(packed[start : start + REDUCE_ROWS], params.bits, params.num_perm)
        words[start : start + REDUCE_ROWS] = packed_to_words(pack_bits(values, bits))  # lowest bits kept there
    return VALUES.of(doc=np.asarray(docs, np.int64), shingle_count=np.asarray(counts, np.int64),
                     run=np.asarray(runs, np.int64), words=words)


def live_reduced(counts: np.ndarray, runs: np.ndarray, packed: np.ndarray, docs: np.ndarray,
                 params: SignatureParams, bits: int) -> Table:
    """:func:`reduced_values` of the live rows (``docs`` ≥ 0) of a piece's read."""
    live = docs >= 0
    if not live.all():
        counts, runs, packed, docs = counts[live], runs[live], packed[live], docs[live]
    return reduced_values(counts, runs, packed, docs, params, bits)


def reduce_piece(piece: StorePiece, numbers: int | np.ndarray, params: SignatureParams, bits: int) -> Table:
    """:func:`reduced_values` of a store piece's live rows, read here straight from Arrow."""
    counts, runs, packed = read_piece_values(piece, params)
    return live_reduced(counts, runs, packed, piece_documents(numbers, counts.size), params, bits)


def sorted_by_doc(table: Table) -> Table:
    """A table's rows in ascending ``doc``."""
    docs = table["doc"]
    if docs.size < 2 or bool(np.all(docs[1:] > docs[:-1])):
        return table
    return take(table, np.argsort(docs, kind="stable"))


def in_ranges(per_piece: list[Any], documents: NumberedPieces, kind: TableKind) -> list[Any]:
    """Delayed tables of documents of ``kind``, one a piece, as one a range of ``documents.divisions`` in document
    order: as they are when the pieces are the ranges, else by one exchange."""
    if documents.in_order:
        return per_piece
    return exchange(per_piece, column_range, documents.ranges, "doc", documents.divisions, then=sorted_by_doc,
                    kind=kind)


def value_ranges(documents: NumberedPieces, bits: int, per_piece: list[Any] | None = None) -> list[Any]:
    """Delayed tables of :func:`reduced_values`, one a range (``per_piece``: those of each piece, already made
    by the reads of the candidate stage)."""
    if per_piece is None:
        per_piece = [dask.delayed(reduce_piece)(piece, numbers, documents.params, bits)
                     for piece, numbers in documents.pieces]
    return in_ranges(per_piece, documents, VALUES)


# --- the documents' names: ids, locations, content hashes, times ----------------------------------------------

def piece_names(piece: StorePiece, numbers: int | np.ndarray, docs: np.ndarray | None = None) -> Table:
    """The name columns and ``doc`` of a piece's live rows (with ``docs``: only those among them; the others'
    strings are never made)."""
    numbered = piece_documents(numbers, piece.rows)
    keep = np.flatnonzero(numbered >= 0 if docs is None else np.isin(numbered, docs))
    return NAMES.of(doc=numbered[keep], **read_piece(piece, list(NAMES.columns[1:]), rows=keep))


def name_ranges(documents: NumberedPieces) -> list[Any]:
    """Persisted tables of every document's names, one a range: read (and moved into ranges) by the first stage
    that asks, then kept for the others."""
    if documents.names is None:
        documents.names = list(settled(*in_ranges([dask.delayed(piece_names)(piece, numbers)
                                                   for piece, numbers in documents.pieces], documents, NAMES)))
    return documents.names


def names_of(documents: NumberedPieces, docs: np.ndarray) -> Table:
    """The names of the documents ``docs`` (int64, ascending), in that order: read where the pieces are, each
    keeping only its rows among ``docs`` (in order, only the pieces that hold some of them)."""
    pieces = documents.pieces
    if documents.in_order:
        holds = by_range(docs, documents.divisions)
        pieces = [pieces[index] for index in np.unique(holds).tolist()] if docs.size else []
    parts = [dask.delayed(piece_names)(piece, numbers, docs) for piece, numbers in pieces]
    found = joined(dask.compute(*parts), NAMES) if parts else {}
    if not found:
        return NAMES.of(doc=np.empty(0, np.int64), id=Names.of([]), path=Names.of([]),
                        content_hash=np.empty(0, np.uint64), mtime_ns=np.empty(0, np.int64))
    return sorted_by_doc(found)


def table_store(params: SignatureParams, table: Table) -> StoredSignatures:
    """Documents as a store of their own, from a table of their ``id`` and any of their ``path``,
    ``content_hash``, ``shingle_count``, ``run`` and ``mtime_ns`` (what a task re-reads them by, what the end of find
    or a chunk of output needs of them); it holds no stored signatures, so the driver holds about 100 bytes a
    document, not its B-bit signature."""
    count = len(table["id"])
    hashes = table.get("content_hash")
    return StoredSignatures(params=params, ids=[str(x) for x in table["id"]],
                            paths=[str(x) for x in table["path"]] if "path" in table else [""] * count,
                            shingle_counts=table.get("shingle_count", np.zeros(count, np.int64)),
                            packed=np.empty((count, 0), np.uint8),
                            content_hashes=None if hashes is None else hashes.astype(np.uint64),
                            runs=table.get("run"), mtimes_ns=table.get("mtime_ns"))


def _rows_among(table: Table, docs: np.ndarray) -> Table:
    return take(table, np.searchsorted(table["doc"], docs))


def rows_of(ranges: list[Any], divisions: tuple[int, ...], docs: np.ndarray) -> Table:
    """The rows of ``docs`` (int64, ascending, each present) of delayed tables of ranges, in that order; each
    range is asked only for its own documents."""
    cuts = np.searchsorted(docs, np.asarray(divisions[1:-1], dtype=np.int64), side="left")
    wanted = np.split(docs, cuts)
    parts = [dask.delayed(_rows_among)(part, among) for part, among in zip(ranges, wanted, strict=True) if among.size]
    return joined(dask.compute(*parts)) if parts else {}
