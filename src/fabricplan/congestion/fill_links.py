"""The links of an event's max-min fill on a lossless fabric, compiled: the lanes (the lane x
column matrix) and the arbiters' rows below them (:mod:`~fabricplan.congestion.pfc_kernel`), as
the fill (:mod:`~fabricplan.congestion.fill_kernel`) takes them, without the rows that cannot
bind.
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import by_group, jit


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
    set of paths and each event adds its arbiters' rows (:func:`fill_problem`): building them
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
def fill_problem(
    lanes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    n_cols: int,
    extra: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple:
    """The max-min fill's links as the fill takes them: the lanes' (:func:`lane_links`), then
    the arbiters' rows ``extra`` (entries row, column, weight, and each row's cap) as links
    after them, stored zeros left out; and the rows' caps. The rows' entries of one cell are
    summed in the order given (``waterfill.with_rows``); the rows come pruned
    (:func:`lone_rows_pruned`). Without rows, the lanes' links as they are."""
    l_ptr0, flows0, f_ptr0, f_link0, f_w0 = lanes
    rows, cols, weights, caps = extra
    n_lanes = len(l_ptr0) - 1
    n_rows, n = len(caps), len(rows)
    if n_rows == 0:
        return l_ptr0, flows0, f_ptr0, f_link0, f_w0, caps.copy()
    # the rows' cells: by row, then column, then place
    order = by_group(by_group(np.arange(n), cols, n_cols), rows, n_rows)
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
    n_lane_links = len(flows0)
    nnz = n_lane_links
    for k in range(row_start[n_rows]):
        if cell_w[k] != 0:
            nnz += 1
    l_ptr = np.empty(n_lanes + n_rows + 1, np.int32)
    l_ptr[: n_lanes + 1] = l_ptr0
    flows = np.empty(nnz, np.int32)
    flows[:n_lane_links] = flows0
    # the rows' links: per column, how many, then each column's lanes' links before its rows'
    n_extra = np.zeros(n_cols, np.int32)
    j = n_lane_links
    link = n_lanes
    for r in range(n_rows):
        for k in range(row_start[r], row_start[r + 1]):
            if cell_w[k] != 0:
                flows[j] = cell_col[k]
                n_extra[cell_col[k]] += 1
                j += 1
        link += 1
        l_ptr[link] = j
    f_ptr = np.empty(n_cols + 1, np.int32)
    f_ptr[0] = 0
    for f in range(n_cols):
        f_ptr[f + 1] = f_ptr[f] + (f_ptr0[f + 1] - f_ptr0[f]) + n_extra[f]
    f_link = np.empty(nnz, np.int32)
    f_w = np.empty(nnz)
    at = np.empty(n_cols, np.int32)
    for f in range(n_cols):
        k0, k = f_ptr0[f], f_ptr[f]
        for i in range(f_ptr0[f + 1] - k0):
            f_link[k + i], f_w[k + i] = f_link0[k0 + i], f_w0[k0 + i]
        at[f] = k + f_ptr0[f + 1] - k0
    link = n_lanes
    for r in range(n_rows):
        for k in range(row_start[r], row_start[r + 1]):
            if cell_w[k] != 0:
                col = cell_col[k]
                f_link[at[col]], f_w[at[col]] = link, cell_w[k]
                at[col] += 1
        link += 1
    return l_ptr, flows, f_ptr, f_link, f_w, caps.copy()
