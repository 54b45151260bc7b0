"""Reasons for a recommendation, each tied to a number the layers below computed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fabricplan.advise.rent import interruption_reason
from fabricplan.advise.scoring import fabric_parts
from fabricplan.cost import dollars, usd
from fabricplan.scenario import Scenario

if TYPE_CHECKING:
    from fabricplan.advise.records import FabricAdvice, SensitivityRow

# Margins below this share are called close: the held-back training runs put the step-time
# model's own error at several percent, more than such a margin.
CLOSE_CALL_SHARE = 0.03


# What each exposed communication part is; whether it crosses the fabric is the scenario's
# (scoring.fabric_parts), so the reasons and the score agree.
SYNC_PARTS = {
    "tp_comm_s": "tensor-parallel collectives",
    "dp_comm_s": "gradient reduction that the backward pass does not hide",
    "ep_comm_s": "expert all-to-all, the most congestion-prone pattern",
    "pp_comm_s": "pipeline sends between stages",
    "cp_comm_s": "context-parallel K/V exchange not hidden by attention",
}
# Below this share of the inter-token latency the fabric is called marginal for serving.
SERVING_MARGINAL_SHARE = 0.01


def sync_pattern(f: FabricAdvice, on_fabric: tuple[str, ...]) -> str | None:
    """The training step's synchronisation pattern: its largest exposed communication part,
    and whether it crosses the fabric (``on_fabric``: the parts that do)."""
    parts = {k: v for k, v in f.breakdown.items() if k in SYNC_PARTS and v > 0}
    if not parts:
        return None
    top = max(parts, key=parts.__getitem__)
    share = parts[top] / f.step_time_s
    if top in on_fabric:
        where = "over the fabric, which is on the critical path"
    else:
        where = "on NVLink inside each node, so the fabric is barely on it"
    return (
        f"synchronisation: most exposed communication is {SYNC_PARTS[top]} ({share:.1%} of the "
        f"step), {where}"
    )


def serving_sensitivity(b: FabricAdvice, o: FabricAdvice) -> str:
    """Serving's latency and how much of it the fabric carries."""
    share = b.network_fraction
    if share < SERVING_MARGINAL_SHARE:
        verdict = "so the fabric barely matters here"
    else:
        verdict = "so the fabric is on every token's path"
    return (
        f"serving latency: time to first token {b.ttft_s * 1e3:.0f} vs "
        f"{o.ttft_s * 1e3:.0f} ms, inter-token {b.itl_s * 1e3:.1f} vs "
        f"{o.itl_s * 1e3:.1f} ms; the fabric carries {share:.1%} of the inter-token "
        f"latency on {b.fabric}, {verdict}"
    )


def _expected_days(b: FabricAdvice, o: FabricAdvice) -> str:
    """The same run with its checkpoints and interruptions, when both fabrics have one."""
    eb, eo = b.expected_time_to_train_days, o.expected_time_to_train_days
    if eb is None or eo is None:
        return ""
    return (
        f", {eb:.1f} vs {eo:.1f} expected with checkpoints and interruptions (goodput "
        f"{b.goodput:.1%} vs {o.goodput:.1%})"
    )


def serving_throughput(b: FabricAdvice, o: FabricAdvice) -> str:
    """Output throughput in total and per replica, with the streams behind it."""
    rates = b.rates
    assert rates is not None
    return (
        f"serving output throughput {b.tokens_per_s:,.0f} tokens/s in total on {b.fabric} "
        f"vs {o.tokens_per_s:,.0f} on {o.fabric}: {rates.replicas:,} replicas x "
        f"{rates.output_tokens_per_s_per_replica:,.0f} tokens/s per replica, "
        f"{rates.streams_per_replica:,} concurrent streams per replica "
        f"({rates.streams_total:,} in total)"
    )


def reasons(
    sc: Scenario,
    fabrics: list[FabricAdvice],
    best: int,
    other: int,
    sens: list[SensitivityRow],
    kind: str,
    prices: tuple[str, ...] = (),
) -> list[str]:
    """``prices``: the reasons that name each rented tier's price (``rent.tier_reasons``),
    given just before the cost comparison they explain."""
    b = fabrics[best]
    out: list[str] = []
    if other == best:
        return [f"{b.fabric} is the only fabric in the scenario"]
    o = fabrics[other]
    bn, on = b.fabric, o.fabric
    gap = o.step_time_s / b.step_time_s - 1
    if b.time_to_train_days is not None:
        out.append(
            f"step time {b.step_time_s:.3f} s on {bn} vs {o.step_time_s:.3f} s on {on} "
            f"({gap:+.1%} for {on}); exposed communication {b.comm_exposed_fraction:.1%} vs "
            f"{o.comm_exposed_fraction:.1%}; the run takes {b.time_to_train_days:.1f} vs "
            f"{o.time_to_train_days:.1f} days ideal{_expected_days(b, o)}"
        )
        pattern = sync_pattern(b, fabric_parts(sc))
        if pattern:
            out.append(pattern)
    else:
        out.append(serving_throughput(b, o))
        if b.itl_s is not None and b.network_fraction is not None:
            out.append(serving_sensitivity(b, o))
    if kind == "own":
        prem = max(b.capex_network_usd, o.capex_network_usd) - min(
            b.capex_network_usd, o.capex_network_usd
        )
        dear = bn if b.capex_network_usd > o.capex_network_usd else on
        cheap_total = min(b.capex_usd, o.capex_usd)
        out.append(
            f"network capex {usd(b.capex_network_usd)} ({bn}) vs "
            f"{usd(o.capex_network_usd)} ({on}): {dear} costs {usd(prem)} more, "
            f"{prem / cheap_total:.1%} of the cluster's capex"
        )
        maturity = sc.organization.network_maturity
        out.append(
            f"at {maturity} network maturity: {b.staff_fte:.2g} vs {o.staff_fte:.2g} "
            f"network engineers, {b.stabilisation_weeks:g} vs "
            f"{o.stabilisation_weeks:g} weeks to stable collectives "
            f"({usd(b.stabilisation_usd)} vs {usd(o.stabilisation_usd)} of "
            f"degraded GPU time)"
        )
    out.append(interruption_reason(b, o, kind))
    for f in (b, o):
        if f.misses_time_to_production:
            out.append(
                f"{f.fabric} needs {f.stabilisation_weeks:g} weeks to stabilise, "
                f"longer than the {sc.organization.time_to_production_weeks:g}-week "
                "time-to-production budget"
            )
    out.extend(prices)
    margin = o.cost_same_work_usd / b.cost_same_work_usd - 1
    what = {"rent-train": "run", "rent-serve": "million output tokens"}.get(
        kind, "lifecycle, for the same work"
    )
    close = ", a close call" if abs(margin) < CLOSE_CALL_SHARE else ""
    # a short rented run or a million output tokens costs dollars, not thousands: keep the cents
    money = usd if kind == "own" else dollars
    line = (
        f"cost per {what}: {money(b.cost_same_work_usd)} on {bn} vs "
        f"{money(o.cost_same_work_usd)} on {on} ({margin:+.1%} for {on}{close})"
    )
    if sens:
        top = sens[0]
        flip = "would flip the answer" if top.flips else "does not flip it"
        at = sc.cluster.gpus if top.gpus is None else top.gpus
        where = f" at the growth target ({at:,} GPUs)" if at != sc.cluster.gpus else ""
        line += (
            f"; the top driver{where} is {top.label}: across {top.low:g}-{top.high:g}x "
            f"the margin moves by {money(top.swing_usd)} and {flip}"
        )
    tips = [d for d in sens if d.tips_at is not None]
    if close and tips:
        near = min(tips, key=lambda d: abs(np.log(d.tips_at)))
        line += (
            f"; what would tip it: {near.label} at {near.tips_at:.2f}x the "
            "assumption, the others as assumed"
        )
    out.append(line)
    return out
