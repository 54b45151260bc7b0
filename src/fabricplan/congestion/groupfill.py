"""Water-filling within groups, all groups at once: a link's capacity shared among its
ingress ports, each taking at most what it brings (round-robin arbitration is max-min fair
among the ports with something to send)."""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.groups import runs


def group_fill(group: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Share of ``capacity[group[i]]`` item ``i`` gets: max-min fair within its group, never
    above ``demand[i]``. Groups are integers indexing ``capacity``."""
    n = len(group)
    if n == 0:
        return np.zeros(0)
    order = np.lexsort((demand, group))
    g, d = group[order], demand[order]
    starts, member = runs(g)  # each group's first (smallest) item; each item's group
    size = np.bincount(member)
    pos = np.arange(n) - starts[member]
    before = d.cumsum() - d  # demand of the smaller items of the same group, and of others
    before -= before[starts][member]
    left = size[member] - pos
    level = (capacity[g] - before) / left  # the share if this and every larger item were capped
    # the first unmet item of each group sets its level; a group with none gives everything
    # (levels fall after the first unmet item, so it must be the first, not the least)
    hit = (level < d).nonzero()[0]
    first_hit = np.empty(len(hit), bool)
    first_hit[:1] = True
    np.not_equal(member[hit[1:]], member[hit[:-1]], out=first_hit[1:])
    first = np.full(len(starts), np.inf)
    first[member[hit[first_hit]]] = level[hit[first_hit]]
    share = np.minimum(d, first[member])
    out = np.empty(n)
    out[order] = share
    return out
