"""The parameters ``plan`` explains."""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.options.checks import (
    at_least,
    banding_values,
    check_banding,
    check_bits,
    in_range,
    open_fraction,
    set_fields,
    threshold_value,
    whole_number,
)
from dedup_cli.options.vocabulary import MAX_NUM_PERM, MAX_STORED_BITS


@dataclass(frozen=True)
class PlanOptions:
    """The parameters ``plan`` explains: those of a ``find`` (and of the ``sign`` before it).

    Attributes:
        threshold: R0 in (0, 1].
        bits: b, the bits per value the estimator uses (≤ ``stored_bits``).
        num_perm: k, minwise values per document.
        stored_bits: B, bits kept per value in the store; band keys use all B of them.
        recall: target Pr(candidate) at R0 for the automatic banding, in (0, 1).
        docs: N, the number of documents, for the expected candidates and the memory of ``find``.
        bands, rows: a banding to explain instead of the automatic one.
    """

    threshold: float = 0.5
    bits: int = 2
    num_perm: int = 256
    stored_bits: int = 8
    recall: float = 0.99
    docs: int | None = None
    bands: int | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        set_fields(self, threshold=threshold_value(self.threshold))
        set_fields(self, bits=whole_number("bits", self.bits),
                   stored_bits=whole_number("stored_bits", self.stored_bits),
                   num_perm=whole_number("num_perm", self.num_perm))
        in_range("bits", self.bits, 1, MAX_STORED_BITS)
        in_range("stored_bits", self.stored_bits, 1, MAX_STORED_BITS)
        in_range("num_perm", self.num_perm, 1, MAX_NUM_PERM)
        check_bits(self.bits, self.stored_bits)
        set_fields(self, recall=open_fraction("recall", self.recall, "0.99"))
        if self.docs is not None:
            set_fields(self, docs=at_least("docs", self.docs, 1))
        banding_values(self)
        check_banding(self.bands, self.rows, self.num_perm)
