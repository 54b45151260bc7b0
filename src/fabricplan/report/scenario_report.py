"""The report on a scenario: ``advise``'s answer, its evidence and its assumptions, one page.

:func:`build_scenario_report` runs the models once (``advise``, and each fabric's bill of
materials as ``advise`` priced it) into a :class:`ScenarioReport`; :func:`render_scenario_report`
lays it out. Every figure on the page comes from that record: nothing is re-evaluated here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fabricplan import __version__
from fabricplan.advise import Advice, advise
from fabricplan.advise.records import FabricAdvice
from fabricplan.catalog import Catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.cost import scenario_design
from fabricplan.report import fmt
from fabricplan.report.html import Column, Html, Section, bullets, join, page, table, tag
from fabricplan.report.topology_section import BomLine, bom_lines
from fabricplan.scenario import Scenario
from fabricplan.topology import FabricDesign


@dataclass(frozen=True)
class ScenarioReport:
    """What a scenario's report shows, computed once."""

    scenario: Scenario
    advice: Advice
    designs: tuple[FabricDesign, ...]  # in ``advice.fabrics`` order
    parts: tuple[BomLine, ...]  # each design's parts with their catalog prices
    scenario_text: str  # the scenario as given (YAML), shown whole
    seed: int
    version: str = __version__

    def fabric(self, name: str) -> FabricAdvice:
        return next(f for f in self.advice.fabrics if f.fabric == name)

    @property
    def best(self) -> str:
        return self.advice.recommendation.fabric

    @property
    def runner_up(self) -> str | None:
        """The cheapest other fabric: the one every margin on the page is measured against."""
        others = [f for f in self.advice.fabrics if f.fabric != self.best]
        if not others:
            return None
        return min(others, key=lambda f: f.cost_same_work_usd).fabric


def build_scenario_report(
    sc: Scenario,
    cat: Catalog,
    *,
    backend: NetworkBackend = DEFAULT_BACKEND,
    seed: int = 0,
    scenario_text: str | None = None,
    by_model: bool = False,
    tick: Callable[[str], None] | None = None,
) -> ScenarioReport:
    """Run ``advise`` (with the break-even sweep; ``by_model``, also every training model's, as
    ``advise`` does, ``tick`` called after each) and design each fabric's bill of materials.
    Raises what ``advise`` raises (WorkloadError, CostError) for a scenario it cannot price."""
    a = advise(sc, cat, backend=backend, seed=seed, by_model=by_model, tick=tick)
    designs = tuple(scenario_design(sc, cat, f.fabric) for f in a.fabrics)
    text = scenario_text if scenario_text is not None else _as_yaml(sc)
    return ScenarioReport(sc, a, designs, bom_lines(designs, cat), text, seed)


def scenario_report_html(
    sc: Scenario,
    cat: Catalog,
    *,
    backend: NetworkBackend = DEFAULT_BACKEND,
    seed: int = 0,
    scenario_text: str | None = None,
    by_model: bool = False,
) -> str:
    """The whole report as one self-contained HTML document."""
    r = build_scenario_report(
        sc, cat, backend=backend, seed=seed, scenario_text=scenario_text, by_model=by_model
    )
    return render_scenario_report(r)


def render_scenario_report(r: ScenarioReport, charts: Mapping[str, Html] | None = None) -> str:
    """The page. ``charts`` (from :func:`.scenario_sections.scenario_charts`) are drawn when
    not given; they depend on the figures only, never on the scenario's name or text."""
    from fabricplan.report import scenario_sections as ss
    from fabricplan.report import surface_section as sf
    from fabricplan.report import topology_section as ts

    charts = charts if charts is not None else ss.scenario_charts(r)
    sc, a = r.scenario, r.advice
    sections = [
        Section("recommendation", "Recommendation", _recommendation(r)),
        Section("fabrics", "Per fabric", _fabric_table(r)),
        Section("step-time", ss.step_title(a), ss.step_section(r, charts)),
        Section("cost", ss.cost_title(a), ss.cost_section(r, charts)),
        Section("sensitivity", "What moves the answer", ss.sensitivity_section(r, charts)),
        Section("uncertainty", "Uncertainty (Monte Carlo)", ss.uncertainty_section(r, charts)),
        Section("size", "Cluster size and break-even", ss.size_section(r, charts)),
        Section(
            "surface",
            "Break-even by size, maturity and model",
            sf.surface_section(r, charts),
        ),
        Section("topology", "Topology: bill of materials", ts.bom_section(r, charts)),
        Section("questions", "Questions for the provider", _questions(a)),
        Section("assumptions", "Assumptions and sources", ts.assumptions_section(r)),
        Section("scenario", "The scenario", _scenario(r)),
    ]
    c = sc.cluster
    workload = sc.workload.kind if sc.workload is not None else "no workload"
    subtitle = join(
        [
            f"{c.gpus:,} x {c.gpu} GPUs, {c.topology.design}, {workload}; ",
            f"fabrics compared: {', '.join(c.fabrics)}. ",
            f"fabricplan {r.version}, congestion backend {a.congestion_backend}, "
            f"Monte Carlo seed {r.seed}.",
        ]
    )
    footer = join(
        [
            f"fabricplan {r.version}. Every price, staffing figure, support rate, stabilisation "
            "time and risk rate is a labelled assumption unless its source is cited "
            "(see Assumptions and sources). Models, not measurements: see what is not modelled.",
        ]
    )
    return page(f"Fabric report: {sc.name}", subtitle, sections, footer)


def _recommendation(r: ScenarioReport) -> Html:
    a = r.advice
    rec, mc = a.recommendation, a.uncertainty
    at = f" at {mc.gpus:,} GPUs" if mc.gpus else ""
    head = tag(
        "p",
        [
            tag("strong", f"Recommendation: {rec.fabric}"),
            f" on {rec.topology}. Confidence {rec.confidence}: the cheapest for the same "
            f"work in {fmt.share(rec.p_cheapest)} of {mc.samples:,} Monte Carlo samples"
            f"{at}.",
        ],
        cls="verdict",
    )
    parts = [head]
    undecided = rec.cost_indeterminate
    if undecided:
        lo, hi = undecided.margin_p10_p90_usd
        parts.append(
            tag(
                "p",
                f"Cost-indeterminate: the margin's P10 to P90 runs from {fmt.money(lo)} to "
                f"{fmt.money(hi)}; quotes for {' and '.join(undecided.settle_with)} would "
                "settle it.",
                cls="verdict warn",
            )
        )
    parts += [tag("h3", "Reasons"), bullets(rec.reasons)]
    return join(parts)


# Rows of the per-fabric table: (label, value of one fabric's advice as text).
Row = tuple[str, Callable[[FabricAdvice], str]]


def _rows(kind: str, years: float | None) -> list[Row]:
    life = f"over {years:g} years" if years else "over the lifecycle"
    if kind == "rent-serve":
        return [
            ("inter-token latency", lambda f: fmt.millis(f.itl_s)),
            ("time to first token", lambda f: fmt.millis(f.ttft_s)),
            (
                "output tokens/s (all replicas)",
                lambda f: fmt.number(f.output_tokens_per_s_total),
            ),
            ("replicas", lambda f: fmt.number(f.replicas)),
            ("GPU-hour price", lambda f: fmt.money(f.gpu_hour_cost_usd)),
            ("cluster per hour", lambda f: fmt.money(f.cluster_usd_per_hour)),
            ("run-loss risk per hour", lambda f: fmt.money(f.risk_usd_per_hour)),
            (
                "per million output tokens",
                lambda f: fmt.money(f.cost_per_million_output_tokens_usd),
            ),
        ]
    rows: list[Row] = [
        ("step time", lambda f: fmt.seconds(f.step_time_s)),
        ("tokens/s", lambda f: fmt.number(f.tokens_per_s)),
        ("exposed communication", lambda f: fmt.share(f.comm_exposed_fraction)),
        ("time-to-train, ideal", lambda f: fmt.days(f.time_to_train_days)),
        ("time-to-train, expected", lambda f: fmt.days(f.expected_time_to_train_days)),
        ("goodput (checkpoints, interruptions)", lambda f: fmt.share(f.goodput)),
        ("GPU-hours, ideal", lambda f: fmt.number(f.gpu_hours, unit="GPU-h")),
        ("GPU-hours, expected", lambda f: fmt.number(f.expected_gpu_hours, unit="GPU-h")),
    ]
    if kind == "rent-train":
        return [
            *rows,
            ("GPU-hour price", lambda f: fmt.money(f.gpu_hour_cost_usd)),
            ("run-loss risk per run", lambda f: fmt.money(f.risk_per_run_usd)),
            ("cost per run", lambda f: fmt.money(f.cost_per_run_usd)),
        ]
    return [
        *rows,
        ("capex", lambda f: fmt.money(f.capex_usd)),
        ("of which network", lambda f: fmt.money(f.capex_network_usd)),
        ("opex per year (power, staff, support)", lambda f: fmt.money(f.opex_usd_per_year)),
        (f"TCO {life}", lambda f: fmt.money(f.tco_usd)),
        ("cost per run (owned GPU-hour cost)", lambda f: fmt.money(f.cost_per_run_usd)),
        (f"run-loss risk {life}", lambda f: fmt.money(f.risk_usd)),
        ("stabilisation (degraded GPU time)", lambda f: fmt.money(f.stabilisation_usd)),
        ("cost for the same work (the score)", lambda f: fmt.money(f.cost_same_work_usd)),
    ]


def _fabric_table(r: ScenarioReport) -> Html:
    a = r.advice
    names = [f.fabric for f in a.fabrics]
    heads = [f"{n} (recommended)" if n == r.best else n for n in names]
    cols = [Column(""), *(Column(h, numeric=True) for h in heads)]
    rows = [
        [label, *(show(f) for f in a.fabrics)]
        for label, show in _rows(a.costing.kind, r.scenario.costs.lifecycle_years)
    ]
    out = [table(cols, rows, caption=f"Scored on {a.costing.meaning}")]
    if a.costing.kind != "own":
        out.append(
            tag(
                "p",
                "A rented cluster has no capex, opex or lifecycle TCO: it is judged by what the "
                f"{'run' if a.costing.kind == 'rent-train' else 'serving hour'} costs at each "
                "fabric tier's GPU-hour price.",
                cls="note",
            )
        )
    out.append(tag("p", f"{fmt.NONE}: does not apply to this scenario.", cls="note"))
    return join(out)


def _questions(a: Advice) -> Html:
    cols = [Column("question"), Column("what the scenario plans"), Column("must answer")]
    rows = [
        [q.question, q.planned or "ask", "yes" if q.provider_must_answer else "no"]
        for q in a.questions
    ]
    return table(cols, rows)


def _scenario(r: ScenarioReport) -> Html:
    return join(
        [
            tag(
                "p",
                f"Made by fabricplan {r.version} with the {r.advice.congestion_backend} "
                f"congestion backend and Monte Carlo seed {r.seed}. The scenario as given:",
            ),
            tag("pre", r.scenario_text),
        ]
    )


def _as_yaml(sc: Scenario) -> str:
    import yaml

    return str(yaml.safe_dump(sc.model_dump(mode="json", exclude_none=True), sort_keys=False))
