"""Signature parameters, keeping the lowest b bits of minwise values, and packing them into bytes.

b-bit minwise hashing (Li & König 2010) stores only the lowest b bits of each of the k minwise values.
A store keeps ``bits`` B of them so that ``find`` can use any b ≤ B; k values of B bits pack into
ceil(k·B/8) bytes per document, little-endian bit order within each value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.errors import UsageError
from dedup_cli.shingling import SHINGLE_UNITS

TEXT_UNIVERSE = 1 << 64
MAX_STORED_BITS = 64
# "kperm": k independent hash functions (Li & König 2010); "oph": one permutation split into k bins, densified
# (Li, Owen & Zhang 2012; Shrivastava 2017). See dedup_cli.hashing.
SIGNATURE_SCHEMES = ("kperm", "oph")


@dataclass(frozen=True)
class SignatureParams:
    """Everything that must agree for two signatures to be comparable; stored in the Parquet metadata."""

    num_perm: int = 256
    bits: int = 8
    seed: int = 1
    shingle_size: int = 5
    shingle_unit: str = "word"
    scheme: str = "oph"
    universe: int = TEXT_UNIVERSE
    # Versions of the text pipeline: changing normalisation or token hashing changes every signature.
    normalisation: str = "nfkc-casefold-whitespace"
    token_hash: str = "utf8-chunk-poly64-mix64"
    # "text": shingled documents hashed into 2^64 (mul-add family, mixed minima);
    # "sets": integer sets over ``universe``, permuted by keyed Feistel networks, minima stored as is.
    input_kind: str = "text"
    hash_family: str = "muladd64-mix64"

    @classmethod
    def for_sets(cls, universe: int, num_perm: int = 256, bits: int = 8, seed: int = 1) -> SignatureParams:
        """Parameters for integer sets over {0 … universe − 1}: no shingling, a true permutation of Ω."""
        return cls(num_perm=num_perm, bits=bits, seed=seed, shingle_size=1, shingle_unit="element",
                   universe=universe, normalisation="none", token_hash="none", input_kind="sets", scheme="kperm",
                   hash_family="feistel")

    def __post_init__(self) -> None:
        if not 1 <= self.num_perm <= 1 << 16:
            raise UsageError(f"--num-perm {self.num_perm} is out of range; use 1 to 65536")
        if not 1 <= self.bits <= MAX_STORED_BITS:
            raise UsageError(f"--bits {self.bits} is out of range; use 1 to {MAX_STORED_BITS}")
        if self.shingle_size < 1:
            raise UsageError(f"--shingle-size {self.shingle_size} must be at least 1")
        if self.input_kind not in ("text", "sets"):
            raise UsageError(f"input kind {self.input_kind!r}: choose text or sets")
        if self.input_kind == "text" and self.shingle_unit not in SHINGLE_UNITS:
            raise UsageError(f"--shingle-unit {self.shingle_unit!r}: choose {' or '.join(SHINGLE_UNITS)}")
        if self.scheme not in SIGNATURE_SCHEMES:
            raise UsageError(f"--scheme {self.scheme!r}: choose {' or '.join(SIGNATURE_SCHEMES)}")
        if self.input_kind == "sets" and self.scheme != "kperm":
            raise UsageError(f"--scheme {self.scheme} is for text input; integer sets are signed with k "
                             "permutations of their universe, so use --scheme kperm")
        if not 2 <= self.universe <= TEXT_UNIVERSE:
            raise UsageError(f"--universe {self.universe} is out of range; use 2 to 2^64")

    @property
    def is_dense(self) -> bool:
        """True when r = f/D may matter (a stated universe smaller than the 2^64 of hashed shingles)."""
        return self.universe < TEXT_UNIVERSE

    @property
    def signature_bytes(self) -> int:
        return (self.num_perm * self.bits + 7) // 8

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> SignatureParams:
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown signature parameters: {', '.join(sorted(unknown))}")
        return cls(**fields)

    def differences(self, other: SignatureParams) -> list[str]:
        """Names and values of the parameters that differ, e.g. ``['num_perm: 128 vs 256']``."""
        return [
            f"{name}: {value} vs {getattr(other, name)}"
            for name, value in self.to_dict().items()
            if getattr(other, name) != value
        ]


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
    return (values & values.dtype.type(mask)).astype(value_dtype(bits), copy=False)


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
    bit_planes = np.unpackbits(packed, axis=1, count=num_perm * bits, bitorder="little")
    bit_planes = bit_planes.reshape(n_docs, num_perm, bits).astype(dtype)
    weights = (np.ones(1, dtype=dtype) << np.arange(bits, dtype=dtype)).astype(dtype)
    return (bit_planes * weights).sum(axis=2, dtype=dtype)
