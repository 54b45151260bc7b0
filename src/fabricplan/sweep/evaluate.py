"""One scenario evaluated at one level (``step``, ``cost`` or ``advise``): the function every
executor runs, in this process or in a worker. It calls the very functions the commands call,
so a sweep's figure is the command's figure for that combination."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabricplan.sweep.records import AdviseOutputs, CostOutputs, Outcome, StepOutputs, pick

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend
    from fabricplan.scenario import Scenario
    from fabricplan.workload import FabricResult
    from fabricplan.workload.positions import Positions


class Skip(Exception):
    """The model refuses this combination (a plan that does not fit, a design the fabric cannot
    build): reported as skipped with the reason, never as a failure of the sweep."""


def _refusals() -> tuple[type[Exception], ...]:
    from fabricplan.congestion.network_backend import BackendError
    from fabricplan.cost import CostError
    from fabricplan.scenario import ScenarioError
    from fabricplan.workload import WorkloadError

    return (WorkloadError, CostError, BackendError, ScenarioError)


def _step(
    sc: Scenario, cat: Catalog, backend: NetworkBackend, positions: Positions | None
) -> list[FabricResult]:
    from fabricplan.workload import evaluate_scenario

    if positions is None:
        return evaluate_scenario(sc, cat, backend=backend)
    return evaluate_scenario(
        sc,
        cat,
        backend=backend,
        adjust=lambda hw: positions.apply(hw, cat),
        adjust_key=("positions", positions),
    )


def _cost(sc: Scenario, cat: Catalog, perf: list[FabricResult]) -> list[dict[str, Any]]:
    """Each fabric's money as ``advise`` words it (a rental has none of an owner's figures)."""
    from fabricplan.advise.rent import OWNERSHIP_KEYS
    from fabricplan.advise.scoring import build_parts, costs_of

    costs = costs_of(sc, cat, perf)
    scores = build_parts(sc, cat, perf, costs).nominal()
    low = float(min(scores))
    out = []
    for c, score in zip(costs, scores, strict=True):
        d = {
            "capex_usd": c.capex_usd,
            "capex_network_usd": c.capex_network_usd,
            "opex_usd_per_year": c.opex_usd_per_year,
            "tco_usd": c.tco_usd,
            "cost_per_run_usd": c.cost_per_run_usd,
            "cost_per_million_output_tokens_usd": c.cost_per_million_output_tokens_usd,
            "cost_same_work_usd": float(score),
            "cheapest": bool(float(score) == low),
        }
        if c.rent is not None:
            d.update({k: None for k in OWNERSHIP_KEYS if k in d})
        out.append(d)
    return out


def _advise(sc: Scenario, cat: Catalog, backend: NetworkBackend, seed: int) -> list[dict[str, Any]]:
    from fabricplan.advise import advise

    a = advise(sc, cat, backend=backend, seed=seed)
    r = a.recommendation
    low = min(f.cost_same_work_usd for f in a.fabrics)
    return [
        {
            **f.to_dict(),
            "cheapest": f.cost_same_work_usd == low,
            "recommended": f.fabric == r.fabric,
            "recommendation": r.fabric,
            "confidence": r.confidence,
            "p_cheapest": a.uncertainty.p_cheapest.get(f.fabric),
            "cost_indeterminate": r.cost_indeterminate is not None,
            "break_even_gpus": a.break_even_gpus.gpus,
        }
        for f in a.fabrics
    ]


def evaluate_one(
    sc: Scenario,
    what: str,
    cat: Catalog,
    backend: NetworkBackend,
    *,
    seed: int = 0,
    detail: bool = False,
    positions: Positions | None = None,
) -> tuple[Outcome, ...]:
    """Each fabric's outcome for ``sc`` at level ``what`` (its hardware at ``positions`` of the
    catalog's ranges, if given); ``detail`` keeps each fabric's FabricResult on its outcome.
    Raises Skip when the model refuses the combination."""
    if positions is not None and what != "step":
        raise ValueError("hardware positions are evaluated at the step level only")
    try:
        perf = _step(sc, cat, backend, positions)
        if what == "step":
            extra: list[dict[str, Any]] = [{} for _ in perf]
            cls: type[StepOutputs] = StepOutputs
        elif what == "cost":
            extra, cls = _cost(sc, cat, perf), CostOutputs
        else:
            extra, cls = _advise(sc, cat, backend, seed), AdviseOutputs
    except _refusals() as exc:
        raise Skip(str(exc)) from None
    return tuple(
        Outcome(p.fabric, pick(cls, {**_stored(p), **e}), p if detail else None)
        for p, e in zip(perf, extra, strict=True)
    )


def _stored(r: FabricResult) -> dict[str, Any]:
    """The figures of ``r`` that outputs are picked from: its step document's, without the
    expected run's details (no output holds them, and writing them out costs more than the
    evaluation a memo answers)."""
    return {
        **r.figures.to_dict(),
        "expected_time_to_train_days": r.expected_time_to_train_days,
        "expected_gpu_hours": r.expected_gpu_hours,
        "goodput": r.goodput,
    }
