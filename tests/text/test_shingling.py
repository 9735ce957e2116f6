"""Normalisation and shingle hashing."""

from __future__ import annotations

import numpy as np
from helpers import document_shingles, normalise, shingle_hashes, token_hashes
from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.array_primitives import mix64


def test_normalise_folds_case_width_and_whitespace() -> None:
    assert normalise("  Hello\tWORLD\n\n ﬁne  ") == "hello world fine"
    assert normalise("ＡＢＣ") == "abc"  # NFKC folds full-width forms
    assert normalise("Straße") == "strasse"  # case-folding, not just lower-casing


def test_word_shingle_count_and_set_semantics() -> None:
    assert document_shingles("a b c d e f g", 5, "word").size == 3
    assert document_shingles("a b c d", 5, "word").size == 0  # shorter than w: no shingle
    assert document_shingles("", 5, "word").size == 0
    # Repeated shingles count once: "x y x y x y" has 2-shingles {x y, y x}.
    assert document_shingles("x y x y x y", 2, "word").size == 2


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
    assert shingles.size == len({tuple(words[i : i + size]) for i in range(len(words) - size + 1)})


def test_token_hashes_are_deterministic() -> None:
    assert np.array_equal(token_hashes("a b", "word"), token_hashes("a b", "word"))
