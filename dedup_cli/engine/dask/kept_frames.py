"""The Dask engine's stages kept in ``find --work-dir``: each partition written by the task that holds it, the
stage committed by the driver's one file listing the parts (:mod:`dedup_cli.store.checkpoints`).

The work folder must be a path every worker sees (a shared filesystem), as the store is. A kept frame is read back
partition by partition, with the divisions it had, so the stages after it meet it as they would have.
"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dedup_cli.store.checkpoints import WorkDir, read_part, write_part


def _write(frame: pd.DataFrame, folder: str, name: str) -> str:
    arrays = {"index": frame.index.to_numpy(), **{f"c_{name}": frame[name].to_numpy() for name in frame.columns}}
    return write_part(Path(folder), name, arrays)


def _read(path: str, meta: pd.DataFrame) -> pd.DataFrame:
    arrays = read_part(path)
    return pd.DataFrame({name: arrays[f"c_{name}"] for name in meta.columns},
                        index=pd.Index(arrays["index"], name=meta.index.name))


def keep_frame(work: WorkDir, stage: str, key: str, parts: list, extra: dict[str, np.ndarray]) -> None:
    """Write the partitions ``parts`` (delayed pandas frames, computed where they are) as ``stage`` under ``key``,
    then commit it with ``extra`` arrays."""
    folder = str(work.folder(stage, key))
    names = [f"part-{index:05d}.npz" for index in range(len(parts))]
    digests = dask.compute(*[dask.delayed(_write)(part, folder, name) for part, name in zip(parts, names,
                                                                                             strict=True)])
    work.save(stage, key, {"parts": np.array(names), "part_sha256": np.array(digests), **extra})


def kept_frame(work: WorkDir, stage: str, key: str, kept: dict[str, np.ndarray], meta: pd.DataFrame,
               divisions: tuple | None = None) -> dd.DataFrame:
    """A stage kept by :func:`keep_frame` (and checked by :meth:`WorkDir.load`) as a data frame again."""
    folder = work.folder(stage, key)
    parts = [dask.delayed(_read)(str(folder / str(name)), meta) for name in kept["parts"]]
    return dd.from_delayed(parts, meta=meta, divisions=divisions, verify_meta=False)
