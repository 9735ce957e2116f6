"""Candidate pairs on the cluster without moving band rows: shares band their own documents, and only the
fingerprints of their keys and the rows of buckets that cross shares travel.

The same pairs as :func:`dedup_cli.candidates.buckets.candidate_pairs` (MMDS Sec. 3.4: a pair is a candidate when
all rows of some band agree), in rounds of a few bands:

1. **Shares.** The documents (the store's pieces) are cut into shares of at most
   :data:`SHARE_DOCUMENTS`, a whole number of them per worker; every task of a share runs on its worker
   (``dask.annotate``, other workers allowed should it die), so a share's keys never leave it. A share's
   pieces are read where the share runs, and their band keys for the round's bands concatenated (4 bytes a
   key when a band's values fit in 32 bits).
2. **Fingerprints.** For each band, each share sends the Elias–Fano coded set of its keys' fingerprints, cut into
   one slice per share, to the slice's owner (:mod:`dedup_cli.candidates.crossing`): about 9 + log2(shares)
   bits a key, the only per-document traffic.
3. **Crossing keys.** An owner answers each share with the fingerprints of its slice that another share holds
   too; the share sends the rows (key, document) of those fingerprints to their owners, who pair each bucket
   whole (:func:`dedup_cli.candidates.buckets.band_pair_codes`), and pairs its other rows itself, buckets that lie
   inside it. Either way a bucket is sorted with its members in document order and cut at ``max_bucket`` as the
   local engine cuts it.
4. **Codes.** Pairs become codes first · documents + second; the codes of all rounds meet in one exchange on
   the code (a pair found in several bands is kept once).

Steps 1 to 3 run on the workers in :mod:`dedup_cli.engine.dask.shares`. With one share (one worker and a small
store) step 2 and 3 vanish: the share pairs everything itself. On one machine (below :data:`BAND_SPLIT_DOCUMENTS`,
a store of local files in id order) the workers split the bands instead: each reads every piece and pairs whole
bands of its own as the local engine does, and nothing but the pair codes moves (docs/scaling.md). Moved per
document and band: the fingerprint (about 1.1 bytes at two shares), and for the few rows of crossing buckets or
chance fingerprint matches (about 1/64), 12 or 16 bytes; bench/RESULTS-scale.md has the measured bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import dask
import numpy as np
from distributed import get_client

from dedup_cli.array_primitives import large_empty, sorted_unique
from dedup_cli.candidates import crossing_rounds
from dedup_cli.candidates.buckets import block_band_keys, key_dtype, round_pair_codes
from dedup_cli.candidates.crossing import fingerprint_bits
from dedup_cli.engine.dask import shares as share_tasks
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, column_hash, exchange, joined, row_count
from dedup_cli.engine.dask.kept_parts import keep_parts, kept_parts
from dedup_cli.engine.dask.ranges import NumberedPieces, in_ranges, live_reduced, piece_documents
from dedup_cli.engine.dask.table_kinds import CODES, VALUES
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.resume import Resume
from dedup_cli.minhash.packing import value_dtype
from dedup_cli.objectstore.urls import is_url
from dedup_cli.options.vocabulary import BAND_MEMORY
from dedup_cli.params import SignatureParams
from dedup_cli.store.store_pieces import StorePiece, read_piece_batches, read_piece_signatures, read_piece_values

SHARE_DOCUMENTS = 5_000_000
"""Documents a share holds at most: a task sorts one band of them at a time (about 46 bytes a document, 230 MB),
whatever the corpus size."""
BAND_SPLIT_DOCUMENTS = 20_000_000
"""Documents up to which workers on one machine split the bands rather than the documents: each reads every
piece (from the page cache) and sorts whole bands, one at a time, so nothing but the pairs moves."""
SORT_BYTES = 46
"""Bytes a document while a task sorts one band (its key, position and packed sort word, and the pairs' scratch)."""
ROWS_PER_PARTITION = 2_000_000
"""Pair codes per part after the de-duplicating exchange (each sorted whole in one task)."""


@dataclass(frozen=True)
class CandidateStats:
    """What finding the candidate pairs cost, as the profile reports it and a work folder keeps it."""

    rounds: int
    shares: int  # split by documents: shares; split by bands: workers
    band_keys: int  # keys made: eligible documents × bands (none of them moved)
    fingerprint_bytes: int  # Elias–Fano sets sent to the slices' owners
    fingerprint_bytes_across: int  # of them, those sent to another worker
    crossing_rows: int  # rows of crossing buckets (or chance fingerprint matches) sent to their owners
    crossing_row_bytes: int  # bytes of one such row
    shuffled_codes: int  # pair codes exchanged to be de-duplicated, 8 bytes each
    oversized_buckets: int

    def as_array(self) -> np.ndarray:
        """int64[9], the fields in order (how a work folder keeps them)."""
        return np.array([getattr(self, name.name) for name in fields(self)], np.int64)

    @classmethod
    def of_array(cls, kept: np.ndarray) -> CandidateStats:
        """The stats :meth:`as_array` kept."""
        return cls(*(int(value) for value in np.asarray(kept).tolist()))


@dataclass
class CandidateCodes:
    """Unique candidate pairs as codes (:func:`dedup_cli.array_primitives.pair_codes`), and what finding them cost.

    ``codes``: delayed tables of :data:`dedup_cli.engine.dask.table_kinds.CODES`, spread by a hash of the code,
    each ascending; persisted.
    """

    codes: list[Any]
    stats: CandidateStats
    reduced: list[Any] | None = None  # with ``reduce_bits``: the b-bit values read with the keys, a range each


def read_piece_keys(piece: StorePiece, numbers: int | np.ndarray, params: SignatureParams, rows: int,
                        first_band: int, last_band: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(docs int64[m], keys[last − first, m]): the band keys of a store piece's eligible documents (``numbers``:
    :func:`dedup_cli.engine.dask.ranges.piece_documents`), read here, on the share's worker, straight from
    Arrow."""
    counts, packed = read_piece_signatures(piece, params)
    return _keys(piece_documents(numbers, counts.size), counts, packed, params, rows, first_band, last_band, dtype)


def read_keys_and_values(piece: StorePiece, numbers: int | np.ndarray, params: SignatureParams, rows: int,
                         first_band: int, last_band: int, dtype: np.dtype, bits: int
                         ) -> tuple[tuple[np.ndarray, np.ndarray], Table]:
    """:func:`read_piece_keys`, and from the same read of the piece its live documents' lowest ``bits`` bits
    for scoring (:func:`dedup_cli.engine.dask.ranges.reduce_piece`): the signatures are read once for both."""
    counts, runs, packed = read_piece_values(piece, params)
    docs = piece_documents(numbers, counts.size)
    keys = _keys(docs, counts, packed, params, rows, first_band, last_band, dtype)
    return keys, live_reduced(counts, runs, packed, docs, params, bits)


def _keys(docs: np.ndarray, counts: np.ndarray, packed: np.ndarray, params: SignatureParams, rows: int,
          first_band: int, last_band: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    eligible = (counts > 0) & (docs >= 0)  # a document with no shingle resembles nothing; a dead row is none
    if not eligible.any():
        return docs[:0], np.empty((last_band - first_band, 0), dtype)
    keys = block_band_keys(packed, None if eligible.all() else eligible, params.bits, params.num_perm, first_band,
                           last_band, rows, dtype)
    return docs[eligible], keys


def _codes_table(codes: np.ndarray) -> Table:
    return CODES.of(code=codes)


def unique_codes(table: Table) -> Table:
    """A part of codes, ascending and without repeats."""
    return CODES.of(code=sorted_unique(table["code"].astype(np.uint64, copy=False)))


@dataclass(frozen=True)
class _Plan:
    """How the rounds run: on which workers, split by bands or by documents, how many bands a round."""

    workers: list[str]  # the cluster's workers, sorted
    split_bands: bool  # every worker reads every piece and pairs whole bands of its own (nothing exchanged)
    shares: list[list[int]]  # split by documents: the pieces of each share
    placed: list[str]  # split by documents: the worker of each share
    dtype: np.dtype  # of a band key
    per_round: int  # bands a round
    bits: int  # split by documents: fingerprint bits


def _plan(numbered: NumberedPieces, rows: int, band_memory: int | None) -> _Plan:
    """Split by bands when the store is files (each worker reads every piece: from the page cache when the
    workers share a machine, else from the file system they share; from object storage each would fetch the
    whole store) and one band of every document fits one task (:data:`BAND_SPLIT_DOCUMENTS`, and
    :data:`SORT_BYTES` a document within a quarter of a worker's memory); else by documents, into shares.

    On hosts of their own the band split reads the store's signatures once a worker (k·B/8 bytes a document,
    from disk), where the document split sends the fingerprints and crossing rows of every band between them and
    sorts every band's keys twice (docs/scaling.md has the measured bytes and CPU of both)."""
    documents = numbered.documents
    info = get_client().scheduler_info()["workers"]
    workers = sorted(info)
    # A round must fit beside everything else a worker holds: at most a quarter of its memory limit.
    limits = [int(info[worker].get("memory_limit") or 0) for worker in workers]
    # Unset, a round takes that quarter (1 GiB on workers without a limit).
    if all(limits):
        band_memory = min(limits) // 4 if band_memory is None else min(band_memory, min(limits) // 4)
    elif band_memory is None:
        band_memory = BAND_MEMORY
    dtype = key_dtype(rows, value_dtype(numbered.params.bits))
    sortable = documents <= BAND_SPLIT_DOCUMENTS and (not all(limits) or SORT_BYTES * documents <= min(limits) // 4)
    local_files = not any(is_url(piece.path) for piece, _ in numbered.pieces)
    if numbered.pieces and local_files and sortable:
        # A worker holds its bands' keys of every document, as each of the local engine's workers holds its round's
        # (the one band it sorts at a time needs SORT_BYTES a document beside them, checked above).
        per_worker = max(1, band_memory // max(1, numbered.eligible * dtype.itemsize))
        return _Plan(workers, True, [], [], dtype, per_worker * len(workers), 0)
    shares = share_tasks.plan_shares(numbered, len(workers), SHARE_DOCUMENTS)
    placed = [workers[index % len(workers)] for index in range(len(shares))]
    partition_rows = share_tasks.partition_rows(numbered)
    held = max(sum(int(partition_rows[share].sum()) for share in shares[index::len(workers)])
               for index in range(min(len(workers), len(shares))))
    # A share's round holds its pieces' keys while it sorts them into hashes and positions: three times a key.
    per_round = max(1, band_memory // max(1, held * 3 * dtype.itemsize))
    return _Plan(workers, False, shares, placed, dtype, per_round, fingerprint_bits(documents, 8 * dtype.itemsize))


@dataclass
class _RoundGraph:
    """The tasks of one round, not yet computed."""

    code_parts: list[Any] = field(default_factory=list)  # delayed numbered of pair codes
    cut: list[Any] = field(default_factory=list)  # delayed counts of buckets cut
    fingerprint_sizes: list[Any] = field(default_factory=list)  # per share: int64[owners], fingerprint bytes sent
    crossing_rows: list[Any] = field(default_factory=list)  # per share: int64[owners], crossing rows sent
    values: dict[int, Any] = field(default_factory=dict)  # piece → its b-bit values, when the round reads them


def band_share_pairs(pieces: list[tuple[StorePiece, int | np.ndarray]], params: SignatureParams, rows: int,
                     first_band: int, last_band: int, dtype: np.dtype, max_bucket: int, documents: int,
                     reduce: list[int],
                     reduce_bits: int | None) -> tuple[np.ndarray, int, list[Table]]:
    """A worker's bands ``first_band`` … ``last_band`` − 1 of every document (split by bands): every piece read
    here, and each band paired whole as the local engine pairs it (:func:`dedup_cli.candidates.buckets.
    band_pair_codes`). Returns the sorted distinct codes, the buckets cut, and with ``reduce_bits`` the b-bit
    values of the pieces numbered ``reduce``, made from the same reads."""
    reduced = []
    # [band, document], filled record batch by record batch from Arrow's buffers (joining a piece's batches, or
    # concatenating the pieces, would copy every signature or key once more): each band contiguous.
    keys = large_empty((last_band - first_band, sum(piece.rows for piece, _ in pieces)), dtype)
    docs = large_empty(keys.shape[1], np.int64)
    filled = 0
    for index, (piece, numbers) in enumerate(pieces):
        reducing = reduce_bits is not None and index in reduce
        values_of_piece = []
        piece_docs = piece_documents(numbers, piece.rows)
        first = 0
        for counts, runs, packed in read_piece_batches(piece, params, runs=reducing):
            batch_docs = piece_docs[first : first + counts.size]
            first += counts.size
            # A document with no shingle resembles nothing; a dead row (replaced or removed) is no document.
            eligible = (counts > 0) & (batch_docs >= 0)
            count = int(np.count_nonzero(eligible))
            all_eligible = count == counts.size
            block_band_keys(packed, None if all_eligible else eligible, params.bits, params.num_perm, first_band,
                            last_band, rows, dtype, out=keys[:, filled : filled + count])
            docs[filled : filled + count] = batch_docs if all_eligible else batch_docs[eligible]
            filled += count
            if reducing:
                assert reduce_bits is not None and runs is not None
                values_of_piece.append(live_reduced(counts, runs, packed, batch_docs, params, reduce_bits))
        if reducing:
            reduced.append(joined(values_of_piece, VALUES))
    codes, oversized = round_pair_codes(keys[:, :filled], docs[:filled], max_bucket, documents)
    return codes, oversized, reduced


def _band_split_round(numbered: NumberedPieces, plan: _Plan, rows: int, first_band: int, last_band: int,
                      max_bucket: int, reduce_bits: int | None) -> _RoundGraph:
    """Split by bands: the round's bands cut into one consecutive range a worker, one task each."""
    assert numbered.pieces is not None
    count = last_band - first_band
    takers = min(len(plan.workers), count)
    edges = [first_band + count * index // takers for index in range(takers + 1)]
    partitions = len(numbered.pieces)
    graph = _RoundGraph()
    for index in range(takers):
        # Each worker also makes the b-bit values of a run of the pieces, from the reads it does anyway.
        reduce = list(range(partitions * index // takers, partitions * (index + 1) // takers))
        with dask.annotate(workers=[plan.workers[index]], allow_other_workers=True):
            codes, cut, reduced = dask.delayed(band_share_pairs, nout=3)(
                numbered.pieces, numbered.params, rows, edges[index], edges[index + 1], plan.dtype, max_bucket,
                numbered.documents, reduce, reduce_bits)
        graph.code_parts.append(dask.delayed(_codes_table)(codes))
        graph.cut.append(cut)
        if reduce_bits is not None:
            graph.values.update({p: reduced[position] for position, p in enumerate(reduce)})
    return graph


def _share_keys(numbered: NumberedPieces, members: list[int], rows: int, first_band: int, last_band: int,
                dtype: np.dtype, reduce_bits: int | None, graph: _RoundGraph) -> list[Any]:
    """Split by documents: the delayed keys of a share's pieces, read where the share runs (and with
    ``reduce_bits`` their b-bit values from the same reads, into ``graph.values``)."""
    params = numbered.params
    if reduce_bits is not None:
        both = {p: dask.delayed(read_keys_and_values, nout=2)(*numbered.pieces[p], params, rows, first_band,
                                                              last_band, dtype, reduce_bits) for p in members}
        graph.values.update({p: both[p][1] for p in members})
        return [both[p][0] for p in members]
    return [dask.delayed(read_piece_keys)(*numbered.pieces[p], params, rows, first_band, last_band, dtype)
            for p in members]


def _document_split_round(numbered: NumberedPieces, plan: _Plan, rows: int, first_band: int, last_band: int,
                          max_bucket: int, reduce_bits: int | None) -> _RoundGraph:
    """Split by documents (steps 1 to 3 of the module docstring): every task of a share runs on its worker; what
    goes to an owner is cut out there first, so that only the owner's part travels."""
    documents, bits, slices = numbered.documents, plan.bits, len(plan.shares)
    graph = _RoundGraph()
    states, outgoing = [], []
    for members, worker in zip(plan.shares, plan.placed, strict=True):
        with dask.annotate(workers=[worker], allow_other_workers=True):
            parts = _share_keys(numbered, members, rows, first_band, last_band, plan.dtype, reduce_bits, graph)
            state, found, size = dask.delayed(crossing_rounds.share_round, nout=3)(parts, first_band, bits, slices,
                                                                               max_bucket)
            outgoing.append([dask.delayed(share_tasks.sets_for)(found, owner)
                             for owner in range(slices if slices > 1 else 0)])
        states.append(state)
        graph.fingerprint_sizes.append(size)
    splits, owned = [], []
    if slices == 1:
        with dask.annotate(workers=[plan.placed[0]], allow_other_workers=True):
            splits.append(dask.delayed(crossing_rounds.share_split, nout=2)(states[0], [], bits, documents))
    else:
        answers = []
        for owner in range(slices):
            with dask.annotate(workers=[plan.placed[owner]], allow_other_workers=True):
                answers.append(dask.delayed(crossing_rounds.owner_answers)([sent[owner] for sent in outgoing]))
        rows_out = []
        for share in range(slices):
            with dask.annotate(workers=[plan.placed[share]], allow_other_workers=True):
                split = dask.delayed(crossing_rounds.share_split, nout=2)(
                    states[share], [answer[share] for answer in answers], bits, documents)
                rows_out.append([dask.delayed(share_tasks.rows_for)(split[0], owner) for owner in range(slices)])
            splits.append(split)
        for owner in range(slices):
            with dask.annotate(workers=[plan.placed[owner]], allow_other_workers=True):
                owned.append(dask.delayed(crossing_rounds.owner_pairs, nout=2)(
                    [sent[owner] for sent in rows_out], max_bucket, documents))
    graph.code_parts = [dask.delayed(_codes_table)(dask.delayed(share_tasks.split_codes)(split[0]))
                        for split in splits]
    graph.code_parts += [dask.delayed(_codes_table)(pairs[0]) for pairs in owned]
    graph.cut = [dask.delayed(share_tasks.split_oversized)(split[0]) for split in splits]
    graph.cut += [pairs[1] for pairs in owned]
    graph.crossing_rows = [split[1] for split in splits]
    return graph


@dataclass
class _RoundDone:
    """A computed round: its codes (persisted on the workers), what it cost, and the b-bit values it read."""

    kept: list[Any]
    stats: np.ndarray  # int64[5]: buckets cut, fingerprint bytes, of them across workers, crossing rows, codes
    values: list[Any] | None


def _computed(graph: _RoundGraph, plan: _Plan) -> _RoundDone:
    """One computation per round: its codes stay on the workers, and only then are the next round's keys made,
    so at most one round's keys exist at a time."""
    read_values = [graph.values[p] for p in sorted(graph.values)]  # every piece, in order
    parts = graph.code_parts
    *kept, round_cut, round_sizes, round_rows, made = settled(
        *parts, *read_values, dask.delayed(sum)(graph.cut), dask.delayed(list)(graph.fingerprint_sizes),
        dask.delayed(list)(graph.crossing_rows), dask.delayed(sum)([dask.delayed(row_count)(part) for part in parts]))
    round_cut, round_sizes, round_rows, made = dask.compute(round_cut, round_sizes, round_rows, made)
    fingerprint = int(sum(int(np.sum(per_owner)) for per_owner in round_sizes))
    across = int(sum(size for sender, per_owner in enumerate(round_sizes)
                     for owner, size in enumerate(per_owner.tolist()) if plan.placed[owner] != plan.placed[sender]))
    crossing = int(sum(int(np.sum(counts)) for counts in round_rows))
    return _RoundDone(kept[:len(parts)], np.array([int(round_cut), fingerprint, across, crossing, int(made)]),
                      kept[len(parts):] if read_values else None)


def candidate_pairs(numbered: NumberedPieces, bands: int, rows: int, max_bucket: int, band_memory: int | None,
                    progress: Progress = silent, resume: Resume | None = None,
                    reduce_bits: int | None = None) -> CandidateCodes:
    """The candidate pairs of banding the stored values into ``bands`` × ``rows`` (bands · rows ≤ k).

    ``band_memory``: the band keys a worker may hold in one round (all its shares' keys of the round's bands); at
    most a quarter of the smallest worker's memory limit, and that quarter when None.
    ``resume``: the run's work folder, where each round's pairs are kept as it completes (``find --work-dir``); a
    round kept there by an earlier run with the same bands is read back instead of computed.
    ``reduce_bits``: also keep every document's lowest ``reduce_bits`` bits for scoring
    (:func:`dedup_cli.engine.dask.ranges.value_ranges`), made by the first round that reads the store's pieces
    from the same read as its keys (``CandidateCodes.reduced``; None when no round read them).
    """
    plan = _plan(numbered, rows, band_memory)
    totals = np.zeros(5, np.int64)  # buckets cut, fingerprint bytes, of them across workers, crossing rows, codes
    collected: list[Any] = []
    rounds = [(first, min(bands, first + plan.per_round)) for first in range(0, bands, plan.per_round)]
    resume = Resume(None, progress.note) if resume is None else resume
    work = resume.work
    keys, kept = resume.rounds(rounds, engine="dask", bands=bands, rows=rows, max_bucket=max_bucket)
    reduced: list[Any] | None = None  # the b-bit values of each piece, once a round has read them
    for number, (first_band, last_band) in enumerate(rounds, start=1):
        key = keys[number - 1]
        if number - 1 in kept:
            assert work is not None and key is not None
            collected += kept_parts(work, "candidates", key, kept[number - 1], CODES)
            totals += kept[number - 1]["stats"].astype(np.int64)
            continue
        progress.stage(f"candidates, bands {first_band + 1}–{last_band} (round {number} of {len(rounds)})", None)
        reading = reduce_bits if reduced is None else None
        build = _band_split_round if plan.split_bands else _document_split_round
        done = _computed(build(numbered, plan, rows, first_band, last_band, max_bucket, reading), plan)
        if done.values is not None:
            reduced = done.values
        if work is not None and key is not None:
            keep_parts(work, "candidates", key, done.kept, {"stats": done.stats})
        totals += done.stats
        collected += done.kept
    oversized, fingerprint, across, crossing, shuffled = (int(total) for total in totals)
    codes = _deduplicated(collected, shuffled, progress)
    values = None
    if reduced is not None:
        values = list(settled(*in_ranges(reduced, numbered, VALUES)))
    shares = len(plan.workers) if plan.split_bands else len(plan.shares)
    stats = CandidateStats(len(rounds), shares, numbered.eligible * bands, fingerprint, across, crossing,
                           plan.dtype.itemsize + 8, shuffled, oversized)
    return CandidateCodes(codes, stats, values)


def _deduplicated(collected: list[Any], shuffled: int, progress: Progress) -> list[Any]:
    """Step 4: the codes of every round in one exchange on the code, each part sorted and without repeats."""
    progress.stage("candidates, de-duplicating pairs", None)
    outputs = max(1, -(-shuffled // ROWS_PER_PARTITION))
    return list(settled(*exchange(collected, column_hash, outputs, "code", outputs, then=unique_codes, kind=CODES)))
