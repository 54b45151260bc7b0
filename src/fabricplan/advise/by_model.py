"""Break-even per model: the IB-vs-RoCE break-even size for every training model in the catalog,
on the scenario's GPUs, fabrics, costs and organisation.

A model other than the scenario's has no plan of its own, so each size gets a reference plan:
the one with the least time per token that fits in memory, divides the cluster and keeps the
model's default batch (no more data-parallel replicas than sequences). The plans tried are
tensor parallel up to the node, pipeline parallel up to 16 stages and, for mixture-of-experts
models, expert parallel up to 64 (see ``EP_SIZES``). The plan is chosen on the
InfiniBand fabric without congestion, so that the choice does not lean on either fabric's
congestion, and then used on both. Everything else is the model's defaults (sequence length,
batch, tokens; see ``scenario.load``) with ZeRO-1 and selective recomputation, full
recomputation only where that is what fits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fabricplan.advise.break_even import ib_and_roce, sizes, summary, sweep
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NO_CONGESTION, NetworkBackend
from fabricplan.scenario import Scenario, ScenarioError, scenario_from_data
from fabricplan.scenario.load import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_SEQ_LEN
from fabricplan.workload import shape_of, training_step
from fabricplan.workload.plan import Plans, hardware_from_scenario, plans_from_scenario

# The parallel sizes tried. Tensor parallel stops at the node (it is capped there too);
# pipelines deeper than 16 stages only add bubble at the sizes evaluated; expert parallel goes to
# 64, DeepSeek-V3's own training layout (arXiv 2412.19437, Sec. 3.2: 64-way EP over 8 nodes).
TP_SIZES = (1, 2, 4, 8, 16)
PP_SIZES = (1, 2, 4, 8, 16)
EP_SIZES = (1, 2, 4, 8, 16, 32, 64)
# selective first: full recomputation costs a third more compute and wins only when nothing else
# fits (the fastest plan is kept either way)
RECOMPUTE = ("selective", "full")


def _candidates(tp_max: int, heads: int, experts: int) -> list[dict[str, Any]]:
    tps = [t for t in TP_SIZES if t <= tp_max and heads % t == 0]
    eps = [e for e in EP_SIZES if experts % e == 0]  # [1] for a dense model
    return [{"tp": t, "pp": p, "ep": e} for t in tps for p in PP_SIZES for e in eps]


def _model_data(sc: Scenario, model: str, gpus: int, plan: dict[str, Any], fabrics: list[str]
                ) -> dict[str, Any]:  # fmt: skip
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"] = {**data["cluster"], "gpus": gpus, "fabric": fabrics}
    w = data["workload"]
    data["workload"] = {
        "kind": "training", "model": model, "precision": w.get("precision", "bf16"),
        "recompute": RECOMPUTE[0],
        "parallel": {"tp": plan["tp"], "pp": plan["pp"], "ep": plan["ep"], "dp": "auto",
                     "zero": 1, "cp": 1, "vp": 1},
    }  # fmt: skip
    return data


def reference_scenario(sc: Scenario, cat: Catalog, model: str, gpus: int, ib: str, roce: str
                       ) -> Scenario | None:  # fmt: skip
    """The scenario on ``gpus`` GPUs and fabrics ``ib`` and ``roce``, training ``model`` with
    its fastest fitting plan on ``ib``; None when no plan tried fits."""
    m = cat.model(model)
    gpn = sc.cluster.gpus_per_node or cat.gpu(sc.cluster.gpu).node.gpus_per_node
    experts = m.moe.experts if m.moe is not None else 1
    shape = shape_of(m)
    seq = min(DEFAULT_MAX_SEQ_LEN, m.max_seq_len)
    batch_seqs = max(1, DEFAULT_BATCH_TOKENS // seq)  # the model's default batch, in sequences
    valid: dict[str, list[tuple[Scenario, Plans]]] = {r: [] for r in RECOMPUTE}
    for plan in _candidates(gpn, m.heads, experts):
        if gpus % (plan["tp"] * plan["pp"]) or plan["pp"] > m.layers:
            continue
        try:
            s = scenario_from_data(_model_data(sc, model, gpus, plan, [ib, roce]), catalog=cat)
        except ScenarioError:
            continue  # does not divide: dp, ep or the batch
        assert s.workload is not None
        if s.workload.parallel.dp > batch_seqs:
            continue  # more replicas than sequences would inflate the batch
        for r in RECOMPUTE:  # the recomputation mode changes no rule: validated once
            s_r = s.model_copy(update={"workload": s.workload.model_copy(update={"recompute": r})})
            valid[r].append((s_r, plans_from_scenario(s_r)))
    # every candidate of one recomputation mode in one vectorised step, in the order tried
    best: tuple[float, Scenario] | None = None
    for found in valid.values():
        if not found:
            continue
        hw = hardware_from_scenario(found[0][0], cat, ib)  # the same cluster for every plan
        st = training_step(shape, Plans.stack([p for _, p in found]), hw, backend=NO_CONGESTION)
        per_token = np.where(st.memory.fits, st.time / st.tokens, np.inf)
        i = int(np.argmin(per_token))  # the first of equals, as tried
        if np.isfinite(per_token[i]) and (best is None or per_token[i] < best[0]):
            best = (float(per_token[i]), found[i][0])
    return None if best is None else best[1]


def break_even_by_model(sc: Scenario, cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND,
                        tick: Callable[[str], None] | None = None
                        ) -> list[dict[str, Any]]:  # fmt: skip
    """One row per training model of the catalog: the plan at the scenario's size and the
    break-even per maturity. ``tick`` is called once per model (for a progress bar)."""
    pair = ib_and_roce(sc, cat)
    if pair is None:
        return []
    ib, roce = pair
    every = sizes(sc, limit=None)  # every model fits at different sizes: try them all
    out = []
    for model in cat.ids("model"):
        plans: dict[int, Scenario | None] = {}

        def at(n: int, model: str = model, plans: dict[int, Scenario | None] = plans
               ) -> Scenario | None:  # fmt: skip
            plans[n] = reference_scenario(sc, cat, model, n, ib, roce)
            return plans[n]

        rows = sweep(every, at, cat, ib, roce, backend)
        own = sc.organization.network_maturity
        found, note = summary(rows, own)
        here = plans.get(sc.cluster.gpus)
        plan = None
        if here is not None and here.workload is not None:
            par = here.workload.parallel
            plan = {"tp": par.tp, "pp": par.pp, "ep": par.ep, "dp": par.dp,
                    "recompute": here.workload.recompute}  # fmt: skip
        out.append({"model": model, "plan_at_scenario_size": plan, "by_maturity": found,
                    "evaluated_gpus": [r["gpus"] for r in rows[own]], "note": note})  # fmt: skip
        if tick is not None:
            tick(model)
    return out
