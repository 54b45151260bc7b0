"""Routing a case's flows once per seed: the other tenants' background first, then the job's,
and under flowlet routing the job flows that are a new flowlet at every packet spread as
adaptive routing spreads them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.catalog import Fabric
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
    """What routing needs of a case's set-up: the fabric, its routing and the case."""

    net: Network
    routing: str
    fabric: Fabric
    case: Case
    nodes: int


def every_packet(routing: str, fabric: Fabric, tr: T.Traffic, demand: np.ndarray) -> np.ndarray:
    """Per hop flow: a job flow whose packets leave its NIC further apart than the flowlet
    timeout, because the NIC interleaves it with many others (an all-to-all's 63 peers at
    400G: one 9,000 B packet every 11 us against htsim's 10 us). Every packet of it is a new
    flowlet, so a flowlet switch re-decides its port at each one: it is spread as adaptive
    routing spreads a flow (below). Its spacing is taken at what its NIC pushes for it (its
    NIC share), the closest its packets ever come; held back, they come further apart."""
    if routing != "flowlet":
        return np.zeros(len(tr.src), bool)
    with np.errstate(divide="ignore"):
        spacing_us = fabric.mtu_bytes / (demand[tr.column] * 1e3)
    return ~tr.background[tr.column] & (spacing_us > fabric.flowlet_timeout_us)


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

    Under flowlet routing, a flow that is a new flowlet at every packet (``every_packet``)
    takes, packet by packet, a port on the lowest queue level with a coin flip to leave its
    own (htsim's ``FatTreeSwitch::getNextHop``): in the fluid limit, a port fed more than it
    sends builds a queue and sheds such flows until none is over capacity while another has
    room, which is where adaptive routing's least-loaded pieces end up. The coin flip only
    delays that by a few packet spacings (two on average), which this leaves out. Such moves
    do not reorder: the flow's previous packet left a timeout earlier, longer than the queues
    of ports on the lowest level differ (5 % of a buffer: 1.8 us at 400G for htsim's)."""
    net = w.net
    every = every_packet(w.routing, w.fabric, tr, demand)[job]
    whole = every.all() or not every.any()
    parts = [job] if whole else [job[~every], job[every]]
    modes = ["adaptive" if every.all() else w.routing] if whole else [w.routing, "adaptive"]
    load = None if preload is None else preload.copy()
    out: list[Routed] = []
    for idx, mode in zip(parts, modes, strict=True):
        r = net.route(
            tr.src[idx],
            tr.dst[idx],
            mode,
            rng,
            qps=w.case.qps,
            demand=demand[tr.column[idx]],
            preload=load,
            max_entries=max_entries - sum(len(p.lane) for p in out),
            **how,
        )
        out.append(Routed(r.lane, idx[r.flow], r.weight))
        # the spread flows balance around the load the others stay on
        load = np.zeros(net.lanes) if load is None else load
        np.add.at(load, r.lane, r.weight * demand[tr.column[idx]][r.flow])
    parts = (np.concatenate([getattr(r, k) for r in out]) for k in ("lane", "flow", "weight"))
    return Routed(*parts)


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
