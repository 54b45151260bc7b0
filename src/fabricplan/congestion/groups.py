"""Grouping equal keys, as ``np.unique`` does, for the small arrays an event handles many
times over: one stable sort (none when the keys are sorted already) and a cumulative sum,
without ``np.unique``'s fixed cost, which is most of the work at a few dozen keys."""

from __future__ import annotations

import numpy as np


def runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of equal values in sorted ``keys``: where each starts, and each item's run number.
    ``np.unique`` of a sorted array, for the small arrays of every event, without its sort."""
    new = np.empty(len(keys), bool)
    new[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    # the methods, not np.flatnonzero and np.cumsum: their wrappers cost more than the work
    return new.nonzero()[0], np.add.accumulate(new, dtype=np.int64) - 1


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)``, by one stable sort and :func:`runs`."""
    order = np.argsort(keys, kind="stable")
    starts, member = runs(keys[order])
    inverse = np.empty(len(keys), np.int64)
    inverse[order] = member
    return keys[order][starts], inverse


def first_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)[1:]``: where each distinct key
    first occurs, and each item's key number, by one stable sort and :func:`runs`."""
    order = np.argsort(keys, kind="stable")
    starts, member = runs(keys[order])
    inverse = np.empty(len(keys), np.int64)
    inverse[order] = member
    return order[starts], inverse
