"""Finding: signatures → candidate pairs (and triples) → estimates → optional exact checks → groups.

Candidates come from LSH banding on all stored bits (or from comparing every pair); every candidate is
scored with the b-bit estimator (Li & König 2010, eq. 9), pairs whose interval straddles R0 may be checked
exactly, and accepted pairs (and with ``ways=3`` triples, Li, König & Gui 2010, eq. 8) become groups.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dedup_cli import allpairs, triples
from dedup_cli.arrays import sorted_unique
from dedup_cli.corpus import same_file_aliases
from dedup_cli.errors import UsageError
from dedup_cli.grouping import (
    GROUP_METHODS,
    KEEP_CHOICES,
    Groups,
    group_components,
    representatives,
    strict_groups,
    weakest_estimates,
)
from dedup_cli.lsh import Banding, candidate_pairs, resolve_banding
from dedup_cli.scoring import ScoredPairs, score_pairs
from dedup_cli.signatures import SignatureParams, lowest_bits
from dedup_cli.storage import StoredSignatures, open_store
from dedup_cli.triples import ScoredTriples
from dedup_cli.verification import VERIFY_MODES, Verification, pairs_to_verify, verify_pairs

# Above this r = f/D the sparse-limit coefficients are visibly off; find says it used the precise ones.
DENSE_R = 1e-4
CANDIDATE_METHODS = ("lsh", "all")


@dataclass
class FindResult:
    """Everything ``find`` learned, for printing in any format."""

    store: StoredSignatures
    bits: int
    threshold: float
    banding: Banding | None  # None with candidates="all"
    candidates: int
    pairs: ScoredPairs  # accepted pairs
    exact: np.ndarray  # float64[n_accepted], exact resemblance where verified, NaN elsewhere
    triples: ScoredTriples | None
    groups: Groups
    weakest: np.ndarray  # float64[n_groups]
    kept: np.ndarray  # int64[n_groups], the representative of each group
    oversized_buckets: int
    eligible: int
    verification: Verification | None
    aliases: int  # documents left out because they are another document's file under a second name
    seconds: float
    estimator: str


def _check_options(store_path: str | os.PathLike[str], params: SignatureParams, threshold: float, bits: int,
                   ways: int, candidates: str, group: str, keep: str, verify: str) -> None:
    if not 1 <= bits <= params.bits:
        raise UsageError(
            f"--bits {bits} exceeds the {params.bits} bits stored in {store_path}; "
            f"use --bits 1 to {params.bits}, or re-sign with --bits {bits} or more"
        )
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold {threshold} must be in (0, 1]")
    if ways not in (2, 3):
        raise UsageError(f"--ways {ways}: choose 2 (pairs) or 3 (pairs and triples)")
    if ways == 3 and bits < 2:
        raise UsageError("--ways 3 needs --bits 2 or more; 1-bit values carry no 3-way information")
    if candidates not in CANDIDATE_METHODS:
        raise UsageError(f"--candidates {candidates!r}: choose lsh or all")
    if group not in GROUP_METHODS:
        raise UsageError(f"--group {group!r}: choose {' or '.join(GROUP_METHODS)}")
    if keep not in KEEP_CHOICES:
        raise UsageError(f"--keep {keep!r} is not a policy; choose one of {', '.join(KEEP_CHOICES)}")
    if verify not in VERIFY_MODES:
        raise UsageError(f"--verify {verify!r}: choose one of {', '.join(VERIFY_MODES)}")


def find(
    store_path: str | os.PathLike[str],
    threshold: float,
    bits: int | None = None,
    bands: int | None = None,
    rows: int | None = None,
    recall: float = 0.99,
    max_bucket: int = 1000,
    ways: int = 2,
    group: str = "components",
    keep: str = "first",
    verify: str = "borderline",
    candidates: str = "lsh",
    new_since: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> FindResult:
    """Find near-duplicate pairs (and triples) with R̂ ≥ ``threshold`` and group them.

    Args:
        store_path: a store written by ``sign``.
        threshold: R0.
        bits: b bits per value for the estimator (default: all stored bits).
        bands, rows: override the banding, which by default reaches ``recall`` at R0 (for ``ways=3`` the
            per-pair recall is raised so that triples reach it).
        ways: 2 for pairs; 3 also finds triples with 3-way R̂ ≥ R0 (needs b ≥ 2).
        group: ``components`` (connected components) or ``strict`` (every internal pair, and with
            ``ways=3`` every internal triple, estimated ≥ R0).
        keep: the representative policy (see :func:`dedup_cli.grouping.representatives`).
        verify: ``none``, ``borderline`` (pairs whose interval straddles R0) or ``all`` (also every
            accepted pair): re-read the documents and decide those pairs by their exact resemblance.
        candidates: ``lsh`` (banding) or ``all`` (compare every pair, exact and quadratic).
        new_since: a sign run of the store: report only pairs, triples and groups that involve a document
            written after it (new or changed), compared against the whole store.
        progress: called with the number of documents processed by the all-pairs kernel.
    """
    started = time.perf_counter()
    opened = open_store(store_path)  # the manifest only: options are checked before the store is read
    params = opened.params
    bits = params.bits if bits is None else bits
    _check_options(store_path, params, threshold, bits, ways, candidates, group, keep, verify)
    if candidates == "lsh" and (bands is not None or rows is not None):
        resolve_banding(threshold, params.num_perm, params.bits, recall, bands, rows)
    if new_since is not None:
        opened.check_run(new_since)
    store = opened.read()
    eligible = store.shingle_counts > 0  # a document with no shingle resembles nothing
    stored_values = store.values()
    values = lowest_bits(stored_values, bits)
    r = store.shingle_counts.astype(np.float64) / float(params.universe)
    # Candidates below R0 matter too: a triple's pairs only need R0 − margin, and verification may rescue
    # a pair the estimate put just under R0.
    margin = triples.pair_margin(threshold, params.num_perm, bits)
    banding: Banding | None = None
    oversized = 0
    if candidates == "all":
        floor = max(threshold - margin, 1e-9)
        needed = allpairs.min_matches_for_threshold(floor, params.num_perm, bits, r)
        first, second, _ = allpairs.all_pairs(values, bits, needed, eligible, progress=progress)
    else:
        pair_recall = triples.pair_recall_for_triples(recall) if ways == 3 else recall
        banding = resolve_banding(threshold, params.num_perm, params.bits, pair_recall, bands, rows)
        found = candidate_pairs(stored_values, banding.bands, banding.rows, eligible, max_bucket)
        first, second, oversized = found.first, found.second, found.oversized_buckets
    if new_since is not None and ways == 2:
        # Only pairs touching a new document matter; dropping the others before scoring saves the work.
        touching = _involves_new(store, new_since, first, second)
        first, second = first[touching], second[touching]
    scored = score_pairs(values, first, second, r, bits)

    decided = scored.estimate >= threshold
    exact_all = np.full(scored.first.size, np.nan)
    verification = None
    if verify != "none":
        check = pairs_to_verify(verify, threshold, scored.estimate, scored.ci_low, scored.ci_high)
        verification = verify_pairs(store, scored.first[check], scored.second[check])
        exact_all[check] = verification.exact
        known = ~np.isnan(exact_all)
        decided = np.where(known, exact_all >= threshold, decided)
    # One file under two names (a link) is one document, not a duplicate pair: only its first id stays.
    aliases = same_file_aliases(store.paths,
                                sorted_unique(np.concatenate([scored.first[decided], scored.second[decided]])))
    if aliases.size:
        decided &= ~(np.isin(scored.first, aliases) | np.isin(scored.second, aliases))
    accepted = scored.select(decided)
    exact = exact_all[decided]

    found_triples = None
    if ways == 3:
        found_triples = triples.find_triples(values, scored, r, threshold, bits)
        if aliases.size:
            found_triples = found_triples.select(np.asarray(~np.isin(found_triples.docs, aliases).any(axis=1)))
        if new_since is not None:
            # Triangles need the old-old pairs too, so triples are filtered only now.
            new = _new_documents(store, new_since)
            found_triples = found_triples.select(new[found_triples.docs].any(axis=1))
            accepted_new = _involves_new(store, new_since, accepted.first, accepted.second)
            exact = exact[accepted_new]
            accepted = accepted.select(accepted_new)

    # What is known of each accepted pair: its exact resemblance where it was checked, else its estimate.
    similarity = np.where(np.isnan(exact), accepted.estimate, exact)

    if group == "strict":
        triple_ok = None
        if ways == 3:
            def triple_ok(docs: np.ndarray) -> np.ndarray:
                return triples.score_triples(values, docs, r, bits).estimate >= threshold
        groups = strict_groups(len(store), accepted.first, accepted.second, similarity, triple_ok)
    else:
        groups = group_components(len(store), accepted.first, accepted.second)
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
        kept=representatives(groups, keep, store.shingle_counts),
        oversized_buckets=oversized,
        eligible=int(np.count_nonzero(eligible)),
        verification=verification,
        aliases=int(aliases.size),
        seconds=time.perf_counter() - started,
        estimator=(
            f"b-bit with precise r = f/D (max r = {r.max():.3g})" if r.size and r.max() > DENSE_R
            else "b-bit, sparse limit (r ≈ 0)"
        ),
    )


def _new_documents(store: StoredSignatures, since: int) -> np.ndarray:
    """bool[n_docs]: written by a run after ``since``."""
    runs = store.runs if store.runs is not None else np.zeros(len(store), dtype=np.int64)
    return runs > since


def _involves_new(store: StoredSignatures, since: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    new = _new_documents(store, since)
    return new[first] | new[second]
