"""The compiled signing kernel gives the numpy path's bytes.

The reference is the numpy kernel of ``engine.stages.sign.sign_texts`` (shingles, minwise values, packing in
numpy), the path that writes stores without the ``fast`` extra. The kernel is compiled once and cached on disk
beside its module, so these tests pay numba's compile only on the first run of a checkout.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from helpers import SAMPLE_CORPORA, read_corpus, token_hashes
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_cli.engine.stages.sign import sign_texts
from dedup_cli.kernel import tables, tokenise
from dedup_cli.params import SignatureParams
from dedup_cli.text import shingles

pytest.importorskip("numba")  # the fast extra; CI installs it

from dedup_cli.kernel import compiled  # noqa: E402

CORPORA = ["bible-editions", "devils-dictionary", "licenses", "udhr"]

# A word whose Horner sum over its two 8-byte chunks is exactly 0 mod 2^64, so its token hash is mix64(0) = 0 and,
# with w = 1, so is its shingle hash: the value the kernel's hash set cannot store in a slot. Found by drawing the
# first chunk at random and solving h = (K·Q + c0)·Q + c1 = 0 for c1 until c1's bytes were word characters.
ZERO_HASH_WORD = "d_t72o4fej5ufmrx"

# Characters that exercise every branch: ASCII word characters and punctuation, every kind of white space,
# 2-, 3- and 4-byte UTF-8, non-word non-ASCII punctuation, combining marks, characters that NFKC expands (ﬁ, ㍱,
# ½, Ⅻ) and case folding expands (ß → ss, İ → i̇, ŉ → ʼn, ǰ, ΐ → 3 code points, ﬀ), single-code-point folds
# out of ASCII (K Kelvin → k, ſ → s, Σ, ǅ), code points of every 4-byte lead (F0-F4), a lone surrogate and NUL.
ALPHABET = list("abcXYZ019_ .,;!?-'\"\t\n\r\x0b\x0c\x1c\x1f\x00") + [
    "é", "Ä", "ß", "ẞ", "ſ", "ﬁ", "ﬀ", "\u0301", "\u0308", "“", "”", "’", "—", "…", "\u00a0", "\u0085", "\u2028",
    "\u3000", "中", "文", "ひ", "한", "α", "Ω", "Σ", "ς", "ΐ", "١", "²", "½", "Ⅻ", "㍱", "İ", "ŉ", "ǰ", "ǅ",
    "\u212a", "𝔘", "😀", "\U000e0041", "\U0010fffd", "\ud800", "\u200b", "Ꭰ", "ꭰ",
    # Unicode words: ideographs (one of 4 bytes), hiragana, katakana and ー, halfwidth katakana and its voiced mark
    # (NFKC composes them), a combining voiced mark, Thai letters and marks, Devanagari with a vowel sign and a
    # virama, an Arabic vowel mark, the joiners, a variation selector of plane 14, the katakana middle dot.
    "𠀀", "々", "カ", "ー", "ｶ", "ﾞ", "\u3099", "ก", "\u0e34", "\u0e48", "ह", "\u093f", "\u094d", "\u064e",
    "\u200c", "\u200d", "\U000e0100", "・",
]
TEXTS = st.text(alphabet=st.sampled_from(ALPHABET), max_size=80)
NUM_PERMS = [1, 7, 64, 256]
BITS = [1, 2, 8, 16, 64]  # the edge cases add 3, 5, 13, 57 and 63: every packing branch
SHINGLE_SIZES = [1, 3, 5]


def assert_same_signatures(texts: list[str], params: SignatureParams) -> None:
    expected_counts, expected_signatures = sign_texts(texts, params, kernel="numpy")
    counts, signatures = compiled.sign_texts(texts, params)
    assert counts.dtype == np.int64 and signatures.dtype == np.uint8
    assert signatures.shape == (len(texts), params.signature_bytes)
    different = np.flatnonzero((counts != expected_counts) | (signatures != expected_signatures).any(axis=1))
    assert different.size == 0, (f"{params}: {different.size} documents differ, first {texts[different[0]]!r}: "
                                 f"f {counts[different[0]]} vs {expected_counts[different[0]]}")


def sample_texts(corpus: str) -> list[str]:
    """The corpus as ``dedup sign`` reads it (decoding, byte-order marks and replacements included)."""
    return [document.text for document in read_corpus(SAMPLE_CORPORA / corpus)]


# --- equivalence with the numpy path -------------------------------------------------------------------------


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("unit", ["word", "char"])
@pytest.mark.parametrize("scheme", ["oph", "kperm"])
def test_sample_corpora_sign_to_the_same_bytes(corpus: str, unit: str, scheme: str) -> None:
    texts = sample_texts(corpus)
    assert len(texts) > 20  # devils-dictionary is ASCII; a third of the others' documents are not
    for num_perm, bits, size in [(256, 8, 5), (7, 13, 3), (64, 1, 1), (1, 64, 2)]:
        assert_same_signatures(texts, SignatureParams(num_perm=num_perm, bits=bits, shingle_size=size,
                                                      shingle_unit=unit, scheme=scheme))


@settings(max_examples=150)
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=6),
    num_perm=st.sampled_from(NUM_PERMS),
    bits=st.sampled_from(BITS),
    size=st.sampled_from(SHINGLE_SIZES),
    unit=st.sampled_from(["word", "char", "w-runs"]),
    scheme=st.sampled_from(["oph", "kperm"]),
    seed=st.sampled_from([1, 2**40 + 3]),
)
def test_generated_text_signs_to_the_same_bytes(texts: list[str], num_perm: int, bits: int, size: int, unit: str,
                                                scheme: str, seed: int) -> None:
    tokenisation = "w-runs" if unit == "w-runs" else ""  # "": the unit's default (Unicode words for words)
    assert_same_signatures(texts, SignatureParams(num_perm=num_perm, bits=bits, shingle_size=size,
                                                  shingle_unit="word" if unit == "w-runs" else unit, scheme=scheme,
                                                  seed=seed, tokenisation=tokenisation))


@settings(max_examples=100)
@given(texts=st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=120), min_size=1, max_size=6),
       size=st.sampled_from(SHINGLE_SIZES), bits=st.sampled_from(BITS))
def test_ascii_documents_sign_to_the_same_bytes(texts: list[str], size: int, bits: int) -> None:
    # All-ASCII documents take the kernel's SWAR tokeniser: every byte value, so every edge of [0-9A-Za-z_].
    assert_same_signatures(texts, SignatureParams(num_perm=64, bits=bits, shingle_size=size))


EDGE_TEXTS = [
    "",
    " ",
    "\t\n \u3000\u2028 \x0b",  # white space only
    "a",
    "one two",  # fewer tokens than w
    "x" * 300,  # a word of more than 256 bytes (the numpy path's dot-product branch)
    "é" * 5000 + " tail",  # a long non-ASCII word
    "ab" * 8 + " " + "cd" * 4,  # words of exactly 16 and 8 bytes: no partial chunk
    f"{ZERO_HASH_WORD} {ZERO_HASH_WORD} other {ZERO_HASH_WORD}",  # the token (and 1-shingle) hash 0
    "Straße ﬁne İstanbul ŉ ǰ ΐ \u212a ſ ǅ ΣΑΣ",  # folding that changes lengths and leaves ASCII
    "naïve café 中文 x² “quoted” — em-dash…",
    "e\u0301 e\u0301 e\u0301 combining marks stay apart",  # NFKC composes é; \u0301 alone is not \w
    "Mixed 한국어 العربية ελληνικά русский 日本語 text",
    "ラーメンを食べた。東京タワーｶﾀｶﾅﾞ 中文abc123カタカナ々ひ สวัสดีครับ हिन्दी كَتَبَ می\u200cخواهم \u0301x",
    "漢" * 3000 + "カ" * 2000,  # one token per ideograph; one katakana token of 6000 bytes
    "\ud800 lone \udfff surrogates",
    "end with a partial word abc",
    " ".join(f"w{index}" for index in range(3000)),  # more shingles than k, many bins filled
]


@pytest.mark.parametrize("unit", ["word", "char", "w-runs"])
@pytest.mark.parametrize("scheme", ["oph", "kperm"])
@pytest.mark.parametrize("size", [1, 3, 5, 8, 9])  # 8: the ring of the last w tokens is exactly full
def test_edge_cases_sign_to_the_same_bytes(unit: str, scheme: str, size: int) -> None:
    tokenisation = "w-runs" if unit == "w-runs" else ""
    for num_perm, bits in [(1, 1), (7, 2), (64, 8), (256, 16), (100, 64), (3, 5), (9, 57), (5, 63), (33, 32)]:
        assert_same_signatures(EDGE_TEXTS, SignatureParams(num_perm=num_perm, bits=bits, shingle_size=size,
                                                           shingle_unit="word" if unit == "w-runs" else unit,
                                                           scheme=scheme, tokenisation=tokenisation))


SHORT_TEXTS = ["", "one", "The quick brown fox", "the QUICK, brown fox!", "a b", "!!! ???", "日本語", "é è",
               "ab cd", "x y z w v u t", "naïve café", "\ud800 lone", "q " * 3, "a b c d e f g h"]


@pytest.mark.parametrize("unit", ["word", "char", "w-runs"])
@pytest.mark.parametrize("scheme", ["oph", "kperm"])
@pytest.mark.parametrize("rule", ["whole", "none"])
@pytest.mark.parametrize("size", [2, 5, 9])
def test_documents_shorter_than_a_shingle_sign_to_the_same_bytes(unit: str, scheme: str, rule: str,
                                                                 size: int) -> None:
    texts = SHORT_TEXTS + [text.upper() for text in SHORT_TEXTS]  # each with its double, in one batch
    params = SignatureParams(num_perm=64, bits=8, shingle_size=size, shingle_unit="word" if unit == "w-runs" else unit,
                             scheme=scheme, tokenisation="w-runs" if unit == "w-runs" else "", short_documents=rule)
    assert_same_signatures(texts, params)
    counts, signatures = compiled.sign_texts(texts, params)
    assert counts[0] == 0  # no token: no shingle, whatever the rule
    if size > 3:  # "a b": one shingle, itself, or none
        assert counts[4] == (1 if rule == "whole" else 0)
    if unit != "char":  # the same words, spelt differently: the same document, the same signature
        assert np.array_equal(signatures[2], signatures[3]) and np.array_equal(signatures[2], signatures[16])


def test_a_long_document_of_fewer_tokens_than_w_matches_the_piecewise_numpy_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shingles, "_SLICE_CHARS", 4096)
    texts = ["ab" * 5000 + " " + "cd" * 5000 + " ef", "x" * 9000]  # three tokens, then one, across many slices
    for rule in ("whole", "none"):
        params = SignatureParams(num_perm=32, bits=8, shingle_size=5, short_documents=rule)
        assert_same_signatures(texts, params)
        assert compiled.sign_texts(texts, params)[0].tolist() == ([1, 1] if rule == "whole" else [0, 0])


@pytest.mark.parametrize("unit", ["word", "char"])
def test_more_bins_than_the_numpy_path_tabulates(unit: str) -> None:
    # k > 2048: the bin orders come from the Feistel network itself, by ranks (few shingles) and by draws.
    texts = ["a few words only here", " ".join(f"w{index}" for index in range(300)),
             " ".join(f"v{index}" for index in range(5000)), ""]
    assert_same_signatures(texts, SignatureParams(num_perm=4096, bits=2, shingle_size=2, shingle_unit=unit))


def test_the_zero_hash_word_really_hashes_to_zero() -> None:
    # Else the edge case above would not reach the kernel's separate path for the shingle hash 0.
    assert token_hashes(ZERO_HASH_WORD, "word").tolist() == [0]
    counts, _ = compiled.sign_texts([f"{ZERO_HASH_WORD} b {ZERO_HASH_WORD}", ZERO_HASH_WORD],
                                       SignatureParams(shingle_size=1))
    assert counts.tolist() == [2, 1]


@pytest.mark.parametrize("unit", ["word", "char"])
def test_long_documents_match_the_piecewise_numpy_path(monkeypatch: pytest.MonkeyPatch, unit: str) -> None:
    # The numpy path cuts a document longer than _SLICE_CHARS into pieces; the kernel reads it whole. Small
    # slices send these through the pieces; their sets (over 2^15 shingles) also make the kernel's set grow.
    monkeypatch.setattr(shingles, "_SLICE_CHARS", 4096)
    generator = np.random.Generator(np.random.PCG64(7))
    words = ["".join(generator.choice(list("abcdefgh"), size=generator.integers(1, 9))) for _ in range(40000)]
    separators = generator.choice([" ", " ", " ", "\n", "  ", ". ", ", ", "\t"], size=len(words))
    prose = "".join(word + separator for word, separator in zip(words, separators, strict=True))
    texts = [prose, "Ünïcödé Straße " * 3000, "nospaces" * 2000 + " then some", prose[:5000]]
    assert max(map(len, texts)) > 20 * 4096
    for scheme in ("oph", "kperm"):
        assert_same_signatures(texts, SignatureParams(num_perm=64, bits=4, shingle_size=5, shingle_unit=unit,
                                                      scheme=scheme))
    counts, _ = compiled.sign_texts([prose], SignatureParams(shingle_unit=unit))
    assert counts[0] > 1 << 15


def test_more_shingles_than_one_numpy_chunk() -> None:
    # Over 2^21 shingles: the numpy path's oph and kperm kernels work through them in chunks.
    generator = np.random.Generator(np.random.PCG64(11))
    text = "".join(generator.choice(list("abcdefghijklmnopqrstuvwxyz "), size=2_300_000))
    for scheme in ("oph", "kperm"):
        assert_same_signatures([text, "a short one"], SignatureParams(num_perm=8, bits=16, shingle_size=5,
                                                                      shingle_unit="char", scheme=scheme))


def test_one_enormous_token() -> None:
    # Longer than the numpy path's slice and without a space: one piece, one word of 2.2 million bytes.
    token = "ab" * (shingles._SLICE_CHARS // 2 + 50000)
    texts = [token, f"before {token} after and more"]
    for unit in ("word", "char"):
        assert_same_signatures(texts, SignatureParams(num_perm=16, bits=8, shingle_size=3, shingle_unit=unit))


# --- the kernel's own contract -------------------------------------------------------------------------------


def test_encoding_normalises_only_what_is_not_ascii() -> None:
    texts = ["Plain ASCII, Upper Case", "ﬁne ½", ""]
    buffer, offsets, ascii_documents = compiled.encode_texts(texts)
    assert ascii_documents.tolist() == [True, False, True]
    assert offsets.tolist() == [0, 23, 23 + len(unicodedata.normalize("NFKC", "ﬁne ½").encode()), len(buffer)]
    assert buffer[:23] == b"Plain ASCII, Upper Case"  # case folding is the kernel's job
    assert buffer[23:].decode() == "fine 1⁄2"


def test_raw_bytes_sign_like_texts() -> None:
    # sign_encoded finds the ASCII documents itself when it is not told.
    buffer, offsets, ascii_documents = compiled.encode_texts(EDGE_TEXTS)
    assert np.array_equal(compiled.ascii_documents_of(np.frombuffer(buffer, dtype=np.uint8), offsets),
                          ascii_documents)
    params = SignatureParams(num_perm=64, shingle_size=3)
    from_bytes = compiled.sign_encoded(buffer, offsets, params)
    from_texts = compiled.sign_texts(EDGE_TEXTS, params)
    assert np.array_equal(from_bytes[0], from_texts[0]) and np.array_equal(from_bytes[1], from_texts[1])


def test_documents_never_read_into_their_neighbours() -> None:
    # Raw bytes need not be valid UTF-8: a sequence cut by the end of a document stays in it.
    params = SignatureParams(num_perm=16, shingle_size=1, shingle_unit="char")
    together = compiled.sign_encoded(b"ab\xe2\x82\xacz", np.array([0, 3, 6]), params)
    alone = [compiled.sign_encoded(part, np.array([0, len(part)]), params) for part in (b"ab\xe2", b"\x82\xacz")]
    assert together[0].tolist() == [alone[0][0][0], alone[1][0][0]]
    assert np.array_equal(together[1], np.vstack([alone[0][1], alone[1][1]]))


@settings(max_examples=50)
@given(st.binary(max_size=200), st.sampled_from(["word", "char"]))
def test_malformed_utf8_is_read_safely(raw: bytes, unit: str) -> None:
    params = SignatureParams(num_perm=8, shingle_size=2, shingle_unit=unit)
    offsets = np.array([0, len(raw) // 2, len(raw)])
    counts, signatures = compiled.sign_encoded(raw, offsets, params)
    assert counts.min() >= 0 and np.array_equal(signatures[counts == 0], np.zeros_like(signatures[counts == 0]))
    again = compiled.sign_encoded(raw, offsets, params)
    assert np.array_equal(counts, again[0]) and np.array_equal(signatures, again[1])


def test_the_tokenisers_constants_are_the_tables_own() -> None:
    # They are compiled into the kernel (a cached function freezes its globals), so they are restated there.
    assert (tokenise.WORD, tokenise.SPACE, tokenise.EXTEND, tokenise.SINGLE, tokenise.KATAKANA, tokenise.EXPANDED,
            tokenise.MAX_FOLDED) == (tables.WORD, tables.SPACE, tables.EXTEND, tables.SINGLE, tables.KATAKANA,
                                     tables.EXPANDED, tables.MAX_FOLDED)


def test_bad_offsets_and_set_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="offsets"):
        compiled.sign_encoded(b"abc", np.array([0, 5]), SignatureParams())
    with pytest.raises(ValueError, match="integer sets"):
        compiled.sign_encoded(b"abc", np.array([0, 3]), SignatureParams.for_sets(universe=1000))


def test_the_kernel_releases_the_gil_and_caches_its_code() -> None:
    assert compiled.sign_documents.targetoptions["nogil"] is True
    assert compiled.sign_documents._cache.__class__.__name__ == "FunctionCache"  # on disk, not the no-op cache
