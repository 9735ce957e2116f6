"""The rules that decide find's pairs (dedup_cli/engine/stages/decisions.py), which both engines call on columns:
hand-computed cases, and one file under two names found as the local engine and the Dask engine both find it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dedup_cli.engine.stages import decisions as rules
from dedup_cli.estimates.pairs import ScoredPairs


def test_every_document_but_the_lowest_of_a_file_is_an_alias() -> None:
    docs = np.array([7, 3, 9, 4, 5])
    devices = np.array([1, 1, 1, 2, 1], np.uint64)
    inodes = np.array([10, 10, 11, 10, 10], np.uint64)
    assert rules.later_of_each_file(docs, devices, inodes).tolist() == [5, 7]
    assert rules.later_of_each_file(*(np.empty(0, dtype) for dtype in (np.int64, np.uint64, np.uint64))).size == 0


def test_aliases_are_found_by_the_files_on_disk(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one file")
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    (tmp_path / "c.txt").write_text("another")
    locations = [str(tmp_path / name) for name in ("a.txt", "b.txt", "c.txt", "gone.txt")]
    docs = np.array([2, 5, 6, 8])
    found = rules.file_keys(docs, locations)
    assert found[0].tolist() == [2, 5, 6]  # the file that is gone has no key
    assert rules.alias_documents(docs, locations).tolist() == [5]


def test_alias_candidates_are_the_accepted_documents_inside_one_store() -> None:
    first, second = np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7])
    decided = np.array([True, True, False, True])
    assert rules.alias_candidates(first, second, decided, None).tolist() == [0, 1, 3, 4, 5, 7]
    across = np.array([False, True, False, False])
    assert rules.alias_candidates(first, second, decided, across).tolist() == [0, 3, 4, 7]


def test_a_decided_pair_touching_an_alias_is_not_accepted() -> None:
    decided = np.array([True, True, False])
    assert rules.accepted(decided, np.array([0, 1, 2]), np.array([3, 4, 5]), np.array([4])).tolist() == \
        [True, False, False]
    assert rules.accepted(decided, np.array([0]), np.array([3]), np.empty(0, np.int64)) is decided


def test_wanted_rows_touch_a_new_document_and_with_only_across_both_stores() -> None:
    runs = np.array([1, 2, 3, 1, 3])
    reference = np.array([False, False, False, True, True])
    new = rules.new_documents(runs, 2, reference)
    assert new is not None and new.tolist() == [False, False, True, False, False]
    pairs = np.array([[0, 1], [0, 2], [0, 3], [2, 4], [3, 4]])
    assert rules.wanted(new[pairs], reference[pairs], False).tolist() == [False, True, False, True, False]
    assert rules.wanted(new[pairs], reference[pairs], True).tolist() == [False, False, False, True, False]
    triples = np.array([[0, 1, 2], [0, 1, 3], [2, 3, 4]])
    assert rules.wanted(new[triples], reference[triples], True).tolist() == [False, False, True]
    every = rules.new_documents(runs, None, None)
    assert every is None and rules.wanted(every, None, True) is None
    # Without --new-since, against a reference store: the pairs holding a document of the store.
    store = rules.new_documents(runs, None, reference)
    assert store is not None and rules.wanted(store[pairs], reference[pairs], False).tolist() == \
        [True, True, True, True, False]


def _scored(estimate: list[float], low: list[float], high: list[float]) -> ScoredPairs:
    count = len(estimate)
    ints = np.arange(count, dtype=np.int64)
    return ScoredPairs(ints, ints + 1, ints, np.array(estimate), np.full(count, 0.05), np.array(low),
                       np.array(high), np.zeros(count), np.zeros(count))


def test_the_pairs_that_matter_and_those_the_end_needs() -> None:
    scored = _scored([0.9, 0.55, 0.45, 0.2], [0.8, 0.45, 0.35, 0.1], [1.0, 0.65, 0.55, 0.3])
    assert rules.to_check(scored, "borderline", 0.5, None).tolist() == [False, True, True, False]
    assert rules.to_check(scored, "all", 0.5, None).tolist() == [True, True, True, False]
    assert rules.may_matter(scored, "none", 0.5, None, None).tolist() == [True, True, False, False]
    assert rules.may_matter(scored, "borderline", 0.5, None, None).tolist() == [True, True, True, False]
    assert rules.may_matter(scored, "none", 0.5, None, 0.3).tolist() == [True, True, True, False]
    decided = rules.decide(scored.estimate, np.array([np.nan, 0.4, 0.6, np.nan]), 0.5)
    assert decided.tolist() == [True, False, True, False]
    assert rules.needed(decided, scored.estimate, None).tolist() == [True, False, True, False]
    assert rules.needed(decided, scored.estimate, 0.5).tolist() == [True, True, True, False]
