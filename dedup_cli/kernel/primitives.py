"""Scalar steps of the compiled kernel: the splitmix64 mixer, UTF-8, 8-byte ASCII tests, Feistel rounds, hash sets.

Compiled by numba into the callers of :mod:`dedup_cli.kernel.compiled` (never called from Python). Constants
defined here are frozen into the compiled code, which is why ``compiled.KERNEL_SOURCES`` records this file's
digest (numba notices edits to the cached function's own file only).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

REPLACEMENT = 0xFFFD  # U+FFFD, what a malformed UTF-8 sequence decodes to
MAX_UINT64 = np.uint64(0xFFFFFFFFFFFFFFFF)
BYTES = np.uint64(0x0101010101010101)  # one in every byte
HIGH_BITS = np.uint64(0x8080808080808080)  # the top bit of every byte


@njit(inline="always")
def mix64(z, mix):
    """The splitmix64 finaliser; ``mix`` = (shift 30, shift 27, shift 31, multiplier 1, multiplier 2)."""
    z ^= z >> mix[0]
    z *= mix[3]
    z ^= z >> mix[1]
    z *= mix[4]
    z ^= z >> mix[2]
    return z


@njit(inline="always")
def append_byte(hashed, chunk, chunk_bits, byte, multiplier):
    """One more byte of a word into its partial 8-byte chunk; a full chunk enters Horner's rule h ← h·Q + c."""
    chunk |= np.uint64(byte) << np.uint64(chunk_bits)
    chunk_bits += 8
    if chunk_bits == 64:
        hashed = hashed * multiplier + chunk
        chunk = np.uint64(0)
        chunk_bits = 0
    return hashed, chunk, chunk_bits


@njit(inline="always")
def append_code_point(hashed, chunk, chunk_bits, code_point, multiplier):
    """The UTF-8 bytes of one code point ≥ 0x80 (surrogates too, as ``surrogatepass`` writes them)."""
    if code_point < 0x800:
        hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, 0xC0 | (code_point >> 6), multiplier)
    else:
        if code_point < 0x10000:
            hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, 0xE0 | (code_point >> 12),
                                                    multiplier)
        else:
            hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, 0xF0 | (code_point >> 18),
                                                    multiplier)
            hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, 0x80 | ((code_point >> 12) & 0x3F),
                                                    multiplier)
        hashed, chunk, chunk_bits = append_byte(hashed, chunk, chunk_bits, 0x80 | ((code_point >> 6) & 0x3F),
                                                multiplier)
    return append_byte(hashed, chunk, chunk_bits, 0x80 | (code_point & 0x3F), multiplier)


@njit(inline="always")
def load_chunk(buffer, at, length):
    """Up to 8 bytes of ``buffer`` from ``at`` as a little-endian uint64 (``length`` ≤ 8 of them, the rest 0);
    one unaligned load when 8 bytes are there to read."""
    chunk = np.uint64(0)
    if at + 8 <= buffer.size:
        for offset in range(8):
            chunk |= np.uint64(buffer[at + offset]) << np.uint64(8 * offset)
        if length < 8:
            chunk &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
    else:
        for offset in range(min(length, buffer.size - at)):
            chunk |= np.uint64(buffer[at + offset]) << np.uint64(8 * offset)
    return chunk


@njit(inline="always")
def lower_ascii(chunk):
    """A-Z → a-z in every byte of a chunk of ASCII bytes (SWAR: a byte is upper case when adding 0x3F sets its
    top bit and adding 0x25 does not, i.e. 0x41 ≤ byte ≤ 0x5A; a byte < 0x80 never carries into the next)."""
    at_least_a = chunk + np.uint64(0x3F3F3F3F3F3F3F3F)
    beyond_z = chunk + np.uint64(0x2525252525252525)
    upper = at_least_a & ~beyond_z & HIGH_BITS
    return chunk | (upper >> np.uint64(2))


@njit(inline="always")
def bytes_between(chunk, low, high):
    """The top bit of each byte of a chunk of ASCII bytes that lies in [low, high] (SWAR: adding 0x80 − low sets
    the top bit from ``low`` on, adding 0x7F − high from ``high`` + 1 on; a byte < 0x80 never carries)."""
    from_low = chunk + np.uint64(0x80 - low) * BYTES
    beyond_high = chunk + np.uint64(0x7F - high) * BYTES
    return from_low & ~beyond_high & HIGH_BITS


@njit(inline="always")
def ascii_word_bytes(chunk):
    """The top bit of each byte of a chunk of ASCII bytes that is a \\w character: [0-9A-Za-z_]
    (:func:`dedup_cli.kernel.tables.code_point_tables` checks that this is what ``\\w`` matches in ASCII)."""
    letters = bytes_between(chunk | np.uint64(0x20) * BYTES, 0x61, 0x7A)  # | 0x20 folds A-Z onto a-z
    return letters | bytes_between(chunk, 0x30, 0x39) | bytes_between(chunk, 0x5F, 0x5F)


@njit(inline="always")
def utf8_width(lead, at, end):
    """Bytes in the UTF-8 sequence led by ``lead`` ≥ 0x80 at ``at``; 1 for a stray continuation byte or a
    sequence cut by the end of the document (Python's own UTF-8 has neither; raw bytes may)."""
    width = 2 if lead < 0xE0 else (3 if lead < 0xF0 else 4)
    if lead < 0xC0 or at + width > end:
        return 1
    return width


@njit(inline="always")
def utf8_code_point(buffer, at, width):
    """The code point of the UTF-8 sequence of ``width`` bytes at ``at`` (:func:`utf8_width`); U+FFFD if malformed."""
    lead = np.uint32(buffer[at])
    if width == 1:
        return np.uint32(REPLACEMENT)
    second = np.uint32(buffer[at + 1]) & 0x3F
    if width == 2:
        return np.uint32(((lead & 0x1F) << 6) | second)
    third = np.uint32(buffer[at + 2]) & 0x3F
    if width == 3:
        return np.uint32(((lead & 0x0F) << 12) | (second << 6) | third)
    code_point = ((lead & 0x07) << 18) | (second << 12) | (third << 6) | (np.uint32(buffer[at + 3]) & 0x3F)
    return np.uint32(code_point if code_point <= 0x10FFFF else REPLACEMENT)


@njit
def feistel(value, row, round_keys, half_bits, inverse, mix):
    """σ_row(value), or σ_row⁻¹(value), of the balanced Feistel network of :mod:`dedup_cli.minhash.feistel`
    (the bin orders of :class:`dedup_cli.minhash.oph._BinOrders`)."""
    shift = np.uint64(half_bits)
    mask = (np.uint64(1) << shift) - np.uint64(1)
    left = value >> shift
    right = value & mask
    rounds = round_keys.shape[1]
    for step in range(rounds):
        if inverse:
            mixed = mix64(left ^ round_keys[row, rounds - 1 - step], mix) & mask
            left, right = right ^ mixed, left
        else:
            mixed = mix64(right ^ round_keys[row, step], mix) & mask
            left, right = right, left ^ mixed
    return (left << shift) | right


@njit
def grown(table):
    """An open-addressing hash set of uint64 (0 marks a free slot) rehashed into twice the slots; the slot of a
    value is its top bits, then linear probing."""
    capacity = table.size * 2
    larger = np.zeros(capacity, dtype=np.uint64)
    shift = np.uint64(64 - int(math.log2(capacity)))
    mask = np.uint64(capacity - 1)
    for value in table:
        if value != 0:
            slot = value >> shift
            while larger[slot] != 0:
                slot = (slot + np.uint64(1)) & mask
            larger[slot] = value
    return larger
