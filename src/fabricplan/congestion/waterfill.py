"""Max-min fair rates on a weighted flow x link matrix, and flow completion by events.

``A[l, f]`` is the share of flow ``f``'s rate that crosses link ``l``: 1 for a plain path,
fractions when a flow is split (queue pairs on different ECMP paths, packet spraying), more
than 1 when a coupled flow (a ring channel) crosses a link at several of its hops. The rates
are those of progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., section
6.5.2): for large problems exactly, by a compiled kernel in O(non-zeros x log links); for
small ones in rounds of sparse products that settle every independent bottleneck at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
from scipy.sparse import csr_matrix, vstack

from fabricplan.congestion import kernels

# Flows that would finish within this share of the run's elapsed time after the next completion
# end in one event: a run with thousands of distinct finish times (an all-to-all) then costs
# about ln(last finish / first finish) / FINISH_MERGE events (~25 instead of ~70 at 1 %). Each
# of them is recorded at its own finish time under the event's rates; only the re-sharing of
# what they free waits for the last of them, so the flows still running err slow, by at most
# this share of the time so far.
FINISH_MERGE = 0.03
# Flows due to start within this share of the time to the next finish start together, at the
# last of them: late, so this too only errs slow.
START_MERGE = 0.01
# Array code only: a link within this share of being the tightest on all its flows' paths
# settles with them, so a flow may stop up to this share below its exact max-min rate (never
# above a capacity).
LEVEL_MERGE = 1e-3
# Float round-off allowances: a flow starting within this (relative and us) of now has started;
# one with this share of its bytes left has finished.
TIME_ROUNDOFF = 1e-12
BYTES_ROUNDOFF = 1e-9


class Rows(NamedTuple):
    """A link x flow matrix as the arrays of its CSR form, in scipy's canonical order (each
    row's entries by flow, no duplicates), without a scipy object: small problems build one per
    event, where constructing and checking a ``csr_matrix`` costs more than the arithmetic."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def csr(self) -> csr_matrix:
        return csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)


Matrix = csr_matrix | Rows


def with_rows(
    a: Matrix, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, n_rows: int
) -> Matrix:
    """``a`` with ``n_rows`` rows more, given as (row, column, weight) entries: what
    ``vstack([a, csr_matrix((weights, (rows, cols)))])`` gives; below the compiled fill's size
    as :class:`Rows`, in a handful of array operations (entries of one cell summed in the
    order given). From that size scipy builds it: the compiled fill takes its matrices, and
    its compiled conversion beats the sort here on tens of thousands of entries."""
    if a.nnz + len(rows) >= kernels.COMPILED_MIN_SIZE:
        extra = csr_matrix((weights, (rows, cols)), shape=(n_rows, a.shape[1]))
        return vstack([a.csr() if isinstance(a, Rows) else a, extra]).tocsr()
    order = np.lexsort((cols, rows))
    key = rows[order].astype(np.int64) * a.shape[1] + cols[order]
    first = np.empty(len(key), bool)  # each cell's first entry
    first[:1] = True
    np.not_equal(key[1:], key[:-1], out=first[1:])
    cell = np.add.accumulate(first, dtype=np.int64) - 1
    data = np.bincount(
        cell, weights=weights[order], minlength=int(cell[-1]) + 1 if len(cell) else 0
    )
    per_row = np.bincount(rows[order][first], minlength=n_rows)
    return Rows(
        np.concatenate([a.indptr, a.indptr[-1] + per_row.cumsum()]),
        np.concatenate([a.indices, cols[order][first]]),
        np.concatenate([a.data, data]),
        (a.shape[0] + n_rows, a.shape[1]),
    )


# Below this many non-zeros a sum per link is a weighted bincount (the same additions in the
# same order as a sparse product, without its fixed cost); above it the sparse product is faster.
BINCOUNT_MAX_SIZE = 2048


def matrix_of(
    lane: np.ndarray, col: np.ndarray, weight: np.ndarray, shape: tuple[int, int]
) -> Matrix:
    """``csr_matrix((weight, (lane, col)), shape)``; below ``BINCOUNT_MAX_SIZE`` entries, when no
    two share a cell, as :class:`Rows` (one sort, no scipy matrix: a small run's fixed cost)."""
    if len(lane) < BINCOUNT_MAX_SIZE:
        order = np.lexsort((col, lane))
        lane_sorted, col_sorted = lane[order], col[order]
        key = lane_sorted.astype(np.int64) * shape[1] + col_sorted
        if np.count_nonzero(key[1:] == key[:-1]) == 0:  # cells that meet: scipy adds them up
            indptr = np.zeros(shape[0] + 1, np.int64)
            np.cumsum(np.bincount(lane_sorted, minlength=shape[0]), out=indptr[1:])
            return Rows(indptr, col_sorted, np.asarray(weight, float)[order], shape)
    return csr_matrix((weight, (lane, col)), shape=shape)


def _max_min_rounds(
    a: Matrix, capacity: np.ndarray, active: np.ndarray | None, cap: np.ndarray | None
) -> np.ndarray:
    """:func:`max_min_rates` in array code, for problems too small to repay the compiled
    kernel's start-up.

    Freezes in parallel: a link whose fair share (residual / unfrozen weight) is the least on
    every one of its flows' paths is their bottleneck, so all such links settle in one round
    (fair shares only grow as other flows freeze, so none of those flows can end lower). The
    globally tightest link always qualifies, so every round makes progress; rounds follow the
    chains of bottlenecks, not the number of distinct rates.

    Works on ``a``'s CSR arrays: minima per flow are taken entry by entry, which needs no
    transpose (building one costs a small problem more than all its rounds).
    """
    n_links, n_flows = a.shape
    flow_of, data = a.indices, np.asarray(a.data, float)
    per_link = a.indptr[1:] - a.indptr[:-1]
    residual = np.asarray(capacity, float)
    if len(flow_of) < BINCOUNT_MAX_SIZE:
        # only the links that carry a flow: the others never bind, and a small problem's few
        # dozen of them are cheaper to handle than every lane of the fabric
        links = per_link.nonzero()[0]
        n_links = len(links)
        link_of = np.repeat(np.arange(n_links), per_link[links])
        link_starts = a.indptr[links]
        residual = residual[links]
        has_link = None  # every link kept carries a flow

        def link_sums(x: np.ndarray) -> np.ndarray:
            return np.bincount(link_of, weights=data * x[flow_of], minlength=n_links)

    else:
        link_of = np.repeat(np.arange(n_links), per_link)
        has_link = per_link > 0
        link_starts = a.indptr[:-1][has_link]
        residual = residual.copy()
        link_sums = (a.csr() if isinstance(a, Rows) else a).__matmul__
    crossing = data > 0  # a stored zero carries none of the flow
    zeros_stored = not crossing.all()
    touches = np.zeros(n_flows, bool)
    touches[flow_of] = True
    active = np.ones(n_flows, bool) if active is None else active
    cap = np.full(n_flows, np.inf) if cap is None else np.asarray(cap, float)
    rate = np.zeros(n_flows)
    free = active & ~touches
    rate[free] = np.where(np.isfinite(cap[free]), cap[free], 0.0)
    unfrozen = active & touches
    # np.count_nonzero: a cheaper test than .any() for the arrays of every round
    while np.count_nonzero(unfrozen):
        slope = link_sums(unfrozen.astype(float))
        used = slope > 0
        share = np.divide(
            np.maximum(residual, 0.0), slope, out=np.full(n_links, np.inf), where=used
        )
        flow_min = cap.copy()  # the least share on each flow's path (inf: unused), or its cap
        np.minimum.at(flow_min, flow_of, share[link_of])
        carried = np.where(unfrozen[flow_of], flow_min[flow_of], np.inf)
        if has_link is None:  # (a round has flows, so entries)
            link_min = np.minimum.reduceat(carried, link_starts)
        else:
            link_min = np.full(n_links, np.inf)
            if len(carried):
                link_min[has_link] = np.minimum.reduceat(carried, link_starts)
        bottleneck = used & (share <= link_min * (1 + LEVEL_MERGE))
        hit = np.zeros(n_flows, bool)
        at_bottleneck = bottleneck[link_of]
        hit[flow_of[at_bottleneck & crossing if zeros_stored else at_bottleneck]] = True
        settle = unfrozen & (hit | (cap <= flow_min * (1 + LEVEL_MERGE)))
        if not np.count_nonzero(settle):  # only uncapped flows on links of infinite capacity
            break
        now = np.where(settle & np.isfinite(flow_min), flow_min, 0.0)  # this round's rates
        rate[settle] = now[settle]
        residual -= link_sums(now)
        unfrozen &= ~settle
    return rate


def _fill_small(a: Matrix, capacity: np.ndarray, active: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The compiled fill (exact) on a small problem, once the process has it: the transpose it
    reads is built here by one sort of the flows, without scipy's fixed costs. A stored zero
    carries none of its flow, so it is left out of both sides."""
    n_links, n_flows = a.shape
    per_link = np.diff(a.indptr)
    flows, weight = a.indices, np.asarray(a.data, float)
    link_of = np.repeat(np.arange(n_links, dtype=np.int32), per_link)
    if not weight.all():
        keep = weight != 0
        link_of, flows, weight = link_of[keep], flows[keep], weight[keep]
        per_link = np.bincount(link_of, minlength=n_links)
    l_ptr = np.zeros(n_links + 1, np.int32)
    np.cumsum(per_link, out=l_ptr[1:])
    f_ptr = np.zeros(n_flows + 1, np.int32)
    np.cumsum(np.bincount(flows, minlength=n_flows), out=f_ptr[1:])
    order = np.argsort(flows, kind="stable")
    # the argument types the kernel was compiled for (scipy's int32 indices)
    return kernels.fill()(
        l_ptr,
        flows.astype(np.int32),
        f_ptr,
        link_of[order],
        weight[order],
        np.ascontiguousarray(capacity),
        np.ascontiguousarray(active),
        np.ascontiguousarray(cap),
    )


def max_min_rates(
    a: Matrix,
    capacity: np.ndarray,
    active: np.ndarray | None = None,
    cap: np.ndarray | None = None,
    a_t: csr_matrix | None = None,
) -> np.ndarray:
    """Max-min fair rate of every flow (0 for inactive ones); ``cap`` bounds single flows.

    Exact progressive filling, bottleneck by bottleneck (:func:`.kernels.fill`), from
    ``kernels.COMPILED_MIN_SIZE`` non-zeros; below, rounds of array code settling every
    independent bottleneck at once, within ``LEVEL_MERGE`` of exact. Flows that only cross links
    of infinite capacity and have no cap of their own get 0 (nothing bounds them). ``a_t``:
    ``a``'s transpose in CSR, when the caller has it (only the compiled kernel uses it).
    """
    n_flows = a.shape[1]
    active = np.ones(n_flows, bool) if active is None else np.asarray(active, bool)
    cap = np.full(n_flows, np.inf) if cap is None else np.asarray(cap, float)
    if a.nnz < kernels.COMPILED_MIN_SIZE:
        if kernels.loaded():
            return _fill_small(a, np.asarray(capacity, float), active, cap)
        return _max_min_rounds(a, capacity, active, cap)
    a = a.csr() if isinstance(a, Rows) else a.tocsr()
    if a.nnz and not a.data.all():  # a stored zero is no crossing: it must not settle a flow
        a = a.copy()
        a.eliminate_zeros()
        a_t = None
    a_t = a.T.tocsr() if a_t is None else a_t
    return kernels.fill()(
        a.indptr,
        a.indices,
        a_t.indptr,
        a_t.indices,
        np.asarray(a_t.data, float),
        np.asarray(capacity, float),
        active,
        cap,
    )


class Rerouting(Protocol):
    """Rates that may change between a run's starts and finishes: flows that move to another
    path at a time of their own (flowlet switching at a pause)."""

    def __call__(self, running: np.ndarray, left: np.ndarray) -> np.ndarray: ...

    def next_change_us(self, now_us: float) -> float:
        """When the next move is due (inf: none), under the rates of the call just made at
        ``now_us``."""
        ...

    def change(self, now_us: float) -> np.ndarray:
        """Make the moves due by ``now_us``; the bytes each flow must send again."""
        ...


@dataclass(frozen=True)
class Completion:
    finish_us: np.ndarray  # per flow (inf for flows without bytes, e.g. background)
    events: int
    durations_us: list[float] = field(default_factory=list)  # of each event's phase


def complete(
    a: Matrix,
    capacity: np.ndarray,
    size_bytes: np.ndarray,
    start_us: np.ndarray | None = None,
    cap: np.ndarray | None = None,
    a_t: csr_matrix | None = None,
    rates: Callable[[np.ndarray, np.ndarray], np.ndarray] | Rerouting | None = None,
) -> Completion:
    """Finish time of every flow when rates are re-shared each time a flow starts or ends.

    Flows with ``size_bytes = inf`` never finish (background load that keeps its share).
    Rates are GB/s, so a byte takes 1e-3 / rate microseconds. ``a_t``: ``a``'s transpose in
    CSR, when the caller has it already. ``rates(running, bytes_left)``, when given, sets each
    phase's rates instead of plain max-min sharing (flow control evaluated at every event);
    when it is also :class:`Rerouting`, its moves are events too, and a move's resent bytes
    join the flow's bytes left; when it has ``next_onset_us`` and ``elapse`` (a change of its
    own at a time it gives, told each phase's length), that time is an event too.
    """
    n = a.shape[1]
    start = np.zeros(n) if start_us is None else np.array(start_us, float)
    left = np.asarray(size_bytes, float).copy()
    finish = np.full(n, np.inf)
    finite = np.isfinite(left)
    finish[finite & (left <= 0)] = start[finite & (left <= 0)]
    done = finite & (left <= 0)
    now = float(start[~done].min(initial=0.0)) if (~done).any() else 0.0
    t0 = now
    events = 0
    durations: list[float] = []
    a = a if isinstance(a, Rows) else a.tocsr()
    if rates is None and a_t is None and a.nnz >= kernels.COMPILED_MIN_SIZE:
        a_t = a.T.tocsr()  # once for every event's compiled fill
    moves = rates if hasattr(rates, "next_change_us") else None
    # rates that change at a time of their own as well (a sender NIC held once the queues
    # behind it fill: flowcontrol.Phases), told how long each phase lasted
    timed = rates if hasattr(rates, "next_onset_us") else None
    move_at = hold_at = np.inf
    while np.count_nonzero(finite & ~done):
        running = (start <= now * (1 + TIME_ROUNDOFF) + TIME_ROUNDOFF) & ~done
        if moves is not None and move_at <= now * (1 + TIME_ROUNDOFF) + TIME_ROUNDOFF:
            left = left + np.where(running & finite, moves.change(now), 0.0)
        if rates is None:
            rate = max_min_rates(a, capacity, running, cap, a_t)
        else:
            rate = rates(running, left)
        if moves is not None:
            move_at = moves.next_change_us(now)
        if timed is not None:
            hold_at = timed.next_onset_us(now)
        events += 1
        # divided where a flow moves only: no division warnings to silence at every event
        moving = running & finite & (rate > 0)
        to_end = np.divide(left, rate * 1e3, out=np.full(n, np.inf), where=moving)
        pending = start[(start > now) & ~done]
        next_start = pending.min() - now if len(pending) else np.inf
        first_end = to_end.min(initial=np.inf)
        next_move = max(min(move_at, hold_at) - now, 0.0)
        dt = min(first_end, next_start, next_move)
        if not np.isfinite(dt):
            break  # remaining flows can never move (zero capacity): they never finish
        own = np.zeros(0)  # the merged finishers' own finish times (see FINISH_MERGE)
        if dt == next_move and dt < min(first_end, next_start):
            ending = np.zeros(n, bool)
        elif dt == first_end:
            ending = to_end <= dt + FINISH_MERGE * (now + dt - t0)
            dt = float(to_end[ending].max())
            own = now + to_end[ending]
        else:
            ending = np.zeros(n, bool)
            if np.isfinite(first_end):
                soon = pending[pending <= now + dt + START_MERGE * first_end]
                dt = float(soon.max()) - now
                start = np.where((start > now) & (start <= now + dt), now + dt, start)
        left = np.where(running & finite, left - rate * 1e3 * dt, left)
        if timed is not None:
            timed.elapse(dt)
        now += dt
        durations.append(float(dt))
        merged = np.flatnonzero(ending)  # each at its own time, ``own``
        ending |= running & finite & (left <= BYTES_ROUNDOFF * np.maximum(size_bytes, 1))
        finish[ending] = now
        finish[merged] = own
        done |= ending
        left[ending] = 0.0
    return Completion(finish, events, durations)
