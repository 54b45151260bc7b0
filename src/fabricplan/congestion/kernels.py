"""The flow simulator's inner loops, compiled: they run at every event of every seed.

Max-min sharing by progressive filling, one bottleneck at a time (Bertsekas & Gallager,
*Data Networks*, 2nd ed., section 6.5.2): raise every unsettled flow's rate together; the
link whose fair share (residual capacity / weight of its unsettled flows) is least saturates
first and settles its flows at that share. Taken link by link from a heap, each flow settles
once and each settlement updates only the links on its own path, so the whole fill costs
O(non-zeros x log links), against a round of sparse products per bottleneck level in array
code (an all-to-all over 1,024 GPUs has about 80 such levels per event).

What each ingress port brings to the egress port after it, settled pass by pass along the
paths (:class:`fabricplan.congestion.ports.PathArrivals`).

Numba compiles each on first use and keeps the machine code beside this file, so later
processes load it.
"""

from __future__ import annotations

import heapq
from functools import cache

import numpy as np

# Problems (non-zeros of the flow x link matrix, routed entries) from which the compiled
# kernels are used. Numba costs a process about 0.35 s the first time (0.14 s to import, 0.2 s
# to set up and load a cached kernel): array code is faster below this size, where advise's
# congestion cases all fall (at most ~10k non-zeros on 16k GPUs); an all-to-all over 128 hosts
# (65k) is above it.
COMPILED_MIN_SIZE = 20_000
# A link whose unsettled weight is below this (in flow weights) carries no unsettled flow: only
# float round-off is left of it.
EMPTY_WEIGHT = 1e-12


def _fill(
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
    are 0..L-1, a flow's own cap is L + flow. A link has one item in the heap at a time."""
    n_links = len(l_ptr) - 1
    n_flows = len(f_ptr) - 1
    rate = np.zeros(n_flows)
    settled = ~active
    residual = capacity.astype(np.float64).copy()
    slope = np.zeros(n_links)
    current = np.full(n_links, np.inf)  # each link's live share; inf once nothing can change it
    for f in range(n_flows):
        if active[f]:
            for k in range(f_ptr[f], f_ptr[f + 1]):
                slope[f_link[k]] += f_w[k]
    heap = [(np.inf, np.int64(0))]
    heap.pop()
    for f in range(n_flows):
        if active[f] and f_ptr[f] == f_ptr[f + 1]:  # crosses no link: only its cap binds
            rate[f] = cap[f] if np.isfinite(cap[f]) else 0.0
            settled[f] = True
        elif active[f] and np.isfinite(cap[f]):
            heap.append((cap[f], np.int64(n_links + f)))
    for lane in range(n_links):
        if slope[lane] > EMPTY_WEIGHT:
            current[lane] = max(residual[lane], 0.0) / slope[lane]
            heap.append((current[lane], np.int64(lane)))
    heapq.heapify(heap)
    while len(heap) > 0:
        level, item = heapq.heappop(heap)
        if not np.isfinite(level):
            break  # only uncapped flows on links of infinite capacity remain: they get 0
        if item >= n_links:  # a flow's own cap
            lo, hi, single = 0, 1, item - n_links
        elif level >= current[item]:
            lo, hi, single = l_ptr[item], l_ptr[item + 1], np.int64(-1)
            current[item] = np.inf
        else:
            if np.isfinite(current[item]):  # its share has grown since: back in, in its place
                heapq.heappush(heap, (current[item], item))
            continue
        for k in range(lo, hi):
            f = single if single >= 0 else np.int64(l_flow[k])
            if settled[f]:
                continue
            settled[f] = True
            rate[f] = level
            for j in range(f_ptr[f], f_ptr[f + 1]):
                lane = f_link[j]
                residual[lane] -= f_w[j] * level
                slope[lane] -= f_w[j]
                if not np.isfinite(current[lane]):
                    continue  # saturated already, or of infinite capacity
                if slope[lane] > EMPTY_WEIGHT:
                    # shares only grow as flows settle at the least of them (round-off aside),
                    # so the link's item in the heap is never above its share: it comes out
                    # in time and goes back in at its share then (no push per update)
                    current[lane] = max(max(residual[lane], 0.0) / slope[lane], level)
                else:
                    current[lane] = np.inf
    return rate


def _brought(
    lane: np.ndarray,
    first: np.ndarray,
    col: np.ndarray,
    weight: np.ndarray,
    push: np.ndarray,
    capacity: np.ndarray,
    pair_in: np.ndarray,
    pair_out: np.ndarray,
    pair_weight: np.ndarray,
    sel: np.ndarray,
    passes: int,
) -> np.ndarray:
    """Per selected port pair: what its ingress entry delivers to its egress entry.

    Routed entries (``lane``, column ``col``, share ``weight`` of the column's rate) start with
    what their senders push into the fabric (``first``: the entry leaves a NIC) plus what their
    feeding pairs deliver; a lane fed more than its capacity delivers each of its entries in
    proportion (FIFO). A pair gets ``pair_weight / weight[pair_in]`` of its ingress entry."""
    n = len(lane)
    start = np.zeros(n)
    for i in range(n):
        if first[i]:
            start[i] = push[col[i]] * weight[i]
    arr = start.copy()
    m = len(sel)
    e_in = np.empty(m, np.int64)
    e_out = np.empty(m, np.int64)
    part = np.empty(m)
    for k in range(m):
        e_in[k] = pair_in[sel[k]]
        e_out[k] = pair_out[sel[k]]
        part[k] = pair_weight[sel[k]] / max(weight[e_in[k]], 1e-300)
    bring = np.zeros(m)
    load = np.zeros(len(capacity))
    fifo = np.ones(len(capacity))
    for _ in range(passes):
        load[:] = 0.0
        for i in range(n):
            load[lane[i]] += arr[i]
        for j in range(len(capacity)):
            fifo[j] = min(1.0, capacity[j] / max(load[j], 1e-300))
        for k in range(m):
            bring[k] = arr[e_in[k]] * fifo[lane[e_in[k]]] * part[k]
        arr[:] = start
        for k in range(m):
            arr[e_out[k]] += bring[k]
    return bring


def _jit(fn):
    import numba  # here, not at module level: the CLI's start-up never pays for it

    return numba.njit(cache=True, nogil=True)(fn)


@cache
def fill():
    """:func:`_fill`, compiled."""
    return _jit(_fill)


@cache
def brought():
    """:func:`_brought`, compiled."""
    return _jit(_brought)
