"""Writing part files: temporary names, at most ``PART_ROWS`` rows each, fsynced, then renamed in one step.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.files import fsync_path, unlink_quietly

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
    temporary: Path
    name: str
    rows: int


class PartWriter:
    """Write tables into temporary part files of at most PART_ROWS rows; fsync each when it is full."""

    def __init__(self, path: Path, schema: pa.Schema, counter: FileCounter) -> None:
        self.path = path
        self.schema = schema
        self.counter = counter
        self.finished: list[WrittenFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._current: tuple[Path, str] | None = None
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        offset = 0
        while offset < table.num_rows:
            if self._writer is None:
                name = f"part-{self.counter():06d}.parquet"
                temporary = self.path / f".{name}.tmp"
                self._writer = pq.ParquetWriter(temporary, self.schema, compression="zstd")
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
        fsync_path(self._current[0])
        self.finished.append(WrittenFile(self._current[0], self._current[1], self._rows))
        self._writer, self._current = None, None

    def close(self) -> list[WrittenFile]:
        if self._writer is not None:
            self._finish()
        return self.finished

    def discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except (pa.ArrowException, OSError):
                pass
            if self._current is not None:
                unlink_quietly(self._current[0])
            self._writer, self._current = None, None
        for written in self.finished:
            unlink_quietly(written.temporary)


def commit_files(path: Path, written: Iterable[WrittenFile]) -> None:
    """Rename fsynced temporary files to their final names and make the renames durable."""
    for item in written:
        os.replace(item.temporary, path / item.name)
    fsync_path(path, directory=True)
