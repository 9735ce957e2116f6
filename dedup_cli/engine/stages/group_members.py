"""What ``find`` reports of its grouped documents besides their pairs: those gone or changed since they were signed,
and the numeric field a group keeps its member by (``--keep-field``), re-read for the grouped documents only.
Stages of :mod:`dedup_cli.engine.stages.find`'s conclusion, shared by both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dedup_cli.array_primitives import sorted_unique
from dedup_cli.inputs.fields import field_values
from dedup_cli.inputs.liveness import gone_documents
from dedup_cli.options.input_options import InputOptions
from dedup_cli.store.manifest import RunInput
from dedup_cli.store.snapshot import StoredSignatures


def keep_field_values(store: StoredSignatures, rows: np.ndarray, field: str
                      ) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """The numeric ``field`` of documents ``rows`` (int64[m]), re-read: float64[n_docs], NaN where missing or
    not asked; and (id, reason) of each document asked for that has no value."""
    hashes = None if store.content_hashes is None else store.content_hashes[rows]
    read, problems = field_values([store.paths[row] for row in rows.tolist()], hashes, field)
    scores = np.full(len(store), np.nan)
    scores[rows] = read
    return scores, [(store.ids[int(rows[index])], reason) for index, reason in problems]


def gone_members(store: StoredSignatures, members: np.ndarray, id_schemes: Sequence[RunInput | None] = (),
                 reference: np.ndarray | None = None) -> np.ndarray:
    """int64[g], ascending: the documents of ``members`` (int64, the grouped documents) that are gone or changed
    since they were signed (a file renamed or deleted without ``--prune``, a record deleted or edited since the
    last sign: :mod:`dedup_cli.inputs.liveness`), a record of a changed file found by its id where the store's runs
    (``id_schemes``: the store's, then with ``reference`` marking its documents the reference store's) named
    records by a field. Documents signed in memory (``store.texts``) are never gone."""
    docs = sorted_unique(np.asarray(members, np.int64))
    if docs.size == 0 or store.texts is not None:
        return np.empty(0, np.int64)
    pick = docs.tolist()
    readings = [None if scheme is None else _reading(scheme, store.params.universe) for scheme in id_schemes]
    own = readings[0] if readings else None
    other = readings[1] if len(readings) > 1 else None
    in_reference = [False] * len(pick) if reference is None else reference[docs].tolist()
    gone = gone_documents([store.paths[row] for row in pick],
                          None if store.mtimes_ns is None else store.mtimes_ns[docs],
                          None if store.content_hashes is None else store.content_hashes[docs],
                          [store.ids[row] for row in pick], [other if there else own for there in in_reference])
    return docs[gone]


def _reading(scheme: RunInput, universe: int) -> InputOptions:
    """How a store's runs read records, as options to read them again with (integer sets over ``universe``)."""
    options: dict[str, Any] = scheme.reading()
    return InputOptions(**options, universe=universe if scheme.input_format == "sets" else None)


def gone_fields(store: StoredSignatures, gone: np.ndarray) -> dict[str, Any]:
    """The ``gone`` and ``is_gone`` fields of a ``FindResult`` of ``store``'s rows, from the gone rows (int64)."""
    if gone.size == 0:
        return {"gone": [], "is_gone": None}
    flags = np.zeros(len(store), bool)
    flags[gone] = True
    return {"gone": [store.ids[row] for row in gone.tolist()], "is_gone": flags}
