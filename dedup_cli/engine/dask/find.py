"""``find`` on a Dask cluster: the local engine's stages mapped over partitions, joined by shuffles.

read (pieces of the store, numbered by rank of id) → band keys per partition, candidates by a shuffle on the
bucket a few bands at a time, de-duplicated by a shuffle on the pair → scores by two range joins → exact checks
of the borderline pairs on the workers → decisions, aliases → the end of find (triples, groups, representatives)
on the gathered edges when they are few (:mod:`.gather`), else per connected component on the workers
(:mod:`.tail`). Every stage calls the local engine's functions on its part of the data, and documents are
numbered as the local engine numbers them, so the result is the same (docs/scaling.md, "The Dask engine").
"""

from __future__ import annotations

import time
from typing import Any

import dask
import numpy as np

from dedup_cli.candidates.banding import resolve_banding
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine import local
from dedup_cli.engine.dask import decisions, gather, tail
from dedup_cli.engine.dask.candidates import candidate_pairs
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import read_documents
from dedup_cli.engine.dask.joins import bit_columns, reduce_bits, reduced_meta, score_candidates
from dedup_cli.engine.find_stages import conclude, estimator_name, new_documents, set_size_ratios, store_runs
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.results import FindResult
from dedup_cli.options.finding import FindOptions
from dedup_cli.store.pieces import store_pieces
from dedup_cli.store.store import Store
from dedup_cli.verification import Verification


def find(store: Store, options: FindOptions, shuffle_method: str | None = None,
         progress: Progress = silent) -> FindResult:
    """Find near-duplicates in ``store`` on the current Dask client's cluster (options already checked).

    The result's ``profile`` holds each stage's seconds and the rows and payload bytes its shuffles moved.
    """
    params = store.params
    bits = options.bits_for(params.bits)
    threshold = options.threshold
    profile: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        profile[f"{stage}_seconds"] = now - clock
        clock = now

    progress.stage("reading the store's pieces", None)
    pieces, removals = store_pieces(store)
    frames = read_documents(params, pieces, removals, shuffle_method)
    if frames.documents == 0:
        return local.find([store], options)
    lap("read")
    recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
    choice = resolve_banding(threshold, params.num_perm, params.bits, recall, options.bands, options.rows,
                             documents=frames.eligible)
    found = candidate_pairs(frames, choice.banding.bands, choice.banding.rows, options.max_bucket,
                            options.band_memory, shuffle_method, progress)
    lap("candidates")
    progress.stage("scoring the candidate pairs", None)
    (reduced,) = settled(frames.values.map_partitions(reduce_bits, frames.words, params, bits,
                                                      meta=reduced_meta(bits, params.num_perm)))
    new_since = options.new_since if options.ways == 2 else None
    (scored,) = settled(score_candidates(reduced, found, frames.divisions, bits, params, new_since, shuffle_method))
    lap("scoring")
    progress.stage("exact checks and decisions", None)
    decided, checked = decisions.check_and_decide(scored, frames, options.verify, threshold, shuffle_method)
    alias_documents = decisions.aliases(decided, frames, shuffle_method)
    (decided,) = settled(decisions.accept(decided, alias_documents))
    floor = gather.triple_floor(options, params.num_perm, bits)
    needed = decided.map_partitions(gather.needed, floor, meta=decided._meta)
    candidates, needed_count = dask.compute(scored.map_partitions(len).sum(), needed.map_partitions(len).sum())
    lap("decisions")
    word_bytes = 8 * len(bit_columns("s", bits, params.num_perm))
    profile.update(documents=frames.documents, partitions=len(frames.divisions) - 1, rounds=found.rounds,
                   shares=found.shares, band_keys=found.band_keys, fingerprint_bytes=found.fingerprint_bytes,
                   fingerprint_bytes_across=found.fingerprint_bytes_across, crossing_rows=found.crossing_rows,
                   crossing_bytes=found.crossing_rows * found.crossing_row_bytes, pair_codes=found.shuffled_codes,
                   pair_code_bytes=8 * found.shuffled_codes,
                   candidates=int(candidates), join_bytes=int(found.codes.map_partitions(len).sum().compute())
                   * (16 + 32 + word_bytes), in_order=float(frames.in_order), needed_pairs=int(needed_count))
    verification = None if checked is None else Verification(np.empty(0), checked.checked,
                                                             checked.unverifiable_documents)
    common: dict[str, Any] = dict(
        bits=bits, threshold=threshold, banding=choice.banding, candidates=int(candidates),
        oversized_buckets=found.oversized_buckets, eligible=frames.eligible, verification=verification,
        aliases=int(alias_documents.size), seconds=0.0, banding_choice=choice, documents=frames.documents,
        estimator=estimator_name(set_size_ratios(np.array([frames.max_shingle_count]), params.universe)),
        run_span=frames.run_span)
    # Past ``gather_limit`` pairs (about 100 bytes each with their documents), the end runs per connected
    # component on the workers and the output streams from them in chunks no larger.
    progress.stage("groups", None)
    if needed_count > options.gather_limit:
        result = tail.conclude_on_cluster(needed, frames, reduced, alias_documents, options, bits, common,
                                          shuffle_method)
    else:
        got = gather.gather(needed.compute(), params, frames, reduced, bits)
        new = new_documents(store_runs(got.store), options.new_since, None)
        local_aliases = np.searchsorted(got.docs, alias_documents[np.isin(alias_documents, got.docs)])
        concluded = conclude(got.store, got.values, gather.ratios(got.store), got.scored, got.exact, got.decided,
                             local_aliases, new, options, bits)
        result = FindResult(store=got.store, pairs=concluded.pairs, exact=concluded.exact,
                            triples=concluded.triples, groups=concluded.groups, weakest=concluded.weakest,
                            kept=concluded.kept, keep_field_problems=concluded.keep_field_problems, **common)
    lap("end")
    result.profile = profile
    return result
