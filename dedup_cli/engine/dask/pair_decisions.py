"""Deciding the scored pairs on the workers: the rules of :mod:`dedup_cli.engine.stages.decisions`, the local
engine's, on each part's columns; what is the Dask engine's own is only where the columns meet.

**Exact checks.** The pairs :func:`dedup_cli.engine.stages.decisions.to_check` selects meet the locations and
content hashes of their documents by two range joins and are re-read where they are, by
:func:`dedup_cli.verification.verify_pairs`; the workers must see the documents at the paths the store recorded
(a shared filesystem). Their exact resemblances return to the scored pairs' parts, which are the same ranges of
the second document.

**Aliases** (one file under two names, never a duplicate): the documents of the accepted pairs are stat-ed where
they are (:func:`dedup_cli.engine.stages.decisions.file_keys`) and grouped by (device, inode) with one exchange;
each group's aliases are :func:`dedup_cli.engine.stages.decisions.later_of_each_file`.

**Gathered** (:func:`decide_gathered`): when the scored pairs are few enough for the driver (``--gather-limit``),
they come to it whole with their documents' names, read from the pieces where they are, and the same functions
run on chunks of them: the exact checks and the file checks as tasks on the workers (which see the files), the
rest (selecting, deciding, grouping by file) vectorised here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
from distributed import get_client

from dedup_cli.array_primitives import among, pair_codes, sorted_unique
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, by_hash, column_range, concatenated, exchange, joined, take
from dedup_cli.engine.dask.joins import attach, attach_ranges, scored_pairs
from dedup_cli.engine.dask.ranges import NumberedPieces, name_ranges, names_of, table_store
from dedup_cli.engine.dask.table_kinds import DECIDED, DOCUMENTS, EXACT, FILES, PAIRS
from dedup_cli.engine.stages import decisions as rules
from dedup_cli.estimates.simultaneous import SimultaneousBound
from dedup_cli.forked import chunk_bounds
from dedup_cli.params import SignatureParams
from dedup_cli.verification import Verification, verify_pairs

CHUNK_PAIRS = 4096
"""Borderline pairs a gathered exact-check task re-reads at least (fewer tasks when they are fewer)."""
CHUNK_FILES = 65536
"""Documents a gathered file-check task stats at most."""
TASKS_PER_WORKER = 4
"""Gathered check tasks a worker gets at most, so that a slow one leaves the others work."""
_NAMES = ("id", "path", "content_hash")


def _no_exact() -> Table:
    return EXACT.of(first=np.empty(0, np.int64), second=np.empty(0, np.int64), exact=np.empty(0))


def verify_part(pairs: Table, params: SignatureParams) -> tuple[Table, list[str]]:
    """Exact resemblance of a part's pairs (with their documents' names as ``a_…`` and ``b_…``), and the ids not
    re-read."""
    if not pairs["first"].size:
        return _no_exact(), []
    docs, where = np.unique(np.concatenate([pairs["first"], pairs["second"]]), return_index=True)

    def column(name: str) -> np.ndarray:
        return concatenated([pairs[f"a_{name}"], pairs[f"b_{name}"]])[where]

    store = table_store(params, {name: column(name) for name in ("id", "path", "content_hash")})
    verification = verify_pairs(store, np.searchsorted(docs, np.asarray(pairs["first"])),
                                np.searchsorted(docs, np.asarray(pairs["second"])))
    return EXACT.of(first=pairs["first"], second=pairs["second"], exact=verification.exact), \
        verification.unverifiable_documents


def borderline(scored: Table, mode: str, threshold: float, bound: SimultaneousBound) -> Table:
    """The pairs (``first``, ``second``) of a part that ``mode`` checks exactly (:func:`dedup_cli.engine.stages.
    decisions.to_check`)."""
    check = rules.to_check(scored_pairs(scored), mode, threshold, bound)
    return PAIRS.of(first=scored["first"][check], second=scored["second"][check])


def may_matter(scored: Table, mode: str, threshold: float, bound: SimultaneousBound, floor: float | None) -> Table:
    """The scored pairs of a part the decisions and the end of find may need (:func:`dedup_cli.engine.stages.
    decisions.may_matter`): the others need not leave their worker."""
    return take(scored, rules.may_matter(scored_pairs(scored), mode, threshold, bound, floor))


def with_exact(scored: Table, exact: Table, threshold: float) -> Table:
    """Scored pairs with ``exact`` (NaN where unchecked) and ``decided`` columns."""
    values = np.full(scored["first"].size, np.nan)
    if exact["first"].size:
        # Pairs by their codes, found by a binary search.
        width = int(max(scored["second"].max(initial=0), exact["second"].max())) + 1
        found = pair_codes(exact["first"], exact["second"], width)
        order = np.argsort(found, kind="stable")
        hit, where = among(pair_codes(scored["first"], scored["second"], width), found[order])
        values = np.where(hit, exact["exact"][order[where]], np.nan)
    return DECIDED.of(**scored, exact=values, decided=rules.decide(scored["estimate"], values, threshold))


def checks_done(checked: int, unverifiable_documents: list[str]) -> Verification:
    """The exact checks done on the cluster, as a :class:`dedup_cli.verification.Verification` whose values stay
    with the pairs: how many pairs were decided exactly, and the documents that could not be re-read (sorted
    ids)."""
    return Verification(np.empty(0), checked, unverifiable_documents)


def _checked_count(exact: Table) -> int:
    return int(np.count_nonzero(~np.isnan(exact["exact"])))


def _union(lists: list[list[str]]) -> list[str]:
    return sorted(set().union(*lists))


def check_and_decide(scored: list[Any], numbered: NumberedPieces, mode: str, threshold: float, bound: SimultaneousBound
                     ) -> tuple[list[Any], Verification | None]:
    """The scored pairs (a part a range of the second document) with ``exact`` and ``decided`` columns, after the
    exact checks ``mode`` asks for."""
    if mode == "none":
        return [dask.delayed(with_exact)(part, _no_exact(), threshold) for part in scored], None
    names = name_ranges(numbered)
    wanted = [dask.delayed(borderline)(part, mode, threshold, bound) for part in scored]
    with_first = attach_ranges(wanted, "first", names, numbered.divisions, "a_", _NAMES)
    both = attach_ranges(with_first, "second", names, numbered.divisions, "b_", _NAMES)
    steps = [dask.delayed(verify_part, nout=2)(part, numbered.params) for part in both]
    # ``both`` is cut by the ranges of the second document, as ``scored`` is: part i meets part i.
    decided = [dask.delayed(with_exact)(part, step[0], threshold) for part, step in zip(scored, steps, strict=True)]
    *decided, unverifiable, checked = settled(*decided, dask.delayed(_union)([step[1] for step in steps]),
                                              dask.delayed(sum)([dask.delayed(_checked_count)(step[0])
                                                                 for step in steps]))
    unverifiable, checked = dask.compute(unverifiable, checked)
    return decided, checks_done(int(checked), list(unverifiable))


def decided_documents(decided: Table, reference_start: int | None) -> Table:
    """The documents of a part's accepted pairs that may be one file under two names (:func:`dedup_cli.engine.
    stages.decisions.alias_candidates`; the reference store's documents from ``reference_start`` on)."""
    first, second = decided["first"], decided["second"]
    across = None if reference_start is None else (first < reference_start) != (second < reference_start)
    return DOCUMENTS.of(doc=rules.alias_candidates(first, second, decided["decided"], across))


def file_keys(located: Table) -> Table:
    """(doc, device, inode) of a part's documents (``doc``, ``path``) that are whole files that exist (:func:`dedup_
    cli.engine.stages.decisions.file_keys`), stat-ed where the part is."""
    return FILES.of(**dict(zip(FILES.columns, rules.file_keys(located["doc"], located["path"].tolist()),
                               strict=True)))


def _unique_docs(table: Table) -> Table:
    return DOCUMENTS.of(doc=sorted_unique(table["doc"]))


def _route_file(table: Table, parts: int) -> np.ndarray:
    return by_hash(table["device"] * np.uint64(0x100000001B3) ^ table["inode"], parts)


def _later(keys: Table) -> Table:
    return DOCUMENTS.of(doc=rules.later_of_each_file(keys["doc"], keys["device"], keys["inode"]))


def aliases(decided: list[Any], numbered: NumberedPieces) -> np.ndarray:
    """int64[a], ascending: documents of the accepted pairs (inside one store) that are a lower document's file
    under another name."""
    docs = [dask.delayed(decided_documents)(part, numbered.reference_start) for part in decided]
    by_doc = exchange(docs, column_range, numbered.ranges, "doc", numbered.divisions, then=_unique_docs,
                      kind=DOCUMENTS)
    located = [dask.delayed(attach)(part, "doc", names, "", ("path",))
               for part, names in zip(by_doc, name_ranges(numbered), strict=True)]
    keys = [dask.delayed(file_keys)(part) for part in located]
    found = exchange(keys, _route_file, len(keys), len(keys), then=_later, kind=FILES)
    return np.sort(joined(dask.compute(*found))["doc"])


def accept(decided: Table, alias_documents: np.ndarray) -> Table:
    """A part's ``decided`` flags less every pair that touches an alias (:func:`dedup_cli.engine.stages.decisions.
    accepted`)."""
    if alias_documents.size == 0:
        return decided
    return DECIDED.check({**decided, "decided": rules.accepted(decided["decided"], decided["first"],
                                                               decided["second"], alias_documents)})


@dataclass
class GatheredDecisions:
    """The decisions stage run in the driver: the scored pairs with ``exact`` and ``decided`` columns, their
    documents' names (``doc`` ascending), the aliases left out, and the exact checks done (None with
    ``--verify none``)."""

    decided: Table
    names: Table | None
    aliases: np.ndarray
    verification: Verification | None


def _tasks(items: int, per_task: int) -> int:
    """How many tasks share ``items``: at most :data:`TASKS_PER_WORKER` a worker, at least ``per_task`` items each
    (one task at least)."""
    workers = max(1, len(get_client().scheduler_info()["workers"]))
    return max(1, min(TASKS_PER_WORKER * workers, -(-items // per_task)))


def _in_chunks(function: Any, table: Table, per_task: int, *args: Any) -> list[Any]:
    """``function`` of contiguous chunks of ``table``, as tasks on the workers."""
    count = len(next(iter(table.values())))
    if not count:
        return []
    bounds = chunk_bounds(count, _tasks(count, per_task))
    return list(dask.compute(*[dask.delayed(function)(take(table, slice(start, stop)), *args)
                               for start, stop in bounds]))


def decide_gathered(scored: Table, numbered: NumberedPieces, mode: str, threshold: float, bound: SimultaneousBound
                    ) -> GatheredDecisions:
    """:func:`check_and_decide`, :func:`aliases` and :func:`accept` of the scored pairs gathered into the driver:
    the same decisions from the same functions, without an exchange."""
    names = names_of(numbered, sorted_unique(np.concatenate([scored["first"], scored["second"]])))
    verification = None
    exact = _no_exact()
    if mode != "none":
        wanted = borderline(scored, mode, threshold, bound)
        wanted = attach(attach(wanted, "first", names, "a_", _NAMES), "second", names, "b_", _NAMES)
        done = _in_chunks(verify_part, wanted, CHUNK_PAIRS, numbered.params)
        exact = joined([part for part, _ in done], EXACT) if done else exact
        verification = checks_done(_checked_count(exact), _union([missing for _, missing in done]))
    decided = with_exact(scored, exact, threshold)
    docs = decided_documents(decided, numbered.reference_start)
    alias_documents = np.empty(0, np.int64)
    if docs["doc"].size:
        keys = joined(_in_chunks(file_keys, attach(docs, "doc", names, "", ("path",)), CHUNK_FILES), FILES)
        alias_documents = _later(keys)["doc"]
    return GatheredDecisions(accept(decided, alias_documents), names, alias_documents, verification)
