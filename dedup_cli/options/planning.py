"""The parameters ``plan`` explains."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import (
    at_least,
    banding_values,
    check_banding,
    check_bits,
    check_half_bit_pairs,
    choice,
    estimator_bits,
    in_range,
    open_fraction,
    set_fields,
    threshold_value,
    whole_number,
)
from dedup_cli.options.vocabulary import (
    DEFAULT_NUM_PERM,
    DEFAULT_SCHEME,
    DEFAULT_STORED_BITS,
    HALF_BIT,
    MAX_NUM_PERM,
    SIGNATURE_SCHEMES,
)


@dataclass(frozen=True)
class PlanOptions:
    """The parameters ``plan`` explains: those of a ``find`` (and of the ``sign`` before it).

    Attributes:
        threshold: R0 in (0, 1].
        bits: b, the bits per value the estimator uses (≤ ``stored_bits``), or 1/2 (``"1/2"``, ``0.5``): XOR bits
            of pairs of permutations (Li & König 2010, Sec. 5.3).
        num_perm: k, minwise values (permutations) per document.
        stored_bits: B, bits kept per value in the store; band keys use all B of them. 1/2: a store of XOR bits
            (``sign --bits 1/2``), k/2 bits a document, banded on them; it answers b = 1/2 alone.
        recall: target Pr(candidate) at R0 for the automatic banding, in (0, 1).
        docs: N, the number of documents, for the expected candidates and the memory of ``find``.
        bands, rows: a banding to explain instead of the automatic one.
        jobs: the worker processes of ``find`` (``FindOptions.jobs``; 0: one per core), which hold memory of their
            own: the memory estimate is the sum over them.
        scheme: how the store is signed (``sign --scheme``): ``oph``, one permutation hashing with densification, or
            ``kperm``, k independent permutations.
        shingles: the shingles of the documents to plan for (the corpus's shortest; ``find`` takes its store's):
            with ``oph``, documents with fewer shingles than about k make the estimate noisier and the S-curve
            flatter, and the banding is chosen so that their pairs reach the recall. None: documents long enough
            for that not to matter.
    """

    threshold: float = 0.5
    bits: float | str = 2
    num_perm: int = DEFAULT_NUM_PERM
    stored_bits: float | str = DEFAULT_STORED_BITS
    recall: float = 0.99
    docs: int | None = None
    bands: int | None = None
    rows: int | None = None
    jobs: int = 0
    scheme: str = DEFAULT_SCHEME
    shingles: int | None = None

    def __post_init__(self) -> None:
        set_fields(self, threshold=threshold_value(self.threshold))
        set_fields(self, bits=estimator_bits(self.bits), stored_bits=estimator_bits(self.stored_bits, "stored_bits"),
                   num_perm=whole_number("num_perm", self.num_perm))
        in_range("num_perm", self.num_perm, 1, MAX_NUM_PERM)
        check_bits(self.bits, self.stored_bits)  # type: ignore[arg-type]  # made numbers just above
        check_half_bit_pairs(self.bits, self.stored_bits, self.num_perm)  # type: ignore[arg-type]
        if self.stored_bits == HALF_BIT and self.num_perm % 2:
            raise OptionError("num_perm", self.num_perm, "{stored_bits} 1/2 combines the permutations in pairs; use "
                              "an even {num_perm}")
        set_fields(self, recall=open_fraction("recall", self.recall, "0.99"))
        if self.docs is not None:
            set_fields(self, docs=at_least("docs", self.docs, 1))
        set_fields(self, jobs=at_least("jobs", self.jobs, 0))
        choice("scheme", self.scheme, SIGNATURE_SCHEMES, "{{scheme}} {value}: choose {either}")
        if self.shingles is not None:
            set_fields(self, shingles=at_least("shingles", self.shingles, 1))
        banding_values(self)
        check_banding(self.bands, self.rows, self.band_values)

    @property
    def workers(self) -> int:
        """``find``'s worker processes: ``jobs``, or one per core when it is 0 (``FindOptions.workers``)."""
        return self.jobs or os.cpu_count() or 1

    @property
    def band_values(self) -> int:
        """The values a signature holds for the bands: k, or k/2 XOR bits in a store of XOR bits."""
        return self.num_perm // 2 if self.stored_bits == HALF_BIT else self.num_perm
