"""Identity and place: what a sign run records of every document it reads, whether or not its text changed.

A document's id says what it is; its place (its location: the file, and the line, row or record in it) says where
it is now, and changes whenever something above it does: a record deleted or inserted above it, a file renamed.
A run that reads a source records the place of every document it reads there (docs/inputs.md, "Identity and
place"). Each document read is one of:

* **new** or **changed** (its text is not the stored copy's): signed and written with its place, as always;
* **unchanged** at its stored place: nothing to write;
* **moved**: the stored copy's text at another place of the same source, or read from another source while the
  stored one is gone. Its stored row is written again with the new place, its signature copied, not signed again;
* **held elsewhere** (a candidate): its id is stored from another source that still exists. Only once every task
  is read does the run know whether that source still holds it: if the run read that source completely and did
  not find the id there, the id moves here (the first such copy in input order); otherwise the stored copy keeps
  it and this one is skipped, as before.

And a source read completely holds exactly what the run read from it: a stored document of that source that the
read did not find (deleted, or moved to another place that took it) is removed, so that nothing decides liveness
from a place the latest read did not confirm. Stdin is a batch, not a source that holds its records: it is never
taken as complete. The workers classify (:func:`read_status`); the run's driver settles the rest
(:func:`settle_places`), the same for both engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dedup_cli.inputs.locations import STDIN, FileRun, Source, location_path, where_read
from dedup_cli.inputs.report import ReadReport
from dedup_cli.store.document_index import HELD_ELSEWHERE, DocumentIndex, source_of
from dedup_cli.store.format import DocumentBatch

NEW, CHANGED, UNCHANGED, MOVED, ELSEWHERE = 0, 1, 2, 3, 4
"""What a document read is to the store's copy of its id (:func:`read_status`)."""

RECORD_FORMATS = frozenset({"lines", "jsonl", "json", "csv", "tsv", "parquet", "sets"})
"""Input formats whose files hold many documents, each at a place of its own (a whole text file is one)."""


def read_status(ids: Sequence[str], locations: Sequence[str], content_hashes: np.ndarray,
                stored: DocumentIndex | None) -> tuple[np.ndarray, np.ndarray]:
    """What each document read is to the stored copy of its id (see the module docstring), and that copy's row.

    Args:
        ids, locations: the documents' ids and locations, as read now.
        content_hashes: uint64[n], the hashes of their texts.
        stored: the store's index (None, or empty: every document is new).

    Returns:
        (int8[n] of NEW, CHANGED, UNCHANGED, MOVED, ELSEWHERE; int64[n] the stored row, -1 where none).
    """
    count = len(ids)
    status = np.full(count, NEW, np.int8)
    if stored is None or not len(stored) or not count:
        return status, np.full(count, -1, np.int64)
    rows = stored.rows_of(ids)
    found = np.flatnonzero(rows >= 0)
    if not found.size:
        return status, rows
    found_rows = rows[found]
    same_text = stored.content_hashes[found_rows] == np.asarray(content_hashes, np.uint64)[found]
    same_place, same_source = stored.places_of(found_rows, [locations[position] for position in found.tolist()])
    found_status = np.where(same_place, np.where(same_text, UNCHANGED, CHANGED),
                            np.where(same_text, MOVED, CHANGED)).astype(np.int8)
    # Another source: the id moves here when the stored one is gone, else the driver decides (rare: looked at
    # one by one, each stored source asked about once).
    for place in np.flatnonzero(~same_source).tolist():
        if stored.source_of(int(found_rows[place]), locations[int(found[place])]) == HELD_ELSEWHERE:
            found_status[place] = ELSEWHERE
    status[found] = found_status
    return status, rows


@dataclass
class Placed:
    """Documents of one task whose rows the run's driver writes, or skips: the moved ones (their stored signature
    is copied) and the candidates (held elsewhere until the driver decides; signed here when their text differs
    from the stored copy's, else copied if they move). Arrays aligned by document, in the order read.

    ``positions``: each one's position among the task's documents (what its ids list; -1 for a candidate, which
    is not among them); ``signed``: whether ``shingle_counts`` and ``signatures`` hold its own signature (else
    zeros: copied from ``stored_rows``).
    """

    batch: DocumentBatch
    wheres: list[str]
    stored_rows: np.ndarray  # int64[m]
    candidate: np.ndarray  # bool[m]
    signed: np.ndarray  # bool[m]
    positions: np.ndarray  # int64[m]

    def __len__(self) -> int:
        return len(self.batch.ids)

    @staticmethod
    def none(signature_bytes: int) -> Placed:
        return Placed(empty_batch(signature_bytes), [], np.empty(0, np.int64), np.empty(0, bool), np.empty(0, bool),
                      np.empty(0, np.int64))

    def take(self, keep: np.ndarray) -> Placed:
        """The entries ``keep`` (bool[m]) marks."""
        rows = np.flatnonzero(keep).tolist()
        return Placed(self.batch.take(rows), [self.wheres[row] for row in rows], self.stored_rows[keep],
                      self.candidate[keep], self.signed[keep], self.positions[keep])


def empty_batch(signature_bytes: int) -> DocumentBatch:
    return DocumentBatch([], [], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint64),
                         np.empty(0, np.int64), np.empty((0, signature_bytes), np.uint8))


def placed_documents(status: np.ndarray, rows: np.ndarray, ids: Sequence[str], locations: Sequence[str],
                     wheres: Any, sizes: np.ndarray, mtimes_ns: np.ndarray, content_hashes: np.ndarray,
                     stored: DocumentIndex | None, signature_bytes: int,
                     sign: Any = None) -> Placed:
    """The :class:`Placed` of a task's documents read with ``status`` (:func:`read_status`). ``sign(positions)``
    signs the documents at ``positions`` (int64) and returns (shingle counts, signatures): called for the
    candidates whose text differs from the stored copy's."""
    chosen = np.flatnonzero((status == MOVED) | (status == ELSEWHERE))
    if not chosen.size:
        return Placed.none(signature_bytes)
    candidate = status[chosen] == ELSEWHERE
    assert stored is not None
    stored_rows = rows[chosen]
    differs = candidate & (stored.content_hashes[stored_rows] != np.asarray(content_hashes, np.uint64)[chosen])
    counts = np.zeros(chosen.size, np.int64)
    signatures = np.zeros((chosen.size, signature_bytes), np.uint8)
    if differs.any() and sign is not None:
        counts[differs], signatures[differs] = sign(chosen[differs])
    # A candidate is not among the task's documents: positions count only the others.
    among = np.cumsum(status != ELSEWHERE) - 1
    positions = np.where(candidate, -1, among[chosen])
    picked = chosen.tolist()
    batch = DocumentBatch([ids[p] for p in picked], [locations[p] for p in picked], np.asarray(sizes)[chosen],
                          np.asarray(mtimes_ns)[chosen], np.asarray(content_hashes, np.uint64)[chosen], counts,
                          signatures)
    return Placed(batch, [wheres[p] for p in picked], stored_rows, candidate, differs, positions)


class SourcesRead:
    """The sources of documents at places (files of records) a run reads, noted as the walk hands them out, so
    that the run knows which it read completely (:meth:`complete`)."""

    def __init__(self) -> None:
        self.sources: dict[str, str] = {}  # source (a location without its record part) → its name in messages

    def watch(self, sources: Iterable[Source | FileRun]) -> Iterator[Source | FileRun]:
        for source in sources:
            if isinstance(source, Source) and source.format in RECORD_FORMATS and source.path != STDIN:
                self.sources[location_path(source.path)] = source.display
            yield source

    def complete(self, report: ReadReport) -> set[str]:
        """The sources noted whose every part was read: none of them skipped as binary or unreadable (a damaged
        compressed file, an I/O error: what such a source still holds is unknown)."""
        failed = set(report.binary) | {name for name, _ in report.unreadable}
        if report.unlisted.get("binary") or report.unlisted.get("unreadable"):
            return set()  # too many failures to name: none is taken as complete
        return {source for source, name in self.sources.items() if name not in failed}


@dataclass
class Settled:
    """What the driver made of a run's moved documents and candidates (:func:`settle_places`)."""

    batch: DocumentBatch  # the rows to write, signatures still to copy where ``copy`` says
    copy: np.ndarray  # int64[c]: positions in ``batch`` whose signature is the stored one's
    copy_rows: np.ndarray  # int64[c]: the stored row each copies
    seen: list[str] = field(default_factory=list)  # ids of candidates that moved here: read, as far as a prune goes
    removed: list[str] = field(default_factory=list)  # stored documents their complete source no longer holds

    @property
    def moved(self) -> int:
        """Documents written again at a new place with the stored text (the others written here changed)."""
        return int(self.copy.size)


def settle_places(index: DocumentIndex, placed: Sequence[Placed], read: Sequence[str], read_ids: Sequence[Any],
                  complete: set[str], report: ReadReport, signature_bytes: int,
                  moved_rows: np.ndarray | None = None) -> Settled:
    """After every task of a run: which candidates move here, which stored documents are gone from the sources
    read completely, and the rows to write for the moved documents.

    Args:
        index: the store as the run found it.
        placed: each task's :class:`Placed`, in task order, without the documents the run skipped as later copies
            of an id.
        read, read_ids: the ids of every document the tasks read (candidates are not among them), as strings and
            as Arrow string arrays.
        complete: the sources the run read completely (:meth:`SourcesRead.complete`).
        report: the run's reading report: skipped candidates are noted in it, the ones that move counted read.
        moved_rows: int64, stored rows whose id the run moved by other means (a row written by a task that could
            not look its id up, which the driver then found to move): already taken.
    """
    seen = ~index.absent(read, read_ids) if len(index) else np.zeros(0, bool)
    entries = [entry for entry in placed if len(entry)]
    joined = _joined(entries, signature_bytes)
    keep = ~joined.candidate
    stored_sources: dict[int, str] = {}
    taken = np.zeros(len(index), bool)  # stored rows whose id a candidate took
    if moved_rows is not None:
        taken[moved_rows] = True
    for place in np.flatnonzero(joined.candidate).tolist():
        row, identifier = int(joined.stored_rows[place]), joined.batch.ids[place]
        stored_at = index.location(row)
        if taken[row]:
            report.note("duplicate_ids", (joined.wheres[place], identifier))
            continue
        source = stored_sources.setdefault(row, source_of(stored_at))
        if seen[row] or source not in complete:
            report.note("held_elsewhere", (joined.wheres[place], identifier, where_read(stored_at)))
            continue
        keep[place] = taken[row] = True
        report.documents += 1
    chosen = joined.take(keep)
    rows_moved = taken.copy()
    rows_moved[chosen.stored_rows] = True
    removed: list[str] = []
    if complete and len(index):
        in_complete = np.zeros(len(index), bool)
        for source, rows in index.rows_by_source().items():
            if source in complete:
                in_complete[rows] = True
        removed = index.ids_at(in_complete & ~seen & ~rows_moved)
    copy = np.flatnonzero(~chosen.signed)
    return Settled(chosen.batch, copy, chosen.stored_rows[copy],
                   [chosen.batch.ids[p] for p in np.flatnonzero(chosen.candidate).tolist()], removed)


def _joined(entries: Sequence[Placed], signature_bytes: int) -> Placed:
    if not entries:
        return Placed.none(signature_bytes)
    if len(entries) == 1:
        return entries[0]
    batches = [entry.batch for entry in entries]
    batch = DocumentBatch([i for b in batches for i in b.ids], [p for b in batches for p in b.paths],
                          *(np.concatenate([getattr(b, name) for b in batches])
                            for name in ("sizes", "mtimes_ns", "content_hashes", "shingle_counts", "signatures")))
    return Placed(batch, [where for entry in entries for where in entry.wheres],
                  *(np.concatenate([getattr(entry, name) for entry in entries])
                    for name in ("stored_rows", "candidate", "signed", "positions")))


def write_places(run: Any, settled: Settled) -> None:
    """Write the moved documents' rows into ``run`` (a :class:`dedup_cli.store.runs.StoreRun`): their own
    signatures, or the stored ones copied."""
    batch = settled.batch
    if not batch.ids:
        return
    if settled.copy.size:
        counts, signatures = run.stored_signatures(settled.copy_rows)
        batch.shingle_counts[settled.copy] = counts
        batch.signatures[settled.copy] = signatures
    run.write(batch)
