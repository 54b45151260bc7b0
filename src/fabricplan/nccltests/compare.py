"""Measured nccl-tests results next to what the model says the system should do."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.collectives import CommSystem, SystemArrays, sweep
from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.congestion import CongestionBackend
from fabricplan.collectives.model import TABLE_OPS
from fabricplan.collectives.predict import ALGO_NAMES
from fabricplan.nccltests.parse import Run

# the spellings NCCL_ALGO accepts, as the collective model reads them
_ALGO_ALIASES = {name: K.ALGORITHMS[i] for name, i in ALGO_NAMES.items()}


def env_selection(env: dict[str, str]) -> tuple[list[str] | None, list[str] | None]:
    """The algorithms and protocols that NCCL_ALGO / NCCL_PROTO in a log allow (None = all)."""

    def allowed(value: str | None, known: dict[str, str]) -> list[str] | None:
        if not value:
            return None
        text = value.split(";")[0]  # a global list; per-collective entries are not modelled
        exclude = text.startswith("^")
        names = {known.get(t.strip().lower()) for t in text.lstrip("^").split(",")} - {None}
        if not names:
            return None
        keep = set(known.values()) - names if exclude else names
        return sorted(x for x in keep if x is not None)

    algos = allowed(env.get("NCCL_ALGO"), _ALGO_ALIASES)
    protos = allowed(env.get("NCCL_PROTO"), {p.lower(): p for p in K.PROTOCOLS})
    return algos, protos


# The variables that bound a communicator's channels, each pair the lower and the upper bound:
# NCCL_MIN/MAX_CTAS (the communicator config's names since 2.17) and the older
# NCCL_MIN/MAX_NCHANNELS, which NCCL still reads; both apply (src/graph/connect.cc: at most
# the smaller maximum, at least the larger minimum).
_CHANNEL_LIMITS = {
    "min_ctas": ("NCCL_MIN_CTAS", "NCCL_MIN_NCHANNELS"),
    "max_ctas": ("NCCL_MAX_CTAS", "NCCL_MAX_NCHANNELS"),
}


def env_system(env: dict[str, str], system: CommSystem) -> CommSystem:
    """``system`` with the channel limits (NCCL_MIN/MAX_CTAS, NCCL_MIN/MAX_NCHANNELS) a log
    sets; a limit the log sets replaces the fabric's own."""
    limits = {}
    for attr, names in _CHANNEL_LIMITS.items():
        found = [int(v) for v in (env.get(n, "").strip() for n in names) if v.isdigit()]
        found = [v for v in found if v > 0]
        if found:
            limits[attr] = max(found) if attr == "min_ctas" else min(found)
    if not limits:
        return system
    low, high = limits.get("min_ctas", system.min_ctas), limits.get("max_ctas", system.max_ctas)
    return system.with_(min_ctas=min(low, high), max_ctas=high)


@dataclass(frozen=True)
class Comparison:
    op: str
    sizes: np.ndarray
    measured_time_us: np.ndarray
    measured_busbw_GBps: np.ndarray
    expected_time_us: np.ndarray
    expected_busbw_GBps: np.ndarray
    algorithm: list[str]
    forced_algorithms: list[str] | None

    @property
    def busbw_ratio(self) -> np.ndarray:
        """measured / expected busbw (1.0 = as predicted)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.measured_busbw_GBps / self.expected_busbw_GBps

    @property
    def speed_ratio(self) -> np.ndarray:
        """expected / measured time: the busbw ratio (1.0 = as predicted; below 1 = slower),
        without the rounding of busbw nccl-tests prints (0.00 GB/s at 8 B); NaN where either
        time is 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.expected_time_us / self.measured_time_us
        return np.where(np.isfinite(ratio) & (self.measured_time_us > 0), ratio, np.nan)

    @property
    def time_ratio(self) -> np.ndarray:
        """measured / expected time (1.0 = as predicted; above 1 = slower)."""
        return self.measured_time_us / self.expected_time_us


def compare(
    run: Run,
    system: CommSystem,
    op: str,
    *,
    backend: CongestionBackend | None = None,
    honour_env: bool = True,
) -> Comparison:
    """Predict ``run``'s sizes on ``system``, under the algorithm limits its log shows."""
    algos, protos = env_selection(run.env) if honour_env else (None, None)
    if honour_env:
        system = env_system(run.env, system)
    if op not in TABLE_OPS:
        algos = None
    sizes = np.array([r.size_bytes for r in run.results], dtype=float)
    res = sweep(
        SystemArrays.of([system]), op, sizes, backend=backend, algorithms=algos, protocols=protos
    )
    names = [
        K.ALGO_DISPLAY[K.ALGORITHMS[a]] if a >= 0 else "P2P" for a in res.algorithm[0].tolist()
    ]
    return Comparison(
        op=op,
        sizes=sizes,
        measured_time_us=np.array([r.time_us for r in run.results]),
        measured_busbw_GBps=np.array([r.busbw_GBps for r in run.results]),
        expected_time_us=res.time_us[0],
        expected_busbw_GBps=res.busbw_GBps[0],
        algorithm=names,
        forced_algorithms=algos,
    )
