"""Numbering a store's documents with its row groups read by forked workers (find -j): the same documents, counts,
runs and order as numbering them in one process, whether the ids ascend throughout, only within each row group,
or not at all, and when a later run signs an id again."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dedup_cli.forked import forked_map
from dedup_cli.params import SignatureParams
from dedup_cli.store import documents
from dedup_cli.store.documents import NumberedDocuments
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import create_store, open_store

PARAMS = SignatureParams(num_perm=16, bits=8)


def batch(ids: list[str], run_value: int) -> DocumentBatch:
    n = len(ids)
    values = np.array([[hash((identifier, run_value, j)) % 256 for j in range(16)] for identifier in ids], np.uint8)
    return DocumentBatch(ids=ids, paths=[f"/nowhere/{i}" for i in ids], sizes=np.zeros(n, np.int64),
                         mtimes_ns=np.zeros(n, np.int64), content_hashes=np.arange(n, dtype=np.uint64),
                         shingle_counts=np.array([len(i) * 3 + run_value for i in ids], np.int64), signatures=values)


def forked(function: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
    return forked_map(function, tasks, 2, "numbering")


ASCENDING = [[f"d{i:03d}" for i in range(start, start + 7)] for start in range(0, 35, 7)]
LAYOUTS = {  # the row groups' ids, whether a second run signs some again, whether the ids ascend throughout
    "ascending": (ASCENDING, False, True),
    "ascending, then a run signing some again": (ASCENDING, True, False),
    "each group ascending, ranges overlapping": ([[f"d{i:03d}" for i in range(start, 40, 5)] for start in range(5)],
                                                 False, False),
    "groups in descending order": ([[f"d{i:03d}" for i in range(start, start + 6)] for start in range(30, -1, -6)],
                                   False, False),
    "one row a group": ([[f"d{i:03d}"] for i in range(4)], False, True),
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
@pytest.mark.parametrize("mapper", [forked, map], ids=["forked", "in-process"])
def test_numbering_in_workers_is_numbering_here(layout: str, mapper: Callable[..., Any], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    groups, again, ascending = LAYOUTS[layout]
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        for ids in groups:
            run.write(batch(ids, 1))
    if again:  # the later run wins, and adds a new id
        with open_store(path).begin_run(PARAMS) as run:
            run.write(batch(["d003", "d010", "d999"], 2))
    seen: list[bool] = []
    original = documents._numbers_in_workers

    def watched(*arguments: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        found = original(*arguments)
        seen.append(found[2])
        return found

    monkeypatch.setattr(documents, "_numbers_in_workers", watched)
    store = open_store(path)
    with NumberedDocuments([store]) as here, NumberedDocuments([store], mapper) as workers:
        assert seen == [ascending]  # the workers read the row groups (once), and found the ids' order
        assert workers.documents == here.documents
        assert np.array_equal(workers.shingle_counts, here.shingle_counts)
        assert np.array_equal(workers.runs, here.runs)
        everything = np.arange(here.documents, dtype=np.int64)
        assert workers.stored(everything).ids == here.stored(everything).ids == sorted(here.stored(everything).ids)
        for (docs_w, packed_w), (docs_h, packed_h) in zip(workers.signatures(), here.signatures(), strict=True):
            assert np.array_equal(docs_w, docs_h) and np.array_equal(packed_w, packed_h)


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_documents_read_by_forked_workers_into_shared_memory_are_those_read_here(layout: str,
                                                                                tmp_path: Path) -> None:
    # Some documents of each row group, every document, and none: the same store, column by column.
    groups, again, _ = LAYOUTS[layout]
    path = tmp_path / "store"
    with create_store(path, PARAMS).begin_run(PARAMS) as run:
        for ids in groups:
            run.write(batch(ids, 1))
    if again:
        with open_store(path).begin_run(PARAMS) as run:
            run.write(batch(["d003", "d010", "d999"], 2))
    with NumberedDocuments([open_store(path)]) as numbered:
        for docs in (np.arange(numbered.documents)[::3], np.arange(numbered.documents), np.arange(0)):
            here = numbered.stored(docs)
            shared = numbered.stored(docs, mapper=forked, forked=True)
            assert shared.ids == here.ids and shared.paths == here.paths
            for name in ("shingle_counts", "packed", "content_hashes", "runs", "mtimes_ns"):
                assert np.array_equal(getattr(shared, name), getattr(here, name)), name
                assert getattr(shared, name).dtype == getattr(here, name).dtype, name
