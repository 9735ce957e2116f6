"""What a higher recall at R0 costs: the banding chosen for each recall, the pairs at R0 it misses, its candidates
and its band work, side by side.

``find --recall R`` chooses bands × rows so that a pair at R0 becomes a candidate with probability ≥ R (the S-curve
1 − (1 − E_B(R0)^rows)^bands, MMDS Sec. 3.4.2, E_B of Li & König 2010, eq. 4). A higher R moves the S-curve to the
left: fewer pairs just above R0 are missed, but more pairs below R0, the unrelated ones among them, become
candidates, and each band is one more key per document to compute and sort. ``plan`` and ``eval`` show the
user's recall beside the default one (or the default beside 0.999), so that what the option buys is in view.
"""

from __future__ import annotations

from dataclasses import dataclass

from dedup_cli.candidates.banding import Banding, PairSizes, resolve_banding
from dedup_cli.estimates.simultaneous import DEFAULT_RECALL

COMPARED_RECALL = 0.999
"""The recall shown beside the default when the default is the one asked for."""


def compared_recalls(recall: float) -> tuple[float, float]:
    """The default recall and ``recall``, ascending; 0.99 and 0.999 when ``recall`` is the default."""
    other = COMPARED_RECALL if recall == DEFAULT_RECALL else DEFAULT_RECALL
    low, high = sorted((recall, other))
    return low, high


@dataclass(frozen=True)
class RecallCost:
    """The banding one recall chooses, and what it promises and costs."""

    recall: float  # the recall asked for at R0
    banding: Banding
    recall_at_threshold: float  # Pr(candidate | R = R0), ≥ recall when some banding of k values reaches it
    candidates: float | None  # with a corpus size: N(N − 1)/2 · Pr(candidate | R = 0), the chance candidates
    band_work: float  # bands ÷ the first recall's bands: the band stage computes and sorts bands · N keys

    @property
    def missed_at_threshold(self) -> float:
        """1 − Pr(candidate | R = R0): the share of pairs at exactly R0 that no band catches."""
        return 1.0 - self.recall_at_threshold


def recall_costs(threshold: float, num_perm: int, band_bits: float, recalls: tuple[float, ...],
                 documents: int | None = None, sizes: PairSizes | None = None) -> tuple[RecallCost, ...]:
    """The banding ``find`` chooses for each of ``recalls`` at R0 = ``threshold`` (for ``documents`` when given,
    as :func:`dedup_cli.candidates.banding.resolve_banding` does), with its recall at R0, its expected chance
    candidates and its bands relative to the first recall's.

    Args:
        threshold: R0 in (0, 1].
        num_perm: k, the values band keys take (k/2 for rows of XOR bits).
        band_bits: B, the stored bits a band key uses.
        recalls: the recalls to compare, each in (0, 1).
        documents: N, the eligible documents, or None.
        sizes: with one permutation hashing, the pairs of short documents the recall is for (their S-curve).
    """
    choices = [resolve_banding(threshold, num_perm, band_bits, recall, documents=documents, sizes=sizes)
               for recall in recalls]
    first = choices[0].banding.bands
    pairs = None if documents is None else documents * (documents - 1) / 2.0
    return tuple(RecallCost(recall=recall, banding=choice.banding, recall_at_threshold=choice.recall,
                            candidates=None if pairs is None else pairs * choice.banding.recall_at(0.0),
                            band_work=choice.banding.bands / first)
                 for recall, choice in zip(recalls, choices, strict=True))
