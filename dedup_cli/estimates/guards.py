"""Argument guards of the estimator functions: array conversion and the checks every formula needs.

The formulas take array-likes, broadcast them against each other and return float64 (a numpy float64 scalar
when every input is a scalar, as numpy's own ufuncs do). A value no caller should pass (b outside 1..64, a
ratio r = f/D outside [0, 1], a non-positive k) is a ``ValueError``: user options are validated before they
get here, by :mod:`dedup_cli.options`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

MAX_BITS = 64
THREE_WAY_BITS_MESSAGE = "3-way estimation needs bits 2 or more; 1-bit values carry no 3-way information"


def as_float(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def as_result(x: ArrayLike) -> FloatArray:
    """A float64 array, or a numpy float64 scalar for 0-d results (the ufunc convention)."""
    return np.asarray(x, dtype=np.float64)[()]


def check_bits(bits: ArrayLike, minimum: int = 1) -> NDArray[np.int64]:
    """``bits`` (b: an int or an array of ints, ``minimum`` ≤ b ≤ 64) as int64; ValueError otherwise."""
    array = np.asarray(bits)
    if array.dtype.kind == "b":
        raise ValueError(f"bits must be whole numbers, not booleans: got {bits!r}")
    if array.dtype.kind not in "iu":
        as_floats = np.asarray(array, dtype=np.float64)
        if not np.all(np.isfinite(as_floats)) or np.any(as_floats != np.round(as_floats)):
            raise ValueError(f"bits must be whole numbers (integers), got {bits!r}")
        array = as_floats
    array = array.astype(np.int64)
    if np.any(array < minimum) or np.any(array > MAX_BITS):
        if minimum >= 2 and np.any(array < 2):
            raise ValueError(THREE_WAY_BITS_MESSAGE)
        raise ValueError(f"bits {bits!r} is out of range; use {minimum} to {MAX_BITS}")
    return array


def whole_bits(bits: int) -> int:
    """One b in 1..64, as a Python int (:func:`check_bits` of a scalar)."""
    return int(check_bits(bits)[()])


def check_ratio(r: ArrayLike, name: str = "r") -> FloatArray:
    """A set-size ratio ``r = f / D`` in [0, 1] (NaN passes through), as float64."""
    array = as_float(r)
    if np.any(array < 0.0) or np.any(array > 1.0):
        raise ValueError(f"{name} = f / D must lie in [0, 1]: the set size divided by the universe size")
    return array


def check_positive(k: ArrayLike, name: str = "k") -> FloatArray:
    array = as_float(k)
    if np.any(array <= 0):
        raise ValueError(f"{name} must be positive: the number of signature positions")
    return array


def check_level(level: float) -> float:
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level!r}; e.g. 0.95")
    return float(level)
