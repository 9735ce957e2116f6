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
from dedup_cli.engine.dask.candidates import CandidateStats, candidate_pairs
from dedup_cli.engine.dask.checkpoints import keep_frame, kept_frame
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import bit_columns, read_documents, reduced_frame, with_reference
from dedup_cli.engine.dask.joins import score_candidates, scored_meta
from dedup_cli.engine.filter_stages import member_details
from dedup_cli.engine.find_stages import conclude, estimator_name, new_documents, set_size_ratios, store_runs
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.results import FindResult
from dedup_cli.options.finding import FindOptions
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.pieces import store_pieces
from dedup_cli.store.store import Store
from dedup_cli.verification import Verification


def find(store: Store, options: FindOptions, shuffle_method: str | None = None,
         progress: Progress = silent, reference: Store | None = None) -> FindResult:
    """Find near-duplicates in ``store`` (and with ``options.against``, against the ``reference`` store) on the
    current Dask client's cluster (options already checked).

    The result's ``profile`` holds each stage's seconds and the rows and payload bytes its shuffles moved.
    """
    params = store.params
    bits = int(options.bits_for(params.bits))  # whole: FindOptions keeps b = 1/2 to the local engine
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
    if reference is not None:
        frames = with_reference(frames, read_documents(params, *store_pieces(reference), shuffle_method))
    if frames.documents == 0:
        return local.find([store] if reference is None else [store, reference], options)
    start = frames.reference_start
    lap("read")
    recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
    choice = resolve_banding(threshold, params.num_perm, params.bits, recall, options.bands, options.rows,
                             documents=frames.eligible)
    work = None if options.work_dir is None else WorkDir(options.work_dir, [store] if reference is None
                                                         else [store, reference])
    # What each kept stage depends on besides the store (store.checkpoints); the frames' divisions too, since a
    # kept frame is read back with them.
    scored_by = dict(engine="dask", banding=(choice.banding.bands, choice.banding.rows), bits=bits,
                     max_bucket=options.max_bucket, new_since=options.new_since, ways=options.ways,
                     divisions=frames.divisions, reference_start=start, only_across=options.only_across)
    scored_key = None if work is None else work.key("scored", **scored_by)
    decided_key = None if work is None else work.key("decisions", verify=options.verify, threshold=threshold,
                                                    **scored_by)
    kept_scores = None if work is None or scored_key is None else work.load("scored", scored_key)
    kept_decisions = None if work is None or decided_key is None else work.load("decisions", decided_key)
    progress_meta = scored_meta()
    if kept_scores is None:
        found = candidate_pairs(frames, choice.banding.bands, choice.banding.rows, options.max_bucket,
                                options.band_memory, shuffle_method, progress, work, reduce_bits=bits)
        stats = found.stats()
        lap("candidates")
    progress.stage("scoring the candidate pairs", None)
    # The b-bit values: read with the first round's keys, else (every round kept by an earlier run, or the
    # scores) read now.
    if kept_scores is None and found.reduced is not None:
        reduced = found.reduced
    else:
        (reduced,) = settled(reduced_frame(frames, bits))
    pairs_only = options.ways == 2  # triangles need every pair: triples are left out only at the end
    if kept_scores is None:
        (scored,) = settled(score_candidates(reduced, found, frames.divisions, bits, params,
                                             options.new_since if pairs_only else None, shuffle_method,
                                             start if pairs_only else None, options.only_across))
        if work is not None and scored_key is not None:
            keep_frame(work, "scored", scored_key, scored.to_delayed(), {"stats": stats.as_array()})
    else:
        assert work is not None and scored_key is not None
        progress.note(f"resuming: scored candidate pairs from {work.path}")
        scored = kept_frame(work, "scored", scored_key, kept_scores, progress_meta, frames.divisions)
        stats = CandidateStats.of_array(kept_scores["stats"])
        profile["candidates_seconds"] = 0.0
    lap("scoring")
    progress.stage("exact checks and decisions", None)
    decided_meta = scored_meta({"exact": np.dtype(np.float64), "decided": np.dtype(bool)})
    if kept_decisions is None:
        decided, checked = decisions.check_and_decide(scored, frames, options.verify, threshold, shuffle_method)
        alias_documents = decisions.aliases(decided, frames, shuffle_method)
        (decided,) = settled(decisions.accept(decided, alias_documents))
        if work is not None and decided_key is not None:
            keep_frame(work, "decisions", decided_key, decided.to_delayed(), {
                "aliases": alias_documents, "checked": np.array(-1 if checked is None else checked.checked),
                "unverifiable": np.array([] if checked is None else checked.unverifiable_documents, str)})
    else:
        assert work is not None and decided_key is not None
        progress.note(f"resuming: exact checks and decisions from {work.path}")
        decided = kept_frame(work, "decisions", decided_key, kept_decisions, decided_meta, frames.divisions)
        alias_documents = kept_decisions["aliases"]
        count = int(kept_decisions["checked"])
        checked = None if count < 0 else decisions.Checked(count, kept_decisions["unverifiable"].tolist())
    floor = gather.triple_floor(options, params.num_perm, bits)
    needed = decided.map_partitions(gather.needed, floor, meta=decided._meta)
    candidates, needed_count = dask.compute(scored.map_partitions(len).sum(), needed.map_partitions(len).sum())
    lap("decisions")
    word_bytes = 8 * len(bit_columns("s", bits, params.num_perm))
    profile.update(documents=frames.documents, partitions=len(frames.divisions) - 1, rounds=stats.rounds,
                   shares=stats.shares, band_keys=stats.band_keys, fingerprint_bytes=stats.fingerprint_bytes,
                   fingerprint_bytes_across=stats.fingerprint_bytes_across, crossing_rows=stats.crossing_rows,
                   crossing_bytes=stats.crossing_rows * stats.crossing_row_bytes, pair_codes=stats.shuffled_codes,
                   pair_code_bytes=8 * stats.shuffled_codes, candidates=int(candidates),
                   join_bytes=int(candidates) * (16 + 32 + word_bytes), in_order=float(frames.in_order),
                   needed_pairs=int(needed_count))
    verification = None if checked is None else Verification(np.empty(0), checked.checked,
                                                             checked.unverifiable_documents)
    common: dict[str, Any] = dict(
        bits=bits, threshold=threshold, banding=choice.banding, candidates=int(candidates),
        oversized_buckets=stats.oversized_buckets, eligible=frames.eligible, verification=verification,
        aliases=int(alias_documents.size), seconds=0.0, banding_choice=choice, documents=frames.documents,
        estimator=estimator_name(set_size_ratios(np.array([frames.max_shingle_count]), params.universe)),
        run_span=frames.run_span, against=options.against,
        reference_documents=None if start is None else frames.documents - start)
    # Past ``gather_limit`` pairs (about 100 bytes each with their documents), the end runs per connected
    # component on the workers and the output streams from them in chunks no larger.
    progress.stage("groups", None)
    if needed_count > options.gather_limit:
        result = tail.conclude_on_cluster(needed, frames, reduced, alias_documents, options, bits, common,
                                          shuffle_method)
    else:
        got = gather.gather(needed.compute(), params, frames, reduced, bits)
        in_reference = None if start is None else got.docs >= start
        new = new_documents(store_runs(got.store), options.new_since, in_reference)
        local_aliases = np.searchsorted(got.docs, alias_documents[np.isin(alias_documents, got.docs)])
        concluded = conclude(got.store, got.values, gather.ratios(got.store), got.scored, got.exact, got.decided,
                             local_aliases, new, options, bits, in_reference)
        result = FindResult(store=got.store, accepted=concluded.pairs, exact=concluded.exact,
                            accepted_triples=concluded.triples, grouping=concluded.groups, weakest=concluded.weakest,
                            kept=concluded.kept, keep_field_problems=concluded.keep_field_problems,
                            reference=in_reference, **common)
        # The gathered store holds b-bit values, not signatures: what filter needs of each member is found here.
        result.member_details = member_details(got.store, got.values, concluded.pairs, concluded.exact,
                                               concluded.groups, concluded.kept, bits)
    lap("end")
    if work is not None:
        work.finish(options.keep_work)
    result.profile = profile
    return result
