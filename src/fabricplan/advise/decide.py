"""Compare a scenario's fabrics end to end and recommend one.

The comparison metric is the cost of doing the same work:
- owned clusters: the lifecycle TCO scaled by step time relative to the fastest fabric;
- rented training: the cost of the scenario's run, including its expected run-loss risk;
- rented serving: the lifecycle rent scaled by throughput.

Uncertainty is a Monte Carlo over multipliers on each cost part and on each fabric's
communication time (its catalog RDMA latency range). The multipliers are applied to parts
computed once, so thousands of samples take milliseconds. Second-order effects are ignored:
e.g. a dearer server also makes a lost GPU-hour dearer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricplan.advise.questions import provider_questions
from fabricplan.catalog import Catalog
from fabricplan.cost import FabricCost, fabric_cost, load_assumptions
from fabricplan.scenario import Scenario
from fabricplan.workload import evaluate_scenario

# Monte Carlo ranges (uniform multipliers, low-high). Assumptions, written next to the driver
# they move; the server spread comes from the cost assumptions file.
DRIVERS: dict[str, tuple[str, float, float]] = {
    "server": ("GPU server price", 0.8, 1.2),
    "network": ("network gear price (switches, NICs, optics)", 0.75, 1.25),
    "power": ("electricity price", 0.7, 1.3),
    "staff": ("network staff cost and headcount", 0.7, 1.5),
    "stabilisation": ("weeks to stable collectives", 0.5, 2.0),
    "risk": ("fabric-caused interruptions per year", 0.5, 2.0),
    "price": ("rented GPU-hour price", 0.8, 1.2),
    # position within each fabric's catalog RDMA latency range (0 = low, 1 = high)
    "latency": ("fabric latency within the catalog range", 0.0, 1.0),
}
MC_SAMPLES = 4000
CONFIDENCE = ((0.9, "high"), (0.7, "medium"), (0.0, "low"))


@dataclass(frozen=True)
class Advice:
    recommendation: dict[str, Any]
    fabrics: list[dict[str, Any]]
    break_even_gpus: dict[str, Any]
    sensitivity: list[dict[str, Any]]
    uncertainty: dict[str, Any]
    questions: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"recommendation": self.recommendation, "fabrics": self.fabrics,
                "break_even_gpus": self.break_even_gpus, "sensitivity": self.sensitivity,
                "uncertainty": self.uncertainty, "questions": self.questions,
                "notes": self.notes}  # fmt: skip


@dataclass(frozen=True)
class _Parts:
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
    rent: np.ndarray  # per year (rented)
    run_rent: np.ndarray  # the run's GPU-hours at the tier price (rented training)
    run_risk: np.ndarray
    time: np.ndarray  # step time (training) or 1 / throughput (serving)
    comm_share: np.ndarray
    lat_lo: np.ndarray  # catalog latency range relative to typical
    lat_hi: np.ndarray

    def scores(self, m: dict[str, np.ndarray]) -> np.ndarray:
        """Cost for the same work, shape (F, S) for S samples of multipliers ``m``."""
        col = lambda a: a[:, None]  # noqa: E731
        lat = col(self.lat_lo) + m["latency"][None, :] * col(self.lat_hi - self.lat_lo)
        t = col(self.time) * (1 + col(self.comm_share) * (lat - 1))
        rel = t / t.min(axis=0, keepdims=True)
        if self.kind == "rent-train":
            return (m["price"] * col(self.run_rent) * t / col(self.time)
                    + m["risk"] * col(self.run_risk))  # fmt: skip
        y = self.years
        base = (m["stabilisation"] * col(self.stabilisation)
                + y * m["risk"] * col(self.risk))  # fmt: skip
        if self.kind == "rent-serve":
            return (y * m["price"] * col(self.rent) + base) * rel
        return (m["server"] * col(self.servers) + m["network"] * col(self.network)
                + y * (m["power"] * col(self.power) + m["staff"] * col(self.staff)
                       + m["network"] * col(self.support)) + base) * rel  # fmt: skip


def _nominal(n: int) -> dict[str, np.ndarray]:
    m = {k: np.ones(n) for k in DRIVERS}
    m["latency"] = np.full(n, 0.5)  # typical sits mid-range for the score's purposes
    return m


def _network_share(sc: Scenario, p: dict[str, Any]) -> float:
    """Share of the step spent in exposed communication that crosses the fabric (TP only when
    it spans nodes). The latency driver scales all of it: an upper bound, since much of it is
    bandwidth-bound."""
    if p["kind"] != "training":
        return float(p["network_fraction"])
    b = p["breakdown"]
    w = sc.workload
    assert w is not None and sc.cluster.gpus_per_node is not None
    spans = w.parallel.tp > sc.cluster.gpus_per_node
    net = b["pp_comm_s"] + b["ep_comm_s"] + b["cp_comm_s"] + b["dp_comm_s"]
    return (net + (b["tp_comm_s"] if spans else 0.0)) / p["step_time_s"]


def _parts(sc: Scenario, cat: Catalog, perf: list[dict[str, Any]],
           costs: list[FabricCost]) -> _Parts:  # fmt: skip
    training = perf[0]["kind"] == "training"
    kind = "own" if sc.costs.mode == "own" else ("rent-train" if training else "rent-serve")
    arr = lambda f: np.array([f(p, c) for p, c in zip(perf, costs, strict=True)])  # noqa: E731
    lat = [cat.fabric(p["fabric"]).rdma_latency_us for p in perf]
    return _Parts(
        kind=kind, years=sc.costs.lifecycle_years,
        servers=arr(lambda p, c: c.capex_servers_usd),
        network=arr(lambda p, c: c.capex_network_usd),
        power=arr(lambda p, c: c.power_usd_per_year), staff=arr(lambda p, c: c.staff_usd_per_year),
        support=arr(lambda p, c: c.support_usd_per_year),
        stabilisation=arr(lambda p, c: c.stabilisation_usd),
        risk=arr(lambda p, c: c.risk_usd_per_year),
        rent=arr(lambda p, c: c.opex_usd_per_year if c.mode == "rent" else 0.0),
        run_rent=arr(lambda p, c: (c.run_gpu_hours or 0.0) * c.gpu_hour_cost_usd),
        run_risk=arr(lambda p, c: c.risk_per_run_usd or 0.0),
        time=arr(lambda p, c: p["step_time_s"] if training else 1.0 / p["tokens_per_s"]),
        comm_share=arr(lambda p, c: _network_share(sc, p)),
        lat_lo=np.array([r.low / r.nominal for r in lat]),
        lat_hi=np.array([r.high / r.nominal for r in lat]),
    )  # fmt: skip


def _evaluate(sc: Scenario, cat: Catalog, congestion: bool
              ) -> tuple[list[dict[str, Any]], list[FabricCost]]:  # fmt: skip
    a = load_assumptions()
    perf = [r.to_dict() for r in evaluate_scenario(sc, cat, congestion=congestion)]
    costs = [fabric_cost(sc, cat, a, p["fabric"], run_gpu_hours=p.get("gpu_hours"),
                         run_days=p.get("time_to_train_days")) for p in perf]  # fmt: skip
    return perf, costs


def _sensitivity(parts: _Parts, best: int, other: int) -> list[dict[str, Any]]:
    """Tornado: the margin (runner-up minus recommended) at each driver's low and high."""
    out = []
    for key, (label, lo, hi) in DRIVERS.items():
        m = _nominal(2)
        m[key] = np.array([lo, hi])
        s = parts.scores(m)
        margin = s[other] - s[best]
        out.append({"driver": key, "label": label, "low": lo, "high": hi,
                    "margin_at_low_usd": float(margin[0]),
                    "margin_at_high_usd": float(margin[1]),
                    "swing_usd": float(abs(margin[1] - margin[0])),
                    "flips": bool((margin < 0).any())})  # fmt: skip
    return sorted(out, key=lambda d: -d["swing_usd"])


def _monte_carlo(parts: _Parts, names: list[str], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    m = {k: rng.uniform(lo, hi, MC_SAMPLES) for k, (_, lo, hi) in DRIVERS.items()}
    s = parts.scores(m)
    wins = np.bincount(s.argmin(axis=0), minlength=len(names)) / MC_SAMPLES
    return {"samples": MC_SAMPLES, "seed": seed,
            "p_cheapest": {n: float(w) for n, w in zip(names, wins, strict=True)},
            "cost_p10_p90_usd": {n: [float(np.percentile(s[i], 10)),
                                     float(np.percentile(s[i], 90))]
                                 for i, n in enumerate(names)}}  # fmt: skip


def advise(sc: Scenario, cat: Catalog, *, congestion: bool = True, seed: int = 0,
           break_even: bool = True) -> Advice:  # fmt: skip
    from fabricplan.advise.break_even import break_even_gpus
    from fabricplan.advise.reasons import reasons

    perf, costs = _evaluate(sc, cat, congestion)
    names = [p["fabric"] for p in perf]
    parts = _parts(sc, cat, perf, costs)
    nominal = parts.scores(_nominal(1))[:, 0]
    order = list(np.argsort(nominal))
    best = int(order[0])
    other = int(order[1]) if len(order) > 1 else best
    # a fabric whose stabilisation outlasts the time-to-production budget loses close calls
    deadline = sc.organization.time_to_production_weeks
    late = [c.stabilisation_weeks > deadline for c in costs]
    if late[best] and not late[other] and nominal[other] <= nominal[best] * 1.05:
        best, other = other, best
    mc = _monte_carlo(parts, names, seed)
    p_best = mc["p_cheapest"][names[best]]
    confidence = next(label for bound, label in CONFIDENCE if p_best >= bound)
    sens = _sensitivity(parts, best, other) if other != best else []
    fabrics = []
    for p, c, score in zip(perf, costs, nominal, strict=True):
        fabrics.append({
            "fabric": p["fabric"], "family": c.family, "step_time_s": p["step_time_s"],
            "tokens_per_s": p["tokens_per_s"], "time_to_train_days": p.get("time_to_train_days"),
            "gpu_hours": p.get("gpu_hours"), "comm_exposed_fraction": p["comm_exposed_fraction"],
            "capex_usd": c.capex_usd, "capex_network_usd": c.capex_network_usd,
            "opex_usd_per_year": c.opex_usd_per_year, "tco_usd": c.tco_usd,
            "cost_per_run_usd": c.cost_per_run_usd,
            "risk_usd": c.risk_usd_per_year * c.lifecycle_years,
            "risk_events_per_year": c.risk_events_per_year,
            "stabilisation_weeks": c.stabilisation_weeks,
            "stabilisation_usd": c.stabilisation_usd, "staff_fte": c.staff_fte,
            "gpu_hour_cost_usd": c.gpu_hour_cost_usd, "cost_same_work_usd": float(score),
            "misses_time_to_production": late[len(fabrics)],
        })  # fmt: skip
    rec = {
        "fabric": names[best], "topology": sc.cluster.topology.design, "confidence": confidence,
        "p_cheapest": p_best,
        "reasons": reasons(sc, fabrics, best, other, sens, parts.kind),
    }  # fmt: skip
    be = (
        break_even_gpus(sc, cat, congestion)
        if break_even
        else {"gpus": None, "note": "not computed"}
    )
    notes = ["every price and risk rate is a labelled assumption (catalog economics/costs.toml)"]
    return Advice(rec, fabrics, be, sens, mc, provider_questions(sc, cat), notes)
