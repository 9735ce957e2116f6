"""``info``: a store's parameters, document counts and sign runs, from its manifest and one column."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dedup_cli.options.vocabulary import default_store
from dedup_cli.params import SignatureParams
from dedup_cli.store.manifest import RunRecord
from dedup_cli.store.store import open_store


@dataclass(frozen=True)
class StoreInfo:
    """What a store holds: its documents (and how many have no shingle), parameters, id root and runs."""

    store: str
    documents: int
    empty: int  # documents with no shingle, never reported as duplicates
    params: SignatureParams
    id_root: str | None
    last_run: int
    runs: tuple[RunRecord, ...]

    def record(self) -> dict[str, Any]:
        """A JSON-ready dict, in the order ``dedup info`` prints it."""
        return {"store": self.store, "documents": self.documents, "empty": self.empty,
                "params": self.params.to_dict(), "id_root": self.id_root, "last_run": self.last_run,
                "runs": [dataclasses.asdict(record) for record in self.runs]}


def info(store: str | os.PathLike[str] | None = None) -> StoreInfo:
    """Describe a store, reading its manifest and the shingle counts of its live rows (no signature).

    Args:
        store: the store (default: ``$DEDUP_STORE``, else ``./dedup.parquet``).
    """
    path = default_store(store)
    opened = open_store(path)
    counts = opened.shingle_counts()
    return StoreInfo(store=path, documents=int(counts.size), empty=int(np.count_nonzero(counts == 0)),
                     params=opened.params, id_root=opened.id_root, last_run=opened.last_run, runs=opened.runs)
