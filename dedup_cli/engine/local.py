"""The local engine: sign's batches in worker processes of this machine, and find's stages in this process.

``find`` holds the whole store in memory (about 1.5 KB a document at k = 256, docs/scaling.md) and runs the
stages of :mod:`dedup_cli.engine.find_stages` one after the other; ``sign`` signs batches in ``jobs`` forked
worker processes, in order, so the store is the same whatever the number of workers.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from dedup_cli.candidates.banding import resolve_banding
from dedup_cli.candidates.triple_recall import pair_recall_for_triples
from dedup_cli.engine import find_stages as stages
from dedup_cli.engine.results import FindResult
from dedup_cli.engine.sign_stage import Record, hasher_for, sign_records
from dedup_cli.errors import DedupError
from dedup_cli.estimates.pairs import score_pairs
from dedup_cli.minhash.packing import lowest_bits
from dedup_cli.options.checks import literal
from dedup_cli.options.finding import FindOptions
from dedup_cli.params import SignatureParams
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.snapshot import StoredSignatures


def sign_batches(batches: Iterable[Sequence[Record]], params: SignatureParams, jobs: int
                 ) -> Iterator[tuple[Sequence[Record], DocumentBatch]]:
    """Sign batches in order, with ``jobs`` worker processes once there is more than one batch.

    Results come back in input order, so the store is byte-identical whatever ``jobs`` is; at most two
    batches per worker are in flight, so memory stays bounded.
    """
    hasher = hasher_for(params)
    iterator = iter(batches)
    first = next(iterator, None)
    if first is None:
        return
    second = next(iterator, None)
    if jobs <= 1 or second is None:  # one batch: a pool would only add start-up time
        yield first, sign_records(first, params, hasher)
        if second is not None:
            yield second, sign_records(second, params, hasher)
            for batch in iterator:
                yield batch, sign_records(batch, params, hasher)
        return
    # fork: workers inherit the imported modules, so they start in milliseconds; they only run numpy.
    context = multiprocessing.get_context("fork")
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            pending: deque[tuple[Sequence[Record], concurrent.futures.Future[DocumentBatch]]] = deque()
            for batch in _chain(first, second, iterator):
                pending.append((batch, pool.submit(sign_records, batch, params, hasher)))
                if len(pending) >= 2 * jobs:
                    done_batch, future = pending.popleft()
                    yield done_batch, future.result()
            while pending:
                done_batch, future = pending.popleft()
                yield done_batch, future.result()
    except BrokenProcessPool as error:
        # A worker was killed (out of memory, a signal): the run is discarded, the store stays as it was.
        raise DedupError(f"a signing worker process died ({literal(error)}); nothing was stored, run again "
                         "(with {jobs} 1 to sign in one process)", options=True) from error


def _chain(first: Sequence[Record], second: Sequence[Record], rest: Iterator[Sequence[Record]]
           ) -> Iterator[Sequence[Record]]:
    yield first
    yield second
    yield from rest


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
    new = stages.new_documents(stages.store_runs(store), options.new_since, reference)

    # Candidates below R0 matter too: a triple's pairs only need R0 − margin, and verification may rescue
    # a pair the estimate put just under R0.
    choice = None
    oversized = 0
    if options.candidates == "all":
        first, second = stages.every_pair_candidates(values, bits, threshold, r, eligible, progress)
    else:
        recall = pair_recall_for_triples(options.recall) if options.ways == 3 else options.recall
        choice = resolve_banding(threshold, params.num_perm, params.bits, recall, options.bands, options.rows,
                                 documents=int(np.count_nonzero(eligible)))
        first, second, oversized = stages.lsh_candidates(stored_values, choice.banding, eligible,
                                                         options.max_bucket)
    if new is not None and options.ways == 2:
        # Only pairs touching a new document matter; dropping the others before scoring saves the work.
        touching = stages.wanted(np.c_[first, second], new, reference, options.only_across)
        first, second = first[touching], second[touching]
    scored = score_pairs(values, first, second, r, bits)

    exact_all, verification = stages.verify_borderline(store, scored, threshold, options.verify)
    decided = stages.decide(scored.estimate, exact_all, threshold)
    # One file under two names is one document; across two stores it is a duplicate to report.
    same = decided if reference is None else decided & (reference[scored.first] == reference[scored.second])
    aliases = stages.alias_documents(store.paths, scored.first[same], scored.second[same])
    if aliases.size:
        decided &= stages.without(aliases, scored.first, scored.second)
    concluded = stages.conclude(store, values, r, scored, exact_all, decided, aliases, new, options, bits, reference)
    return FindResult(
        store=store,
        bits=bits,
        threshold=threshold,
        banding=None if choice is None else choice.banding,
        candidates=int(scored.first.size),
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
        estimator=stages.estimator_name(r),
        reference=reference,
        against=options.against,
        keep_field_problems=concluded.keep_field_problems,
        banding_choice=choice,
    )
