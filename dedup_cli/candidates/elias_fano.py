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
    # Each value's bits, lowest first (its little-endian bytes unpacked), of which the low_bits lowest are kept.
    bits = np.unpackbits(values.astype("<u8").view(np.uint8).reshape(count, 8), axis=1, bitorder="little")
    low_stream = np.packbits(bits[:, :low_bits].ravel(), bitorder="little")
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
        # Each value's low bits padded to 64 and packed back into a little-endian integer: one call, no loop.
        bits = np.zeros((count, 64), np.uint8)
        bits[:, :low_bits] = np.unpackbits(encoded.lows, count=count * low_bits,
                                           bitorder="little").reshape(count, low_bits)
        values |= np.packbits(bits, axis=1, bitorder="little").view("<u8").ravel()
    return values
