"""Water-filling within groups, all groups at once: a link's capacity shared among its
ingress ports, each taking at most what it brings (round-robin arbitration is max-min fair
among the ports with something to send)."""

from __future__ import annotations

import numpy as np


def group_fill(group: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Share of ``capacity[group[i]]`` item ``i`` gets: max-min fair within its group, never
    above ``demand[i]``. Groups are integers indexing ``capacity``."""
    n = len(group)
    if n == 0:
        return np.zeros(0)
    order = np.lexsort((demand, group))
    g, d = group[order], demand[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    size = np.diff(np.r_[starts, n])
    pos = np.arange(n) - np.repeat(starts, size)
    before = np.cumsum(d) - d  # demand of the smaller items of the same group, and of others
    before -= np.repeat(before[starts], size)
    left = np.repeat(size, size) - pos
    level = (capacity[g] - before) / left  # the share if this and every larger item were capped
    unmet = level < d
    # the first unmet item of each group sets its level; a group with none gives everything
    # (levels fall after the first unmet item, so it must be the first, not the least)
    first = np.full(len(starts), np.inf)
    hit = np.flatnonzero(unmet)
    grp, at = np.unique(np.searchsorted(starts, hit, "right") - 1, return_index=True)
    first[grp] = level[hit[at]]
    share = np.minimum(d, np.repeat(first, size))
    out = np.empty(n)
    out[order] = share
    return out
