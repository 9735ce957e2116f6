"""The pipeline on texts in memory: sign_texts and find_duplicates give what sign and find give for the same
documents, keep the order given, check exactly from the texts they hold, and refuse what does not apply."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLE_CORPORA

import dedup_cli as dedup
from dedup_cli.errors import OptionError, UsageError

CORPUS = SAMPLE_CORPORA / "licenses"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], dedup.Store]:
    """The licenses corpus as (ids in store order, texts), and its store signed from the files."""
    store = tmp_path_factory.mktemp("texts") / "sigs.parquet"
    dedup.sign([str(CORPUS)], str(store), dedup.SignOptions(jobs=1))
    signed = dedup.read_store(str(store))
    texts = [(CORPUS / path).read_text(encoding="utf-8") for path in signed.ids]
    return signed.ids, texts, store


def test_signatures_are_the_stores_bytes(corpus: tuple[list[str], list[str], Path]) -> None:
    ids, texts, store = corpus
    signed = dedup.read_store(str(store))
    memory = dedup.sign_texts(texts, ids)
    assert memory.ids == ids
    assert np.array_equal(memory.packed, signed.packed)
    assert np.array_equal(memory.shingle_counts, signed.shingle_counts)
    assert np.array_equal(memory.content_hashes, signed.content_hashes)


@pytest.mark.parametrize("options", [{"threshold": 0.5}, {"threshold": 0.3, "ways": 3, "bits": 2},
                                     {"threshold": 0.4, "group": "strict", "verify": "all", "keep": "longest"}],
                         ids=["pairs", "triples", "strict-verified"])
def test_the_records_are_finds(corpus: tuple[list[str], list[str], Path], options: dict) -> None:
    ids, texts, store = corpus
    on_disk = dedup.find(str(store), dedup.FindOptions(**options))
    in_memory = dedup.find_duplicates(texts, dedup.FindOptions(**options), ids=ids)
    for kind in ("groups", "pairs", "members") + (("triples",) if options.get("ways") == 3 else ()):
        expected = list(getattr(on_disk, kind)())
        assert list(getattr(in_memory, kind)()) == expected, kind
    assert list(on_disk.groups()), "the licenses corpus has near-duplicates"
    if options.get("verify") == "all":
        assert all(pair.exact is not None for pair in in_memory.pairs())


def test_signed_once_found_many_times(corpus: tuple[list[str], list[str], Path]) -> None:
    ids, texts, _ = corpus
    signatures = dedup.sign_texts(texts, ids)
    loose = dedup.find_duplicates(signatures, dedup.FindOptions(threshold=0.3))
    tight = dedup.find_duplicates(signatures, dedup.FindOptions(threshold=0.9))
    assert loose.pair_count >= tight.pair_count
    pair = next(loose.pairs())
    estimated = dedup.estimate([pair.id_a, pair.id_b], signatures, dedup.EstimateOptions(exact=True))
    assert estimated.estimate == pytest.approx(pair.estimate, abs=1e-6)
    assert estimated.exact is not None and 0 < estimated.exact <= 1


def test_default_ids_are_positions_and_the_first_text_is_kept() -> None:
    base = " ".join(f"word{i}" for i in range(300))
    texts = ["unrelated " * 50, base.replace("word7 ", "seven "), base, "", base + " and a tail"]
    result = dedup.find_duplicates(texts, dedup.FindOptions(threshold=0.5))
    (group,) = result.groups()
    assert group.ids == ("1", "2", "4") and group.representative == "1"
    assert [member.action for member in result.members()] == ["keep", "drop", "drop"]
    assert dedup.find_duplicates([], dedup.FindOptions()).group_count == 0


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: dedup.sign_texts(["a", b"b"]), UsageError, "text 1 is a bytes, not a str"),
    (lambda: dedup.sign_texts(["a", "b"], ["x"]), UsageError, "1 ids for 2 texts"),
    (lambda: dedup.sign_texts(["a", "b"], ["x", "x"]), UsageError, "id 'x' names two texts"),
    (lambda: dedup.find_duplicates(["a"], dedup.FindOptions(against="ref.parquet")), OptionError,
     "against ref.parquet names a store"),
    (lambda: dedup.find_duplicates(["a"], dedup.FindOptions(work_dir="w")), OptionError, "work_dir w names a store"),
    (lambda: dedup.find_duplicates(["a"], dedup.FindOptions(bits=17)), OptionError, "bits 17"),
    (lambda: dedup.estimate(["a", "z"], dedup.sign_texts(["x y z", "x y"], ["a", "b"])), UsageError,
     "no text with id 'z'"),
])
def test_mistakes_are_one_line(call, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_arrow_arrays_and_pandas_series_are_texts(corpus: tuple[list[str], list[str], Path]) -> None:
    import pandas as pd
    import pyarrow as pa

    ids, texts, _ = corpus
    expected = dedup.sign_texts(texts, ids).packed
    for given in (pa.array(texts), pa.chunked_array([texts[:3], texts[3:]]), pd.Series(texts), iter(texts)):
        assert np.array_equal(dedup.sign_texts(given, ids).packed, expected), type(given)
    with pytest.raises(UsageError, match="text 1 is a NoneType"):
        dedup.sign_texts(pa.array(["a", None]))


def test_the_package_is_typed() -> None:
    assert (Path(dedup.__file__).parent / "py.typed").exists()
    for name in ("Groups", "ScoredPairs", "ScoredTriples", "Banding", "Verification", "Signatures", "Group"):
        assert getattr(dedup, name).__module__.startswith("dedup_cli."), name
    assert dedup.filter_corpus is dedup.filter


def test_many_blocks_give_the_answer_of_one(corpus: tuple[list[str], list[str], Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Texts signed a few at a time and signatures banded a few rows at a time (what 10^5 texts do by default)
    # give the records of one batch and one block.
    from dedup_cli.api import texts as in_memory
    from dedup_cli.store import memory

    ids, texts, _ = corpus
    options = dedup.FindOptions(threshold=0.3, ways=3, bits=2)
    whole = dedup.find_duplicates(texts, options, ids=ids)
    monkeypatch.setattr(in_memory, "TEXTS_PER_BATCH", 3)
    monkeypatch.setattr(memory, "SIGNATURE_BLOCK", 4)
    assert -(-len(texts) // 4) > 2
    pieces = dedup.find_duplicates(texts, options, ids=ids)
    for kind in ("groups", "pairs", "triples", "members"):
        assert list(getattr(pieces, kind)()) == list(getattr(whole, kind)()), kind
    assert list(whole.pairs())


def test_a_lone_surrogate_is_read_as_sign_reads_it_from_json(tmp_path: Path) -> None:
    """UTF-8 cannot hold "\\ud800"; sign reads it from a JSON string as U+FFFD, and so do the texts in memory,
    with one warning, whichever function is given them."""
    texts = ["one two three four five six \ud800 seven eight", "one two three four five six \ud800 seven eight",
             "alpha beta gamma delta epsilon zeta eta theta"]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"id": str(n), "text": text}) + "\n" for n, text in enumerate(texts)))
    assert "\\ud800" in records.read_text()
    store = tmp_path / "sigs.parquet"
    dedup.sign([str(records)], str(store), dedup.SignOptions(input=dedup.InputOptions(id_field="id")))
    stored = dedup.read_store(str(store))
    with pytest.warns(dedup.DedupWarning, match="^2 texts hold a lone surrogate, which UTF-8 cannot hold "
                      r"\(the first: id '0'\); signed with U\+FFFD in its place, as sign reads it$"):
        signed = dedup.sign_texts(texts)
    assert np.array_equal(signed.packed, stored.packed)
    assert np.array_equal(signed.content_hashes, stored.content_hashes)
    assert signed.texts is not None and signed.texts[0] == texts[0].replace("\ud800", "\ufffd")
    verified = dedup.FindOptions(verify="all")
    with pytest.warns(dedup.DedupWarning, match="lone surrogate"):
        found = dedup.find_duplicates(texts, verified)
    assert [group.ids for group in found.groups()] == [("0", "1")]
    assert [pair.exact for pair in found.pairs()] == [1.0]
    assert list(found.pairs()) == list(dedup.find(str(store), verified).pairs())
    with pytest.warns(dedup.DedupWarning, match="^1 text holds a lone surrogate"):
        assert dedup.estimate(["0", "2"], texts).estimate == dedup.estimate(["0", "2"], str(store)).estimate


def test_estimate_takes_the_texts_themselves_as_the_recipe_shows(corpus: tuple[list[str], list[str], Path]) -> None:
    _, texts, _ = corpus
    signed = dedup.sign_texts(texts)
    exact = dedup.EstimateOptions(exact=True)
    for ids in (["0", "1"], ["3", "1", "5"]):
        assert dedup.estimate(ids, texts, exact) == dedup.estimate(ids, signed, exact)
    assert dedup.estimate(("2", "0"), iter(texts)) == dedup.estimate(["2", "0"], signed)
    for wrong in (["0", str(len(texts))], ["0", "01"], ["0", "-1"], ["0", "a"]):
        with pytest.raises(UsageError, match=f"^no text with id '{wrong[1]}' among the {len(texts)} given: texts "
                           f"are named by their positions, '0' to '{len(texts) - 1}'; name them otherwise with "
                           r"sign_texts\(texts, ids=...\)$"):
            dedup.estimate(wrong, texts)
    with pytest.raises(UsageError, match="^no texts given"):
        dedup.estimate(["0", "1"], [])
    # The recipe of docs/recipes.md, as written there.
    recipes = (Path(__file__).resolve().parents[2] / "docs" / "recipes.md").read_text()
    block = next(part.split("```", 1)[0] for part in recipes.split("```python\n")[1:] if "sign_texts(" in part)
    printed: list[object] = []
    exec(block, {"dedup": dedup, "texts": texts, "urls": [f"https://example.org/{n}" for n in range(len(texts))],
                 "print": printed.append})
    assert printed[1] == dedup.estimate(["0", "1"], signed).estimate == printed[0]
