"""Step, plan and advise: the model's answers for a scenario, per fabric."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricplan.api._base import (
    Congestion,
    InputError,
    _backend,
    _fabrics,
    _frame,
    _PerFabric,
    _refused,
)
from fabricplan.api.loading import _scenario
from fabricplan.ops import jsonable, range_message

if TYPE_CHECKING:
    import pandas

    from fabricplan.advise import Advice
    from fabricplan.catalog import Catalog
    from fabricplan.planning.scenario import FabricSearch
    from fabricplan.planning.search import Candidate
    from fabricplan.scenario import Scenario
    from fabricplan.sweep.records import StepOutputs
    from fabricplan.workload import FabricResult


@dataclass(frozen=True)
class FabricStep:
    """One fabric's step: the headline figures typed (``outputs``: the sweep's columns), the
    whole ``step --json`` entry (``document``: breakdown, validation, expected run, what is
    not modelled) and the model's own record (``result``)."""

    fabric: str
    outputs: StepOutputs
    document: dict[str, Any] = dataclasses.field(repr=False)
    result: FabricResult = dataclasses.field(repr=False)

    @property
    def breakdown(self) -> dict[str, float]:
        """The step by part, seconds (``compute_s``, ``tp_comm_s``, ``bubble_s``, ...)."""
        return dict(self.result.figures.breakdown)


@dataclass(frozen=True)
class StepResult(_PerFabric):
    """``step``'s answer: a :class:`FabricStep` per fabric, in the scenario's order."""

    fabrics: tuple[FabricStep, ...]
    congestion_backend: str

    def document(self) -> list[dict[str, Any]]:
        """What ``fabricplan step --json`` prints."""
        return jsonable([f.document for f in self.fabrics])

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric; columns as ``step --json`` names them, nested ones dotted
        (``breakdown.dp_comm_s``, ``validation.inside``, ``expected_run.goodput``)."""
        return _frame([f.document for f in self.fabrics])


def step(
    scenario: Scenario | str | Path | Mapping[str, Any],
    fabrics: str | Sequence[str] | None = None,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
) -> StepResult:
    """Step time, throughput, MFU, time-to-train and its breakdown per fabric (serving: TTFT,
    ITL and token rates), as ``fabricplan step``.

    ``fabrics``: catalog fabric ids to evaluate instead of the scenario's. ``congestion``:
    ``"flow"`` (the default), ``"closed-form"`` or ``"none"``, as ``--congestion``."""
    from fabricplan.ops.step import step_document
    from fabricplan.sweep.records import StepOutputs, pick
    from fabricplan.workload import WorkloadError, evaluate_scenario

    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    names = _fabrics(sc, cat, fabrics)
    try:
        found = evaluate_scenario(sc, cat, names, backend=backend)
    except WorkloadError as exc:
        raise _refused(exc) from exc
    out = []
    for r in found:
        doc = step_document(r, sc, cat, backend)
        out.append(FabricStep(r.fabric, pick(StepOutputs, doc), doc, r))
    return StepResult(tuple(out), backend.name)


# --- plan ----------------------------------------------------------------------------------

# The roles of a plan in :meth:`PlanResult.to_frame`, in row order per fabric.
PLAN_ROLES = ("best", "alternative", "faster_but_does_not_fit", "scenario_plan")


@dataclass(frozen=True)
class PlanResult(_PerFabric):
    """``plan``'s answer: the plan search on each fabric (``fabrics``: the planning package's
    ``FabricSearch``, with ``.result`` the best plan, the runners-up and the faster plans that
    do not fit, and ``.scenario_plan`` the scenario's own plan priced the same way)."""

    fabrics: tuple[FabricSearch, ...]
    congestion_backend: str

    def _fabric_of(self, item: Any) -> str:
        return str(item.result.fabric)

    @property
    def best(self) -> dict[str, Candidate | None]:
        """The fastest fitting plan per fabric (None where none fits)."""
        return {f.result.fabric: f.result.best for f in self.fabrics}

    def document(self) -> list[dict[str, Any]]:
        """What ``fabricplan plan --json`` prints."""
        from fabricplan.ops.plan import plan_document

        return jsonable([plan_document(f, _backend(self.congestion_backend)) for f in self.fabrics])

    def to_frame(self) -> pandas.DataFrame:
        """One row per fabric and plan: ``role`` is best, alternative, faster_but_does_not_fit
        or scenario_plan, ``rank`` its place among its role's; then the plan's columns as
        ``plan --json`` names them (``tp`` ... ``fits``, ``relative_throughput``,
        ``breakdown.*_s``) and ``why``, the reasons it loses as one text."""
        rows = []
        for doc in self.document():
            lists = {
                "best": [doc["best"]] if doc["best"] else [],
                "alternative": doc["alternatives"],
                "faster_but_does_not_fit": doc["faster_but_does_not_fit"],
                "scenario_plan": [doc["scenario_plan"]],
            }
            for role in PLAN_ROLES:
                for rank, p in enumerate(lists[role]):
                    why = "; ".join(w["text"] for w in p.get("why", []))
                    plan = {k: v for k, v in p.items() if k != "why"}
                    head = {"fabric": doc["fabric"], "role": role, "rank": rank}
                    rows.append({**head, **plan, "why": why})
        return _frame(rows)


def plan(
    scenario: Scenario | str | Path | Mapping[str, Any],
    top: int = 5,
    fabrics: str | Sequence[str] | None = None,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
) -> PlanResult:
    """The fastest training plan that fits on each fabric, from every plan of the space, with
    the best of the next ``top`` layouts and why each loses, as ``fabricplan plan``."""
    from fabricplan.planning import search_scenario
    from fabricplan.workload import WorkloadError

    if not isinstance(top, int) or not 0 <= top <= 100:
        raise InputError(f"top: {range_message(top, 0, 100)}")
    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    names = _fabrics(sc, cat, fabrics)
    try:
        found = search_scenario(sc, cat, names, backend=backend, top=top)
    except WorkloadError as exc:
        raise _refused(exc) from exc
    return PlanResult(tuple(found), backend.name)


# --- advise --------------------------------------------------------------------------------


def advise(
    scenario: Scenario | str | Path | Mapping[str, Any],
    seed: int = 0,
    break_even: bool = True,
    by_model: bool = False,
    congestion: Congestion | None = None,
    catalog: Catalog | str | Path | None = None,
    tick: Callable[[str], None] | None = None,
) -> Advice:
    """The recommendation, as ``fabricplan advise``: the advise package's ``Advice``, whose
    ``to_dict()`` is ``advise --json`` (``recommendation``, ``fabrics``, ``break_even_gpus``,
    ``sensitivity``, ``uncertainty``, ``questions``, ``notes``). ``seed`` seeds the Monte
    Carlo; ``by_model`` adds every catalog model's break-even (``tick`` after each)."""
    from fabricplan.advise import advise as _advise
    from fabricplan.cost import CostError
    from fabricplan.workload import WorkloadError

    if not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed: {range_message(seed, 0)}")
    sc, cat, _ = _scenario(scenario, catalog)
    backend = _backend(congestion)
    try:
        return _advise(
            sc, cat, backend=backend, seed=seed, break_even=break_even, by_model=by_model, tick=tick
        )
    except (WorkloadError, CostError) as exc:
        raise _refused(exc) from exc


def _advice_frame(a: Advice) -> pandas.DataFrame:
    """One row per fabric, columns as ``advise --json``'s ``fabrics`` entries, and
    ``recommended``: this fabric is the recommendation."""
    pick = a.recommendation.fabric
    return _frame([{**jsonable(f.to_dict()), "recommended": f.fabric == pick} for f in a.fabrics])
