"""Lone surrogates, which a JSON string can hold and UTF-8 cannot, become U+FFFD, and nothing else changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dedup_cli.inputs.decoding import _SURROGATES, clean

# Every kind of code point: ASCII, the BMP, the astral planes, and the surrogates themselves.
TEXTS = st.text(st.one_of(st.characters(min_codepoint=0, max_codepoint=0x7F),
                          st.characters(min_codepoint=0x80, max_codepoint=0xFFFF),
                          st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                          st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF)))


@given(TEXTS)
def test_clean_replaces_exactly_the_surrogates(text: str) -> None:
    expected = "".join("\ufffd" if 0xD800 <= ord(character) <= 0xDFFF else character for character in text)
    assert clean(text) == (expected, expected != text)
    assert _SURROGATES.search(clean(text)[0]) is None


def test_by_hand() -> None:
    assert clean("plain ascii") == ("plain ascii", False)
    assert clean("café 中 😀") == ("café 中 😀", False)
    assert clean("a\ud800b\udfff") == ("a\ufffdb\ufffd", True)
    assert clean("\ud83d\ude00") == ("\ufffd\ufffd", True)  # a pair as two code points is still two surrogates
