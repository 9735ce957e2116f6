"""Normalisation and shingle hashing."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import document_shingles, normalise, shingle_hashes, token_hashes
from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.array_primitives import mix64
from dedup_cli.text import shingles as shingle_module
from dedup_cli.text.shingles import batch_shingles


def test_normalise_folds_case_width_and_whitespace() -> None:
    assert normalise("  Hello\tWORLD\n\n ﬁne  ") == "hello world fine"
    assert normalise("ＡＢＣ") == "abc"  # NFKC folds full-width forms
    assert normalise("Straße") == "strasse"  # case-folding, not just lower-casing


def test_word_shingle_count_and_set_semantics() -> None:
    assert document_shingles("a b c d e f g", 5, "word").size == 3
    assert document_shingles("a b c d", 5, "word").size == 1  # shorter than w: one shingle, the whole document
    assert document_shingles("a b c d", 5, "word", short_documents="none").size == 0  # older stores' rule
    assert document_shingles("", 5, "word").size == 0
    # Repeated shingles count once: "x y x y x y" has 2-shingles {x y, y x}.
    assert document_shingles("x y x y x y", 2, "word").size == 2


def test_a_document_shorter_than_a_shingle_is_one_shingle_of_its_whole_token_sequence() -> None:
    tokens = token_hashes("a b c d", "word")
    assert np.array_equal(document_shingles("A  b, c d!", 5, "word"), shingle_hashes(tokens, 4))  # one window of 4
    long = document_shingles("w1 w2 a b c d w3 w4 a b c d", 5, "word")
    assert not np.isin(document_shingles("a b c d", 5, "word"), long).any()  # never a longer document's window
    for text in ("", "   ", "!!! ???"):  # no token: no shingle under either rule
        assert document_shingles(text, 5, "word").size == 0
    assert np.array_equal(document_shingles("abc", 5, "char"), shingle_hashes(token_hashes("abc", "char"), 3))


def test_short_documents_are_the_same_in_any_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["one two", " ".join(f"w{number}" for number in range(50)), "", "three", "one two", "x y z w v u"]
    together, offsets = batch_shingles(texts, 5, "word")
    for index, text in enumerate(texts):
        assert np.array_equal(together[offsets[index]:offsets[index + 1]], document_shingles(text, 5, "word"))
    assert np.diff(offsets).tolist() == [1, 46, 0, 1, 1, 2]
    # A text longer than one slice, of fewer tokens than w, cut into pieces: the same one shingle.
    enormous = "ab" * 3000 + " " + "cd" * 3000
    alone = document_shingles(enormous, 5, "word")
    monkeypatch.setattr(shingle_module, "_SLICE_CHARS", 1024)
    assert alone.size == 1 and np.array_equal(document_shingles(enormous, 5, "word"), alone)
    assert document_shingles(enormous, 5, "word", short_documents="none").size == 0


def test_punctuation_and_case_do_not_change_shingles() -> None:
    first = document_shingles("The LORD said, “Go!” to Jonah.", 3, "word")
    second = document_shingles("the Lord said \"go\" to jonah", 3, "word")
    assert np.array_equal(first, second)


def test_word_order_matters_within_a_shingle() -> None:
    assert not np.array_equal(document_shingles("a b c", 3, "word"), document_shingles("b a c", 3, "word"))


def test_char_shingles_include_spaces() -> None:
    assert document_shingles("abcd", 2, "char").size == 3
    assert not np.array_equal(document_shingles("ab cd", 3, "char"), document_shingles("abcd", 3, "char"))


def test_shingle_hashes_match_hand_combination() -> None:
    tokens = np.array([3, 5, 7], dtype=np.uint64)
    multiplier = 0x9E3779B97F4A7C15
    expected = ((3 * multiplier + 5) * multiplier + 7) % 2**64
    assert shingle_hashes(tokens, 3).tolist() == mix64(np.array([expected], dtype=np.uint64)).tolist()


@given(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps"]), min_size=0, max_size=40),
       st.integers(1, 6))
def test_shingle_set_is_sorted_distinct_and_bounded(words: list[str], size: int) -> None:
    shingles = document_shingles(" ".join(words), size, "word")
    assert shingles.dtype == np.uint64
    assert np.all(np.diff(shingles.astype(np.float64)) > 0) or shingles.size <= 1
    windows = len({tuple(words[i : i + size]) for i in range(len(words) - size + 1)})
    assert shingles.size == (1 if 0 < len(words) < size else windows)  # a short document: itself, whole


def test_token_hashes_are_deterministic() -> None:
    assert np.array_equal(token_hashes("a b", "word"), token_hashes("a b", "word"))
