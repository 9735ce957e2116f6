"""Dedup stores among the inputs: told by what marks them, and left out of what ``sign`` and ``filter`` read.

A store kept inside the corpus it signs (``cd corpus && dedup sign .`` writes ``corpus/dedup.parquet``) is found
again by the next walk of the corpus; its lock, manifest and parts are no documents, and its parts (Parquet files
without a text column) would stop the run. So the walk leaves out

- a directory that holds ``_dedup_manifest.json`` or ``_dedup.lock`` (a format 2 store, or one being created), with
  everything under it, and a file named or listed in such a directory;
- a Parquet file whose metadata says it is a format 1 store (one Parquet file), read for its columns anyway.

The markers are looked for in what the walk lists anyway, so a directory costs nothing more; a file named or
listed by itself costs one look at its directory (once per directory).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from dedup_cli.options.vocabulary import STORE_LOCK, STORE_MANIFEST, STORE_METADATA_KEY

STORE_MARKERS = (STORE_MANIFEST, STORE_LOCK)
"""The files that make a directory a store."""


def holds_a_store(names: Collection[str]) -> bool:
    """Whether a directory whose files are ``names`` is a store."""
    return any(marker in names for marker in STORE_MARKERS)


def is_store_file(metadata: Mapping[bytes, bytes] | None) -> bool:
    """Whether a Parquet file with this schema ``metadata`` is a single-file store (format 1)."""
    return metadata is not None and STORE_METADATA_KEY in metadata


class StoreDirectories:
    """Whether the directories of files named or listed by themselves are stores, each directory looked at once."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}

    def holds(self, path: str) -> str | None:
        """The directory of the file ``path`` when it is a store, else None."""
        directory = os.path.dirname(path)
        known = self._known.get(directory)
        if known is None:
            known = self._known[directory] = any(os.path.lexists(os.path.join(directory, marker))
                                                 for marker in STORE_MARKERS)
        return directory if known else None
