"""Scale trajectory (seed 001): a fabric is hard to change once built, so a cluster that will
grow should be judged at its target size too. The scenario is re-evaluated at
``organization.growth.target_gpus`` with the same model, plan (``dp`` refilled) and money."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fabricplan.advise.scoring import Parts, build_parts, costs_of, scenario_at
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import CostError
from fabricplan.cost.run import MONTHS_PER_YEAR
from fabricplan.scenario import Scenario, ScenarioError
from fabricplan.workload import FabricResult, WorkloadError


@dataclass(frozen=True)
class Growth:
    """The scenario at its growth target: the cheapest fabric there and by how much, or why the
    target could not be evaluated (``note``)."""

    target_gpus: int
    months: float
    within_lifecycle: bool | None  # None: a rental, which has no lifecycle
    locks_in: bool  # the fabric built now is the one the target runs on
    cheapest: str | None = None
    note: str | None = None  # why there is no cheapest
    margin: float | None = None  # the runner-up over the cheapest, share
    cost_same_work_usd: dict[str, float] | None = None  # by fabric

    def to_dict(self) -> dict[str, Any]:
        out = {
            "target_gpus": self.target_gpus,
            "months": self.months,
            "within_lifecycle": self.within_lifecycle,
            "locks_in": self.locks_in,
            "cheapest": self.cheapest,
        }
        if self.cheapest is None:
            return {**out, "note": self.note}
        return {**out, "margin": self.margin, "cost_same_work_usd": self.cost_same_work_usd}


def _at_target(s: Scenario, cat: Catalog, backend: NetworkBackend) -> list[FabricResult]:
    """The target's workload results, through the sweep engine (its cache serves a target that
    another analysis of this scenario evaluated already). WorkloadError when refused."""
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import Variant

    (rec,) = evaluate_scenarios([Variant(0, {"cluster.gpus": s.cluster.gpus}, s)], cat, backend)
    if not rec.ok:
        raise WorkloadError(rec.skipped or "refused")
    return [o.detail for o in rec.outcomes if o.detail is not None]


def growth_evaluation(
    sc: Scenario, cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND
) -> tuple[Growth | None, Parts | None]:
    """The cheapest fabric at the growth target (None when the scenario plans no growth), and
    the target's cost parts (for its Monte Carlo)."""
    g = sc.organization.growth
    if g is None or g.target_gpus == sc.cluster.gpus:
        return None, None
    # a rental has no lifecycle and locks nothing in: the next run rents the tier it needs
    rented = sc.costs.mode == "rent"
    within = None if rented else g.months <= sc.costs.lifecycle_years * MONTHS_PER_YEAR
    out = Growth(g.target_gpus, g.months, within, bool(within))
    try:
        s = scenario_at(sc, cat, g.target_gpus)
        perf = _at_target(s, cat, backend)
        costs = costs_of(s, cat, perf)
    except (ScenarioError, WorkloadError, CostError) as exc:
        return replace(out, note=f"cannot evaluate the target: {exc}"), None
    parts = build_parts(s, cat, perf, costs)
    scores = parts.nominal()
    order = np.argsort(scores)
    names = [p.fabric for p in perf]
    best = names[int(order[0])]
    margin = float(scores[order[1]] / scores[order[0]] - 1) if len(order) > 1 else 0.0
    costs_by_fabric = dict(zip(names, map(float, scores), strict=True))
    return replace(out, cheapest=best, margin=margin, cost_same_work_usd=costs_by_fabric), parts


def growth_reason(growth: Growth, now_best: str) -> str:
    head = f"growth to {growth.target_gpus:,} GPUs in {growth.months:g} months: "
    if growth.cheapest is None:
        return head + str(growth.note)
    at = f"{growth.cheapest} is cheapest at the target ({growth.margin:+.1%} margin)"
    if growth.cheapest == now_best:
        return head + at + ", as it is now"
    if growth.within_lifecycle is None:
        return head + at + ", but a rental does not lock the fabric in: rent the tier the target "
        "needs when it comes"
    if not growth.within_lifecycle:
        return head + at + ", but the target lies beyond the cluster's lifecycle"
    return (
        head + at + f", while {now_best} is cheapest at today's size; the fabric is hard "
        "to change once built, so the recommendation follows the target"
    )
