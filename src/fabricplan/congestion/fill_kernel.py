"""The max-min fill by progressive filling, compiled (:func:`.kernels.fill` hands it out):
every event of a large run calls it, and every event of a small one once the process holds it.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import jit

# A link whose unsettled weight is below this (in flow weights) carries no unsettled flow: only
# float round-off is left of it.
EMPTY_WEIGHT = 1e-12


@jit
def fill(
    l_ptr: np.ndarray,
    l_flow: np.ndarray,
    f_ptr: np.ndarray,
    f_link: np.ndarray,
    f_w: np.ndarray,
    capacity: np.ndarray,
    active: np.ndarray,
    cap: np.ndarray,
) -> np.ndarray:
    """Max-min rates. ``l_*``: each link's flows (CSR of the link x flow matrix); ``f_*``:
    each flow's links and weights (CSR of its transpose). A heap item is (share, item): links
    are 0..L-1, a flow's own cap is L + flow. A link has one item in the heap at a time, so no
    two items are equal and they come out in one order whatever keeps them: a binary heap in
    two arrays (the share, the item), ordered by share, then item. (Numba's ``heapq`` on a list
    of tuples took three times as long: most of an incast event's fill.)

    A link's share (residual / unsettled weight) is worked out when its item comes out of the
    heap, not at each settlement that changes it: shares only grow as flows settle at the least
    of them (round-off aside), so an item is never above its link's share, and one that comes
    out below it goes back in at the share then. Settling a flow is two subtractions per link
    on its path (an all-to-all settles a few hundred thousand flows per event), a division only
    per heap item."""
    none = np.zeros(0, l_ptr.dtype)
    rows = (np.zeros(1, l_ptr.dtype), none, none, none, np.zeros(0))
    return fill_parts((l_ptr, l_flow, f_ptr, f_link, f_w), rows, capacity, active, cap)


@jit
def fill_parts(
    lanes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    capacity: np.ndarray,
    active: np.ndarray,
    cap: np.ndarray,
) -> np.ndarray:
    """:func:`fill` of links given in two parts, each as :func:`fill` takes its links: the
    lanes (links 0..L-1) and, after them, the arbiters' rows (each row's columns; per column
    its rows' links, numbered from L, and weights; ``rows``' column pointers empty: none). A
    column's links are its lanes', then its rows': the order, and so the float operations,
    of the two joined into one. An event of a lossless fabric adds its rows to the lanes'
    links of its paths, which stay as they are (:func:`.fill_links.row_links`)."""
    l_ptr, l_flow, f_ptr, f_link, f_w = lanes
    r_ptr, r_flow, g_ptr, g_link, g_w = rows
    n_lane_links = len(l_ptr) - 1
    n_links = n_lane_links + len(r_ptr) - 1
    n_flows = len(f_ptr) - 1
    has_rows = len(g_ptr) > 0
    rate = np.zeros(n_flows)
    settled = ~active
    residual = capacity.astype(np.float64).copy()
    slope = np.zeros(n_links)
    live = np.zeros(n_links, np.bool_)  # a link whose item is in the heap: it may yet bind
    for f in range(n_flows):
        if active[f]:
            for k in range(f_ptr[f], f_ptr[f + 1]):
                slope[f_link[k]] += f_w[k]
            if has_rows:
                for k in range(g_ptr[f], g_ptr[f + 1]):
                    slope[g_link[k]] += g_w[k]
    key = np.empty(n_links + n_flows)
    item = np.empty(n_links + n_flows, np.int64)
    size = 0
    for f in range(n_flows):
        no_rows = not has_rows or g_ptr[f] == g_ptr[f + 1]
        if active[f] and f_ptr[f] == f_ptr[f + 1] and no_rows:  # crosses no link: its cap
            rate[f] = cap[f] if np.isfinite(cap[f]) else 0.0
            settled[f] = True
        elif active[f] and np.isfinite(cap[f]):
            key[size], item[size] = cap[f], n_links + f
            size += 1
    for lane in range(n_links):
        if slope[lane] > EMPTY_WEIGHT:
            share = max(residual[lane], 0.0) / slope[lane]
            if np.isfinite(share):  # a link of infinite capacity never binds
                live[lane] = True
                key[size], item[size] = share, lane
                size += 1
    for start in range(size // 2 - 1, -1, -1):
        _sift_down(key, item, size, start)
    # once every flow is settled the items left settle nothing: most of an incast's lanes come
    # out of the heap after its few binding ones have settled all the flows
    unsettled = np.count_nonzero(~settled)
    while size > 0 and unsettled > 0:
        level, it = key[0], item[0]
        size -= 1
        key[0], item[0] = key[size], item[size]
        _sift_down(key, item, size, 0)
        if it >= n_links:  # a flow's own cap
            lo, hi, single = 0, 1, it - n_links
        elif not live[it]:
            continue
        elif slope[it] <= EMPTY_WEIGHT:  # its flows all settled elsewhere
            live[it] = False
            continue
        else:
            share = max(max(residual[it], 0.0) / slope[it], level)
            if share > level:  # its share has grown since: back in, in its place
                key[size], item[size] = share, it
                _sift_up(key, item, size)
                size += 1
                continue
            if it < n_lane_links:
                lo, hi = l_ptr[it], l_ptr[it + 1]
            else:
                lo, hi = r_ptr[it - n_lane_links], r_ptr[it - n_lane_links + 1]
            single = np.int64(-1)
            live[it] = False
        for k in range(lo, hi):
            if single >= 0:
                f = single
            elif it < n_lane_links:
                f = np.int64(l_flow[k])
            else:
                f = np.int64(r_flow[k])
            if settled[f]:
                continue
            settled[f] = True
            unsettled -= 1
            rate[f] = level
            for j in range(f_ptr[f], f_ptr[f + 1]):
                residual[f_link[j]] -= f_w[j] * level
                slope[f_link[j]] -= f_w[j]
            if has_rows:
                for j in range(g_ptr[f], g_ptr[f + 1]):
                    residual[g_link[j]] -= g_w[j] * level
                    slope[g_link[j]] -= g_w[j]
    return rate


@jit
def _sift_down(key: np.ndarray, item: np.ndarray, size: int, pos: int) -> None:
    """Move the heap's item at ``pos`` down to its place (by share, then item)."""
    k0, i0 = key[pos], item[pos]
    while True:
        c = 2 * pos + 1
        if c >= size:
            break
        r = c + 1
        if r < size and (key[r] < key[c] or (key[r] == key[c] and item[r] < item[c])):
            c = r
        if key[c] < k0 or (key[c] == k0 and item[c] < i0):
            key[pos], item[pos] = key[c], item[c]
            pos = c
        else:
            break
    key[pos], item[pos] = k0, i0


@jit
def _sift_up(key: np.ndarray, item: np.ndarray, pos: int) -> None:
    """Move the heap's item at ``pos`` up to its place (by share, then item)."""
    k0, i0 = key[pos], item[pos]
    while pos > 0:
        parent = (pos - 1) >> 1
        if k0 < key[parent] or (k0 == key[parent] and i0 < item[parent]):
            key[pos], item[pos] = key[parent], item[parent]
            pos = parent
        else:
            break
    key[pos], item[pos] = k0, i0
