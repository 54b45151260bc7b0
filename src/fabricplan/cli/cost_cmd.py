"""``fabricplan cost``: what a run costs and what a network-induced loss wastes."""

from __future__ import annotations

import typer
from rich.table import Table

from fabricplan.cli.bounds import within
from fabricplan.cli.output import emit_json, print_table
from fabricplan.cli.scenario_cmd import JSON_OPT
from fabricplan.cost import run_cost, usd

# The run a user can ask about: a million GPUs, ten years.
MAX_RUN_GPUS = 1_000_000
MAX_RUN_DAYS = 3650.0


def cost_cmd(
    gpus: int = typer.Option(
        ..., "--gpus", callback=within(1, MAX_RUN_GPUS), help="GPUs in the run."
    ),
    days: float = typer.Option(
        ..., "--days", callback=within(0.0, MAX_RUN_DAYS), help="Run length in days."
    ),
    gpu_hour_price: float = typer.Option(
        3.0,
        "--gpu-hour-price",
        callback=within(0.0, 1000.0),
        help="$ per GPU-hour (an assumption).",
    ),
    loss: float = typer.Option(
        0.0, "--loss", callback=within(0.0, 1.0), help="Share of the GPU-hours lost to the network."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Cost of a run, and the GPU-hours, dollars and days a network-induced loss wastes."""
    r = run_cost(gpus, days, gpu_hour_price, loss)
    if as_json:
        emit_json(r.to_dict())
        return
    t = Table(
        title=f"{gpus:,} GPUs for {days:g} days at ${gpu_hour_price:g}/GPU-hour",
        title_justify="left",
        title_style="bold",
        show_header=False,
    )
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("GPU-hours", f"{r.gpu_hours:,.0f}")
    t.add_row("compute cost", f"${r.cost_usd:,.0f} (≈ {usd(r.cost_usd, sig=2)})")
    t.add_row(f"lost to the network ({loss:.1%})", f"{r.wasted_gpu_hours:,.0f} GPU-hours")
    t.add_row("wasted", f"${r.wasted_usd:,.0f} (≈ {usd(r.wasted_usd, sig=2)})")
    t.add_row("extra schedule", f"{r.extra_days:.2f} days")
    print_table(t)
