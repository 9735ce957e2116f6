"""Signature parameters: everything two signatures must share to be comparable, as the store records them.

A frozen dataclass that travels with the signatures: ``sign`` derives it from its options, the store writes it
into its manifest (and each part's metadata), and ``find``, ``estimate`` and ``info`` read it back. The rules
its fields obey are :func:`dedup_cli.options.checks.check_signature`, applied at construction, so a store whose
metadata breaks them is refused as damaged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dedup_cli.options.checks import check_signature, check_tokenisation
from dedup_cli.options.signing import SignOptions
from dedup_cli.options.vocabulary import (
    CHAR_TOKENISATION,
    DEFAULT_NUM_PERM,
    DEFAULT_STORED_BITS,
    DEFAULT_TOKENISATION,
    HALF_BIT,
    LEGACY_SHORT_DOCUMENTS,
    LEGACY_TOKENISATION,
    SHORT_DOCUMENT_RULES,
    SHORT_DOCUMENTS,
    TEXT_UNIVERSE,
)


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
    # How tokens are found: for words "unicode-words" (ideographs, kana and the letters of scripts written without
    # spaces one token each: dedup_cli.text.scripts) or "w-runs" (runs of \w, what every store signed before
    # "unicode-words" has, and what a store whose metadata lacks this field means); "code-points" for characters;
    # "none" for integer sets. Left empty, the unit's default: "unicode-words", "code-points" or "none".
    tokenisation: str = ""
    # b = 1/2 stores (sign --bits 1/2): each of the ``num_perm`` stored 1-bit values is the XOR of the lowest bits
    # of permutations j and j + num_perm of 2·num_perm (Li & König 2010, Sec. 5.3). Such a store answers only b = 1/2.
    xor_pairs: bool = False
    # A document with fewer tokens than ``shingle_size`` (but some): "whole", one shingle made of its whole token
    # sequence (new stores); "none", no shingle, never compared (what a store whose metadata lacks this field was
    # signed with: :mod:`dedup_cli.text.shingles`).
    short_documents: str = SHORT_DOCUMENTS

    @classmethod
    def for_sets(cls, universe: int, num_perm: int = 256, bits: float = 8, seed: int = 1) -> SignatureParams:
        """Parameters for integer sets over {0 … universe − 1}: no shingling, a true permutation of Ω (``bits``
        1/2: ``num_perm`` permutations combined into num_perm/2 XOR bits)."""
        xor = bits == HALF_BIT
        return cls(num_perm=num_perm // 2 if xor else num_perm, bits=1 if xor else int(bits), seed=seed,
                   shingle_size=1, shingle_unit="element", universe=universe, normalisation="none",
                   token_hash="none", input_kind="sets", scheme="kperm", hash_family="feistel", xor_pairs=xor)

    @classmethod
    def from_options(cls, options: SignOptions, stored: SignatureParams | None = None) -> SignatureParams:
        """The parameters ``sign`` writes with ``options``: text, or integer sets over the input's universe.

        Word tokens are found as ``options.tokenisation`` says, else as the store's were (``stored``: its
        parameters, when it exists and has word shingles), else as Unicode words. k and B are the options', else
        the store's, else a new store's defaults (:data:`DEFAULT_NUM_PERM` values of :data:`DEFAULT_STORED_BITS`).
        """
        num_perm, bits = _layout(options, stored)
        # A store keeps its rule for short documents (sets have none: w = 1), so that its documents stay comparable.
        short = stored.short_documents if stored is not None else SHORT_DOCUMENTS
        if options.input.input_format == "sets":
            assert options.input.universe is not None  # InputOptions requires it
            return dataclasses.replace(cls.for_sets(options.input.universe, num_perm=num_perm, bits=bits,
                                                    seed=options.seed), short_documents=short)
        tokenisation = options.tokenisation or ""  # empty: the unit's default
        if options.shingle_unit == "word" and options.tokenisation is None and stored is not None \
                and stored.input_kind == "text" and stored.shingle_unit == "word":
            tokenisation = stored.tokenisation
        xor = bits == HALF_BIT
        return cls(num_perm=num_perm // 2 if xor else num_perm, bits=1 if xor else int(bits),
                   seed=options.seed, shingle_size=options.shingle_size, shingle_unit=options.shingle_unit,
                   scheme=options.scheme, tokenisation=tokenisation, xor_pairs=xor, short_documents=short)

    def __post_init__(self) -> None:
        check_signature(self.num_perm, self.bits, self.seed, self.shingle_size, self.shingle_unit, self.scheme,
                        self.universe, self.input_kind)
        if self.xor_pairs and self.bits != 1:
            raise ValueError(f"a store of XOR bits keeps 1 bit a value, not {self.bits}")
        if not self.tokenisation:
            default = "none" if self.input_kind == "sets" else (
                CHAR_TOKENISATION if self.shingle_unit == "char" else DEFAULT_TOKENISATION)
            object.__setattr__(self, "tokenisation", default)
        check_tokenisation(self.tokenisation, self.shingle_unit, self.input_kind)
        if self.short_documents not in SHORT_DOCUMENT_RULES:
            raise ValueError(f"short_documents {self.short_documents!r}: use one of {', '.join(SHORT_DOCUMENT_RULES)}")

    @property
    def permutations(self) -> int:
        """The permutations (or OPH bins) signed: ``num_perm``, twice that for a b = 1/2 store."""
        return 2 * self.num_perm if self.xor_pairs else self.num_perm

    @property
    def stored_bits(self) -> float:
        """The b a store answers by default, and the most it answers: all its stored bits, or 1/2 for a store of XOR
        bits (which answers only that)."""
        return HALF_BIT if self.xor_pairs else self.bits

    def permutation_params(self) -> SignatureParams:
        """The parameters of the values a b = 1/2 store's XOR bits are made of: 2·num_perm values of 1 bit."""
        return dataclasses.replace(self, num_perm=self.permutations, bits=1, xor_pairs=False)

    @property
    def signature_bytes(self) -> int:
        """Bytes of one packed signature: ⌈k·B/8⌉."""
        return (self.num_perm * self.bits + 7) // 8

    def to_dict(self) -> dict[str, Any]:
        """The parameters as the manifest records them."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> SignatureParams:
        """The parameters a manifest records; unknown names are refused, and a missing tokenisation (or rule for
        short documents) is the one stores had before it was recorded."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown signature parameters: {', '.join(sorted(unknown))}")
        if "tokenisation" not in fields:  # written before stores recorded it: words were the runs of \w
            kind, unit = fields.get("input_kind", "text"), fields.get("shingle_unit", "word")
            fields = {**fields, "tokenisation": "none" if kind == "sets" else
                      CHAR_TOKENISATION if unit == "char" else LEGACY_TOKENISATION}
        if "short_documents" not in fields:  # written before short documents had a shingle
            fields = {**fields, "short_documents": LEGACY_SHORT_DOCUMENTS}
        return cls(**fields)

    def differences(self, other: SignatureParams) -> list[str]:
        """Names and values of the parameters that differ, e.g. ``['num_perm: 128 vs 256']``."""
        return [
            f"{name}: {value} vs {getattr(other, name)}"
            for name, value in self.to_dict().items()
            if getattr(other, name) != value
        ]


def _layout(options: SignOptions, stored: SignatureParams | None) -> tuple[int, float]:
    """The k (permutations) and B (1/2: XOR bits) ``sign`` writes: as asked, else the store's, else a new store's
    defaults."""
    num_perm, bits = options.num_perm, options.bits
    if stored is not None:
        num_perm = stored.permutations if num_perm is None else num_perm
        bits = stored.stored_bits if bits is None else bits
    return (DEFAULT_NUM_PERM if num_perm is None else num_perm,
            float(DEFAULT_STORED_BITS if bits is None else bits))
