"""How much per-pair recall the banding needs so that triples reach a recall (pure Python, no numpy).

A triple with R ≥ R0 becomes a candidate only if each of its three pairs (each with R_ij ≥ R ≥ R0) is an LSH
candidate and survives the pair margin (:func:`dedup_cli.candidates.candidate_triples.pair_margin`, z standard
errors below R0). By the union bound 1 − triple_recall ≤ 3 · (1 − pair_recall + Φ(−z)), so
pair_recall = 1 − ((1 − triple_recall)/3 − Φ(−z)); 0.99 and z = 3 give 0.998017.

The bound has slack: unless the three sets are identical, at most two pairs can sit at R0 (R_12 = R forces
S_3 ⊆ S_1 ∪ S_2 and S_1 ∩ S_2 ⊆ S_3; all three together force S_1 = S_2 = S_3). That slack absorbs the
margin's exact binomial tail at k = 256, which is 0.0014–0.0022 rather than Φ(−3) = 0.00135 (b = 2–4,
R0 = 0.5–0.8; the count's left tail is heavier when E_b > 1/2). With two pairs at R0 the measured candidate
recall is 0.996–0.998.

Kept free of numpy so that :mod:`dedup_cli.options` can check a ``recall`` option with it cheaply.
"""

from __future__ import annotations

import math
from statistics import NormalDist

TRIPLE_MARGIN_Z = 3.0
"""The pair margin in standard errors: 3 keeps about 99.87 % of pairs at R0."""


def triple_recall_problem(triple_recall: float, z: float = TRIPLE_MARGIN_Z) -> str | None:
    """Why ``triple_recall`` cannot be reached with a margin of ``z`` standard errors, or None when it can.

    The reason names the option as ``{recall}`` (an :class:`dedup_cli.errors.OptionError` template).
    """
    if not 0.0 < triple_recall < 1.0:
        return f"triple {{recall}} {triple_recall} must lie strictly between 0 and 1, e.g. 0.99"
    margin_loss = NormalDist().cdf(-z)
    if (1.0 - triple_recall) / 3.0 - margin_loss > 0.0:
        return None
    reachable = math.floor((1.0 - 3.0 * margin_loss) * 1e4) / 1e4  # rounded down: the advice must work
    return (f"{{recall}} {triple_recall} is out of reach for triples: the pair margin of {z:g} standard errors "
            f"alone may lose {3 * margin_loss:.4f} of them; use {{recall}} {reachable:.4f} or lower")


def pair_recall_for_triples(triple_recall: float = 0.99, z: float = TRIPLE_MARGIN_Z) -> float:
    """The per-pair LSH recall at R0 to request so that ``triple_recall`` of qualifying triples are candidates.

    Args:
        triple_recall: wanted fraction of triples with R ≥ R0 among the candidates, in (0, 1).
        z: the margin's normal quantile, as given to ``pair_margin``.

    Returns:
        The recall to pass to :func:`dedup_cli.candidates.banding.choose_banding`.

    Raises:
        ValueError: when the margin alone loses more than the budget (z too small for the recall); the
            ``recall`` option is checked with :func:`triple_recall_problem` before anything runs.
    """
    problem = triple_recall_problem(triple_recall, z)
    if problem is not None:
        raise ValueError(problem.replace("{recall}", "recall"))
    return 1.0 - ((1.0 - triple_recall) / 3.0 - NormalDist().cdf(-z))
