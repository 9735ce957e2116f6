"""How many bytes named documents took when they were signed: what deleting them would free (``review``'s bytes to
drop), read from the store's ``size`` column (a whole file's size, a record's bytes) and never from the inputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from dedup_cli.store.store import Store


def document_sizes(store: Store, ids: Sequence[str]) -> np.ndarray:
    """int64[len(ids)]: each named live document's size in bytes when it was signed, -1 for an id the store does not
    hold. The store's ids and sizes are read once, as columns (no signature), and looked up with Arrow."""
    if not len(ids):
        return np.empty(0, np.int64)
    import pyarrow.compute as pc  # 30-50 ms: only for the commands that need it

    index = store.document_index()
    rows = pc.fill_null(pc.index_in(pa.array(list(ids), pa.string()), value_set=index.id_array), -1)
    found = rows.to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(found >= 0, index.sizes[np.maximum(found, 0)], -1).astype(np.int64)
