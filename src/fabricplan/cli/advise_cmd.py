"""``fabricplan advise``: compare the scenario's fabrics end to end and recommend one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricplan.cli import output
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from, backend_note
from fabricplan.cli.output import emit_json, fail, print_table
from fabricplan.cli.scenario_cmd import (
    FILE_ARG,
    JSON_OPT,
    SET_OPT,
    load_or_fail,
    warn_on_stderr,
)
from fabricplan.cli.time_to_train import time_to_train_table
from fabricplan.cli.validated_range import validation_lines
from fabricplan.cost import CostError, dollars, usd
from fabricplan.workload import WorkloadError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricplan.advise import Advice
    from fabricplan.advise.by_model import ModelBreakEven
    from fabricplan.advise.records import FabricAdvice
    from fabricplan.advise.reference_plan import ReferencePlan


def advise_cmd(
    file: Path = FILE_ARG,
    set_: list[str] | None = SET_OPT,
    break_even: bool = typer.Option(
        True, "--break-even/--no-break-even", help="Re-evaluate at other sizes for break-even."
    ),
    by_model: bool = typer.Option(
        False,
        "--break-even-models",
        help="Also the break-even of every training model in the catalog, each with its "
        "published training layout where it has one, else its fastest fitting plan (a few "
        "seconds).",
    ),
    seed: int = typer.Option(0, "--seed", callback=within(0), help="Monte Carlo seed."),
    congestion: str | None = CONGESTION_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Recommend a fabric: performance, cost (owned: over the lifecycle; rented: the run, or
    per million output tokens for serving), risk, sensitivity and the questions to ask a
    provider. Every price is a labelled assumption."""
    from fabricplan.advise import advise

    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(file, set_, as_json, cat)
    warn_on_stderr(sc, cat, as_json)
    try:
        if by_model and not as_json:
            from rich.progress import Progress

            with Progress(console=output.err_console, transient=True) as bar:
                task = bar.add_task("break-even per model", total=len(cat.ids("model")))
                a = advise(
                    sc,
                    cat,
                    backend=backend,
                    seed=seed,
                    break_even=break_even,
                    by_model=True,
                    tick=lambda m: bar.advance(task),
                )
        else:
            a = advise(
                sc, cat, backend=backend, seed=seed, break_even=break_even, by_model=by_model
            )
    except (WorkloadError, CostError) as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json(a.to_dict())
    else:
        _show(a)
        note = backend_note(backend)
        if note:
            output.console.print(note, highlight=False)


def _show(a: Advice) -> None:
    """The advice as tables and lines for a person."""
    from rich.table import Table

    console = output.console
    r = a.recommendation
    n = a.uncertainty.samples
    g = r.growth
    at = (
        f" at the growth target, {g.target_gpus:,} GPUs"
        if g and a.uncertainty.gpus == g.target_gpus
        else ""
    )
    console.print(
        f"[bold]Recommendation: {r.fabric}[/] on {r.topology} "
        f"(confidence {r.confidence}: cheapest in {r.p_cheapest:.0%} of "
        f"{n:,} Monte Carlo samples{at})",
        highlight=False,
    )
    for line in r.reasons:
        console.print(f"  • {line}", highlight=False)
    print_table(_fabric_table(a))
    for line in validation_lines([f.result for f in a.fabrics]):
        console.print(line, highlight=False)
    if a.costing.lifecycle:
        console.print(f"[dim]{a.costing.lifecycle}[/]", highlight=False)
    training = [f.result for f in a.fabrics if f.result.training is not None]
    if training:
        print_table(time_to_train_table(training))
    s = Table(
        title=f"What moves the answer (margin of the runner-up over the recommendation{at})",
        title_justify="left",
        title_style="bold",
    )
    for col in ("driver", "range", "margin at low", "margin at high", "flips"):
        text = col in ("driver", "range")  # words wrap; figures never do
        s.add_column(
            col,
            justify="left" if col in ("driver", "flips") else "right",
            no_wrap=not text,
            min_width=DRIVER_MIN_WIDTH if col == "driver" else None,
        )
    for d in a.sensitivity[:5]:
        s.add_row(
            d.label,
            d.range,
            dollars(d.margin_at_low_usd),
            dollars(d.margin_at_high_usd),
            "yes" if d.flips else "no",
        )
    if a.sensitivity:
        print_table(s)
    be = a.break_even_gpus
    size = f"{_gpus(be.gpus)} GPUs" if be.gpus else "none"
    console.print(f"break-even: {size} ({be.note})", highlight=False)
    if be.by_maturity:
        per = ", ".join(f"{m} {_gpus(gpus)}" for m, gpus in be.by_maturity.items())
        console.print(f"break-even by network maturity: {per}", highlight=False)
    if be.by_model:
        table, lines = _by_model_table(be.by_model)
        print_table(table)
        for line in lines:
            console.print(line)
    for f in a.fabrics:
        console.print(
            f"[dim]{f.fabric}, not modelled: {'; '.join(f.not_modelled)}[/]", highlight=False
        )
    console.print("[bold]Ask the provider:[/]")
    for q in a.questions:
        planned = f" [dim](planned: {q.planned})[/]" if q.planned else ""
        console.print(f"  ? {q.question}{planned}", highlight=False)
    console.print(
        "[dim]prices, staffing, stabilisation and risk rates are labelled assumptions "
        "(catalog economics/costs.toml)[/]"
    )


# Per fabric, by what the score is: owned (lifecycle), rented training (the run), rented
# serving (the hour and the million output tokens). (heading, figure, format)
_COLUMNS: dict[str, tuple[tuple[str, Callable[[FabricAdvice], Any], Callable[[Any], str]], ...]] = {
    "own": (
        ("step (s)", lambda f: f.step_time_s, "{:.3f}".format),
        ("days", lambda f: f.time_to_train_days, lambda v: "-" if v is None else f"{v:.1f}"),
        ("capex", lambda f: f.capex_usd, usd),
        ("opex/yr", lambda f: f.opex_usd_per_year, usd),
        ("TCO", lambda f: f.tco_usd, usd),
        ("per run", lambda f: f.cost_per_run_usd, usd),
        ("risk", lambda f: f.risk_usd, usd),
        ("same work", lambda f: f.cost_same_work_usd, usd),
    ),
    "rent-train": (
        ("step (s)", lambda f: f.step_time_s, "{:.3f}".format),
        ("days", lambda f: f.time_to_train_days, "{:.2f}".format),
        ("GPU-hours", lambda f: f.gpu_hours, "{:,.0f}".format),
        ("$/GPU-h", lambda f: f.gpu_hour_cost_usd, dollars),
        ("run loss", lambda f: f.risk_per_run_usd, dollars),
        ("per run", lambda f: f.cost_per_run_usd, dollars),
    ),
    "rent-serve": (
        ("ITL (ms)", lambda f: f.itl_s, lambda v: f"{v * 1e3:.2f}"),
        ("output tok/s total", lambda f: f.output_tokens_per_s_total, "{:,.0f}".format),
        ("$/GPU-h", lambda f: f.gpu_hour_cost_usd, dollars),
        ("cluster $/h", lambda f: f.cluster_usd_per_hour, dollars),
        ("per 1M output tok", lambda f: f.cost_per_million_output_tokens_usd, dollars),
    ),
}


def _fabric_table(a: Advice) -> object:
    """Each fabric's figures for what its score is; no figure a rental does not have."""
    from rich.table import Table

    cols = _COLUMNS[a.costing.kind]
    # no padding at the table's edges: the owner's nine columns then fit 80 characters
    days = "" if a.costing.kind == "rent-serve" else " (days: ideal, tokens / throughput)"
    t = Table(title=f"Per fabric{days}", title_justify="left", title_style="bold", pad_edge=False)
    t.add_column("fabric", no_wrap=True)
    for head, _, _ in cols:
        t.add_column(head, justify="right", no_wrap=True)
    for f in a.fabrics:
        t.add_row(f.fabric, *(show(figure(f)) for _, figure, show in cols))
    return t


# The driver column keeps room for a few words a line in a narrow terminal.
DRIVER_MIN_WIDTH = 18


def _gpus(n: int | None) -> str:
    """A break-even size as printed: 1,024, or none."""
    return f"{n:,}" if n else "none"


def _by_model_table(rows: list[ModelBreakEven]) -> tuple[Table, list[str]]:
    """The per-model break-even table, and a line per model on where its plan comes from."""
    from rich.table import Table

    from fabricplan.scenario.models import MATURITIES

    t = Table(
        title="Training break-even per model, each with its published training layout where it "
        "has one and it runs at the size, else its fastest fitting plan ('none': InfiniBand is "
        "dearer at some size up to the largest evaluated)",
        title_justify="left",
        title_style="bold",
    )
    cols = ("model", "plan here (tp·pp·ep, recompute)", "origin", *MATURITIES, "sizes evaluated")
    for col in cols:
        right = col in MATURITIES
        t.add_column(
            col, justify="right" if right else "left", overflow="fold", no_wrap=col == "model"
        )
    lines = []
    for r in rows:
        p = r.plan_at_scenario_size
        plan = "no plan fits"
        if p is not None:
            par = p.parallel
            plan = f"{par.tp}·{par.pp}·{par.ep}, {p.recompute}"
        sizes = r.evaluated_gpus
        span = f"{sizes[0]:,}-{sizes[-1]:,}" if sizes else "none"
        m = r.by_maturity
        origin = p.origin if p else "-"
        t.add_row(r.model, plan, origin, *(_gpus(m[k]) for k in MATURITIES), span)
        lines.append(_plan_line(r))
    return t, lines


def _plan_line(row: ModelBreakEven) -> str:
    """Which plan a model ran with, why, and from which source."""
    p, layout = row.plan_at_scenario_size, row.published_layout
    if layout is None:
        return f"  {row.model}: searched plan (no published layout)"
    here = f"here {p.why}" if p else "no plan fits here"
    runs = _origin_runs(row.plans)
    lay = f"{layout.tp}·{layout.pp}·{layout.ep}"
    return f"  {row.model}: {here}; by size: {runs or 'none'}. Published {lay}: {layout.source}"


def _origin_runs(plans: list[ReferencePlan]) -> str:
    """Consecutive sizes with the same origin: 'adapted 128-1,024, published 2,048-8,192'."""
    runs: list[tuple[str, int, int]] = []
    for p in plans:
        if runs and runs[-1][0] == p.origin:
            runs[-1] = (p.origin, runs[-1][1], p.gpus)
        else:
            runs.append((p.origin, p.gpus, p.gpus))
    return ", ".join(f"{o} {a:,}" + (f"-{b:,}" if b != a else "") for o, a, b in runs)
