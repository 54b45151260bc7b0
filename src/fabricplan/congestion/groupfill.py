"""Water-filling within groups, all groups at once: a link's capacity shared among its
ingress ports, each taking at most what it brings (round-robin arbitration is max-min fair
among the ports with something to send)."""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.groups import runs

# Up to this many items the fill runs item by item in Python: for the few ports of an event's
# arbiters numpy's per-call overhead costs more than the arithmetic (about 3x at a handful).
SMALL_GROUPS = 32


def group_fill(group: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Share of ``capacity[group[i]]`` item ``i`` gets: max-min fair within its group, never
    above ``demand[i]``. Groups are integers indexing ``capacity``."""
    n = len(group)
    if n == 0:
        return np.zeros(0)
    if n <= SMALL_GROUPS:
        return _group_fill_small(group.tolist(), demand.tolist(), capacity)
    order = np.lexsort((demand, group))
    g, d = group[order], demand[order]
    starts, member = runs(g)  # each group's first (smallest) item; each item's group
    before = d.cumsum() - d  # demand of the smaller items of the same group, and of others
    before -= before[starts][member]
    # items from this one to the end of its group
    ends = np.empty(len(starts), np.int64)  # where each group ends
    ends[:-1] = starts[1:]
    ends[-1] = n
    left = ends[member] - np.arange(n)
    level = (capacity[g] - before) / left  # the share if this and every larger item were capped
    # the first unmet item of each group sets its level; a group with none gives everything
    # (levels fall after the first unmet item, so it must be the first, not the least)
    hit = (level < d).nonzero()[0]
    first_hit = np.empty(len(hit), bool)
    first_hit[:1] = True
    np.not_equal(member[hit[1:]], member[hit[:-1]], out=first_hit[1:])
    first = np.empty(len(starts))
    first.fill(np.inf)
    first[member[hit[first_hit]]] = level[hit[first_hit]]
    share = np.minimum(d, first[member])
    out = np.empty(n)
    out[order] = share
    return out


def _group_fill_small(group: list[int], demand: list[float], capacity: np.ndarray) -> np.ndarray:
    """:func:`group_fill` item by item, with the same float operations in the same order (the
    demands' running sum runs over every group, as ``np.cumsum`` does there)."""
    # by group, then demand, then place: lexsort's stable order (tuples compare in C)
    order = [i for _, _, i in sorted(zip(group, demand, range(len(group)), strict=True))]
    out = np.empty(len(group))
    total = 0.0  # running sum of the sorted demands
    k = 0
    while k < len(order):
        gk = group[order[k]]
        end = k
        while end < len(order) and group[order[end]] == gk:
            end += 1
        cap = float(capacity[gk])
        base = None  # the group's first item's ``before`` (its sum of the items ahead of it)
        level = np.inf  # the first unmet item's level
        members = order[k:end]
        for pos, i in enumerate(members):
            d = demand[i]
            total += d
            before = total - d
            if base is None:
                base = before
            if level == np.inf:
                lv = (cap - (before - base)) / (end - k - pos)
                if lv < d:
                    level = lv
        for i in members:
            d = demand[i]
            out[i] = d if d <= level or d != d else level
        k = end
    return out
