"""The port tables of a run after a batch of flowlet moves, compiled: what
:class:`.flowcontrol.Phases` builds from the new paths (the lane x column matrix, the port pairs,
the port ids, the arrivals' passes, the arbiters' upstream pairs), for every run of credit or
PFC-only flow control: the small ones whose events run compiled
(:mod:`~fabricplan.congestion.pfc_kernel`) and the large ones whose events take the array code.

The same arrays, in the same order, as the array code (``ports.port_pairs``,
``ports.port_ids``, ``ports._depth``, ``waterfill.matrix_of``,
``Phases._upstream_pairs``): the events that read them make the same float operations in the
same order, so a run does not depend on which built them. A batch of a 64-host incast's moves
was about 0.2 ms of array calls to rebuild, a 128-host all-to-all's about 6 ms; here one call.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import group_order, jit
from fabricplan.congestion.moved_tables import matrix_after, ports_after


@jit
def _stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``: a quicksort, then each run of equal keys in place
    order (the runs are a flow's few entries into one switch)."""
    order = np.argsort(keys)
    n = len(order)
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[order[j]] == keys[order[i]]:
            j += 1
        if j - i > 1:
            order[i:j] = np.sort(order[i:j])
        i = j
    return order


@jit
def port_pairs(
    lane: np.ndarray,
    flow: np.ndarray,
    weight: np.ndarray,
    net: tuple[np.ndarray, np.ndarray, np.ndarray],
    leaf: int,
) -> tuple[np.ndarray, ...]:
    """``ports.port_pairs``: each routed entry leaving a switch joined with the entries of the
    same flow entering it (``net``: lane tails and heads, vertex kinds; a kind from ``leaf`` up
    is a switch). Returns egress, ingress, flow, weight, egress entry, ingress entry."""
    tail, head, kind = net
    vertices = np.int64(len(kind))
    e_out = np.flatnonzero(kind[tail[lane]] >= leaf)
    e_in = np.flatnonzero(kind[head[lane]] >= leaf)
    k_out = flow[e_out].astype(np.int64) * vertices + tail[lane[e_out]]
    k_in = flow[e_in].astype(np.int64) * vertices + head[lane[e_in]]
    order = _stable_argsort(k_in)
    k_sorted = k_in[order]
    m = len(k_sorted)
    run_of = np.empty(m, np.int64)  # each sorted entry's run start
    for i in range(m):
        run_of[i] = i if i == 0 or k_sorted[i] != k_sorted[i - 1] else run_of[i - 1]
    run_end = np.empty(m, np.int64)
    for i in range(m - 1, -1, -1):
        last = i == m - 1 or k_sorted[i + 1] != k_sorted[i]
        run_end[i] = i + 1 if last else run_end[i + 1]
    lo = np.zeros(len(k_out), np.int64)
    count = np.zeros(len(k_out), np.int64)
    for j in range(len(k_out)):
        at = np.searchsorted(k_sorted, k_out[j])
        if at < m and k_sorted[at] == k_out[j]:
            lo[j], count[j] = at, run_end[at] - at
    # what the flow carries through the switch: the weight of everything it brings in, summed
    # in entry order
    through = np.zeros(m)
    first_in = np.empty(len(e_in), np.int64)
    first_in[order] = run_of
    for i in range(len(e_in)):
        through[first_in[i]] += weight[e_in[i]]
    n = count.sum()
    rep_out = np.empty(n, np.int64)
    rep_in = np.empty(n, np.int64)
    w = np.empty(n)
    k = 0
    for j in range(len(k_out)):
        for c in range(count[j]):
            rep_out[k] = e_out[j]
            rep_in[k] = e_in[order[lo[j] + c]]
            w[k] = weight[rep_in[k]] * weight[rep_out[k]] / max(through[lo[j]], 1e-300)
            k += 1
    return lane[rep_out], lane[rep_in], flow[rep_out], w, rep_out, rep_in


@jit
def depth_of(entries: int, e_out: np.ndarray, e_in: np.ndarray) -> int:
    """``ports._depth``: the most port pairs on any flow's path."""
    depth = np.zeros(entries, np.int64)
    nxt = np.zeros(entries, np.int64)
    for k in range(1, entries + 1):
        nxt[:] = 0
        for i in range(len(e_out)):
            nxt[e_out[i]] = max(nxt[e_out[i]], depth[e_in[i]] + 1)
        same = True
        for e in range(entries):
            if nxt[e] != depth[e]:
                same = False
                break
        if same:
            return k - 1
        depth, nxt = nxt, depth
    return depth.max() if entries else 0  # as many passes as pairs: a loop


@jit
def chain_levels(lanes: int, into: np.ndarray, out: np.ndarray, most: int) -> tuple:
    """``ports.lane_levels``: each lane's level, the most port pairs on any chain of lanes
    feeding it (``into[i]`` feeds ``out[i]``), by relaxing the pairs in place until nothing
    changes (the longest chains are unique, so the order of relaxation does not matter).
    Returns whether the chains settle within ``most`` pairs (False: longer, or a loop) and
    the levels. The array code's rounds of ``np.maximum.at`` took a millisecond at each of
    an all-to-all's flowlet rebuilds."""
    level = np.zeros(lanes, np.int64)
    changed = True
    while changed:
        changed = False
        for i in range(len(into)):
            if level[into[i]] + 1 > level[out[i]]:
                level[out[i]] = level[into[i]] + 1
                if level[out[i]] > most:
                    return False, level
                changed = True
    return True, level


@jit
def entry_levels(
    lane: np.ndarray, e_in: np.ndarray, port_keys: np.ndarray, lanes: int, most: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``ports._entry_levels``: the routed entries and the port pairs (by their ingress entry)
    grouped by their lane's level (:func:`chain_levels` over the ports ``port_keys``, egress x
    ``lanes`` + ingress), as orders (stable) and group pointers, for the arrivals' one sweep
    level by level; empty when the chains do not settle within ``most`` pairs."""
    settled, level = chain_levels(lanes, port_keys % lanes, port_keys // lanes, most)
    none = np.zeros(0, np.int64)
    if not settled:
        return none, none, none, none
    bins = (level.max() if lanes else 0) + 1
    entry_level = np.empty(len(lane), np.int64)
    for i in range(len(lane)):
        entry_level[i] = level[lane[i]]
    pair_level = np.empty(len(e_in), np.int64)
    for i in range(len(e_in)):
        pair_level[i] = entry_level[e_in[i]]
    entry_ptr = np.zeros(bins + 1, np.int64)
    pair_ptr = np.zeros(bins + 1, np.int64)
    for x in entry_level:
        entry_ptr[x + 1] += 1
    for x in pair_level:
        pair_ptr[x + 1] += 1
    for b in range(bins):
        entry_ptr[b + 1] += entry_ptr[b]
        pair_ptr[b + 1] += pair_ptr[b]
    return (
        group_order(entry_level, bins),
        entry_ptr,
        group_order(pair_level, bins),
        pair_ptr,
    )


@jit
def _upstream(
    p_col: np.ndarray,
    p_out: np.ndarray,
    p_in: np.ndarray,
    e_out: np.ndarray,
    e_in: np.ndarray,
    lanes: int,
    one_flow_per_column: bool,
) -> np.ndarray:
    """``Phases._upstream_pairs``: per pair, the pair that brought its flow into the switch
    before (-1: it came from a NIC, or split over several)."""
    m = len(p_out)
    if one_flow_per_column:
        entries = 0
        for i in range(m):
            entries = max(entries, e_out[i] + 1, e_in[i] + 1)
        leaving = np.full(entries, -1, np.int64)
        times = np.zeros(entries, np.int64)
        for i in range(m):
            leaving[e_out[i]] = i
            times[e_out[i]] += 1
        up = np.empty(m, np.int64)
        for i in range(m):
            up[i] = leaving[e_in[i]] if times[e_in[i]] == 1 else -1
        return up
    key = p_col.astype(np.int64) * lanes + p_out
    order = _stable_argsort(key)
    ks = key[order]
    up = np.full(m, -1, np.int64)
    for i in range(m):
        q = np.int64(p_col[i]) * lanes + p_in[i]
        lo = np.searchsorted(ks, q)
        hi = np.searchsorted(ks, q, side="right")
        if hi - lo == 1:
            up[i] = order[min(lo, m - 1)]
    return up


@jit
def rebuild(
    routed: tuple[np.ndarray, np.ndarray, np.ndarray],
    leave: np.ndarray,
    fresh: tuple[np.ndarray, np.ndarray],
    old: tuple[np.ndarray, ...],
    moved: np.ndarray,
    net: tuple[np.ndarray, np.ndarray, np.ndarray],
    leaf: int,
    col_of: np.ndarray,
    window_kb: np.ndarray,
    sizes: tuple[int, int, bool],
    before: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple:
    """The run's tables after a batch of moves: the routed entries (those not ``leave``, then
    the ``fresh`` ones), the port pairs (the unmoved flows' ``old`` ones renumbered, then the
    ``moved`` flows' joined again; every entry that leaves or is fresh is a moved flow's),
    the matrix, the port ids, which entries leave a NIC, the upstream pairs, and each pair's
    window (``sizes``: lanes, columns, whether each column is one hop flow). ``before``: the
    matrix (CSR) and the port ids (keys, each old pair's id) the ``old`` pairs had, which the
    columns and ports that did not change keep (empty arrays: built whole). The arrivals'
    passes are the caller's to count (:func:`depth_of`), only where it does not sweep them
    level by level, as ``ports.PathArrivals`` does."""
    lanes, columns, one_flow = sizes
    r_lane, r_flow, r_weight = routed
    tail, _, kind = net
    # the entries that stay, renumbered in order, then the fresh ones
    n_stay = len(r_lane) - np.count_nonzero(leave)
    n_entries = n_stay + len(fresh[0])
    lane = np.empty(n_entries, np.int64)
    flow = np.empty(n_entries, np.int64)
    weight = np.empty(n_entries)
    renumber = np.empty(len(r_lane), np.int64)
    k = 0
    for i in range(len(r_lane)):
        renumber[i] = k - 1 if leave[i] else k  # as cumsum(~leave) - 1
        if not leave[i]:
            lane[k], flow[k], weight[k] = r_lane[i], r_flow[i], r_weight[i]
            k += 1
    for i in range(len(fresh[0])):
        lane[k], flow[k], weight[k] = fresh[0][i], fresh[1][i], 1.0
        k += 1
    sub = np.flatnonzero(moved[flow])
    n_out, n_in, n_flow, n_w, n_e_out, n_e_in = port_pairs(
        lane[sub], flow[sub], weight[sub], net, leaf
    )
    # the unmoved flows' pairs (their entries renumbered), then the moved flows' joined again
    o_out, o_in, o_flow, o_w, o_e_out, o_e_in = old
    n_kept = 0
    for i in range(len(o_flow)):
        n_kept += not moved[o_flow[i]]
    kept = np.empty(n_kept, np.int64)  # each kept pair's place before
    m = n_kept + len(n_out)
    p_out = np.empty(m, np.int64)
    p_in = np.empty(m, np.int64)
    p_flow = np.empty(m, np.int64)
    p_w = np.empty(m)
    e_out = np.empty(m, np.int64)
    e_in = np.empty(m, np.int64)
    k = 0
    for i in range(len(o_flow)):
        if not moved[o_flow[i]]:
            p_out[k], p_in[k], p_flow[k], p_w[k] = o_out[i], o_in[i], o_flow[i], o_w[i]
            e_out[k], e_in[k] = renumber[o_e_out[i]], renumber[o_e_in[i]]
            kept[k] = i
            k += 1
    for i in range(len(n_out)):
        p_out[k], p_in[k], p_flow[k], p_w[k] = n_out[i], n_in[i], n_flow[i], n_w[i]
        e_out[k], e_in[k] = sub[n_e_out[i]], sub[n_e_in[i]]
        k += 1
    pairs = (p_out, p_in, p_flow, p_w, e_out, e_in)
    col = col_of[flow]
    # the columns whose entries changed: those of the moved flows (every entry that leaves or
    # is fresh is one of theirs, as the pairs kept above already take)
    moved_cols = np.zeros(columns, np.bool_)
    for f in range(len(moved)):
        if moved[f]:
            moved_cols[col_of[f]] = True
    matrix = matrix_after(before[:3], (lane, col, weight), moved_cols, lanes)
    keys, p_port = ports_after(before[3:], kept, (p_out, p_in), lanes)
    first = kind[tail[lane]] < leaf
    p_col = col_of[p_flow]
    upstream = _upstream(p_col, p_out, p_in, e_out, e_in, lanes, one_flow)
    p_open = np.empty(m, np.bool_)  # per pair: an open-loop sender's, or the window it queues
    p_window = np.empty(m)
    for i in range(m):
        window = window_kb[p_col[i]]
        p_open[i] = not np.isfinite(window)
        p_window[i] = 0.0 if p_open[i] else window * p_w[i]
    return (
        (lane, flow, weight),
        pairs,
        matrix,
        (keys, p_port),
        first,
        upstream,
        (
            p_open,
            p_window,
        ),
    )
