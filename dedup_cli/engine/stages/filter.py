"""The stages ``filter`` adds after ``find``: which grouped documents to drop, and how similar each is to the kept one.

Functions from a :class:`FindResult` (whichever engine produced it, gathered or streamed in chunks) or a store's
rows to arrays. An engine whose result holds no signatures (the Dask engine's) computes each grouped document's
details where its group is (:func:`member_details`, on the gathered documents or per component on the workers);
the driver then reads the decisions chunk by chunk (:func:`find_decisions`) and sends them (one row per dropped
document) to the tasks that filter the inputs (:func:`dedup_cli.corpus.sources.filter_source`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.engine.stages.results import FindResult, MemberDetails
from dedup_cli.estimates.pairs import ScoredPairs, score_pairs
from dedup_cli.groups.components import Groups
from dedup_cli.minhash.packing import estimator_values, unpack_values
from dedup_cli.store.snapshot import StoredSignatures


@dataclass
class MemberDecisions:
    """Grouped documents of the new store and what becomes of each; arrays aligned by member, in group order."""

    rows: np.ndarray  # int64[m], the documents (store rows)
    groups: np.ndarray  # int64[m], their group numbers, from 1
    drop: np.ndarray  # bool[m], dropped; else kept (its group's representative)
    representatives: np.ndarray  # int64[m], the row each one's group keeps
    positions: np.ndarray  # int64[m], each one's place in ``groups.members`` (what ``MemberDetails`` aligns with)


def member_decisions(result: FindResult, dropped_only: bool = True) -> MemberDecisions:
    """Every member but its group's representative is dropped, except a reference store's documents (never
    dropped, nor listed) and documents gone or changed since they were signed (never dropped nor listed: a record
    that is there now holds other text, which was not grouped). ``dropped_only``: list only the dropped ones (what
    filtering needs without annotating). ``result`` may be one chunk of a streamed result: its groups are numbered
    from ``result.first_group``.

    The same rule as ``find --output members`` (``dedup_cli.engine.stages.results.member_records``).
    """
    groups = result.grouping
    sizes = np.diff(groups.offsets)
    members = groups.members.astype(np.int64)
    numbers = np.repeat(np.arange(result.first_group, result.first_group + len(groups), dtype=np.int64), sizes)
    kept = np.repeat(result.kept.astype(np.int64), sizes)
    listed = np.ones(members.size, bool) if result.reference is None else ~result.reference[members]
    if result.is_gone is not None:  # whatever its location holds now is not what was grouped: left as it is
        listed &= ~result.is_gone[members]
    drop = (members != kept) & listed
    if dropped_only:
        listed = drop
    return MemberDecisions(members[listed], numbers[listed], drop[listed], kept[listed], np.flatnonzero(listed))


def pair_estimates(store: StoredSignatures, first: np.ndarray, second: np.ndarray, bits: float) -> np.ndarray:
    """The b-bit estimate R̂ (Li & König 2010, eq. 9; eq. 25 with b = 1/2) of pairs of ``store`` rows: float64[m],
    NaN where ``second`` is -1 (a document the store does not hold). Only the rows of these pairs are unpacked."""
    estimate = np.full(first.size, np.nan)
    known = second >= 0
    if known.any():
        estimate[known] = pair_scores(store, first[known], second[known], bits).estimate
    return estimate


def pair_scores(store: StoredSignatures, first: np.ndarray, second: np.ndarray, bits: float) -> ScoredPairs:
    """The pairs of ``store`` rows (int64[m] each) scored as ``find`` scores its candidates: match counts, R̂, its
    standard error and 95 % interval. Only the rows of these pairs are unpacked."""
    rows = sorted_unique(np.concatenate([first, second]).astype(np.int64))
    params = store.params
    values = estimator_values(unpack_values(store.packed[rows], params.bits, params.num_perm), bits, params.xor_pairs)
    r = set_size_ratios(store.shingle_counts[rows], params.universe)
    scored = score_pairs(values, np.searchsorted(rows, first), np.searchsorted(rows, second), r, bits)
    scored.first, scored.second = first.astype(np.int64), second.astype(np.int64)  # as rows of the store
    return scored


def known_exact(pairs: ScoredPairs, exact: np.ndarray, documents: int, first: np.ndarray,
                second: np.ndarray) -> np.ndarray:
    """The exact resemblance ``find`` verified for each pair (first[p], second[p]) among its accepted ``pairs``
    (with ``exact``, NaN where unchecked; documents numbered below ``documents``): float64[m], NaN where the pair
    was not an accepted, verified one."""
    found_exact = np.full(first.size, np.nan)
    if pairs.first.size == 0 or first.size == 0:
        return found_exact
    width = np.int64(max(documents, 1))
    keys = pairs.first.astype(np.int64) * width + pairs.second
    order = np.argsort(keys)
    wanted = np.minimum(first, second) * width + np.maximum(first, second)
    places = np.minimum(np.searchsorted(keys[order], wanted), keys.size - 1)
    found = keys[order][places] == wanted
    found_exact[found] = exact[order[places[found]]]
    return found_exact


def member_details(store: StoredSignatures, values: np.ndarray, pairs: ScoredPairs, exact: np.ndarray,
                   groups: Groups, kept: np.ndarray, bits: float) -> MemberDetails:
    """Each grouped document's content hash and similarity to its group's representative: the exact resemblance
    of the accepted pair where it was verified, else the b-bit estimate (Li & König 2010, eq. 9).

    Args:
        store: the documents (any subset holding every member, numbered as ``values``, ``pairs`` and ``groups``).
        values: uint[n_docs, k], the lowest ``bits`` bits of each minwise value (the XOR bits with b = 1/2).
        pairs, exact: the accepted pairs and their exact resemblance (NaN where unchecked).
        groups, kept: the groups and the representative of each.
    """
    members = groups.members.astype(np.int64)
    representatives = np.repeat(kept.astype(np.int64), np.diff(groups.offsets))
    verified = known_exact(pairs, exact, len(store), members, representatives)
    r = set_size_ratios(store.shingle_counts, store.params.universe)
    estimate = score_pairs(values, members, representatives, r, bits).estimate if members.size else np.empty(0)
    hashes = (store.content_hashes[members] if store.content_hashes is not None
              else np.zeros(members.size, np.uint64))
    return MemberDetails(hashes.astype(np.uint64), np.where(np.isnan(verified), estimate, verified),
                         ~np.isnan(verified))


def result_details(result: FindResult) -> MemberDetails:
    """The details of a result's grouped documents: the engine's, or computed from the signatures its store holds
    (the local engine's result holds every document it reports, signatures included)."""
    if result.member_details is not None:
        return result.member_details
    return member_details(result.store, result.store.values(result.bits), result.accepted, result.exact,
                          result.grouping, result.kept, result.bits)


@dataclass
class FoundDecisions:
    """What a ``find`` decided for ``filter``, over its whole result; per listed document, in group order."""

    ids: list[str]
    content_hashes: np.ndarray  # uint64[d]
    drop: np.ndarray  # bool[d]
    groups: np.ndarray  # int64[d], from 1
    representatives: list[str]  # the id each one's group keeps
    similarity: np.ndarray  # float64[d], to the representative
    verified: np.ndarray  # bool[d]
    representative_in_reference: np.ndarray | None  # bool[d] with ``against``: the kept one is a reference document
    group_count: int


def find_decisions(result: FindResult, dropped_only: bool = True) -> FoundDecisions:
    """:func:`member_decisions` and :func:`result_details` of a whole result: of the result itself, or of each
    chunk of its groups in turn when it is streamed (the driver then holds the decisions, never the pairs)."""
    chunks = [result] if result.streamed is None else result.streamed.chunks("groups")
    ids: list[str] = []
    representatives: list[str] = []
    columns: dict[str, list[np.ndarray]] = {name: [] for name in ("hashes", "drop", "groups", "similarity",
                                                                   "verified", "reference")}
    for chunk in chunks:
        chosen = member_decisions(chunk, dropped_only)
        details = result_details(chunk)
        names = chunk.store.ids
        ids += [names[row] for row in chosen.rows.tolist()]
        representatives += [names[row] for row in chosen.representatives.tolist()]
        columns["hashes"].append(details.content_hashes[chosen.positions])
        columns["drop"].append(chosen.drop)
        columns["groups"].append(chosen.groups)
        columns["similarity"].append(details.similarity[chosen.positions])
        columns["verified"].append(details.verified[chosen.positions])
        if chunk.reference is not None:
            columns["reference"].append(chunk.reference[chosen.representatives])

    def joined(name: str, dtype: type) -> np.ndarray:
        return np.concatenate(columns[name]).astype(dtype) if columns[name] else np.empty(0, dtype)

    return FoundDecisions(ids, joined("hashes", np.uint64), joined("drop", bool), joined("groups", np.int64),
                          representatives, joined("similarity", np.float64), joined("verified", bool),
                          joined("reference", bool) if result.reference is not None else None, result.group_count)
