"""Writing part files: at most ``PART_ROWS`` rows each, where no reader looks until a manifest lists them.

Locally a part is written under a temporary name, fsynced, then renamed by the commit; in object storage it is
written once, at its final name, which carries the run's token (:mod:`dedup_cli.store.places`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from dedup_cli.atomic_files import fsync_path
from dedup_cli.objectstore.urls import ObjectPath
from dedup_cli.store.places import Folder, ParquetSink, in_objects, new_name, remove, where_written

PART_ROWS = 1 << 20


class FileCounter:
    def __init__(self, first: int) -> None:
        self.next = first

    def __call__(self) -> int:
        number = self.next
        self.next += 1
        return number


@dataclass(frozen=True)
class WrittenFile:
    """A file written for a run and not yet listed: where it is now (``temporary``; in object storage its final
    place), the name the commit gives it, its rows."""

    temporary: Folder
    name: str
    rows: int


class PartWriter:
    """Write tables into new part files of at most PART_ROWS rows; each is whole (fsynced, or uploaded) when it is
    full. ``token`` is the run's, in the names of parts written to object storage."""

    def __init__(self, path: Folder, schema: pa.Schema, counter: FileCounter, token: str | None = None) -> None:
        self.path = path
        self.schema = schema
        self.counter = counter
        self.token = token
        self.finished: list[WrittenFile] = []
        self._writer: ParquetSink | None = None
        self._current: tuple[Folder, str] | None = None
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        offset = 0
        while offset < table.num_rows:
            if self._writer is None:
                name = new_name(f"part-{self.counter():06d}", self.token, self.path)
                temporary = where_written(self.path, name)
                self._writer = ParquetSink(temporary, self.schema)
                self._current, self._rows = (temporary, name), 0
            piece = table.slice(offset, PART_ROWS - self._rows)
            self._writer.write_table(piece)
            self._rows += piece.num_rows
            offset += piece.num_rows
            if self._rows >= PART_ROWS:
                self._finish()

    def _finish(self) -> None:
        assert self._writer is not None and self._current is not None
        self._writer.close()
        self.finished.append(WrittenFile(self._current[0], self._current[1], self._rows))
        self._writer, self._current = None, None

    def close(self) -> list[WrittenFile]:
        if self._writer is not None:
            self._finish()
        return self.finished

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.discard()
            self._writer, self._current = None, None
        for written in self.finished:
            remove(written.temporary)


def commit_files(path: Folder, written: Iterable[WrittenFile]) -> None:
    """Rename fsynced temporary files to their final names and make the renames durable (in object storage they
    are at their final names already)."""
    if in_objects(path):
        return
    assert not isinstance(path, ObjectPath)
    for item in written:
        os.replace(item.temporary, path / item.name)  # type: ignore[arg-type]
    fsync_path(path, directory=True)
