"""One congestion case, Monte Carlo over hash seeds and start jitter.

Per seed: place the job, route its flows (and any background load), and run them to completion
by events; at every event the links are shared max-min fairly under what the fabric's flow
control does at congested ports (:mod:`flowcontrol`). The ideal is the same job alone on a
fabric where only the NICs limit it. The collective model supplies the latency part, so
``time = ideal collective time + (simulated network time - ideal network time)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from fabricplan.catalog import Catalog, Fabric, default_catalog
from fabricplan.catalog.providers import node_nics
from fabricplan.collectives import build_system, bus_factor, p2p_latency_us, sweep
from fabricplan.collectives.model import SystemArrays
from fabricplan.collectives.system import CommSystem
from fabricplan.congestion import kernels
from fabricplan.congestion import traffic as T
from fabricplan.congestion.alone import JobAlone, job_alone
from fabricplan.congestion.case import (
    FRAGMENTED_CLUSTER_FACTOR,
    Case,
    CaseError,
    CaseResult,
    check_route_memory,
)
from fabricplan.congestion.flowcontrol import FlowControl, Phases, RunRecord
from fabricplan.congestion.flowlet import FlowletMoves, FlowletPolicy, flowlet_policy
from fabricplan.congestion.groups import unique_inverse
from fabricplan.congestion.job_routes import Where, route_flows
from fabricplan.congestion.limits import not_modelled
from fabricplan.congestion.network import (
    Network,
    Routed,
)
from fabricplan.congestion.nic_turns import NicTurns
from fabricplan.congestion.ports import PortPairs
from fabricplan.congestion.seeds import run_seeds, stream, workers_for
from fabricplan.congestion.spraying import spray_drain_us
from fabricplan.congestion.tails import PROBES_MIN, PROBES_PER_CASE, latency_under_load
from fabricplan.congestion.waterfill import Matrix, complete, matrix_of
from fabricplan.topology import build_graph, size_fabric
from fabricplan.topology.graph import EDGE_KINDS, LEAF, VERTEX_KINDS, FabricGraph

# The collective-model op (and forced algorithm) whose ideal time a pattern's run starts from.
PATTERN_OP = {
    "ring-allreduce": ("all_reduce", "ring"),
    "tree-allreduce": ("all_reduce", "tree"),
    "alltoall": ("alltoall", None),
}
# Point-to-point patterns: their ideal is one message latency plus the NIC-limited transfer.
P2P_PATTERNS = ("incast", "pipeline", "permutation", "flows")
HOTTEST_SHOWN = 5  # switch-to-switch links reported per case


def _ideal_collective_us(case: Case, sys: CommSystem) -> tuple[float, float]:
    """The collective model's time for the pattern on an ideal fabric, and its bus factor;
    for point-to-point patterns only the message latency (the transfer comes from the run)."""
    if case.pattern in P2P_PATTERNS:
        return sys.p2p_latency_us, 1.0
    op, algo = PATTERN_OP[case.pattern]
    r = sweep(
        SystemArrays.of([sys]),
        op,
        np.array([case.size_bytes]),
        algorithms=[algo] if algo else None,
        protocols=["Simple"],
    )
    return float(r.time_us[0, 0]), float(bus_factor(op, sys.nranks))


def _columns(net: Network, routed: Routed, tr: T.Traffic) -> Matrix:
    """Lane x column matrix: the hop flows of a column add up."""
    return matrix_of(routed.lane, tr.column[routed.flow], routed.weight, (net.lanes, tr.columns))


@dataclass(frozen=True)
class _Setup:
    case: Case
    nodes: int
    sys: CommSystem
    fabric: Fabric
    net: Network
    routing: str
    fc: FlowControl
    switch_latency_ns: float
    probes: int
    flowlet: FlowletPolicy | None  # flowlet routing that moves flows at pauses
    # the job alone, per placement (its nodes' bytes): the same on every seed that draws it
    alone: dict[bytes, JobAlone] = field(default_factory=dict)


@dataclass(frozen=True)
class _Seed:
    ideal_net_us: float  # the job alone, limited by its NICs
    net_us: float  # simulated network time
    paused_fraction: float
    victims: int  # flows slowed by pauses
    utilisation: np.ndarray  # per lane; dropped once the hottest links are folded in
    latency_us: np.ndarray  # probe samples
    fct_us: np.ndarray  # per job column: its completion time after its own start
    resent_bytes: float = 0.0  # what flowlet moves made go-back-N send again


def _random_traffic(case: Case) -> bool:
    """Each seed draws its own traffic (a random permutation), not only its routes."""
    return case.pattern == "permutation" and case.shift is None


def _alone(st: _Setup, job: np.ndarray, seed: int) -> JobAlone:
    """The job alone on ``job``'s nodes (computed once per placement unless traffic is random)."""
    case, key = st.case, job.tobytes()
    random_traffic = _random_traffic(case)
    if key not in st.alone or random_traffic:
        if case.placement != "contiguous" or random_traffic:  # a fresh draw: keep the last
            st.alone.clear()
        starts = case.flows.start_us if case.flows is not None else None
        traffic = _job_traffic(case, st.net.graph, job, stream(case, seed, 0))
        st.alone[key] = job_alone(st.net, traffic, starts)
    return st.alone[key]


def _run_seed(st: _Setup, seed: int) -> _Seed:
    case, net, graph = st.case, st.net, st.net.graph
    rng = stream(case, seed, 1)
    job = T.place(graph.nodes, st.nodes, case.placement, rng)
    alone = _alone(st, job, seed)
    n_job = alone.traffic.columns
    tr = alone.traffic.plus(T.background(graph, job, case.background, st.sys.nic_GBps, rng))
    job_col = ~tr.background
    hop_job = job_col[tr.column]
    # the ideal: job flows alone, limited by their NICs only
    t_ideal = alone.ideal_net_us
    # what each sender pushes before congestion control reacts: its NIC share
    demand = np.concatenate([alone.nic_rates, tr.demand_GBps[n_job:]])
    routed = route_flows(Where(net, st.routing, case, st.nodes), tr, demand, rng)
    cap = np.where(np.isfinite(tr.demand_GBps), tr.demand_GBps, np.inf)
    # the senders' NICs, kept over the run (flowlet moves rebuild the phases, not these); only
    # where nothing but pauses slows a sender, and some NIC sends two flows or more
    turns: NicTurns | None = None
    if st.fc.lossless_open_loop:
        open_loop = ~tr.self_clocked & ~np.isfinite(cap)
        turns = NicTurns.of(net, routed, tr.column, open_loop, st.fc.threshold_kb)
        turns = turns if turns.shared else None

    def phases_of(r: Routed, pairs: PortPairs | None = None) -> Phases:
        a = _columns(net, r, tr)
        return Phases(
            net,
            r,
            tr.column,
            a,
            # only the compiled fill reads the transpose: small runs (and each flowlet
            # rebuild of one) skip building it
            a.T.tocsr() if a.nnz >= kernels.COMPILED_MIN_SIZE else None,
            demand,
            cap,
            tr.self_clocked,
            job_col,
            st.fc,
            2 * st.sys.p2p_latency_us,
            pairs,
            turns,
        )

    moves = None
    if st.flowlet is not None:
        moves = FlowletMoves(net, routed, tr.column, hop_job, phases_of, tr.dst, st.flowlet, rng)
    starts = np.zeros(tr.columns)
    if case.jitter_us > 0:
        ready = rng.exponential(case.jitter_us, graph.nodes)
        starts[:n_job] = _latest(ready, tr.column_nodes[:n_job])
    if case.flows is not None:
        starts[:n_job] += case.flows.start_us
    done, rec, rates = None, RunRecord(), None
    # one compiled call, where it can (spraying keeps the run's port pairs for its drain)
    if kernels.loaded() and (moves is not None or st.routing != "spray"):
        from fabricplan.congestion.seed_run import compiled_fixed_run, compiled_run

        columns = (tr.column_bytes, starts, cap, demand, job_col, tr.self_clocked)
        if moves is not None:
            done, rec = compiled_run(moves, st.fc, columns, turns), moves.record
        else:
            done = compiled_fixed_run(net, routed, tr.column, tr.dst, st.fc, columns, rec, turns)
    if done is None:
        rates = moves if moves is not None else phases_of(routed)
        ph = rates.phases if isinstance(rates, FlowletMoves) else rates
        done = complete(ph.a, net.capacity, tr.column_bytes, starts, cap, rates=rates)
        rec = rates.record
    if moves is not None:
        routed = moves.routed
    util = rec.utilisation if rec.utilisation is not None else np.zeros(net.lanes)
    lat = np.zeros(0)
    if st.probes:
        lat = latency_under_load(
            net,
            routed,
            np.flatnonzero(hop_job),
            util,
            rec.queue_kb,
            st.fabric,
            st.switch_latency_ns,
            rng,
            st.probes,
        )
    spans = np.array(done.durations_us[: len(rec.paused)])
    shares = np.array(rec.paused[: len(spans)])
    paused = float(spans @ shares / spans.sum()) if spans.sum() > 0 else 0.0
    victims = 0 if rec.victims is None else int(np.count_nonzero(rec.victims))
    # the port pairs flow control built for these paths (spraying never reroutes)
    pairs = rates.pairs if isinstance(rates, Phases) else None
    drain = _spray_drain_us(st, routed, tr, done.finish_us, starts, rng, pairs)
    finish = done.finish_us[:n_job] + drain
    fct = finish - starts[:n_job] + _path_latency_us(st, routed, tr)[:n_job]
    return _Seed(t_ideal, float(finish.max()), paused, victims, util, lat, fct, rec.resent_bytes)


def _spray_drain_us(
    st: _Setup,
    routed: Routed,
    tr: T.Traffic,
    finish_us: np.ndarray,
    starts: np.ndarray,
    rng: np.random.Generator,
    pairs: PortPairs | None,
) -> np.ndarray | float:
    """Per job column, the queue random per-packet spraying leaves before its last packet
    (:mod:`fabricplan.congestion.spraying`); 0 for other routings."""
    if st.routing != "spray":
        return 0.0
    n_job = int(np.count_nonzero(~tr.background))
    dur = finish_us - starts
    span = float(dur[:n_job][np.isfinite(dur[:n_job])].max(initial=0.0))
    dur = np.where(np.isfinite(dur), dur, span)  # background: as long as the job
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(
            np.isfinite(tr.column_bytes) & (dur > 0),
            tr.column_bytes / (dur * 1e3),
            np.where(np.isfinite(tr.demand_GBps), tr.demand_GBps, 0.0),
        )
    drain = spray_drain_us(st.net, routed, tr.column, rate, dur, st.fc.mtu_bytes, rng, pairs)
    return drain[:n_job]


def _seed_result(st: _Setup, seed: int) -> tuple[_Seed, list[tuple[int, float]]]:
    """One seed's run, with its hottest switch-to-switch links instead of every lane's load
    (scalars travel between processes and pile up over seeds; lanes x seeds would not)."""
    run = _run_seed(st, seed)
    kinds, net = st.net.graph.vertex_kind, st.net
    fabric_lanes = np.flatnonzero((kinds[net.tail] >= LEAF) & (kinds[net.head] >= LEAF))
    util = run.utilisation
    # ties (links at the same utilisation) in lane order, so runs repeat exactly
    top = fabric_lanes[np.argsort(-util[fabric_lanes], kind="stable")[:HOTTEST_SHOWN]]
    return replace(run, utilisation=np.empty(0)), [(int(i), float(util[i])) for i in top]


def _warm(st: _Setup) -> None:
    """What every seed shares, computed once before the workers fork: the job alone, when
    every seed places and draws it alike."""
    case = st.case
    if case.placement == "contiguous" and not _random_traffic(case):
        _alone(st, T.place(st.net.graph.nodes, st.nodes, "contiguous", stream(case, 0, 1)), 0)


def _path_latency_us(st: _Setup, routed: Routed, tr: T.Traffic) -> np.ndarray:
    """Per column, the latency its last byte adds after it leaves the sender: the slowest of
    its hop flows' paths (by switches crossed), one way, or there and back again when the case
    counts a flow done at its last acknowledgement."""
    net = st.net
    at_switch = net.graph.vertex_kind[net.tail[routed.lane]] >= LEAF
    hops = np.bincount(routed.flow, weights=routed.weight * at_switch, minlength=len(tr.src))
    distinct, which = unique_inverse(np.rint(hops).astype(np.int64))
    per_hops = [p2p_latency_us(st.fabric, h, st.switch_latency_ns) for h in distinct.tolist()]
    one_way = np.array(per_hops, float)[which]
    out = np.zeros(tr.columns)
    np.maximum.at(out, tr.column, one_way)
    return out * (2 if st.case.fct_until == "acknowledged" else 1)


def _job_traffic(
    case: Case, graph: FabricGraph, job: np.ndarray, rng: np.random.Generator
) -> T.Traffic:
    if case.pattern == "flows":
        assert case.flows is not None, "checked by Case.check"
        f = case.flows
        return T.flow_list(graph, job, f.src, f.dst, f.size_bytes)
    return T.pattern(case.pattern, graph, job, case.size_bytes, shift=case.shift, rng=rng)


def _latest(ready: np.ndarray, nodes: list[np.ndarray]) -> np.ndarray:
    """Per column: the latest ready time of its nodes (0 for a column that waits for none)."""
    sizes = np.fromiter(map(len, nodes), np.int64, len(nodes))
    out = np.zeros(len(nodes))
    if sizes.any():
        flat = ready[np.concatenate(nodes)]
        has = sizes > 0
        out[has] = np.maximum.reduceat(flat, (np.cumsum(sizes) - sizes)[has])
    return out


def run_case(
    case: Case,
    catalog: Catalog | None = None,
    progress: Callable[[int], None] | None = None,
    probes: bool = True,
    workers: int | None = None,
) -> CaseResult:
    """Simulate ``case`` once per seed; ``probes=False`` leaves out the small-message latency
    samples (``latency_us`` is then empty), which a caller after the job's time does not need.
    ``workers``: processes that run seeds side by side (None: this machine's cores when the
    case is long enough to pay for them); the result is the same for any number."""
    case.check()
    cat = catalog or default_catalog()
    fab = cat.fabric(case.fabric)
    k = case.gpus_per_node or cat.gpu(case.gpu).node.gpus_per_node
    if case.gpus % k:
        raise CaseError(f"gpus: {case.gpus} is not a whole number of {k}-GPU nodes")
    nodes = case.gpus // k
    if case.pattern not in ("incast", "flows", "permutation") and nodes < 2:
        raise CaseError(f"gpus: {case.gpus} GPUs fit in one node; the network carries nothing")
    if case.flows is not None:
        case.flows.check(nodes * (case.nics_per_node or node_nics(cat, case.gpu, case.fabric)))
    spread = FRAGMENTED_CLUSTER_FACTOR if case.placement == "fragmented" else 1
    cluster = case.cluster_gpus or case.gpus * spread
    if cluster % k:
        raise CaseError(f"cluster_gpus: {cluster} is not a whole number of {k}-GPU nodes")
    routing = case.routing or fab.default_routing
    if routing == "static":
        routing = "ecmp"  # deterministic per-destination tables spread like a hash at scale
    elif routing == "packet-spray":
        routing = "spray"  # the catalog's name for the simulator's per-packet spreading
    design = size_fabric(
        cluster,
        case.design,
        case.fabric,
        gpu=case.gpu,
        switch=case.switch,
        oversubscription=case.oversubscription,
        spine_oversubscription=case.spine_oversubscription,
        gpus_per_node=k,
        nics_per_node=case.nics_per_node,
        catalog=cat,
    )
    check_route_memory(case, routing, nodes, design.layout)
    sys = build_system(
        case.gpu,
        nodes,
        case.fabric,
        gpus_per_node=k,
        nics_per_node=case.nics_per_node,
        switch=case.switch,
        design=case.design,
        oversubscription=case.oversubscription,
        catalog=cat,
    )
    graph = build_graph(design.layout, sys.nvlink_GBps, sys.nic_GBps)
    net = Network(graph, efficiency=sys.nic_GBps / (fab.line_rate_gbps / 8))
    fc = FlowControl.of_fabric(fab, case.roce_quality, case.flow)
    switch_ns = design.switch.port_to_port_latency_ns.nominal
    st = _Setup(
        case,
        nodes,
        sys,
        fab,
        net,
        routing,
        fc,
        switch_ns,
        max(PROBES_PER_CASE // case.seeds, PROBES_MIN) if probes else 0,
        flowlet_policy(case, routing, fab, fc, switch_ns, sys),
    )
    base_us, bus = _ideal_collective_us(case, sys)
    p2p = case.pattern in P2P_PATTERNS

    runs: list[_Seed] = []
    hottest: dict[int, float] = {}
    n_workers = workers_for(case, cat, workers)
    for run, top in run_seeds(st, case.seeds, n_workers, _seed_result, progress, _warm):
        for lane, u in top:
            hottest[lane] = max(hottest.get(lane, 0.0), u)
        runs.append(run)
    # a point-to-point ideal includes the NIC-limited transfer (the receiving NIC sets the pace
    # of an incast: that is not congestion)
    ideal_us = base_us + runs[0].ideal_net_us if p2p else base_us
    times = [ideal_us + r.net_us - (runs[0].ideal_net_us if p2p else r.ideal_net_us) for r in runs]
    lat = np.concatenate([r.latency_us for r in runs])
    # each seed's percentile over its flows, then the median over seeds
    per_seed = _fct_percentiles([r.fct_us for r in runs])
    fct = dict(zip((50, 99, 100), np.median(per_seed, axis=0).tolist(), strict=True))
    top = sorted(hottest.items(), key=lambda kv: -kv[1])[:HOTTEST_SHOWN]
    return CaseResult(
        case=case,
        nodes=nodes,
        routing=routing,
        flow_control=st.fc.name,
        ideal_time_us=ideal_us,
        times_us=np.array(times),
        network_slowdowns=np.array([r.net_us / r.ideal_net_us for r in runs]),
        busbw_ideal_GBps=case.size_bytes * bus / (ideal_us * 1e3),
        bus_factor=bus,
        paused_fraction=float(np.mean([r.paused_fraction for r in runs])),
        victim_flows=float(np.mean([r.victims for r in runs])),
        hottest_links=[_describe(net, lane, u) for lane, u in top],
        latency_us={f"p{q:g}": float(np.percentile(lat, q)) for q in (50, 99, 99.9)}
        if lat.size
        else {},
        fct_us={"p50": fct[50], "p99": fct[99], "max": fct[100]},
        resent_bytes=float(np.median([r.resent_bytes for r in runs])),
        not_modelled=not_modelled(fab.family, case.design, routing),
        layout={"tiers": design.layout.tiers, "switches": design.layout.switches},
    )


def _fct_percentiles(fct: list[np.ndarray]) -> np.ndarray:
    """Each seed's p50, p99 and max over its flows (seeds x 3). When every seed has as many
    flows (always, unless each seed draws its own traffic), one call along the flows gives
    the same values without a call's fixed cost per seed."""
    if len({len(f) for f in fct}) == 1:
        return np.percentile(np.stack(fct), (50, 99, 100), axis=1).T
    return np.array([np.percentile(f, (50, 99, 100)) for f in fct])


def _describe(net: Network, lane: int, utilisation: float) -> dict:
    g = net.graph
    t, h = int(net.tail[lane]), int(net.head[lane])
    return {
        "link": EDGE_KINDS[int(net.kind[lane])],
        "from": f"{VERTEX_KINDS[g.vertex_kind[t]]} {t}",
        "to": f"{VERTEX_KINDS[g.vertex_kind[h]]} {h}",
        "utilisation": round(utilisation, 4),
    }
