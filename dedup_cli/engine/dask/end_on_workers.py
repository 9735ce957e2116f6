"""The end of find when its edges are many: per connected component on the workers, and the output spilled in order.

1. **Components** of the graph of the pairs the end of find needs (the accepted ones, and with ``ways=3`` those
   within the triple margin) by large-star/small-star on the cluster (:mod:`.star_components`). Every triangle and
   every group lies inside one component of that graph.
2. The pairs and their documents (b-bit values, counts, runs, ids) are **shuffled by component**, so a partition
   holds whole components; on each, :func:`dedup_cli.engine.stages.find.conclude` (the local engine's end of find)
   runs on the partition's documents renumbered in id order. On a disjoint union of components it gives what it
   gives on each, and every stage in it depends only on the order of documents, so the union of the partitions'
   answers is the local engine's answer.
3. **Output in order**: pairs, triples and grouped documents are sorted on the cluster in the order the local
   engine writes them (most similar first, ties in id order; groups by their first member), and the driver pulls
   one sorted partition at a time into a small result of its own that it spills to a temporary file. Writing then
   reads those files one after another (:class:`Spilled`), so the driver never holds more than one partition.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.frames import DocumentFrames, unpack_bits
from dedup_cli.engine.dask.joins import SCORE_COLUMNS, attach
from dedup_cli.engine.dask.star_components import connected_components
from dedup_cli.engine.stages.filter import member_details
from dedup_cli.engine.stages.find import conclude, count_candidate_triples, new_documents, set_size_ratios
from dedup_cli.engine.stages.plan import FindPlan
from dedup_cli.engine.stages.results import FindResult, MemberDetails
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.triple_scores import ScoredTriples
from dedup_cli.groups.components import Groups
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures

PAIRS_PER_PARTITION = 1_000_000
"""Pairs per component partition and per sorted output partition at most (a few hundred MB of a task's memory);
fewer when ``FindOptions.gather_limit`` is lower, so that the driver holds fewer pairs at once."""
MIN_PAIRS_PER_PARTITION = 1 << 14
"""Pairs per partition at least (when there are as many), whatever ``gather_limit`` says: each partition is a task
of every shuffle and sort and one round trip of the output, so partitions of a few pairs would cost a task per pair
(``gather_limit`` 0 would make one per pair) for no memory saved: 16384 pairs are about 2 MB in the driver."""

_TRIPLE_COLUMNS = ("a", "b", "c", "matches", "ab_matches", "ac_matches", "bc_matches", "estimate", "stderr", "ci_low",
                   "ci_high", "estimate_ab", "estimate_ac", "estimate_bc", "exact")


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


def _label(frame: pd.DataFrame) -> pd.DataFrame:
    """Pairs merged with their first document's label: that label, or the document itself for the root (the
    smallest document of a component is its own label and is not listed)."""
    label = frame["label"].to_numpy(dtype=np.float64, na_value=np.nan)
    pairs = frame.drop(columns=["node", "label"])
    pairs["label"] = np.where(np.isnan(label), pairs["first"].to_numpy(), label).astype(np.int64)
    return pairs


def _documents(pairs: pd.DataFrame) -> pd.DataFrame:
    docs = np.concatenate([pairs["first"].to_numpy(), pairs["second"].to_numpy()])
    labels = np.concatenate([pairs["label"].to_numpy(), pairs["label"].to_numpy()])
    docs, where = np.unique(docs, return_index=True)
    return pd.DataFrame({"doc": docs.astype(np.int64), "label": labels[where]})


def _mini_store(params: SignatureParams, ids: list[str]) -> StoredSignatures:
    """A store of only the ids a piece of output names (records need nothing else)."""
    return StoredSignatures(params=params, ids=ids, paths=[""] * len(ids), shingle_counts=np.zeros(len(ids), np.int64),
                            packed=np.empty((len(ids), 0), np.uint8))


def _numbered(pairs: pd.DataFrame, docs: pd.DataFrame, plan: FindPlan
              ) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, ScoredPairs, np.ndarray]:
    """A partition's documents in id order, their global numbers, its pairs in (first, second) order and scored
    with the documents renumbered 0 … m − 1, and the documents' b-bit values."""
    docs = docs.sort_values("doc")
    numbers = docs["doc"].to_numpy(dtype=np.int64)
    pairs = pairs.sort_values(["first", "second"])
    local = {name: pairs[name].to_numpy() for name in SCORE_COLUMNS}
    local["first"] = np.searchsorted(numbers, local["first"])
    local["second"] = np.searchsorted(numbers, local["second"])
    return docs, numbers, pairs, ScoredPairs(**local), unpack_bits(docs, "s", int(plan.bits), plan.params.num_perm)


def count_partition_triples(pairs: pd.DataFrame, docs: pd.DataFrame, plan: FindPlan) -> int:
    """The candidate triples of one partition's components (:func:`dedup_cli.engine.stages.find.
    count_candidate_triples`): summed over the partitions, the run's, which the triples' bound divides by."""
    _, _, _, scored, values = _numbered(pairs, docs, plan)
    return count_candidate_triples(values, scored, plan)


def conclude_partition(pairs: pd.DataFrame, docs: pd.DataFrame, plan: FindPlan, alias_documents: np.ndarray,
                       triple_candidates: int | None = None
                       ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[tuple[str, str]],
                                  list[tuple[int, str]]]:
    """The end of find on the whole components of one partition: its (pairs, triples, members) with global
    document numbers and ids, the grouped documents without a value to keep by (a reference store's
    documents from ``plan.reference_start`` on), and the (number, id) of the documents gone since signing;
    ``triple_candidates``: the run's candidate triples."""
    params, bits, reference_start = plan.params, int(plan.bits), plan.reference_start
    docs, numbers, pairs, scored, values = _numbered(pairs, docs, plan)
    ids = np.asarray(docs["id"].astype(object).to_numpy())
    counts = docs["shingle_count"].to_numpy(dtype=np.int64)
    runs = docs["run"].to_numpy(dtype=np.int64)
    store = StoredSignatures(params=params, ids=[str(x) for x in ids], paths=[str(x) for x in docs["path"].tolist()],
                             shingle_counts=counts, packed=np.empty((numbers.size, 0), np.uint8),
                             content_hashes=docs["content_hash"].to_numpy(dtype=np.uint64), runs=runs,
                             mtimes_ns=docs["mtime_ns"].to_numpy(dtype=np.int64))
    reference = None if reference_start is None else numbers >= reference_start
    new = new_documents(runs, plan.options.new_since, reference)
    aliases = np.searchsorted(numbers, alias_documents[np.isin(alias_documents, numbers)])
    done = conclude(store, values, set_size_ratios(counts, params.universe), scored,
                    pairs["exact"].to_numpy(dtype=np.float64), pairs["decided"].to_numpy(dtype=bool), aliases, new,
                    plan, reference, triple_candidates)
    accepted = done.pairs
    pairs_out = pd.DataFrame({name: getattr(accepted, name) for name in SCORE_COLUMNS})
    pairs_out["first"], pairs_out["second"] = numbers[accepted.first], numbers[accepted.second]
    pairs_out["exact"] = done.exact
    pairs_out["id_a"], pairs_out["id_b"] = ids[accepted.first], ids[accepted.second]
    pairs_out["negative"] = -accepted.estimate
    triples = done.triples if done.triples is not None else ScoredTriples.empty()
    columns = [triples.docs[:, 0], triples.docs[:, 1], triples.docs[:, 2], triples.matches, *triples.pair_matches.T,
               triples.estimate, triples.stderr, triples.ci_low, triples.ci_high, *triples.pairwise.T, triples.exact]
    triples_out = pd.DataFrame(dict(zip(_TRIPLE_COLUMNS, columns, strict=True)))
    for place, name in enumerate("abc"):
        triples_out[name] = numbers[triples.docs[:, place]]
        triples_out[f"id_{name}"] = ids[triples.docs[:, place]]
    triples_out["negative"] = -triples.estimate
    sizes = np.diff(done.groups.offsets)
    group = np.repeat(np.arange(len(done.groups)), sizes)
    details = member_details(store, values, accepted, done.exact, done.groups, done.kept, bits)
    members_out = pd.DataFrame({
        "first": numbers[done.groups.members[done.groups.offsets[:-1]]][group] if group.size else np.empty(0, np.int64),
        "member": numbers[done.groups.members], "id": ids[done.groups.members], "size": sizes[group],
        "weakest": done.weakest[group], "kept": numbers[done.kept][group], "kept_id": ids[done.kept][group],
        "content_hash": details.content_hashes, "similarity": details.similarity, "verified": details.verified,
        "gone": np.isin(done.groups.members, done.gone)})
    gone = list(zip(numbers[done.gone].tolist(), [str(x) for x in ids[done.gone]], strict=True))
    return pairs_out, triples_out, members_out, done.keep_field_problems, gone


def _pairs_result(frame: pd.DataFrame, params: SignatureParams, common: dict[str, Any],
                  reference_start: int | None) -> FindResult:
    docs, where = np.unique(np.concatenate([frame["first"].to_numpy(), frame["second"].to_numpy()]),
                            return_index=True)
    ids = np.concatenate([frame["id_a"].astype(object).to_numpy(), frame["id_b"].astype(object).to_numpy()])[where]
    local = {name: frame[name].to_numpy() for name in SCORE_COLUMNS}
    local["first"], local["second"] = np.searchsorted(docs, local["first"]), np.searchsorted(docs, local["second"])
    return _result(_mini_store(params, [str(x) for x in ids]), common, reference_start, docs,
                   accepted=ScoredPairs(**local), exact=frame["exact"].to_numpy(dtype=np.float64))


def _triples_result(frame: pd.DataFrame, params: SignatureParams, common: dict[str, Any],
                    reference_start: int | None) -> FindResult:
    everything = np.concatenate([frame[name].to_numpy() for name in "abc"])
    docs, where = np.unique(everything, return_index=True)
    ids = np.concatenate([frame[f"id_{name}"].astype(object).to_numpy() for name in "abc"])[where]
    column = {name: frame[name].to_numpy() for name in _TRIPLE_COLUMNS}
    triples = ScoredTriples(
        docs=np.searchsorted(docs, np.stack([column["a"], column["b"], column["c"]], axis=1)),
        matches=column["matches"], pair_matches=np.stack([column[f"{x}_matches"] for x in ("ab", "ac", "bc")], axis=1),
        estimate=column["estimate"], stderr=column["stderr"], ci_low=column["ci_low"], ci_high=column["ci_high"],
        pairwise=np.stack([column[f"estimate_{x}"] for x in ("ab", "ac", "bc")], axis=1), exact=column["exact"])
    return _result(_mini_store(params, [str(x) for x in ids]), common, reference_start, docs, accepted_triples=triples)


def _groups_result(frame: pd.DataFrame, params: SignatureParams, common: dict[str, Any], first_group: int,
                   reference_start: int | None) -> FindResult:
    docs, where = np.unique(np.concatenate([frame["member"].to_numpy(), frame["kept"].to_numpy()]),
                            return_index=True)
    ids = np.concatenate([frame["id"].astype(object).to_numpy(), frame["kept_id"].astype(object).to_numpy()])[where]
    firsts = frame["first"].to_numpy()
    starts = np.flatnonzero(np.r_[True, firsts[1:] != firsts[:-1]]) if firsts.size else np.empty(0, np.int64)
    groups = Groups(members=np.searchsorted(docs, frame["member"].to_numpy()),
                    offsets=np.r_[starts, firsts.size].astype(np.int64))
    details = MemberDetails(frame["content_hash"].to_numpy(dtype=np.uint64),
                            frame["similarity"].to_numpy(dtype=np.float64), frame["verified"].to_numpy(dtype=bool))
    gone = frame["gone"].to_numpy(dtype=bool)
    is_gone = np.isin(docs, frame["member"].to_numpy()[gone]) if gone.any() else None
    return _result(_mini_store(params, [str(x) for x in ids]), common, reference_start, docs, grouping=groups,
                   is_gone=is_gone,
                   weakest=frame["weakest"].to_numpy()[starts], first_group=first_group,
                   kept=np.searchsorted(docs, frame["kept"].to_numpy()[starts]), member_details=details)


def _result(store: StoredSignatures, common: dict[str, Any], reference_start: int | None, docs: np.ndarray,
            **parts: Any) -> FindResult:
    """A result of the documents ``docs`` (global numbers, ascending), with their stores marked when there is a
    reference store (its documents from ``reference_start`` on)."""
    if reference_start is not None:
        parts["reference"] = docs >= reference_start
    empty = {"accepted": ScoredPairs(*([np.empty(0, np.int64)] * 3), *([np.empty(0)] * 6)), "exact": np.empty(0),
             "accepted_triples": None, "grouping": Groups(np.empty(0, np.int64), np.zeros(1, np.int64)),
             "weakest": np.empty(0), "kept": np.empty(0, np.int64)}
    return FindResult(store=store, **{**empty, **parts}, **common)


def _spill(frame: dd.DataFrame, keys: list[str], kind: str, folder: Path, params: SignatureParams,
           common: dict[str, Any], rows: int, reference_start: int | None) -> int:
    """Sort ``frame`` on ``keys`` on the cluster, then pull its partitions of about ``rows`` rows one at a time into
    files of results."""
    count = int(frame.map_partitions(len).sum().compute())
    if count == 0:
        return 0
    (ordered,) = settled(frame.sort_values(keys, npartitions=max(1, -(-count // rows))))
    groups = 0
    for index, part in enumerate(ordered.to_delayed()):
        chunk = dask.compute(part)[0]
        if kind == "pairs":
            result = _pairs_result(chunk, params, common, reference_start)
        elif kind == "triples":
            result = _triples_result(chunk, params, common, reference_start)
        else:
            result = _groups_result(chunk, params, common, groups + 1, reference_start)
            groups += len(result.grouping)
        with open(folder / f"{kind}-{index:06d}.pickle", "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return count if kind != "groups" else groups


def partition_pairs(gather_limit: int) -> int:
    """Pairs per partition of the streamed end: ``gather_limit``, between :data:`MIN_PAIRS_PER_PARTITION` and
    :data:`PAIRS_PER_PARTITION`, so that the number of partitions stays proportional to the pairs at any limit."""
    return max(MIN_PAIRS_PER_PARTITION, min(PAIRS_PER_PARTITION, gather_limit))


def conclude_on_cluster(needed: dd.DataFrame, frames: DocumentFrames, reduced: dd.DataFrame,
                        alias_documents: np.ndarray, plan: FindPlan, common: dict[str, Any],
                        shuffle_method: str | None) -> FindResult:
    """The end of find per component on the workers, its output spilled in order (see the module docstring)."""
    params, options = frames.params, plan.options
    pairs = needed.reset_index(drop=True)
    labels = connected_components(pairs[["first", "second"]], shuffle_method=shuffle_method).labels
    labelled = pairs.merge(labels, left_on="first", right_on="node", how="left", shuffle_method=shuffle_method)
    (labelled,) = settled(labelled.map_partitions(_label, meta=pairs._meta.assign(
        label=pd.Series([], dtype=np.int64))))
    count = int(labelled.map_partitions(len).sum().compute())
    rows = partition_pairs(options.gather_limit)
    partitions = max(1, -(-count // rows))
    docs = labelled.map_partitions(_documents, meta=pd.DataFrame({"doc": pd.Series([], dtype=np.int64),
                                                                  "label": pd.Series([], dtype=np.int64)}))
    docs = docs.drop_duplicates(subset=["doc"], split_out=partitions, shuffle_method=shuffle_method)
    docs = attach(docs, "doc", reduced, "", frames.divisions, shuffle_method)
    docs = docs.merge(frames.names, left_index=True, right_index=True, how="inner").reset_index()
    by_pairs = labelled.shuffle(on="label", npartitions=partitions, shuffle_method=shuffle_method)
    by_docs = docs.shuffle(on="label", npartitions=partitions, shuffle_method=shuffle_method)
    start = frames.reference_start
    triple_candidates = None
    if options.ways == 3:
        # The triples' simultaneous bound divides by the run's candidate triples, the local engine's count.
        by_pairs, by_docs = settled(by_pairs, by_docs)
        triple_candidates = int(sum(dask.compute(*[
            dask.delayed(count_partition_triples)(p, d, plan)
            for p, d in zip(by_pairs.to_delayed(), by_docs.to_delayed(), strict=True)])))
    steps = [dask.delayed(conclude_partition, nout=5)(p, d, plan, alias_documents, triple_candidates)
             for p, d in zip(by_pairs.to_delayed(), by_docs.to_delayed(), strict=True)]
    joined = dask.delayed(lambda lists: [item for found in lists for item in found])
    outputs = settled(*[step[0] for step in steps], *[step[1] for step in steps], *[step[2] for step in steps],
                      joined([step[3] for step in steps]), joined([step[4] for step in steps]))
    problems, gone = dask.compute(outputs[-2], outputs[-1])
    count_parts = len(steps)
    folder = tempfile.TemporaryDirectory(prefix="dedup-find-")
    found = [dd.from_delayed(list(outputs[i * count_parts:(i + 1) * count_parts]), verify_meta=False)
             for i in range(3)]
    counts = {"pairs": _spill(found[0], ["negative", "first", "second"], "pairs", Path(folder.name), params, common,
                              rows, start),
              "groups": _spill(found[2], ["first", "member"], "groups", Path(folder.name), params, common, rows,
                               start)}
    if options.ways == 3:
        counts["triples"] = _spill(found[1], ["negative", "a", "b", "c"], "triples", Path(folder.name), params,
                                   common, rows, start)
    result = _result(_mini_store(params, []), common, start, np.empty(0, np.int64),
                     accepted_triples=None if options.ways != 3 else ScoredTriples.empty())
    result.streamed = Spilled(folder, counts, partitions)
    result.keep_field_problems = problems
    result.gone = [identifier for _, identifier in sorted(gone)]  # in document order, as the local engine's
    return result
