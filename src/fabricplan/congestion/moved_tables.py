"""The lane x column matrix and the port ids after a batch of flowlet moves, from those before
(:func:`.rebuild_kernel.rebuild`), compiled.

A batch moves a few of a run's flows (a 128-host all-to-all's moves about 870 of its 16,256 hop
flows at a time): the matrix's cells of the other columns and the set of ports in use mostly
stay. Sorting every entry again for them was about a fifth of the all-to-all's rebuild. Here the
cells that stay are merged with those of the columns that moved, and the port ids are looked up
among those before while the set of ports stays the same: the arrays that sorting all of it
gives, in their order (tested).
"""

from __future__ import annotations

import numpy as np

from fabricplan.congestion.jitted import by_group, group_order, jit, unique_pairs

# Above this share of the entries in moved columns, the matrix is sorted whole again. Measured
# on a matrix of 64,000 entries over 16,256 columns and 512 lanes (the 128-host all-to-all's
# size): merging took 0.8 ms against 1.3-1.8 ms for the whole sort with 2-5 % of the columns
# moved, 1.0 ms at 10 %, as long at 20 %.
MERGE_MAX_SHARE = 0.2


@jit
def matrix_of(
    lane: np.ndarray, col: np.ndarray, weight: np.ndarray, lanes: int, columns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``waterfill.matrix_of`` as CSR arrays: entries by lane, then column, then place, those
    of one cell summed in that order."""
    order = by_group(group_order(col, columns), lane, lanes)
    return _cells(order, lane, col, weight, lanes)


@jit
def _cells(
    order: np.ndarray, lane: np.ndarray, col: np.ndarray, weight: np.ndarray, lanes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of the entries ``order`` (sorted by lane, column, place), those of one
    cell summed in that order."""
    indptr = np.zeros(lanes + 1, np.int64)
    indices = np.empty(len(order), np.int64)
    data = np.empty(len(order))
    c = -1
    prev_lane, prev_col = -1, -1
    for i in order:
        if c >= 0 and lane[i] == prev_lane and col[i] == prev_col:
            data[c] += weight[i]
        else:
            c += 1
            indices[c], data[c] = col[i], weight[i]
            indptr[lane[i] + 1] += 1
            prev_lane, prev_col = lane[i], col[i]
    for j in range(lanes):
        indptr[j + 1] += indptr[j]
    return indptr, indices[: c + 1], data[: c + 1]


@jit
def matrix_after(
    before: tuple[np.ndarray, np.ndarray, np.ndarray],
    entries: tuple[np.ndarray, np.ndarray, np.ndarray],
    moved_cols: np.ndarray,
    lanes: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`matrix_of` of the ``entries`` (lane, column, weight) given the matrix ``before``
    them (CSR; an empty pointer array: none), where only the columns ``moved_cols`` (a mask)
    changed their entries: the cells of the other columns as they were, merged lane by lane
    with those the moved columns' entries make."""
    lane, col, weight = entries
    columns = len(moved_cols)
    n_moved = 0
    for e in range(len(col)):
        n_moved += moved_cols[col[e]]
    if len(before[0]) == 0 or n_moved > MERGE_MAX_SHARE * len(col):
        return matrix_of(lane, col, weight, lanes, columns)
    sel = np.empty(n_moved, np.int64)
    k = 0
    for e in range(len(col)):
        if moved_cols[col[e]]:
            sel[k] = e
            k += 1
    # the moved columns' cells, by lane, then column, then place (places of ``sel``)
    order = sel[by_group(group_order(col[sel], columns), lane[sel], lanes)]
    new_ptr, new_idx, new_data = _cells(order, lane, col, weight, lanes)
    old_ptr, old_idx, old_data = before
    n = len(new_idx)
    for j in range(lanes):
        for k in range(old_ptr[j], old_ptr[j + 1]):
            n += not moved_cols[old_idx[k]]
    indptr = np.zeros(lanes + 1, np.int64)
    indices = np.empty(n, np.int64)
    data = np.empty(n)
    c = 0
    for j in range(lanes):
        a, a_end = old_ptr[j], old_ptr[j + 1]
        b, b_end = new_ptr[j], new_ptr[j + 1]
        while a < a_end or b < b_end:
            if a < a_end and moved_cols[old_idx[a]]:
                a += 1
            elif b == b_end or (a < a_end and old_idx[a] < new_idx[b]):
                indices[c], data[c] = old_idx[a], old_data[a]
                a += 1
                c += 1
            else:  # a moved column's cell: never one that stayed (its column's are all new)
                indices[c], data[c] = new_idx[b], new_data[b]
                b += 1
                c += 1
        indptr[j + 1] = c
    return indptr, indices, data


@jit
def ports_after(
    before: tuple[np.ndarray, np.ndarray],
    kept: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray],
    lanes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``unique_pairs`` of the port pairs' keys (egress x ``lanes`` + ingress): the sorted
    distinct keys and each pair's index among them. ``before``: the keys and the port ids of
    the pairs before (empty keys: none); the first ``len(kept)`` pairs now are those pairs
    ``kept`` (their places before, in order). While every key before is still used and no
    new one appears, the keys stay and the ids are looked up; else sorted again."""
    keys, ids = before
    out, into = pairs
    m = len(out)
    if len(keys) == 0:
        return unique_pairs(out, into, lanes, lanes)
    count = np.zeros(len(keys), np.int64)
    p_port = np.empty(m, np.int64)
    for i in range(len(kept)):
        p_port[i] = ids[kept[i]]
        count[p_port[i]] += 1
    for i in range(len(kept), m):
        key = np.int64(out[i]) * lanes + into[i]
        at = np.searchsorted(keys, key)
        if at == len(keys) or keys[at] != key:
            return unique_pairs(out, into, lanes, lanes)
        p_port[i] = at
        count[at] += 1
    for k in range(len(keys)):
        if count[k] == 0:
            return unique_pairs(out, into, lanes, lanes)
    return keys, p_port
