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

from collections.abc import Sequence

import numpy as np

from dedup_cli.candidates.banding import resolve_banding
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine import find_stages as stages
from dedup_cli.engine.band_rounds import streamed_candidates
from dedup_cli.engine.progress import Progress, silent
from dedup_cli.engine.results import FindResult
from dedup_cli.estimates.pairs import score_pairs
from dedup_cli.options.finding import FindOptions
from dedup_cli.primitives import sorted_unique
from dedup_cli.store.documents import NumberedDocuments
from dedup_cli.store.store import Store


def find(stores: Sequence[Store], options: FindOptions, progress: Progress = silent) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ R0 in a store (and a reference store) and group them.

    Args:
        stores: the store, then with ``options.against`` the reference store (same parameters, checked by
            :func:`dedup_cli.commands.find.find`, which checked ``options`` against them too). Documents are
            numbered by (store, id): pairs inside the reference are left out (with ``only_across``, pairs inside
            the store too), and a group keeps a reference document.
        progress: told each stage as it begins, and its steps.
    """
    progress.stage("numbering the documents", None)
    with NumberedDocuments(stores) as documents:
        return _find(documents, options, progress, stores)


def _find(documents: NumberedDocuments, options: FindOptions, progress: Progress,
          stores: Sequence[Store]) -> FindResult:
    params = documents.params
    threshold = options.threshold
    bits = options.bits_for(params.bits)
    counts = documents.shingle_counts
    eligible = counts > 0  # a document with no shingle resembles nothing
    reference = None
    if len(stores) > 1:
        reference = np.arange(documents.documents) >= documents.store_starts[1]
    new = stages.new_documents(documents.runs, options.new_since, reference)

    # Candidates below R0 matter too: a triple's pairs only need R0 − margin, and verification may rescue
    # a pair the estimate put just under R0.
    choice = None
    oversized = 0
    if options.candidates == "all":
        keyed = np.flatnonzero(eligible)
        everything = documents.stored(keyed)
        advance = progress.stage("comparing every pair", int(keyed.size), "documents")
        first, second = stages.every_pair_candidates(everything.values(bits), bits, threshold,
                                                     stages.set_size_ratios(everything.shingle_counts,
                                                                            params.universe),
                                                     np.ones(keyed.size, bool), advance)
        first, second = keyed[first], keyed[second]
    else:
        recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
        choice = resolve_banding(threshold, params.num_perm, params.bits, recall, options.bands, options.rows,
                                 documents=int(np.count_nonzero(eligible)))
        found, _ = streamed_candidates(documents, eligible, choice.banding, options.max_bucket, progress,
                                       options.band_memory)
        first, second, oversized = found.first, found.second, found.oversized_buckets
    if new is not None and options.ways == 2:
        # Only pairs touching a new document matter; dropping the others before scoring saves the work.
        touching = stages.wanted(np.c_[first, second], new, reference, options.only_across)
        first, second = first[touching], second[touching]
    candidates = int(first.size)

    # From here on only the candidates' documents, numbered 0 … m − 1 in the same order.
    progress.stage("reading the candidates' documents", None)
    docs = sorted_unique(np.concatenate([first, second]))
    store = documents.stored(docs)
    first, second = np.searchsorted(docs, first), np.searchsorted(docs, second)
    reference = None if reference is None else reference[docs]
    new = None if new is None else new[docs]
    values = store.values(bits)
    r = stages.set_size_ratios(store.shingle_counts, params.universe)
    progress.stage("scoring", None)
    scored = score_pairs(values, first, second, r, bits)

    progress.stage("exact checks", None)
    exact_all, verification = stages.verify_borderline(store, scored, threshold, options.verify)
    decided = stages.decide(scored.estimate, exact_all, threshold)
    # One file under two names is one document; across two stores it is a duplicate to report.
    same = decided if reference is None else decided & (reference[scored.first] == reference[scored.second])
    aliases = stages.alias_documents(store.paths, scored.first[same], scored.second[same])
    if aliases.size:
        decided &= stages.without(aliases, scored.first, scored.second)
    progress.stage("groups", None)
    concluded = stages.conclude(store, values, r, scored, exact_all, decided, aliases, new, options, bits, reference)
    runs = documents.runs
    return FindResult(
        store=store,
        bits=bits,
        threshold=threshold,
        banding=None if choice is None else choice.banding,
        candidates=candidates,
        pairs=concluded.pairs,
        exact=concluded.exact,
        triples=concluded.triples,
        groups=concluded.groups,
        weakest=concluded.weakest,
        kept=concluded.kept,
        oversized_buckets=oversized,
        eligible=int(np.count_nonzero(eligible)),
        verification=verification,
        aliases=int(aliases.size),
        seconds=0.0,
        estimator=stages.estimator_name(stages.set_size_ratios(counts, params.universe)),
        reference=reference,
        against=options.against,
        keep_field_problems=concluded.keep_field_problems,
        banding_choice=choice,
        documents=documents.documents,
        run_span=(int(runs.min()), int(runs.max())) if runs.size else None,
        reference_documents=None if len(stores) < 2 else int(documents.documents - documents.store_starts[1]),
    )
