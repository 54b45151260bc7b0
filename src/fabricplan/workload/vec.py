"""Element-wise arithmetic on a plan's values: the (N,) arrays of a batch of plans, or one
plan's NumPy scalars.

The step model is written once, for arrays. Asked for a single plan, it runs on NumPy float64
scalars instead: an operator on a scalar costs about a tenth of what it costs on a one-element
array (some 60 ns against 500). NumPy's functions (``np.where``, ``np.maximum``, ...) go the
other way, slower on a scalar than on an array, so the ones the model calls are here: a
scalar's case in Python, anything with an array handed to NumPy unchanged. Both paths do the
same IEEE arithmetic, so one plan's figures are bit for bit those of the same plan in a batch.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

# What one plan's values are: NumPy scalars, with NumPy's arithmetic (a division by zero is
# inf and a warning, as in an array, not Python's ZeroDivisionError).
_SCALARS = (float, int, bool, np.floating, np.integer, np.bool_)
# The functions below test ``type(x) is _ARRAY`` in line: a call to is_batch would cost more
# than some of them.
_ARRAY = np.ndarray


def is_batch(x: object) -> bool:
    """Whether ``x`` is an array of plans' values (not one plan's scalar)."""
    return type(x) is _ARRAY


def floats(x: ArrayLike) -> np.ndarray:
    """``x`` as float64: ``np.asarray(x, dtype=float)`` for arrays, a NumPy scalar for one."""
    if isinstance(x, _SCALARS):
        return np.float64(x)  # type: ignore[return-value]
    return np.asarray(x, dtype=float)


def bools(x: ArrayLike) -> np.ndarray:
    """``x`` as booleans: ``np.asarray(x, dtype=bool)`` for arrays, a NumPy bool for one."""
    if isinstance(x, _SCALARS):
        return np.bool_(x)  # type: ignore[return-value]
    return np.asarray(x, dtype=bool)


def where(cond: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``np.where(cond, a, b)``, as a float64 scalar when all three are scalars."""
    if type(cond) is _ARRAY or type(a) is _ARRAY or type(b) is _ARRAY:
        return np.where(cond, a, b)
    return np.float64(a if cond else b)  # type: ignore[arg-type, return-value]


def maximum(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``np.maximum(a, b)``, as a float64 scalar when both are scalars (NaN propagates)."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.maximum(a, b)
    if a >= b:  # type: ignore[operator]
        return np.float64(a)  # type: ignore[arg-type, return-value]
    if a < b:  # type: ignore[operator]
        return np.float64(b)  # type: ignore[arg-type, return-value]
    return np.float64(np.nan)  # type: ignore[return-value]


def minimum(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``np.minimum(a, b)``, as a float64 scalar when both are scalars (NaN propagates)."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.minimum(a, b)
    if a <= b:  # type: ignore[operator]
        return np.float64(a)  # type: ignore[arg-type, return-value]
    if a > b:  # type: ignore[operator]
        return np.float64(b)  # type: ignore[arg-type, return-value]
    return np.float64(np.nan)  # type: ignore[return-value]


def ceil(x: ArrayLike) -> np.ndarray:
    """``np.ceil(x)``; a scalar's in Python (inf and NaN unchanged, as NumPy leaves them)."""
    if type(x) is _ARRAY:
        return np.ceil(x)
    f = float(x)  # type: ignore[arg-type]
    return np.float64(math.ceil(f) if math.isfinite(f) else f)  # type: ignore[return-value]


def floor(x: ArrayLike) -> np.ndarray:
    """``np.floor(x)``; a scalar's in Python (inf and NaN unchanged, as NumPy leaves them)."""
    if type(x) is _ARRAY:
        return np.floor(x)
    f = float(x)  # type: ignore[arg-type]
    return np.float64(math.floor(f) if math.isfinite(f) else f)  # type: ignore[return-value]


def full(like: ArrayLike, value: float) -> np.ndarray:
    """``value`` for every plan of ``like``: an array of its shape, or a scalar for one plan."""
    if type(like) is _ARRAY:
        return np.full(np.shape(like), value, dtype=float)
    return np.float64(value)  # type: ignore[return-value]


def rows(x: ArrayLike) -> np.ndarray:
    """``x`` as an array of plans: one plan's scalar becomes an array of one."""
    return x if type(x) is _ARRAY else np.array([x], dtype=float)  # type: ignore[return-value]
