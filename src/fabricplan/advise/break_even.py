"""Break-even: the cluster size at which InfiniBand's shorter runs repay its premium over RoCE,
per organisation maturity.

The scenario is re-evaluated at node-count doublings up to ``MAX_SCALE`` times its size, with
the same model, plan (``dp`` refilled) and organisation; sizes the plan cannot divide are
skipped. Step times do not depend on maturity, so each size's workload is evaluated once and
only the costs are redone per maturity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricplan.advise.scoring import build_parts, costs_of, first_of_family, scenario_at
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import CostError
from fabricplan.scenario import Scenario
from fabricplan.scenario.models import MATURITIES
from fabricplan.workload import FabricResult

MAX_SIZES = 6  # evaluations: each re-runs the workload and congestion layers
MAX_SCALE = 2  # largest size evaluated, relative to the scenario's
MIN_NODES = 2  # below two nodes no traffic crosses the fabric


def sizes(sc: Scenario, limit: int | None = MAX_SIZES) -> list[int]:
    """Node-count doublings from ``MIN_NODES`` nodes to ``MAX_SCALE`` times the scenario's size;
    the largest ``limit`` of them."""
    per_node = sc.cluster.gpus_per_node
    assert per_node is not None, "resolve the scenario first"
    out, n = [], MIN_NODES * per_node
    while n <= MAX_SCALE * sc.cluster.gpus:
        out.append(n)
        n *= 2
    return out if limit is None else out[-limit:]


def _stays_cheaper(rows: list[dict[str, Any]]) -> int | None:
    """The smallest size from which InfiniBand is no dearer at every larger size evaluated."""
    out = None
    for r in reversed(rows):
        if not r["ib_cheaper"]:
            break
        out = r["gpus"]
    return out


def with_maturity(sc: Scenario, maturity: str) -> Scenario:
    org = sc.organization.model_copy(update={"network_maturity": maturity})
    return sc.model_copy(update={"organization": org})


def _scores(sc: Scenario, cat: Catalog, perf: list[FabricResult]) -> tuple[float, float]:
    ib, roce = build_parts(sc, cat, perf, costs_of(sc, cat, perf)).nominal()
    return float(ib), float(roce)


def ib_and_roce(sc: Scenario, cat: Catalog) -> tuple[str, str] | None:
    """The scenario's first InfiniBand and first RoCE fabric, if it has both."""
    ib, roce = first_of_family(sc, cat, "infiniband"), first_of_family(sc, cat, "roce")
    return None if ib is None or roce is None else (ib, roce)


def sweep(
    at_sizes: list[int],
    at: Callable[[int], Scenario | None],
    cat: Catalog,
    ib: str,
    roce: str,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> dict[str, list[dict[str, Any]]]:
    """IB and RoCE cost for the same work, and step time, at each size, per maturity.
    ``at(n)`` is the scenario on ``n`` GPUs (None, or a ScenarioError, skips the size).
    Re-evaluating the scenario's own size is cheap: its congestion runs are cached where they
    are simulated, and its workload by the sweep engine."""
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import variant_of

    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in MATURITIES}
    # the sizes as the sweep engine's variants: each evaluated once (a size another analysis
    # of this scenario evaluated already comes from the engine's cache); a size the plan does
    # not divide, or the model refuses, comes back skipped
    variants = [
        variant_of(i, {"cluster.gpus": n}, lambda n=n: at(n)) for i, n in enumerate(at_sizes)
    ]
    for rec in evaluate_scenarios(variants, cat, backend):
        s = variants[rec.index].scenario
        if not rec.ok or s is None:
            continue
        n = at_sizes[rec.index]
        perf = [o.detail for o in rec.outcomes if o.detail is not None]
        step = {p.fabric: p.figures.step_time_s for p in perf}
        try:
            for m in MATURITIES:
                i, r = _scores(with_maturity(s, m), cat, perf)
                rows[m].append(
                    {
                        "gpus": n,
                        f"{ib}_usd": i,
                        f"{roce}_usd": r,
                        f"{ib}_step_s": step.get(ib),
                        f"{roce}_step_s": step.get(roce),
                        "ib_cheaper": bool(i <= r),
                    }
                )
        except CostError:
            continue
    return rows


def summary(rows: dict[str, list[dict[str, Any]]], maturity: str) -> tuple[dict[str, Any], str]:
    """Break-even per maturity, and a sentence on the one asked about."""
    found = {m: _stays_cheaper(rows[m]) for m in MATURITIES}
    cheaper = [r["gpus"] for r in rows[maturity] if r["ib_cheaper"]]
    if not rows[maturity]:
        note = "no size evaluated: the plan does not divide or fit any of them"
    elif found[maturity]:
        note = "smallest size from which InfiniBand costs no more for the same work"
    elif cheaper:
        note = (
            f"InfiniBand costs no more at {', '.join(map(str, cheaper))} GPUs but not at "
            "every larger size evaluated"
        )
    else:
        note = "InfiniBand does not repay its premium at any size evaluated"
    return found, note


def break_even_gpus(
    sc: Scenario, cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND
) -> dict[str, Any]:
    pair = ib_and_roce(sc, cat)
    if pair is None or sc.workload is None:
        return {"gpus": None, "note": "needs an InfiniBand and a RoCE fabric in the scenario"}
    ib, roce = pair
    rows = sweep(sizes(sc), lambda n: scenario_at(sc, cat, n, [ib, roce]), cat, ib, roce, backend)
    own = sc.organization.network_maturity
    found, note = summary(rows, own)
    return {
        "gpus": found[own],
        "ib": ib,
        "roce": roce,
        "note": note,
        "sizes": rows[own],
        "by_maturity": found,
        "sizes_by_maturity": rows,  # every maturity's rows: the report's break-even surface
    }
