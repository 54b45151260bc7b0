"""Break-even: the cluster size at which InfiniBand's shorter runs repay its premium over RoCE.

The scenario is re-evaluated at node-count doublings up to ``MAX_SCALE`` times its size, with
the same model, plan (``dp`` refilled) and organisation; sizes the plan cannot divide are
skipped.
"""

from __future__ import annotations

from typing import Any

from fabricplan.advise.scoring import build_parts, evaluate, nominal_multipliers
from fabricplan.catalog import Catalog
from fabricplan.cost import CostError
from fabricplan.scenario import Scenario, ScenarioError, scenario_from_data
from fabricplan.workload import WorkloadError

MAX_SIZES = 6  # evaluations: each re-runs the workload and congestion layers
MAX_SCALE = 2  # largest size evaluated, relative to the scenario's
MIN_NODES = 2  # below two nodes no traffic crosses the fabric


def _sizes(sc: Scenario) -> list[int]:
    per_node = sc.cluster.gpus_per_node
    assert per_node is not None, "resolve the scenario first"
    out, n = [], MIN_NODES * per_node
    while n <= MAX_SCALE * sc.cluster.gpus:
        out.append(n)
        n *= 2
    return out[-MAX_SIZES:]


def break_even_gpus(sc: Scenario, cat: Catalog, congestion: bool = True,
                    known: dict[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """``known``: the scenario's own nominal scores per fabric, reused at its own size when its
    fabrics are exactly the InfiniBand and RoCE pair compared here."""
    fams = {f: cat.fabric(f).family for f in sc.cluster.fabrics}
    ib = next((f for f, fam in fams.items() if fam == "infiniband"), None)
    roce = next((f for f, fam in fams.items() if fam == "roce"), None)
    if ib is None or roce is None or sc.workload is None:
        return {"gpus": None, "note": "needs an InfiniBand and a RoCE fabric in the scenario"}
    reuse = known if known is not None and set(fams) == {ib, roce} else None
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"]["fabric"] = [ib, roce]
    rows = []
    for n in _sizes(sc):
        if reuse is not None and n == sc.cluster.gpus:
            score = [reuse[ib], reuse[roce]]
        else:
            d = {**data, "cluster": {**data["cluster"], "gpus": n}}
            d["workload"] = {**d["workload"],
                             "parallel": {**d["workload"]["parallel"], "dp": "auto"}}  # fmt: skip
            try:
                s = scenario_from_data(d, catalog=cat)
                perf, costs = evaluate(s, cat, congestion)
            except (ScenarioError, WorkloadError, CostError):
                continue
            score = list(build_parts(s, cat, perf, costs).scores(nominal_multipliers(1))[:, 0])
        rows.append({"gpus": n, f"{ib}_usd": float(score[0]), f"{roce}_usd": float(score[1]),
                     "ib_cheaper": bool(score[0] <= score[1])})  # fmt: skip
    found = next((r["gpus"] for r in rows if r["ib_cheaper"]), None)
    note = (
        "smallest size where InfiniBand costs no more for the same work"
        if found
        else "InfiniBand does not repay its premium at any size evaluated"
    )
    return {"gpus": found, "ib": ib, "roce": roce, "note": note, "sizes": rows}
