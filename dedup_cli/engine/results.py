"""What ``find`` and ``eval`` learn, whichever engine ran them: the results every output format is written from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from dedup_cli.candidates.banding import Banding, BandingChoice
from dedup_cli.estimates.pairs import ScoredPairs
from dedup_cli.estimates.triples import ScoredTriples
from dedup_cli.evaluation.accuracy import EstimatorAccuracy, StorageTradeoff
from dedup_cli.evaluation.design import Stratum
from dedup_cli.evaluation.retrieval import CurvePoint, Retrieval
from dedup_cli.groups.components import Groups
from dedup_cli.inputs.truth import Truth
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.verification import Verification


class StreamedOutput(Protocol):
    """A result too large to hold: its totals, and the results to write each kind of record from, in order."""

    pairs: int
    triples: int | None
    groups: int

    def chunks(self, kind: str) -> Iterator[FindResult]: ...


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
    banding_choice: BandingChoice | None = None  # what the banding promises for this corpus (None: all pairs)
    documents: int | None = None  # live documents of the store (None: all of them are in ``store``)
    run_span: tuple[int, int] | None = None  # the first and last run of the store's documents (None: from ``store``)
    streamed: StreamedOutput | None = None  # when set, the records are written from its chunks, not from this
    first_group: int = 1  # the number of the first group here (a chunk of a streamed output starts later)
    profile: dict[str, float] = field(default_factory=dict)  # an engine's own measures: seconds, rows, bytes moved
    reference_documents: int | None = None  # with ``against``: the reference store's live documents

    @property
    def pair_count(self) -> int:
        return self.pairs.first.size if self.streamed is None else self.streamed.pairs

    @property
    def group_count(self) -> int:
        return len(self.groups) if self.streamed is None else self.streamed.groups

    @property
    def triple_count(self) -> int | None:
        if self.streamed is not None:
            return self.streamed.triples
        return None if self.triples is None else int(self.triples.docs.shape[0])

    @property
    def document_count(self) -> int:
        """The store's live documents, whether ``store`` holds them all or only those the result names."""
        return len(self.store) if self.documents is None else self.documents


@dataclass
class EvalSample:
    """The sampled pairs that were measured (both documents re-read), with their weights and estimates."""

    first: np.ndarray  # int64[n], first < second
    second: np.ndarray  # int64[n]
    stratum: np.ndarray  # int64[n], index into EvalResult.strata
    weight: np.ndarray  # float64[n], N_h / n_h: how many pairs of the store each stands for
    candidate: np.ndarray  # bool[n], a candidate of the banding
    exact: np.ndarray  # float64[n], the exact resemblance
    scores: dict[int, ScoredPairs]  # for each evaluated b: match counts, R̂_b and its interval


@dataclass
class EvalResult:
    """What ``eval`` measured, whichever engine ran it (docs/evaluation.md)."""

    store: str
    documents: int
    eligible: int  # documents with at least one shingle
    num_perm: int
    stored_bits: int
    threshold: float
    bits: int  # b of the find being judged
    evaluated_bits: list[int]
    banding: Banding
    frame: Banding | None  # the looser banding whose candidates are banded too (docs/evaluation.md)
    reach: float  # from this resemblance on, the banded strata hold ≥ 99 % of the pairs (predicted)
    candidates: int
    banded: int  # pairs in the R̂ strata: find's candidates and the looser banding's
    oversized_buckets: int
    population: int  # eligible pairs, C(eligible, 2)
    sample: int  # pairs asked for
    seed: int
    strata: list[Stratum]
    measured: np.ndarray  # int64[H], pairs measured per stratum
    unverifiable: list[str]  # documents that could not be re-read or changed since signed
    pairs: EvalSample
    estimators: list[EstimatorAccuracy]
    s_curve: list[CurvePoint]
    accuracy_source: str  # "sample" or "truth"
    at_threshold: list[Retrieval]
    sweep: list[Retrieval]
    storage: StorageTradeoff
    truth: Truth | None = None
    seconds: float = 0.0
