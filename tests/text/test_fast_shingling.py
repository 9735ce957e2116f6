"""Batched shingling: the same tokens as the one-character-at-a-time definitions (Unicode words, runs of \\w),
the documented token hash, and results that do not depend on the batch, the slicing, or the string
representation of the other texts."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from helpers import (
    SAMPLE_CORPORA,
    WORD_PATTERN,
    document_shingles,
    normalise,
    read_corpus,
    shingle_hashes,
    token_hashes,
    words_of,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.array_primitives import mix64
from dedup_cli.text import normalise as normalisation
from dedup_cli.text import shingles as shingling
from dedup_cli.text.shingles import batch_shingles

MASK64 = (1 << 64) - 1
# The word token hash as documented in dedup_cli/text/tokens.py (SignatureParams.token_hash
# "utf8-chunk-poly64-mix64"), pinned here so a change to it is a visible decision.
CHUNK_START = 0x8CB92BA72F3D8DD7
CHUNK_MULTIPLIER = 0xD6E8FEB86659FD93
CHAR_OFFSET = 0x632BE59BD9B4E019
SAMPLE_CORPORA = SAMPLE_CORPORA

# Text that exercises every branch: ASCII words and punctuation, every kind of white space str.split() knows,
# 2-, 3- and 4-byte UTF-8 word characters, non-word non-ASCII punctuation, combining marks, ligatures that
# NFKC expands, case folding that changes length, and a lone surrogate; and for Unicode words ideographs (one
# of them 4-byte), hiragana, katakana with ー, halfwidth katakana and its voiced mark, Thai letters, marks and a
# digit, Devanagari with its vowel sign and virama, Arabic with a vowel mark, the joiners, the middle dot.
ALPHABET = list("abcXYZ019_ .,;!?-'\"\t\n\r\x0b\x0c\x1c\x1f") + [
    "é", "Ä", "ß", "ſ", "ﬁ", "\u0301", "“", "”", "’", "—", "…", "\u00a0", "\u0085", "\u2028", "\u3000",
    "中", "文", "ひ", "한", "α", "Ω", "١", "²", "𝔘", "😀", "\ud800", "\u200b",
    "𠀀", "々", "カ", "ー", "・", "ｶ", "ﾞ", "\u3099", "ก", "\u0e34", "\u0e48", "๑", "ห", "\u093f", "\u094d",
    "ك", "\u064e", "\u200c", "\u200d",
]
texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=60)
words = st.text(alphabet=st.sampled_from([c for c in ALPHABET if re.fullmatch(r"\w", c)]), min_size=1,
                max_size=40)


def mix64_int(value: int) -> int:
    return int(mix64(np.array([value], dtype=np.uint64))[0])


def reference_word_hash(word: str) -> int:
    """Horner's rule over the little-endian 8-byte chunks of the UTF-8 bytes, zero-padded, then mix64."""
    data = word.encode("utf-8", "surrogatepass")
    value = CHUNK_START
    for start in range(0, len(data), 8):
        value = (value * CHUNK_MULTIPLIER + int.from_bytes(data[start : start + 8], "little")) & MASK64
    return mix64_int(value)


def reference_shingles(text: str, size: int, unit: str, tokenisation: str = "unicode-words") -> np.ndarray:
    """The shingle set by the definitions, one token at a time in Python (fewer tokens than ``size``, but some:
    one shingle, the window of them all)."""
    normalised = normalise(text)
    if unit == "word":
        tokens = [reference_word_hash(word) for word in words_of(normalised, tokenisation)]
    else:
        tokens = [mix64_int((ord(char) + CHAR_OFFSET) & MASK64) for char in normalised]
    return shingle_hashes(np.array(tokens, dtype=np.uint64), min(size, len(tokens)) or size)


def split_result(shingles: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    return [shingles[offsets[d] : offsets[d + 1]].tolist() for d in range(offsets.size - 1)]


# --- tokens and token hashes ---------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(texts, st.sampled_from(["unicode-words", "w-runs"]))
def test_word_tokens_are_the_defined_words(text: str, tokenisation: str) -> None:
    # Hashing the whole text gives, in order, the hashes of the words the definition finds, each hashed alone.
    expected = [reference_word_hash(word) for word in words_of(text, tokenisation)]
    assert token_hashes(text, "word", tokenisation).tolist() == expected


def test_w_runs_are_the_runs_of_backslash_w() -> None:
    text = "ラーメンを食べた。 हिन्दी x\u0301"
    assert words_of(text, "w-runs") == WORD_PATTERN.findall(text) == ["ラーメンを食べた", "ह", "न", "द", "x"]


@pytest.mark.parametrize("length", [1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 1000, 5000])
def test_word_hash_of_every_length_matches_the_definition(length: int) -> None:
    # 256 bytes is the last length hashed by the vectorised chunk loop; longer words take the dot product.
    word = ("abcdefghé" * 1000)[:length]
    assert token_hashes(word, "word").tolist() == [reference_word_hash(word)]
    assert token_hashes(f"{word} x {word}", "word").tolist() == [reference_word_hash(word),
                                                                  reference_word_hash("x"),
                                                                  reference_word_hash(word)]


def test_short_words_never_collide() -> None:
    # A word of up to 8 bytes is one zero-padded chunk: K·Q + chunk is a bijection, and so is mix64.
    words_8 = ["a", "b", "ab", "ba", "a_", "abcdefgh", "abcdefgg", "é", "éé", "한국", "0", "00"]
    hashes = token_hashes(" ".join(words_8), "word")
    assert np.unique(hashes).size == len(words_8)


def test_punctuation_outside_ascii_still_splits_words() -> None:
    assert token_hashes("“go!”—don’t…", "word").tolist() == [
        reference_word_hash(w) for w in ["go", "don", "t"]
    ]
    assert token_hashes("naïve café 中文 x²", "word", "w-runs").size == 4  # é, ï, 中, ² are \w
    assert token_hashes("naïve café 中文 x²", "word").size == 5  # and each ideograph is a Unicode word


def test_char_tokens_are_mixed_code_points() -> None:
    text = "a é中😀\ud800"
    assert token_hashes(text, "char").tolist() == [mix64_int((ord(c) + CHAR_OFFSET) & MASK64) for c in text]


def test_code_point_tables_match_str_methods() -> None:
    every = np.arange(sys.maxunicode + 1)
    word = np.fromiter((chr(c).isalnum() or c == ord("_") for c in every), dtype=bool, count=every.size)
    space = np.fromiter((chr(c).isspace() for c in every), dtype=bool, count=every.size)
    folded = np.fromiter((chr(c) != chr(c).casefold() for c in every), dtype=bool, count=every.size)
    assert np.array_equal(normalisation.word_code_points(), word)
    assert np.array_equal(normalisation.space_code_points(), space)
    assert np.array_equal(normalisation.case_folded_code_points(), folded)


def test_case_folding_outside_ascii_matches_str_casefold() -> None:
    # Most texts are folded as bytes (ASCII) and need str.casefold() only for letters like É, ß or Σ.
    batch = ["ÉCOLE Straße ΣΊΣΥΦΟΣ", "PLAIN “Quoted” — Text", "ſtraight İstanbul ǰ", "ascii ONLY"]
    for text in batch:
        assert token_hashes(normalise(text), "word").tolist() == [
            reference_word_hash(word) for word in words_of(normalise(text))
        ]
    # İ folds to i and a combining dot above, which stays in its Unicode word (the runs of \w split there).
    assert words_of(normalise("İstanbul")) == ["i\u0307stanbul"]
    assert words_of(normalise("İstanbul"), "w-runs") == ["i", "stanbul"]
    shingles, offsets = batch_shingles(batch, 1, "word")
    assert split_result(shingles, offsets) == [reference_shingles(text, 1, "word").tolist() for text in batch]


# --- shingle sets --------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 5), st.sampled_from(["word", "char"]), st.sampled_from(["unicode-words", "w-runs"]))
def test_shingles_match_the_one_token_at_a_time_definition(text: str, size: int, unit: str, tokenisation: str) -> None:
    if unit == "char":
        assert document_shingles(text, size, unit).tolist() == reference_shingles(text, size, unit).tolist()
        return
    assert document_shingles(text, size, unit, tokenisation).tolist() == reference_shingles(
        text, size, unit, tokenisation).tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(texts, max_size=8), st.integers(1, 4), st.sampled_from(["word", "char"]), st.data())
def test_results_do_not_depend_on_the_batch(batch: list[str], size: int, unit: str, data: st.DataObject) -> None:
    whole = split_result(*batch_shingles(batch, size, unit))
    assert whole == [document_shingles(text, size, unit).tolist() for text in batch]
    cut = data.draw(st.integers(0, len(batch)))
    assert split_result(*batch_shingles(batch[:cut], size, unit)) + split_result(
        *batch_shingles(batch[cut:], size, unit)) == whole


def test_an_ascii_document_is_unchanged_by_non_ascii_neighbours() -> None:
    ascii_text = "the quick brown fox jumps over the lazy dog " * 3
    alone = document_shingles(ascii_text, 3, "word")
    shingles, offsets = batch_shingles(["中文 “quoted” ß", ascii_text, "😀 emoji"], 3, "word")
    assert shingles[offsets[1] : offsets[2]].tolist() == alone.tolist()


LONG_TEXTS = [
    "word " * 40,
    "lorem ipsum dolor sit amet, consectetur\nadipiscing elit " * 7,
    "x" * 70 + " tail words here",  # a word longer than a slice
    "nospacesatall" * 9,  # no cut possible: one piece
    "a\n\n\tb  c \u3000 d\u2028e " * 12,  # white-space runs of every kind across the cuts
    "  leading and trailing spaces   " * 5,
    "Straße “ÉCOLE” ﬁne " * 10,  # folding that changes lengths, in every piece
    "中文カタカナ\u0301 ひらがな\nสวัสดี हिन्दी " * 6,  # Unicode words, marks, in every piece
    "",
    "tiny",
]


@pytest.mark.parametrize("unit", ["word", "char"])
@pytest.mark.parametrize("size", [1, 2, 5])
def test_slicing_long_documents_and_batches_changes_nothing(monkeypatch: pytest.MonkeyPatch, unit: str,
                                                            size: int) -> None:
    expected = [reference_shingles(text, size, unit).tolist() for text in LONG_TEXTS]
    assert split_result(*batch_shingles(LONG_TEXTS, size, unit)) == expected
    # Tiny slices: every long text goes through the piecewise path with w − 1 tokens carried over.
    monkeypatch.setattr(shingling, "_SLICE_CHARS", 16)
    monkeypatch.setattr(shingling, "_SLICE_DOCUMENTS", 2)
    assert split_result(*batch_shingles(LONG_TEXTS, size, unit)) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(texts, max_size=6), st.integers(1, 4), st.sampled_from(["word", "char"]), st.integers(1, 12))
def test_any_slice_size_gives_the_same_sets(batch: list[str], size: int, unit: str, slice_chars: int) -> None:
    expected = split_result(*batch_shingles(batch, size, unit))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shingling, "_SLICE_CHARS", slice_chars)
        assert split_result(*batch_shingles(batch, size, unit)) == expected


def test_pieces_cut_only_before_a_space_or_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shingling, "_SLICE_CHARS", 10)
    text = "aaaa bbbb cccc\ndddd eeeeeeeeeeeeeeeeeeee ffff " + "g" * 30
    pieces = list(shingling._pieces(text))
    assert "".join(pieces) == text
    assert all(piece[0] in " \n" for piece in pieces[1:])


def test_batch_shingles_shapes_and_types() -> None:
    shingles, offsets = batch_shingles([], 5, "word")
    assert shingles.dtype == np.uint64 and shingles.size == 0
    assert offsets.dtype == np.int64 and offsets.tolist() == [0]
    shingles, offsets = batch_shingles(["", "a b c d e f", "a b"], 5, "word")
    assert offsets.tolist() == [0, 0, 2, 3]
    assert np.all(np.diff(shingles[0:2].astype(np.float64)) > 0)
    with pytest.raises(ValueError, match="unknown shingle unit"):
        batch_shingles(["x"], 5, "line")


@pytest.mark.parametrize("tokenisation", ["unicode-words", "w-runs"])
def test_shingle_counts_match_the_definition_on_the_sample_corpora(tokenisation: str) -> None:
    documents = read_corpus(SAMPLE_CORPORA)
    shingles, offsets = batch_shingles([d.text for d in documents], 5, "word", tokenisation)
    for index, document in enumerate(documents):
        tokens = words_of(normalise(document.text), tokenisation)
        distinct = {tuple(tokens[i : i + 5]) for i in range(len(tokens) - 4)} or ({tuple(tokens)} if tokens else set())
        assert offsets[index + 1] - offsets[index] == len(distinct), document.id
