"""Normalisation: Unicode NFKC, case folding and white space, and the code-point classes tokens need.

A document's text is normalised before it is cut into tokens (Mining of Massive Datasets, ch. 3.2): NFKC
(``unicodedata``, in C), then ``str.casefold``, then every run of white space collapsed to one space
(``SignatureParams.normalisation`` = ``"nfkc-casefold-whitespace"``). Word tokens do the same folding more
cheaply on a whole batch (:mod:`dedup_cli.text.tokens`), with the tables below telling which non-ASCII code
points are word characters, white space, or changed by case folding.

Words are the runs of ``\\w`` of the normalised text, exactly as ``re.findall(r"\\w+", text)`` finds them (the
tests hold that per-document definition and check the batched tokeniser against it).
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

import numpy as np

from dedup_cli.options.vocabulary import SHINGLE_UNITS

WORD_CLASS = r"\w"  # word characters: a word is a maximal run of them
SPACE_CLASS = r"\s"  # white space, where str.split() splits


def fold(text: str) -> str:
    """NFKC then case folding; white space is left alone (character tokens collapse it, word tokens do not see
    it). Word tokens get the same folding more cheaply (:mod:`dedup_cli.text.tokens`)."""
    return unicodedata.normalize("NFKC", text).casefold()


def check_unit(unit: str) -> None:
    if unit not in SHINGLE_UNITS:
        raise ValueError(f"unknown shingle unit {unit!r}; choose one of {', '.join(SHINGLE_UNITS)}")


def _every_code_point() -> str:
    """All of Unicode, U+0000 … U+10FFFF (lone surrogates included), as one string."""
    return np.arange(sys.maxunicode + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _code_point_table(pattern: str) -> np.ndarray:
    """bool[0x110000]: the code points a one-character regex class matches (``\\w``, ``\\s``), found by
    the ``re`` module itself, so the table is exactly its definition."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for run in re.finditer(pattern + "+", _every_code_point()):
        table[run.start() : run.end()] = True
    return table


@functools.cache
def word_code_points() -> np.ndarray:
    """bool[0x110000]: the code points ``\\w`` matches (words are the runs of them)."""
    return _code_point_table(WORD_CLASS)


@functools.cache
def space_code_points() -> np.ndarray:
    """bool[0x110000]: the code points ``str.split()`` splits on (``\\s`` and ``str.isspace`` agree)."""
    return _code_point_table(SPACE_CLASS)


@functools.cache
def case_folded_code_points() -> np.ndarray:
    """bool[0x110000]: the non-ASCII code points that ``str.casefold()`` changes (É, ß, Σ, ſ, …)."""
    every = _every_code_point()
    table = np.zeros(len(every), dtype=bool)
    for start in range(0, len(every), 256):  # most blocks of 256 have no cased letter: one test each
        block = every[start : start + 256]
        if block.casefold() != block:
            table[start : start + 256] = [char != char.casefold() for char in block]
    return table

