"""Fit a fabric's NIC goodput and per-step latency to measured nccl-tests output.

The model's time for each measured size depends on two fabric parameters: the bandwidth each
NIC achieves and the extra latency of a network step. Least squares on log(time) fits both
(scipy, bounded, robust loss) over the sizes where each one decides: >= 64 MiB for bandwidth,
<= 64 KiB for latency; the sizes in between mix both with pipelining effects the model
approximates least well. A parameter that barely moves the prediction over the measured sizes (e.g.
goodput when NVLink SHARP's cap decides, or latency when only large sizes were run) is not
identifiable from the data: it keeps its catalog value and the result says so. Where the
fabric's network plugin limits each NCCL channel (``channel_goodput_GBps``, GPUDirect-TCPX)
and that limit, not the NIC, sets the bandwidth, the per-channel goodput is fitted instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np
from scipy.optimize import least_squares

from fabricplan.catalog import Fabric, Range
from fabricplan.collectives import CommSystem, SystemArrays, sweep
from fabricplan.collectives.model import TABLE_OPS
from fabricplan.nccltests.compare import env_selection, env_system
from fabricplan.nccltests.grade import LARGE_BYTES, SMALL_BYTES
from fabricplan.nccltests.parse import Run

# A parameter is identifiable when a 10 % change moves the predicted times by at least this much
# (median over sizes): below it, the fit would chase noise.
IDENTIFIABLE_SENSITIVITY = 0.01
# Probes for that test: +10 % goodput; +10 % step latency, and at least this many us.
PROBE_STEP = 0.10
PROBE_LATENCY_MIN_US = 0.5
# Search bounds: goodput above this (GB/s) and up to the line rate; the per-step latency delta
# above the reference's -latency + this (us, so latency stays positive) and up to the maximum.
MIN_GOODPUT_GBPS = 0.05
MIN_LATENCY_US = 0.05
MAX_STEP_DELTA_US = 200.0
# Decimals of the goodput (GB/s) and latency (us) written: nccl-tests prints two.
WRITTEN_DECIMALS = 2
# The one-switch latency written to the catalog never drops below this (us).
WRITTEN_LATENCY_FLOOR_US = 0.01
# Robust loss: residuals in log-time beyond ~10 % count linearly, so one odd size cannot drag
# the fit.
LOSS_SCALE = 0.1


@dataclass(frozen=True)
class Fit:
    fabric: Fabric  # the calibrated definition
    nic_GBps: float
    nic_identified: bool
    step_delta_us: float
    latency_identified: bool
    points: int
    rms_log_error_before: float
    rms_log_error_after: float  # the residual: rms of log(predicted / measured time)
    nic_sigma_GBps: float | None = None  # one standard error of each fitted value (None: pinned,
    step_delta_sigma_us: float | None = None  # or too few sizes to tell)
    at_bounds: tuple[str, ...] = ()  # each fitted value the search bounds stopped
    # what nic_GBps is: a NIC's goodput ("nic"), or one NCCL channel's ("channel") where the
    # fabric's plugin limits channels below the NIC
    bandwidth: str = "nic"


# A fitted value within this fraction of the span of its bounds sits on the bound: the data
# asked for more (or less) than the search allows.
AT_BOUND_FRACTION = 1e-6


Runs = list[tuple[Run, CommSystem, str]]


def _fit_sizes(run: Run) -> np.ndarray:
    sizes = np.array([r.size_bytes for r in run.results], dtype=float)
    return sizes[(sizes >= LARGE_BYTES) | (sizes <= SMALL_BYTES)]


@dataclass(frozen=True)
class _Prepared:
    """What a run's prediction needs that the fitted parameters do not change."""

    system: CommSystem  # with the log's channel limits
    shift: float  # its step-latency delta over the first run's (other hop counts)
    op: str
    sizes: np.ndarray
    algorithms: list[str] | None
    protocols: list[str] | None


def _prepare(runs: Runs) -> list[_Prepared]:
    base_delta = runs[0][1].net_step_delta_us
    out = []
    for run, system, op in runs:
        algos, protos = env_selection(run.env)
        out.append(
            _Prepared(
                env_system(run.env, system),
                system.net_step_delta_us - base_delta,
                op,
                np.maximum(_fit_sizes(run), 1),
                algos if op in TABLE_OPS else None,
                protos,
            )
        )
    return out


def _log_times(
    runs: list[_Prepared], nic: float, delta: float, per_channel: bool = False
) -> np.ndarray:
    """Predicted log-times of every run at goodput ``nic`` (a NIC's, or with ``per_channel``
    one NCCL channel's) and step-latency delta ``delta``.
    ``delta`` is the first run's; runs through other hop counts keep their own difference to it
    (a change of the fabric's own latency moves every hop count by the same amount). Each run
    is predicted under the algorithm and channel limits its log sets, as ``compare`` does."""
    out = []
    for r in runs:
        bw = {"channel_GBps": nic} if per_channel else {"nic_GBps": nic}
        s = r.system.with_(net_step_delta_us=delta + r.shift, **bw)
        res = sweep(
            SystemArrays.of([s]), r.op, r.sizes, algorithms=r.algorithms, protocols=r.protocols
        )
        out.append(np.log(res.time_us[0]))
    return np.concatenate(out)


def _sensitivity(
    runs: list[_Prepared], nic: float, delta: float, per_channel: bool
) -> tuple[float, float]:
    """Median change of predicted log-time for +10 % goodput over the large sizes, and for
    +10 % (at least +0.5 us) step latency over the small sizes."""
    sizes = np.concatenate([r.sizes for r in runs])
    base = _log_times(runs, nic, delta, per_channel)
    more = _log_times(runs, nic * (1 + PROBE_STEP), delta, per_channel)
    d_nic = np.abs(more - base)[sizes >= LARGE_BYTES]
    probe = max(PROBE_STEP * abs(delta), PROBE_LATENCY_MIN_US)
    d_lat = np.abs(_log_times(runs, nic, delta + probe, per_channel) - base)
    d_lat = d_lat[sizes <= SMALL_BYTES]
    return (
        float(np.median(d_nic)) if d_nic.size else 0.0,
        float(np.median(d_lat)) if d_lat.size else 0.0,
    )


def calibrate(
    runs: Runs,
    base: Fabric,
    *,
    new_id: str,
    source: str,
) -> Fit:
    """Fit ``base`` to every (run, system, op); all systems must use ``base``."""
    system = runs[0][1]
    measured = np.concatenate(
        [
            np.log(
                [
                    max(r.time_us, 1e-3)
                    for r in run.results
                    if r.size_bytes >= LARGE_BYTES or r.size_bytes <= SMALL_BYTES
                ]
            )
            for run, _, _ in runs
        ]
    )
    if measured.size == 0:
        raise ValueError("no sizes <= 64 KiB or >= 64 MiB to fit")
    nic0, delta0 = system.nic_GBps, system.net_step_delta_us
    upper_nic = base.line_rate_gbps / 8
    # the step delta holds the plugin's own per-step time (plugin_step_us) on top of the wire's
    # latency difference; the fit moves the wire's and keeps the plugin's
    step = base.plugin_step_us.nominal if base.plugin_step_us else 0.0
    # the reference fabric's latency at these hops
    ref_lat = system.p2p_latency_us - (delta0 - step)

    prepared = _prepare(runs)
    # the plugin's channels, not the NIC, bound the bandwidth (at the first run's channels):
    # fit what one channel carries
    first = prepared[0].system
    per_channel = first.nic_net_GBps < first.nic_GBps
    if per_channel:
        nic0 = first.channel_GBps

    def residual(x: np.ndarray) -> np.ndarray:
        return _log_times(prepared, x[0], x[1], per_channel) - measured

    before = float(np.sqrt(np.mean(residual(np.array([nic0, delta0])) ** 2)))
    sens_nic, sens_lat = _sensitivity(prepared, nic0, delta0, per_channel)
    fit_nic, fit_lat = sens_nic >= IDENTIFIABLE_SENSITIVITY, sens_lat >= IDENTIFIABLE_SENSITIVITY
    # a parameter not fitted is pinned by a bound pair 1e-9 either side of its value
    lo = [
        MIN_GOODPUT_GBPS if fit_nic else nic0 - 1e-9,
        step - ref_lat + MIN_LATENCY_US if fit_lat else delta0 - 1e-9,
    ]
    hi = [
        upper_nic if fit_nic else nic0 + 1e-9,
        step + MAX_STEP_DELTA_US if fit_lat else delta0 + 1e-9,
    ]
    x0 = np.clip([nic0, delta0], lo, hi)
    sol = least_squares(residual, x0, bounds=(lo, hi), loss="soft_l1", f_scale=LOSS_SCALE)
    nic, delta = float(sol.x[0]), float(sol.x[1])
    after = float(np.sqrt(np.mean(residual(sol.x) ** 2)))
    free = [fit_nic, fit_lat]
    sigma = _standard_errors(sol.jac, residual(sol.x), free)
    at_bounds = _bound_hits(sol.x, lo, hi, free, per_channel)

    def widen(r: Range, value: float, note: str) -> Range:
        return Range(
            low=min(r.low, value),
            high=max(r.high, value),
            typical=value,
            sources=(*r.sources, note),
        )

    g = base.channel_goodput_GBps if per_channel else base.nic_goodput_GBps
    assert g is not None  # per_channel only where the fabric limits its channels
    # written to the 0.01 GB/s (and us) nccl-tests prints: finer digits are noise
    written_nic = round(min(nic, upper_nic), WRITTEN_DECIMALS)
    goodput = (
        widen(g, written_nic, f"calibrated: {written_nic:.2f} GB/s ({source})") if fit_nic else g
    )
    bandwidth_field = "channel_goodput_GBps" if per_channel else "nic_goodput_GBps"
    # the catalog figure is through one switch; the system adds its other hops on top
    hops_extra = system.p2p_latency_us - base.rdma_latency_us.nominal
    latency_value = round(
        max(ref_lat + delta - step - hops_extra, WRITTEN_LATENCY_FLOOR_US), WRITTEN_DECIMALS
    )
    lat = base.rdma_latency_us
    latency = (
        widen(lat, latency_value, f"calibrated: {latency_value:.2f} us ({source})")
        if fit_lat
        else lat
    )
    fabric = base.model_copy(
        update={
            "id": new_id,
            "name": f"{base.name} (calibrated)",
            bandwidth_field: goodput,
            "rdma_latency_us": latency,
            "source": f"fabricplan calibrate: {source}; base {base.id}: {base.source}",
            "as_of": date.today().isoformat(),
            "notes": (
                f"fit over {len(measured)} sizes; rms log-time error {before:.3f} -> {after:.3f}"
                + ("" if fit_nic else "; goodput not identifiable from these sizes")
                + ("" if fit_lat else "; latency not identifiable from these sizes")
                + "".join(f"; {hit}" for hit in at_bounds)
            ),
        }
    )
    Fabric.model_validate(fabric.model_dump())  # the definition must load back
    return Fit(
        fabric,
        nic,
        fit_nic,
        delta,
        fit_lat,
        len(measured),
        before,
        after,
        sigma[0],
        sigma[1],
        at_bounds,
        "channel" if per_channel else "nic",
    )


_PARAMETERS = (("NIC goodput", "GB/s"), ("network step latency delta", "us"))
_CHANNEL_GOODPUT = ("goodput per NCCL channel", "GB/s")


def _bound_hits(
    x: np.ndarray, lo: list[float], hi: list[float], free: list[bool], per_channel: bool = False
) -> tuple[str, ...]:
    """Each free parameter the search stopped at a bound, in words."""
    out = []
    names = (_CHANNEL_GOODPUT, _PARAMETERS[1]) if per_channel else _PARAMETERS
    for i, (name, unit) in enumerate(names):
        span = AT_BOUND_FRACTION * (hi[i] - lo[i])
        for side, bound in (("upper", hi[i]), ("lower", lo[i])):
            if free[i] and abs(x[i] - bound) <= span:
                out.append(
                    f"{name} {x[i]:.4g} {unit} is at its {side} search bound "
                    f"({bound:.4g} {unit}): the data ask for a value beyond it"
                )
                break
    return tuple(out)


def _standard_errors(
    jac: np.ndarray, res: np.ndarray, free: list[bool]
) -> tuple[float | None, float | None]:
    """One standard error of each free parameter: the residual variance times (J^T J)^-1
    over the free columns of the Jacobian at the solution (None when pinned, or when there are
    no more sizes than free parameters)."""
    cols = [i for i, f in enumerate(free) if f]
    dof = res.size - len(cols)
    out: list[float | None] = [None, None]
    if not cols or dof <= 0:
        return out[0], out[1]
    j = jac[:, cols]
    try:
        cov = np.linalg.inv(j.T @ j) * float(res @ res) / dof
    except np.linalg.LinAlgError:
        return out[0], out[1]
    for k, i in enumerate(cols):
        out[i] = float(np.sqrt(cov[k, k])) if cov[k, k] >= 0 else None
    return out[0], out[1]
