"""What the compiled kernels share (the ``*_kernel`` modules and
:mod:`~fabricplan.congestion.seed_parts`): the decorator, sums made in NumPy's order, a stable
sort by small integers, grouping of equal keys and NumPy's reading of negative indices.

Numba is imported here, at module level: only those modules import this one, and only a run
that reaches them imports those, never the CLI's start-up.
"""

from __future__ import annotations

import numba
import numpy as np

# Compiled once and kept beside the module; float errors as NumPy has them (a division by zero
# gives inf or nan, as in the array code these functions stand for, instead of raising).
jit = numba.njit(cache=True, nogil=True, error_model="numpy")
# The same, inlined where it is called: small helpers called per lane or per port in a loop,
# which as calls of their own cost more than their work (an array argument is reference-
# counted at each call: a 64-host incast's events called ``level_of`` about 400 times each).
inlined = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")


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
def group_order(group: np.ndarray, n_groups: int) -> np.ndarray:
    """``by_group(np.arange(len(group)), group, n_groups)``: the places 0, 1, ... sorted stably
    by their group, reading ``group`` in order (no index array to make and gather through)."""
    start = np.zeros(n_groups + 1, np.int64)
    for i in range(len(group)):
        start[group[i] + 1] += 1
    for g in range(n_groups):
        start[g + 1] += start[g]
    out = np.empty(len(group), np.int64)
    for i in range(len(group)):
        out[start[group[i]]] = i
        start[group[i]] += 1
    return out


@inlined
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


@inlined
def clip01(x: float) -> float:
    """``np.clip(x, 0, 1)`` (nan stays nan)."""
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


@jit
def runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.groups.runs`: where each run of equal sorted keys starts, each item's run."""
    n = len(keys)
    member = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    k = -1
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            k += 1
            starts[k] = i
        member[i] = k
    return starts[: k + 1], member


# Up to this many keys an insertion sort beats sorting by counting (two passes over every
# value ``lo`` may take: a fabric's lanes).
INSERTION_SORT_MAX = 32


@jit
def unique_pairs(
    hi: np.ndarray, lo: np.ndarray, n_hi: int, n_lo: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.groups.unique_inverse` of the keys ``hi * n_lo + lo`` (the sorted distinct keys,
    each key's index among them; ``hi`` below ``n_hi``, ``lo`` below ``n_lo``), sorted without
    comparisons by counting, or by insertion when they are few: the port ids of a rebuild, an
    arbiter level's ingress ports (a few dozen at a time)."""
    n = len(hi)
    keys = np.empty(n, np.int64)
    for i in range(n):
        keys[i] = np.int64(hi[i]) * n_lo + lo[i]
    if n > INSERTION_SORT_MAX:
        order = by_group(group_order(lo, n_lo), hi, n_hi)
    else:
        order = np.arange(n)
        insertion_sort(order, keys, 0, n)
    starts, member = runs(keys[order])
    inverse = np.empty(n, np.int64)
    inverse[order] = member
    return keys[order][starts], inverse


@inlined
def _after(a: float, b: float) -> bool:
    """Whether ``a`` sorts after ``b`` as NumPy sorts (nan last)."""
    return a > b or (a != a and b == b)


@jit
def insertion_sort(order: np.ndarray, keys: np.ndarray, lo: int, hi: int) -> None:
    """``order[lo:hi]`` sorted stably by ``keys[order]`` in place, nan last as NumPy sorts
    floats: for the few items a compiled kernel sorts at a time."""
    for i in range(lo + 1, hi):
        o = order[i]
        j = i - 1
        while j >= lo and _after(keys[order[j]], keys[o]):
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = o


@inlined
def wrap(i: int, n: int) -> int:
    """Index ``i`` of an array of ``n`` as NumPy reads it (-1: the last)."""
    return i + n if i < 0 else i
