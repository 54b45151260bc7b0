"""One event of a lossless fabric without end-to-end congestion control (InfiniBand credits,
RoCE with PFC only), compiled: :meth:`.flowcontrol.Phases.__call__` from what the senders push
to the rates, at every event of a seed's compiled run (:mod:`.seed_kernel`, any size) and of a
small run's Python loop once the process has Numba loaded.

It makes the same float operations in the same order as the array code it stands for (sums in
entry order, as ``np.bincount`` makes them; sorts stable, as ``np.lexsort`` and the stable
``np.argsort`` are; the small problems' matrix and max-min fill), so a run's rates do not
depend on which of the two computed them. An event of a 64-host incast was about 0.4 ms of
array calls: here one call.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion import kernels
from fabricplan.congestion.fill_kernel import fill_parts
from fabricplan.congestion.fill_links import lone_rows_pruned, row_links
from fabricplan.congestion.jitted import (
    bincount,
    group_order,
    insertion_sort,
    jit,
    runs,
    unique_pairs,
    wrap,
)
from fabricplan.congestion.nic_kernel import held_nics

_brought = kernels.brought()


@jit
def _group_fill(group: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """:func:`.groupfill.group_fill`: each item's max-min share of its group's capacity, never
    above its demand, with the same operations in the same order (a running sum of the sorted
    demands over every group)."""
    n = len(group)
    out = np.empty(n)
    # by group (counting), then by demand within each (insertion: a group holds a few items;
    # equal demands of a group in any order make the same sums)
    order = group_order(group, len(capacity))
    k = 0
    while k < n:
        end = k + 1
        while end < n and group[order[end]] == group[order[k]]:
            end += 1
        insertion_sort(order, demand, k, end)
        k = end
    total = 0.0
    k = 0
    while k < n:
        gk = group[order[k]]
        end = k
        while end < n and group[order[end]] == gk:
            end += 1
        cap = capacity[gk]
        base = 0.0
        level = np.inf
        for pos in range(end - k):
            d = demand[order[k + pos]]
            total += d
            before = total - d
            if pos == 0:
                base = before
            if level == np.inf:
                lv = (cap - (before - base)) / (end - k - pos)
                if lv < d:
                    level = lv
        for pos in range(end - k):
            i = order[k + pos]
            d = demand[i]
            out[i] = d if (d <= level or d != d) else level
        k = end
    return out


@jit
def _one_port_each(
    group: np.ndarray, ports: np.ndarray, m: int, n_groups: int
) -> tuple[int, np.ndarray]:
    """unique_pairs' count and inverse of the keys (group, port) of the first ``m`` members
    when every group's members come through one port (each group is one sub-port: the keys
    sorted are the groups sorted); (-1, empty) when a group has two."""
    port_of = np.full(n_groups, -1, np.int64)
    for k in range(m):
        g = group[k]
        if port_of[g] < 0:
            port_of[g] = ports[k]
        elif port_of[g] != ports[k]:
            return -1, np.zeros(0, np.int64)
    rank = port_of  # reused: each present group's place among them
    n = 0
    for g in range(n_groups):
        if port_of[g] >= 0:
            rank[g] = n
            n += 1
    sub = np.empty(m, np.int64)
    for k in range(m):
        sub[k] = rank[group[k]]
    return n, sub


@jit
def _arbiter_rows(
    hot: tuple[np.ndarray, np.ndarray, np.ndarray],
    up: tuple[np.ndarray, np.ndarray, np.ndarray],
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    lanes: int,
    tolerance: float,
    levels: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arbiters' rows of the fill (``Phases._arbiter_rows``): each hot port shares its
    capacity round-robin over its ingress ports (``hot``: the selected pairs into hot ports,
    each one's hot ingress port, the ports' shares); an ingress port held below what it
    brings shares its share in turn over the ports upstream of it, level after level, while
    any is held (``up``: the selected pairs, each pair's upstream pair, each pair's place
    among the selected or -1; ``pairs``: per pair its ingress lane, column and weight, and per
    selected pair what it brings). Returns the rows' entries (row, column, weight) and the
    rows' caps.

    In loops over scratch arrays made once: the array code's few dozen small arrays per level
    were most of an incast event's time. Same sums in the same order (tested)."""
    h, inv, share = hot
    sel, upstream, at = up
    into, col, w, bring = pairs
    n_h = len(h)
    rows = np.empty(n_h * levels, np.int64)
    cols = np.empty(n_h * levels, np.int64)
    weights = np.empty(n_h * levels)
    caps = np.empty(len(share) + n_h * (levels - 1))
    brought = np.zeros(len(share))
    for k in range(n_h):
        q = sel[h[k]]
        rows[k], cols[k], weights[k] = inv[k], col[q], w[q]
        brought[inv[k]] += bring[h[k]]
    caps[: len(share)] = share
    n_e, n_c, n_rows = n_h, len(share), len(share)
    member = np.empty(n_h, np.int64)
    group = np.empty(n_h, np.int64)
    m = 0
    for k in range(n_h):
        if brought[inv[k]] > share[inv[k]] * (1 + tolerance):
            member[m], group[m] = h[k], inv[k]
            m += 1
    cap_of = share
    prev = np.empty(n_h, np.int64)
    ports = np.empty(n_h, np.int64)
    for _ in range(levels - 1):
        j = 0
        for k in range(m):
            u = upstream[sel[member[k]]]
            if u >= 0:
                member[j], group[j], prev[j] = member[k], group[k], at[u]
                j += 1
        m = j
        if m == 0:
            break
        for k in range(m):
            ports[k] = into[sel[wrap(prev[k], len(sel))]]
        n_s, sub = _one_port_each(group, ports, m, len(cap_of))
        if n_s < 0:
            subs, sub = unique_pairs(group[:m], ports[:m], len(cap_of), lanes)
            n_s = len(subs)
        demand = np.zeros(n_s)
        of = np.empty(n_s, np.int64)  # each sub-port's group (subs // lanes, without dividing)
        for k in range(m):
            demand[sub[k]] += bring[wrap(prev[k], len(bring))]
            of[sub[k]] = group[k]
        dense = np.empty(n_s, np.int64)  # each sub-port's group among the groups here
        above = np.empty(n_s, np.int64)
        n_g = 0
        for i in range(n_s):
            if i == 0 or of[i] != of[i - 1]:
                above[n_g] = of[i]
                n_g += 1
            dense[i] = n_g - 1
        if n_g == n_s:
            sub_share = np.empty(n_s)
            for i in range(n_s):
                sub_share[i] = np.minimum(demand[i], cap_of[above[i]])
        else:
            sub_share = _group_fill(dense, demand, cap_of[above[:n_g]])
        held = np.empty(n_s, np.bool_)
        any_held = False
        for i in range(n_s):
            held[i] = demand[i] > sub_share[i] * (1 + tolerance)
            any_held = any_held or held[i]
        if not any_held:
            break
        for k in range(m):
            q = sel[member[k]]
            rows[n_e], cols[n_e], weights[n_e] = n_rows + sub[k], col[q], w[q]
            n_e += 1
        for i in range(n_s):
            caps[n_c] = sub_share[i] if held[i] else np.inf
            n_c += 1
        n_rows += n_s
        j = 0
        for k in range(m):
            if held[sub[k]]:
                member[j], group[j] = member[k], sub[k]
                j += 1
        m = j
        cap_of = sub_share
    return rows[:n_e], cols[:n_e], weights[:n_e], caps[:n_c]


@jit
def _event(
    running: np.ndarray, push_col: np.ndarray, given: tuple, extra_pause: np.ndarray
) -> tuple:
    """One pass of :func:`pfc_rates` from what the senders push (``Phases._event``): the rates,
    pauses, capacity left, hot lanes and their ingress ports over their share, and the fill's
    problem; ``given``: :func:`pfc_rates`' arguments from ``cap_col`` to ``arbiter_levels``;
    ``extra_pause`` (empty: none): pauses per lane the NICs add."""
    (cap_col, capacity, pairs, ports), (entries, passes, levels, links), limits = given
    threshold_kb, tolerance, arbiter_levels = limits
    p_out, p_in, p_col, p_w, e_in, e_out, upstream, p_port = pairs
    port_keys, p_open, p_window_kb = ports
    lane, first, col_of_entry, weight = entries
    lanes = len(capacity)
    n_cols = len(running)
    push = np.where(running, push_col, 0.0)
    # the pairs of running columns (np.flatnonzero(running[p_col])), and each pair's place
    # among them (-1: not running), in one pass
    at = np.full(len(p_col), -1, np.int64)
    n_sel = 0
    for q in range(len(p_col)):
        if running[p_col[q]]:
            at[q] = n_sel
            n_sel += 1
    sel = np.empty(n_sel, np.int64)
    for q in range(len(p_col)):
        if at[q] >= 0:
            sel[at[q]] = q
    none = np.zeros(0, np.int64)
    bring = _brought(
        lane,
        first,
        col_of_entry,
        weight,
        push,
        capacity,
        e_in,
        e_out,
        p_w,
        sel,
        passes,
        levels,
    )
    out = p_out[sel]
    arriving = bincount(out, bring, lanes)
    hot = np.empty(lanes, np.bool_)
    for j in range(lanes):
        hot[j] = arriving[j] > capacity[j] * (1 + tolerance)
    pause = np.zeros(lanes)
    hot_lanes = np.zeros(0, np.int64)
    n_over = np.zeros(0)
    extra = (none, none, np.zeros(0), np.zeros(0))  # the arbiters' rows: none yet
    if hot.any():
        # the ingress ports of the pairs into hot lanes, and what makes a hot lane fill: an
        # open-loop sender into it, or windows above the threshold for its ingress ports
        marked = np.zeros(len(port_keys), np.bool_)
        n_ports = np.zeros(lanes, np.int64)
        opened = np.zeros(lanes, np.bool_)
        windows = np.zeros(lanes)
        for k in range(len(sel)):
            j = out[k]
            if hot[j]:
                q = sel[k]
                if not marked[p_port[q]]:
                    marked[p_port[q]] = True
                    n_ports[j] += 1
                opened[j] = opened[j] or p_open[q]
                windows[j] += p_window_kb[q]
        for j in range(lanes):
            fills = opened[j] or windows[j] > threshold_kb * max(n_ports[j], 1)
            hot[j] = hot[j] and fills
        # the ports into the lanes still hot, in key order (egress, then ingress lane), and
        # what each brings: its pairs' deliveries summed in pair order
        rank = np.full(len(port_keys), -1, np.int64)
        n_p = 0
        for i in range(len(port_keys)):
            if marked[i] and hot[port_keys[i] // lanes]:
                rank[i] = n_p
                n_p += 1
        p_lane = np.empty(n_p, np.int64)
        p_from = np.empty(n_p, np.int64)
        for i in range(len(port_keys)):
            if rank[i] >= 0:
                p_lane[rank[i]], p_from[rank[i]] = port_keys[i] // lanes, port_keys[i] % lanes
        p_bring = np.zeros(n_p)
        h = np.empty(len(sel), np.int64)  # the pairs into them (places in ``sel``)
        inv = np.empty(len(sel), np.int64)  # each one's port
        n_h = 0
        for k in range(len(sel)):
            if hot[out[k]]:
                h[n_h], inv[n_h] = k, rank[p_port[sel[k]]]
                p_bring[inv[n_h]] += bring[k]
                n_h += 1
        h, inv = h[:n_h], inv[:n_h]
        if len(p_lane):
            # each hot port's round-robin share per ingress port, and the pauses it sends
            starts, dense = runs(p_lane)
            hot_lanes = p_lane[starts]
            share = _group_fill(dense, p_bring, capacity[hot_lanes])
            n_over = np.zeros(len(hot_lanes))
            for k in range(len(p_lane)):
                if p_bring[k] > share[k] * (1 + tolerance):
                    n_over[dense[k]] += 1.0
                    phi = 1.0 - share[k] / max(p_bring[k], 1e-300)
                    pause[p_from[k]] = max(pause[p_from[k]], phi)
            # the arbiters' rows: each hot port's ingress ports, then up the paths
            rows, cols, weights, caps = _arbiter_rows(
                (h, inv, share),
                (sel, upstream, at),
                (p_in, p_col, p_w, bring),
                lanes,
                tolerance,
                arbiter_levels,
            )
            extra = (rows, cols, weights, caps)
    lanes_part = links
    rows_part, extra_cap = row_links(lanes, n_cols, lone_rows_pruned(extra, n_cols))
    if len(extra_pause):  # the NICs the event before held
        pause = np.maximum(pause, extra_pause)
    eff = np.empty(lanes)
    caps_all = np.empty(lanes + len(extra_cap))  # the fill's links: lanes, then the rows
    for j in range(lanes):
        eff[j] = capacity[j] * 1.0 * (1 - pause[j])
        caps_all[j] = eff[j]
    caps_all[lanes:] = extra_cap
    fill = (lanes_part, rows_part)
    rates = fill_parts(lanes_part, rows_part, caps_all, running, cap_col)
    return rates, pause, eff, hot_lanes, n_over, fill, extra_cap


@jit
def pfc_rates(
    running: np.ndarray,
    push_col: np.ndarray,
    cap_col: np.ndarray,
    capacity: np.ndarray,
    pairs: tuple[np.ndarray, ...],
    ports: tuple[np.ndarray, np.ndarray, np.ndarray],
    entries: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    passes: int,
    levels: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    links: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    threshold_kb: float,
    tolerance: float,
    arbiter_levels: int,
    victims: bool,
    turns: tuple,
) -> tuple:
    """Rates of the running columns (``Phases.__call__`` for credit or PFC-only flow control).

    ``pairs``: per port pair, its egress and ingress lanes, column, weight, routed entries
    (ingress, egress), the pair upstream of it (-1: none), its port id; ``ports``: the port ids'
    keys (egress x lanes + ingress), which pairs are open-loop senders, the window (KB) a
    windowed pair may queue; ``entries``: per routed entry its lane, whether it leaves a NIC,
    its column and weight; ``levels``: the entries and pairs by their lane's level for the
    arrivals' sweep (:func:`.rebuild_kernel.entry_levels`; empty: ``passes`` passes instead);
    ``links``: the lanes' links of the fill (:func:`.fill_links.lane_links`); ``turns``: the
    senders' NICs (:mod:`.nic_turns`): per column its NIC's lane, XOFF in bytes, per lane the
    stranded bytes (updated), whether they act, the two tolerances, and the window (us) within
    which onsets are taken together.

    Returns the rates, the pause share per lane, the capacity left per lane, the hot lanes and
    how many of each one's ingress ports bring more than their share, (``victims``, when
    anything pauses) the rates without the pauses (empty otherwise), and the NICs' excess per
    lane, the time to the next NIC's onset and whether any NIC's state can change the rates."""
    lanes = len(capacity)
    given = (
        (cap_col, capacity, pairs, ports),
        (entries, passes, levels, links),
        (threshold_kb, tolerance, arbiter_levels),
    )
    rates, pause, eff, hot_lanes, n_over, fill, extra_cap = _event(
        running, push_col, given, np.zeros(0)
    )
    nic, threshold_bytes, stranded, acting, tolerances, window_us = turns
    held_tolerance, fill_roundoff = tolerances
    excess = np.zeros(lanes)
    onset = np.inf
    live = False
    if acting:
        held, binds, out, paused, excess, onset, live = held_nics(
            nic,
            (pairs[7], pairs[2], pairs[3]),
            threshold_bytes,
            stranded,
            running,
            rates,
            capacity,
            pause,
            held_tolerance,
            fill_roundoff,
            window_us,
        )
        if binds and paused:  # a NIC paused: its senders push only what gets out
            push2 = push_col.copy()
            for c in range(len(nic)):
                if nic[c] >= 0:
                    push2[c] = push_col[c] * out[nic[c]]
            rates, pause, eff, hot_lanes, n_over, fill, extra_cap = _event(
                running, push2, given, held
            )
        elif binds:  # only turns: the same pushes, less room on the NICs
            pause = np.maximum(pause, held)
            eff = capacity * 1.0 * (1 - pause)
            rates = fill_parts(*fill, np.concatenate((eff, extra_cap)), running, cap_col)
    unpaused = np.zeros(0)
    if victims and pause.any():
        unpaused = fill_parts(*fill, np.concatenate((capacity * 1.0, extra_cap)), running, cap_col)
    return rates, pause, eff, hot_lanes, n_over, unpaused, excess, onset, live
