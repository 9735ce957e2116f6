"""The end of find when its edges are many: connected components on the cluster, then each component's triples,
groups and representatives on the workers."""

from __future__ import annotations

from typing import Any

import dask.dataframe as dd
import numpy as np

from dedup_cli.engine.dask.frames import DocumentFrames
from dedup_cli.engine.results import FindResult
from dedup_cli.options.finding import FindOptions


def conclude_on_cluster(needed: dd.DataFrame, frames: DocumentFrames, reduced: dd.DataFrame,
                        alias_documents: np.ndarray, options: FindOptions, bits: int, common: dict[str, Any],
                        shuffle_method: str | None) -> FindResult:
    raise NotImplementedError
