"""Format 1: a store that is one Parquet file with its parameters in the file's metadata; read, never extended.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from dedup_cli.errors import StoreError
from dedup_cli.store.format import one_line, open_parquet


def read_legacy_table(path: Path, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a format 1 store, all its rows (a ``run`` column, if asked for, is 0 throughout)."""
    stored = [name for name in columns if name != "run"]
    try:
        table = open_parquet(path).read(columns=stored)
    except (pa.ArrowException, OSError) as error:
        raise StoreError(f"{path} is damaged ({one_line(error)}); sign the corpus again into a new store") from error
    if "run" in columns:
        table = table.append_column("run", pa.array(np.zeros(table.num_rows, dtype=np.int64)))
    return table


def legacy_error(path: Path) -> StoreError:
    return StoreError(
        f"{path} is a single-file store (format 1) from an older dedup and cannot be signed into incrementally; "
        f"sign into a new store (dedup sign INPUT -o NEW) or remove {path} and sign again"
    )
