"""Optional engines: whether the Dask engine can run here, and how to install it.

Checked before any I/O with :func:`importlib.util.find_spec`, which imports nothing, so that ``--engine dask``
without the extra is a one-line error rather than an ImportError halfway through a run.
"""

from __future__ import annotations

import importlib.util

from dedup_cli.errors import DedupError

DASK_EXTRA = "pip install 'dedup-cli[dask]'"
DASK_MODULES = ("dask", "distributed")


def require_dask() -> None:
    """Raise a :class:`DedupError` naming the install command unless Dask and distributed are importable."""
    missing = [name for name in DASK_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise DedupError(f"{{engine}} dask needs the dask extra ({', '.join(missing)} not installed); install it "
                         f"with: {DASK_EXTRA}", options=True)
