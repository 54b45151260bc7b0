"""``fabricplan providers``: GPU clouds' fabrics as seed 002 lists them, and what to ask."""

from __future__ import annotations

import typer
from rich.table import Table

from fabricplan.catalog.providers import (
    FILTER_FABRICS,
    QUESTIONS,
    SINGLE_NODE_GPUS,
    filter_providers,
    load_providers,
    scorecard,
)
from fabricplan.cli.output import console, emit_json, fail

MARK = {"known": "[green]✓[/]", "partial": "[yellow]~[/]", "ask": "[red]?[/]"}


def providers_cmd(
    fabric: str | None = typer.Option(
        None, "--fabric", help=f"Only providers offering this fabric: {', '.join(FILTER_FABRICS)}."
    ),
    min_gpus: int | None = typer.Option(
        None,
        "--min-gpus",
        min=1,
        help=f"GPUs needed; above {SINGLE_NODE_GPUS}, only providers listing multi-node clusters.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """GPU cloud providers' scale-out networks (one article's claims) and questions to ask."""
    key = fabric.strip().lower() if fabric is not None else None  # "IB" means "ib"
    if key is not None and key not in FILTER_FABRICS:
        fail(f"--fabric: unknown value '{fabric}'; allowed: {', '.join(FILTER_FABRICS)}",
             as_json=as_json)  # fmt: skip
    everyone = load_providers()
    found = filter_providers(everyone, key, min_gpus)
    if as_json:
        emit_json([{**p.model_dump(), "scorecard": scorecard(p)} for p in found])
        return
    table = Table(
        title=f"GPU cloud fabrics: {len(found)} of {len(everyone)} providers "
        "(seed 002's table, unverified)",
        title_justify="left", title_style="bold",
    )  # fmt: skip
    table.add_column("provider", no_wrap=True)
    table.add_column("fabric", no_wrap=True)
    table.add_column("Gb/s/GPU", justify="right", no_wrap=True)
    table.add_column("topology", max_width=24, overflow="fold")
    for i in range(len(QUESTIONS)):
        table.add_column(f"Q{i + 1}", justify="center", no_wrap=True)
    for p in found:
        card = scorecard(p)
        topology = p.topology or "[dim]not documented[/]"
        marks = (MARK[card[k]["status"]] for k, _ in QUESTIONS)
        table.add_row(p.name, p.fabric, p.gbps_text, topology, *marks)
    console.print(table)
    if not found:
        console.print("No provider in the table matches.", highlight=False)
    console.print("✓ the table answers it  ~ in part  ? ask the provider", highlight=False)
    if min_gpus is not None and min_gpus > SINGLE_NODE_GPUS:
        console.print(f"--min-gpus {min_gpus}: the table gives no cluster sizes; kept providers "
                      "whose availability lists multi-node clusters.", highlight=False)  # fmt: skip
    console.print("\n[bold]Questions to ask before committing to a fabric (seed 001)[/]")
    for i, (key, text) in enumerate(QUESTIONS, start=1):
        console.print(f"Q{i} {key}: {text}", highlight=False)
