"""Break-even per model: the IB-vs-RoCE break-even size for every training model in the catalog,
on the scenario's GPUs, fabrics, costs and organisation.

Each model is evaluated at each size with its reference plan (``reference_plan``): the layout
it was trained with in public, data parallelism refilled, where it has one and it runs at that
size; otherwise a searched plan. Each row says which plan was used at each size and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabricplan.advise.break_even import SizeRow, ib_and_roce, rows_document, sizes, summary, sweep
from fabricplan.advise.reference_plan import ReferencePlan, reference_plan
from fabricplan.catalog import Catalog
from fabricplan.catalog.transformer import TrainedPlan
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.scenario import Scenario


@dataclass(frozen=True)
class ModelBreakEven:
    """One training model's break-even on the scenario's cluster, and the plan at each size."""

    model: str
    published_layout: TrainedPlan | None  # the layout it was trained with in public
    plan_at_scenario_size: ReferencePlan | None  # None: no plan fits
    plans: list[ReferencePlan]  # at each size evaluated
    by_maturity: dict[str, int | None]
    evaluated_gpus: list[int]
    sizes_by_maturity: dict[str, list[SizeRow]]
    note: str
    ib: str  # the fabrics compared (the rows' figures are named after them)
    roce: str

    def to_dict(self) -> dict[str, Any]:
        here, layout = self.plan_at_scenario_size, self.published_layout
        return {
            "model": self.model,
            "published_layout": None if layout is None else layout.model_dump(mode="json"),
            "plan_at_scenario_size": None if here is None else here.to_dict(),
            "plans": [p.to_dict() for p in self.plans],
            "by_maturity": self.by_maturity,
            "evaluated_gpus": self.evaluated_gpus,
            "sizes_by_maturity": rows_document(self.sizes_by_maturity, self.ib, self.roce),
            "note": self.note,
        }


def break_even_by_model(
    sc: Scenario,
    cat: Catalog,
    backend: NetworkBackend = DEFAULT_BACKEND,
    tick: Callable[[str], None] | None = None,
) -> list[ModelBreakEven]:
    """One row per training model of the catalog: the plan at the scenario's size, the plan at
    every size evaluated, and the break-even per maturity. ``tick`` is called once per model
    (for a progress bar)."""
    pair = ib_and_roce(sc, cat)
    if pair is None:
        return []
    ib, roce = pair
    every = sizes(sc, limit=None)  # every model fits at different sizes: try them all
    out = []
    for model in cat.ids("model"):
        plans: dict[int, ReferencePlan | None] = {}

        def at(
            n: int, model: str = model, plans: dict[int, ReferencePlan | None] = plans
        ) -> Scenario | None:
            plan = plans[n] = reference_plan(sc, cat, model, n, ib, roce)
            return None if plan is None else plan.scenario

        rows = sweep(every, at, cat, ib, roce, backend)
        own = sc.organization.network_maturity
        found, note = summary(rows, own)
        here = plans.get(sc.cluster.gpus)
        evaluated = [r.gpus for r in rows[own]]
        out.append(
            ModelBreakEven(
                model,
                cat.model(model).trained_plan,
                here,
                [p for n in evaluated if (p := plans[n]) is not None],
                found,
                evaluated,
                rows,
                note,
                ib,
                roce,
            )
        )
        if tick is not None:
            tick(model)
    return out
