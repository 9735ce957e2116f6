"""Pairs meet their documents: range joins on document numbers, and candidate pairs scored where they meet.

Document tables are held a range of document numbers each (:mod:`.ranges`); a table of pairs is sent to the
range of one of its documents by one exchange (nothing of the documents moves) and joined there by a binary
search on the range's sorted numbers. Scoring sends each candidate pair to its first document's range, then with
that document's b-bit values to its second's: per candidate 16 + 16 + ⌈k·b/8⌉ bytes moved (96 at k = 256, b = 2),
against the stored ⌈k·B/8⌉ bytes a document (256 at B = 8) that stay where they are.

The match count k·Ê_b (Li & König 2010, Sec. 2) comes from the packed b-bit words by XOR and popcount; the
estimate, its standard error and interval from :func:`dedup_cli.estimates.pairs.score_matches`, the function the
local engine's :func:`dedup_cli.estimates.pairs.score_pairs` ends with, so both give the same floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dask
import numpy as np

from dedup_cli.array_primitives import code_pairs
from dedup_cli.engine.dask.exchange import Table, column_range, exchange, take
from dedup_cli.engine.dask.table_kinds import PAIRS, SCORE_COLUMNS, SCORED, VALUES
from dedup_cli.engine.stages import decisions as rules
from dedup_cli.engine.stages.find import set_size_ratios
from dedup_cli.estimates.densified import Densification
from dedup_cli.estimates.pairs import ScoredPairs, count_packed_matches, score_matches
from dedup_cli.params import SignatureParams


def attach(pairs: Table, column: str, documents: Table, prefix: str, names: Sequence[str]) -> Table:
    """``pairs`` with the columns ``names`` of ``documents`` (sorted by ``doc``, holding every document of
    ``column``) for the document in ``column``, each renamed ``prefix`` + name."""
    if documents and not {"doc", *names} <= set(documents):
        raise ValueError(f"pairs meet a table of {sorted(documents)} for its {list(names)} by doc")
    rows = np.searchsorted(documents["doc"], pairs[column])
    return {**pairs, **{prefix + name: documents[name][rows] for name in names}}


def attach_ranges(parts: list[Any], column: str, ranges: list[Any], divisions: tuple[int, ...], prefix: str,
                  names: Sequence[str]) -> list[Any]:
    """Delayed tables of pairs sent to the range of the document in ``column`` (one exchange) and joined there
    with that range's table (:func:`attach`): a part a range."""
    moved = exchange(parts, column_range, len(ranges), column, divisions)
    return [dask.delayed(attach)(part, column, documents, prefix, names)
            for part, documents in zip(moved, ranges, strict=True)]


def candidate_pairs(table: Table, documents: int, reference_start: int | None, only_across: bool) -> Table:
    """Pair codes as (first, second); with a reference store from document ``reference_start`` on, less the pairs
    no report wants whatever their runs (:func:`dedup_cli.engine.stages.decisions.wanted`: those inside the
    reference store, and with ``only_across`` those inside the store too), before they move to be scored."""
    first, second = code_pairs(table["code"], documents)
    if reference_start is not None:
        reference = np.c_[first >= reference_start, second >= reference_start]
        keep = rules.wanted(rules.new_documents(reference, None, reference), reference, only_across)
        assert keep is not None
        first, second = first[keep], second[keep]
    return PAIRS.of(first=first, second=second)


def scored_table(scored: ScoredPairs) -> Table:
    """ScoredPairs as a table of :data:`SCORE_COLUMNS`."""
    return SCORED.of(**{name: getattr(scored, name) for name in SCORE_COLUMNS})


def scored_pairs(table: Table) -> ScoredPairs:
    """The ScoredPairs of a table's :data:`SCORE_COLUMNS`."""
    return ScoredPairs(**{name: table[name] for name in SCORE_COLUMNS})


def score_part(pairs: Table, bits: int, num_perm: int, universe: int, new_since: int | None,
               reference_start: int | None, level: float = 0.95, densification: Densification | None = None
               ) -> Table:
    """Score one part's pairs, each row holding both documents' packed b-bit words (``a_words``, ``b_words``),
    shingle counts and runs; with ``new_since`` (pairs only) the pairs touching no newer document of the store
    (below ``reference_start``) are left out first, as the local engine drops them before scoring.
    ``densification``: the bins of one permutation hashing (the plan's), whose variances the intervals use."""
    if new_since is not None:
        runs = np.c_[pairs["a_run"], pairs["b_run"]]
        reference = None if reference_start is None else np.c_[pairs["first"], pairs["second"]] >= reference_start
        keep = rules.wanted(rules.new_documents(runs, new_since, reference), reference, False)
        assert keep is not None
        pairs = take(pairs, keep)
    first, second = pairs["first"], pairs["second"]
    matches = count_packed_matches(pairs["a_words"], pairs["b_words"], bits, num_perm)
    r1 = set_size_ratios(pairs["a_shingle_count"], universe)
    r2 = set_size_ratios(pairs["b_shingle_count"], universe)
    return scored_table(score_matches(first, second, matches, r1, r2, num_perm, bits, level, densification))


def score_candidates(codes: list[Any], values: list[Any], divisions: tuple[int, ...], documents: int, bits: int,
                     params: SignatureParams, new_since: int | None, reference_start: int | None = None,
                     only_across: bool = False, densification: Densification | None = None) -> list[Any]:
    """Every candidate pair scored (:data:`SCORE_COLUMNS`): delayed tables, a part a range of the second
    document.

    ``values`` are the b-bit values of each range (:func:`dedup_cli.engine.dask.ranges.value_ranges`,
    persisted: both joins read them). With ``reference_start`` (pairs only: a reference store's documents from
    there on), the pairs the local engine leaves out before scoring are left out here too (:func:`candidate_pairs`,
    :func:`score_part`).
    """
    pairs = [dask.delayed(candidate_pairs)(part, documents, reference_start, only_across) for part in codes]
    columns = VALUES.columns[1:]
    with_first = attach_ranges(pairs, "first", values, divisions, "a_", columns)
    both = attach_ranges(with_first, "second", values, divisions, "b_", columns)
    return [dask.delayed(score_part)(part, bits, params.num_perm, params.universe, new_since, reference_start,
                                     densification=densification)
            for part in both]
