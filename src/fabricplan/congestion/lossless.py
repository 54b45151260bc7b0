"""What flow control does at congested links: DCQCN and PFC (RoCE), credits (InfiniBand).

Max-min sharing assumes congestion control gives every flow its fair share at once. Real
fabrics get there through queues. At each *hot* link (offered load above capacity) this module
works out, from the fabric's flow control:

- RoCE: the DCQCN fluid model (Zhu et al., CoNEXT 2016, "ECN or Delay", the per-flow form of
  the SIGCOMM 2015 model) for the N flows that meet there, integrated over the step: how full
  the queue gets, how much of the link DCQCN's rate cuts leave idle, and for how long the
  queue sits above the PFC threshold. While it does, the switch pauses the ingress ports that
  feed it, which stops *every* flow on those links, including victims that never reach the
  hot link (congestion spreading; "head-of-line blocking, congestion spreading, and occasional
  deadlocks" are the costs of PFC that Mittal et al., SIGCOMM 2018, list). With PFC off, the
  queue overflows instead, and RoCE NICs recover losses by go-back-N, whose efficiency is
  (1 - p) / (1 + (W - 1) p) for loss rate p and W packets in flight per round trip.
- InfiniBand: credit-based link-level flow control never drops; without congestion control a
  hot link holds its input buffers full, so the links feeding it run at the share the hot
  link drains (the classic tree-saturation picture, Pfister & Norton 1985).

The effects come back as reduced link capacities for a second max-min pass.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.sparse import csr_matrix

from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.waterfill import max_min_rates
from fabricplan.topology.graph import LEAF

# Control-loop delay (mark -> CNP -> rate cut) of the fluid model: a few microseconds inside one
# fabric; the CoNEXT 2016 analysis uses 4 us as its stable baseline.
FEEDBACK_DELAY_US = 4.0
# Integration step and horizon of the fluid model. Beyond the horizon the last quarter's
# averages stand for the rest of the step (DCQCN has settled or is cycling by then).
FLUID_STEP_US = 0.5
FLUID_HORIZON_US = 2000.0
# Congestion spreads hop by hop; three levels cover leaf -> spine -> core in a 3-tier Clos.
SPREAD_LEVELS = 3
# Assumption: queue a credit-based (InfiniBand) port holds before credits run out, for latency
# under load; InfiniBand switches keep small per-port, per-VL buffers.
IB_PORT_BUFFER_KB = 64.0


class Quality(BaseModel):
    """One RoCE operating quality: PFC on or off, ECN marking thresholds, DCQCN parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    name: str
    pfc: bool
    ecn: bool
    kmin_kb: float = Field(ge=0)
    kmax_kb: float = Field(gt=0)
    pmax: float = Field(gt=0, le=1)
    g: float = Field(gt=0, lt=1)
    cnp_interval_us: float = Field(gt=0)
    alpha_timer_us: float = Field(gt=0)
    rate_timer_us: float = Field(gt=0)
    byte_counter_kb: float = Field(gt=0)
    fast_recovery: int = Field(ge=0)
    rate_ai_mbps: float = Field(gt=0)
    pfc_xoff_kb: float = Field(gt=0)
    buffer_kb: float = Field(gt=0)
    source: str


@cache
def qualities() -> dict[str, Quality]:
    text = (resources.files("fabricplan.congestion") / "data" / "roce_quality.toml").read_text()
    return {q["id"]: Quality(**q) for q in tomllib.loads(text)["quality"]}


def quality(name: str) -> Quality:
    known = qualities()
    if name not in known:
        raise ValueError(f"roce_quality: unknown '{name}'; known: {', '.join(known)}")
    return known[name]


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
class Fluid:
    pause: float  # share of time the feeding links are paused
    utilisation: float  # egress throughput / capacity
    drop: float  # share of arriving packets dropped
    queue_kb: tuple[float, ...]  # queue samples, one per microsecond of the horizon


@lru_cache(maxsize=4096)
def dcqcn_fluid(n: int, c_GBps: float, r0_GBps: float, q: Quality, mtu: int, fan_in: int,
                step_us: float) -> Fluid:  # fmt: skip
    """Integrate the DCQCN fluid model for ``n`` identical flows starting at ``r0`` into a link
    of capacity ``c``, for one step of ``step_us``. Units inside: packets and microseconds."""
    pkt = mtu / 1024.0  # KB per packet
    cap = c_GBps * 1e3 / mtu
    r_max = r0_GBps * 1e3 / mtu
    kmin, kmax = q.kmin_kb / pkt, q.kmax_kb / pkt
    pause_at = q.pfc_xoff_kb * max(fan_in, 1) / pkt
    limit = q.buffer_kb / pkt
    b = q.byte_counter_kb / pkt
    tau, tau_a, timer = q.cnp_interval_us, q.alpha_timer_us, q.rate_timer_us
    r_ai = q.rate_ai_mbps / 8 / mtu  # Mb/s -> packets/us
    dt = FLUID_STEP_US
    horizon = min(step_us, FLUID_HORIZON_US)
    steps = max(int(horizon / dt), 1)
    lag = max(int(FEEDBACK_DELAY_US / dt), 1)
    rc, rt, alpha, queue = r_max, r_max, 1.0, 0.0
    hist_p = [0.0] * lag
    hist_r = [rc] * lag
    pause_sum = util_sum = drop_sum = arrive_sum = 0.0
    tail_from = int(steps * 0.75)
    tail = [0.0, 0.0, 0.0, 0.0, 0]
    samples = []
    every = max(int(1.0 / dt), 1)
    for i in range(steps):
        p_now = 0.0
        if q.ecn and queue > kmin:
            p_now = 1.0 if queue > kmax else (queue - kmin) / (kmax - kmin) * q.pmax
        p, r = hist_p[i % lag], hist_r[i % lag]
        hist_p[i % lag], hist_r[i % lag] = p_now, rc
        if p > 0:
            lp = math.log1p(-p) if p < 1 else -50.0
            cut = -math.expm1(tau * r * lp)  # P(a CNP in one CNP window)
            inc_b = _per_packet(p, b * lp)
            inc_t = _per_packet(p, timer * r * lp)
            ai_b = math.exp(q.fast_recovery * b * lp) * inc_b
            ai_t = math.exp(q.fast_recovery * timer * r * lp) * inc_t
            mark = -math.expm1(tau_a * r * lp)
        else:
            cut, inc_b, inc_t, mark = 0.0, 1.0 / b, 1.0 / (timer * max(r, 1e-12)), 0.0
            ai_b, ai_t = inc_b, inc_t
        d_alpha = q.g / tau_a * (mark - alpha)
        d_rt = -(rt - rc) / tau * cut + r_ai * r * (ai_b + ai_t)
        d_rc = -rc * alpha / (2 * tau) * cut + (rt - rc) / 2 * r * (inc_b + inc_t)
        alpha = min(max(alpha + d_alpha * dt, 0.0), 1.0)
        rt = min(max(rt + d_rt * dt, 0.0), r_max)
        rc = min(max(rc + d_rc * dt, 1e-6), rt if rt > 0 else r_max)
        arrive = n * rc
        paused = dropped = 0.0
        if q.pfc and queue >= pause_at and arrive > cap:
            paused = 1.0 - cap / arrive  # feeding ports held back this share of the time
            arrive = cap
        elif not q.pfc and queue >= limit and arrive > cap:
            dropped = 1.0 - cap / arrive
        out = cap if queue > 0 else min(arrive, cap)
        queue = max(queue + (arrive * (1 - dropped) - out) * dt, 0.0)
        if not q.pfc:
            queue = min(queue, limit)
        pause_sum += paused
        util_sum += out / cap
        drop_sum += dropped * n * rc
        arrive_sum += n * rc
        if i >= tail_from:
            tail[0] += paused
            tail[1] += out / cap
            tail[2] += dropped * n * rc
            tail[3] += n * rc
            tail[4] += 1
        if i % every == 0:
            samples.append(queue * pkt)
    # the rest of a long step repeats the last quarter
    rest = max(step_us - horizon, 0.0) / step_us
    k = max(tail[4], 1)

    def blend(total: float, last: float, count: int) -> float:
        return (1 - rest) * total / count + rest * last / k

    pause = blend(pause_sum, tail[0], steps)
    util = blend(util_sum, tail[1], steps)
    drop = (1 - rest) * drop_sum / max(arrive_sum, 1e-12) + rest * tail[2] / max(tail[3], 1e-12)
    return Fluid(pause, min(util, 1.0), drop, tuple(samples))


def _per_packet(p: float, exponent: float) -> float:
    """p / ((1 - p)^-n - 1) with ``exponent = n log(1 - p)``: rate of "n packets in a row
    unmarked" events per packet (0 once marks are certain)."""
    if -exponent > 700:
        return 0.0
    den = math.expm1(-exponent)
    return p / den if den > 0 else 0.0


def go_back_n_efficiency(loss: float, window_packets: float) -> float:
    """Goodput share under go-back-N: every loss resends the window behind it."""
    return (1 - loss) / (1 + (max(window_packets, 1.0) - 1) * loss)


@dataclass(frozen=True)
class Effect:
    capacity: np.ndarray  # per lane, after flow control
    pause: np.ndarray  # per lane, share of time paused
    hot: np.ndarray  # bool per lane: offered load above capacity
    victims: np.ndarray  # bool per column: slowed by pauses (congestion spreading)
    queue_kb: dict[int, tuple[float, ...]]  # hot lane -> queue samples
    first_rates: np.ndarray | None
    paused_fraction: float


def _feeders(net: Network, hop: csr_matrix, hop_rate: np.ndarray, lane: int
             ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The lanes into ``lane``'s tail switch that carry its traffic, and how much (GB/s) of
    ``lane``'s traffic each brings, at most its capacity."""
    row = hop.getrow(lane)
    flows, w_out = row.indices, row.data
    sub = hop[:, flows].tocsr()
    into = np.flatnonzero((net.head == net.tail[lane]) & (np.diff(sub.indptr) > 0))
    into = into[into != lane]
    if len(into) == 0:
        return into, np.zeros(0)
    part = sub[into]
    share = part.minimum(csr_matrix(np.broadcast_to(w_out, part.shape)))
    brings = share @ hop_rate[flows]
    return into, np.minimum(np.asarray(brings).ravel(), net.capacity[into])


def apply_flow_control(net: Network, routed: Routed, col_of: np.ndarray, a: csr_matrix,
                       demand: np.ndarray, self_clocked: np.ndarray, job: np.ndarray,
                       fc: FlowControl, step_us: float, rtt_us: float) -> Effect:  # fmt: skip
    """Link capacities after the fabric's flow control has reacted to this traffic.

    ``demand`` is what each column would send if only its NIC limited it; self-clocked
    columns offer only their fair share (they cannot outrun their own pipeline)."""
    cap = net.capacity.copy()
    before = max_min_rates(a, net.capacity, cap=demand)
    pushed = np.where(self_clocked, before, np.where(np.isfinite(demand), demand, 0.0))
    offered = a @ pushed
    switch_out = net.graph.vertex_kind[net.tail] >= LEAF
    hot = switch_out & (offered > cap * (1 + 1e-6))
    pause = np.zeros(net.lanes)
    queues: dict[int, tuple[float, ...]] = {}
    hot_lanes = np.flatnonzero(hot)
    if len(hot_lanes) == 0 or fc.name in ("tcp", "lossless"):
        return Effect(cap, pause, hot, np.zeros(a.shape[1], bool), queues, None, 0.0)
    hop = csr_matrix((routed.weight, (routed.lane, routed.flow)),
                     shape=(net.lanes, len(col_of))).tocsr()  # fmt: skip
    hop_rate = pushed[col_of]
    flows_on = np.diff(a.tocsr().indptr)  # columns per lane
    q = fc.quality
    for lane in hot_lanes:
        up, brings = _feeders(net, hop, hop_rate, int(lane))
        # what can reach the link: the feeding links cap what their senders push
        arriving = min(float(offered[lane]), float(brings.sum())) if len(up) else offered[lane]
        if arriving <= cap[lane] * (1 + 1e-6):
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
            cap[lane] *= max(eff, 1e-3)
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
        over = level[switch_out[level] & (carried[level] > left * (1 + 1e-6))]
        nxt = []
        for lane in over:
            up, _ = _feeders(net, hop, hop_rate, int(lane))
            phi = 1.0 - net.capacity[lane] * (1 - pause[lane]) / carried[lane]
            fresh = up[pause[up] < phi]
            pause[fresh] = phi
            nxt.append(fresh)
        level = np.concatenate(nxt) if nxt else np.zeros(0, np.int64)
    # victims: flows that the pauses slow, beyond what the hot links themselves cost them
    at_hot = max_min_rates(a, cap, cap=demand)
    cap = cap * (1 - pause)
    after = max_min_rates(a, cap, cap=demand)
    victims = after < at_hot * 0.99
    job_lanes = (a[:, job] if job.any() else a).sum(axis=1).A1 > 0
    paused_share = float(pause[job_lanes].mean()) if job_lanes.any() else 0.0
    return Effect(cap, pause, hot, victims, queues, before, paused_share)
