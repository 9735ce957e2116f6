"""Keeping the lowest b bits of minwise values and packing them into bytes.

b-bit minwise hashing (Li & König 2010) stores only the lowest b bits of each of the k minwise values.
A store keeps ``bits`` B of them so that ``find`` can use any b ≤ B; k values of B bits pack into
ceil(k·B/8) bytes per document, little-endian bit order within each value.
"""

from __future__ import annotations

import numpy as np

from dedup_cli.array_primitives import large_empty
from dedup_cli.options.vocabulary import HALF_BIT


def value_dtype(bits: int) -> np.dtype:
    """The smallest unsigned integer dtype holding ``bits`` bits."""
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if bits <= np.iinfo(dtype).bits:
            return np.dtype(dtype)
    raise ValueError(f"bits {bits} exceeds 64")


def lowest_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """Keep the lowest ``bits`` bits of each value, in the smallest dtype that holds them."""
    if bits >= 64:
        return values.astype(np.uint64, copy=False)
    if bits >= values.dtype.itemsize * 8:
        return values  # nothing to drop: no copy
    mask = (1 << bits) - 1
    # Into huge pages where offered: the values of every candidate are hundreds of MB at 10^7 documents.
    kept = np.bitwise_and(values, values.dtype.type(mask), out=large_empty(values.shape, values.dtype))
    return kept.astype(value_dtype(bits), copy=False)


def xor_bits(values: np.ndarray) -> np.ndarray:
    """The b = 1/2 values of Li & König 2010, Sec. 5.3: uint8[n_docs, ⌊k/2⌋], bit j the XOR of the lowest bits of
    the values at positions j and j + ⌊k/2⌋ of uint[n_docs, k] ``values`` (an odd k leaves its last position out).

    A fixed pairing, the same for every document and store, so that signatures stay comparable; any pairing of
    distinct positions serves. With one permutation hashing a bin filled by densification stores its value mixed
    with its own salt, so its bits are not a copy of its donor's; which minima agree still depends on the shared
    donors, which leaves the XOR bits' agreement (1 + R²)/2 in the mean and raises its variance (eq. D5,
    :mod:`dedup_cli.estimates.densified`).
    """
    half = values.shape[1] // 2
    low = (values & values.dtype.type(1)).astype(np.uint8, copy=False)
    return low[:, :half] ^ low[:, half:2 * half]


def estimator_values(values: np.ndarray, bits: float, xor_stored: bool = False) -> np.ndarray:
    """What the estimator with b = ``bits`` compares: the lowest ``bits`` bits of each value (uint[n_docs, k]), or
    with b = 1/2 (:data:`dedup_cli.options.vocabulary.HALF_BIT`) the XOR bits (:func:`xor_bits`), which are the
    values themselves when ``xor_stored`` (a store signed with b = 1/2 holds only them)."""
    if xor_stored:
        if bits != HALF_BIT:
            raise ValueError(f"a store of XOR bits answers only b = 1/2, not b = {bits}")
        return values
    if bits == HALF_BIT:
        return xor_bits(values)
    return lowest_bits(values, int(bits))


def pack_values(values: np.ndarray, bits: int) -> np.ndarray:
    """Pack the lowest ``bits`` bits of uint[n_docs, k] values into uint8[n_docs, ceil(k·bits/8)]."""
    values = np.asarray(values)
    n_docs, k = values.shape
    kept = lowest_bits(values, bits)
    if bits in (8, 16, 32, 64):
        # Whole bytes: the little-endian byte view is the packed form.
        little = np.ascontiguousarray(kept, dtype=kept.dtype.newbyteorder("<"))
        return little.view(np.uint8).reshape(n_docs, k * little.dtype.itemsize)
    shifts = np.arange(bits, dtype=kept.dtype)
    bit_planes = ((kept[:, :, None] >> shifts) & kept.dtype.type(1)).astype(np.uint8)
    return np.packbits(bit_planes.reshape(n_docs, k * bits), axis=1, bitorder="little")


def unpack_values(packed: np.ndarray, bits: int, num_perm: int) -> np.ndarray:
    """Inverse of :func:`pack_values`: uint8[n_docs, nbytes] → uint[n_docs, k] in the smallest dtype."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    n_docs = packed.shape[0]
    dtype = value_dtype(bits)
    if bits in (8, 16, 32, 64):
        # No copy when the stored bytes already are the values (8 bits, or little-endian wider ones).
        return packed.view(dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(n_docs, num_perm)
    if bits in (1, 2, 4):
        # Byte q holds values q·(8/b) … (q + 1)·(8/b) − 1, lowest bits first: shifts and a mask, where the bit
        # planes below take a byte per bit and a multiply-add per value (several times slower).
        per_byte = 8 // bits
        shifts = np.arange(0, 8, bits, dtype=np.uint8)
        values = (packed[:, :, None] >> shifts) & np.uint8((1 << bits) - 1)
        values = values.reshape(n_docs, packed.shape[1] * per_byte)
        return values if values.shape[1] == num_perm else np.ascontiguousarray(values[:, :num_perm])
    bit_planes = np.unpackbits(packed, axis=1, count=num_perm * bits, bitorder="little")
    bit_planes = bit_planes.reshape(n_docs, num_perm, bits).astype(dtype)
    weights = (np.ones(1, dtype=dtype) << np.arange(bits, dtype=dtype)).astype(dtype)
    return (bit_planes * weights).sum(axis=2, dtype=dtype)


# --- b-bit values packed into uint64 words: what the Dask engine moves and counts matches on ----------------

def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """:func:`dedup_cli.minhash.packing.pack_values` of uint8[n, k] values (their lowest ``bits`` bits), by shifts
    when ``bits`` divides 8.

    Value j occupies bits j·b … j·b + b − 1 (least significant first), so byte q holds values q·(8/b) …; the
    general packer goes through one byte per bit, several times slower. The 8/b values of an output byte are read
    as one little-endian word, each byte masked to its lowest b bits, and folded in log2(8/b) steps: the step of
    2^s·(8 − b) bits moves each run of 2^s packed values next to the run below it, so after the last step the low
    byte holds all 8/b values in order; what lands above it is cut off by the final narrowing.
    """
    if values.dtype != np.uint8 or 8 % bits or values.shape[1] % (8 // bits):
        return pack_values(values, bits)
    per_byte = 8 // bits
    if per_byte == 1:
        return np.ascontiguousarray(values)
    words = np.ascontiguousarray(values).view(f"<u{per_byte}")
    word = words.dtype.type
    low = (1 << bits) - 1
    packed = words & word(int.from_bytes(bytes([low]) * per_byte, "little"))
    step, packed_values = 8 - bits, 1
    while packed_values < per_byte:
        packed |= packed >> word(step)
        step, packed_values = 2 * step, 2 * packed_values
    return packed.astype(np.uint8)


def value_words(bits: int, num_perm: int) -> int:
    """uint64 words that hold k values of ``bits`` bits, packed."""
    return ((num_perm * bits + 7) // 8 + 7) // 8


def packed_to_words(packed: np.ndarray) -> np.ndarray:
    """uint8[n, S] → uint64[n, ⌈S/8⌉], zero-padded, little-endian (the inverse of :func:`words_to_packed`)."""
    count, width = packed.shape
    padded = np.zeros((count, (width + 7) // 8 * 8), dtype=np.uint8)
    padded[:, :width] = packed
    return padded.view("<u8").astype(np.uint64, copy=False)


def words_to_packed(words: np.ndarray, signature_bytes: int) -> np.ndarray:
    """uint64[n, W] → uint8[n, signature_bytes], the packed signature bytes again."""
    words = np.ascontiguousarray(words, dtype="<u8")
    return words.view(np.uint8).reshape(words.shape[0], words.shape[1] * 8)[:, :signature_bytes]


def unpack_words(words: np.ndarray, bits: int, num_perm: int) -> np.ndarray:
    """The b-bit values uint[n, k] of packed uint64 ``words`` (:func:`reduced_values`)."""
    return unpack_values(words_to_packed(words, (num_perm * bits + 7) // 8), bits, num_perm)
