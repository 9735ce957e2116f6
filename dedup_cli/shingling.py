"""Documents to w-shingle sets: normalisation, tokens, and 64-bit shingle hashes.

A document becomes the set of its w-shingles (w contiguous word or character tokens; Mining of Massive
Datasets, ch. 3.2). Each token is hashed once (xxh3-64 for words, a 64-bit mix of the code point for
characters) and w consecutive token hashes are combined into one 64-bit shingle hash in numpy, so no
shingle string is ever built. Shingle hashes live in the universe D = 2^64, where r = f/D is negligible
and the sparse-limit estimators are exact.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import xxhash

from dedup_cli.arrays import sorted_unique
from dedup_cli.hashing import mix64

WORD_PATTERN = re.compile(r"\w+")
SHINGLE_UNITS = ("word", "char")

# An odd 64-bit multiplier (the golden ratio) so each position in the window weighs its token differently:
# "a b c" and "b a c" must hash apart.
_POSITION_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def normalise(text: str) -> str:
    """Unicode NFKC, case-folded, with every run of white space collapsed to one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def token_hashes(text: str, unit: str) -> np.ndarray:
    """Hash the tokens of an already normalised text.

    Returns uint64[n_tokens]: xxh3-64 of each word (``unit="word"``, words are runs of ``\\w``), or a
    64-bit mix of each code point (``unit="char"``, spaces included).
    """
    if unit == "word":
        words = WORD_PATTERN.findall(text)
        return np.fromiter(
            map(xxhash.xxh3_64_intdigest, map(str.encode, words)), dtype=np.uint64, count=len(words)
        )
    if unit == "char":
        code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        return mix64(code_points + np.uint64(0x632BE59BD9B4E019))
    raise ValueError(f"unknown shingle unit {unit!r}; choose one of {', '.join(SHINGLE_UNITS)}")


def shingle_hashes(tokens: np.ndarray, size: int) -> np.ndarray:
    """Combine each window of ``size`` consecutive token hashes into one 64-bit shingle hash.

    Args:
        tokens: uint64[n_tokens] token hashes.
        size: w, the shingle size.

    Returns:
        uint64[n_shingles], the distinct shingle hashes in ascending order (a set: repeats removed);
        empty when the document has fewer than ``size`` tokens.
    """
    n_shingles = tokens.size - size + 1
    if n_shingles <= 0:
        return np.empty(0, dtype=np.uint64)
    combined = tokens[:n_shingles].copy()
    for offset in range(1, size):
        combined *= _POSITION_MULTIPLIER
        combined += tokens[offset : offset + n_shingles]
    return sorted_unique(mix64(combined))


def document_shingles(text: str, size: int, unit: str) -> np.ndarray:
    """The shingle set of a raw document text: uint64[f], sorted, distinct."""
    return shingle_hashes(token_hashes(normalise(text), unit), size)
