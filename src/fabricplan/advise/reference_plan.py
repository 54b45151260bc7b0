"""The plan a catalog model is evaluated with at one cluster size, for the per-model break-even.

A model with a published training layout (``Model.trained_plan``) is run as its authors ran it,
data parallelism refilled to the size: the fabric then carries the traffic that layout makes
(DeepSeek-V3's expert all-to-all over 64-way EP, say), not the traffic of a layout chosen to
avoid it. Where the layout cannot run at the size (its model-parallel group does not divide
the cluster, its EP does not divide the data-parallel group, it needs more replicas than the
batch has sequences, or it does not fit in memory), the plan is searched instead, keeping EP at
least the published EP where some fitting plan allows it and otherwise the largest EP that
fits. A model without a published layout gets the search.

The search tries tensor parallel up to the node, pipeline parallel up to 16 stages and, for
mixture-of-experts models, expert parallel up to 64 (see ``EP_SIZES``), with ZeRO-1 and
selective recomputation (full recomputation only where that is what fits), and keeps the plan
with the least time per token that fits in memory, divides the cluster and keeps the model's
default batch (no more data-parallel replicas than sequences). Plans are chosen and checked on
the InfiniBand fabric without congestion, so that the choice does not lean on either fabric's
congestion, and then used on both. Sequence length, batch and tokens are the model's defaults
(see ``scenario.load``) and precision is the scenario's, for every origin. The search is
:mod:`fabricplan.planning`'s over ``BREAK_EVEN_SPACE``: every plan priced in one vectorised pass
per recomputation mode.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.catalog.transformer import TrainedPlan
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.planning import Candidate, Job, SearchSpace, evaluate
from fabricplan.planning.search import INT_COLS, ranked
from fabricplan.scenario import Scenario, ScenarioError, scenario_from_data
from fabricplan.scenario.load import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_SEQ_LEN
from fabricplan.scenario.models import Parallel
from fabricplan.workload import shape_of, training_step
from fabricplan.workload.memory import describe
from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario

# The parallel sizes searched. Tensor parallel stops at the node (it is capped there too);
# pipelines deeper than 16 stages only add bubble at the sizes evaluated; expert parallel goes to
# 64, DeepSeek-V3's own training layout (arXiv 2412.19437, Sec. 3.2: 64-way EP over 8 nodes).
TP_SIZES = (1, 2, 4, 8, 16)
PP_SIZES = (1, 2, 4, 8, 16)
EP_SIZES = (1, 2, 4, 8, 16, 32, 64)
# selective first: full recomputation costs a third more compute and wins only when nothing else
# fits (the fastest plan is kept either way)
RECOMPUTE = ("selective", "full")
SEARCH_ZERO = 1  # ZeRO stage of searched plans: optimizer state sharded, as most runs do
# The space searched: those sizes, one micro-batch, no interleaving or context parallelism, the
# scenario defaults' overlap options; each plan's batch is the model's default batch resolved
# for its dp (so dp never exceeds the batch's sequences); uneven pipeline stages allowed, as
# with the published layouts (Llama 3 405B: 126 layers over 16 stages)
BREAK_EVEN_SPACE = SearchSpace(
    tp=TP_SIZES,
    pp=PP_SIZES,
    ep=EP_SIZES,
    vp=(1,),
    cp=(1,),
    micro_batch=(1,),
    zero=(SEARCH_ZERO,),
    recompute=RECOMPUTE,
    overlap_dp=(True,),
    tp_comm_overlap=(False,),
    cp_comm=("p2p",),
    ep_comm_overlap=(False,),
    ep_dispatch=("alltoall",),  # a model's own dispatcher where it published one (below)
    pp_divides_layers=False,
    batch_tokens=DEFAULT_BATCH_TOKENS,
)

PlanOrigin = Literal["published", "adapted", "searched"]
NO_LAYOUT = "searched plan (no published layout)"


@dataclass(frozen=True)
class ReferencePlan:
    """A model's plan at one size, where it came from, and why."""

    scenario: Scenario
    origin: PlanOrigin
    why: str
    source: str | None  # the published layout's source, when the model has one

    @property
    def gpus(self) -> int:
        return self.scenario.cluster.gpus

    @property
    def parallel(self) -> Parallel:
        w = self.scenario.workload
        assert w is not None
        return w.parallel

    @property
    def recompute(self) -> str:
        w = self.scenario.workload
        assert w is not None
        return w.recompute

    def to_dict(self) -> dict[str, Any]:
        w = self.scenario.workload
        assert w is not None
        p = w.parallel
        layout = {"tp": p.tp, "pp": p.pp, "ep": p.ep, "cp": p.cp, "vp": p.vp, "dp": p.dp}
        return {
            "gpus": self.scenario.cluster.gpus,
            **layout,
            "zero": p.zero,
            "recompute": w.recompute,
            "origin": self.origin,
            "why": self.why,
            "source": self.source,
        }


def _model_data(
    sc: Scenario,
    model: str,
    gpus: int,
    parallel: dict[str, Any],
    recompute: str,
    fabrics: list[str],
    mtp_layers: int = 0,
) -> dict[str, Any]:
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"] = {**data["cluster"], "gpus": gpus, "fabric": fabrics}
    w = data["workload"]
    data["workload"] = {
        "kind": "training",
        "model": model,
        "precision": w.get("precision", "bf16"),
        "fp8_recipe": w.get("fp8_recipe", "delayed"),
        "recompute": recompute,
        "parallel": {"cp": 1, "vp": 1, "zero": SEARCH_ZERO, **parallel, "dp": "auto"},
    }
    if mtp_layers:
        data["workload"]["mtp_layers"] = mtp_layers
    return data


def _mtp_layers(cat: Catalog, model: str) -> int:
    """The multi-token-prediction modules ``model`` was trained with: a part of its training
    objective, so every plan of it runs them, published or searched."""
    t = cat.model(model).trained_plan
    return 0 if t is None else t.mtp_layers


def _batch_seqs(cat: Catalog, model: str) -> int:
    """The model's default batch, in sequences (``scenario.load``'s default)."""
    seq = min(DEFAULT_MAX_SEQ_LEN, cat.model(model).max_seq_len)
    return max(1, DEFAULT_BATCH_TOKENS // seq)


def _gpus_per_node(sc: Scenario, cat: Catalog) -> int:
    return sc.cluster.gpus_per_node or cat.gpu(sc.cluster.gpu).node.gpus_per_node


def _job(sc: Scenario, cat: Catalog, model: str, gpus: int) -> Job:
    """The model at ``gpus`` with its default sequence and the scenario's precision; the batch
    is resolved per plan (``BREAK_EVEN_SPACE.batch_tokens``)."""
    w = sc.workload
    m = cat.model(model)
    return Job(
        model=m,
        gpus=gpus,
        gpus_per_node=_gpus_per_node(sc, cat),
        seq_len=min(DEFAULT_MAX_SEQ_LEN, m.max_seq_len),
        global_batch=_batch_seqs(cat, model),
        precision="bf16" if w is None else w.precision,
        fp8_recipe="delayed" if w is None else w.fp8_recipe,
        mtp_layers=_mtp_layers(cat, model),
    )


def _scenario(
    sc: Scenario,
    cat: Catalog,
    model: str,
    gpus: int,
    c: Candidate,
    fabrics: list[str],
) -> Scenario:
    """The scenario that runs plan ``c`` (a plan the search listed: the scenario's rules hold)."""
    keys = ("tp", "pp", "ep", "cp", "vp", "zero", "tp_comm_overlap", "ep_comm_overlap")
    par = {k: getattr(c, k) for k in keys}
    par["cp_comm"] = c.cp_comm
    if c.ep > 1:
        par["ep_dispatch"] = c.ep_dispatch
    data = _model_data(sc, model, gpus, par, c.recompute, fabrics, _mtp_layers(cat, model))
    data["workload"] |= {"micro_batch": c.micro_batch, "overlap_dp": c.overlap_dp}
    return scenario_from_data(data, catalog=cat)


def search(
    sc: Scenario,
    cat: Catalog,
    model: str,
    gpus: int,
    ib: str,
    roce: str,
    ep_floor: int = 1,
    ep_dispatch: str = "alltoall",
) -> Scenario | None:
    """The scenario on ``gpus`` GPUs and fabrics ``ib`` and ``roce``, training ``model`` with
    its fastest fitting plan on ``ib`` among those with EP at least ``ep_floor`` (or, when
    none fits, with the largest EP that fits), its expert all-to-alls sent as ``ep_dispatch``
    says; None when no plan tried fits. Every plan of ``BREAK_EVEN_SPACE`` is priced in one
    vectorised pass per recomputation mode (:mod:`fabricplan.planning`)."""
    job = _job(sc, cat, model, gpus)
    # the model's dispatcher where its EP groups span nodes (the search tries it only there)
    dispatchers = ("alltoall",) if ep_dispatch == "alltoall" else ("alltoall", ep_dispatch)
    space = replace(BREAK_EVEN_SPACE, ep_dispatch=dispatchers)
    data = _model_data(sc, model, gpus, {}, RECOMPUTE[0], [ib, roce])
    try:  # the cluster at this size: the same for every plan
        base = scenario_from_data(data, catalog=cat)
    except ScenarioError:
        return None
    hw = hardware_from_scenario(base, cat, ib)
    table = evaluate(shape_of(job.model), job, hw, space, NO_CONGESTION)
    order = ranked(table)
    if not len(order):
        return None
    eps = table.ints[order, INT_COLS.index("ep")]
    floor = min(ep_floor, int(eps.max()))
    best = table.candidate(int(order[np.flatnonzero(eps >= floor)[0]]))
    return _scenario(sc, cat, model, gpus, best, [ib, roce])


def _ep(s: Scenario) -> int:
    assert s.workload is not None
    return s.workload.parallel.ep


def _published(
    sc: Scenario, cat: Catalog, model: str, gpus: int, ib: str, roce: str, t: TrainedPlan
) -> Scenario | str:
    """The scenario with the published layout at ``gpus``, or why it cannot run there."""
    lay = f"{t.tp}·{t.pp}·{t.ep}"
    if t.tp > _gpus_per_node(sc, cat):
        return f"published {lay} has tp {t.tp} beyond the node's {_gpus_per_node(sc, cat)} GPUs"
    if gpus % (t.tp * t.pp * t.cp):
        return f"published {lay} (cp {t.cp}) does not divide {gpus:,} GPUs"
    par: dict[str, int | str] = {"tp": t.tp, "pp": t.pp, "ep": t.ep, "cp": t.cp, "vp": t.vp}
    par |= {"zero": t.zero} | ({"ep_dispatch": t.ep_dispatch} if t.ep > 1 else {})
    if t.pipeline_layout is not None:
        par["pipeline_layout"] = t.pipeline_layout
    try:
        data = _model_data(sc, model, gpus, par, t.recompute, [ib, roce], t.mtp_layers)
        if t.recompute_modules is not None:
            data["workload"]["recompute_modules"] = list(t.recompute_modules)
        s = scenario_from_data(data, catalog=cat)
    except ScenarioError as exc:
        p = exc.problems[0]  # e.g. ep does not divide the data-parallel group
        name = p.field.rsplit(".", 1)[-1]
        return f"published {lay} at {gpus:,} GPUs: {name} {p.value} {p.message}"
    assert s.workload is not None
    dp, seqs = s.workload.parallel.dp, _batch_seqs(cat, model)
    if dp > seqs:
        return f"published {lay} at {gpus:,} GPUs needs dp {dp:,}, more than the batch's {seqs}"
    st = training_step(
        shape_of(cat.model(model)),
        plans_from_scenario(s),
        hardware_from_scenario(s, cat, ib),
        backend=NO_CONGESTION,
    )
    if not st.memory.fits[0]:
        usable = f"{st.memory.capacity / 1e9:.1f} usable"
        return f"published {lay} does not fit at {gpus:,} GPUs: {describe(st.memory)}, {usable}"
    return s


def reference_plan(
    sc: Scenario, cat: Catalog, model: str, gpus: int, ib: str, roce: str
) -> ReferencePlan | None:
    """``model``'s plan on ``gpus`` GPUs (see the module's docstring); None when none fits."""
    t = cat.model(model).trained_plan
    if t is None:
        s = search(sc, cat, model, gpus, ib, roce)
        return None if s is None else ReferencePlan(s, "searched", NO_LAYOUT, None)
    got = _published(sc, cat, model, gpus, ib, roce, t)
    if isinstance(got, Scenario):
        assert got.workload is not None
        why = f"published layout, dp refilled to {got.workload.parallel.dp:,}"
        return ReferencePlan(got, "published", why, t.source)
    s = search(sc, cat, model, gpus, ib, roce, ep_floor=t.ep, ep_dispatch=t.ep_dispatch)
    if s is None:
        return None
    assert s.workload is not None
    ep = s.workload.parallel.ep
    if ep >= t.ep:
        kept = f"ep {ep}, at least the published {t.ep}"
    else:
        kept = f"ep {ep}, the largest with a fitting plan"
    why = f"{got}; searched instead" + (f", {kept}" if t.ep > 1 else "")
    return ReferencePlan(s, "adapted", why, t.source)
