"""Routing a case's flows once per seed: the other tenants' background first, then the job's.
Under flowlet routing every job flow starts on one port, as a flowlet switch places a new
flow; its moves at later flowlets are :mod:`fabricplan.congestion.flowlet`'s."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.congestion import traffic as T
from fabricplan.congestion.case import (
    ROUTE_MEMORY_BUDGET_BYTES,
    SPRAY_BYTES_PER_ENTRY,
    Case,
    spray_too_large,
)
from fabricplan.congestion.network import Network, Routed, RouteTooLarge


@dataclass(frozen=True)
class Where:
    """What routing needs of a case's set-up: the fabric's network, its routing and the case."""

    net: Network
    routing: str
    case: Case
    nodes: int


def _route_job(
    w: Where,
    tr: T.Traffic,
    job: np.ndarray,
    demand: np.ndarray,
    rng: np.random.Generator,
    preload: np.ndarray | None,
    max_entries: int,
    how: dict,
) -> Routed:
    """The job's hop flows ``job`` (indices), over ``preload`` (GB/s per lane) if any.

    Under flowlet routing a flow's first packet takes a port on the lowest queue level and the
    flow keeps it: at a later flowlet the switch moves it only to a strictly emptier port
    (htsim ``FatTreeSwitch::getNextHop``, per-flowlet adaptive routing), also when every
    packet of the flow is a new flowlet (an all-to-all's flows, one packet each every 11 us
    at 400G against a 10 us timeout). Those moves are :mod:`fabricplan.congestion.flowlet`'s."""
    r = w.net.route(
        tr.src[job],
        tr.dst[job],
        w.routing,
        rng,
        qps=w.case.qps,
        demand=demand[tr.column[job]],
        preload=preload,
        max_entries=max_entries,
        **how,
    )
    return Routed(r.lane, job[r.flow], r.weight)


def route_flows(w: Where, tr: T.Traffic, demand: np.ndarray, rng: np.random.Generator) -> Routed:
    """Route every hop flow once: the other tenants' background first (it is there before the
    job starts, on the same fabric and routing), then the job's, which adaptive routing steers
    around the background's load. Refuses (``CaseError``) a sprayed case whose pieces would
    outgrow the memory budget."""
    net = w.net
    is_bg = tr.background[tr.column]
    bg, job = np.flatnonzero(is_bg), np.flatnonzero(~is_bg)
    budget = ROUTE_MEMORY_BUDGET_BYTES // SPRAY_BYTES_PER_ENTRY
    how = {"polarized": w.case.polarized, "dragonfly": w.case.dragonfly}
    try:
        if not len(bg):  # no background: route the job alone (keeps the router's distance cache)
            return _route_job(w, tr, job, demand, rng, None, budget, how)
        pre = np.zeros(net.lanes)
        # long-running background has had gaps: flowlet switching has spread it by load
        bg_mode = "adaptive" if w.routing == "flowlet" else w.routing
        r_bg = net.route(
            tr.src[bg],
            tr.dst[bg],
            bg_mode,
            rng,
            demand=demand[tr.column[bg]],
            max_entries=budget,
            **how,
        )
        np.add.at(pre, r_bg.lane, r_bg.weight * demand[tr.column[bg]][r_bg.flow])
        r_job = _route_job(w, tr, job, demand, rng, pre, budget - len(r_bg.lane), how)
    except RouteTooLarge as e:
        raise spray_too_large(w.case, w.nodes, e.entries) from None
    return Routed(
        lane=np.concatenate([r_job.lane, r_bg.lane]),
        flow=np.concatenate([r_job.flow, bg[r_bg.flow]]),
        weight=np.concatenate([r_job.weight, r_bg.weight]),
    )
