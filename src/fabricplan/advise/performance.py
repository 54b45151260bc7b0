"""Drivers that change performance, evaluated by re-running the workload model.

Each driver has a *position*: 0 is the low end of its range, 1 the high end, and its nominal
position is where the scenario's own step times were computed. The step time (training) or
time per output token (serving) of every fabric is computed by the workload model at:

- ``latency`` x ``goodput``: a 3 x 3 grid of positions (low, typical, high of the catalog's
  RDMA and switch latency ranges, and of its NIC goodput range), jointly, since the two
  interact (a small message is latency-bound, a large one bandwidth-bound). Between grid points
  the time is interpolated bilinearly.
- ``roce_quality`` (RoCE fabrics): the scenario's configuration preset and its neighbours
  (tuned < default < misconfigured), with the network backend's congestion at each.
- ``congestion``: no congestion (position 0) and the backend's congestion (1, nominal).

Drivers are combined as ratios of step time: the grid at the scenario's quality and
congestion, times the quality ratio, times the congestion ratio. The congestion answers
(slowdown factors of the fabric) are those of the catalog as given: a driver moves the latency
and bandwidth the factors multiply, not the factors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from fabricplan.catalog import Catalog, Range
from fabricplan.congestion.network_backend import NO_CONGESTION, NetworkBackend
from fabricplan.scenario import Scenario
from fabricplan.workload import evaluate_scenario
from fabricplan.workload.plan import Hardware

# Grid positions: catalog low, typical, high.
GRID = (0.0, 0.5, 1.0)
NOMINAL_POSITION = 0.5
# The RoCE configuration presets from best to worst (congestion/data/roce_quality.toml).
QUALITY_ORDER = ("tuned", "default", "misconfigured")
# A quality position below this is one preset better than the scenario's, above 1 minus it one
# worse: a uniform sample makes each of the three equally likely (an assumption: nothing
# published says how often a deployment lands one preset off its intent).
QUALITY_STEP = 1 / 3


@dataclass(frozen=True)
class PerfDriver:
    label: str
    range_text: str  # what its low and high ends are, for people
    nominal: float  # the position the scenario's own figures were computed at
    sampled: bool  # whether the Monte Carlo samples it (else it stays at its nominal position)
    low: float = 0.0
    high: float = 1.0


PERF_DRIVERS: dict[str, PerfDriver] = {
    "latency": PerfDriver(
        "fabric RDMA and switch latency", "catalog low-high", NOMINAL_POSITION, True
    ),
    "goodput": PerfDriver("NIC goodput", "catalog low-high", NOMINAL_POSITION, True),
    "roce_quality": PerfDriver(
        "RoCE configuration preset (tuned, default, misconfigured)",
        "one preset better-worse",
        NOMINAL_POSITION,
        True,
    ),
    # the backend's answer is the estimate: the Monte Carlo keeps it, and the tornado shows
    # what the advice would be on a fabric without congestion
    "congestion": PerfDriver("network congestion", "none-as modelled", 1.0, False),
}


def at_position(r: Range, pos: float) -> float:
    """The value at ``pos`` of a catalog range: linear from low to typical and from typical to
    high, so that the nominal position gives the typical value however lopsided the range."""
    mid = r.nominal
    if pos <= NOMINAL_POSITION:
        return r.low + pos / NOMINAL_POSITION * (mid - r.low)
    return mid + (pos - NOMINAL_POSITION) / (1 - NOMINAL_POSITION) * (r.high - mid)


def _typical(r: Range, pos: float) -> Range:
    return r.model_copy(update={"typical": at_position(r, pos)})


def with_performance(hw: Hardware, cat: Catalog, latency: float, goodput: float) -> Hardware:
    """``hw`` with its fabric's RDMA latency, its switch's port latency and its NIC goodput at
    the given positions of their catalog ranges; the congestion backend keeps reading ``cat``."""
    f = cat.fabric(hw.fabric)
    sw = cat.switch(hw.switch or f.default_switch)
    fab = f.model_copy(
        update={
            "rdma_latency_us": _typical(f.rdma_latency_us, latency),
            "nic_goodput_GBps": _typical(f.nic_goodput_GBps, goodput),
        }
    )
    switch = sw.model_copy(
        update={"port_to_port_latency_ns": _typical(sw.port_to_port_latency_ns, latency)}
    )
    return replace(hw, catalog=cat.with_entry(fab).with_entry(switch), network_catalog=cat)


def _neighbours(quality: str) -> tuple[str, str]:
    i = QUALITY_ORDER.index(quality)
    return QUALITY_ORDER[max(i - 1, 0)], QUALITY_ORDER[min(i + 1, len(QUALITY_ORDER) - 1)]


@dataclass(frozen=True)
class PerfTable:
    """Per fabric (F rows): the model's time at the grid and the drivers' ratios."""

    grid: np.ndarray  # (F, 3, 3): time at (latency position, goodput position)
    better: np.ndarray  # (F,) time at one quality preset better / nominal time (1: not RoCE)
    worse: np.ndarray  # (F,) the same one preset worse
    uncongested: np.ndarray  # (F,) time without congestion / nominal time

    @property
    def nominal(self) -> np.ndarray:
        return self.grid[:, 1, 1]

    def time(self, m: dict[str, np.ndarray]) -> np.ndarray:
        """Time per unit of work at the drivers' positions ``m`` (each shape (S,)): (F, S)."""
        t = _bilinear(self.grid, m["latency"], m["goodput"])
        q = m["roce_quality"][None, :]
        t = t * np.where(
            q < QUALITY_STEP,
            self.better[:, None],
            np.where(q > 1 - QUALITY_STEP, self.worse[:, None], 1.0),
        )
        c = m["congestion"][None, :]
        return t * (self.uncongested[:, None] + c * (1 - self.uncongested[:, None]))


def _bilinear(grid: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Piecewise-bilinear interpolation of ``grid`` (F, G, G) at positions ``x``, ``y`` (S,)."""
    g = np.asarray(GRID)
    i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
    j = np.clip(np.searchsorted(g, y, side="right") - 1, 0, len(g) - 2)
    u = (x - g[i]) / (g[i + 1] - g[i])
    v = (y - g[j]) / (g[j + 1] - g[j])
    return (
        grid[:, i, j] * (1 - u) * (1 - v)
        + grid[:, i + 1, j] * u * (1 - v)
        + grid[:, i, j + 1] * (1 - u) * v
        + grid[:, i + 1, j + 1] * u * v
    )


def _time(
    sc: Scenario,
    cat: Catalog,
    fabric: str,
    backend: NetworkBackend,
    adjust: Callable[[Hardware], Hardware] | None,
    variant: tuple | None = None,
) -> float:
    (r,) = evaluate_scenario(sc, cat, [fabric], backend=backend, adjust=adjust, adjust_key=variant)
    v = r.values
    return float(v["step_time_s"] if v["kind"] == "training" else 1.0 / v["tokens_per_s"])


def perf_table(sc: Scenario, cat: Catalog, backend: NetworkBackend) -> PerfTable:
    """Re-run the workload model for every fabric of ``sc`` at each driver's positions."""
    fabrics = list(sc.cluster.fabrics)
    grid = np.zeros((len(fabrics), len(GRID), len(GRID)))
    better, worse, uncongested = (np.ones(len(fabrics)) for _ in range(3))
    own = sc.cluster.roce_quality
    for k, fab in enumerate(fabrics):
        for i, lat in enumerate(GRID):
            for j, good in enumerate(GRID):
                grid[k, i, j] = _time(
                    sc,
                    cat,
                    fab,
                    backend,
                    lambda hw, a=lat, b=good: with_performance(hw, cat, a, b),
                    ("performance", lat, good),
                )
        nominal = grid[k, 1, 1]
        uncongested[k] = _time(sc, cat, fab, NO_CONGESTION, None) / nominal
        if cat.fabric(fab).family == "roce" and backend.models_flow_control:
            lo, hi = _neighbours(own)
            better[k] = _time(
                sc, cat, fab, backend, lambda hw, q=lo: replace(hw, roce_quality=q), ("roce", lo)
            )
            worse[k] = _time(
                sc, cat, fab, backend, lambda hw, q=hi: replace(hw, roce_quality=q), ("roce", hi)
            )
            better[k] /= nominal
            worse[k] /= nominal
    return PerfTable(grid, better, worse, uncongested)
