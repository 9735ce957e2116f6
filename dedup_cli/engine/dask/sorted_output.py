"""The streamed end's output in the local engine's order: sorted on the cluster, pulled a part at a time.

Pairs are written most similar first, ties in document order, triples likewise, groups by their first member
then member. Each part of rows is cut by splitters drawn from a sample of its sort keys (a sample sort: one
exchange), each part sorted whole, and the driver pulls the parts in order, one at a time, into a small result of
its own that it spills to a temporary file; writing reads those files one after another (:class:`Spilled`).
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import dask
import numpy as np

from dedup_cli.array_primitives import evenly_spaced, sort_keys, splitters
from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, concatenated, counted, exchange, row_count, take
from dedup_cli.engine.dask.joins import scored_pairs
from dedup_cli.engine.dask.ranges import table_store
from dedup_cli.engine.dask.table_kinds import MEMBERS_OUT, PAIRS_OUT, TRIPLES_OUT, TableKind
from dedup_cli.engine.stages.conclude import Concluded, concluded_result
from dedup_cli.engine.stages.results import FindResult, MemberDetails
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.triple_scores import ScoredTriples
from dedup_cli.groups.components import Groups
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures

SORT_KEYS = {"pairs": ("negative", "first", "second"), "triples": ("negative", "a", "b", "c"),
             "groups": ("first", "member")}
KINDS = {"pairs": PAIRS_OUT, "triples": TRIPLES_OUT, "groups": MEMBERS_OUT}
SAMPLE = 64
"""Sort keys each part gives for drawing the splitters."""


class Spilled:
    """Output of a find too large to hold: per kind, small results in temporary files, written one after another."""

    def __init__(self, folder: tempfile.TemporaryDirectory[str], counts: dict[str, int], partitions: int = 1) -> None:
        self._folder = folder  # deleted with this object
        self.partitions = partitions  # of the components' pairs and documents, each one task per stage
        self.pairs, self.triples, self.groups = counts["pairs"], counts.get("triples"), counts["groups"]
        self._files = {kind: sorted(Path(folder.name).glob(f"{kind}-*.pickle")) for kind in ("pairs", "triples",
                                                                                              "groups")}

    def chunks(self, kind: str) -> Iterator[FindResult]:
        """The results to write ``kind`` from, in order (members are written from the groups' results)."""
        for file in self._files["groups" if kind == "members" else kind]:
            with open(file, "rb") as handle:
                yield pickle.load(handle)


def _keys(table: Table, names: Sequence[str]) -> np.ndarray:
    return sort_keys([table[name] for name in names])


def _sample(table: Table, names: Sequence[str]) -> np.ndarray:
    return evenly_spaced(np.sort(_keys(table, names)), SAMPLE)


def _route(table: Table, names: Sequence[str], cuts: np.ndarray) -> np.ndarray:
    return np.searchsorted(cuts, _keys(table, names), side="right")


def _sorted(table: Table, names: Sequence[str]) -> Table:
    if not table:
        return table
    return take(table, np.lexsort([table[name] for name in reversed(names)]))


def sorted_parts(parts: list[Any], names: Sequence[str], rows: int, kind: TableKind) -> tuple[list[Any], int]:
    """Delayed tables ``parts`` of ``kind`` sorted by ``names`` across parts of about ``rows`` rows: (the parts in
    order, the rows). The parts are cut by the first key alone, so that rows equal in it (a group's members) share
    a part."""
    count = counted(parts)
    outputs = max(1, -(-count // rows))
    cuts = np.empty(0, "S8")
    if outputs > 1:
        samples = np.sort(np.concatenate(dask.compute(*[dask.delayed(_sample)(part, names[:1]) for part in parts])))
        cuts = splitters(samples, outputs)
    return exchange(parts, _route, outputs, names[:1], cuts, then=partial(_sorted, names=names), kind=kind), count


def _result(store: StoredSignatures, common: dict[str, Any], reference_start: int | None, docs: np.ndarray,
            pairs: ScoredPairs | None = None, exact: np.ndarray | None = None, triples: ScoredTriples | None = None,
            groups: Groups | None = None, weakest: np.ndarray | None = None, kept: np.ndarray | None = None,
            **more: Any) -> FindResult:
    """A result of the documents ``docs`` (global numbers, ascending) holding one kind of record, with their stores
    marked when there is a reference store (its documents from ``reference_start`` on)."""
    none = np.empty(0)
    done = Concluded(pairs=ScoredPairs(*([np.empty(0, np.int64)] * 3), *([none] * 6)) if pairs is None else pairs,
                     exact=none if exact is None else exact, triples=triples,
                     groups=Groups(np.empty(0, np.int64), np.zeros(1, np.int64)) if groups is None else groups,
                     weakest=none if weakest is None else weakest, kept=np.empty(0, np.int64) if kept is None else kept,
                     keep_field_problems=[], gone=np.empty(0, np.int64))
    return concluded_result(store, done, None if reference_start is None else docs >= reference_start, common,
                            **more)


def _named(columns: Sequence[np.ndarray], ids: Sequence[np.ndarray], params: SignatureParams
           ) -> tuple[np.ndarray, StoredSignatures]:
    docs, where = np.unique(np.concatenate(columns), return_index=True)
    return docs, table_store(params, {"id": concatenated(ids)[where]})


def _pairs_result(table: Table, params: SignatureParams, common: dict[str, Any], reference_start: int | None
                  ) -> FindResult:
    docs, store = _named([table["first"], table["second"]], [table["id_a"], table["id_b"]], params)
    local = {**table, "first": np.searchsorted(docs, table["first"]), "second": np.searchsorted(docs, table["second"])}
    return _result(store, common, reference_start, docs, pairs=scored_pairs(local), exact=table["exact"])


def _triples_result(table: Table, params: SignatureParams, common: dict[str, Any], reference_start: int | None
                    ) -> FindResult:
    docs, store = _named([table[name] for name in "abc"], [table[f"id_{name}"] for name in "abc"], params)
    triples = ScoredTriples(
        docs=np.searchsorted(docs, np.stack([table["a"], table["b"], table["c"]], axis=1)),
        matches=table["matches"], pair_matches=np.stack([table[f"{x}_matches"] for x in ("ab", "ac", "bc")], axis=1),
        estimate=table["estimate"], stderr=table["stderr"], ci_low=table["ci_low"], ci_high=table["ci_high"],
        pairwise=np.stack([table[f"estimate_{x}"] for x in ("ab", "ac", "bc")], axis=1), exact=table["exact"])
    return _result(store, common, reference_start, docs, triples=triples)


def _groups_result(table: Table, params: SignatureParams, common: dict[str, Any], first_group: int,
                   reference_start: int | None) -> FindResult:
    docs, store = _named([table["member"], table["kept"]], [table["id"], table["kept_id"]], params)
    firsts = table["first"]
    starts = np.flatnonzero(np.r_[True, firsts[1:] != firsts[:-1]]) if firsts.size else np.empty(0, np.int64)
    groups = Groups(members=np.searchsorted(docs, np.asarray(table["member"])),
                    offsets=np.r_[starts, firsts.size].astype(np.int64))
    details = MemberDetails(table["content_hash"].astype(np.uint64), table["similarity"].astype(np.float64),
                            table["verified"].astype(bool))
    gone = table["gone"].astype(bool)
    is_gone = np.isin(docs, table["member"][gone]) if gone.any() else None
    return _result(store, common, reference_start, docs, groups=groups, is_gone=is_gone,
                   weakest=table["weakest"][starts], first_group=first_group,
                   kept=np.searchsorted(docs, table["kept"][starts]), member_details=details)


def _spill(parts: list[Any], kind: str, folder: Path, params: SignatureParams, common: dict[str, Any], rows: int,
           reference_start: int | None) -> int:
    """Sort ``parts`` on the cluster, then pull the sorted parts one at a time into files of results."""
    ordered, count = sorted_parts(parts, SORT_KEYS[kind], rows, KINDS[kind])
    if count == 0:
        return 0
    ordered = list(settled(*ordered))
    groups = 0
    for index, part in enumerate(ordered):
        (table,) = dask.compute(part)
        if not row_count(table):
            continue
        if kind == "pairs":
            result = _pairs_result(table, params, common, reference_start)
        elif kind == "triples":
            result = _triples_result(table, params, common, reference_start)
        else:
            result = _groups_result(table, params, common, groups + 1, reference_start)
            groups += len(result.grouping)
        with open(folder / f"{kind}-{index:06d}.pickle", "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return count if kind != "groups" else groups


def spilled_result(found: list[list[Any]], rows: int, params: SignatureParams, common: dict[str, Any],
                   reference_start: int | None, triples: bool, partitions: int) -> FindResult:
    """A result streamed from the parts of pairs, triples and members ``found`` (delayed tables), spilled in
    order to a temporary folder."""
    folder = tempfile.TemporaryDirectory(prefix="dedup-find-")
    path = Path(folder.name)
    counts = {"pairs": _spill(found[0], "pairs", path, params, common, rows, reference_start),
              "groups": _spill(found[2], "groups", path, params, common, rows, reference_start)}
    if triples:
        counts["triples"] = _spill(found[1], "triples", path, params, common, rows, reference_start)
    result = _result(table_store(params, {"id": []}), common, reference_start, np.empty(0, np.int64),
                     triples=ScoredTriples.empty() if triples else None)
    result.streamed = Spilled(folder, counts, partitions)
    return result

