"""The rounds of the candidate stage split by documents, on one share's or one owner's data: a share's band keys
sorted into its own buckets, the Elias–Fano coded fingerprints for their owners, the owners' answers, the share's
own pairs and crossing rows, and the owners' pairs of the buckets that cross shares (the algorithm of
:mod:`dedup_cli.candidates.crossing`, a round at a time). An engine runs each on the worker that holds its data
(the Dask engine: :mod:`dedup_cli.engine.dask.candidates`) and moves only what passes between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dedup_cli.array_primitives import pair_codes
from dedup_cli.candidates.buckets import PairCodes, band_pair_codes
from dedup_cli.candidates.crossing import (
    BandBuckets,
    absolute,
    band_buckets,
    fingerprints_of,
    member,
    owner_of,
    shared_fingerprints,
    slice_sets,
)
from dedup_cli.candidates.elias_fano import EliasFano


@dataclass
class ShareRound:
    """What sorting each band of a round gave a share, on its worker."""

    docs: np.ndarray  # int64[n], its eligible documents, ascending
    buckets: list[BandBuckets]  # per band: rows by hash, its own pairs (with fingerprints) and cut buckets


@dataclass
class ShareSplit:
    """What a share does with its rows of one round once it knows which cross: its own pairs, and per owner and
    band the crossing rows."""

    codes: np.ndarray
    oversized: int
    rows: list[list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=list)  # [owner][band] (keys, docs)


def share_round(parts: list[tuple[np.ndarray, np.ndarray]], first_band: int, bits: int, slices: int,
                max_bucket: int) -> tuple[ShareRound, list[list[EliasFano]], np.ndarray]:
    """A share's keys of one round sorted band by band into its own buckets, and per owner and band the coded set
    of its fingerprints (and their sizes in bytes, per owner)."""
    docs = np.concatenate([part[0] for part in parts])
    bands = parts[0][1].shape[0] if parts else 0
    # Pieces of a store whose parts' ids interleave number their rows out of order: a bucket's members are cut at
    # max_bucket in document order, so the share's rows are put in that order first.
    order = None if docs.size < 2 or bool(np.all(docs[1:] > docs[:-1])) else np.argsort(docs, kind="stable")
    if order is not None:
        docs = docs[order]
    # One band at a time: the share's keys of a band, sorted by hash (the rows are kept in that order).
    buckets = []
    for band in range(bands):
        keys = np.concatenate([part[1][band] for part in parts])
        buckets.append(band_buckets(keys if order is None else keys[order], docs, first_band + band, bits,
                                    max_bucket))
    sets: list[list[EliasFano]] = [[] for _ in range(slices if slices > 1 else 0)]
    for found in buckets:
        for owner, coded in enumerate(slice_sets(found.prints, bits, slices) if slices > 1 else []):
            sets[owner].append(coded)
        found.prints = found.prints[:0]  # sent; the rows are found again from the keys
    sizes = np.array([sum(coded.nbytes for coded in owned) for owned in sets], np.int64)
    return ShareRound(docs, buckets), sets, sizes


def owner_answers(sets: list[list[EliasFano]]) -> list[list[np.ndarray]]:
    """For one owner's range: per share and band, the fingerprints another share holds too."""
    shares, bands = len(sets), len(sets[0]) if sets else 0
    answers: list[list[np.ndarray]] = [[] for _ in range(shares)]
    for band in range(bands):
        for share, values in enumerate(shared_fingerprints([sets[s][band] for s in range(shares)])):
            answers[share].append(values)
    return answers


def share_split(state: ShareRound, answers: list[list[np.ndarray]], bits: int, documents: int
                ) -> tuple[ShareSplit, np.ndarray]:
    """A share's own pairs of one round less those of crossing buckets, its crossing rows per owner, and how
    many rows go to each owner."""
    slices = len(answers)
    codes = PairCodes()
    oversized = 0
    rows: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(slices)]
    for band, found in enumerate(state.buckets):
        crossing = absolute([answers[t][band] for t in range(slices)], bits)
        inner = ~member(found.pair_prints, crossing)
        codes.add(pair_codes(found.first[inner], found.second[inner], documents))
        oversized += int(np.count_nonzero(~member(found.cut_prints, crossing)))
        if not slices:
            continue
        # The crossing rows, found by binary search in the band's hash order, go to their owners as (hash,
        # document): the hash is a bijection of the key, so the owner's buckets are the keys'.
        sent = found.rows_of(crossing, bits)
        hashes = found.hashes[sent]
        sent_docs = state.docs[found.order[sent]]
        owner = owner_of(fingerprints_of(hashes, bits), bits, slices)
        for t in range(slices):
            mine = owner == t
            rows[t].append((hashes[mine], sent_docs[mine]))
    counts = np.array([sum(part[0].size for part in owned) for owned in rows], np.int64)
    return ShareSplit(codes.unique(), oversized, rows), counts


def owner_pairs(rows: list[list[tuple[np.ndarray, np.ndarray]]], max_bucket: int, documents: int
                ) -> tuple[np.ndarray, int]:
    """The pairs of the crossing buckets of one owner's range: per band, every share's rows in document order
    sorted by hash and paired; and the buckets cut."""
    codes = PairCodes()
    oversized = 0
    for band in range(len(rows[0]) if rows else 0):
        keys = np.concatenate([share[band][0] for share in rows])
        docs = np.concatenate([share[band][1] for share in rows])
        if docs.size > 1 and not bool(np.all(docs[1:] > docs[:-1])):  # shares of pieces whose ids interleave
            order = np.argsort(docs, kind="stable")
            keys, docs = keys[order], docs[order]
        found, cut = band_pair_codes(keys, docs, max_bucket, documents)
        codes.add(found)
        oversized += cut
    return codes.unique(), oversized
