"""The end of find when its edges are many: per connected component on the workers, and the output spilled in order.

1. **Components** of the graph of the pairs the end of find needs (the accepted ones, and with ``ways=3`` those
   within the triple margin) by large-star/small-star on the cluster (:mod:`.star_components`). Every triangle and
   every group lies inside one component of that graph.
2. The pairs and their documents (b-bit values, counts, runs, ids) are **exchanged by component**, so a part
   holds whole components; on each, :func:`dedup_cli.engine.stages.conclude.conclude` (the local engine's end of find)
   runs on the part's documents renumbered in id order. On a disjoint union of components it gives what it
   gives on each, and every stage in it depends only on the order of documents, so the union of the parts'
   answers is the local engine's answer.
3. **Output in order**: pairs, triples and grouped documents are sorted on the cluster in the order the local
   engine writes them (most similar first, ties in id order; groups by their first member) by a sample sort (one
   exchange by sampled splitters of the sort keys), and the driver pulls one sorted part at a time into a small
   result of its own that it spills to a temporary file. Writing then reads those files one after another
   (:class:`Spilled`), so the driver never holds more than one part.
"""

from __future__ import annotations

from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.cluster import settled
from dedup_cli.engine.dask.exchange import Table, column_hash, column_range, exchange, take
from dedup_cli.engine.dask.joins import attach, scored_pairs
from dedup_cli.engine.dask.ranges import NumberedPieces, name_ranges, table_store
from dedup_cli.engine.dask.sorted_output import spilled_result
from dedup_cli.engine.dask.star_components import connected_components
from dedup_cli.engine.dask.table_kinds import (
    DECIDED,
    LABELLED,
    LABELS,
    MEMBERS,
    MEMBERS_OUT,
    NAMES,
    PAIRS_OUT,
    PART_DOCUMENTS,
    TRIPLE_COLUMNS,
    TRIPLES_OUT,
    VALUES,
)
from dedup_cli.engine.stages.conclude import conclude, count_candidate_triples
from dedup_cli.engine.stages.decisions import new_documents
from dedup_cli.engine.stages.filter import member_details
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.engine.stages.plan import FindPlan
from dedup_cli.engine.stages.results import FindResult
from dedup_cli.estimates.triple_scores import ScoredTriples
from dedup_cli.minhash.packing import unpack_words

PAIRS_PER_PARTITION = 1_000_000
"""Pairs per component part and per sorted output part at most (a few hundred MB of a task's memory); fewer when
``FindOptions.gather_limit`` is lower, so that the driver holds fewer pairs at once."""
MIN_PAIRS_PER_PARTITION = 1 << 14
"""Pairs per part at least (when there are as many), whatever ``gather_limit`` says: each part is a task of every
exchange and sort and one round trip of the output, so parts of a few pairs would cost a task per pair
(``gather_limit`` 0 would make one per pair) for no memory saved: 16384 pairs are about 2 MB in the driver."""


def partition_pairs(gather_limit: int) -> int:
    """Pairs per part of the streamed end: ``gather_limit``, between :data:`MIN_PAIRS_PER_PARTITION` and
    :data:`PAIRS_PER_PARTITION`, so that the number of parts stays proportional to the pairs at any limit."""
    return max(MIN_PAIRS_PER_PARTITION, min(PAIRS_PER_PARTITION, gather_limit))


def _labelled(pairs: Table, labels: Table) -> Table:
    """Pairs with their first document's label: that label, or the document itself for the root (the smallest
    document of a component is its own label and is not listed)."""
    order = np.argsort(labels["node"], kind="stable")
    nodes = labels["node"][order]
    where = np.minimum(np.searchsorted(nodes, pairs["first"]), max(nodes.size - 1, 0))
    found = nodes[where] == pairs["first"] if nodes.size else np.zeros(pairs["first"].size, bool)
    label = np.where(found, labels["label"][order][where] if nodes.size else 0, pairs["first"])
    return LABELLED.check({**pairs, "label": label.astype(np.int64)})


def _documents(pairs: Table) -> Table:
    docs, where = np.unique(np.concatenate([pairs["first"], pairs["second"]]), return_index=True)
    return MEMBERS.of(doc=docs.astype(np.int64), label=np.concatenate([pairs["label"], pairs["label"]])[where])


def _unique_docs(table: Table) -> Table:
    docs, where = np.unique(table["doc"], return_index=True)
    return MEMBERS.of(doc=docs, label=table["label"][where])


def _numbered(pairs: Table, docs: Table, plan: FindPlan) -> tuple[Table, Table, Any, np.ndarray]:
    """A part's documents in id order, its pairs in (first, second) order and scored with the documents
    renumbered 0 … m − 1, and the documents' b-bit values."""
    docs = take(docs, np.argsort(docs["doc"], kind="stable"))
    pairs = take(pairs, np.lexsort((pairs["second"], pairs["first"])))
    numbers = docs["doc"]
    local = {**pairs, "first": np.searchsorted(numbers, pairs["first"]),
             "second": np.searchsorted(numbers, pairs["second"])}
    return docs, pairs, scored_pairs(local), unpack_words(docs["words"], int(plan.bits), plan.params.num_perm)


def count_partition_triples(pairs: Table, docs: Table, plan: FindPlan) -> int:
    """The candidate triples of one part's components (:func:`dedup_cli.engine.stages.conclude.
    count_candidate_triples`): summed over the parts, the run's, which the triples' bound divides by."""
    _, _, scored, values = _numbered(pairs, docs, plan)
    return count_candidate_triples(values, scored, plan)


def conclude_partition(pairs: Table, docs: Table, plan: FindPlan, alias_documents: np.ndarray,
                       triple_candidates: int | None = None
                       ) -> tuple[Table, Table, Table, list[tuple[str, str]], list[tuple[int, str]]]:
    """The end of find on the whole components of one part: its (pairs, triples, members) with global document
    numbers and ids, the grouped documents without a value to keep by, and the (number, id) of the documents
    gone since signing; ``triple_candidates``: the run's candidate triples."""
    params, bits, reference_start = plan.params, int(plan.bits), plan.reference_start
    docs, pairs, scored, values = _numbered(pairs, docs, plan)
    numbers, ids, counts, runs = docs["doc"], docs["id"], docs["shingle_count"], docs["run"]
    store = table_store(params, docs)  # a part's table holds both the names and the values
    reference = None if reference_start is None else numbers >= reference_start
    new = new_documents(runs, plan.options.new_since, reference)
    aliases = np.searchsorted(numbers, alias_documents[np.isin(alias_documents, numbers)])
    done = conclude(store, values, set_size_ratios(counts, params.universe), scored, pairs["exact"],
                    pairs["decided"], aliases, new, plan, reference, triple_candidates)
    accepted = done.pairs
    pairs_out = {name: getattr(accepted, name) for name in scored.__dataclass_fields__}
    pairs_out.update(first=numbers[accepted.first], second=numbers[accepted.second], exact=done.exact,
                     id_a=ids[accepted.first], id_b=ids[accepted.second], negative=-accepted.estimate)
    triples = done.triples if done.triples is not None else ScoredTriples.empty()
    columns = [triples.docs[:, 0], triples.docs[:, 1], triples.docs[:, 2], triples.matches, *triples.pair_matches.T,
               triples.estimate, triples.stderr, triples.ci_low, triples.ci_high, *triples.pairwise.T, triples.exact]
    triples_out = dict(zip(TRIPLE_COLUMNS, columns, strict=True))
    for place, name in enumerate("abc"):
        triples_out[name] = numbers[triples.docs[:, place]]
        triples_out[f"id_{name}"] = ids[triples.docs[:, place]]
    triples_out["negative"] = -triples.estimate
    groups = done.groups
    sizes = np.diff(groups.offsets)
    group = np.repeat(np.arange(len(groups)), sizes)
    details = member_details(store, values, accepted, done.exact, groups, done.kept, bits)
    members_out = {
        "first": numbers[groups.members[groups.offsets[:-1]]][group] if group.size else np.empty(0, np.int64),
        "member": numbers[groups.members], "id": ids[groups.members], "size": sizes[group],
        "weakest": done.weakest[group], "kept": numbers[done.kept][group], "kept_id": ids[done.kept][group],
        "content_hash": details.content_hashes, "similarity": details.similarity, "verified": details.verified,
        "gone": np.isin(groups.members, done.gone)}
    gone = list(zip(numbers[done.gone].tolist(), [str(x) for x in ids[done.gone]], strict=True))
    return (PAIRS_OUT.check(pairs_out), TRIPLES_OUT.check(triples_out), MEMBERS_OUT.check(members_out),
            done.keep_field_problems, gone)


def _joined_lists(lists: list[list[Any]]) -> list[Any]:
    return [item for found in lists for item in found]


def _by_component(needed: list[Any], numbered: NumberedPieces, values: list[Any], parts: int, plan: FindPlan
                  ) -> tuple[list[Any], list[Any]]:
    """The needed pairs and their documents (values and names) exchanged by component: ``parts`` parts each."""
    labels = connected_components(needed).labels
    count = max(1, len(needed))
    by_first = exchange(needed, column_hash, count, "first", count, kind=DECIDED)
    labels_by_node = exchange(labels, column_hash, count, "node", count, kind=LABELS)
    labelled = list(settled(*[dask.delayed(_labelled)(pairs, found)
                              for pairs, found in zip(by_first, labels_by_node, strict=True)]))
    docs = exchange([dask.delayed(_documents)(part) for part in labelled], column_range, numbered.ranges, "doc",
                    numbered.divisions, then=_unique_docs, kind=MEMBERS)
    docs = [dask.delayed(attach)(part, "doc", ranged, "", VALUES.columns[1:])
            for part, ranged in zip(docs, values, strict=True)]
    docs = [dask.delayed(attach)(part, "doc", names, "", NAMES.columns[1:])
            for part, names in zip(docs, name_ranges(numbered), strict=True)]
    return (list(settled(*exchange(labelled, column_hash, parts, "label", parts, kind=LABELLED))),
            list(settled(*exchange(docs, column_hash, parts, "label", parts, kind=PART_DOCUMENTS))))


def conclude_on_cluster(needed: list[Any], count: int, numbered: NumberedPieces, values: list[Any],
                        alias_documents: np.ndarray, plan: FindPlan, common: dict[str, Any]) -> FindResult:
    """The end of find per component on the workers, its output spilled in order (see the module docstring):
    ``count`` needed pairs in delayed tables ``needed``, the b-bit ``values`` of each range of documents."""
    options = plan.options
    rows = partition_pairs(options.gather_limit)
    parts = max(1, -(-count // rows))
    by_pairs, by_docs = _by_component(needed, numbered, values, parts, plan)
    triple_candidates = None
    if options.ways == 3:
        # The triples' simultaneous bound divides by the run's candidate triples, the local engine's count.
        triple_candidates = int(sum(dask.compute(*[dask.delayed(count_partition_triples)(p, d, plan)
                                                   for p, d in zip(by_pairs, by_docs, strict=True)])))
    steps = [dask.delayed(conclude_partition, nout=5)(p, d, plan, alias_documents, triple_candidates)
             for p, d in zip(by_pairs, by_docs, strict=True)]
    outputs = settled(*[step[index] for index in range(3) for step in steps],
                      dask.delayed(_joined_lists)([step[3] for step in steps]),
                      dask.delayed(_joined_lists)([step[4] for step in steps]))
    problems, gone = dask.compute(outputs[-2], outputs[-1])
    found = [list(outputs[index * len(steps) : (index + 1) * len(steps)]) for index in range(3)]
    result = spilled_result(found, rows, numbered.params, common, numbered.reference_start, options.ways == 3, parts)
    result.keep_field_problems = problems
    result.gone = [identifier for _, identifier in sorted(gone)]  # in document order, as the local engine's
    return result
