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


# The fluid model's inputs are rounded to this many significant digits (the offered load per
# flow, and flow and port counts above SMALL_COUNT), so that one integration serves the many
# nearby cases of a run's events and seeds; its outputs move far less than the rounding.
KEY_DIGITS = 2
SMALL_COUNT = 16


def _significant(x: np.ndarray, digits: int = KEY_DIGITS) -> np.ndarray:
    """``x`` (positive) rounded to ``digits`` significant digits."""
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(x)))
    return np.round(x * scale) / scale


def _counts(n: np.ndarray) -> np.ndarray:
    return np.where(n <= SMALL_COUNT, n, _significant(np.maximum(n, 1)))


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
    """Integrate the DCQCN fluid model for each ``(n, c, r0, fan_in)``: ``n`` identical flows
    starting at ``r0`` GB/s into a link of ``c`` GB/s fed by ``fan_in`` ports (compiled:
    :func:`fabricplan.congestion.kernels._dcqcn_fluid`). Units inside: packets and
    microseconds."""
    from fabricplan.congestion import kernels  # numba stays out of the CLI's start-up

    n = np.array([x[0] for x in keys], float)
    cap = np.array([x[1] for x in keys]) * 1e3 / mtu
    r_max = np.array([x[2] for x in keys]) * 1e3 / mtu
    fan = np.maximum(np.array([x[3] for x in keys], float), 1)
    pkt = mtu / 1024.0  # KB per packet
    pause_at = q.pfc_xoff_kb * fan / pkt  # each feeding port holds up to XOFF
    r_ai = q.rate_ai_mbps / 8 / mtu  # Mb/s -> packets/us
    params = np.array(
        [
            q.kmin_kb / pkt,
            q.kmax_kb / pkt,
            q.pmax,
            q.buffer_kb / pkt,
            q.byte_counter_kb / pkt,
            q.cnp_interval_us,
            q.alpha_timer_us,
            q.rate_timer_us,
            r_ai,
            q.g,
            q.fast_recovery,
            FLUID_STEP_US,
            MIN_RATE_PKT_US,
            CERTAIN_MARK_LOG,
            EXP_LIMIT,
            pkt,
        ],
        float,
    )
    sizes = np.array(
        [
            max(int(FLUID_HORIZON_US / FLUID_STEP_US), 1),
            max(int(FEEDBACK_DELAY_US / FLUID_STEP_US), 1),
            max(int(QUEUE_SAMPLE_US / FLUID_STEP_US), 1),
        ],
        np.int64,
    )
    flags = np.array([q.ecn, q.pfc], np.bool_)
    cum, samples = kernels.dcqcn_fluid()(n, cap, r_max, pause_at, params, flags, sizes)
    queue_kb = samples.T
    return [_Trace(cum[:, :, j].copy(), tuple(queue_kb[j].tolist())) for j in range(len(keys))]


def fluid_key(
    n: int, c_GBps: float, arriving_GBps: float, fan_in: int
) -> tuple[int, float, float, int]:
    """The (rounded) integration key of ``n`` flows bringing ``arriving`` into ``c``."""
    one = fluid_keys(
        np.array([n]), np.array([c_GBps]), np.array([arriving_GBps]), np.array([fan_in])
    )
    return one[0]


def fluid_keys(
    n: np.ndarray, c_GBps: np.ndarray, arriving_GBps: np.ndarray, fan_in: np.ndarray
) -> list[tuple[int, float, float, int]]:
    """:func:`fluid_key` for many hot ports at once."""
    n = _counts(np.maximum(np.asarray(n, float), 1))
    c = np.round(np.asarray(c_GBps, float), 3)
    r = np.round(c * _significant(np.asarray(arriving_GBps, float) / c) / n, 6)
    f = _counts(np.maximum(np.asarray(fan_in, float), 1))
    cols = (n.astype(int).tolist(), c.tolist(), r.tolist(), f.astype(int).tolist())
    return list(zip(*cols, strict=True))


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
