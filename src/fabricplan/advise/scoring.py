"""The score every fabric is compared on, built once per scenario from the layers below.

The score is the cost of doing the same work:
- owned clusters: the lifecycle TCO scaled by step time relative to the fastest fabric;
- rented training: the cost of the scenario's run, including its expected run-loss risk;
- rented serving: an hour of the cluster (rent and run-loss risk) per million output tokens.

A rental has no lifecycle, so no rented score uses ``lifecycle_years``.

Each cost part is kept apart so that multipliers (sensitivity, Monte Carlo) scale it without
re-running the workload, topology or congestion layers; drivers that change performance
(latency, goodput, RoCE quality, congestion) come from the workload model re-run at their
positions (:mod:`.performance`). Second-order effects are ignored: e.g. a dearer server also
makes a lost GPU-hour dearer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fabricplan.advise.performance import PERF_DRIVERS, PerfTable
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import NetworkBackend
from fabricplan.cost import FabricCost, fabric_cost, load_assumptions
from fabricplan.cost.run import HOURS_PER_YEAR, SECONDS_PER_HOUR
from fabricplan.cost.tco import TOKENS_PER_MILLION
from fabricplan.scenario import Scenario, scenario_from_data
from fabricplan.workload import FabricResult, evaluate_scenario

# Monte Carlo ranges of the cost drivers (uniform multipliers, low-high): labelled assumptions
# in the cost assumptions file ([uncertainty], and the server spread).
_A = load_assumptions()
COST_DRIVERS: dict[str, tuple[str, float, float]] = {
    "server": ("GPU server price", 1 - _A.server_spread, 1 + _A.server_spread),
    "network": ("network gear price (switches, NICs, optics)", *_A.uncertainty("network")),
    "power": ("electricity price", *_A.uncertainty("power")),
    "staff": ("network staff cost and headcount", *_A.uncertainty("staff")),
    "stabilisation": ("weeks to stable collectives", *_A.uncertainty("stabilisation")),
    "risk": ("fabric-caused interruptions per year", *_A.uncertainty("risk")),
    "price": ("rented GPU-hour price", *_A.uncertainty("price")),
    "support": ("support contract rate", *_A.uncertainty("support")),
}
# Cost drivers priced per fabric: switches, NICs, optics and support are quoted per fabric
# (and per vendor), so a miss on one fabric's quote says nothing about another's; the Monte
# Carlo draws them independently per fabric and the tornado moves one fabric's at a time.
# Support is a driver of its own: its rate is an unsourced assumption, apart from the gear's
# price (a dearer bill still raises support, through the network multiplier).
# Servers, power, staff rates and the GPU-hour price are shared.
PER_FABRIC_DRIVERS = ("network", "support")
# The cost drivers each kind of score reads (see Parts.scores).
SCORED_COST_DRIVERS: dict[str, tuple[str, ...]] = {
    "own": ("server", "network", "support", "power", "staff", "stabilisation", "risk"),
    "rent-train": ("price", "risk"),
    "rent-serve": ("price", "risk"),
}
# Every driver of the tornado and the Monte Carlo: (label, low, high). Cost drivers are
# multipliers of a cost part; performance drivers are positions in their ranges, each evaluated
# by the workload model (:mod:`.performance`).
DRIVERS: dict[str, tuple[str, float, float]] = {
    **COST_DRIVERS,
    **{k: (d.label, d.low, d.high) for k, d in PERF_DRIVERS.items()},
}


@dataclass(frozen=True)
class Parts:
    """Per fabric (arrays of shape (F,)), the pieces the score is built from."""

    kind: str  # own | rent-train | rent-serve
    years: float
    servers: np.ndarray
    network: np.ndarray
    power: np.ndarray
    staff: np.ndarray
    support: np.ndarray
    stabilisation: np.ndarray
    risk: np.ndarray  # per year
    rent: np.ndarray  # the cluster per hour at the tier price (rented)
    run_rent: np.ndarray  # the run's GPU-hours at the tier price (rented training)
    run_risk: np.ndarray
    time: np.ndarray  # step time (training) or s per output token (serving, all replicas)
    # the model's times at the performance drivers' positions; None: only the nominal
    # positions can be scored (break-even's sizes need no more)
    perf: PerfTable | None = None

    def nominal(self) -> np.ndarray:
        """Cost for the same work with every driver at its assumed value, shape (F,)."""
        return self.scores(nominal_multipliers(1))[:, 0]

    def with_perf(self, table: PerfTable) -> Parts:
        return replace(self, perf=table)

    def drivers(self) -> tuple[str, ...]:
        """The drivers this score depends on: a rental has no servers, gear, power or staff
        of its own to price, and an owned cluster no GPU-hour price."""
        return SCORED_COST_DRIVERS[self.kind] + tuple(PERF_DRIVERS)

    def scores(self, m: dict[str, np.ndarray]) -> np.ndarray:
        """Cost for the same work, shape (F, S) for S samples of multipliers ``m``: each of
        shape (S,), shared by the fabrics, or (F, S), one per fabric."""
        col = lambda a: a[:, None]  # noqa: E731
        n = np.shape(m["price"])[-1]
        if self.perf is not None:
            t = self.perf.time(m)  # performance drivers are shared: shape (S,)
        elif any(np.any(m[k] != d.nominal) for k, d in PERF_DRIVERS.items()):
            raise ValueError("performance drivers off nominal need the model's table (with_perf)")
        else:
            t = np.repeat(col(self.time), n, axis=1)
        rel = t / t.min(axis=0, keepdims=True)
        m = {k: np.atleast_2d(v) for k, v in m.items()}  # (1, S) broadcasts over the fabrics
        if self.kind == "rent-train":
            return m["price"] * col(self.run_rent) * t / col(self.time) + m["risk"] * col(
                self.run_risk
            )
        if self.kind == "rent-serve":
            per_hour = m["price"] * col(self.rent) + m["risk"] * col(self.risk) / HOURS_PER_YEAR
            return per_hour * t / SECONDS_PER_HOUR * TOKENS_PER_MILLION
        y = self.years
        base = m["stabilisation"] * col(self.stabilisation) + y * m["risk"] * col(self.risk)
        capex = m["server"] * col(self.servers) + m["network"] * col(self.network)
        running = m["power"] * col(self.power) + m["staff"] * col(self.staff)
        support = m["network"] * m["support"] * col(self.support)
        return (capex + y * (running + support) + base) * rel


def nominal_multipliers(n: int) -> dict[str, np.ndarray]:
    m = {k: np.ones(n) for k in COST_DRIVERS}
    m.update({k: np.full(n, d.nominal) for k, d in PERF_DRIVERS.items()})
    return m


def sampled(key: str) -> bool:
    """Whether the Monte Carlo samples the driver (the others stay at their nominal value)."""
    return key in COST_DRIVERS or PERF_DRIVERS[key].sampled


def range_text(key: str) -> str:
    """A driver's range for people: a cost multiplier's ends, or a performance driver's."""
    if key in PERF_DRIVERS:
        return PERF_DRIVERS[key].range_text
    _, lo, hi = COST_DRIVERS[key]
    return f"x{lo:g}-x{hi:g}"


# Exposed-communication parts of a training step that cross the fabric whatever the plan.
ALWAYS_ON_FABRIC = ("dp_comm_s", "ep_comm_s", "pp_comm_s", "cp_comm_s")


def fabric_parts(sc: Scenario) -> tuple[str, ...]:
    """The step's exposed-communication parts that cross the fabric: tensor parallelism too
    when its group spans nodes (otherwise it stays on NVLink)."""
    w = sc.workload
    assert w is not None and sc.cluster.gpus_per_node is not None
    spans = w.parallel.tp > sc.cluster.gpus_per_node
    return ALWAYS_ON_FABRIC + (("tp_comm_s",) if spans else ())


def build_parts(
    sc: Scenario, cat: Catalog, perf: list[FabricResult], costs: list[FabricCost]
) -> Parts:
    training = perf[0].kind == "training"
    kind = "own" if sc.costs.mode == "own" else ("rent-train" if training else "rent-serve")
    arr = lambda f: np.array([f(p, c) for p, c in zip(perf, costs, strict=True)])  # noqa: E731
    return Parts(
        kind=kind,
        years=sc.costs.lifecycle_years,
        servers=arr(lambda p, c: c.capex_servers_usd),
        network=arr(lambda p, c: c.capex_network_usd),
        power=arr(lambda p, c: c.power_usd_per_year),
        staff=arr(lambda p, c: c.staff_usd_per_year),
        support=arr(lambda p, c: c.support_usd_per_year),
        stabilisation=arr(lambda p, c: c.stabilisation_usd),
        risk=arr(lambda p, c: c.risk_usd_per_year),
        rent=arr(lambda p, c: c.gpus * c.gpu_hour_cost_usd if c.mode == "rent" else 0.0),
        run_rent=arr(lambda p, c: (c.run_gpu_hours or 0.0) * c.gpu_hour_cost_usd),
        run_risk=arr(lambda p, c: c.risk_per_run_usd or 0.0),
        time=arr(lambda p, c: p.figures.step_time_s if training else 1.0 / p.figures.tokens_per_s),
    )


def first_of_family(sc: Scenario, cat: Catalog, family: str) -> str | None:
    """The scenario's first fabric of ``family`` (e.g. ``roce``), if it has one."""
    return next((f for f in sc.cluster.fabrics if cat.fabric(f).family == family), None)


def scenario_at(
    sc: Scenario, cat: Catalog, gpus: int, fabrics: list[str] | None = None
) -> Scenario:
    """The same scenario on ``gpus`` GPUs (and ``fabrics``, if given), its plan's data-parallel
    size refilled. Raises ScenarioError when the plan does not divide the new size."""
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"] = {**data["cluster"], "gpus": gpus}
    if fabrics is not None:
        data["cluster"]["fabric"] = fabrics
    if "workload" in data and "parallel" in data["workload"]:
        data["workload"] = {
            **data["workload"],
            "parallel": {**data["workload"]["parallel"], "dp": "auto"},
        }
    return scenario_from_data(data, catalog=cat)


def costs_of(sc: Scenario, cat: Catalog, perf: list[FabricResult]) -> list[FabricCost]:
    """Each fabric's costs, given its workload results (run GPU-hours and days)."""
    a = load_assumptions()
    return [
        fabric_cost(
            sc,
            cat,
            a,
            p.fabric,
            run_gpu_hours=p.figures.gpu_hours,
            run_days=p.figures.time_to_train_days,
            output_tokens_per_s=None if p.serving is None else p.serving.output_tokens_per_s,
        )
        for p in perf
    ]


def evaluate(
    sc: Scenario, cat: Catalog, backend: NetworkBackend
) -> tuple[list[FabricResult], list[FabricCost]]:
    perf = evaluate_scenario(sc, cat, backend=backend)
    return perf, costs_of(sc, cat, perf)
