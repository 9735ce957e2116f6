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
        self.empty += other.empty
        self.no_record += other.no_record


@dataclass
class Decisions:
    """Grouped documents and what to do with each; arrays aligned by position.

    Attributes:
        ids: the documents' ids.
        content_hashes: uint64[m], their stored content hashes.
        drop: bool[m], whether each is to be dropped (the others are kept members, listed to annotate them).
        groups: int64[m], each one's group number (from 1).
        representatives: the id each group keeps, per document.
    """

    ids: list[str]
    content_hashes: np.ndarray
    drop: np.ndarray
    groups: np.ndarray
    representatives: list[str]
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
