"""The candidate stage over a store streamed in rounds of bands: the keys of a few bands at a time, never every
band row of the corpus at once.

A round reads the stored signatures once (:meth:`dedup_cli.store.documents.NumberedDocuments.signatures`, a row
group at a time), keys its bands for the eligible documents (:func:`dedup_cli.candidates.buckets.block_band_keys`;
4 bytes a key when a band's values fit in 32 bits, 8 otherwise), then sorts each band and pairs its buckets
(:func:`dedup_cli.candidates.buckets.round_pair_codes`): the functions the Dask engine keys and pairs its bands with,
in the same document order as the in-memory :func:`dedup_cli.candidates.buckets.candidate_pairs`, so the same
pairs. A round holds at most ``round_bytes`` of keys: a few more rounds, each a fast read of the signatures,
instead of the 8·bands bytes a document that keying every band at once would take. By default the rounds of a
wave share a quarter of the machine's memory (:func:`dedup_cli.engine.find_memory.default_round_bytes`): a store
larger than the page cache is read from disk once a wave, so a fixed round size would make the reads, and the
time, grow as N² once N passes the memory.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dedup_cli.array_primitives import large_empty, shared_empty, sorted_unique
from dedup_cli.candidates.banding import Banding
from dedup_cli.candidates.buckets import CandidateResult, PairCodes, block_band_keys, key_dtype, round_pair_codes
from dedup_cli.engine.find_memory import band_rounds, default_round_bytes, wave_rounds
from dedup_cli.engine.local.key_spill import KeySpill, worth_spilling
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.resume import Resume
from dedup_cli.forked import forked_map
from dedup_cli.minhash.packing import value_dtype
from dedup_cli.store.numbering import Documents


def streamed_candidates(documents: Documents, eligible: np.ndarray, banding: Banding, max_bucket: int,
                        progress: Progress = silent, round_bytes: int | None = None, resume: Resume | None = None,
                        jobs: int = 1) -> tuple[CandidateResult, int]:
    """The candidate pairs of banding the stored values, reading the signatures once per round.

    With ``jobs`` > 1, up to ``jobs`` rounds run at once, a wave: the workers (forked, :mod:`dedup_cli.
    forked`) each read a share of the row groups into the wave's keys, which they share (anonymous shared memory,
    ``round_bytes`` a worker), then each sorts and pairs a share of every round's bands. A round's pairs are the
    same set whoever found them, kept sorted and distinct, so the result is the same bytes whatever ``jobs`` is.

    Args:
        documents: the store(s), numbered.
        eligible: bool[documents], the documents that take part (at least one shingle).
        banding: bands × rows, bands · rows ≤ k.
        round_bytes: the keys a round may hold (``FindOptions.band_memory``; 1 GiB is 24 bands of 32-bit keys at
            10^7 documents); each of the ``jobs`` processes holds one round's. None: the default,
            :func:`dedup_cli.engine.find_memory.default_round_bytes`.
        resume: the run's work folder, where each round's pairs are kept as it completes (``find --work-dir``); a
            round kept there by an earlier run of the same store and banding is read instead of computed.
        jobs: worker processes.

    Returns:
        the pairs (document numbers) and the number of rounds.
    """
    params = documents.params
    bands, rows = banding.bands, banding.rows
    keyed = np.flatnonzero(eligible)
    # A document's column in the keys: its place among the eligible; None when every document is (the usual case).
    slot = None
    if keyed.size != documents.documents:
        slot = np.full(documents.documents, -1, np.int64)
        slot[keyed] = np.arange(keyed.size, dtype=np.int64)
    dtype = key_dtype(rows, value_dtype(params.bits))
    if round_bytes is None:
        round_bytes = default_round_bytes(jobs)
    rounds = band_rounds(bands, keyed.size, dtype.itemsize, round_bytes)
    codes = PairCodes()
    oversized = 0
    resume = Resume(None, progress.note) if resume is None else resume
    keys, kept = resume.rounds(rounds, bands=bands, rows=rows, max_bucket=max_bucket, engine="local")
    for kept_round in kept.values():
        codes.add(kept_round["codes"])
        oversized += int(kept_round["oversized"])
    waiting = [(index + 1, first_band, last_band, keys[index])
               for index, (first_band, last_band) in enumerate(rounds) if index not in kept]
    wave_size = wave_rounds(rounds, keyed.size, dtype.itemsize, round_bytes, jobs)
    waves = [waiting[start : start + wave_size] for start in range(0, len(waiting), wave_size)]
    spill = _spill(waves, keyed.size, dtype, params.signature_bytes)
    try:
        for number, wave in enumerate(waves):
            found = _wave(documents, [(first, last) for _, first, last, _ in wave], rows, slot, keyed, dtype,
                          max_bucket, jobs, progress,
                          _wave_title([index for index, *_ in wave], wave[0][1], wave[-1][2], len(rounds)),
                          spill, from_spill=spill is not None and number > 0)
            for (_, _, _, key), (unique, round_cut) in zip(wave, found, strict=True):
                resume.save("candidates", key, {"codes": unique, "oversized": np.array(round_cut)})
                codes.add(unique)
                oversized += round_cut
    finally:
        if spill is not None:
            spill.close()
    return CandidateResult.of_codes(codes.unique(), documents.documents, oversized), len(rounds)


def _spill(waves: list[list[tuple[int, int, int, str | None]]], keyed_documents: int, dtype: np.dtype,
           signature_bytes: int) -> KeySpill | None:
    """Where the later waves would each read the store again for fewer bands than it holds values (:func:`dedup_cli.
    engine.local.key_spill.worth_spilling`), a spill of their bands' keys, which the first wave writes as it reads
    the store; None otherwise, or where no scratch folder can hold it."""
    if len(waves) < 2:
        return None
    wave_bands = max(wave[-1][2] - wave[0][1] for wave in waves)
    if not worth_spilling(wave_bands, dtype.itemsize, signature_bytes):
        return None
    later = [band for wave in waves[1:] for _, first, last, _ in wave for band in range(first, last)]
    return KeySpill.create(later, keyed_documents, dtype)


def _wave_title(numbers: list[int], first_band: int, last_band: int, rounds: int) -> str:
    which = f"round {numbers[0]}" if len(numbers) == 1 else f"rounds {numbers[0]}–{numbers[-1]}"
    return f"candidates, bands {first_band + 1}–{last_band} ({which} of {rounds})"


def _wave(documents: Documents, rounds: list[tuple[int, int]], rows: int, slot: np.ndarray | None, keyed: np.ndarray,
          dtype: np.dtype, max_bucket: int, jobs: int, progress: Progress, title: str,
          spill: KeySpill | None = None, from_spill: bool = False) -> list[tuple[np.ndarray, int]]:
    """The pairs of some consecutive rounds at once: (sorted distinct codes uint64[m], buckets cut) of each. With a
    ``spill``, the wave that reads the store also writes the later waves' keys into it, and those (``from_spill``)
    read their keys from it instead of the store."""
    first_band, last_band = rounds[0][0], rounds[-1][1]
    count = last_band - first_band
    keys = _keys_array(count, keyed.size, dtype, shared=jobs > 1)
    advance = progress.stage(title, documents.row_groups + count, "steps")
    if from_spill:
        assert spill is not None
        spill.fill(keys, first_band)
        advance(documents.row_groups)
    else:
        _read_keys(documents, keys, first_band, rows, slot, dtype, jobs, advance, spill)

    # Each round's bands in shares, one a worker; tasks in round order, so worker w takes share w of each round.
    shares = [(index, list(range(first - first_band, last - first_band))[part::jobs])
              for index, (first, last) in enumerate(rounds) for part in range(min(jobs, last - first))]

    def pair(share: tuple[int, list[int]]) -> tuple[np.ndarray, int]:
        """The distinct codes and buckets cut of some bands of one round."""
        return round_pair_codes(keys, keyed, max_bucket, documents.documents, share[1],
                                (lambda: advance(1)) if jobs <= 1 else None)

    found_by_round: list[list[np.ndarray]] = [[] for _ in rounds]
    cut_by_round = [0] * len(rounds)
    for (index, bands), (found, cut) in zip(shares, forked_map(pair, shares, jobs, "the candidate stage"),
                                            strict=True):
        found_by_round[index].append(found)
        cut_by_round[index] += cut
        if jobs > 1:
            advance(len(bands))
    # A round found in one share is sorted and distinct already; shares are merged as one (the same set).
    return [(parts[0] if len(parts) == 1 else sorted_unique(np.concatenate(parts)), cut)
            for parts, cut in zip(found_by_round, cut_by_round, strict=True)]


def _read_keys(documents: Documents, keys: np.ndarray, first_band: int, rows: int, slot: np.ndarray | None,
               dtype: np.dtype, jobs: int, advance: Callable[[int], None], spill: KeySpill | None) -> None:
    """Key the bands of ``keys`` (dtype[bands, keyed], bands ``first_band`` …) from the stored signatures, read by
    up to ``jobs`` forked readers a share of the row groups each; and the spilled bands into ``spill``."""
    params = documents.params
    last_band = first_band + keys.shape[0]
    keyed_last = last_band if spill is None else max(last_band, spill.last_band)
    readers = min(jobs, documents.row_groups) if documents.reads_in_workers else 1

    def read(part: int) -> int:
        """Fill this reader's share of the keys (every band of the wave, and the spilled ones); the row groups it
        read."""
        groups = 0
        for docs, packed in documents.signatures(part, readers):
            where = docs if slot is None else slot[docs]
            taken = None if slot is None else where >= 0
            # A row group may hold no live row (every one replaced or removed by later runs).
            if docs.size and (taken is None or taken.any()):
                # A row group of eligible documents only (the usual case) is read in place, not copied out first.
                every = taken is None or bool(taken.all())
                columns = where if every else where[taken]
                contiguous = columns[-1] - columns[0] == columns.size - 1 and bool(np.all(np.diff(columns) == 1))
                block = (packed, None if every else taken, params.bits, params.num_perm, first_band)
                # A run of consecutive documents (a row group of a store in id order) is written as rows of
                # contiguous writes, several times faster than scattering the same keys column by column.
                run = keys[:, columns[0] : columns[-1] + 1] if contiguous else None
                if spill is None and run is not None:
                    block_band_keys(*block, last_band, rows, dtype, out=run)
                else:
                    found = block_band_keys(*block, keyed_last, rows, dtype)
                    if run is not None:
                        run[...] = found[: keys.shape[0]]
                    else:
                        keys[:, columns] = found[: keys.shape[0]]
                    if spill is not None:
                        spill.write(found, first_band, columns)
            groups += 1
            if readers == 1:
                advance(1)
        return groups

    for groups in forked_map(read, range(readers), readers, "the candidate stage"):
        if readers > 1:
            advance(groups)


def _keys_array(bands: int, documents: int, dtype: np.dtype, shared: bool) -> np.ndarray:
    """An uninitialised dtype[bands, documents]; ``shared``: in anonymous shared memory, so that what forked
    workers write into it the driver (and the other workers) see."""
    if not shared or bands * documents == 0:
        return large_empty((bands, documents), dtype)
    return shared_empty((bands, documents), dtype)

