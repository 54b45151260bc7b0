"""The scenario report's evidence: step time, cost by part, the tornado, the Monte Carlo and
cluster size, each a chart with the table of its figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fabricplan.advise import Advice
from fabricplan.cost import FabricCost
from fabricplan.report import charts, fmt
from fabricplan.report.html import Column, Html, figure, join, table, tag
from fabricplan.report.surface_section import surface_charts

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fabricplan.advise.break_even import SizeRow
    from fabricplan.advise.records import SensitivityRow
    from fabricplan.report.scenario_report import ScenarioReport

# Parts of a training step, which add up to it, and of a served token's latency (ITL).
TRAINING_STEP = (
    ("compute_s", "compute"),
    ("overlap_slowdown_s", "overlap slowdown"),
    ("tp_comm_s", "tensor-parallel comm."),
    ("pp_comm_s", "pipeline comm."),
    ("ep_comm_s", "expert-parallel comm."),
    ("cp_comm_s", "context-parallel comm."),
    ("dp_comm_s", "data-parallel comm. (exposed)"),
    ("bubble_s", "pipeline bubble"),
    ("optimizer_s", "optimizer"),
)
SERVING_TOKEN = (
    ("decode_compute_s", "decode compute"),
    ("tp_comm_s", "tensor-parallel comm."),
    ("pp_comm_s", "pipeline comm."),
)
# Tornado rows drawn (the table lists every driver).
TORNADO_ROWS = 10


def _serving(a: Advice) -> bool:
    return any("decode_compute_s" in f.breakdown for f in a.fabrics)


def step_title(a: Advice) -> str:
    return "Time per output token by part" if _serving(a) else "Step time by part"


def _step_parts(a: Advice) -> list[tuple[str, list[float]]]:
    keys = SERVING_TOKEN if _serving(a) else TRAINING_STEP
    out = []
    for key, label in keys:
        values = [float(f.breakdown.get(key) or 0.0) for f in a.fabrics]
        if any(values):
            out.append((label, values))
    return out


def _cost_parts(c: FabricCost, kind: str) -> list[tuple[str, float]]:
    """What a fabric's score is made of: owned, the lifecycle (they add up to its TCO); rented,
    the run or the cluster's hour."""
    if kind == "own":
        y = c.lifecycle_years or 0.0
        return [
            ("GPU servers", c.capex_servers_usd),
            ("network gear", c.capex_network_usd),
            ("power", y * c.power_usd_per_year),
            ("network staff", y * c.staff_usd_per_year),
            ("network support", y * c.support_usd_per_year),
            ("stabilisation", c.stabilisation_usd),
            ("run-loss risk", y * c.risk_usd_per_year),
        ]
    if kind == "rent-train":
        return [
            ("GPU-hours at the tier price", (c.run_gpu_hours or 0.0) * c.gpu_hour_cost_usd),
            ("run-loss risk", c.risk_per_run_usd or 0.0),
        ]
    return [
        ("GPUs at the tier price", c.gpus * c.gpu_hour_cost_usd),
        ("run-loss risk", c.risk_usd_per_hour),
    ]


def cost_title(a: Advice) -> str:
    return {
        "own": "Lifecycle cost by part",
        "rent-train": "Cost of the run by part",
        "rent-serve": "Cost of the cluster's hour by part",
    }[a.costing.kind]


def scenario_charts(r: ScenarioReport) -> dict[str, Html]:
    """Every chart of the page, by key; drawn from the figures only."""
    from fabricplan.report.topology_section import bom_chart

    a = r.advice
    names = [f.fabric for f in a.fabrics]
    out = {
        "step": charts.stacked_bars(
            "step",
            charts.Stack(names, _step_parts(a), "seconds", fmt.seconds),
            step_title(a),
        ),
        "cost": charts.stacked_bars(
            "cost",
            charts.Stack(
                names,
                _transpose([_cost_parts(c, a.costing.kind) for c in a.costs]),
                "US dollars",
                fmt.money,
                money=True,
            ),
            cost_title(a),
        ),
        "bom": bom_chart(r),
    }
    rows = _tornado_rows(a)
    if rows:
        out["tornado"] = charts.tornado(
            "tornado", rows, _base_margin(r), "margin of the runner-up (US dollars)", "tornado"
        )
    margin = _margin(r)
    if margin is not None:
        lo, hi = np.percentile(margin, [10, 90])
        out["margin"] = charts.histogram(
            "margin",
            margin,
            [("P10", float(lo)), ("P90", float(hi)), ("0", 0.0)],
            f"cost of {r.runner_up} minus cost of {r.best} (US dollars)",
            "Monte Carlo distribution of the cost margin",
        )
    size = _size_chart(a, r.scenario.cluster.gpus)
    if size is not None:
        out["size"] = size
    out.update(surface_charts(r))
    return out


def _transpose(per_fabric: list[list[tuple[str, float]]]) -> list[tuple[str, list[float]]]:
    if not per_fabric:
        return []
    return [(name, [p[j][1] for p in per_fabric]) for j, (name, _) in enumerate(per_fabric[0])]


def step_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    parts = _step_parts(a)
    names = [f.fabric for f in a.fabrics]
    cols = [Column("part"), *(Column(n, numeric=True) for n in names)]
    rows = [[label, *(fmt.seconds(v, 4) for v in values)] for label, values in parts]
    total = "time per output token" if _serving(a) else "step time"
    rows.append([total, *(fmt.seconds(f.step_time_s, 4) for f in a.fabrics)])
    what = (
        "Decode compute and the tensor- and pipeline-parallel communication each output token "
        "waits for."
        if _serving(a)
        else "Each part of a training step as the workload model prices it: communication "
        "counts only where it is exposed (not hidden behind compute)."
    )
    return join([figure(ch["step"], what), table(cols, rows)])


def cost_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    names = [f.fabric for f in a.fabrics]
    parts = _transpose([_cost_parts(c, a.costing.kind) for c in a.costs])
    cols = [Column("part"), *(Column(n, numeric=True) for n in names)]
    rows = [[label, *(fmt.money(v) for v in values)] for label, values in parts]
    rows.append(["total", *(fmt.money(sum(v[i] for _, v in parts)) for i in range(len(names)))])
    caption = {
        "own": f"Capex, then {r.scenario.costs.lifecycle_years:g} years of power, staff, "
        "support and run-loss risk, and the GPU time lost while the fabric is stabilised: "
        "together the TCO. Prices and rates are labelled assumptions.",
        "rent-train": "The run's GPU-hours at each fabric tier's price, and its expected "
        "run-loss risk: together the cost per run. Tier prices are labelled assumptions.",
        "rent-serve": "An hour of every GPU at each fabric tier's price, and the run-loss risk "
        "of that hour. Tier prices are labelled assumptions.",
    }[a.costing.kind]
    return join([figure(ch["cost"], caption), table(cols, rows)])


def _tornado_rows(a: Advice) -> list[charts.TornadoRow]:
    return [
        charts.TornadoRow(d.label, d.margin_at_low_usd, d.margin_at_high_usd, _tips(d))
        for d in a.sensitivity[:TORNADO_ROWS]
    ]


def _tips(d: SensitivityRow) -> str:
    """Where a driver's margin reaches zero: a multiplier, or a position in its range."""
    at = d.tips_at
    if at is None:
        return ""
    if d.range.startswith("x"):
        return fmt.multiplier(at)
    return f"position {at:.2f} (0 low, 1 high)"


def _base_margin(r: ScenarioReport) -> float:
    """The runner-up's margin with every driver nominal, at the size the tornado describes."""
    a, other = r.advice, r.runner_up
    if other is None:
        return 0.0
    growth = a.recommendation.growth
    if growth and growth.cost_same_work_usd and a.uncertainty.gpus == growth.target_gpus:
        costs = growth.cost_same_work_usd
        return float(costs[other] - costs[r.best])
    return float(r.fabric(other).cost_same_work_usd - r.fabric(r.best).cost_same_work_usd)


def sensitivity_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    if not a.sensitivity:
        return tag("p", "One fabric only: there is no margin to move.", cls="note")
    gpus = a.sensitivity[0].gpus
    cols = [
        Column("driver"),
        Column("range"),
        Column("margin at low", numeric=True),
        Column("margin at high", numeric=True),
        Column("swing", numeric=True),
        Column("flips"),
        Column("tips at", numeric=True),
    ]
    rows = [
        [
            d.label,
            d.range,
            fmt.money(d.margin_at_low_usd),
            fmt.money(d.margin_at_high_usd),
            fmt.money(d.swing_usd),
            "yes" if d.flips else "no",
            _tips(d) or "not within reach",
        ]
        for d in a.sensitivity
    ]
    caption = (
        f"The margin of {r.runner_up} over {r.best} (positive: {r.best} is cheaper) with one "
        f"driver at each end of its range and the others nominal, at {gpus:,} GPUs; the "
        "tipping point is the driver's value at which the margin reaches zero (prices as "
        "multipliers of the assumed price; performance drivers as positions in their range)."
    )
    return join([figure(ch["tornado"], caption), table(cols, rows)])


def _margin(r: ScenarioReport) -> np.ndarray | None:
    s, other = r.advice.cost_samples, r.runner_up
    return None if s is None or other is None else s.margin(other, r.best)


def uncertainty_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    mc = a.uncertainty
    cols = [
        Column("fabric"),
        Column("cheapest in", numeric=True),
        Column("cost P10", numeric=True),
        Column("cost P90", numeric=True),
    ]
    rows = [
        [name, fmt.share(p), *(fmt.money(v) for v in mc.cost_p10_p90_usd[name])]
        for name, p in mc.p_cheapest.items()
    ]
    out = []
    margin = _margin(r)
    if margin is not None:
        lo, hi = np.percentile(margin, [10, 90])
        out.append(
            figure(
                ch["margin"],
                f"What {r.runner_up} costs more than {r.best} for the same work, in each of "
                f"{mc.samples:,} samples of prices, rates, latency, goodput and RoCE "
                f"configuration at {mc.gpus:,} GPUs (seed {mc.seed}): P10 "
                f"{fmt.money(float(lo))}, P90 {fmt.money(float(hi))}; below zero "
                f"{r.runner_up} is the cheaper.",
            )
        )
    out.append(table(cols, rows, caption="Per fabric, over the samples"))
    return join(out)


def _size_rows(a: Advice) -> tuple[list[SizeRow], str, str] | None:
    be = a.break_even_gpus
    rows = be.sizes or []
    if not rows or be.ib is None or be.roce is None:
        return None
    return rows, be.ib, be.roce


def _size_chart(a: Advice, gpus: int) -> Html | None:
    got = _size_rows(a)
    if got is None:
        return None
    rows, ib, roce = got
    x = [r.gpus for r in rows]
    cost = [
        charts.Series(ib, x, [r.ib_usd for r in rows]),
        charts.Series(roce, x, [r.roce_usd for r in rows]),
    ]
    gap = [charts.Series(f"{ib} minus {roce}", x, [r.ib_usd - r.roce_usd for r in rows])]
    step = [
        charts.Series(ib, x, [r.ib_step_s for r in rows]),
        charts.Series(roce, x, [r.roce_step_s for r in rows]),
    ]
    marks = [("this scenario", float(gpus))]
    be = a.break_even_gpus.gpus
    if be:
        marks.append(("break-even", float(be)))
    return charts.lines(
        "size",
        [
            ("cost for the same work", cost, True),
            (f"{ib} minus {roce}", gap, True),
            ("step time (s)", step, False),
        ],
        "GPUs",
        marks,
        "cost and step time against cluster size",
    )


def size_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    a = r.advice
    be = a.break_even_gpus
    got = _size_rows(a)
    if got is None:
        return tag("p", f"Not evaluated: {be.note}.", cls="note")
    rows, ib, roce = got
    found = be.gpus
    maturity = r.scenario.organization.network_maturity
    head = (
        f"Break-even at {maturity} network maturity: {fmt.gpus(found)}"
        if found
        else f"No break-even at {maturity} network maturity"
    )
    by_maturity = be.by_maturity or {}
    by = ", ".join(f"{m}: {fmt.gpus(g) if g else 'none'}" for m, g in by_maturity.items())
    cols = [
        Column("GPUs", numeric=True),
        Column(f"{ib}", numeric=True),
        Column(f"{roce}", numeric=True),
        Column(f"{ib} minus {roce}", numeric=True),
        Column(f"{ib} step", numeric=True),
        Column(f"{roce} step", numeric=True),
        Column(f"{ib} no dearer"),
    ]
    body = [
        [
            f"{x.gpus:,}",
            fmt.money(x.ib_usd),
            fmt.money(x.roce_usd),
            fmt.money(x.ib_usd - x.roce_usd),
            fmt.seconds(x.ib_step_s),
            fmt.seconds(x.roce_step_s),
            "yes" if x.ib_cheaper else "no",
        ]
        for x in rows
    ]
    caption = (
        f"The scenario at node-count doublings, same model, plan and organisation: cost for the "
        f"same work and step time on {ib} and {roce}. The break-even is the smallest size from "
        f"which InfiniBand costs no more at every larger size evaluated ({be.note})."
    )
    return join(
        [
            tag("p", f"{head}. By maturity: {by}.", cls="verdict"),
            figure(ch["size"], caption),
            table(cols, body, caption="Cost for the same work and step time by size"),
        ]
    )
