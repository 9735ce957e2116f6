"""Compiled tokenisers: the next token hashes of a document's NFKC-normalised UTF-8 bytes, a block at a time.

The tokens are those of :mod:`dedup_cli.text.tokens`, with case folding (``str.casefold``: full folding, one to
three code points per code point, context-free) done here by table (:func:`dedup_cli.kernel.tables.code_point_tables`):

* words: runs of ``\\w``, or Unicode words (:mod:`dedup_cli.text.scripts`) when the class table has the bits
  EXTEND (a combining mark: joins the token before it, never starts one), SINGLE (a token by itself) and
  KATAKANA (runs of katakana only); a word's hash is Horner's rule over its UTF-8 bytes read as zero-padded
  little-endian 8-byte chunks, h ← h·Q + c from h = K, finished with the splitmix64 mixer. ASCII documents are
  tokenised 8 bytes at a time (SWAR), and so are the ASCII runs that start a word of any document;
* characters: the code points of the folded text with each run of white space made one space and the ends
  trimmed (``" ".join(text.split())``), hashed as mix64(code point + C).

A tokeniser fills ``tokens`` (uint64[n]) from byte ``at`` of the document ``buffer[at:end]`` and returns how
many it wrote and where it stopped; what it was in the middle of (a word's partial hash, a folding that expands
to several code points, a pending space) waits in ``state`` (uint64[8], :func:`start_document`) for the next
call. Compiled into the callers of :mod:`dedup_cli.kernel.compiled` (whose ``KERNEL_SOURCES`` records this file).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dedup_cli.kernel.primitives import (
    HIGH_BITS,
    append_byte,
    append_code_point,
    ascii_word_bytes,
    load_chunk,
    lower_ascii,
    mix64,
    utf8_code_point,
    utf8_width,
)

WORD = 1  # the class bits of dedup_cli.kernel.tables (checked against them by the tests)
SPACE = 2
EXTEND = 4
SINGLE = 8
KATAKANA = 16
# What the token being read is made of (the IN_WORD slot of ``state``): nothing yet, a run of word characters, a
# run of katakana, one character that is a token alone.
NO_TOKEN, RUN, KATAKANA_RUN, ALONE = 0, 1, 2, 3
EXPANDED = 1 << 31
MAX_FOLDED = 3

# The slots of ``state``. Both units: a code point may fold to several (ß → ss), of which expansions[ROW, PART:]
# are still to take. Words: the word being read (Horner's sum of its full chunks, the partial chunk, its bits,
# what it is made of).
# Characters: whether a token was written, white space waiting to become one space, a character held behind it.
HASHED, CHUNK, CHUNK_BITS, IN_WORD, ROW, PART = 0, 1, 2, 3, 4, 5
STARTED, PENDING_SPACE, HELD, HELD_CHARACTER = 0, 1, 2, 3


@njit
def start_document(state, words, chunk_start):
    """The tokeniser state at the start of a document."""
    state[:] = 0
    state[PART] = MAX_FOLDED
    if words:
        state[HASHED] = chunk_start


@njit(inline="always")
def folded_character(buffer, at, end, fold, expansions, row, part):
    """The next code point of the case-folded text: (code point, at, row, part), or code point −1 at the end."""
    if part < MAX_FOLDED:
        character = np.int64(expansions[row, part])
        part = part + 1 if part + 1 < MAX_FOLDED and expansions[row, part + 1] else MAX_FOLDED
        return character, at, row, part
    if at >= end:
        return np.int64(-1), at, row, part
    byte = buffer[at]
    if byte < 0x80:
        return np.int64(fold[byte]), at + 1, row, part
    width = utf8_width(byte, at, end)
    folded = fold[utf8_code_point(buffer, at, width)]
    if folded & EXPANDED:
        row = np.int64(folded & ~np.uint32(EXPANDED))
        return np.int64(expansions[row, 0]), at + width, row, 1
    return np.int64(folded), at + width, row, part


@njit
def word_tokens(buffer, at, end, ascii_document, tokens, state, classes, fold, expansions, ascii_word, lowest_byte,
                chunk_start, chunk_multiplier, mix):
    """Up to ``tokens.size`` word token hashes of ``buffer[at:end]`` into ``tokens``: (how many, the new ``at``).

    ``ascii_document`` (the document has no byte ≥ 0x80) takes the SWAR tokeniser, exact only then.
    ``ascii_word`` (bool[256]) and ``lowest_byte`` (int64[256], the lowest set bit of a byte) are lookup tables.
    """
    if ascii_document:
        return ascii_word_tokens(buffer, at, end, tokens, ascii_word, lowest_byte, chunk_start, chunk_multiplier,
                                 mix)
    return unicode_word_tokens(buffer, at, end, tokens, state, classes, fold, expansions, ascii_word, chunk_start,
                               chunk_multiplier, mix)


@njit(inline="always")
def ascii_word_tokens(buffer, at, end, tokens, ascii_word, lowest_byte, chunk_start, chunk_multiplier, mix):
    """:func:`word_tokens` of an ASCII document, 8 bytes at a time (SWAR): no word is ever left half read, so
    nothing waits in the state between calls."""
    count = 0
    # Skip to the next word byte, then hash the word 8 bytes at a time, its end found by SWAR (the first
    # byte of a chunk that is not a word byte), with no branch per byte.
    while count < tokens.size:
        while at < end and not ascii_word[buffer[at]]:
            at += 1
        if at >= end:
            break
        hashed = chunk_start
        while True:
            chunk = load_chunk(buffer, at, 8)
            word_bytes = ascii_word_bytes(chunk)
            if end - at < 8:  # bytes past the document are not part of the word
                word_bytes &= (np.uint64(1) << np.uint64(8 * (end - at))) - np.uint64(1)
            stops = ~word_bytes & HIGH_BITS
            if stops == 0:
                hashed = hashed * chunk_multiplier + lower_ascii(chunk)
                at += 8
                continue
            # Gather the 8 top bits into one byte (no two partial products overlap), take the lowest.
            length = lowest_byte[((stops >> np.uint64(7)) * np.uint64(0x0102040810204080)) >> np.uint64(56)]
            if length:
                chunk &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
                hashed = hashed * chunk_multiplier + lower_ascii(chunk)
            at += length
            break
        tokens[count] = mix64(hashed, mix)
        count += 1
    return count, at


@njit(inline="always")
def unicode_word_tokens(buffer, at, end, tokens, state, classes, fold, expansions, ascii_word, chunk_start,
                        chunk_multiplier, mix):
    """:func:`word_tokens` of any document, a code point at a time after case folding, the ASCII run that starts a
    word 8 bytes at a time; the word being read when ``tokens`` is full waits in ``state``."""
    count = 0
    hashed, chunk, chunk_bits = state[HASHED], state[CHUNK], np.int64(state[CHUNK_BITS])
    in_word, row, part = np.int64(state[IN_WORD]), np.int64(state[ROW]), np.int64(state[PART])
    while count < tokens.size:
        if part == MAX_FOLDED and at < end and buffer[at] < 0x80 and ascii_word[buffer[at]] and in_word == NO_TOKEN:
            # A word starts with ASCII: take its ASCII run 8 bytes at a time.
            stop = at + 1
            while stop < end and ascii_word[buffer[stop]]:
                stop += 1
            while stop - at >= 8:
                hashed = hashed * chunk_multiplier + lower_ascii(load_chunk(buffer, at, 8))
                at += 8
            if stop > at:
                chunk = lower_ascii(load_chunk(buffer, at, stop - at))
                chunk_bits = 8 * (stop - at)
                at = stop
            in_word = RUN
            continue
        character, at, row, part = folded_character(buffer, at, end, fold, expansions, row, part)
        if character < 0:
            if in_word == NO_TOKEN:
                break
            character = 0  # past the end: closes the last word
        kind = classes[character]
        if kind & EXTEND:  # a combining mark: part of the token before it, if any
            if in_word != NO_TOKEN:
                hashed, chunk, chunk_bits = append_code_point(hashed, chunk, chunk_bits, character, chunk_multiplier)
            continue
        if kind & WORD:
            made_of = ALONE if kind & SINGLE else (KATAKANA_RUN if kind & KATAKANA else RUN)
            if in_word != NO_TOKEN and (made_of != in_word or made_of == ALONE):  # a token ends, another starts
                if chunk_bits:
                    hashed = hashed * chunk_multiplier + chunk
                tokens[count] = mix64(hashed, mix)
                count += 1
                hashed, chunk, chunk_bits = chunk_start, np.uint64(0), 0
            if character < 0x80:
                hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, character, chunk_multiplier)
            else:
                hashed, chunk, chunk_bits = append_code_point(hashed, chunk, chunk_bits, character, chunk_multiplier)
            in_word = made_of
        elif in_word != NO_TOKEN:
            if chunk_bits:
                hashed = hashed * chunk_multiplier + chunk
            tokens[count] = mix64(hashed, mix)
            count += 1
            hashed, chunk, chunk_bits, in_word = chunk_start, np.uint64(0), 0, NO_TOKEN
    state[HASHED], state[CHUNK], state[CHUNK_BITS] = hashed, chunk, chunk_bits
    state[IN_WORD], state[ROW], state[PART] = in_word, row, part
    return count, at


@njit
def character_tokens(buffer, at, end, tokens, state, classes, fold, expansions, char_offset, mix):
    """Up to ``tokens.size`` character token hashes of ``buffer[at:end]`` into ``tokens``: (how many, new ``at``)."""
    count = 0
    started, pending_space = state[STARTED] != 0, state[PENDING_SPACE] != 0
    held, held_character = state[HELD] != 0, np.int64(state[HELD_CHARACTER])
    row, part = np.int64(state[ROW]), np.int64(state[PART])
    space_hash = mix64(np.uint64(ord(" ")) + char_offset, mix)
    while count < tokens.size:
        if held:
            character, held = held_character, False
        else:
            character, at, row, part = folded_character(buffer, at, end, fold, expansions, row, part)
            if character < 0:
                break
        if classes[character] & SPACE:
            pending_space = started  # white space before the first character is dropped
            continue
        if pending_space:  # one space token, then this character
            pending_space, held, held_character = False, True, character
            tokens[count] = space_hash
        else:
            tokens[count] = mix64(np.uint64(character) + char_offset, mix)
        started = True
        count += 1
    state[STARTED], state[PENDING_SPACE], state[ROW], state[PART] = started, pending_space, row, part
    state[HELD], state[HELD_CHARACTER] = held, held_character
    return count, at
