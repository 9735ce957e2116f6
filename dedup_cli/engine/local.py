"""The local engine's ``find``: the stages of :mod:`dedup_cli.engine.find_stages`, one after the other, here.

The store is never held whole. Its documents are numbered by rank of id from the ``id`` and ``run`` columns
(:class:`dedup_cli.store.documents.NumberedDocuments`, about 16 bytes a document kept), the candidate pairs come
from the signatures streamed in rounds of bands (:mod:`dedup_cli.engine.band_rounds`), and only the documents of
candidate pairs are then read whole (ids, locations, signatures) into a store of their own, numbered in the same
order, on which scoring, exact checks, decisions and the end of find run: every stage there depends only on the
order of the documents, so the answer is the one of reading everything (docs/scaling.md). ``--candidates all``
compares every pair and so reads every eligible document.

The local engine's ``sign`` is :mod:`dedup_cli.engine.sign_workers`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dedup_cli.candidates.banding import BandingChoice, resolve_banding
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine import find_stages as stages
from dedup_cli.engine import forked
from dedup_cli.engine.band_rounds import streamed_candidates
from dedup_cli.engine.forked import forked_map, useful_workers
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.results import FindResult
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.options.finding import FindOptions
from dedup_cli.primitives import sorted_unique
from dedup_cli.store.checkpoints import WorkDir
from dedup_cli.store.documents import Mapper, NumberedDocuments
from dedup_cli.store.numbering import Documents
from dedup_cli.store.store import Store
from dedup_cli.verification import Verification

SCORE_FIELDS = ("first", "second", "matches", "estimate", "stderr", "ci_low", "ci_high")


def find(stores: Sequence[Store], options: FindOptions, progress: Progress = silent) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ R0 in a store (and a reference store) and group them.

    Args:
        stores: the store, then with ``options.against`` the reference store (same parameters, checked by
            :func:`dedup_cli.api.find.find`, which checked ``options`` against them too). Documents are
            numbered by (store, id): pairs inside the reference are left out (with ``only_across``, pairs inside
            the store too), and a group keeps a reference document.
        progress: told each stage as it begins, and its steps.
    """
    progress.stage("numbering the documents", None)
    with NumberedDocuments(stores) as documents:
        return find_documents(documents, options, progress, stores)


def find_documents(documents: Documents, options: FindOptions, progress: Progress = silent,
                   stores: Sequence[Store] = ()) -> FindResult:
    """:func:`find` of documents already numbered: a store's (and a reference store's), or texts signed in
    memory. ``stores``: the stores they come from, which a ``work_dir`` is keyed by (none in memory)."""
    params = documents.params
    threshold = options.threshold
    bits = options.bits_for(params.stored_bits)
    counts = documents.shingle_counts
    eligible = counts > 0  # a document with no shingle resembles nothing
    reference = None
    if documents.store_starts.size > 2:
        reference = np.arange(documents.documents) >= documents.store_starts[1]
    new = stages.new_documents(documents.runs, options.new_since, reference)
    work = None if options.work_dir is None or not stores else WorkDir(options.work_dir, stores)
    jobs = options.workers
    choice = None
    if options.candidates == "lsh":
        recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
        choice = resolve_banding(threshold, params.num_perm, params.stored_bits, recall, options.bands, options.rows,
                                 documents=int(np.count_nonzero(eligible)))
    # What each stage depends on besides the stores: a stage kept by an earlier run is reused only when all of it
    # matches (store.checkpoints).
    found_by = dict(method=options.candidates, max_bucket=options.max_bucket, threshold=threshold, bits=bits,
                    banding=None if choice is None else (choice.banding.bands, choice.banding.rows))
    scored_by = dict(found_by, new_since=options.new_since, only_across=options.only_across, ways=options.ways)
    decided_by = dict(scored_by, verify=options.verify)
    scored_key = None if work is None else work.key("scored", **scored_by)
    decided_key = None if work is None else work.key("decisions", **decided_by)
    kept_scores = None if work is None or scored_key is None else work.load("scored", scored_key)

    if kept_scores is None:
        first, second, oversized = _candidates(documents, eligible, choice, options, bits, progress, work)
        if new is not None and options.ways == 2:
            # Only pairs touching a new document matter; dropping the others before scoring saves the work.
            touching = stages.wanted(np.c_[first, second], new, reference, options.only_across)
            first, second = first[touching], second[touching]
        # From here on only the candidates' documents, numbered 0 … m − 1 in the same order.
        progress.stage("reading the candidates' documents", None)
        docs = sorted_unique(np.concatenate([first, second]))
        store = documents.stored(docs, mapper=_reader(documents, docs, jobs))
        values = store.values(bits)
        r = stages.set_size_ratios(store.shingle_counts, params.universe)
        progress.stage("scoring", None)
        scored = stages.score_in_chunks(values, np.searchsorted(docs, first), np.searchsorted(docs, second), r,
                                        bits, jobs)
        if work is not None and scored_key is not None:
            work.save("scored", scored_key, {"docs": docs, "oversized": np.array(oversized),
                                             **{name: getattr(scored, name) for name in SCORE_FIELDS}})
    else:
        progress.note(f"resuming: scored candidate pairs from {options.work_dir}")
        docs, oversized = kept_scores["docs"], int(kept_scores["oversized"])
        scored = ScoredPairs(**{name: kept_scores[name] for name in SCORE_FIELDS})
        progress.stage("reading the candidates' documents", None)
        store = documents.stored(docs, mapper=_reader(documents, docs, jobs))
        values = store.values(bits)
        r = stages.set_size_ratios(store.shingle_counts, params.universe)
    candidates = int(scored.first.size)
    reference = None if reference is None else reference[docs]
    new = None if new is None else new[docs]

    kept_decisions = None if work is None or decided_key is None else work.load("decisions", decided_key)
    if kept_decisions is None:
        progress.stage("exact checks", None)
        exact_all, verification = stages.verify_borderline(store, scored, threshold, options.verify, jobs)
        decided = stages.decide(scored.estimate, exact_all, threshold)
        # One file under two names is one document; across two stores it is a duplicate to report.
        same = decided if reference is None else decided & (reference[scored.first] == reference[scored.second])
        aliases = stages.alias_documents(store.paths, scored.first[same], scored.second[same])
        if aliases.size:
            decided &= stages.without(aliases, scored.first, scored.second)
        if work is not None and decided_key is not None:
            checked = -1 if verification is None else verification.checked
            missing = [] if verification is None else verification.unverifiable_documents
            work.save("decisions", decided_key, {"exact": exact_all, "decided": decided, "aliases": aliases,
                                                 "checked": np.array(checked), "unverifiable": np.array(missing, str)})
    else:
        progress.note(f"resuming: exact checks and decisions from {options.work_dir}")
        exact_all, decided, aliases = kept_decisions["exact"], kept_decisions["decided"], kept_decisions["aliases"]
        checked = int(kept_decisions["checked"])
        verification = None if checked < 0 else Verification(np.empty(0), checked,
                                                             kept_decisions["unverifiable"].tolist())
    progress.stage("groups", None)
    concluded = stages.conclude(store, values, r, scored, exact_all, decided, aliases, new, options, bits, reference)
    if work is not None:
        work.finish(options.keep_work)
    runs = documents.runs
    return FindResult(
        store=store,
        bits=bits,
        threshold=threshold,
        banding=None if choice is None else choice.banding,
        candidates=candidates,
        accepted=concluded.pairs,
        exact=concluded.exact,
        accepted_triples=concluded.triples,
        grouping=concluded.groups,
        weakest=concluded.weakest,
        kept=concluded.kept,
        oversized_buckets=oversized,
        eligible=int(np.count_nonzero(eligible)),
        verification=verification,
        aliases=int(aliases.size),
        seconds=0.0,
        estimator=stages.estimator_name(stages.set_size_ratios(counts, params.universe), bits),
        reference=reference,
        against=options.against,
        keep_field_problems=concluded.keep_field_problems,
        banding_choice=choice,
        documents=documents.documents,
        run_span=(int(runs.min()), int(runs.max())) if runs.size else None,
        reference_documents=None if reference is None else int(documents.documents - documents.store_starts[1]),
    )


def _candidates(documents: Documents, eligible: np.ndarray, choice: BandingChoice | None,
                options: FindOptions, bits: float, progress: Progress, work: WorkDir | None
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """The candidate pairs (document numbers) and the buckets cut: by banding in rounds, or every pair."""
    if choice is None:  # --candidates all
        keyed = np.flatnonzero(eligible)
        everything = documents.stored(keyed, mapper=_reader(documents, keyed, options.workers))
        advance = progress.stage("comparing every pair", int(keyed.size), "documents")
        ratios = stages.set_size_ratios(everything.shingle_counts, documents.params.universe)
        first, second = stages.every_pair_candidates(everything.values(bits), bits, options.threshold, ratios,
                                                     np.ones(keyed.size, bool), advance, options.workers)
        return keyed[first], keyed[second], 0
    jobs = useful_workers(options.workers, int(np.count_nonzero(eligible)), forked.BANDED_DOCUMENTS)
    found, _ = streamed_candidates(documents, eligible, choice.banding, options.max_bucket, progress,
                                   options.band_memory, work, jobs)
    return found.first, found.second, found.oversized_buckets


def _reader(documents: Documents, docs: np.ndarray, jobs: int) -> Mapper | None:
    """How to read the row groups of the documents ``docs``: in up to ``jobs`` worker processes when they are
    enough and the store's files can be read by forked processes, else in this one (None)."""
    workers = useful_workers(jobs, int(docs.size), forked.READ_DOCUMENTS)
    if workers <= 1 or not documents.reads_in_workers:
        return None

    def mapped(read: Callable[[Any], Any], groups: Sequence[Any]) -> Iterator[Any]:
        return forked_map(read, groups, workers, "reading the candidates' documents")

    return mapped
