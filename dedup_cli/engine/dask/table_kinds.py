"""The kinds of table the Dask engine's ``find`` passes between its tasks, each with the columns it declares: the one
place where a table's columns are written down, for the task that makes it and the one that reads it.

A table is a dict of equal-length columns (:mod:`.exchange`). A :class:`TableKind` names the columns a table of
it holds: :meth:`TableKind.of` builds one and refuses a column missing or unknown, :meth:`TableKind.check` checks
one, and where tables meet (:func:`dedup_cli.engine.dask.exchange.joined`, an :func:`dedup_cli.engine.dask.exchange.
exchange` given a kind, the range joins of :mod:`.joins`, the parts a work folder kept) they are checked against
their kind, so a column written under one name and read under another fails there, naming both, rather than far
away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dedup_cli.estimates.pairs import ScoredPairs

Table = dict[str, Any]
"""A table: equal-length columns by name (numpy arrays; ids and locations as :class:`dedup_cli.store.names.Names`)."""


@dataclass(frozen=True)
class TableKind:
    """A kind of table: its name (for messages) and the columns every table of it holds, in order."""

    name: str
    columns: tuple[str, ...]

    def of(self, **columns: Any) -> Table:
        """A table of this kind from its columns, which must be exactly the declared ones."""
        return self.check(columns)

    def check(self, table: Table) -> Table:
        """``table``, when it holds exactly the declared columns (an empty dict, no table at all, passes).

        Raises:
            ValueError: a column missing or not declared.
        """
        if table and set(table) != set(self.columns):
            missing, unknown = sorted(set(self.columns) - set(table)), sorted(set(table) - set(self.columns))
            raise ValueError(f"a table of {self.name} lacks {missing} and holds {unknown}; it declares "
                             f"{list(self.columns)}")
        return table

    def plus(self, name: str, *columns: str) -> TableKind:
        """The kind of these tables with ``columns`` more."""
        return TableKind(name, self.columns + columns)


SCORE_COLUMNS = tuple(ScoredPairs.__dataclass_fields__)

CODES = TableKind("candidate pair codes", ("code",))
PAIRS = TableKind("pairs", ("first", "second"))
SCORED = TableKind("scored pairs", SCORE_COLUMNS)
DECIDED = SCORED.plus("decided pairs", "exact", "decided")
EXACT = TableKind("exact resemblances", ("first", "second", "exact"))
VALUES = TableKind("documents' b-bit values", ("doc", "shingle_count", "run", "words"))
NAMES = TableKind("documents' names", ("doc", "id", "path", "content_hash", "mtime_ns"))
DOCUMENTS = TableKind("documents", ("doc",))
FILES = TableKind("documents' files", ("doc", "device", "inode"))
EDGES = TableKind("edges", ("u", "v"))
LABELS = TableKind("component labels", ("node", "label"))
LABELLED = DECIDED.plus("pairs with their component", "label")
MEMBERS = TableKind("documents with their component", ("doc", "label"))
PART_DOCUMENTS = MEMBERS.plus("a component's documents", *VALUES.columns[1:], *NAMES.columns[1:])

# The streamed end's output, made per component (:mod:`.end_on_workers`) and sorted and written a part at a time
# (:mod:`.sorted_output`): global document numbers, ids, and ``negative``, the estimate negated (the sort key).
TRIPLE_COLUMNS = ("a", "b", "c", "matches", "ab_matches", "ac_matches", "bc_matches", "estimate", "stderr", "ci_low",
                  "ci_high", "estimate_ab", "estimate_ac", "estimate_bc", "exact")
PAIRS_OUT = SCORED.plus("accepted pairs", "exact", "id_a", "id_b", "negative")
TRIPLES_OUT = TableKind("accepted triples", TRIPLE_COLUMNS + ("id_a", "id_b", "id_c", "negative"))
MEMBERS_OUT = TableKind("grouped documents", ("first", "member", "id", "size", "weakest", "kept", "kept_id",
                                         "content_hash", "similarity", "verified", "gone"))
