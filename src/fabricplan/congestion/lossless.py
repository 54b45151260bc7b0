"""What flow control does at congested links: PFC and DCQCN (RoCE), credits (InfiniBand).

Max-min sharing assumes congestion control gives every flow its fair share at once. Real
fabrics get there through queues. At each *hot* link (offered load above capacity):

- RoCE: :mod:`fabricplan.congestion.dcqcn` integrates the DCQCN fluid model for the flows that
  meet there: how much of the link DCQCN's rate cuts leave idle, and for how long the queue
  sits above the PFC threshold. While it does, the switch pauses the ingress ports that feed
  it, which stops *every* flow on those links, including victims that never reach the hot link
  (congestion spreading; "head-of-line blocking, congestion spreading, and occasional
  deadlocks" are the costs of PFC that Mittal et al., SIGCOMM 2018, list). With PFC off, the
  hot link loses goodput to go-back-N instead.
- InfiniBand: credit-based link-level flow control never drops; without congestion control a
  hot link holds its input buffers full, so the links feeding it run at the share the hot
  link drains (the classic tree-saturation picture, Pfister & Norton 1985).

The effects come back as reduced link capacities for a second max-min pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csc_matrix, csr_matrix

from fabricplan.congestion.dcqcn import Quality, dcqcn_fluid, go_back_n_efficiency
from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.waterfill import max_min_rates
from fabricplan.topology.graph import LEAF

# Congestion spreads hop by hop; three levels cover leaf -> spine -> core in a 3-tier Clos.
SPREAD_LEVELS = 3
# Assumption: queue a credit-based (InfiniBand) port holds before credits run out, for latency
# under load; InfiniBand switches keep small per-port, per-VL buffers.
IB_PORT_BUFFER_KB = 64.0
# A link is overloaded when its load beats its capacity by more than float round-off.
OVERLOAD_TOLERANCE = 1e-6
# Least share of its capacity a collapsed (go-back-N) link keeps: caps slowdowns at 1000x.
MIN_GOODPUT_SHARE = 1e-3
# A flow counts as a victim when pauses cost it more than this share of its rate.
VICTIM_LOSS = 0.01


@dataclass(frozen=True)
class FlowControl:
    name: str  # "credit", "pfc+dcqcn", "lossy+dcqcn"
    quality: Quality | None
    mtu_bytes: int

    @classmethod
    def of(cls, kind: str, lossless: bool, q: Quality | None, mtu: int) -> FlowControl:
        if kind == "credit":
            return cls("credit", None, mtu)
        if q is None:  # a lossy Ethernet fabric without RDMA congestion control (TCP)
            return cls("lossless" if lossless else "tcp", None, mtu)
        return cls("pfc+dcqcn" if q.pfc else "lossy+dcqcn", q, mtu)


@dataclass(frozen=True)
class Effect:
    capacity: np.ndarray  # per lane, after flow control
    pause: np.ndarray  # per lane, share of time paused
    hot: np.ndarray  # bool per lane: offered load above capacity
    victims: np.ndarray  # bool per column: slowed by pauses (congestion spreading)
    queue_kb: dict[int, tuple[float, ...]]  # hot lane -> queue samples
    rates: np.ndarray  # per column, max-min fair under the capacities left
    paused_fraction: float


def _over(load: np.ndarray | float, capacity: np.ndarray | float) -> np.ndarray | bool:
    return load > capacity * (1 + OVERLOAD_TOLERANCE)


def _feeders(net: Network, hop: csr_matrix, hop_cols: csc_matrix, hop_rate: np.ndarray,
             lane: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The lanes into ``lane``'s tail switch that carry its traffic, and how much (GB/s) of
    ``lane``'s traffic each brings, at most its capacity. ``hop_cols`` is ``hop`` by column:
    taking a lane's flows from it is cheap, from the row-major ``hop`` it is not."""
    row = hop.getrow(lane)
    flows, w_out = row.indices, row.data
    sub = hop_cols[:, flows].tocsr()
    into = np.flatnonzero((net.head == net.tail[lane]) & (np.diff(sub.indptr) > 0))
    into = into[into != lane]
    if len(into) == 0:
        return into, np.zeros(0)
    part = sub[into].tocoo()
    # a split flow brings through each feeder at most the share it sends on through ``lane``
    share = np.minimum(part.data, w_out[part.col]) * hop_rate[flows][part.col]
    brings = np.bincount(part.row, weights=share, minlength=len(into))
    return into, np.minimum(brings, net.capacity[into])


def apply_flow_control(net: Network, routed: Routed, col_of: np.ndarray, a: csr_matrix,
                       demand: np.ndarray, self_clocked: np.ndarray, job: np.ndarray,
                       fc: FlowControl, step_us: float, rtt_us: float,
                       a_t: csr_matrix | None = None) -> Effect:  # fmt: skip
    """Link capacities after the fabric's flow control has reacted to this traffic.

    ``demand`` is what each column would send if only its NIC limited it; self-clocked
    columns offer only their fair share (they cannot outrun their own pipeline). ``a_t``:
    ``a``'s transpose in CSR, when the caller has it already."""
    a_t = a.tocsr().T.tocsr() if a_t is None else a_t  # as max_min_rates would make it
    cap = net.capacity.copy()
    before = max_min_rates(a, net.capacity, cap=demand, a_t=a_t)
    pushed = np.where(self_clocked, before, np.where(np.isfinite(demand), demand, 0.0))
    offered = a @ pushed
    switch_out = net.graph.vertex_kind[net.tail] >= LEAF
    hot = switch_out & _over(offered, cap)
    pause = np.zeros(net.lanes)
    queues: dict[int, tuple[float, ...]] = {}
    hot_lanes = np.flatnonzero(hot)
    if len(hot_lanes) == 0 or fc.name in ("tcp", "lossless"):
        return Effect(cap, pause, hot, np.zeros(a.shape[1], bool), queues, before, 0.0)
    hop = routed.matrix(net.lanes, len(col_of))
    hop_cols = hop.tocsc()
    hop_rate = pushed[col_of]
    flows_on = np.diff(a.tocsr().indptr)  # columns per lane
    q = fc.quality
    for lane in hot_lanes:
        up, brings = _feeders(net, hop, hop_cols, hop_rate, int(lane))
        # what can reach the link: the feeding links cap what their senders push
        arriving = min(float(offered[lane]), float(brings.sum())) if len(up) else offered[lane]
        if not _over(arriving, cap[lane]):
            continue
        ratio = arriving / cap[lane]
        if q is None:  # credits: the feeding links run at the share the hot link drains
            phi = 1.0 - 1.0 / ratio
            queues[int(lane)] = (IB_PORT_BUFFER_KB,)
        else:
            n = max(int(flows_on[lane]), 1)
            fl = dcqcn_fluid(n, round(float(cap[lane]), 3), round(arriving / n, 3), q,
                             fc.mtu_bytes, max(len(up), 1), round(step_us, 1))  # fmt: skip
            queues[int(lane)] = fl.queue_kb
            phi = fl.pause
            eff = fl.utilisation
            if not q.pfc:
                window = cap[lane] * 1e3 * rtt_us / fc.mtu_bytes
                eff *= go_back_n_efficiency(fl.drop, window)
            cap[lane] *= max(eff, MIN_GOODPUT_SHARE)
        if len(up) and phi > 0 and (q is None or q.pfc):
            pause[up] = np.maximum(pause[up], phi)
    # spreading: a paused link that cannot carry what its flows get under fair sharing pauses
    # its own feeders in turn
    carried = a @ before
    level = np.flatnonzero(pause > 0)
    for _ in range(SPREAD_LEVELS - 1):
        if len(level) == 0:
            break
        left = net.capacity[level] * (1 - pause[level])
        over = level[switch_out[level] & _over(carried[level], left)]
        nxt = []
        for lane in over:
            up, _ = _feeders(net, hop, hop_cols, hop_rate, int(lane))
            phi = 1.0 - net.capacity[lane] * (1 - pause[lane]) / carried[lane]
            fresh = up[pause[up] < phi]
            pause[fresh] = phi
            nxt.append(fresh)
        level = np.concatenate(nxt) if nxt else np.zeros(0, np.int64)
    # victims: flows that the pauses slow, beyond what the hot links themselves cost them
    # credit fabrics never cut a hot link's capacity: then these are the rates already known
    unchanged = np.array_equal(cap, net.capacity)
    at_hot = before if unchanged else max_min_rates(a, cap, cap=demand, a_t=a_t)
    cap = cap * (1 - pause)
    # nothing paused (lossy fabrics always): the rates are the ones just computed
    after = max_min_rates(a, cap, cap=demand, a_t=a_t) if pause.any() else at_hot
    victims = after < at_hot * (1 - VICTIM_LOSS)
    job_lanes = (a[:, job] if job.any() else a).sum(axis=1).A1 > 0
    paused_share = float(pause[job_lanes].mean()) if job_lanes.any() else 0.0
    return Effect(cap, pause, hot, victims, queues, after, paused_share)
