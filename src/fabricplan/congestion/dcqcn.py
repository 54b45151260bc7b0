"""RoCE congestion control at one hot link: the DCQCN fluid model, PFC and go-back-N.

The fluid model is the per-flow form (Zhu et al., "ECN or Delay: Lessons Learnt from Analysis
of DCQCN and TIMELY", CoNEXT 2016) of the SIGCOMM 2015 DCQCN model, here for N identical flows
starting at their NIC share. On top of it: PFC holds the queue at the XOFF threshold by pausing
the feeding ports; with PFC off the queue overflows and drops instead, which RoCE NICs recover
by go-back-N, whose efficiency is (1 - p) / (1 + (W - 1) p) for loss rate p and W packets in
flight per round trip (the textbook ARQ result; Mittal et al., "Revisiting Network Support for
RDMA", SIGCOMM 2018, on why it collapses).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# Control-loop delay (mark -> CNP -> rate cut) of the fluid model: a few microseconds inside one
# fabric; the CoNEXT 2016 analysis uses 4 us as its stable baseline.
FEEDBACK_DELAY_US = 4.0
# Integration step and horizon of the fluid model. Beyond the horizon the averages of the last
# FLUID_TAIL_SHARE of it stand for the rest of the step (DCQCN has settled or is cycling).
FLUID_STEP_US = 0.5
FLUID_HORIZON_US = 2000.0
FLUID_TAIL_SHARE = 0.25
QUEUE_SAMPLE_US = 1.0  # spacing of the queue samples kept for latency under load
# log(1 - p) standing in for p = 1 (every packet marked): large enough that every "n packets
# unmarked" probability underflows to 0.
CERTAIN_MARK_LOG = -50.0
EXP_LIMIT = 700.0  # math.exp overflows just above 709
MIN_RATE_PKT_US = 1e-6  # a flow's rate never reaches exactly zero (keeps the event rates finite)


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
    pfc_xon_kb: float = Field(gt=0)
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
class Fluid:
    pause: float  # share of time the feeding links are paused
    utilisation: float  # egress throughput / capacity
    drop: float  # share of arriving packets dropped
    queue_kb: tuple[float, ...]  # queue samples, one per QUEUE_SAMPLE_US of the horizon


def _per_packet(p: float, exponent: float) -> float:
    """p / ((1 - p)^-n - 1) with ``exponent = n log(1 - p)``: rate of "n packets in a row
    unmarked" events per packet (0 once marks are certain)."""
    if -exponent > EXP_LIMIT:
        return 0.0
    den = math.expm1(-exponent)
    return p / den if den > 0 else 0.0


@lru_cache(maxsize=4096)
def dcqcn_fluid(n: int, c_GBps: float, r0_GBps: float, q: Quality, mtu: int, fan_in: int,
                step_us: float) -> Fluid:  # fmt: skip
    """Integrate the DCQCN fluid model for ``n`` identical flows starting at ``r0`` into a link
    of capacity ``c``, for one step of ``step_us``. Units inside: packets and microseconds."""
    pkt = mtu / 1024.0  # KB per packet
    cap = c_GBps * 1e3 / mtu
    r_max = r0_GBps * 1e3 / mtu
    kmin, kmax = q.kmin_kb / pkt, q.kmax_kb / pkt
    pause_at = q.pfc_xoff_kb * max(fan_in, 1) / pkt  # each feeding port holds up to XOFF
    limit = q.buffer_kb / pkt
    b = q.byte_counter_kb / pkt
    tau, tau_a, timer = q.cnp_interval_us, q.alpha_timer_us, q.rate_timer_us
    r_ai = q.rate_ai_mbps / 8 / mtu  # Mb/s -> packets/us
    dt = FLUID_STEP_US
    horizon = min(step_us, FLUID_HORIZON_US)
    steps = max(int(horizon / dt), 1)
    lag = max(int(FEEDBACK_DELAY_US / dt), 1)
    every = max(int(QUEUE_SAMPLE_US / dt), 1)
    rc, rt, alpha, queue = r_max, r_max, 1.0, 0.0
    hist_p, hist_r = [0.0] * lag, [rc] * lag  # what the senders see, FEEDBACK_DELAY_US late
    paused_at, util_at, dropped_at, arrived_at, samples = [], [], [], [], []
    for i in range(steps):
        p_now = 0.0
        if q.ecn and queue > kmin:
            p_now = 1.0 if queue > kmax else (queue - kmin) / (kmax - kmin) * q.pmax
        p, r = hist_p[i % lag], hist_r[i % lag]
        hist_p[i % lag], hist_r[i % lag] = p_now, rc
        if p > 0:
            lp = math.log1p(-p) if p < 1 else CERTAIN_MARK_LOG
            cut = -math.expm1(tau * r * lp)  # P(a CNP in one CNP window)
            inc_b = _per_packet(p, b * lp)
            inc_t = _per_packet(p, timer * r * lp)
            ai_b = math.exp(q.fast_recovery * b * lp) * inc_b
            ai_t = math.exp(q.fast_recovery * timer * r * lp) * inc_t
            mark = -math.expm1(tau_a * r * lp)
        else:
            cut, inc_b, inc_t, mark = 0.0, 1.0 / b, 1.0 / (timer * max(r, MIN_RATE_PKT_US)), 0.0
            ai_b, ai_t = inc_b, inc_t
        d_alpha = q.g / tau_a * (mark - alpha)
        d_rt = -(rt - rc) / tau * cut + r_ai * r * (ai_b + ai_t)
        d_rc = -rc * alpha / (2 * tau) * cut + (rt - rc) / 2 * r * (inc_b + inc_t)
        alpha = min(max(alpha + d_alpha * dt, 0.0), 1.0)
        rt = min(max(rt + d_rt * dt, 0.0), r_max)
        rc = min(max(rc + d_rc * dt, MIN_RATE_PKT_US), rt if rt > 0 else r_max)
        sent = n * rc
        arrive, paused, dropped = sent, 0.0, 0.0
        if q.pfc and queue >= pause_at and arrive > cap:
            paused = 1.0 - cap / arrive  # feeding ports held back this share of the time
            arrive = cap
        elif not q.pfc and queue >= limit and arrive > cap:
            dropped = 1.0 - cap / arrive
        out = cap if queue > 0 else min(arrive, cap)
        queue = max(queue + (arrive * (1 - dropped) - out) * dt, 0.0)
        if not q.pfc:
            queue = min(queue, limit)
        paused_at.append(paused)
        util_at.append(out / cap)
        dropped_at.append(dropped * sent)
        arrived_at.append(sent)
        if i % every == 0:
            samples.append(queue * pkt)
    # the rest of a long step repeats the tail of the horizon
    rest = max(step_us - horizon, 0.0) / step_us
    tail = slice(int(steps * (1 - FLUID_TAIL_SHARE)), None)
    series = np.array([paused_at, util_at, dropped_at, arrived_at])
    whole, last = series.mean(axis=1), series[:, tail].mean(axis=1)
    pause, util = ((1 - rest) * whole + rest * last)[:2]
    drop = (1 - rest) * whole[2] / max(whole[3], 1e-12) + rest * last[2] / max(last[3], 1e-12)
    return Fluid(float(pause), min(float(util), 1.0), float(drop), tuple(samples))


def go_back_n_efficiency(loss: float, window_packets: float) -> float:
    """Goodput share under go-back-N: every loss resends the window behind it."""
    return (1 - loss) / (1 + (max(window_packets, 1.0) - 1) * loss)
