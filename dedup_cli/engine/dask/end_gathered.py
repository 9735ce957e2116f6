"""The end of find when its edges are few: the pairs that matter and their documents, gathered into this process.

The accepted pairs (and with ``ways=3`` every scored pair within the triple margin of R0) come to the driver with
the documents they touch, renumbered 0 … m − 1 in document order, which is id order. The local engine's
:func:`dedup_cli.engine.stages.conclude.conclude` then finds the triples, groups, weakest links and representatives:
every stage there depends only on the order of the documents, so the answer is the local engine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.engine.dask.exchange import Table, take
from dedup_cli.engine.dask.joins import scored_pairs
from dedup_cli.engine.dask.ranges import NumberedPieces, names_of, rows_of, table_store
from dedup_cli.engine.dask.table_kinds import VALUES
from dedup_cli.engine.stages import decisions as rules
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.minhash.packing import unpack_words, value_words
from dedup_cli.params import SignatureParams
from dedup_cli.store.snapshot import StoredSignatures


@dataclass
class Gathered:
    """Pairs and their documents in this process, documents renumbered 0 … m − 1 in id order."""

    docs: np.ndarray  # int64[m], the documents' numbers in the whole store, ascending
    store: StoredSignatures  # those documents' ids, locations, counts, hashes, runs and times
    values: np.ndarray  # uint[m, k], their b-bit values
    scored: ScoredPairs  # the gathered pairs, in (first, second) order, renumbered
    exact: np.ndarray  # float64[p], exact resemblance where checked
    decided: np.ndarray  # bool[p]


def needed(decided: Table, floor: float | None) -> Table:
    """The decided pairs of a part the end of find needs (:func:`dedup_cli.engine.stages.decisions.needed`)."""
    return take(decided, rules.needed(decided["decided"], decided["estimate"], floor))


def gather(pairs: Table, numbered: NumberedPieces, values: list[Any], bits: int, names: Table | None = None
           ) -> Gathered:
    """``pairs`` (gathered decided pairs) and the documents they touch, renumbered (``names``: the names of these
    documents and maybe others, read already)."""
    pairs = take(pairs, np.lexsort((pairs["second"], pairs["first"])))
    docs = sorted_unique(np.concatenate([pairs["first"], pairs["second"]]))
    params = numbered.params
    rows = rows_of(values, numbered.divisions, docs) if docs.size else _no_values(bits, params)
    if names is None:
        names = names_of(numbered, docs)
    names = take(names, np.searchsorted(names["doc"], docs))
    store = table_store(params, {**names, **rows})  # the same documents in the same order
    renumbered = {**pairs, "first": np.searchsorted(docs, pairs["first"]),
                  "second": np.searchsorted(docs, pairs["second"])}
    return Gathered(docs, store, unpack_words(rows["words"], bits, params.num_perm), scored_pairs(renumbered),
                    pairs["exact"], pairs["decided"])


def _no_values(bits: int, params: SignatureParams) -> Table:
    return VALUES.of(doc=np.empty(0, np.int64), shingle_count=np.empty(0, np.int64), run=np.empty(0, np.int64),
                     words=np.empty((0, value_words(bits, params.num_perm)), np.uint64))


def ratios(store: StoredSignatures) -> np.ndarray:
    return set_size_ratios(store.shingle_counts, store.params.universe)
