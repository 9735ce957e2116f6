"""The public API, its options and errors, and the pieces the restructuring added: reading only the named rows
of a store, reading one column, the exact resemblance of many pairs at once, the one atomic-write helper."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from helpers import StoreWriter

import dedup_cli as dedup
from dedup_cli.atomic_files import atomic_write
from dedup_cli.cli.main import flag, message
from dedup_cli.errors import DedupError, OptionError, UsageError
from dedup_cli.estimates import exact
from dedup_cli.estimates.exact import pair_resemblances
from dedup_cli.minhash.feistel import feistel
from dedup_cli.options.checks import literal
from dedup_cli.options.finding import EstimateOptions, FindOptions
from dedup_cli.options.input_options import InputOptions
from dedup_cli.options.planning import PlanOptions
from dedup_cli.options.signing import SignOptions
from dedup_cli.options.vocabulary import DEFAULT_NUM_PERM, DEFAULT_STORED_BITS
from dedup_cli.params import SignatureParams
from dedup_cli.store import parts
from dedup_cli.store.format import DocumentBatch
from dedup_cli.store.store import create_store, open_store, read_store


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in dedup.__all__:
        assert getattr(dedup, name) is not None, name
    assert set(dir(dedup)) >= set(dedup.__all__)
    with pytest.raises(AttributeError):
        dedup.no_such_name  # noqa: B018


def test_options_are_frozen_with_the_command_line_defaults() -> None:
    options = FindOptions()
    assert (options.threshold, options.bits, options.ways, options.grouping, options.keep, options.verify,
            options.candidates) == (0.5, None, 2, "components", "first", "borderline", "lsh")
    assert options.group is None  # the command's own: components for find, witness for filter
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.threshold = 0.8  # type: ignore[misc]
    # k and B: None, the store's, else a new store's default, 128 values of 16 bits (as sign's -k and -b)
    assert SignOptions().num_perm is None and SignOptions().bits is None and SignOptions().scheme == "oph"
    assert (DEFAULT_NUM_PERM, DEFAULT_STORED_BITS) == (128, 16)
    signed = dedup.sign_texts(["one two three four five six"]).params
    assert (signed.num_perm, signed.bits) == (DEFAULT_NUM_PERM, DEFAULT_STORED_BITS)
    assert (PlanOptions().num_perm, PlanOptions().stored_bits) == (128, 16)
    assert PlanOptions().bits == 2 and EstimateOptions().level == 0.95


def test_option_errors_name_the_parameter_and_the_flag() -> None:
    with pytest.raises(OptionError) as caught:
        FindOptions(ways=3, bits=1)
    error = caught.value
    assert (error.name, error.value) == ("bits", 1)
    assert str(error) == "ways 3 needs bits 2 or more; 1-bit values carry no 3-way information"
    assert message(error) == "--ways 3 needs --bits 2 or more; 1-bit values carry no 3-way information"
    with pytest.raises(OptionError) as caught:
        InputOptions(null_separated=True)
    assert message(caught.value).startswith("-0/--null applies to --files-from")
    assert flag("max_document_bytes") == "--max-document-bytes"


def test_store_dependent_options_are_checked_from_the_manifest(tmp_path: Path) -> None:
    options = FindOptions(bits=9)
    with pytest.raises(OptionError) as caught:
        options.check_store(8, 256, "s.parquet")
    assert message(caught.value) == ("--bits 9 exceeds the 8 bits stored in s.parquet; use --bits 1 to 8, or "
                                     "re-sign with --bits 9 or more into a new store")
    with pytest.raises(OptionError, match="bands 30 × rows 10 needs 300 values"):
        FindOptions(bands=30, rows=10).check_store(8, 256, "s.parquet")
    FindOptions(bands=30, rows=10, candidates="all").check_store(8, 256, "s.parquet")  # no banding: fine
    assert EstimateOptions().check_store(("a", "b"), 8, "s.parquet") == 8
    with pytest.raises(OptionError, match="name two or three different document ids"):
        EstimateOptions().check_ids(("a", "a"))


def test_text_options_do_not_apply_to_integer_sets() -> None:
    sets = InputOptions(input_format="sets", universe=100)
    assert SignatureParams.from_options(SignOptions(input=sets)).input_kind == "sets"
    with pytest.raises(OptionError) as caught:
        SignOptions(input=sets, shingle_size=3)
    assert message(caught.value).startswith("--shingle-size applies to text")
    with pytest.raises(OptionError, match="triple recall|out of reach"):
        FindOptions(ways=3, recall=0.9999)


def test_templates_keep_literal_braces() -> None:
    error = OptionError("id_root", "a{b}", f"{{id_root}} {literal('/x/{bits}/')} differs")
    assert str(error) == "id_root /x/{bits}/ differs"
    assert message(error) == "--id-root /x/{bits}/ differs"
    plain = DedupError("a plain message with {braces}")
    assert str(plain) == message(plain) == "a plain message with {braces}"
    assert isinstance(error, UsageError) and isinstance(error, ValueError)


def test_pair_resemblances_equal_set_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    sets: list[np.ndarray | None] = [
        np.unique(rng.integers(0, 60, size=rng.integers(0, 40))).astype(np.uint64) for _ in range(30)
    ]
    sets += [None, np.empty(0, dtype=np.uint64)]
    first, second = rng.integers(0, len(sets), 400), rng.integers(0, len(sets), 400)
    expected = []
    for a, b in zip(first.tolist(), second.tolist(), strict=True):
        set_a, set_b = sets[a], sets[b]
        if set_a is None or set_b is None or set_a.size + set_b.size == 0:
            expected.append(np.nan)
        else:
            shared = len(set(set_a.tolist()) & set(set_b.tolist()))
            expected.append(shared / (set_a.size + set_b.size - shared))
    np.testing.assert_array_equal(pair_resemblances(sets, first, second), expected)
    monkeypatch.setattr(exact, "_QUERIES_PER_BATCH", 5)  # many small batches of pairs
    np.testing.assert_array_equal(pair_resemblances(sets, first, second), expected)
    assert pair_resemblances(sets, np.empty(0, np.int64), np.empty(0, np.int64)).size == 0


def _batch(numbers: list[int], k: int = 8) -> DocumentBatch:
    values = np.array(numbers, dtype=np.int64)
    return DocumentBatch(
        ids=[f"doc-{n:03d}" for n in numbers], paths=[f"/corpus/doc-{n:03d}.txt" for n in numbers],
        sizes=values, mtimes_ns=values, content_hashes=values.astype(np.uint64), shingle_counts=values % 3,
        signatures=np.array([[n % 256] * k for n in numbers], dtype=np.uint8),
    )


@pytest.mark.parametrize("layout", ["parts", "format 1"])
def test_named_rows_and_one_column_are_read_like_the_whole_store(tmp_path: Path, layout: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    params = SignatureParams(num_perm=8, bits=8)
    path = tmp_path / "store"
    if layout == "parts":
        monkeypatch.setattr(parts, "PART_ROWS", 3)  # several parts, each of one row group or more
        store = create_store(path, params)
        for written, removed in (([5, 1, 7, 3], []), ([4, 1], ["doc-007"]), ([9], [])):
            with store.begin_run(params) as run:
                run.write(_batch(written))
                run.remove(removed)
    else:
        with StoreWriter(path, params) as writer:
            writer.write(_batch([1, 3, 4, 5, 9]))
    opened = open_store(path)
    whole = read_store(path)
    assert whole.ids == ["doc-001", "doc-003", "doc-004", "doc-005", "doc-009"]
    np.testing.assert_array_equal(opened.shingle_counts(), whole.shingle_counts)
    named, missing = opened.read_documents(["doc-009", "doc-007", "doc-001", "nope"])
    assert missing == ["doc-007", "nope"]
    assert named.ids == ["doc-009", "doc-001"]
    rows = [whole.ids.index(identifier) for identifier in named.ids]
    np.testing.assert_array_equal(named.packed, whole.packed[rows])
    np.testing.assert_array_equal(named.shingle_counts, whole.shingle_counts[rows])
    assert named.paths == [whole.paths[row] for row in rows]
    assert whole.runs is not None and named.runs is not None
    np.testing.assert_array_equal(named.runs, whole.runs[rows])


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target, binary=False) as stream:
            stream.write("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with atomic_write(target, binary=False) as stream:
        stream.write("new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_feistel_inverse_undoes_it() -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 1 << 63, size=(5, 4), dtype=np.uint64)
    values = np.arange(1 << 10, dtype=np.uint64)
    rows = np.arange(values.size) % 5
    forward = feistel(values, keys, 5, rows=rows)
    assert np.array_equal(np.sort(forward[rows == 0]) < (1 << 10), np.ones((rows == 0).sum(), dtype=bool))
    np.testing.assert_array_equal(feistel(forward, keys, 5, rows=rows, inverse=True), values)
