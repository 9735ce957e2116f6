"""What ``filter`` does with the grouped documents: drop or keep each, and its group, looked up a batch at a time.

A :class:`Decisions` holds only the documents to drop (or, to annotate, every grouped document): memory grows with
them, not with the corpus. Records are matched by id: an id made of a file and a line or row number (``FILE:LINE``,
``FILE:ROW``) is matched by number, a batch of lines or rows at once, without reading the record; any other id
through one dictionary built at the first look-up. A record meant to be dropped is dropped only when its content
hash is still the stored one: a document that changed since it was signed is kept and reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import xxhash

from dedup_cli.inputs.locations import display_name, path_of_location


@dataclass
class SourceOutcome:
    """What filtering one input source did; outcomes of several sources add up (:meth:`add`).

    ``seen`` and ``dropped_positions`` hold positions into the :class:`Decisions`.
    """

    records: int = 0  # records read: files, non-blank lines, rows
    dropped: int = 0  # records left out
    seen: list[int] = field(default_factory=list)  # decisions whose document was met
    dropped_positions: list[int] = field(default_factory=list)  # decisions applied: the documents dropped
    changed: list[tuple[str, str]] = field(default_factory=list)  # (where, id): to drop, but changed; kept
    unsigned: list[str] = field(default_factory=list)  # files the store never read, copied whole
    repeated: list[tuple[str, str]] = field(default_factory=list)  # (where, id): a repeated id, skipped
    held: list[tuple[str, str, str]] = field(default_factory=list)  # (where, id, its input): another input holds it
    # Sources that held nothing: (name, what) of stdin or a whole file with no byte; the names of record inputs
    # with no record (dedup_cli.inputs.skips.empty_inputs judges which of them make the run the wrong job).
    empty: list[tuple[str, str]] = field(default_factory=list)
    no_record: list[str] = field(default_factory=list)

    def add(self, other: SourceOutcome) -> None:
        self.records += other.records
        self.dropped += other.dropped
        self.seen += other.seen
        self.dropped_positions += other.dropped_positions
        self.changed += other.changed
        self.unsigned += other.unsigned
        self.repeated += other.repeated
        self.held += other.held
        self.empty += other.empty
        self.no_record += other.no_record


def id_hashes(ids: Sequence[str | None]) -> np.ndarray:
    """uint64[n]: the xxh3-64 of each id's UTF-8 bytes (0 for None), the same in every process."""
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter((0 if identifier is None else digest(identifier.encode("utf-8", "surrogateescape"))
                        for identifier in ids), np.uint64, len(ids))


@dataclass
class SourceOwners:
    """Which source holds each stored id, as the store's sign runs settled it (an id belongs to the source that gave
    it first, docs/inputs.md): what tells ``filter`` that a record is a second delivery of an id another input
    holds, to be skipped as ``sign`` skips it. Twelve bytes a stored document: the sorted 64-bit hashes of the ids,
    and the source of each (a number into ``sources``, the locations' files)."""

    hashes: np.ndarray  # uint64[n], ascending
    owners: np.ndarray  # int32[n]
    sources: list[str]
    _gone: dict[int, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, ids: pa.Array, locations: pa.Array) -> SourceOwners:
        """The owners of the stored documents ``ids`` read at ``locations`` (Arrow string arrays)."""
        import pyarrow.compute as pc

        files = pc.replace_substring_regex(locations, pattern="#.*", replacement="").dictionary_encode()
        hashes = id_hashes(ids.to_pylist())
        order = np.argsort(hashes, kind="stable")
        codes = files.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        return cls(hashes[order], codes[order], files.dictionary.to_pylist())

    def elsewhere(self, ids: Sequence[str | None], source: str) -> list[str | None]:
        """For each id, the source that holds it when that is another one than ``source`` (a location's file) and
        is still there; else None (held here, not stored, or its source gone: then this copy is the one to keep)."""
        from dedup_cli.store.document_index import GoneSources

        found: list[str | None] = [None] * len(ids)
        if not len(self.hashes):
            return found
        hashes = id_hashes(ids)
        where = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        hit = (self.hashes[where] == hashes) & np.array([identifier is not None for identifier in ids], bool)
        for position in np.flatnonzero(hit).tolist():
            owner = int(self.owners[where[position]])
            name = self.sources[owner]
            if name == source:
                continue
            if owner not in self._gone:
                self._gone[owner] = GoneSources()(name)
            if not self._gone[owner]:
                found[position] = name
        return found


@dataclass
class Decisions:
    """Grouped documents and what to do with each; arrays aligned by position.

    Attributes:
        ids: the documents' ids.
        content_hashes: uint64[m], their stored content hashes.
        drop: bool[m], whether each is to be dropped (the others are kept members, listed to annotate them).
        groups: int64[m], each one's group number (from 1).
        representatives: the id each group keeps, per document.
        owners: which source holds each stored id (None: ids are files and numbers, which cannot repeat).
    """

    ids: list[str]
    content_hashes: np.ndarray
    drop: np.ndarray
    groups: np.ndarray
    representatives: list[str]
    owners: SourceOwners | None = None
    _positions: dict[str, int] | None = field(default=None, repr=False)
    _numbered: dict[str, tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def lookup(self, ids: Sequence[str | None]) -> np.ndarray:
        """int64[len(ids)]: the position of each id, -1 where it is not here (or None)."""
        if self._positions is None:
            self._positions = {identifier: position for position, identifier in enumerate(self.ids)}
        get = self._positions.get
        return np.fromiter((-1 if identifier is None else get(identifier, -1) for identifier in ids), np.int64,
                           len(ids))

    def numbered(self, file_id: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids ``FILE:N`` of ``file_id`` with ``start`` ≤ N < ``stop``: (int64 N ascending, int64 positions)."""
        if self._numbered is None:
            self._numbered = self._by_file()
        numbers, positions = self._numbered.get(file_id, (np.empty(0, np.int64), np.empty(0, np.int64)))
        low, high = np.searchsorted(numbers, [start, stop])
        return numbers[low:high], positions[low:high]

    def _by_file(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        files: dict[str, list[tuple[int, int]]] = {}
        for position, identifier in enumerate(self.ids):
            file_id, colon, number = identifier.rpartition(":")
            if colon and number.isdigit() and number.isascii():
                files.setdefault(file_id, []).append((int(number), position))
        numbered = {}
        for file_id, pairs in files.items():
            table = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
            numbered[file_id] = (table[:, 0], table[:, 1])
        return numbered

    def repeated(self, ids: list[str | None], seen: set[str], source: str, wheres: Sequence[str],
                 outcome: SourceOutcome) -> np.ndarray:
        """bool[n]: the records with these ids (None: not a record) to skip, as ``sign`` skips them: an id an
        earlier record of this input had (``seen``, told of the others), or one another input holds (the store's
        owner of the id, ``source`` being this input's file). Each is noted in ``outcome``."""
        repeated = np.zeros(len(ids), bool)
        for index, identifier in enumerate(ids):
            if identifier is None:
                continue
            if identifier in seen:
                repeated[index] = True
                outcome.repeated.append((wheres[index], identifier))
            else:
                seen.add(identifier)
        if self.owners is not None:
            for index, owner in enumerate(self.owners.elsewhere(ids, source)):
                if owner is not None and not repeated[index]:
                    repeated[index] = True
                    outcome.held.append((wheres[index], str(ids[index]), display_name(path_of_location(owner))))
        return repeated

    def settle(self, outcome: SourceOutcome, position: int, content_hash: int | None, where: str) -> bool:
        """Whether to drop the record of decision ``position`` read with ``content_hash`` (None: it is no longer
        a document); noted in ``outcome``. A record whose hash is not the stored one is kept as changed."""
        outcome.seen.append(position)
        if not self.drop[position]:
            return False
        if content_hash is None or content_hash != int(self.content_hashes[position]):
            outcome.changed.append((where, self.ids[position]))
            return False
        outcome.dropped_positions.append(position)
        outcome.dropped += 1
        return True

    def annotation(self, position: int, dropped: bool) -> tuple[int | None, bool, str | None]:
        """(dedup_group, dedup_keep, dedup_representative) of a record: of decision ``position`` (-1: none)."""
        if position < 0:
            return None, True, None
        return int(self.groups[position]), not dropped, self.representatives[position]
