"""Scale trajectory (seed 001): a fabric is hard to change once built, so a cluster that will
grow should be judged at its target size too. The scenario is re-evaluated at
``organization.growth.target_gpus`` with the same model, plan (``dp`` refilled) and money."""

from __future__ import annotations

from typing import Any

import numpy as np

from fabricplan.advise.scoring import Parts, build_parts, costs_of, scenario_at
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import CostError
from fabricplan.cost.run import MONTHS_PER_YEAR
from fabricplan.scenario import Scenario, ScenarioError
from fabricplan.workload import FabricResult, WorkloadError


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
) -> tuple[dict[str, Any] | None, Parts | None]:
    """The cheapest fabric at the growth target (None when the scenario plans no growth), and
    the target's cost parts (for its Monte Carlo)."""
    g = sc.organization.growth
    if g is None or g.target_gpus == sc.cluster.gpus:
        return None, None
    # a rental has no lifecycle and locks nothing in: the next run rents the tier it needs
    rented = sc.costs.mode == "rent"
    within = None if rented else g.months <= sc.costs.lifecycle_years * MONTHS_PER_YEAR
    out: dict[str, Any] = {
        "target_gpus": g.target_gpus,
        "months": g.months,
        "within_lifecycle": within,
        "locks_in": bool(within),
    }
    try:
        s = scenario_at(sc, cat, g.target_gpus)
        perf = _at_target(s, cat, backend)
        costs = costs_of(s, cat, perf)
    except (ScenarioError, WorkloadError, CostError) as exc:
        return {**out, "cheapest": None, "note": f"cannot evaluate the target: {exc}"}, None
    parts = build_parts(s, cat, perf, costs)
    scores = parts.nominal()
    order = np.argsort(scores)
    names = [p.fabric for p in perf]
    best = names[int(order[0])]
    margin = float(scores[order[1]] / scores[order[0]] - 1) if len(order) > 1 else 0.0
    return {
        **out,
        "cheapest": best,
        "margin": margin,
        "cost_same_work_usd": dict(zip(names, map(float, scores), strict=True)),
    }, parts


def growth_reason(growth: dict[str, Any], now_best: str) -> str:
    head = f"growth to {growth['target_gpus']:,} GPUs in {growth['months']:g} months: "
    if growth["cheapest"] is None:
        return head + growth["note"]
    at = f"{growth['cheapest']} is cheapest at the target ({growth['margin']:+.1%} margin)"
    if growth["cheapest"] == now_best:
        return head + at + ", as it is now"
    if growth["within_lifecycle"] is None:
        return head + at + ", but a rental does not lock the fabric in: rent the tier the target "
        "needs when it comes"
    if not growth["within_lifecycle"]:
        return head + at + ", but the target lies beyond the cluster's lifecycle"
    return (
        head + at + f", while {now_best} is cheapest at today's size; the fabric is hard "
        "to change once built, so the recommendation follows the target"
    )
