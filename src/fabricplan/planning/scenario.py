"""The plan search for a scenario: its model, cluster, sequence, batch and numerics fixed, every
plan searched, on each of its fabrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.planning.search import (
    Candidate,
    Reason,
    SearchResult,
    alternative,
    evaluate,
    summarize,
)
from fabricplan.planning.space import Job, SearchSpace
from fabricplan.scenario import Scenario
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.evaluate import check_dispatch_fabrics
from fabricplan.workload.plan import dispatch_on, hardware_from_scenario, plans_from_scenario
from fabricplan.workload.shapes import shape_of
from fabricplan.workload.training import training_step

# Alternatives shown per fabric unless asked otherwise.
DEFAULT_TOP = 5


def job_of(sc: Scenario, cat: Catalog) -> Job:
    """What the search keeps from a (resolved) training scenario."""
    w = sc.workload
    if w is None or w.kind != "training":
        what = "no workload" if w is None else "an inference workload"
        raise WorkloadError(f"workload: the plan search is for training; the scenario has {what}")
    assert w.seq_len is not None and w.global_batch is not None
    assert sc.cluster.gpus_per_node is not None, "resolve first"
    return Job(
        model=cat.model(w.model),
        gpus=sc.cluster.gpus,
        gpus_per_node=sc.cluster.gpus_per_node,
        seq_len=w.seq_len,
        global_batch=w.global_batch,
        precision=w.precision,
        flash=w.flash_attention,
        grad_accum_fusion=w.grad_accum_fusion,
        grad_reduce_bf16=w.grad_reduce == "bf16",
        fp8_recipe=w.fp8_recipe,
        mtp_layers=w.mtp_layers,
        pipeline_engine=w.parallel.pipeline_engine,
    )


@dataclass(frozen=True)
class FabricSearch:
    """The search on one fabric, and the scenario's own plan priced the same way."""

    result: SearchResult
    scenario_plan: Candidate

    @property
    def best_over_scenario_plan(self) -> float | None:
        """The best plan's throughput over the scenario's, when both fit."""
        best, own = self.result.best, self.scenario_plan
        if best is None or not own.fits:
            return None
        return best.tokens_per_s / own.tokens_per_s - 1.0

    def scenario_plan_reasons(self) -> tuple[Reason, ...]:
        """Why the scenario's plan loses to the best (none when no plan fits)."""
        best = self.result.best
        if best is None:
            return ()
        return alternative(self.scenario_plan, best, self.result.capacity_GB).reasons

    def to_dict(self) -> dict[str, Any]:
        why = [r.to_dict() for r in self.scenario_plan_reasons()]
        return {
            **self.result.to_dict(),
            "scenario_plan": {**self.scenario_plan.to_dict(), "why": why},
            "best_over_scenario_plan": self.best_over_scenario_plan,
        }


def _own(sc: Scenario, cat: Catalog, fabric: str, backend: NetworkBackend) -> Candidate:
    w = sc.workload
    assert w is not None
    p = plans_from_scenario(sc)
    hw = hardware_from_scenario(sc, cat, fabric)
    st = training_step(shape_of(cat.model(w.model)), p, hw, backend=backend)
    t = float(st.time[0])
    par = w.parallel
    assert par.dp != "auto"
    return Candidate(
        tp=par.tp,
        pp=par.pp,
        vp=par.vp,
        cp=par.cp,
        ep=par.ep,
        dp=par.dp,
        micro_batch=w.micro_batch,
        global_batch=int(p.global_batch[0]),
        zero=par.zero,
        recompute=w.recompute,
        overlap_dp=w.overlap_dp,
        tp_comm_overlap=par.tp_comm_overlap,
        cp_comm=par.cp_comm,
        ep_comm_overlap=par.ep_comm_overlap,
        ep_dispatch=dispatch_on(hw, par.ep_dispatch),
        step_time_s=t,
        tokens_per_s=float(st.tokens[0]) / t,
        memory_GB=float(st.memory.total[0]) / 1e9,
        fits=bool(st.memory.fits[0]),
        breakdown={k.removesuffix("_s"): v for k, v in st.breakdown().items()},
    )


def search_scenario(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str] | None = None,
    *,
    space: SearchSpace | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
    top: int = DEFAULT_TOP,
    tick: Callable[[str], None] | None = None,
) -> list[FabricSearch]:
    """The fastest fitting plan of ``space`` (default: every plan) on each fabric, with the
    best of the next ``top`` layouts and the faster layouts that do not fit. Raises
    WorkloadError for a scenario without training, or a network a backend cannot price."""
    job = job_of(sc, cat)
    space = space or SearchSpace()
    s = shape_of(job.model)
    fabrics = fabrics or list(sc.cluster.fabrics)
    check_dispatch_fabrics(sc, cat, fabrics)
    out = []
    for fab in fabrics:
        hw = hardware_from_scenario(sc, cat, fab)
        here = space
        if dispatch_on(hw, "auto") == "alltoall":  # no hierarchical dispatcher without RDMA
            alltoall = tuple(d for d in space.ep_dispatch if d == "alltoall")
            here = replace(space, ep_dispatch=alltoall)
        table = evaluate(s, job, hw, here, backend)
        out.append(FabricSearch(summarize(table, fab, top), _own(sc, cat, fab, backend)))
        if tick is not None:
            tick(fab)
    return out
