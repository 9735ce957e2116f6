"""The local engine's ``find``: the stages of :mod:`dedup_cli.engine.find_stages`, one after the other, here.

``find`` holds the whole store in memory (about 1.5 KB a document at k = 256, docs/scaling.md). The local
engine's ``sign`` is :mod:`dedup_cli.engine.sign_workers`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dedup_cli.candidates.banding import resolve_banding
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine import find_stages as stages
from dedup_cli.engine.results import FindResult
from dedup_cli.estimates.pairs import score_pairs
from dedup_cli.estimates.triples import score_triples
from dedup_cli.groups.representatives import representatives, weakest_estimates
from dedup_cli.minhash.packing import lowest_bits
from dedup_cli.options.finding import FindOptions
from dedup_cli.store.snapshot import StoredSignatures


def find(store: StoredSignatures, options: FindOptions, progress: Callable[[int], None] | None = None,
         reference: np.ndarray | None = None) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ R0 in ``store`` and group them.

    Args:
        store: the live rows, read by :func:`dedup_cli.commands.find.find` (which checked ``options``
            against the store's parameters).
        options: what to find and report.
        progress: told the number of documents the all-pairs kernel has processed.
        reference: bool[n_docs], with ``options.against``: True for the reference store's documents (see
            :func:`dedup_cli.engine.find_stages.combine_stores`). Pairs inside the reference are left out
            (and with ``only_across``, pairs inside the new store too); a group keeps a reference document.
    """
    params = store.params
    threshold = options.threshold
    bits = options.bits_for(params.bits)
    eligible = store.shingle_counts > 0  # a document with no shingle resembles nothing
    stored_values = store.values()
    values = lowest_bits(stored_values, bits)
    r = stages.set_size_ratios(store.shingle_counts, params.universe)
    new = None if options.new_since is None else store_runs(store) > options.new_since
    if reference is not None:
        new = ~reference if new is None else new & ~reference

    def wanted(docs: np.ndarray) -> np.ndarray:
        """bool[m]: pairs or triples (int64[m, 2 or 3]) to report: touching a new document, and with
        ``only_across`` holding documents of both stores."""
        keep = np.ones(docs.shape[0], bool) if new is None else new[docs].any(axis=1)
        if reference is not None and options.only_across:
            keep &= reference[docs].any(axis=1) & ~reference[docs].all(axis=1)
        return keep

    # Candidates below R0 matter too: a triple's pairs only need R0 − margin, and verification may rescue
    # a pair the estimate put just under R0.
    banding = None
    oversized = 0
    if options.candidates == "all":
        first, second = stages.every_pair_candidates(values, bits, threshold, r, eligible, progress)
    else:
        recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
        banding = resolve_banding(threshold, params.num_perm, params.bits, recall, options.bands, options.rows)
        first, second, oversized = stages.lsh_candidates(stored_values, banding, eligible, options.max_bucket)
    if new is not None and options.ways == 2:
        # Only pairs touching a new document matter; dropping the others before scoring saves the work.
        touching = wanted(np.c_[first, second])
        first, second = first[touching], second[touching]
    scored = score_pairs(values, first, second, r, bits)

    exact_all, verification = stages.verify_borderline(store, scored, threshold, options.verify)
    decided = stages.decide(scored.estimate, exact_all, threshold)
    # One file under two names is one document; across two stores it is a duplicate to report.
    same = decided if reference is None else decided & (reference[scored.first] == reference[scored.second])
    aliases = stages.alias_documents(store.paths, scored.first[same], scored.second[same])
    if aliases.size:
        decided &= stages.without(aliases, scored.first, scored.second)
    accepted = scored.select(decided)
    exact = exact_all[decided]

    found_triples = None
    if options.ways == 3:
        found_triples = stages.find_triples(values, scored, r, threshold, bits)
        if aliases.size:
            found_triples = found_triples.select(np.asarray(~np.isin(found_triples.docs, aliases).any(axis=1)))
        if new is not None:
            # Triangles need the old-old pairs too, so triples are filtered only now.
            found_triples = found_triples.select(wanted(found_triples.docs))
            accepted_new = wanted(np.c_[accepted.first, accepted.second])
            exact = exact[accepted_new]
            accepted = accepted.select(accepted_new)

    # What is known of each accepted pair: its exact resemblance where it was checked, else its estimate.
    similarity = np.where(np.isnan(exact), accepted.estimate, exact)
    triple_ok = None
    if options.group == "strict" and options.ways == 3:
        def triple_ok(docs: np.ndarray) -> np.ndarray:
            return score_triples(values, docs, r, bits).estimate >= threshold
    groups = stages.group(len(store), accepted.first, accepted.second, similarity, options.group, triple_ok)
    scores, problems = None, list[tuple[str, str]]()
    if options.keep_field is not None:
        scores, problems = stages.keep_field_values(store, groups.members, options.keep_field)
    return FindResult(
        store=store,
        bits=bits,
        threshold=threshold,
        banding=banding,
        candidates=int(scored.first.size),
        pairs=accepted,
        exact=exact,
        triples=found_triples,
        groups=groups,
        weakest=weakest_estimates(groups, accepted.first, accepted.second, similarity),
        kept=representatives(groups, options.keep_policy, store.shingle_counts, store_runs(store), store.mtimes_ns,
                             scores, reference),
        oversized_buckets=oversized,
        eligible=int(np.count_nonzero(eligible)),
        verification=verification,
        aliases=int(aliases.size),
        seconds=0.0,
        estimator=stages.estimator_name(r),
        reference=reference,
        against=options.against,
        keep_field_problems=problems,
    )


def store_runs(store: StoredSignatures) -> np.ndarray:
    """int64[n_docs]: the sign run that wrote each document (0 for a format 1 store)."""
    return store.runs if store.runs is not None else np.zeros(len(store), dtype=np.int64)
