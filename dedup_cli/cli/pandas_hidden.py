"""pyarrow as the core install has it, without pandas, for commands that never hand pyarrow a pandas object.

When pandas is installed (the ``dask`` extra brings it), pyarrow imports it the first time it converts anything
(``pa.array``, ``to_numpy``, an empty table), to recognise pandas objects among its inputs: 0.27 s, more than
signing one small file takes. The core install has no pandas and pyarrow works as well without it, and
neither engine uses pandas, so the command line hides pandas from the imports made while a command runs,
exactly as if it were not installed. Nothing is hidden once pandas has been imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _NoPandas:
    """A module finder under which ``import pandas`` fails as if pandas were not installed."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@contextmanager
def pandas_hidden(hide: bool = True) -> Iterator[None]:
    """Within: ``import pandas`` fails, unless pandas was imported already or ``hide`` is False (then nothing
    changes)."""
    if not hide or "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
