"""What ``find`` and ``eval`` learn, whichever engine ran them: the results every output format is written from.

A :class:`FindResult` speaks ids: :meth:`~FindResult.groups`, :meth:`~FindResult.pairs`, :meth:`~FindResult.triples`
and :meth:`~FindResult.members` yield :class:`Group`, :class:`Pair`, :class:`Triple` and :class:`Member`, built
from the same records every output format is written from (:func:`find_records`), so they are the same whether
the result was gathered or streamed from a cluster. Field names are stable; scripts may rely on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:  # named in annotations only: find must not import eval's modules (truth, evaluation)
    from dedup_cli.candidates.banding import Banding, BandingChoice
    from dedup_cli.estimates.pairs import ScoredPairs
    from dedup_cli.estimates.triple_scores import ScoredTriples
    from dedup_cli.evaluation.accuracy import EstimatorAccuracy, StorageTradeoff
    from dedup_cli.evaluation.design import Stratum
    from dedup_cli.evaluation.recall_curves import RecallCurve
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
class MemberDetails:
    """What ``filter`` needs of each grouped document beyond its group, aligned with ``Groups.members``: its stored
    content hash, and its similarity to its group's representative (the exact resemblance where ``find`` verified
    that accepted pair, else the b-bit estimate of the pair)."""

    content_hashes: np.ndarray  # uint64[m]
    similarity: np.ndarray  # float64[m]
    verified: np.ndarray  # bool[m]: the similarity is the exact resemblance


@dataclass
class FindResult:
    """Everything ``find`` learned, for printing in any format."""

    store: StoredSignatures
    bits: float  # b, or 0.5 for b = 1/2 (XOR bits)
    threshold: float
    banding: Banding | None  # None with candidates="all"
    candidates: int
    accepted: ScoredPairs  # accepted pairs, as rows of ``store`` (pairs() speaks ids)
    exact: np.ndarray  # float64[n_accepted], exact resemblance where verified, NaN elsewhere
    accepted_triples: ScoredTriples | None
    grouping: Groups  # the groups as rows of ``store`` (groups() speaks ids)
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
    member_details: MemberDetails | None = None  # from an engine whose ``store`` holds no signatures (None: from it)
    stdin_documents: int = 0  # live documents read from stdin: never re-read, so never verified exactly
    gone: list[str] = field(default_factory=list)  # ids of grouped documents gone or changed since signing
    is_gone: np.ndarray | None = None  # bool[n_docs]: True for those documents (None: none is gone)

    @property
    def pair_count(self) -> int:
        """Accepted pairs reported."""
        return self.accepted.first.size if self.streamed is None else self.streamed.pairs

    @property
    def group_count(self) -> int:
        """Groups reported."""
        return len(self.grouping) if self.streamed is None else self.streamed.groups

    @property
    def drop_count(self) -> int:
        """Documents the groups would drop: every member but its group's representative, a reference store's
        documents excepted (as ``find --output members`` marks them); of a streamed result, its chunks' (read
        again, groups only)."""
        if self.streamed is not None:
            return sum(chunk.drop_count for chunk in self.streamed.chunks("groups"))
        groups = self.grouping
        members = groups.members.astype(np.int64)
        dropped = members != np.repeat(self.kept.astype(np.int64), np.diff(groups.offsets))
        if self.reference is not None:
            dropped &= ~self.reference[members]
        return int(np.count_nonzero(dropped))

    @property
    def triple_count(self) -> int | None:
        """Accepted triples reported; None unless triples were sought (``ways=3``)."""
        if self.streamed is not None:
            return self.streamed.triples
        return None if self.accepted_triples is None else int(self.accepted_triples.docs.shape[0])

    @property
    def document_count(self) -> int:
        """The store's live documents, whether ``store`` holds them all or only those the result names."""
        return len(self.store) if self.documents is None else self.documents

    # --- what it found, in ids ------------------------------------------------------------------------------------

    def groups(self) -> Iterator[Group]:
        """Each group: its number (from 1), member ids in id order, the kept member, the weakest link."""
        for record in find_records("groups", self):
            yield Group(record["group"], tuple(record["members"]), record["representative"], record["weakest"],
                        tuple(record["stores"]) if "stores" in record else None)

    def pairs(self) -> Iterator[Pair]:
        """Each accepted pair, most similar first: ids, R̂ with its standard error and interval, the exact
        resemblance where it was checked (else None), the b-bit match count."""
        for record in find_records("pairs", self):
            yield Pair(record["id_a"], record["id_b"], record["estimate"], record["stderr"], record["ci_low"],
                       record["ci_high"], record["exact"], record["matches"], record.get("store_a"),
                       record.get("store_b"))

    def triples(self) -> Iterator[Triple]:
        """Each accepted triple (``ways=3``), most similar first: ids, the 3-way R̂, its standard error and
        interval, the positions where all three agree, the three pairwise estimates, and the exact 3-way
        resemblance where it was checked (else None)."""
        for record in find_records("triples", self):
            yield Triple(record["id_a"], record["id_b"], record["id_c"], record["estimate"], record["stderr"],
                         record["ci_low"], record["ci_high"], record["matches"], record["estimate_ab"],
                         record["estimate_ac"], record["estimate_bc"], record["exact"])

    def members(self) -> Iterator[Member]:
        """Each grouped document: its group, ``keep``, ``drop`` or ``gone`` (a reference store's are always kept,
        a document gone or changed since it was signed is ``gone``), the group's size and kept member."""
        for record in find_records("members", self):
            yield Member(record["id"], record["group"], record["action"], record["group_size"],
                         record["representative"], record.get("store"))

    def to_arrow(self, kind: str = "groups") -> Any:
        """The records of ``kind`` (groups, pairs, triples, members) as a ``pyarrow.Table``, with the columns of
        ``find --format parquet``."""
        import pyarrow as pa

        if kind not in RECORD_FIELDS:
            raise ValueError(f"kind {kind!r}: choose one of {', '.join(RECORD_FIELDS)}")
        fields = fields_of(kind, self, delimited=False)
        rows = list(find_records(kind, self))
        if not rows:
            return pa.table({name: pa.array([], pa.string()) for name in fields})
        return pa.Table.from_pylist(rows).select(list(fields))


class Group(NamedTuple):
    """A group of near-duplicates: every member id (id order), the one to keep, and its weakest accepted link
    (the lowest similarity among the accepted pairs that join it; exact where checked)."""

    number: int
    ids: tuple[str, ...]
    representative: str
    weakest: float | None
    stores: tuple[str, ...] | None = None  # with ``against``: "new" or "reference" per member


class Pair(NamedTuple):
    """An accepted pair: R̂ (Li & König 2010, eq. 9), its standard error and 95 % interval, and the exact
    resemblance where it was checked."""

    id_a: str
    id_b: str
    estimate: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    exact: float | None
    matches: int
    store_a: str | None = None
    store_b: str | None = None


class Triple(NamedTuple):
    """An accepted triple: the 3-way R̂ (Li, König & Gui 2010, eq. 8), the pairwise estimates, and the exact 3-way
    resemblance where it was checked."""

    id_a: str
    id_b: str
    id_c: str
    estimate: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    matches: int
    estimate_ab: float | None
    estimate_ac: float | None
    estimate_bc: float | None
    exact: float | None = None


class Member(NamedTuple):
    """A grouped document and what becomes of it."""

    id: str
    group: int
    action: str  # "keep", "drop" or "gone" (gone or changed since it was signed: neither kept nor to delete)
    group_size: int
    representative: str
    store: str | None = None


# --- the records find reports (every output format is written from these; the objects above are built from them)

FIELDS = {
    "pairs": ("id_a", "id_b", "estimate", "stderr", "ci_low", "ci_high", "matches", "exact"),
    "triples": ("id_a", "id_b", "id_c", "estimate", "stderr", "ci_low", "ci_high", "matches",
                "estimate_ab", "estimate_ac", "estimate_bc", "exact"),
    "members": ("id", "group", "action", "group_size", "representative"),
    # Groups in TSV/CSV: one row per member (JSON Lines and Parquet keep the member list in one record).
    "groups": ("group", "size", "id"),
}
# Columns of JSON Lines records and Parquet output, in order.
RECORD_FIELDS = {**FIELDS, "groups": ("group", "size", "weakest", "representative", "members")}
# With ``against``, which store each id is from ("new" or "reference"), after the usual fields.
STORE_FIELDS = {"pairs": ("store_a", "store_b"), "triples": ("store_a", "store_b", "store_c"),
                "members": ("store", "representative_store"), "groups": ("store",)}
RECORD_STORE_FIELDS = {**STORE_FIELDS, "groups": ("representative_store", "stores")}
STORE_NAMES = ("new", "reference")


def fields_of(kind: str, result: FindResult, delimited: bool) -> tuple[str, ...]:
    """The fields of ``kind`` records, in order: TSV/CSV columns (``delimited``) or JSON Lines and Parquet ones."""
    base, extra = (FIELDS, STORE_FIELDS) if delimited else (RECORD_FIELDS, RECORD_STORE_FIELDS)
    return base[kind] + (extra[kind] if result.reference is not None else ())


def _stores(result: FindResult, rows: Any) -> list[str]:
    """The store each document of ``rows`` is from (for records with ``against``)."""
    assert result.reference is not None
    return [STORE_NAMES[int(origin)] for origin in result.reference[rows]]


def round_value(value: float) -> float | None:
    """A number as records hold it: 6 digits after the point, None for NaN (a missing value)."""
    return None if math.isnan(value) else round(float(value), 6)


def pair_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted pair, most similar first, ties in id order."""
    pairs, ids = result.accepted, result.store.ids
    for p in np.lexsort((pairs.second, pairs.first, -pairs.estimate)):
        record = {
            "id_a": ids[pairs.first[p]],
            "id_b": ids[pairs.second[p]],
            "estimate": round_value(pairs.estimate[p]),
            "stderr": round_value(pairs.stderr[p]),
            "ci_low": round_value(pairs.ci_low[p]),
            "ci_high": round_value(pairs.ci_high[p]),
            "matches": int(pairs.matches[p]),
            "exact": round_value(result.exact[p]),
        }
        if result.reference is not None:
            record["store_a"], record["store_b"] = _stores(result, [pairs.first[p], pairs.second[p]])
        yield record


def triple_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per accepted triple (already ordered by descending estimate)."""
    found, ids = result.accepted_triples, result.store.ids
    if found is None:
        return
    for t in range(found.docs.shape[0]):
        a, b, c = (ids[d] for d in found.docs[t])
        record = {
            "id_a": a, "id_b": b, "id_c": c,
            "estimate": round_value(found.estimate[t]),
            "stderr": round_value(found.stderr[t]),
            "ci_low": round_value(found.ci_low[t]),
            "ci_high": round_value(found.ci_high[t]),
            "matches": int(found.matches[t]),
            "estimate_ab": round_value(found.pairwise[t, 0]),
            "estimate_ac": round_value(found.pairwise[t, 1]),
            "estimate_bc": round_value(found.pairwise[t, 2]),
            "exact": round_value(found.exact[t]),
        }
        if result.reference is not None:
            record["store_a"], record["store_b"], record["store_c"] = _stores(result, found.docs[t])
        yield record


def group_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per group: id (from 1), size, weakest internal estimate, representative, members."""
    groups, ids = result.grouping, result.store.ids
    for index in range(len(groups)):
        members = groups.group(index)
        record = {
            "group": index + result.first_group,
            "size": int(members.size),
            "weakest": round_value(result.weakest[index]),
            "representative": ids[result.kept[index]],
            "members": [ids[m] for m in members],
        }
        if result.reference is not None:
            record["representative_store"] = _stores(result, [result.kept[index]])[0]
            record["stores"] = _stores(result, members)
        yield record


def member_action(member: int, kept: int, reference: np.ndarray | None, gone: np.ndarray | None) -> str:
    """``gone`` for a document gone or changed since it was signed (never kept, never to delete: a group keeps a
    live member before it), else ``keep`` for the representative and a reference store's documents, else
    ``drop``."""
    if gone is not None and gone[member]:
        return "gone"
    return "keep" if member == kept or (reference is not None and reference[member]) else "drop"


def member_records(result: FindResult) -> Iterator[dict[str, Any]]:
    """One record per grouped document: its group and whether it is kept, may be dropped or is gone
    (:func:`member_action`)."""
    groups, ids, reference = result.grouping, result.store.ids, result.reference
    for index in range(len(groups)):
        members = groups.group(index)
        kept = int(result.kept[index])
        for member in members:
            record = {
                "id": ids[member],
                "group": index + result.first_group,
                "action": member_action(member, kept, reference, result.is_gone),
                "group_size": int(members.size),
                "representative": ids[kept],
            }
            if reference is not None:
                record["store"], record["representative_store"] = _stores(result, [member, kept])
            yield record


RECORDS = {"pairs": pair_records, "triples": triple_records, "groups": group_records, "members": member_records}


def find_records(kind: str, result: FindResult) -> Iterator[dict[str, Any]]:
    """The records of ``kind``, from the result, or one chunk after another when its output is streamed."""
    if result.streamed is None:
        yield from RECORDS[kind](result)
        return
    for chunk in result.streamed.chunks(kind):
        yield from RECORDS[kind](chunk)


@dataclass
class EvalSample:
    """The sampled pairs that were measured (both documents re-read), with their weights and estimates."""

    first: np.ndarray  # int64[n], first < second
    second: np.ndarray  # int64[n]
    stratum: np.ndarray  # int64[n], index into EvalResult.strata
    weight: np.ndarray  # float64[n], N_h / n_h: how many pairs of the store each stands for
    candidate: np.ndarray  # bool[n], a candidate of the banding
    exact: np.ndarray  # float64[n], the exact resemblance
    scores: dict[float, ScoredPairs]  # for each evaluated b: match counts, R̂_b and its interval


@dataclass
class EvalResult:
    """What ``eval`` measured, whichever engine ran it (docs/evaluation.md)."""

    store: str
    documents: int
    eligible: int  # documents with at least one shingle
    num_perm: int
    stored_bits: float  # B, or 0.5 for a store of XOR bits
    threshold: float
    bits: float  # b of the find being judged (0.5 for b = 1/2)
    evaluated_bits: list[float]
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
    unverifiable: list[str]  # documents gone or changed since signing (decided by their estimate)
    pairs: EvalSample
    estimators: list[EstimatorAccuracy]
    s_curve: list[CurvePoint]
    accuracy_source: str  # "sample" or "truth"
    at_threshold: list[Retrieval]
    sweep: list[Retrieval]
    storage: StorageTradeoff
    truth: Truth | None = None
    seconds: float = 0.0
    # measured recall against R above R0 for the default recall's banding and the chosen one (or 0.99 and 0.999);
    # empty when the bands or rows were given
    recall_curves: list[RecallCurve] = field(default_factory=list)
