"""What a rented cluster's advice rests on: the figure it is judged by, the tier prices that
separate the fabrics, and the run-loss risk over the run rather than over a lifecycle.

A rental has no capex, no yearly opex and no lifecycle: the renter pays for the GPU-hours a run
uses (training) or for the hours it serves (serving), at the provider's price for the fabric's
tier. So the advice shows the run's cost, or the cost per million output tokens, and names the
tier premiums, which are labelled assumptions (``costs.toml`` [rent]).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from fabricplan.cost import FabricCost, dollars, usd

if TYPE_CHECKING:
    from fabricplan.advise.records import FabricAdvice

# The figure each kind of score is, as each fabric's JSON key and as a phrase.
HEADLINES = {
    "own": ("cost_same_work_usd", "lifecycle TCO, scaled to the same work"),
    "rent-train": ("cost_per_run_usd", "the run: GPU-hours at the tier price plus expected loss"),
    "rent-serve": (
        "cost_per_million_output_tokens_usd",
        "an hour of the rented cluster (tier price plus expected loss) per million output tokens",
    ),
}
RENT_LIFECYCLE_NOTE = (
    "rented: capex, opex per year, TCO and lifecycle risk are null; a rental pays for the "
    "GPU-hours it uses, so costs.lifecycle_years is not used"
)
# The fabric figures a rental does not have (JSON null in rent mode).
OWNERSHIP_KEYS = (
    "capex_usd",
    "capex_network_usd",
    "opex_usd_per_year",
    "tco_usd",
    "risk_usd",
    "staff_fte",
)


@dataclass(frozen=True)
class Costing:
    kind: str  # own | rent-train | rent-serve (scoring.Parts.kind)
    headline: str  # each fabric's key for the figure the fabrics are ranked on
    meaning: str
    lifecycle: str | None  # why the lifecycle figures are null, when they are

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def costing(kind: str) -> Costing:
    key, meaning = HEADLINES[kind]
    return Costing(kind, key, meaning, None if kind == "own" else RENT_LIFECYCLE_NOTE)


def tier_reasons(costs: list[FabricCost]) -> list[str]:
    """One reason per rented fabric whose tier is not priced at the scenario's price: the tier,
    what it adds to (or takes off) the run or the hour, and the basis of the premium."""
    out = []
    for c in costs:
        t = c.rent
        if t is None or t.premium_share == 0:
            continue
        # GPU-hours the premium applies to: the run's (training), or an hour of every GPU
        if c.run_gpu_hours is not None:
            hours, where = c.run_gpu_hours, f"on its run of {c.run_gpu_hours:,.0f} GPU-hours"
        else:
            hours, where = float(c.gpus), f"per hour for the {c.gpus:,} GPUs"
        delta = hours * t.scenario_price_usd * t.premium_share
        sign = "+" if delta >= 0 else "-"
        out.append(
            f"{t.describe()} for {c.fabric}: {sign}{dollars(abs(delta))} {where} ({t.basis})"
        )
    return out


def interruption_reason(b: FabricAdvice, o: FabricAdvice, kind: str) -> str:
    """Fabric-caused interruptions: over the lifecycle (owned), the run (rented training) or
    per hour of serving (rented serving)."""
    head = (
        f"expected fabric-caused interruptions: {b.risk_events_per_year:.1f} vs "
        f"{o.risk_events_per_year:.1f} per year"
    )
    if kind == "own":
        return f"{head}, {usd(b.risk_usd)} vs {usd(o.risk_usd)} over the lifecycle"
    if kind == "rent-train":
        return (
            f"{head}; over the run ({b.time_to_train_days:.2f} vs "
            f"{o.time_to_train_days:.2f} days) their lost GPU time costs "
            f"{dollars(b.risk_per_run_usd)} vs {dollars(o.risk_per_run_usd)}"
        )
    return (
        f"{head}; their lost GPU time adds ${b.risk_usd_per_hour:,.2f} vs "
        f"${o.risk_usd_per_hour:,.2f} an hour to the rented cluster's "
        f"${b.cluster_usd_per_hour:,.2f} vs ${o.cluster_usd_per_hour:,.2f}"
    )
