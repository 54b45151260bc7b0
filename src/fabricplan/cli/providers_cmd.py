"""``fabricplan providers``: GPU clouds' fabrics as seed 002 lists them, and what to ask."""

from __future__ import annotations

import typer
from rich.table import Table

from fabricplan.catalog.providers import (
    FILTER_FABRICS,
    QUESTIONS,
    SINGLE_NODE_GPUS,
    Provider,
    filter_providers,
    find_node,
    load_providers,
    scorecard,
)
from fabricplan.cli.bounds import within
from fabricplan.cli.output import console, emit_json, fail, print_table
from fabricplan.cli.system_opts import MAX_NODES

MARK = {"known": "[green]✓[/]", "partial": "[yellow]~[/]", "ask": "[red]?[/]"}


def providers_cmd(
    fabric: str | None = typer.Option(
        None, "--fabric", help=f"Only providers offering this fabric: {', '.join(FILTER_FABRICS)}."
    ),
    min_gpus: int | None = typer.Option(
        None,
        "--min-gpus",
        callback=within(1),
        help=f"GPUs needed; above {SINGLE_NODE_GPUS}, only providers listing multi-node clusters.",
    ),
    predict_node: str | None = typer.Option(
        None, "--predict", help="A node type (e.g. p5.48xlarge): its predicted nccl-tests table."
    ),
    nodes: int = typer.Option(
        2, "--nodes", callback=within(1, MAX_NODES), help="Nodes for --predict."
    ),
    op: str = typer.Option("all_reduce", "--op", help="Collective for --predict."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """GPU clouds' scale-out networks: the cloud comparison table of "InfiniBand vs. RoCE for AI
    Training" (seed 002), the hyperscalers' node types from their own documentation, and
    questions to ask; --predict NODE gives a node type's nccl-tests table as the collective
    model predicts it."""
    if predict_node is not None:
        show_prediction(predict_node, nodes, op, as_json)
        return
    if nodes != 2 or op != "all_reduce":
        fail("--nodes and --op apply to --predict NODE", as_json=as_json)
    key = fabric.strip().lower() if fabric is not None else None  # "IB" means "ib"
    if key is not None and key not in FILTER_FABRICS:
        fail(
            f"--fabric: unknown value '{fabric}'; allowed: {', '.join(FILTER_FABRICS)}",
            as_json=as_json,
        )
    everyone = load_providers()
    found = filter_providers(everyone, key, min_gpus)
    if as_json:
        emit_json([{**p.model_dump(), "scorecard": scorecard(p)} for p in found])
        return
    table = Table(
        title=f"GPU cloud fabrics: {len(found)} of {len(everyone)} providers "
        "(seed 002's table, unverified; the hyperscalers from their own documentation)",
        title_justify="left",
        title_style="bold",
    )
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
    print_table(table)
    show_node_types(found)
    if not found:
        console.print("No provider in the table matches.", highlight=False)
    console.print("✓ the table answers it  ~ in part  ? ask the provider", highlight=False)
    if min_gpus is not None and min_gpus > SINGLE_NODE_GPUS:
        console.print(
            f"--min-gpus {min_gpus}: the table gives no cluster sizes; kept providers "
            "whose availability lists multi-node clusters.",
            highlight=False,
        )
    console.print("\n[bold]Questions to ask before committing to a fabric (seed 001)[/]")
    for i, (key, text) in enumerate(QUESTIONS, start=1):
        console.print(f"Q{i} {key}: {text}", highlight=False)


def show_node_types(found: list[Provider]) -> None:
    """The documented node types of the providers shown, with their catalog fabric."""
    rows = [(p, n) for p in found for n in p.nodes]
    if not rows:
        return
    table = Table(
        title="Node types (providers' documentation; --predict NODE for nccl-tests)",
        title_justify="left",
        title_style="bold",
    )
    for col in ("provider", "node type", "GPUs", "scale-out NICs", "Gb/s/GPU", "fabric"):
        table.add_column(col, no_wrap=True)
    table.add_column("topology", max_width=24, overflow="fold")
    for p, n in rows:
        table.add_row(
            p.name,
            n.id,
            f"{n.gpus} x {n.gpu}",
            f"{n.nics} x {n.nic_gbps:g}G",
            f"{n.gbps_per_gpu:g}",
            n.fabric,
            n.topology or "[dim]not documented[/]",
        )
    print_table(table)


def show_prediction(node_id: str, nodes: int, op: str, as_json: bool) -> None:
    """``--predict``: the nccl-tests table of ``nodes`` nodes of one node type."""
    from fabricplan.cli.collective_cmd import show_table
    from fabricplan.collectives import build_system, predict, resolve_op

    try:
        provider, node = find_node(load_providers(), node_id)
        op = resolve_op(op)
        system = build_system(
            node.gpu, nodes, node.fabric, gpus_per_node=node.gpus, nics_per_node=node.nics
        )
        table = predict(system, op)
    except ValueError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json({"provider": provider.id, "node": node.model_dump(), **table.to_dict()})
        return
    console.print(
        f"{provider.name} {node.id}: {node.gpus} x {node.gpu}, {node.nics} x "
        f"{node.nic_gbps:g}G on {node.fabric} ({node.source})",
        highlight=False,
    )
    show_table(system, op, table)
