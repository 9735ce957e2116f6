"""What ``find`` learns, whichever engine ran it: the result every output format is written from."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dedup_cli.candidates.banding import Banding
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.triples import ScoredTriples
from dedup_cli.groups.components import Groups
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import Verification


@dataclass
class FindResult:
    """Everything ``find`` learned, for printing in any format."""

    store: StoredSignatures
    bits: int
    threshold: float
    banding: Banding | None  # None with candidates="all"
    candidates: int
    pairs: ScoredPairs  # accepted pairs
    exact: np.ndarray  # float64[n_accepted], exact resemblance where verified, NaN elsewhere
    triples: ScoredTriples | None
    groups: Groups
    weakest: np.ndarray  # float64[n_groups]
    kept: np.ndarray  # int64[n_groups], the representative of each group
    oversized_buckets: int
    eligible: int
    verification: Verification | None
    aliases: int  # documents left out because they are another document's file under a second name
    seconds: float
    estimator: str
    reference: np.ndarray | None = None  # bool[n_docs] with ``against``: True for the reference store's documents
    against: str | None = None  # the reference store
    keep_field_problems: list[tuple[str, str]] = field(default_factory=list)  # (id, reason): no value to rank by
