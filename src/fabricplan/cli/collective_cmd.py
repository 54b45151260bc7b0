"""``fabricplan collective``: the nccl-tests table a cluster should produce."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.table import Table

from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.output import console, emit_json, fail_with, print_table
from fabricplan.cli.system_opts import (
    FABRIC_OPT,
    GPN_OPT,
    GPU_OPT,
    HOPS_OPT,
    JSON_OPT,
    NICS_OPT,
    NODES_OPT,
    SCENARIO_OPT,
    SET_OPT,
    SHARP_OPT,
    system_from,
)
from fabricplan.collectives import OPS, CollectiveTable, CommSystem
from fabricplan.collectives.nccl_constants import MAX_CTAS
from fabricplan.ops import BadInput
from fabricplan.ops.cluster import ClusterFlags
from fabricplan.ops.collective import collective_table, op_and_sizes

# nccl-tests' default element type
DTYPE_BYTES = 4


def human_size(n: int) -> str:
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def collective(
    op: str = typer.Option("all_reduce", "--op", help=f"One of: {', '.join(OPS)}."),
    gpu: str | None = GPU_OPT,
    nodes: int | None = NODES_OPT,
    gpus_per_node: int | None = GPN_OPT,
    nics_per_node: int | None = NICS_OPT,
    fabric: str | None = FABRIC_OPT,
    sizes: str | None = typer.Option(None, "--sizes", help="Comma list, e.g. 8,1K,1M,64M,1G."),
    min_size: str = typer.Option("8", "--min", help="Smallest size (with --max, --factor)."),
    max_size: str = typer.Option("16G", "--max", help="Largest size."),
    factor: float = typer.Option(2.0, "--factor", help="Step between sizes."),
    algo: str | None = typer.Option(
        None, "--algo", help="Limit algorithms, like NCCL_ALGO (replaces the fabric's own limit)."
    ),
    proto: str | None = typer.Option(
        None, "--proto", help="Limit protocols, like NCCL_PROTO (replaces the fabric's own limit)."
    ),
    min_ctas: int | None = typer.Option(
        None,
        "--min-ctas",
        callback=within(1, MAX_CTAS),
        help=(
            "Like NCCL_MIN_CTAS / NCCL_MIN_NCHANNELS: the fewest channels (NVLS, and ring "
            "and tree at run time)."
        ),
    ),
    max_ctas: int | None = typer.Option(
        None,
        "--max-ctas",
        callback=within(1, MAX_CTAS),
        help="Like NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS: the most channels.",
    ),
    hops: int | None = HOPS_OPT,
    sharp: bool = SHARP_OPT,
    scenario: Path | None = SCENARIO_OPT,
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Predict an nccl-tests table: time, algbw, busbw and NCCL's algorithm/protocol per size."""
    try:
        op, size_values = op_and_sizes(op, sizes, min_size, max_size, factor)
    except BadInput as exc:
        fail_with(exc, as_json)
    cat = catalog_from(catalog, as_json)
    system = system_from(
        ClusterFlags(
            gpu=gpu,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            fabric=fabric,
            hops=hops,
            sharp=sharp,
        ),
        scenario=scenario,
        overrides=set_,
        catalog=cat,
        as_json=as_json,
    )
    try:
        table = collective_table(
            system, op, size_values, algo=algo, proto=proto, min_ctas=min_ctas, max_ctas=max_ctas
        )
    except BadInput as exc:
        fail_with(exc, as_json)
    if as_json:
        emit_json(table.to_dict())
        return
    show_table(table.system, op, table)
    for note in table.warnings:
        console.print(f"[yellow]warning:[/] {note}", highlight=False)


def show_table(s: CommSystem, op: str, table: CollectiveTable) -> None:
    """Print a predicted nccl-tests table as nccl-tests lays it out."""
    nics = f"{s.nics_per_node} NICs/node"
    if s.ports_per_node != s.nics_per_node:  # ports NCCL drives as one device per GPU
        nics = f"{s.ports_per_node} NIC ports/node as {s.nics_per_node} devices"
    title = (
        f"{op} on {s.nodes} x {s.gpus_per_node} {s.gpu} ({s.nranks} ranks), {s.fabric}, "
        f"{nics} at {s.nic_GBps:.1f} GB/s, {s.switch_hops} switch hop(s)"
    )
    out = Table(title=title, title_justify="left", title_style="bold")
    for col in (
        "size",
        "count",
        "type",
        "time (us)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "algo",
        "proto",
    ):
        # fold, never cut: a number must show in full on a narrow terminal
        out.add_column(
            col,
            justify="right" if col not in ("type", "algo", "proto") else "left",
            overflow="fold",
        )
    for r in table.rows:
        out.add_row(
            human_size(r.size_bytes),
            str(max(r.size_bytes // DTYPE_BYTES, 0)),
            "float",
            f"{r.time_us:,.1f}",
            f"{r.algbw_GBps:.2f}",
            f"{r.busbw_GBps:.2f}",
            r.algorithm,
            r.protocol,
        )
    print_table(out)
    console.print(
        f"point-to-point small-message latency (ib_write_lat style): {s.p2p_latency_us:.2f} us",
        highlight=False,
    )
    if note := plugin_note(s):
        console.print(note, highlight=False)


def plugin_note(s: CommSystem) -> str:
    """What the fabric's network plugin limits NCCL to, in one line ('' where nothing)."""
    parts = []
    if s.algorithms is not None:
        parts.append("algorithms " + ", ".join(s.algorithms))
    if s.protocols is not None:
        parts.append("protocols " + ", ".join(s.protocols))
    if s.min_ctas == s.max_ctas:
        parts.append(f"{s.max_ctas} channels")
    if math.isfinite(s.channel_GBps):
        parts.append(
            f"{s.channel_GBps:g} GB/s a channel, so {s.nic_net_GBps:.2f} GB/s a NIC for NCCL"
        )
    if not parts:
        return ""
    return f"network plugin / deployment: {'; '.join(parts)}"
