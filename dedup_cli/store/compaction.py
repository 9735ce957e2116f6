"""Compaction: the live rows rewritten into fresh parts, and every removal file dropped.

A commit compacts when the parts of more than :data:`MAX_DELTA_FILES` runs (a run's parts count once, however
many tasks wrote them) and removal files have accumulated since
the last compaction, or when more than :data:`MAX_DEAD_FRACTION` of the stored rows are dead. It holds the
``id`` and ``run`` columns of the whole store but only one row group of the other columns at a time. Compacted
parts are not sorted by id; readers sort (one Arrow sort on id and run).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from dedup_cli.params import SignatureParams
from dedup_cli.store.format import PART_COLUMNS, part_schema
from dedup_cli.store.parts import FileCounter, PartWriter, WrittenFile
from dedup_cli.store.places import Folder
from dedup_cli.store.snapshot import live_rows, open_part, selected_rows

MAX_DELTA_FILES = 32
MAX_DEAD_FRACTION = 0.5
ROW_GROUP_ROWS = 1 << 16


def compaction_due(delta_files: int, rows: int, live: int) -> bool:
    """Whether a commit should compact: too many run parts and removal files since the last compaction, or too
    many of the ``rows`` stored dead (``live`` of them are live)."""
    return delta_files > MAX_DELTA_FILES or (rows > 0 and rows - live > MAX_DEAD_FRACTION * rows)


def compact_parts(path: Folder, params: SignatureParams, sources: Sequence[Folder], removals: pa.Table,
                  counter: FileCounter, token: str | None = None) -> list[WrittenFile]:
    """Stream the live rows of ``sources`` (in order) into new temporary parts, row group by row group."""
    schema = part_schema(params)
    id_runs = [open_part(source.parent, source.name) for source in sources]
    try:
        keys = pa.concat_tables([part.read(columns=["id", "run"]) for part in id_runs]) if id_runs else None
    finally:
        for part in id_runs:
            part.close()
    keep = np.empty(0, np.int64) if keys is None else np.sort(live_rows(keys["id"], keys["run"], removals))
    writer = PartWriter(path, schema, counter, token)
    try:
        buffered: list[pa.Table] = []
        buffered_rows = 0
        for table in selected_rows(sources, keep, PART_COLUMNS):
            buffered.append(table)
            buffered_rows += table.num_rows
            if buffered_rows >= ROW_GROUP_ROWS:
                writer.write(pa.concat_tables(buffered).cast(schema))
                buffered, buffered_rows = [], 0
        if buffered:
            writer.write(pa.concat_tables(buffered).cast(schema))
        return writer.close()
    except BaseException:
        writer.discard()
        raise
