"""What RoCE tuning does to this workload: the scenario's RoCE fabric re-run at every RoCE
quality (ECN/PFC/DCQCN settings, see ``congestion``) and without congestion, so that the reason
can say how much step time congestion costs at each quality and what that is worth per run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from fabricplan.advise.scoring import first_of_family
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NO_CONGESTION, NetworkBackend
from fabricplan.cost import usd
from fabricplan.scenario import Scenario
from fabricplan.scenario.models import RoceQuality
from fabricplan.workload import FabricResult, WorkloadError

QUALITIES: tuple[str, ...] = get_args(RoceQuality)
# Step-time differences below this share are reported as the same (the simulation's own
# seed-to-seed spread is larger).
SAME_SHARE = 5e-4


@dataclass(frozen=True)
class RoceTuning:
    """The scenario's first RoCE fabric at every RoCE quality: the share of step time lost to
    congestion, and what each quality's run costs more than the scenario's own."""

    fabric: str
    gpus: int
    quality: str  # the scenario's own
    lost_to_congestion: dict[str, float]  # by quality
    run_usd_vs_own: dict[str, float]  # by quality

    def to_dict(self) -> dict[str, Any]:
        return {
            "fabric": self.fabric,
            "gpus": self.gpus,
            "quality": self.quality,
            "lost_to_congestion": self.lost_to_congestion,
            "run_usd_vs_own": self.run_usd_vs_own,
        }


def tuning_effect(
    sc: Scenario,
    cat: Catalog,
    perf: list[FabricResult],
    gpu_hour_cost: dict[str, float],
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> RoceTuning | None:
    """Step time lost to congestion (as ``backend`` prices it, ``perf`` included) on the
    scenario's first RoCE fabric at each quality, and the run cost of the difference from the
    scenario's own quality. None for serving or no RoCE."""
    w = sc.workload
    roce = first_of_family(sc, cat, "roce")
    if w is None or w.kind != "training" or roce is None:
        return None
    own = next(p.figures for p in perf if p.fabric == roce)
    # the RoCE fabric alone at each other quality, and without congestion: scenario variants
    # for the sweep engine (each content evaluated once, kept in its cache)
    from fabricplan.sweep.engine import evaluate_scenarios
    from fabricplan.sweep.variants import Variant

    def alone(quality: str) -> Scenario:
        cluster = sc.cluster.model_copy(update={"roce_quality": quality, "fabric": (roce,)})
        return sc.model_copy(update={"cluster": cluster})

    own_q = sc.cluster.roce_quality
    (ideal_rec,) = evaluate_scenarios([Variant(0, {}, alone(own_q))], cat, NO_CONGESTION)
    others = [q for q in QUALITIES if q != own_q]
    variants = [Variant(i, {"cluster.roce_quality": q}, alone(q)) for i, q in enumerate(others)]
    found = evaluate_scenarios(variants, cat, backend)
    for rec in (ideal_rec, *found):
        if not rec.ok:
            raise WorkloadError(rec.skipped or "refused")
    ideal = ideal_rec.outcomes[0].outputs.step_time_s
    step = {own_q: own.step_time_s}
    step.update({q: r.outcomes[0].outputs.step_time_s for q, r in zip(others, found, strict=True)})
    run_usd = (own.gpu_hours or 0.0) * gpu_hour_cost[roce]
    return RoceTuning(
        fabric=roce,
        gpus=sc.cluster.gpus,
        quality=sc.cluster.roce_quality,
        lost_to_congestion={q: step[q] / ideal - 1 for q in QUALITIES},
        run_usd_vs_own={q: run_usd * (step[q] / own.step_time_s - 1) for q in QUALITIES},
    )


def tuning_reason(t: RoceTuning) -> str:
    lost, worth = t.lost_to_congestion, t.run_usd_vs_own
    own = t.quality
    head = (
        f"RoCE tuning: at {t.gpus:,} GPUs {t.fabric} '{own}' loses "
        f"{lost[own]:.1%} of step time to congestion"
    )
    others = [q for q in QUALITIES if q != own]
    names = " and ".join(f"'{q}'" for q in others)
    if all(abs(lost[q] - lost[own]) < SAME_SHARE for q in others):
        if lost[own] < SAME_SHARE:
            why = "this job's network traffic meets no contention on this topology"
        else:
            why = "the slowdown comes from the topology (oversubscription, path collisions)"
        return (
            f"{head}; {names} lose the same: {why}; no modelled mechanism of tuning moves "
            "the step here (it still changes the run-loss risk; what is not modelled is "
            "listed per fabric)"
        )
    parts = [
        f"'{q}' {lost[q]:.1%} ({'+' if worth[q] >= 0 else '-'}{usd(abs(worth[q]))} per run)"
        for q in others
    ]
    return head + "; " + ", ".join(parts)
