"""One event of a lossless fabric without end-to-end congestion control (InfiniBand credits,
RoCE with PFC only), compiled: :meth:`.flowcontrol.Phases.__call__` from what the senders push
to the rates, for problems below ``kernels.COMPILED_MIN_SIZE`` once the process has Numba
loaded.

It makes the same float operations in the same order as the array code it stands for (sums in
entry order, as ``np.bincount`` makes them; sorts stable, as ``np.lexsort`` and the stable
``np.argsort`` are; the small problems' matrix and max-min fill), so a run's rates do not
depend on which of the two computed them. An event of a 64-host incast was about 0.4 ms of
array calls: here one call.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion import kernels
from fabricplan.congestion.jitted import bincount, by_group, jit, runs, take, unique_inverse

_fill = kernels.fill()
_brought = kernels.brought()


@jit
def _group_fill(group: np.ndarray, demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """:func:`.groupfill.group_fill`: each item's max-min share of its group's capacity, never
    above its demand, with the same operations in the same order (a running sum of the sorted
    demands over every group)."""
    n = len(group)
    out = np.empty(n)
    # by group, then demand: equal demands of a group in any order make the same sums
    order = by_group(np.argsort(demand), group, len(capacity))
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
def _fill_matrix(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_flows: int,
    capacity: np.ndarray,
    active: np.ndarray,
    cap: np.ndarray,
) -> np.ndarray:
    """``waterfill._fill_small``: the exact max-min fill of a link x flow CSR matrix, its stored
    zeros left out."""
    n_links = len(indptr) - 1
    nnz = 0
    for k in range(len(data)):
        if data[k] != 0:
            nnz += 1
    l_ptr = np.zeros(n_links + 1, np.int32)
    flows = np.empty(nnz, np.int32)
    link_of = np.empty(nnz, np.int32)
    weight = np.empty(nnz)
    j = 0
    for lane in range(n_links):
        for k in range(indptr[lane], indptr[lane + 1]):
            if data[k] != 0:
                flows[j], link_of[j], weight[j] = indices[k], lane, data[k]
                j += 1
        l_ptr[lane + 1] = j
    f_ptr = np.zeros(n_flows + 1, np.int32)
    for k in range(nnz):
        f_ptr[flows[k] + 1] += 1
    for f in range(n_flows):
        f_ptr[f + 1] += f_ptr[f]
    order = by_group(np.arange(nnz), flows, n_flows)
    return _fill(l_ptr, flows, f_ptr, link_of[order], weight[order], capacity, active, cap)


@jit
def _with_rows(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_cols: int,
    rows: np.ndarray,
    cols: np.ndarray,
    weights: np.ndarray,
    n_rows: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``waterfill.with_rows`` below the compiled size: the matrix with ``n_rows`` rows more,
    given as entries (those of one cell summed in the order given)."""
    # by row, then column, then place (entries of one cell are summed in the order given)
    n = len(rows)
    order = by_group(by_group(np.arange(n), cols, n_cols), rows, n_rows)
    cell_of = np.empty(n, np.int64)
    c = -1
    last = np.int64(-1)
    for i in range(n):
        key = np.int64(rows[order[i]]) * n_cols + cols[order[i]]
        if i == 0 or key != last:
            c += 1
        cell_of[i] = c
        last = key
    cells = c + 1
    cell_data = np.zeros(cells)
    cell_col = np.empty(cells, np.int64)
    per_row = np.zeros(n_rows, np.int64)
    for i in range(n):
        cell_data[cell_of[i]] += weights[order[i]]
        if i == 0 or cell_of[i] != cell_of[i - 1]:
            cell_col[cell_of[i]] = cols[order[i]]
            per_row[rows[order[i]]] += 1
    ptr = np.empty(len(indptr) + n_rows, np.int64)
    ptr[: len(indptr)] = indptr
    for r in range(n_rows):
        ptr[len(indptr) + r] = ptr[len(indptr) + r - 1] + per_row[r]
    return ptr, np.concatenate((indices, cell_col)), np.concatenate((data, cell_data))


@jit
def _tightest_alone(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_links: int,
    caps: np.ndarray,
    n_cols: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The matrix without the arbiter rows that bind one column alone less tightly than
    another such row of it: most arbiter rows hold a single flow (an incast's sender alone at
    its ingress, level after level), and only the least of a column's shares (cap / weight;
    the first of equal ones) can settle it, the others come out of the fill's heap with the
    column settled already. The rows kept keep their order, so the fill takes the same steps
    and gives the same rates, with a heap a fraction of the size."""
    n_rows = len(caps)
    keep = np.ones(n_rows, np.bool_)
    best = np.full(n_cols, -1, np.int64)
    for r in range(n_rows):
        lo = indptr[n_links + r]
        if indptr[n_links + r + 1] - lo != 1 or data[lo] == 0:
            continue
        c = indices[lo]
        b = best[c]
        if b < 0:
            best[c] = r
        elif caps[r] / data[lo] < caps[b] / data[indptr[n_links + b]]:
            keep[b] = False
            best[c] = r
        else:
            keep[r] = False
    if keep.all():
        return indptr, indices, data, caps
    ptr = np.empty(n_links + 1 + np.count_nonzero(keep), np.int64)
    ptr[: n_links + 1] = indptr[: n_links + 1]
    size = indptr[n_links] + indptr[n_links + n_rows] - indptr[n_links]
    idx = np.empty(size, np.int64)
    dat = np.empty(size)
    idx[: indptr[n_links]] = indices[: indptr[n_links]]
    dat[: indptr[n_links]] = data[: indptr[n_links]]
    k, row = indptr[n_links], n_links
    for r in range(n_rows):
        if keep[r]:
            for j in range(indptr[n_links + r], indptr[n_links + r + 1]):
                idx[k], dat[k] = indices[j], data[j]
                k += 1
            row += 1
            ptr[row] = k
    return ptr, idx[:k].copy(), dat[:k].copy(), caps[keep]


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
    matrix: tuple[np.ndarray, np.ndarray, np.ndarray],
    threshold_kb: float,
    tolerance: float,
    arbiter_levels: int,
    victims: bool,
) -> tuple[np.ndarray, ...]:
    """Rates of the running columns (``Phases.__call__`` for credit or PFC-only flow control).

    ``pairs``: per port pair, its egress and ingress lanes, column, weight, routed entries
    (ingress, egress), the pair upstream of it (-1: none), its port id; ``ports``: the port ids'
    keys (egress x lanes + ingress), which pairs are open-loop senders, the window (KB) a
    windowed pair may queue; ``entries``: per routed entry its lane, whether it leaves a NIC,
    its column and weight; ``matrix``: the lane x column CSR arrays.

    Returns the rates, the pause share per lane, the capacity left per lane, the hot lanes and
    how many of each one's ingress ports bring more than their share, and (``victims``, when
    anything pauses) the rates without the pauses (empty otherwise)."""
    p_out, p_in, p_col, p_w, e_in, e_out, upstream, p_port = pairs
    port_keys, p_open, p_window_kb = ports
    lane, first, col_of_entry, weight = entries
    indptr, indices, data = matrix
    lanes = len(capacity)
    n_cols = len(running)
    push = np.where(running, push_col, 0.0)
    sel = np.flatnonzero(running[p_col])
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
        (none, none, none, none),
    )
    out = p_out[sel]
    arriving = bincount(out, bring, lanes)
    hot = arriving > capacity * (1 + tolerance)
    pause = np.zeros(lanes)
    extra_cap = np.zeros(0)
    hot_lanes = np.zeros(0, np.int64)
    n_over = np.zeros(0)
    m_ptr, m_idx, m_data = indptr, indices, data
    if hot.any():
        h = np.flatnonzero(hot[out])
        sh = sel[h]
        pid = p_port[sh]
        marked = np.zeros(len(port_keys), np.bool_)
        marked[pid] = True
        rank = np.cumsum(marked) - 1
        keys = port_keys[marked]
        inv = rank[pid]
        p_lane, p_from = keys // lanes, keys % lanes
        p_bring = bincount(inv, bring[h], len(keys))
        n_ports = np.zeros(lanes, np.int64)
        for x in p_lane:
            n_ports[x] += 1
        out_h = out[h]
        opened = np.zeros(lanes, np.bool_)
        for k in range(len(h)):
            if p_open[sh[k]]:
                opened[out_h[k]] = True
        windows = bincount(out_h, p_window_kb[sh], lanes)
        for j in range(lanes):
            fills = opened[j] or windows[j] > threshold_kb * max(n_ports[j], 1)
            hot[j] = hot[j] and fills
        keep = hot[p_lane]
        h_keep = hot[out_h]
        h, inv_all = h[h_keep], inv[h_keep]
        remap = np.cumsum(keep) - 1
        inv = remap[inv_all]
        p_lane, p_from, p_bring = p_lane[keep], p_from[keep], p_bring[keep]
        if len(p_lane):
            # each hot port's round-robin share per ingress port, and the pauses it sends
            starts, dense = runs(p_lane)
            hot_lanes = p_lane[starts]
            share = _group_fill(dense, p_bring, capacity[hot_lanes])
            over = p_bring > share * (1 + tolerance)
            n_over = bincount(dense, over.astype(np.float64), len(hot_lanes))
            for k in range(len(p_lane)):
                if over[k]:
                    phi = 1.0 - share[k] / max(p_bring[k], 1e-300)
                    pause[p_from[k]] = max(pause[p_from[k]], phi)
            # the arbiters' rows: each hot port's ingress ports, then up the paths
            into, col, w = p_in[sel], p_col[sel], p_w[sel]
            rows, cols, weights, caps = inv, col[h], w[h], share
            n_rows = len(share)
            at = np.full(len(p_out), -1, np.int64)
            at[sel] = np.arange(len(sel))
            held = bincount(inv, bring[h], len(share)) > share * (1 + tolerance)
            member, group, cap_of = h[held[inv]], inv[held[inv]], share
            for _ in range(arbiter_levels - 1):
                up = upstream[sel[member]]
                go = up >= 0
                member, group = member[go], group[go]
                prev = take(at, up[go])
                if not len(member):
                    break
                subs, sub = unique_inverse(group * lanes + take(into, prev))
                starts, dense = runs(subs // lanes)
                above = subs[starts] // lanes
                demand = bincount(sub, take(bring, prev), len(subs))
                if len(starts) == len(subs):
                    sub_share = np.minimum(demand, cap_of[above])
                else:
                    sub_share = _group_fill(dense, demand, cap_of[above])
                held = demand > sub_share * (1 + tolerance)
                if not held.any():
                    break
                rows = np.concatenate((rows, n_rows + sub))
                cols = np.concatenate((cols, col[member]))
                weights = np.concatenate((weights, w[member]))
                caps = np.concatenate((caps, np.where(held, sub_share, np.inf)))
                n_rows += len(subs)
                member, group, cap_of = member[held[sub]], sub[held[sub]], sub_share
            m_ptr, m_idx, m_data = _with_rows(
                indptr, indices, data, n_cols, rows, cols, weights, len(caps)
            )
            m_ptr, m_idx, m_data, extra_cap = _tightest_alone(
                m_ptr, m_idx, m_data, lanes, caps, n_cols
            )
    eff = capacity * 1.0 * (1 - pause)
    rates = _fill_matrix(
        m_ptr, m_idx, m_data, n_cols, np.concatenate((eff, extra_cap)), running, cap_col
    )
    unpaused = np.zeros(0)
    if victims and pause.any():
        c0 = np.concatenate((capacity * 1.0, extra_cap))
        unpaused = _fill_matrix(m_ptr, m_idx, m_data, n_cols, c0, running, cap_col)
    return rates, pause, eff, hot_lanes, n_over, unpaused
