"""The stages ``filter`` adds after ``find``: which grouped documents to drop, and how similar each is to the kept one.

Functions from a :class:`FindResult` (whichever engine produced it) or a store's rows to arrays. A distributed
engine runs them where the groups are and sends the decisions (one row per dropped document) to the workers that
filter the inputs, one source each (:func:`dedup_cli.corpus.sources.filter_source`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.engine.find_stages import set_size_ratios
from dedup_cli.engine.results import FindResult
from dedup_cli.estimates.pairs import score_pairs
from dedup_cli.minhash.packing import lowest_bits, unpack_values
from dedup_cli.primitives import sorted_unique
from dedup_cli.store.snapshot import StoredSignatures


@dataclass
class MemberDecisions:
    """Grouped documents of the new store and what becomes of each; arrays aligned by member, in group order."""

    rows: np.ndarray  # int64[m], the documents (store rows)
    groups: np.ndarray  # int64[m], their group numbers, from 1
    drop: np.ndarray  # bool[m], dropped; else kept (its group's representative)
    representatives: np.ndarray  # int64[m], the row each one's group keeps


def member_decisions(result: FindResult, dropped_only: bool = True) -> MemberDecisions:
    """Every member but its group's representative is dropped, except a reference store's documents (never
    dropped, nor listed). ``dropped_only``: list only the dropped ones (what filtering needs without annotating).

    The same rule as ``find --output members`` (``dedup_cli.output.records.member_records``).
    """
    groups = result.groups
    sizes = np.diff(groups.offsets)
    members = groups.members.astype(np.int64)
    numbers = np.repeat(np.arange(1, len(groups) + 1, dtype=np.int64), sizes)
    kept = np.repeat(result.kept.astype(np.int64), sizes)
    listed = np.ones(members.size, bool) if result.reference is None else ~result.reference[members]
    drop = (members != kept) & listed
    if dropped_only:
        listed = drop
    return MemberDecisions(members[listed], numbers[listed], drop[listed], kept[listed])


def pair_estimates(store: StoredSignatures, first: np.ndarray, second: np.ndarray, bits: int) -> np.ndarray:
    """The b-bit estimate R̂ (Li & König 2010, eq. 9) of pairs of ``store`` rows: float64[m], NaN where
    ``second`` is -1 (a document the store does not hold). Only the rows of these pairs are unpacked."""
    estimate = np.full(first.size, np.nan)
    known = second >= 0
    if not known.any():
        return estimate
    rows = sorted_unique(np.concatenate([first[known], second[known]]))
    params = store.params
    values = lowest_bits(unpack_values(store.packed[rows], params.bits, params.num_perm), bits)
    r = set_size_ratios(store.shingle_counts[rows], params.universe)
    scored = score_pairs(values, np.searchsorted(rows, first[known]), np.searchsorted(rows, second[known]), r, bits)
    estimate[known] = scored.estimate
    return estimate


def known_exact(result: FindResult, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The exact resemblance ``find`` verified for each pair (first[p], second[p]): float64[m], NaN where the pair
    was not an accepted, verified one."""
    exact = np.full(first.size, np.nan)
    accepted = result.pairs
    if accepted.first.size == 0 or first.size == 0:
        return exact
    width = np.int64(len(result.store))
    keys = accepted.first.astype(np.int64) * width + accepted.second
    order = np.argsort(keys)
    wanted = np.minimum(first, second) * width + np.maximum(first, second)
    places = np.minimum(np.searchsorted(keys[order], wanted), keys.size - 1)
    found = keys[order][places] == wanted
    exact[found] = result.exact[order[places[found]]]
    return exact
