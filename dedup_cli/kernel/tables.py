"""The tables and constants the compiled kernel takes as arguments, built from the numpy path's own definitions.

The compiled kernel (:mod:`dedup_cli.kernel.compiled`) is cached on disk by numba, and a cached function treats
the globals it reads as constants frozen at compile time. So nothing it computes with is a global of another
module: every constant, code-point table, key and hash family is built here, from the modules that define them
for the numpy path (:mod:`dedup_cli.text`, :mod:`dedup_cli.minhash`, :mod:`dedup_cli.array_primitives`), and passed
at call time. A change there changes the arguments, never a stale compiled constant. Only numpy is imported.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from dedup_cli import array_primitives
from dedup_cli.minhash import oph
from dedup_cli.minhash.kperm import HashFamily
from dedup_cli.options.vocabulary import DEFAULT_TOKENISATION
from dedup_cli.text import normalise, scripts, shingles, tokens

# Code point classes (one uint8 per code point, :func:`dedup_cli.text.scripts.token_classes`): \w (word
# characters), white space (what str.split() splits on), and for Unicode words combining marks, characters that
# are a token alone, and katakana.
WORD = scripts.WORD
SPACE = scripts.SPACE
EXTEND = scripts.EXTEND
SINGLE = scripts.SINGLE
KATAKANA = scripts.KATAKANA
# A fold table entry with this bit set is the row of a multi-code-point folding (ß → ss) in the expansion table.
EXPANDED = 1 << 31
# Case folding maps one code point to at most this many (Unicode CaseFolding.txt, status F).
MAX_FOLDED = 3
# What \w matches among ASCII code points; the kernel tests ASCII bytes for it with arithmetic (SWAR).
ASCII_WORD_CHARACTERS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


@functools.cache
def _case_folding() -> tuple[np.ndarray, np.ndarray]:
    """(uint32[0x110000] fold table, uint32[n_expanded, 3] expansions): ``str.casefold`` per code point.

    Entry c of the fold table is the single code point c folds to, or ``EXPANDED | row`` when it folds to
    several (row of the expansion table, zero-padded). Case folding is context-free, so folding a text is
    folding each code point in turn.
    """
    changed = normalise.case_folded_code_points()
    fold = np.arange(changed.size, dtype=np.uint32)
    expansions: list[list[int]] = []
    for code_point in np.flatnonzero(changed).tolist():
        folded = chr(code_point).casefold()
        if len(folded) == 1:
            fold[code_point] = ord(folded)
        else:
            fold[code_point] = EXPANDED | len(expansions)
            expansions.append([ord(char) for char in folded] + [0] * (MAX_FOLDED - len(folded)))
    return fold, np.array(expansions or [[0] * MAX_FOLDED], dtype=np.uint32).reshape(-1, MAX_FOLDED)


def _ascii_classes() -> np.ndarray:
    """uint8[128]: the code point classes of ASCII, by the same regular expressions as the full tables."""
    ascii_text = "".join(map(chr, range(128)))
    classes = np.zeros(128, dtype=np.uint8)
    for pattern, bit in ((normalise.WORD_CLASS, WORD), (normalise.SPACE_CLASS, SPACE)):
        for found in re.finditer(pattern, ascii_text):
            classes[found.start()] |= bit
    return classes


@functools.cache
def code_point_tables(ascii_only: bool, tokenisation: str = DEFAULT_TOKENISATION) -> tuple[np.ndarray, np.ndarray,
                                                                                        np.ndarray]:
    """(uint8[n] classes, uint32[n] fold table, uint32[m, 3] expansions) for code points below n; the classes of
    word tokens found as ``tokenisation`` says (:func:`dedup_cli.text.scripts.token_classes`).

    For an all-ASCII batch n = 128 (where both tokenisations agree), and nothing of the 0.1 s the full tables
    take to build is paid.
    """
    ascii_classes = _ascii_classes()
    if "".join(map(chr, np.flatnonzero(ascii_classes & WORD).tolist())) != ASCII_WORD_CHARACTERS:
        raise RuntimeError("\\w in ASCII is no longer [0-9A-Za-z_]; the kernel's ASCII word test must change")
    if ascii_only:
        fold = np.array([ord(chr(code).casefold()) for code in range(128)], dtype=np.uint32)
        return ascii_classes, fold, np.zeros((1, MAX_FOLDED), dtype=np.uint32)
    classes = scripts.token_classes(tokenisation)
    fold, expansions = _case_folding()
    return classes, fold, expansions


def hash_constants() -> np.ndarray:
    """uint64[9]: the splitmix64 finaliser (3 shifts, 2 multipliers), then Horner's K and Q of word tokens, the
    position multiplier P of shingles and the offset C of character tokens."""
    return np.array([
        array_primitives._SHIFT_30, array_primitives._SHIFT_27, array_primitives._SHIFT_31, array_primitives._MIX_1,
        array_primitives._MIX_2,
        tokens._CHUNK_START, tokens._CHUNK_MULTIPLIER, shingles._POSITION_MULTIPLIER, tokens._CHAR_OFFSET,
    ], dtype=np.uint64)


@functools.lru_cache(maxsize=8)
def scheme_tables(scheme: str, seed: int, num_perm: int) -> tuple[Any, ...]:
    """The seeded arrays of a scheme, as the kernel takes them (placeholders for the other scheme's).

    Returns (uint64[1] oph key, uint64[k] salts, uint16[k, k] bin orders, uint16[k, k] ranks by bin,
    uint64[k, rounds] round keys, h of the rounds' 2h-bit domain, uint64[k] multipliers, uint64[k] increments).
    The orders and ranks are :class:`dedup_cli.minhash.oph._BinOrders`' tables, empty above the k it tabulates
    (the kernel then runs the Feistel network itself).
    """
    no_words = np.zeros(0, dtype=np.uint64)
    no_orders = np.zeros((0, 0), dtype=np.uint16)
    if scheme == "kperm":
        family = HashFamily.from_seed(seed, num_perm)
        return (np.zeros(1, dtype=np.uint64), no_words, no_orders, no_orders, np.zeros((0, 1), dtype=np.uint64), 1,
                np.ascontiguousarray(family.multipliers), np.ascontiguousarray(family.increments))
    key, salts, round_keys = oph._oph_keys(seed, num_perm)
    orders = oph._bin_orders(seed, num_perm)
    order = orders.order if orders.order is not None else no_orders
    rank = orders.rank_by_bin if orders.rank_by_bin is not None else no_orders
    return (np.ascontiguousarray(key), np.ascontiguousarray(salts), np.ascontiguousarray(order),
            np.ascontiguousarray(rank), np.ascontiguousarray(round_keys), orders.half_bits, no_words, no_words)
