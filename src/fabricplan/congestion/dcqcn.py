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

import tomllib
from dataclasses import dataclass
from functools import cache
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


def _per_packet(p: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """p / ((1 - p)^-n - 1) with ``exponent = n log(1 - p)``: rate of "n packets in a row
    unmarked" events per packet (0 once marks are certain)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        den = np.expm1(np.minimum(-exponent, EXP_LIMIT))
        return np.where((-exponent <= EXP_LIMIT) & (den > 0), p / den, 0.0)


# The fluid model's inputs are rounded to this many significant digits (the offered load per
# flow, and flow and port counts above SMALL_COUNT), so that one integration serves the many
# nearby cases of a run's events and seeds; its outputs move far less than the rounding.
KEY_DIGITS = 2
SMALL_COUNT = 16


def _round(x: float, digits: int = KEY_DIGITS) -> float:
    return float(f"{x:.{digits}g}")


def _count(n: int) -> int:
    return n if n <= SMALL_COUNT else int(_round(n))


@dataclass(frozen=True)
class _Trace:
    """One integration over the whole horizon: cumulative sums of the per-step pause share,
    utilisation, dropped and sent packets, and the queue samples (KB)."""

    cum: np.ndarray  # (4, steps + 1)
    queue_kb: tuple[float, ...]


# per (quality, MTU), then per key: a quality (a pydantic model) is hashed once per batch
_TRACES: dict[tuple[Quality, int], dict[tuple, _Trace]] = {}
TRACE_CACHE_MAX = 20_000  # traces kept (each ~130 KB at the default horizon)


def _integrate(keys: list[tuple[int, float, float, int]], q: Quality, mtu: int) -> list[_Trace]:
    """Integrate the DCQCN fluid model for each ``(n, c, r0, fan_in)`` at once (numpy over the
    keys): ``n`` identical flows starting at ``r0`` GB/s into a link of ``c`` GB/s fed by
    ``fan_in`` ports. Units inside: packets and microseconds."""
    k = len(keys)
    n = np.array([x[0] for x in keys], float)
    cap = np.array([x[1] for x in keys]) * 1e3 / mtu
    r_max = np.array([x[2] for x in keys]) * 1e3 / mtu
    fan = np.maximum(np.array([x[3] for x in keys], float), 1)
    pkt = mtu / 1024.0  # KB per packet
    kmin, kmax = q.kmin_kb / pkt, q.kmax_kb / pkt
    pause_at = q.pfc_xoff_kb * fan / pkt  # each feeding port holds up to XOFF
    limit = q.buffer_kb / pkt
    b = q.byte_counter_kb / pkt
    tau, tau_a, timer = q.cnp_interval_us, q.alpha_timer_us, q.rate_timer_us
    r_ai = q.rate_ai_mbps / 8 / mtu  # Mb/s -> packets/us
    dt = FLUID_STEP_US
    steps = max(int(FLUID_HORIZON_US / dt), 1)
    lag = max(int(FEEDBACK_DELAY_US / dt), 1)
    every = max(int(QUEUE_SAMPLE_US / dt), 1)
    rc, rt, alpha, queue = r_max.copy(), r_max.copy(), np.ones(k), np.zeros(k)
    hist_p = np.zeros((lag, k))
    hist_r = np.repeat(rc[None, :], lag, axis=0)  # what the senders see, FEEDBACK_DELAY_US late
    series = np.zeros((4, steps, k))
    samples = []
    f = q.fast_recovery
    zeros = np.zeros(k)
    for i in range(steps):
        p_now = zeros
        if q.ecn and (queue > kmin).any():
            ramp = (queue - kmin) / (kmax - kmin) * q.pmax
            p_now = np.where(queue > kmax, 1.0, np.where(queue > kmin, ramp, 0.0))
        p, r = hist_p[i % lag].copy(), hist_r[i % lag].copy()
        hist_p[i % lag], hist_r[i % lag] = p_now, rc
        marked = p > 0
        r_floor = np.maximum(r, MIN_RATE_PKT_US)
        if marked.any():
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                lp = np.where(p >= 1, CERTAIN_MARK_LOG, np.log1p(-np.minimum(p, 1 - 1e-12)))
                lp = np.where(marked, lp, 0.0)
                cut = np.where(marked, -np.expm1(tau * r * lp), 0.0)  # P(a CNP in a window)
                inc_b = np.where(marked, _per_packet(p, b * lp), 1.0 / b)
                inc_t = np.where(marked, _per_packet(p, timer * r * lp), 1.0 / (timer * r_floor))
                ai_b = np.where(marked, np.exp(f * b * lp) * inc_b, inc_b)
                ai_t = np.where(marked, np.exp(f * timer * r * lp) * inc_t, inc_t)
                mark = np.where(marked, -np.expm1(tau_a * r * lp), 0.0)
        else:  # nothing marked: no cuts, timers and byte counters raise the rates
            cut = mark = 0.0
            inc_b = ai_b = 1.0 / b
            inc_t = ai_t = 1.0 / (timer * r_floor)
        d_alpha = q.g / tau_a * (mark - alpha)
        d_rt = -(rt - rc) / tau * cut + r_ai * r * (ai_b + ai_t)
        d_rc = -rc * alpha / (2 * tau) * cut + (rt - rc) / 2 * r * (inc_b + inc_t)
        alpha = np.clip(alpha + d_alpha * dt, 0.0, 1.0)
        rt = np.clip(rt + d_rt * dt, 0.0, r_max)
        rc = np.minimum(np.maximum(rc + d_rc * dt, MIN_RATE_PKT_US), np.where(rt > 0, rt, r_max))
        sent = n * rc
        over = sent > cap
        paused = np.zeros(k)
        dropped = np.zeros(k)
        if q.pfc:  # feeding ports held back this share of the time
            hold = (queue >= pause_at) & over
            paused = np.where(hold, 1.0 - cap / sent, 0.0)
            arrive = np.where(hold, cap, sent)
        else:
            arrive = sent
            dropped = np.where((queue >= limit) & over, 1.0 - cap / sent, 0.0)
        out = np.where(queue > 0, cap, np.minimum(arrive, cap))
        queue = np.maximum(queue + (arrive * (1 - dropped) - out) * dt, 0.0)
        if not q.pfc:
            queue = np.minimum(queue, limit)
        series[:, i] = paused, out / cap, dropped * sent, sent
        if i % every == 0:
            samples.append(queue * pkt)
    cum = np.concatenate([np.zeros((4, 1, k)), np.cumsum(series, axis=1)], axis=1)
    queue_kb = np.array(samples).T
    return [_Trace(cum[:, :, j], tuple(queue_kb[j].tolist())) for j in range(k)]


def fluid_key(
    n: int, c_GBps: float, arriving_GBps: float, fan_in: int
) -> tuple[int, float, float, int]:
    """The (rounded) integration key of ``n`` flows bringing ``arriving`` into ``c``."""
    n = _count(max(n, 1))
    c = round(c_GBps, 3)
    return n, c, round(c * _round(arriving_GBps / c) / n, 6), _count(max(fan_in, 1))


def prepare(keys: list[tuple[int, float, float, int]], q: Quality, mtu: int) -> dict[tuple, _Trace]:
    """Integrate, in one batch, every key not integrated yet; the traces of ``q`` and ``mtu``."""
    traces = _TRACES.setdefault((q, mtu), {})
    missing = sorted({x for x in keys if x not in traces})
    if not missing:
        return traces
    if sum(map(len, _TRACES.values())) + len(missing) > TRACE_CACHE_MAX:
        _TRACES.clear()
        traces = _TRACES.setdefault((q, mtu), {})
    for key, trace in zip(missing, _integrate(missing, q, mtu), strict=True):
        traces[key] = trace
    return traces


def fluid_of(key: tuple[int, float, float, int], q: Quality, mtu: int, step_us: float) -> Fluid:
    """The fluid model's averages over one step of ``step_us`` (integrated by :func:`prepare`
    if need be); beyond the horizon the tail of the trace stands for the rest."""
    return fluids_of([key], q, mtu, step_us)[0]


def fluids_of(
    keys: list[tuple[int, float, float, int]], q: Quality, mtu: int, step_us: float
) -> list[Fluid]:
    """:func:`fluid_of` for many keys over the same step."""
    traces = prepare(keys, q, mtu)
    every = max(int(QUEUE_SAMPLE_US / FLUID_STEP_US), 1)
    done: dict[tuple, Fluid] = {}  # keys repeat across a run's hot ports (they are rounded)
    for key in dict.fromkeys(keys):
        tr = traces[key]
        steps = tr.cum.shape[1] - 1
        used = max(min(int(step_us / FLUID_STEP_US), steps), 1)
        whole = tr.cum[:, used] / used
        tail0 = int(steps * (1 - FLUID_TAIL_SHARE))
        last = (tr.cum[:, steps] - tr.cum[:, tail0]) / (steps - tail0)
        rest = max(step_us - used * FLUID_STEP_US, 0.0) / step_us if step_us > 0 else 0.0
        pause, util = ((1 - rest) * whole + rest * last)[:2]
        drop = (1 - rest) * whole[2] / max(whole[3], 1e-12) + rest * last[2] / max(last[3], 1e-12)
        samples = tr.queue_kb[: max(used // every, 1)]
        done[key] = Fluid(float(pause), min(float(util), 1.0), float(drop), samples)
    return [done[key] for key in keys]


def dcqcn_fluid(
    n: int, c_GBps: float, r0_GBps: float, q: Quality, mtu: int, fan_in: int, step_us: float
) -> Fluid:
    """The DCQCN fluid model for ``n`` identical flows starting at ``r0`` into a link of
    capacity ``c``, for one step of ``step_us``."""
    return fluid_of(fluid_key(n, c_GBps, n * r0_GBps, fan_in), q, mtu, step_us)


def go_back_n_efficiency(loss: float, window_packets: float) -> float:
    """Goodput share under go-back-N: every loss resends the window behind it."""
    return (1 - loss) / (1 + (max(window_packets, 1.0) - 1) * loss)
