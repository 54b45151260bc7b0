"""The links of an event's max-min fill on a lossless fabric, compiled: the lanes (the lane x
column matrix) and the arbiters' rows below them (:mod:`~fabricplan.congestion.pfc_kernel`), as
the fill (:mod:`~fabricplan.congestion.fill_kernel`) takes them, without the rows that cannot
bind.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import by_group, group_order, jit


@jit
def lone_rows_pruned(
    extra: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], n_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arbiters' rows (entries row, column, weight; each row's cap) without those that
    hold a single column less tightly than another such row of it (cap / weight, the
    weights of its entries summed in order; the first of equal ones stays): most arbiter rows
    hold a single flow (an incast's sender alone at its ingress, level after level), and only
    the least of a column's shares can settle it, the others come out of the fill's heap with
    the column settled already. The rows kept keep their order (renumbered from 0) and their
    entries theirs, so the fill takes the same steps and gives the same rates (tested), with
    a heap a fraction of the size; found in one pass over the entries (a 64-host incast's
    event keeps about 140 of 400), before the fill's problem sorts them."""
    rows, cols, weights, caps = extra
    n_rows = len(caps)
    lone_col = np.full(n_rows, -1, np.int64)  # the row's one column; -2: several
    summed = np.zeros(n_rows)
    for e in range(len(rows)):
        r = rows[e]
        if lone_col[r] == -1:
            lone_col[r] = cols[e]
        elif lone_col[r] != cols[e]:
            lone_col[r] = -2
        summed[r] += weights[e]
    keep = np.ones(n_rows, np.bool_)
    best = np.full(n_cols, -1, np.int64)
    for r in range(n_rows):
        c = lone_col[r]
        if c < 0 or summed[r] == 0:
            continue
        b = best[c]
        if b < 0:
            best[c] = r
        elif caps[r] / summed[r] < caps[b] / summed[b]:
            keep[b] = False
            best[c] = r
        else:
            keep[r] = False
    new = np.cumsum(keep) - 1
    n = 0
    for e in range(len(rows)):
        n += keep[rows[e]]
    out_rows = np.empty(n, np.int64)
    out_cols = np.empty(n, np.int64)
    out_w = np.empty(n)
    n = 0
    for e in range(len(rows)):
        if keep[rows[e]]:
            out_rows[n], out_cols[n], out_w[n] = new[rows[e]], cols[e], weights[e]
            n += 1
    return out_rows, out_cols, out_w, caps[keep]


@jit
def lane_links(matrix: tuple[np.ndarray, np.ndarray, np.ndarray], n_cols: int) -> tuple:
    """The max-min fill's links of the lanes alone (the lane x column CSR ``matrix``), as the
    fill takes them: per link its columns, per column its links and weights (in link order),
    stored zeros left out. They change only when the paths do, so a run builds them once per
    set of paths and each event adds its arbiters' rows (:func:`row_links`): building them
    at every event was a third of a 192-host all-to-all's event (3 of 9 ms)."""
    indptr, indices, data = matrix
    n_lanes = len(indptr) - 1
    nnz = 0
    for k in range(len(data)):
        if data[k] != 0:
            nnz += 1
    l_ptr = np.zeros(n_lanes + 1, np.int32)
    flows = np.empty(nnz, np.int32)
    link_of = np.empty(nnz, np.int32)
    weight = np.empty(nnz)
    j = 0
    for lane in range(n_lanes):
        for k in range(indptr[lane], indptr[lane + 1]):
            if data[k] != 0:
                flows[j], link_of[j], weight[j] = indices[k], lane, data[k]
                j += 1
        l_ptr[lane + 1] = j
    # per column its links in link order: each link's entries placed at its column's next slot
    f_ptr = np.zeros(n_cols + 1, np.int32)
    for k in range(nnz):
        f_ptr[flows[k] + 1] += 1
    for f in range(n_cols):
        f_ptr[f + 1] += f_ptr[f]
    at = f_ptr[:-1].copy()
    f_link = np.empty(nnz, np.int32)
    f_w = np.empty(nnz)
    for k in range(nnz):
        c = flows[k]
        f_link[at[c]], f_w[at[c]] = link_of[k], weight[k]
        at[c] += 1
    return l_ptr, flows, f_ptr, f_link, f_w


@jit
def row_links(
    n_lanes: int, n_cols: int, extra: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> tuple:
    """The arbiters' rows ``extra`` (entries row, column, weight, and each row's cap) as the
    second part of :func:`.fill_kernel.fill_parts`' links, after ``n_lanes`` lanes: per row
    its columns, per column its rows' links (numbered from ``n_lanes``, in row order) and
    weights, stored zeros left out; and the rows' caps (the entries of a row's cell summed in
    the order given, as ``waterfill.with_rows`` sums them). The lanes' links stay as they are:
    an event had copied them into one problem with its rows (in a 128-host all-to-all about
    60,000 lanes' links beside 11,000 rows' entries, at every event)."""
    rows, cols, weights, caps = extra
    n_rows, n = len(caps), len(rows)
    # the rows' cells: by row, then column, then place
    order = by_group(group_order(cols, n_cols), rows, n_rows)
    cell_col = np.empty(n, np.int64)
    cell_w = np.zeros(n)
    row_start = np.zeros(n_rows + 1, np.int64)
    c = -1
    for i in range(n):
        e = order[i]
        if c < 0 or rows[e] != rows[order[i - 1]] or cols[e] != cell_col[c]:
            c += 1
            cell_col[c] = cols[e]
            row_start[rows[e] + 1] += 1
        cell_w[c] += weights[e]
    for r in range(n_rows):
        row_start[r + 1] += row_start[r]
    r_ptr = np.zeros(n_rows + 1, np.int32)
    nnz = 0
    for r in range(n_rows):
        for k in range(row_start[r], row_start[r + 1]):
            if cell_w[k] != 0:
                nnz += 1
        r_ptr[r + 1] = nnz
    r_flow = np.empty(nnz, np.int32)
    g_ptr = np.zeros(n_cols + 1, np.int32)
    j = 0
    for r in range(n_rows):
        for k in range(row_start[r], row_start[r + 1]):
            if cell_w[k] != 0:
                r_flow[j] = cell_col[k]
                g_ptr[cell_col[k] + 1] += 1
                j += 1
    for f in range(n_cols):
        g_ptr[f + 1] += g_ptr[f]
    at = g_ptr[:-1].copy()
    g_link = np.empty(nnz, np.int32)
    g_w = np.empty(nnz)
    for r in range(n_rows):
        for k in range(row_start[r], row_start[r + 1]):
            if cell_w[k] != 0:
                col = cell_col[k]
                g_link[at[col]], g_w[at[col]] = n_lanes + r, cell_w[k]
                at[col] += 1
    return (r_ptr, r_flow, g_ptr, g_link, g_w), caps.copy()
