"""What ``review`` says of each group it shows, from a ``find``'s result: its members, which one it keeps and why,
and how alike each is to the kept one, as far as ``find`` knows.

Only the shown groups are looked at member by member (:func:`dedup_cli.groups.selection.shown_groups` chooses
them); over the whole result the work is a few numpy passes (sizes, the documents to drop and their bytes). A
result streamed from a cluster is read chunk by chunk: its groups twice (the sizes, then the shown groups) and its
pairs once or twice (those that touch the shown members). The shown members' stored rows (location, content hash,
counts, run, signature) come from the result when it holds them (the local engine's), else from the store, the
rows of those documents alone.

A member's similarity to its representative is the accepted pair's (R̂, its 95 % interval, the exact value when
``find`` checked it) when that pair was accepted; else the pair scored now from the signatures, as ``find`` scores
candidates, which says what the estimate is but that ``find`` never decided it; and then the strongest accepted
pair that holds the member in its group is named too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from dedup_cli.engine.stages.filter import pair_scores
from dedup_cli.engine.stages.results import STORE_NAMES, FindResult, member_action, round_value
from dedup_cli.groups.selection import shown_groups
from dedup_cli.options.reviewing import ReviewOptions
from dedup_cli.store.document_sizes import document_sizes
from dedup_cli.store.snapshot import StoredSignatures
from dedup_cli.store.store import Store, open_store

LISTED_MEMBERS = 1000
"""Members of a shown group listed by id beyond those shown with their text; a larger group says how many more."""


@dataclass
class Similarity:
    """How alike a member is to its group's representative, and how ``find`` knows it."""

    kind: str  # "self" (the representative), "accepted", "scored" (not accepted: scored now), "unknown"
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    exact: float | None = None  # the exact resemblance, where find checked the pair
    link: tuple[str, float] | None = None  # the strongest accepted pair holding it in the group: (other id, R)

    def sort_key(self) -> float:
        """The member's similarity for ordering, lowest first (unknown first of all): exact where known."""
        if self.kind == "self":
            return 2.0
        value = self.exact if self.exact is not None else self.estimate
        return -1.0 if value is None else value


@dataclass
class MemberView:
    """One member of a shown group."""

    id: str
    action: str  # keep, drop or gone (as find --output members says)
    store: str | None  # with --against: "new" or "reference"
    similarity: Similarity
    shingles: int = 0
    run: int | None = None
    modified_ns: int | None = None
    location: str = ""
    content_hash: int | None = None
    size: int = -1  # bytes when signed; -1 when the store does not say


@dataclass
class ShownGroup:
    """A group as the page shows it."""

    number: int
    size: int
    weakest: float | None
    representative: str
    sampled: bool  # drawn at random; else one of the largest
    keep_reason: str = ""
    members: list[MemberView] = field(default_factory=list)  # with their texts: the kept one, least similar next
    listed: list[MemberView] = field(default_factory=list)  # the others, by id, up to LISTED_MEMBERS
    unlisted: int = 0  # members neither shown nor listed
    dropped: int = 0
    dropped_bytes: int = 0
    everyone: list[MemberView] = field(default_factory=list, repr=False)  # every member, in id order


@dataclass
class ReviewedGroups:
    """The shown groups and what the page says of all of them."""

    groups: list[ShownGroup]
    group_count: int
    largest: int  # of the shown groups, those shown for their size
    dropped: int  # documents the groups would drop, over the whole result
    dropped_bytes: int  # their bytes when signed (those the store knows)
    unsized: int = 0  # documents to drop whose size the store does not hold
    members_shown: int = 0


def _chunks(result: FindResult, kind: str = "groups") -> Iterator[FindResult]:
    """The result itself, or each chunk of a streamed result's ``kind`` in turn."""
    if result.streamed is None:
        yield result
    else:
        yield from result.streamed.chunks(kind)


def _drop_mask(chunk: FindResult) -> np.ndarray:
    """bool[grouped members]: the members the groups drop (``member_action`` is ``drop``)."""
    groups = chunk.grouping
    members = groups.members.astype(np.int64)
    dropped = members != np.repeat(chunk.kept.astype(np.int64), np.diff(groups.offsets))
    if chunk.reference is not None:
        dropped &= ~chunk.reference[members]
    if chunk.is_gone is not None:
        dropped &= ~chunk.is_gone[members]
    return dropped


@dataclass
class _Census:
    """What the first pass learns of every group: its size, and the documents to drop with their group."""

    sizes: list[np.ndarray] = field(default_factory=list)
    dropped_ids: list[str] = field(default_factory=list)
    dropped_groups: list[np.ndarray] = field(default_factory=list)  # each dropped document's group position

    def add(self, chunk: FindResult, start: int) -> None:
        sizes = np.diff(chunk.grouping.offsets)
        self.sizes.append(sizes)
        drop = _drop_mask(chunk)
        self.dropped_ids += [chunk.store.ids[row] for row in chunk.grouping.members[drop].tolist()]
        self.dropped_groups.append(np.repeat(np.arange(start, start + sizes.size, dtype=np.int64), sizes)[drop])


def review_groups(result: FindResult, store: Store, options: ReviewOptions) -> ReviewedGroups:
    """The groups ``options`` asks to show (see the module docstring), with the totals over all groups."""
    census = _Census()
    start = 0
    for chunk in _chunks(result):
        census.add(chunk, start)
        start += len(chunk.grouping)
    sizes = np.concatenate(census.sizes) if census.sizes else np.empty(0, np.int64)
    chosen, sampled = shown_groups(sizes, options.groups, options.sample, options.seed)
    groups = _shown(result, dict(zip(chosen.tolist(), sampled.tolist(), strict=True)), chosen)
    if groups:
        _describe(result, store, groups, options)
    # One look-up of the store's sizes for every document to drop and every member shown.
    members = [member for group in groups for member in (*group.members, *group.listed)]
    found = document_sizes(store, census.dropped_ids + [member.id for member in members])
    dropped_sizes = found[: len(census.dropped_ids)]
    for member, size in zip(members, found[len(census.dropped_ids):].tolist(), strict=True):
        member.size = size
    dropped_groups = np.concatenate(census.dropped_groups) if census.dropped_groups else np.empty(0, np.int64)
    group_bytes = np.bincount(dropped_groups, weights=np.maximum(dropped_sizes, 0), minlength=sizes.size)
    group_drops = np.bincount(dropped_groups, minlength=sizes.size)
    for position, group in zip(chosen.tolist(), groups, strict=True):
        group.dropped, group.dropped_bytes = int(group_drops[position]), int(group_bytes[position])
    return ReviewedGroups(groups, int(sizes.size), int((~sampled).sum()), len(census.dropped_ids),
                          int(dropped_sizes[dropped_sizes >= 0].sum()), int((dropped_sizes < 0).sum()),
                          sum(len(group.members) for group in groups))


def _shown(result: FindResult, wanted: dict[int, bool], order: np.ndarray) -> list[ShownGroup]:
    """The shown groups, in the order shown, with every member's id and action (the second pass)."""
    shown: dict[int, ShownGroup] = {}
    start = 0
    for chunk in _chunks(result) if wanted else ():
        count = len(chunk.grouping)
        for position in [position for position in wanted if start <= position < start + count]:
            index = position - start
            rows = chunk.grouping.group(index).astype(np.int64)
            kept = int(chunk.kept[index])
            group = ShownGroup(index + chunk.first_group, int(rows.size), round_value(chunk.weakest[index]),
                               chunk.store.ids[kept], wanted[position])
            group.everyone = [
                MemberView(chunk.store.ids[row], member_action(row, kept, chunk.reference, chunk.is_gone),
                           None if chunk.reference is None else STORE_NAMES[int(chunk.reference[row])],
                           Similarity("self" if row == kept else "unknown")) for row in rows.tolist()]
            shown[position] = group
        start += count
    return [shown[position] for position in order.tolist()]


def _documents(result: FindResult, store: Store, ids: list[str], against: str | None) -> StoredSignatures:
    """The stored rows of the documents ``ids``, in that order: from the result when it holds them whole (the
    local engine's), else read from the store (and the reference store) by id."""
    held = result.store
    whole = (result.streamed is None and held.packed.shape[0] == len(held) and held.packed.size > 0
             and held.content_hashes is not None and all(held.paths))
    if whole:
        row = {identifier: index for index, identifier in enumerate(held.ids)}
        return _take(held, np.array([row[identifier] for identifier in ids], np.int64))
    found, missing = store.read_documents(ids)
    if missing and against is not None:
        others, _ = open_store(against).read_documents(missing)
        found = _join(found, others)
    row = {identifier: index for index, identifier in enumerate(found.ids)}
    return _take(found, np.array([row.get(identifier, -1) for identifier in ids], np.int64))


def _take(documents: StoredSignatures, rows: np.ndarray) -> StoredSignatures:
    """``documents``' rows ``rows`` (-1: a document none holds, with no location, no count and no signature)."""
    present = rows >= 0
    safe = np.where(present, rows, 0)

    def column(values: np.ndarray | None, empty: int = 0) -> np.ndarray | None:
        return None if values is None else np.where(present, values[safe], empty)

    packed = documents.packed[safe] if documents.packed.size else documents.packed
    return StoredSignatures(
        params=documents.params,
        ids=[documents.ids[row] if here else "" for row, here in zip(safe.tolist(), present.tolist(), strict=True)],
        paths=[documents.paths[row] if here else "" for row, here in zip(safe.tolist(), present.tolist(),
                                                                         strict=True)],
        shingle_counts=np.where(present, documents.shingle_counts[safe], 0), packed=packed,
        content_hashes=column(documents.content_hashes), runs=column(documents.runs),
        mtimes_ns=column(documents.mtimes_ns))


def _join(one: StoredSignatures, other: StoredSignatures) -> StoredSignatures:
    """The rows of two stores signed alike, one after the other."""

    def both(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
        return None if first is None or second is None else np.concatenate([first, second])

    packed = both(one.packed, other.packed)
    assert packed is not None
    return StoredSignatures(one.params, one.ids + other.ids, one.paths + other.paths,
                            np.concatenate([one.shingle_counts, other.shingle_counts]), packed,
                            both(one.content_hashes, other.content_hashes), both(one.runs, other.runs),
                            both(one.mtimes_ns, other.mtimes_ns))


Accepted = dict[tuple[str, str], tuple[float | None, float | None, float | None, float | None]]
"""Accepted pairs by their two ids (in id order): R̂, its interval, and the exact value where checked."""


def accepted_pairs(result: FindResult, wanted: Callable[[str, str], bool], among: set[str]) -> Accepted:
    """The accepted pairs both of whose documents are in ``among`` and that ``wanted`` keeps, by ids; of a
    streamed result, read from its chunks of pairs."""
    found: Accepted = {}
    for chunk in _chunks(result, "pairs"):
        pairs, ids = chunk.accepted, chunk.store.ids
        inside = np.array([identifier in among for identifier in ids], bool) if ids else np.empty(0, bool)
        if not inside.size:
            continue
        for p in np.flatnonzero(inside[pairs.first] & inside[pairs.second]).tolist():
            a, b = sorted((ids[pairs.first[p]], ids[pairs.second[p]]))
            if wanted(a, b):
                found[(a, b)] = (round_value(pairs.estimate[p]), round_value(pairs.ci_low[p]),
                                 round_value(pairs.ci_high[p]), round_value(chunk.exact[p]))
    return found


def _describe(result: FindResult, store: Store, groups: list[ShownGroup], options: ReviewOptions) -> None:
    """Each shown member's stored facts and similarity to its representative; which members are shown with their
    text (the representative, then the least similar), which are listed; and why the representative is kept."""
    everyone = [member for group in groups for member in group.everyone]
    documents = _documents(result, store, [member.id for member in everyone], options.find.against)
    row = {identifier: index for index, identifier in enumerate(documents.ids) if identifier}
    kept_of = {member.id: group.representative for group in groups for member in group.everyone}
    with_kept = accepted_pairs(result, lambda a, b: kept_of[a] == b or kept_of[b] == a, set(kept_of))
    _similarities(documents, row, groups, with_kept, result.bits)
    for group in groups:
        order = sorted(group.everyone, key=lambda member: (member.similarity.sort_key() if member.id !=
                                                           group.representative else -2.0, member.id))
        group.members = order[: options.members]
        group.listed = order[options.members : options.members + LISTED_MEMBERS]
        group.unlisted = group.size - len(group.members) - len(group.listed)
    unlinked = {member.id: member for group in groups for member in group.members
                if member.similarity.kind not in ("self", "accepted")}
    if unlinked:  # the strongest accepted pair that holds each of them in its group
        links = accepted_pairs(result, lambda a, b: (a in unlinked or b in unlinked) and kept_of[a] == kept_of[b],
                               set(kept_of))
        for (a, b), (estimate, _, _, exact) in sorted(links.items()):
            value = exact if exact is not None else estimate
            for one, other in ((a, b), (b, a)):
                member = unlinked.get(one)
                if member is not None and value is not None and (member.similarity.link is None
                                                                 or value > member.similarity.link[1]):
                    member.similarity.link = (other, value)
    for group in groups:
        for member in (*group.members, *group.listed):
            at = row.get(member.id)
            if at is not None:
                member.shingles = int(documents.shingle_counts[at])
                member.run = None if documents.runs is None else int(documents.runs[at])
                member.modified_ns = None if documents.mtimes_ns is None else int(documents.mtimes_ns[at])
                member.location = documents.paths[at]
                member.content_hash = None if documents.content_hashes is None else int(documents.content_hashes[at])
        group.keep_reason = keep_reason(group, options)


def _similarities(documents: StoredSignatures, row: dict[str, int], groups: list[ShownGroup], accepted: Accepted,
                  bits: float) -> None:
    """Each member's similarity to its representative: the accepted pair's, else scored from the signatures."""
    scoring: list[tuple[MemberView, int, int]] = []
    for group in groups:
        for member in group.everyone:
            if member.id == group.representative:
                continue
            pair = accepted.get(tuple(sorted((member.id, group.representative))))  # type: ignore[arg-type]
            if pair is not None:
                member.similarity = Similarity("accepted", *pair)
            elif member.id in row and group.representative in row and documents.packed.size:
                scoring.append((member, row[member.id], row[group.representative]))
    if scoring:
        scored = pair_scores(documents, np.array([one for _, one, _ in scoring], np.int64),
                             np.array([other for _, _, other in scoring], np.int64), bits)
        for index, (member, _, _) in enumerate(scoring):
            member.similarity = Similarity("scored", round_value(scored.estimate[index]),
                                           round_value(scored.ci_low[index]), round_value(scored.ci_high[index]))


KEEP_WORDS = {
    "first": "the first member in id order",
    "id": "the first member in id order",
    "longest": "the member with the most shingles",
    "shortest": "the member with the fewest shingles",
    "oldest": "the member of the earliest sign run, then the earliest modification time",
    "newest": "the member of the latest sign run, then the latest modification time",
}


def keep_reason(group: ShownGroup, options: ReviewOptions) -> str:
    """Why the representative is kept, in words: the keep rule and what made it win."""
    find = options.find
    kept = next(member for member in group.everyone if member.id == group.representative)
    if kept.store == "reference":
        return (f"a document of the reference store {find.against}, which is never dropped (and is kept before "
                "the others)")
    if find.keep_field is not None:
        rule = f"the member whose field {find.keep_field!r} is highest (a missing value ranks lowest)"
    else:
        rule = KEEP_WORDS[find.keep]
        if find.keep in ("longest", "shortest"):
            rule += f" ({kept.shingles:,})"
        elif find.keep in ("oldest", "newest") and kept.run is not None:
            rule += f" (run {kept.run})"
    ties = "" if find.keep in ("first", "id") and find.keep_field is None else "; ties go to the smallest id"
    gone = any(member.action == "gone" for member in group.everyone)
    return (f"keep {find.keep if find.keep_field is None else 'field'}: {rule}{ties}"
            + ("; a member gone or changed since it was signed is never kept in place of a live one" if gone else ""))
