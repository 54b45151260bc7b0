"""The seeds' scale claims (16, 64, 256 GPUs), recomputed under the conditions they leave open.

Each claim is a throughput ratio or share between InfiniBand NDR and RoCE 400G at one scale.
The claim's own conditions are an example scenario of that tier with a well-configured
(``tuned``) RoCE fabric on a rail-optimised topology. The other cases change one condition at
a time (RoCE quality, topology, oversubscription, overlap of the gradient reduction, RoCE
latency at the catalog's high end, a different model), then all of the adverse ones together.
Nothing here is tuned to make a claim true: the claims are what is under test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.claims.result import Case, ClaimResult, in_range, near, source
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.scenario import Scenario, load_scenario
from fabricplan.sweep.variants import Variant as SweepVariant
from fabricplan.sweep.variants import variant_of
from fabricplan.workload.positions import Positions
from fabricplan.workload.result import StepFigures

EXAMPLES = Path(str(resources.files("fabricplan.claims") / "data"))
IB, ROCE = "ib-ndr", "roce-400g"
# Leaf oversubscription of the "oversubscribed" case: a common cost-saving build.
OVERSUBSCRIBED = 2.0


@dataclass(frozen=True)
class Variant:
    label: str
    overrides: tuple[str, ...] = ()
    roce_latency: str = "typical"  # typical | high (the catalog's range)


COMMON_VARIANTS = (
    Variant("claim's own: RoCE tuned, rail-optimized"),
    Variant("RoCE default tuning", ("cluster.roce_quality=default",)),
    Variant("RoCE misconfigured", ("cluster.roce_quality=misconfigured",)),
    Variant("fat-tree", ("cluster.topology.design=fat-tree",)),
    Variant(
        f"fat-tree {OVERSUBSCRIBED:g}:1 oversubscribed",
        ("cluster.topology.design=fat-tree", f"cluster.topology.oversubscription={OVERSUBSCRIBED}"),
    ),
    Variant("gradient reduction not overlapped", ("workload.overlap_dp=false",)),
    Variant("RoCE latency at the catalog's high end", roce_latency="high"),
    Variant("fragmented placement (a shared cluster)", ("cluster.placement=fragmented",)),
    # where NCCL channels collide, RoCE quality decides what the collision costs
    Variant(
        f"fat-tree {OVERSUBSCRIBED:g}:1, RoCE default tuning",
        (
            "cluster.topology.design=fat-tree",
            f"cluster.topology.oversubscription={OVERSUBSCRIBED}",
            "cluster.roce_quality=default",
        ),
    ),
)
WORST = Variant(
    "all adverse at once",
    (
        "cluster.roce_quality=misconfigured",
        "cluster.topology.design=fat-tree",
        f"cluster.topology.oversubscription={OVERSUBSCRIBED}",
        "workload.overlap_dp=false",
        "cluster.placement=fragmented",
    ),
    roce_latency="high",
)


# The catalog range's ends as positions (workload.positions): "high" is the range's high end.
LATENCY_POSITION = {"low": 0.0, "high": 1.0}


def catalog_with_one_switch_latency(cat: Catalog, fabric: str, us: float) -> Catalog:
    """The catalog with ``fabric``'s typical (one-switch) RDMA latency set to ``us``."""
    f = cat.fabric(fabric)
    lat = f.rdma_latency_us.model_copy(update={"typical": us})
    return cat.with_entry(f.model_copy(update={"rdma_latency_us": lat}))


def _sweep_variant(cat: Catalog, index: int, scenario: str, v: Variant) -> SweepVariant:
    """The claim's scenario under ``v``, its InfiniBand and RoCE fabrics only, RoCE's RDMA
    latency at ``v``'s end of the catalog range: a variant for the sweep engine."""

    def build() -> Scenario:
        sc = load_scenario(EXAMPLES / scenario, catalog=cat, overrides=list(v.overrides))
        return sc.model_copy(
            update={"cluster": sc.cluster.model_copy(update={"fabric": (IB, ROCE)})}
        )

    positions = None
    if v.roce_latency != "typical":
        # the fabric as a whole at that latency: its flow control's round trips included
        positions = Positions(
            rdma_latency=LATENCY_POSITION[v.roce_latency], fabrics=(ROCE,), network=True
        )
    return variant_of(index, {"scenario": scenario, "variant": v.label}, build, positions)


Pair = tuple[StepFigures, StepFigures]  # InfiniBand's and RoCE's figures


def _evaluate(
    cat: Catalog, scenario: str, variants: list[Variant], backend: NetworkBackend
) -> list[Pair | str]:
    """IB's and RoCE's figures under each variant, or why it is not evaluable."""
    from fabricplan.sweep.engine import evaluate_scenarios

    todo = [_sweep_variant(cat, i, scenario, v) for i, v in enumerate(variants)]
    out: list[Pair | str] = []
    for rec in evaluate_scenarios(todo, cat, backend):
        if not rec.ok:
            out.append((rec.skipped or "refused").splitlines()[0])
            continue
        found = {o.fabric: o.detail.figures for o in rec.outcomes if o.detail is not None}
        out.append((found[IB], found[ROCE]))
    return out


QUANTITIES: dict[str, tuple[str, Callable[[StepFigures, StepFigures], float]]] = {
    "roce_share": (
        "RoCE tokens/s / IB tokens/s",
        lambda ib, roce: roce.tokens_per_s / ib.tokens_per_s,
    ),
    "ib_gain": (
        "IB tokens/s / RoCE tokens/s - 1",
        lambda ib, roce: ib.tokens_per_s / roce.tokens_per_s - 1,
    ),
    "comm_fraction": (
        "RoCE exposed communication / step time",
        lambda ib, roce: roce.comm_exposed_fraction,
    ),
}


@dataclass(frozen=True)
class ScaleClaim:
    id: str
    seed: str
    text: str
    scenario: str  # file under data/
    quantity: str
    low: float
    high: float
    point: bool = False  # a single figure (``low`` = ``high``), judged with the point tolerance
    model_variant: Variant | None = None

    def judge(self, v: float) -> bool:
        return near(v, self.low) if self.point else in_range(v, self.low, self.high)


# The 64-GPU claims are about large hidden sizes: the same cluster with a small-hidden model
# (h = 4096), whole-model data parallel, ZeRO-2 so that it fits.
SMALL_HIDDEN_64 = Variant(
    "small hidden (llama3-8b, TP 1, PP 1, ZeRO-2)",
    (
        "workload.model=llama3-8b",
        "workload.parallel.tp=1",
        "workload.parallel.pp=1",
        "workload.parallel.zero=2",
    ),
)

CLAIMS = (
    ScaleClaim(
        "16-gpu-roce-92-95pct",
        "000",
        "At 16 GPUs a well-configured RoCE fabric reaches 92-95 % of InfiniBand's throughput",
        "16-gpu-llama3-8b.yaml",
        "roce_share",
        0.92,
        0.95,
        model_variant=Variant("FSDP (ZeRO-3) instead of ZeRO-2", ("workload.parallel.zero=3",)),
    ),
    ScaleClaim(
        "64-gpu-comm-15-25pct",
        "000",
        "At 64 GPUs communication is 15-25 % of step time for large-hidden transformers",
        "64-gpu-llama3-70b.yaml",
        "comm_fraction",
        0.15,
        0.25,
        model_variant=SMALL_HIDDEN_64,
    ),
    ScaleClaim(
        "64-gpu-ib-recovers-18-22pct",
        "000",
        "At 64 GPUs moving from Ethernet to InfiniBand recovers 18-22 % of throughput",
        "64-gpu-llama3-70b.yaml",
        "ib_gain",
        0.18,
        0.22,
        model_variant=SMALL_HIDDEN_64,
    ),
    ScaleClaim(
        "256-gpu-gap-30-40pct",
        "000",
        "At 256 GPUs the throughput gap widens to 30-40 % in favour of InfiniBand",
        "256-gpu-mixtral.yaml",
        "ib_gain",
        0.30,
        0.40,
        model_variant=Variant(
            "dense llama3-70b (TP 8, PP 4, no experts)",
            (
                "workload.model=llama3-70b",
                "workload.parallel.tp=8",
                "workload.parallel.pp=4",
                "workload.parallel.ep=1",
                "workload.seq_len=8192",
                "workload.global_batch=256",
            ),
        ),
    ),
    ScaleClaim(
        "256-gpu-3-vs-5-days",
        "000",
        "At 256 GPUs latency is the difference between a run that finishes in three "
        "days and one that takes five",
        "256-gpu-mixtral.yaml",
        "ib_gain",
        5 / 3 - 1,
        5 / 3 - 1,
        point=True,
    ),
)


def _check(cat: Catalog, claim: ScaleClaim, backend: NetworkBackend) -> ClaimResult:
    label, fn = QUANTITIES[claim.quantity]
    variants = [*COMMON_VARIANTS, *([claim.model_variant] if claim.model_variant else []), WORST]
    cases = []
    # the engine keeps each evaluation: claims on one scenario share their common variants
    for v, res in zip(variants, _evaluate(cat, claim.scenario, variants, backend), strict=True):
        cond = {"variant": v.label, "overrides": list(v.overrides), "roce_latency": v.roce_latency}
        if isinstance(res, str):
            cases.append(Case(cond, None, None, f"not evaluable: {res}"))
            continue
        value = fn(*res)
        roce = res[1]
        tp = roce.breakdown["tp_comm_s"] / roce.step_time_s
        note = (
            f"RoCE comm exposed {roce.comm_exposed_fraction:.1%} "
            f"(of it tensor-parallel, inside nodes: {tp:.1%})"
        )
        cases.append(Case(cond, value, claim.judge(value), note))
    values = [c.value for c in cases if c.value is not None]
    first = cases[0]
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    if values:
        summary = (
            f"{pct(first.value or 0)} under the claim's own conditions; "
            f"{pct(min(values))} to {pct(max(values))} over {len(values)} conditions, "
            f"holds in {sum(bool(c.holds) for c in cases)}"
        )
    else:  # e.g. a congestion backend that covers none of the conditions
        summary = f"{first.note}; so under every condition tried"
    claimed: dict[str, Any] = (
        {"value": claim.low} if claim.point else {"low": claim.low, "high": claim.high}
    )
    return ClaimResult(
        id=claim.id,
        claim=claim.text,
        source=source(claim.seed),
        conditions={
            "scenario": claim.scenario,
            "fabrics": [IB, ROCE],
            "roce_quality": "tuned",
            "design": "rail-optimized",
        },
        claimed={**claimed, "unit": label},
        computed={"value": first.value, "unit": label, "summary": summary},
        holds=first.holds,
        basis="model",
        cases=tuple(cases),
    )


def scale_claims(
    cat: Catalog,
    progress: Callable[[], None] | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> list[ClaimResult]:
    out = []
    for claim in CLAIMS:
        out.append(_check(cat, claim, backend))
        if progress:
            progress()
    return out
