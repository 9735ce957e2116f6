"""The Dask engine's stages kept in ``find --work-dir``: each part written by the task that holds it, the stage
committed by the driver's one file listing the parts (:mod:`dedup_cli.store.checkpoints`).

The work folder must be a path every worker sees (a shared filesystem), as the store is. A kept stage is read back
part by part, in the order it was written, so the stages after it meet it as they would have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask
import numpy as np

from dedup_cli.engine.dask.exchange import Table
from dedup_cli.engine.dask.table_kinds import TableKind
from dedup_cli.store.checkpoints import WorkDir, read_part, write_part


def _write(table: Table, folder: str, name: str) -> str:
    return write_part(Path(folder), name, table)


def _read(path: str, kind: TableKind) -> Table:
    return kind.check(read_part(path))


def keep_parts(work: WorkDir, stage: str, key: str, parts: list[Any], extra: dict[str, np.ndarray]) -> None:
    """Write the parts ``parts`` (delayed tables of numbers, written where they are) as ``stage`` under ``key``,
    then commit it with ``extra`` arrays."""
    folder = str(work.folder(stage, key))
    names = [f"part-{index:05d}.npz" for index in range(len(parts))]
    digests = dask.compute(*[dask.delayed(_write)(part, folder, name) for part, name in zip(parts, names,
                                                                                             strict=True)])
    work.save(stage, key, {"parts": np.array(names), "part_sha256": np.array(digests), **extra})


def kept_parts(work: WorkDir, stage: str, key: str, kept: dict[str, np.ndarray], kind: TableKind) -> list[Any]:
    """A stage kept by :func:`keep_parts` (and checked by :meth:`WorkDir.load`) as delayed tables of ``kind``
    again, each checked as it is read."""
    folder = work.folder(stage, key)
    return [dask.delayed(_read)(str(folder / str(name)), kind) for name in kept["parts"]]
