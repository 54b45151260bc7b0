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

The variants are evaluated by the sweep engine: the grid's as hardware positions
(``workload.positions``), the qualities as scenario variants, each content once.

Drivers are combined as ratios of step time: the grid at the scenario's quality and
congestion, times the quality ratio, times the congestion ratio. The congestion answers
(slowdown factors of the fabric) are those of the catalog as given: a driver moves the latency
and bandwidth the factors multiply, not the factors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import NO_CONGESTION, NetworkBackend
from fabricplan.scenario import Scenario
from fabricplan.workload import WorkloadError
from fabricplan.workload.positions import NOMINAL_POSITION, latency_and_goodput

if TYPE_CHECKING:
    from fabricplan.sweep.records import Record

# Grid positions: catalog low, typical, high.
GRID = (0.0, NOMINAL_POSITION, 1.0)
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


def _times(records: list[Record], fabrics: list[str]) -> np.ndarray:
    """(len(records), len(fabrics)): each record's time per unit of work on each fabric (NaN
    where a record has no such fabric)."""
    out = np.full((len(records), len(fabrics)), np.nan)
    for i, rec in enumerate(records):
        if not rec.ok:
            raise WorkloadError(rec.skipped or "refused")
        for o in rec.outcomes:
            v = o.outputs
            t = v.step_time_s if v.kind == "training" else 1.0 / (v.tokens_per_s or np.nan)
            out[i, fabrics.index(o.fabric)] = t
    return out


def perf_table(sc: Scenario, cat: Catalog, backend: NetworkBackend) -> PerfTable:
    """Re-run the workload model for every fabric of ``sc`` at each driver's positions: the
    variants go through the sweep engine (each content evaluated once, kept in its cache)."""
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import Variant

    fabrics = list(sc.cluster.fabrics)
    cells = [(lat, good) for lat in GRID for good in GRID]
    grid_variants = [
        Variant(i, {"latency": lat, "goodput": good}, sc, positions=latency_and_goodput(lat, good))
        for i, (lat, good) in enumerate(cells)
    ]
    roce = tuple(f for f in fabrics if cat.fabric(f).family == "roce")
    qualities = _neighbours(sc.cluster.roce_quality)
    quality_variants = []
    if roce and backend.models_flow_control:
        # the RoCE fabrics alone at one preset better and one worse
        for q in qualities:
            cluster = sc.cluster.model_copy(update={"roce_quality": q, "fabric": roce})
            alone = sc.model_copy(update={"cluster": cluster})
            quality_variants.append(
                Variant(len(cells) + len(quality_variants), {"cluster.roce_quality": q}, alone)
            )
    found = _times(evaluate_scenarios([*grid_variants, *quality_variants], cat, backend), fabrics)
    grid = found[: len(cells)].T.reshape(len(fabrics), len(GRID), len(GRID))
    nominal = grid[:, 1, 1]
    (ideal,) = _times(evaluate_scenarios([Variant(0, {}, sc)], cat, NO_CONGESTION), fabrics)
    better, worse = (np.ones(len(fabrics)) for _ in range(2))
    if quality_variants:
        q_times = found[len(cells) :]
        is_roce = np.isin(fabrics, roce)
        better = np.where(is_roce, q_times[0] / nominal, 1.0)
        worse = np.where(is_roce, q_times[1] / nominal, 1.0)
    return PerfTable(grid, better, worse, ideal / nominal)
