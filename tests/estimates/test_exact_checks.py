"""The batched exact resemblances against the definitions: bit for bit the floats of the tag-and-sort reference, on
random sets and on the sample corpora; equal sets, fingerprint collisions and shifted keys; each document read once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dedup_cli import verification
from dedup_cli.cli.main import cli
from dedup_cli.estimates import exact
from dedup_cli.estimates.exact import (
    FlatSets,
    Split,
    equal_set_classes,
    flat_pair_resemblances,
    flat_triple_resemblances,
    intersection_sizes,
    pair_resemblances,
    triple_resemblances,
)
from dedup_cli.store.store import open_store
from dedup_cli.verification import ExactSets, read_sets, verify_pairs, verify_triples

CORPORA = Path(__file__).resolve().parents[2] / "sample_corpora"


def tagged_pair_resemblances(sets: list[np.ndarray | None], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The reference: both sets of each pair tagged with the pair, sorted by (pair, element), an element in both
    sets is one that repeats; R = shared / (|A| + |B| − shared) in float64 (the exact checks before the batched
    lookups)."""
    result = np.full(first.size, np.nan)
    for p, (a, b) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
        if sets[a] is None or sets[b] is None or sets[a].size + sets[b].size == 0:
            continue
        both = np.sort(np.concatenate([sets[a], sets[b]]))
        shared = np.int64(np.count_nonzero(both[1:] == both[:-1]))
        result[p] = shared / (np.int64(sets[a].size) + np.int64(sets[b].size) - shared)
    return result


def tagged_triple_resemblances(sets: list[np.ndarray | None], docs: np.ndarray) -> np.ndarray:
    """The reference for triples: an element of all three sets appears three times, each distinct one is one
    element of the union."""
    result = np.full(docs.shape[0], np.nan)
    for t, row in enumerate(docs.tolist()):
        members = [sets[d] for d in row]
        if any(m is None for m in members) or sum(m.size for m in members) == 0:
            continue
        every = np.sort(np.concatenate(members))
        starts = np.flatnonzero(np.r_[True, every[1:] != every[:-1]])
        runs = np.diff(np.r_[starts, every.size])
        result[t] = np.int64(np.count_nonzero(runs == 3)) / np.int64(starts.size)
    return result


def random_sets(generator: np.random.Generator, count: int, dtype: type) -> list[np.ndarray | None]:
    """Sets of 0-120 elements drawn from a shared pool (so that they overlap), some repeated, some unknown."""
    pool = generator.integers(0, 1 << 62, size=300).astype(dtype)
    sets: list[np.ndarray | None] = []
    for _ in range(count):
        draw = generator.random()
        if draw < 0.1:
            sets.append(None)
        elif draw < 0.3 and sets and sets[-1] is not None:
            sets.append(sets[-1].copy())  # equal sets: one class
        else:
            own = generator.integers(0, 1 << 62, size=int(generator.integers(0, 40))).astype(dtype)
            shared = generator.choice(pool, size=int(generator.integers(0, 80)), replace=False)
            sets.append(np.unique(np.concatenate([own, shared])))
    return sets


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
@pytest.mark.parametrize("seed", range(6))
def test_batched_resemblances_are_the_reference_floats(seed: int, dtype: type) -> None:
    generator = np.random.default_rng(seed)
    sets = random_sets(generator, 40, dtype)
    first, second = generator.integers(0, 40, 500), generator.integers(0, 40, 500)
    found = pair_resemblances(sets, first, second)
    assert found.tobytes() == tagged_pair_resemblances(sets, first, second).tobytes()
    docs = generator.integers(0, 40, (300, 3))
    assert triple_resemblances(sets, docs).tobytes() == tagged_triple_resemblances(sets, docs).tobytes()


def test_negative_elements_keep_their_order_and_equalities() -> None:
    sets: list[np.ndarray | None] = [np.array([-5, -1, 0, 7]), np.array([-1, 0, 3]), np.array([], np.int64)]
    found = pair_resemblances(sets, np.array([0, 0, 2]), np.array([1, 2, 2]))
    np.testing.assert_array_equal(found, [2 / 5, 0.0, np.nan])


def test_equal_sets_are_one_class_even_when_fingerprints_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = FlatSets.of([np.array([1, 2, 3], np.uint64), np.array([4, 5, 6], np.uint64),
                        np.array([1, 2, 3], np.uint64), None, np.array([], np.uint64), np.array([4, 5, 6], np.uint64)])
    np.testing.assert_array_equal(equal_set_classes(sets), [0, 1, 0, 3, 4, 1])
    # Every fingerprint the same: a set joins the first of its group only when their elements are equal (the
    # others stay their own class, counted in full).
    monkeypatch.setattr(exact, "_mixed", lambda values: np.zeros_like(values))
    np.testing.assert_array_equal(equal_set_classes(sets), [0, 1, 0, 3, 4, 5])
    np.testing.assert_array_equal(intersection_sizes(sets, np.array([0, 0, 1, 2]), np.array([1, 2, 5, 3])),
                                  [0, 3, 3, 0])


def test_keys_made_equal_by_the_shift_are_walked() -> None:
    # Elements near 2^64 that differ in their low bits only: with 2^12 sets the key keeps their top 51 bits, so
    # many elements of one set share a key, and each is still found or not by its own value.
    generator = np.random.default_rng(3)
    top = np.uint64((1 << 64) - (1 << 20))
    sets = [np.unique(top + generator.integers(0, 1 << 14, size=200).astype(np.uint64)) for _ in range(4096)]
    first, second = generator.integers(0, 4096, 300), generator.integers(0, 4096, 300)
    flat = FlatSets.of(sets)
    assert flat_pair_resemblances(flat, first, second).tobytes() == \
        tagged_pair_resemblances(list(sets), first, second).tobytes()


def test_batches_of_any_size_give_the_same_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = np.random.default_rng(7)
    sets = random_sets(generator, 30, np.uint64)
    first, second = generator.integers(0, 30, 200), generator.integers(0, 30, 200)
    docs = generator.integers(0, 30, (100, 3))
    whole = pair_resemblances(sets, first, second), triple_resemblances(sets, docs)
    monkeypatch.setattr(exact, "_QUERIES_PER_BATCH", 7)
    assert pair_resemblances(sets, first, second).tobytes() == whole[0].tobytes()
    assert triple_resemblances(sets, docs).tobytes() == whole[1].tobytes()
    # Shared out in runs, as workers would (the runs handed to the mapper cover every pair once, in order).
    runs: list[tuple[int, int]] = []

    def mapper(count, tasks):  # type: ignore[no-untyped-def]
        runs.extend(tasks)
        return map(count, tasks)

    split = Split(mapper, parts=3, least=1)
    flat = FlatSets.of(sets)
    assert flat_pair_resemblances(flat, first, second, split).tobytes() == whole[0].tobytes()
    assert flat_triple_resemblances(flat, docs, split).tobytes() == whole[1].tobytes()
    assert len(runs) > 3 and runs[0][0] == 0


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("exact") / "sample.parquet"
    result = CliRunner().invoke(cli, ["sign", str(CORPORA), "--exclude", "SOURCE", "-o", str(store), "-k", "64",
                                      "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return store


def test_the_sample_corpora_give_the_reference_floats(sample_store: Path) -> None:
    stored = open_store(sample_store).read()
    rows = np.arange(len(stored), dtype=np.int64)
    flat = read_sets(stored, rows)
    assert flat.known.all()
    sets = [flat.values[flat.offsets[i]:flat.offsets[i + 1]] for i in range(len(flat))]
    generator = np.random.default_rng(11)
    first, second = generator.integers(0, len(stored), 3000), generator.integers(0, len(stored), 3000)
    assert verify_pairs(stored, first, second).exact.tobytes() == \
        tagged_pair_resemblances(list(sets), first, second).tobytes()
    docs = generator.integers(0, len(stored), (1000, 3))
    assert verify_triples(stored, docs).exact.tobytes() == tagged_triple_resemblances(list(sets), docs).tobytes()


def test_a_document_is_read_once_for_its_pairs_and_triples(sample_store: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    stored = open_store(sample_store).read()
    asked: list[int] = []
    original = verification.read_sets

    def counting(store: object, rows: np.ndarray) -> FlatSets:
        asked.extend(rows.tolist())
        return original(store, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(verification, "read_sets", counting)
    sets = ExactSets(stored)
    first, second = np.array([0, 0, 0, 1, 2]), np.array([1, 2, 3, 2, 3])
    pairs = verify_pairs(stored, first, second, sets)
    triples = verify_triples(stored, np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]]), sets)
    assert sorted(asked) == [0, 1, 2, 3, 4]  # 4 only for the triples, the others once for both
    assert pairs.checked == 5 and triples.checked == 3
    assert flat_triple_resemblances(sets.sets, np.searchsorted(sets.rows, [[0, 1, 2]])).tobytes() == \
        triples.exact[:1].tobytes()
