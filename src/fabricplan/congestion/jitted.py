"""What the compiled event code shares (:mod:`~fabricplan.congestion.pfc_kernel`,
:mod:`~fabricplan.congestion.move_kernel`, :mod:`~fabricplan.congestion.due_kernel`,
:mod:`~fabricplan.congestion.rebuild_kernel`): the
decorator, sums made in NumPy's order and a stable sort by small integers.

Numba is imported here, at module level: only those modules import this one, and only a run
that reaches them imports those, never the CLI's start-up.
"""

from __future__ import annotations

import numba
import numpy as np

# Compiled once and kept beside the module; float errors as NumPy has them (a division by zero
# gives inf or nan, as in the array code these functions stand for, instead of raising).
jit = numba.njit(cache=True, nogil=True, error_model="numpy")


@jit
def bincount(index: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """``np.bincount(index, weights, minlength=n)``: each bin summed in entry order."""
    out = np.zeros(n)
    for i in range(len(index)):
        out[index[i]] += weights[i]
    return out


@jit
def by_group(order: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """``order`` sorted stably by ``group[order]`` (integers below ``n_groups``), by counting:
    Numba's stable argsort is a merge sort several times slower than NumPy's."""
    start = np.zeros(n_groups + 1, np.int64)
    for i in order:
        start[group[i] + 1] += 1
    for g in range(n_groups):
        start[g + 1] += start[g]
    out = np.empty(len(order), np.int64)
    for i in order:
        out[start[group[i]]] = i
        start[group[i]] += 1
    return out


@jit
def level_of(queue_kb: float, level_kb: np.ndarray) -> float:
    """A queue's level: how many of the sorted thresholds ``level_kb`` it is above
    (``np.searchsorted(level_kb, queue_kb, "left")``)."""
    n = 0
    for x in level_kb:
        if x < queue_kb:
            n += 1
    return float(n)


@jit
def levels(queue: np.ndarray, level_kb: np.ndarray) -> np.ndarray:
    """:func:`level_of` of each queue."""
    out = np.zeros(len(queue))
    for j in range(len(queue)):
        out[j] = level_of(queue[j], level_kb)
    return out


@jit
def clip01(x: float) -> float:
    """``np.clip(x, 0, 1)`` (nan stays nan)."""
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)
