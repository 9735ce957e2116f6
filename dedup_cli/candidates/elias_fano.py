"""Elias–Fano coding of a sorted set of integers: about 2 + log2(U/n) bits each, encoded and decoded with numpy.

n distinct integers below U are each split into ``l = ⌊log2(U/n)⌋`` low bits, stored as they are, and the
high part ``x >> l``, stored in unary: bit ``(x_i >> l) + i`` of a bitmap of ``n + (U >> l) + 1`` bits is set
for the i-th integer (Elias, "Efficient storage and retrieval by content and address of static files", JACM
1974; Fano 1971). The bitmap has n ones and at most about 2n bits, so a set takes at most ``n·(l + 2)`` bits: what
the Dask engine's candidate stage sends to find which band keys occur on more than one worker
(:mod:`dedup_cli.candidates.crossing`), instead of the keys themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EliasFano:
    """An encoded set: ``count`` integers, ``low_bits`` low bits each in ``lows``, the unary high parts in
    ``highs`` (both bit streams packed little-endian into bytes)."""

    count: int
    low_bits: int
    lows: np.ndarray  # uint8[⌈count · low_bits / 8⌉]
    highs: np.ndarray  # uint8[⌈high_length / 8⌉]
    high_length: int

    @property
    def nbytes(self) -> int:
        """The encoded size: what moves when the set is sent."""
        return int(self.lows.nbytes + self.highs.nbytes) + 24


def encode(values: np.ndarray, universe: int) -> EliasFano:
    """Encode ``values`` (uint64, strictly ascending, each below ``universe``)."""
    values = np.asarray(values, dtype=np.uint64)
    count = int(values.size)
    if count == 0:
        return EliasFano(0, 0, np.empty(0, np.uint8), np.empty(0, np.uint8), 0)
    if int(values[-1]) >= universe:
        raise ValueError(f"value {int(values[-1])} is not below the universe {universe}")
    low_bits = max(0, (universe // count).bit_length() - 1)  # ⌊log2(U/n)⌋
    low_stream = pack_fields(values, low_bits)
    highs = (values >> np.uint64(low_bits)).astype(np.int64) + np.arange(count, dtype=np.int64)
    high_length = int(highs[-1]) + 1
    bitmap = np.zeros(high_length, np.uint8)
    bitmap[highs] = 1
    return EliasFano(count, low_bits, low_stream, np.packbits(bitmap, bitorder="little"), high_length)


def decode(encoded: EliasFano) -> np.ndarray:
    """The integers of ``encoded``, ascending: uint64[count]."""
    count, low_bits = encoded.count, encoded.low_bits
    if count == 0:
        return np.empty(0, np.uint64)
    ones = np.flatnonzero(np.unpackbits(encoded.highs, count=encoded.high_length, bitorder="little"))
    values = (ones - np.arange(count, dtype=np.int64)).astype(np.uint64) << np.uint64(low_bits)
    if low_bits:
        values |= unpack_fields(encoded.lows, count, low_bits)
    return values


def pack_fields(values: np.ndarray, width: int) -> np.ndarray:
    """The lowest ``width`` bits (1–64) of each of ``values`` (uint64) as one little-endian bit stream: value i in
    bits i·width … (i + 1)·width − 1, in ⌈n·width/8⌉ bytes.

    Eight values fill exactly ``width`` bytes, so the stream is built eight values at a time: the j-th value of
    each group starts at bit j·width of the group, in its 64-bit word j·width // 64 (and the next one when it
    straddles two); eight shifts and ORs over n/8 groups, against 64 bytes a value to unpack bit by bit.
    """
    count = values.size
    if width == 0 or count == 0:
        return np.empty(0, np.uint8)
    groups = -(-count // 8)
    padded = np.zeros(groups * 8, np.uint64)
    padded[:count] = values
    if width < 64:
        padded &= np.uint64((1 << width) - 1)
    fields = padded.reshape(groups, 8)
    words = np.zeros((groups, width // 8 + 1), np.uint64)  # width bytes, and room for the last straddle
    for j in range(8):
        word, shift = divmod(j * width, 64)
        words[:, word] |= fields[:, j] << np.uint64(shift)
        if shift + width > 64:
            words[:, word + 1] |= fields[:, j] >> np.uint64(64 - shift)
    stream = words.astype("<u8").view(np.uint8).reshape(groups, -1)[:, :width].ravel()
    return stream[: -(-count * width // 8)].copy()


def unpack_fields(stream: np.ndarray, count: int, width: int) -> np.ndarray:
    """The ``count`` values of ``width`` bits (1–64) of :func:`pack_fields`' stream: uint64[count]."""
    groups = -(-count // 8)
    grouped = np.zeros(groups * width, np.uint8)  # the stream, its last group padded with zeros
    used = min(stream.size, grouped.size)
    grouped[:used] = stream[:used]
    padded = np.zeros((groups, (width // 8 + 1) * 8), np.uint8)  # a group's bytes, then whole zero words
    padded[:, :width] = grouped.reshape(groups, width)
    words = padded.view("<u8").astype(np.uint64, copy=False)
    fields = np.empty((groups, 8), np.uint64)
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    for j in range(8):
        word, shift = divmod(j * width, 64)
        field = words[:, word] >> np.uint64(shift)
        if shift + width > 64:
            field |= words[:, word + 1] << np.uint64(64 - shift)
        fields[:, j] = field & mask
    return fields.ravel()[:count]
