"""The candidate stage over a store streamed in rounds of bands: the keys of a few bands at a time, never every
band row of the corpus at once.

A round reads the stored signatures once (:meth:`dedup_cli.store.documents.NumberedDocuments.signatures`, a row
group at a time), keeps the keys of its bands for the eligible documents (4 bytes a key when a band's values fit
in 32 bits, 8 otherwise), then sorts each band and pairs its buckets (:func:`dedup_cli.candidates.buckets.
band_pair_codes`, the same function and document order as the in-memory :func:`candidate_pairs`, so the same
pairs). A round holds at most ``round_bytes`` of keys: a few more rounds, each a fast read of the signatures,
instead of the 8·bands bytes a document that keying every band at once would take.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.candidates.banding import Banding
from dedup_cli.candidates.buckets import CandidateResult, PairCodes, band_keys, band_pair_codes, key_dtype
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.minhash.packing import unpack_values, value_dtype
from dedup_cli.options.vocabulary import BAND_MEMORY
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.numbering import Documents


def band_rounds(bands: int, keyed_documents: int, key_bytes: int, round_bytes: int) -> list[tuple[int, int]]:
    """(first band, last band + 1) of each round, so that a round's keys take at most ``round_bytes`` (one band a
    round at least)."""
    per_round = max(1, round_bytes // max(1, keyed_documents * key_bytes))
    return [(first, min(bands, first + per_round)) for first in range(0, bands, per_round)]


def streamed_candidates(documents: Documents, eligible: np.ndarray, banding: Banding, max_bucket: int,
                        progress: Progress = silent, round_bytes: int = BAND_MEMORY, work: WorkDir | None = None
                        ) -> tuple[CandidateResult, int]:
    """The candidate pairs of banding the stored values, reading the signatures once per round.

    Args:
        documents: the store(s), numbered.
        eligible: bool[documents], the documents that take part (at least one shingle).
        banding: bands × rows, bands · rows ≤ k.
        round_bytes: the keys a round may hold (``FindOptions.band_memory``; 1 GiB is 24 bands of 32-bit keys at
            10^7 documents).
        work: where each round's pairs are kept as it completes (``find --work-dir``); a round kept there by an
            earlier run of the same store and banding is read instead of computed.

    Returns:
        the pairs (document numbers) and the number of rounds.
    """
    params = documents.params
    bands, rows = banding.bands, banding.rows
    keyed = np.flatnonzero(eligible)
    slot = np.full(documents.documents, -1, np.int64)
    slot[keyed] = np.arange(keyed.size, dtype=np.int64)
    dtype = key_dtype(rows, value_dtype(params.bits))
    rounds = band_rounds(bands, keyed.size, dtype.itemsize, round_bytes)
    codes = PairCodes()
    oversized = 0
    reused: list[tuple[int, int]] = []
    for number, (first_band, last_band) in enumerate(rounds, start=1):
        key = None if work is None else work.key("candidates", bands=bands, rows=rows, first_band=first_band,
                                                  last_band=last_band, max_bucket=max_bucket, engine="local")
        kept = None if work is None or key is None else work.load("candidates", key)
        if kept is not None:
            codes.add(kept["codes"])
            oversized += int(kept["oversized"])
            reused.append((first_band, last_band))
            continue
        round_codes = PairCodes()
        round_cut = 0
        count = last_band - first_band
        keys = np.empty((count, keyed.size), dtype)
        advance = progress.stage(f"candidates, bands {first_band + 1}–{last_band} (round {number} of "
                                 f"{len(rounds)})", documents.row_groups + count, "steps")
        for docs, packed in documents.signatures():
            where = slot[docs]
            taken = where >= 0
            if taken.any():
                values = unpack_values(packed[taken], params.bits, params.num_perm)
                block = values[:, first_band * rows : last_band * rows]
                keys[:, where[taken]] = band_keys(block, count, rows, dtype)
            advance(1)
        for band in range(count):
            found, cut = band_pair_codes(keys[band], keyed, max_bucket, documents.documents)
            round_codes.add(found)
            round_cut += cut
            advance(1)
        del keys
        unique = round_codes.unique()
        if work is not None and key is not None:
            work.save("candidates", key, {"codes": unique, "oversized": np.array(round_cut)})
        codes.add(unique)
        oversized += round_cut
    if reused:
        progress.note(f"resuming: candidates for {band_ranges(reused)} from {work.path if work else ''}")
    return CandidateResult.of_codes(codes.unique(), documents.documents, oversized), len(rounds)


def band_ranges(rounds: list[tuple[int, int]]) -> str:
    """Rounds (first band, last band + 1) as the user counts bands: ``bands 1–24, 37–48``."""
    merged: list[list[int]] = []
    for first, last in rounds:
        if merged and merged[-1][1] == first:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return "bands " + ", ".join(f"{first + 1}–{last}" for first, last in merged)
