"""How ``eval`` samples pairs, and which ``find`` it judges."""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.errors import OptionError
from dedup_cli.options.checks import in_range, set_fields
from dedup_cli.options.finding import FindOptions
from dedup_cli.options.vocabulary import MAX_SEED

MIN_SAMPLE, MAX_SAMPLE = 50, 10_000_000  # eval --sample: ≥ 2 pairs in each of up to 11 strata


@dataclass(frozen=True)
class EvalOptions:
    """How ``eval`` samples pairs and which ``find`` it judges.

    Attributes:
        find: the ``find`` to judge: its threshold, b, banding (``bands``, ``rows``, ``recall``) and ``max_bucket``;
            pairs of one store, with LSH candidates (``eval`` reports both ``verify`` modes; groups do not enter).
        sample: pairs to draw and re-read, allocated across the strata (docs/evaluation.md).
        seed: the sample's seed.
        truth: a file of pairs with their exact resemblance: precision and recall are then counted against it.
    """

    find: FindOptions = FindOptions()
    sample: int = 2000
    seed: int = 1
    truth: str | None = None

    def __post_init__(self) -> None:
        for name, judged in (("candidates", "lsh"), ("ways", 2), ("new_since", None), ("against", None)):
            if getattr(self.find, name) != judged:
                raise OptionError(name, getattr(self.find, name), "eval judges find's pairs from LSH candidates "
                                  f"over the whole store; leave {{{name}}} out")
        set_fields(self, sample=in_range("sample", self.sample, MIN_SAMPLE, MAX_SAMPLE),
                   seed=in_range("seed", self.seed, 0, MAX_SEED, "2^63 − 1"))

    def check_store(self, stored_bits: float, num_perm: int, store: str) -> None:
        """What depends on the store (its manifest alone): b ≤ stored bits, the banding fits in k."""
        self.find.check_store(stored_bits, num_perm, store)
