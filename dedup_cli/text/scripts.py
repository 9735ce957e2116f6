"""Words as Unicode defines them: the code-point classes that say where a word token starts and ends.

Word tokens (``SignatureParams.tokenisation`` = ``"unicode-words"``) follow Unicode's default word boundaries
(UAX #29) where they matter for near-duplicate detection, that is for the scripts written without spaces:

* **ideographs** (Han: the CJK Unified Ideographs and all their extensions, the compatibility ideographs, the
  ideographic iteration and number marks; Tangut, Khitan and Nüshu) and **hiragana** are one token per
  character, as UAX #29 breaks around every ideograph and hiragana;
* a run of **katakana** (with the prolonged sound mark ー, the halfwidth forms, the phonetic extensions) is one
  token (UAX #29 rule WB13);
* the **letters of the scripts whose words only a dictionary can find** (Line_Break = SA: Thai, Lao, Khmer,
  Myanmar, Tai Le, New Tai Lue, Tai Tham, Tai Viet, Ahom) are one token per grapheme cluster, a base letter
  and its following combining marks; their digits are ordinary word characters;
* **combining marks** (general category Mn, Mc, Me) and the zero-width non-joiner and joiner belong to the token
  before them and never start one (UAX #29 rule WB4), so Hindi, Arabic with vowel marks or Thai keep their
  words whole (``\\w`` matches no combining mark: the runs of ``\\w`` cut "हिन्दी" into ह, न, द);
* every other word character (``\\w``: letters, digits, ``_``) forms runs as before, so text in scripts written
  with spaces (Latin, Cyrillic, Greek, Hangul, Arabic, Devanagari …) has the tokens it always had, apart from
  the combining marks kept inside its words.

Unicode's rules for apostrophes and decimal points inside words (WB6-WB12) are not followed: "don't" stays two
tokens and English text keeps exactly the tokens of the runs of ``\\w``.

Python's :mod:`unicodedata` has no Script property, so the scripts are the code-point ranges below (blocks,
intersected with ``\\w``), and :func:`token_classes` turns them into one byte per code point. Both signing
kernels read that table (:mod:`dedup_cli.kernel.tables` passes it to the compiled one).
"""

from __future__ import annotations

import functools
import sys
import unicodedata

import numpy as np

from dedup_cli.options.vocabulary import WORD_TOKENISATIONS
from dedup_cli.text.normalise import space_code_points, word_code_points

# Class bits of a code point (one uint8 each). WORD: \w. SPACE: white space (str.split()). The rest only in the
# "unicode-words" table: EXTEND (a combining mark or ZWNJ/ZWJ, not \w), SINGLE (a \w character that is a token by
# itself: ideographs, hiragana, letters of the dictionary scripts), KATAKANA (\w characters whose runs are tokens).
WORD = 1
SPACE = 2
EXTEND = 4
SINGLE = 8
KATAKANA = 16

Ranges = tuple[tuple[int, int], ...]  # inclusive (first, last) code points

IDEOGRAPHS: Ranges = (
    (0x3005, 0x3007),  # 々 〆 〇: ideographic iteration mark, closing mark, number zero
    (0x3021, 0x3029),  # Hangzhou numerals one to nine
    (0x3038, 0x303C),  # Hangzhou numerals ten to thirty, vertical ideographic iteration mark, masu mark
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x17000, 0x18DFF),  # Tangut, Tangut Components, Khitan Small Script, Tangut Supplement
    (0x1B170, 0x1B2FF),  # Nüshu
    (0x20000, 0x2FFFF),  # Extensions B-F and I, CJK Compatibility Ideographs Supplement
    (0x30000, 0x3FFFF),  # Extensions G and H
)
HIRAGANA: Ranges = (
    (0x3040, 0x309F),  # Hiragana (its combining voiced sound marks are EXTEND; ゛ ゜ are not \w)
    (0x1B001, 0x1B11F),  # hentaigana and archaic hiragana (Kana Supplement, Kana Extended-A)
    (0x1B132, 0x1B132),  # small hiragana ko
    (0x1B150, 0x1B152),  # small hiragana wi, we, wo
)
KATAKANA_RANGES: Ranges = (
    (0x3031, 0x3035),  # vertical kana repeat marks
    (0x30A0, 0x30FF),  # Katakana, with ー (the middle dot ・ is punctuation, not \w)
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0xFF66, 0xFF9F),  # halfwidth katakana and sound marks (NFKC makes them fullwidth before tokens are found)
    (0x1AFF0, 0x1AFFF),  # Kana Extended-B
    (0x1B000, 0x1B000),  # katakana archaic e
    (0x1B120, 0x1B122),  # katakana archaic yi, ye, wu
    (0x1B155, 0x1B155),  # small katakana ko
    (0x1B164, 0x1B167),  # small katakana wi, we, wo, n
)
DICTIONARY_SCRIPTS: Ranges = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x1950, 0x19DF),  # Tai Le, New Tai Lue
    (0x1A20, 0x1AAF),  # Tai Tham
    (0xA9E0, 0xA9FF),  # Myanmar Extended-B
    (0xAA60, 0xAADF),  # Myanmar Extended-A, Tai Viet
    (0x11700, 0x1174F),  # Ahom
)
JOINERS = (0x200C, 0x200D)  # zero-width non-joiner and joiner: inside words of Indic scripts and Persian
# Combining marks live in planes 0, 1 and 14 only (2 and 3 hold ideographs, 15 and 16 private use), so only
# those are searched (a test checks the whole range).
MARK_PLANES = ((0x0000, 0x1FFFF), (0xE0000, 0xEFFFF))


def in_ranges(ranges: Ranges) -> np.ndarray:
    """bool[0x110000]: the code points inside any of ``ranges``."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for first, last in ranges:
        table[first : last + 1] = True
    return table


@functools.cache
def mark_code_points() -> np.ndarray:
    """bool[0x110000]: the combining marks (general category Mn, Mc, Me)."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    category = unicodedata.category
    for first, last in MARK_PLANES:
        codes = np.arange(first, last + 1, dtype="<u4")
        text = codes.tobytes().decode("utf-32-le", "surrogatepass")
        table[first : last + 1] = np.fromiter((category(char)[0] == "M" for char in text), dtype=bool,
                                              count=len(text))
    return table


def check_word_tokenisation(tokenisation: str) -> None:
    """``tokenisation`` must be one of :data:`WORD_TOKENISATIONS` (ValueError naming them otherwise)."""
    if tokenisation not in WORD_TOKENISATIONS:
        raise ValueError(f"unknown tokenisation {tokenisation!r}; choose one of {', '.join(WORD_TOKENISATIONS)}")


@functools.cache
def token_classes(tokenisation: str) -> np.ndarray:
    """uint8[0x110000]: the class bits of every code point for word tokens of ``tokenisation``.

    ``"w-runs"`` has WORD and SPACE only (words are the runs of ``\\w``); ``"unicode-words"`` adds EXTEND,
    SINGLE and KATAKANA as the module docstring defines them. Built once per process.
    """
    check_word_tokenisation(tokenisation)
    word = word_code_points()
    classes = word.astype(np.uint8) * np.uint8(WORD)
    classes |= space_code_points().astype(np.uint8) * np.uint8(SPACE)
    if tokenisation == "w-runs":
        return classes
    extend = mark_code_points() | in_ranges(tuple((code, code) for code in JOINERS))
    classes[extend & ~word] |= EXTEND
    dictionary_letters = in_ranges(DICTIONARY_SCRIPTS) & word
    for code in np.flatnonzero(dictionary_letters).tolist():
        dictionary_letters[code] = chr(code).isalpha()  # their digits stay ordinary word characters
    classes[word & (in_ranges(IDEOGRAPHS) | in_ranges(HIRAGANA) | dictionary_letters)] |= SINGLE
    classes[word & in_ranges(KATAKANA_RANGES)] |= KATAKANA
    return classes


def special_classes(classes: np.ndarray) -> bool:
    """Whether any of the class bits ``classes`` (uint8[n]) asks for more than runs of ``\\w``."""
    return bool(np.any(classes & np.uint8(EXTEND | SINGLE | KATAKANA)))
