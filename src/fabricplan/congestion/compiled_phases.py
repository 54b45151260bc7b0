""":class:`~fabricplan.congestion.flowcontrol.Phases` through the compiled kernels, for small
runs of credit or PFC-only flow control in a process that holds them: an event's rates in one
call (:mod:`~fabricplan.congestion.pfc_kernel`), and the phases after a batch of flowlet moves
in one call (:mod:`~fabricplan.congestion.rebuild_kernel`); a seed's whole run in one call is
:mod:`~fabricplan.congestion.seed_run`'s. Each gives, bit for bit, what the array code of
:mod:`~fabricplan.congestion.flowcontrol` gives; imported only where they run (they import
Numba). The rebuild also serves a run whose events take the array code (a one-off run,
which has not loaded the compiled fill, or a large one, above the compiled event's size):
importing this module does not load the fill.
"""

from __future__ import annotations

import copy

import numpy as np

from fabricplan.congestion import kernels
from fabricplan.congestion.fill_links import lane_links
from fabricplan.congestion.flowcontrol import (
    ARBITER_LEVELS,
    OVERLOAD_TOLERANCE,
    VICTIM_LOSS,
    Phases,
)
from fabricplan.congestion.network import Routed
from fabricplan.congestion.nic_turns import FILL_ROUNDOFF, HELD_TOLERANCE, ONSET_MERGE
from fabricplan.congestion.ports import NO_LEVELS, PathArrivals, PortPairs
from fabricplan.congestion.rebuild_kernel import rebuild
from fabricplan.congestion.waterfill import BINCOUNT_MAX_SIZE, Rows
from fabricplan.topology.graph import LEAF


def compiled_rates(ph: Phases, running: np.ndarray) -> np.ndarray:
    """``Phases.__call__`` for credit or PFC-only flow control, in one compiled call."""
    from fabricplan.congestion.pfc_kernel import pfc_rates  # it loads the compiled fill

    if ph._kernel_args is None:
        ph._kernel_args = _kernel_arrays(ph)
    columns, pairs, ports, entries, passes, levels, links, nic = ph._kernel_args
    t = ph.turns
    tolerances = (HELD_TOLERANCE, FILL_ROUNDOFF)
    turns = (
        (*nic, t.stranded, True, tolerances, ONSET_MERGE * t.elapsed_us)
        if t is not None
        else (*nic, np.zeros(0), False, tolerances, 0.0)
    )
    out = pfc_rates(
        running,
        *columns,
        pairs,
        ports,
        entries,
        passes,
        levels,
        links,
        float(ph.fc.threshold_kb),
        OVERLOAD_TOLERANCE,
        ARBITER_LEVELS,
        ph.record.victims is None,
        turns,
    )
    rates, pause, eff, hot_lanes, n_over, unpaused, excess, onset = out[:8]
    if t is not None:
        t.excess, t.onset_us = excess, float(onset)
    queues = ph._held_queues(hot_lanes, n_over)
    if ph.record.victims is None and np.count_nonzero(pause):
        ph.record.victims = running & (rates < unpaused * (1 - VICTIM_LOSS))
    ph._note(running, rates, pause, queues, eff)
    return rates


def _kernel_arrays(ph: Phases) -> tuple:
    """What the compiled event reads, in the types it was compiled for (indices int64); the
    fill's links of the lanes built once for the phases' events."""
    pp, arr, a = ph.pairs, ph.arrivals, ph.a
    assert pp is not None
    pairs = (
        i64(ph.p_out),
        i64(ph.p_in),
        i64(ph.p_col),
        np.asarray(ph.p_w, float),
        i64(pp.e_in),
        i64(pp.e_out),
        i64(ph._upstream_pairs()),
        i64(ph.p_port),
    )
    ports = (i64(ph.port_keys), ph.p_open, np.asarray(ph.p_window_kb, float))
    entries = (i64(arr.lane), arr.first, i64(arr.col), np.asarray(arr.weight, float))
    matrix = (i64(a.indptr), i64(a.indices), np.asarray(a.data, float))
    levels = arr.levels if arr.levels is not None else NO_LEVELS
    # per column its push and own cap, per lane its capacity
    columns = (np.asarray(ph.push, float), np.asarray(ph.cap, float), arr.cap)
    t = ph.turns  # per column its NIC's lane, XOFF in bytes
    nic = (i64(t.nic), float(t.threshold_bytes)) if t is not None else (np.zeros(0, np.int64), 0.0)
    links = lane_links(matrix, a.shape[1])
    return columns, pairs, ports, entries, arr.passes, levels, links, nic


# What rebuild takes for tables before a batch it builds whole (the matrix, the port ids): none.
_BUILT_WHOLE = (*(np.zeros(0, np.int64),) * 2, np.zeros(0), *(np.zeros(0, np.int64),) * 2)


def moved(
    ph: Phases, routed: Routed, leave: np.ndarray, fresh: Routed, went: np.ndarray
) -> tuple[Routed, Phases] | None:
    """The paths after a batch of flowlet moves (the entries ``leave`` gone, one queue pair's
    ``fresh`` ones after them; ``went``: per hop flow, whether it moved) and ``ph``'s phases on
    them, built by one compiled call, small runs and large (an all-to-all's batch rebuilt its
    tables in array code in about 6 ms); None for other flow control (DCQCN, lossy): the caller
    builds them."""
    if not ph._pfc_only:
        return None
    pp, net = ph.pairs, ph.net
    assert pp is not None
    col_of = ph.arrivals.col_of
    (lane, flow, weight), pairs, matrix, ports, first, upstream, windows = rebuild(
        (routed.lane, routed.flow, np.asarray(routed.weight, float)),
        leave,
        (fresh.lane, fresh.flow),
        (pp.out, pp.into, pp.flow, np.asarray(pp.weight, float), pp.e_out, pp.e_in),
        went,
        (i64(net.tail), i64(net.head), i64(net.graph.vertex_kind)),  # as the seed run passes them
        LEAF,
        col_of,
        ph.window_kb,
        (net.lanes, ph.a.shape[1], ph._one_flow_per_column),
        _BUILT_WHOLE,
    )
    new = copy.copy(ph)
    new.pairs = PortPairs(*pairs)
    new.p_out, new.p_in, new.p_w = new.pairs.out, new.pairs.into, new.pairs.weight
    new.p_col = col_of[new.pairs.flow]
    new.a = Rows(*matrix, ph.a.shape)
    if new.a.nnz >= BINCOUNT_MAX_SIZE:  # as Phases keeps it: a scipy matrix, ``a @ x``
        new.a = new.a.csr()
    new._a_lane = (
        np.repeat(np.arange(new.a.shape[0]), np.diff(new.a.indptr))
        if new.a.nnz < BINCOUNT_MAX_SIZE
        else None
    )
    new.a_t = None
    new.port_keys, new.p_port = ports
    new.arrivals = PathArrivals.of(
        ph.arrivals, net, Routed(lane, flow, weight), new.pairs, new.port_keys, first
    )
    new._upstream = upstream
    new.p_open, new.p_window_kb = windows
    # the compiled event takes the new paths while they stay below its size, as Phases decides
    new._compiled = ph._compiled and max(new.a.nnz, len(lane)) < kernels.COMPILED_MIN_SIZE
    new._kernel_args = None
    new.last_pause = np.zeros(net.lanes)
    new.last_queues = {}
    return Routed(lane, flow, weight), new


def i64(x: np.ndarray) -> np.ndarray:
    """``x`` as the contiguous int64 array the kernels were compiled for."""
    return np.ascontiguousarray(x, np.int64)
