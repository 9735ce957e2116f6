"""Small numpy helpers shared by the pipeline stages."""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values in ascending order.

    Same result as ``np.unique`` on 1-D integer arrays, by sort and mask: numpy 2.4's ``np.unique`` took
    about 1 s for 10^6 uint64 values here, against 6 ms for this.
    """
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
