"""The Dask engine's tables declare their columns (dedup_cli/engine/dask/table_kinds.py): a table of a kind is built
only from its columns, and where tables meet (joined, an exchange, a range join, a kept part) a column missing or
not declared fails there, naming both."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_cli.engine.dask import table_kinds
from dedup_cli.engine.dask.exchange import joined
from dedup_cli.engine.dask.joins import attach
from dedup_cli.engine.dask.table_kinds import DECIDED, PAIRS, SCORED


def test_a_kind_builds_and_checks_its_tables() -> None:
    table = PAIRS.of(first=np.array([0, 1]), second=np.array([2, 3]))
    assert PAIRS.check(table) is table and PAIRS.check({}) == {}
    with pytest.raises(ValueError, match=r"a table of pairs lacks \['second'\] and holds \['other'\]"):
        PAIRS.of(first=np.array([0]), other=np.array([1]))
    assert DECIDED.columns == (*SCORED.columns, "exact", "decided")


def test_every_kind_names_its_columns_once() -> None:
    kinds = [value for value in vars(table_kinds).values() if isinstance(value, table_kinds.TableKind)]
    assert len(kinds) >= 10
    for kind in kinds:
        assert len(set(kind.columns)) == len(kind.columns), kind.name


def test_tables_meet_only_with_the_same_columns() -> None:
    first = PAIRS.of(first=np.array([0]), second=np.array([1]))
    second = PAIRS.of(first=np.array([2]), second=np.array([3]))
    assert joined([first, {}, second], PAIRS)["second"].tolist() == [1, 3]
    with pytest.raises(ValueError, match="cannot be joined"):
        joined([first, {"first": np.array([2])}])
    with pytest.raises(ValueError, match="a table of scored pairs lacks"):
        joined([first], SCORED)
    documents = {"doc": np.array([0, 1]), "run": np.array([5, 6])}
    assert attach(first, "first", documents, "a_", ("run",))["a_run"].tolist() == [5]
    with pytest.raises(ValueError, match=r"for its \['words'\] by doc"):
        attach(first, "first", documents, "a_", ("words",))
