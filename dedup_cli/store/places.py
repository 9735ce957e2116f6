"""Where a store's files live: a local directory, or a prefix in object storage (``s3://bucket/sigs``).

The store's code names its files as ``folder / name`` whatever the folder is (a ``Path``, or an
:class:`~dedup_cli.objectstore.urls.ObjectPath`) and goes through these few functions for what differs: listing,
deleting, reading, and writing a new file. A new file is written where no reader looks until a manifest lists it:
locally under a temporary name (fsynced, then renamed by the commit), in object storage at its final name, which
carries the writing run's random token so that two runs can never write the same object (a bucket has no rename,
and a part is written once). Nothing lists such a file but the manifest a run commits, so a file of a run that
never committed is garbage, whichever kind of folder it is in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_cli.atomic_files import fsync_path, open_input, unlink_quietly
from dedup_cli.objectstore.urls import ObjectPath, is_url

Folder = Path | ObjectPath
"""A store directory: a local path or an object storage prefix."""

WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    # Each page (data and dictionary) carries the CRC-32 of its bytes in its header, and readers verify it
    # (``page_checksum_verification``): a damaged byte in a page is an error, not another signature.
    "write_page_checksum": True,
    # No statistics for the signatures (the other columns have them): nothing filters on them, and a page's
    # minimum and maximum signature are 2 × signature_bytes in its header that no checksum covers
    # (docs/store-format.md).
    "write_statistics": ["id", "path", "size", "mtime_ns", "content_hash", "shingle_count", "run"],
}
"""How every Parquet file of a store (parts, removal files) is written."""


def folder_of(path: str | os.PathLike[str] | ObjectPath) -> Folder:
    """The folder ``path`` names (a URL becomes an :class:`ObjectPath`)."""
    return ObjectPath(str(path)) if isinstance(path, ObjectPath) or is_url(path) else Path(path)


def in_objects(folder: Folder) -> bool:
    return isinstance(folder, ObjectPath)


def names(folder: Folder) -> list[str]:
    """The names of the files directly in ``folder``, sorted."""
    if isinstance(folder, ObjectPath):
        from dedup_cli.objectstore import objects

        return sorted(objects.names(str(folder)))
    return sorted(os.listdir(folder))


def remove(file: Folder) -> None:
    """Delete a file that may already be gone."""
    if isinstance(file, ObjectPath):
        from dedup_cli.objectstore import objects

        objects.delete(str(file))
    else:
        unlink_quietly(file)


def remove_all(folder: Folder, files: Sequence[str]) -> None:
    """Delete the named files of ``folder`` (in object storage, a thousand a request)."""
    if isinstance(folder, ObjectPath):
        from dedup_cli.objectstore import objects

        objects.delete_many([str(folder / name) for name in files])
        return
    for name in files:
        unlink_quietly(folder / name)


def parquet_source(file: Folder) -> Any:
    """What to open a Parquet file for reading from: locally its path, read by Arrow's own file (a
    KeyboardInterrupt raised inside a Python read callback can leave Arrow's reader waiting for ever), in object
    storage an object read in large ranged GETs.

    Raises:
        FileNotFoundError: the file is gone (a compaction committed and deleted it), in object storage.
    """
    if isinstance(file, ObjectPath):
        return open_input(str(file))
    return str(file)


def parquet_file(file: Folder) -> pq.ParquetFile:
    """Open a Parquet file of a store for reading (:func:`parquet_source`), its pages' checksums verified as they
    are read (:data:`WRITE_OPTIONS`).

    Raises:
        FileNotFoundError: the file is gone (a compaction committed and deleted it).
    """
    return pq.ParquetFile(parquet_source(file), page_checksum_verification=True)


def new_name(stem: str, token: str | None, folder: Folder) -> str:
    """The final name of a new file: ``part-000007.parquet`` locally, ``part-000007-TOKEN.parquet`` in object
    storage (where it is written directly under that name)."""
    return f"{stem}-{token}.parquet" if in_objects(folder) and token else f"{stem}.parquet"


def where_written(folder: Folder, name: str, suffix: str = "") -> Folder:
    """Where a new file named ``name`` is written until the commit: a temporary name beside it locally
    (``.NAME[.SUFFIX].tmp``), the final name in object storage."""
    if in_objects(folder):
        return folder / name
    return folder / f".{name}{'.' + suffix if suffix else ''}.tmp"


@contextmanager
def new_file(file: Folder) -> Iterator[Any]:
    """What to give a Parquet writer to write the new ``file`` through: locally its path (the file is fsynced
    when the block ends), in object storage a stream whose upload completes when the block ends without an
    exception and is aborted otherwise."""
    if isinstance(file, ObjectPath):
        from dedup_cli.objectstore import object_streams

        with object_streams.writing(str(file)) as stream:
            yield stream
        return
    try:
        yield str(file)
        fsync_path(file)
    except BaseException:
        unlink_quietly(file)
        raise


def write_table(table: pa.Table, file: Folder) -> None:
    """One table as the new Parquet file ``file`` (:data:`WRITE_OPTIONS`), complete when
    this returns."""
    with new_file(file) as sink:
        pq.write_table(table, sink, **WRITE_OPTIONS)


class ParquetSink:
    """A Parquet file being written row group by row group into ``file`` (:func:`new_file`): :meth:`close` makes
    it whole, :meth:`discard` abandons it."""

    def __init__(self, file: Folder, schema: pa.Schema) -> None:
        self.file = file
        self._context = new_file(file)
        sink = self._context.__enter__()
        try:
            self.writer = pq.ParquetWriter(sink, schema, **WRITE_OPTIONS)
        except BaseException as error:
            self._context.__exit__(type(error), error, error.__traceback__)
            raise

    def write_table(self, table: pa.Table) -> None:
        self.writer.write_table(table)

    def close(self) -> None:
        try:
            self.writer.close()
        except BaseException as error:
            self._context.__exit__(type(error), error, error.__traceback__)
            raise
        self._context.__exit__(None, None, None)

    def discard(self) -> None:
        try:
            self.writer.close()
        except (pa.ArrowException, OSError):
            pass
        error = OSError("discarded")
        try:
            self._context.__exit__(OSError, error, None)
        except OSError:
            pass
        remove(self.file)
