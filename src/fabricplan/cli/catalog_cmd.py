"""``fabricplan catalog``: list and show the sourced facts."""

from __future__ import annotations

from typing import Any

import typer

from fabricplan.catalog import (
    CATALOG_KINDS,
    Entry,
    Fabric,
    Gpu,
    Model,
    Nic,
    Price,
    Switch,
    UnknownIdError,
    count_params,
    default_catalog,
    resolve_kind,
)
from fabricplan.cli import output
from fabricplan.cli.output import emit_json, fail, fmt, kv_table, print_table

app = typer.Typer(
    help="Sourced facts: fabrics, switches, NICs, cables, optics, GPUs, models.",
    no_args_is_help=True,
)

JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")


def entry_record(e: Entry) -> dict[str, Any]:
    """An entry as JSON: its kind first, then every stored field."""
    return {"kind": e.KIND, **e.model_dump(mode="json")}


def price_fact(price: Price) -> str:
    """A price at a glance: its nominal figure and whether anything public backs it."""
    return f"${price.usd:,.0f} ({price.status})"


def key_facts(e: Entry) -> str:
    """The few numbers that identify an entry at a glance."""
    match e:
        case Fabric():
            lat = e.rdma_latency_us
            return (
                f"{e.line_rate_gbps:g} Gb/s, {e.nic_goodput_GBps.nominal:g} GB/s goodput, "
                f"{lat.low:g}-{lat.high:g} us, {e.flow_control}, {e.default_routing}"
            )
        case Switch():
            return (
                f"{e.ports} x {e.port_speed_gbps:g}G, "
                f"{e.port_to_port_latency_ns.nominal:g} ns, {price_fact(e.price)}"
            )
        case Nic():
            return (
                f"{e.ports} x {e.port_speed_gbps:g}G, PCIe Gen{e.pcie_gen} x{e.pcie_lanes}, "
                f"{price_fact(e.price)}"
            )
        case Gpu():
            return (
                f"{e.bf16_dense_tflops:g} BF16 TFLOPS, {e.memory_gb:g} GB, "
                f"{e.scaleup} {e.scaleup_bidir_GBps:g} GB/s, {e.node.nics_per_node} x "
                f"{e.node.nic_speed_gbps:g}G"
            )
        case Model():
            p = count_params(e)
            moe = f", {e.moe.experts} experts top-{e.moe.top_k}" if e.moe else ""
            return f"{p.total / 1e9:.1f}B params, {e.layers} layers, hidden {e.hidden}{moe}"
        case _:
            media = getattr(e, "medium", None) or getattr(e, "reach", "")
            price = getattr(e, "price", None)
            cost = f", {price_fact(price)}" if price else ""
            return f"{e.speed_gbps:g}G {media}, {e.power_w:g} W{cost}"  # type: ignore[attr-defined]


@app.command("list")
def list_cmd(
    kind: str | None = typer.Argument(
        None, help=f"One of: {', '.join(CATALOG_KINDS)} (plurals work too)."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """List catalog entries, optionally of one KIND."""
    try:
        entries = default_catalog().entries(kind)
    except UnknownIdError as exc:
        fail(str(exc), as_json=as_json)
    if as_json:
        emit_json([entry_record(e) for e in entries])
        return
    from rich.table import Table

    title = f"{resolve_kind(kind)} entries" if kind else "catalog"
    table = Table(title=f"{title} ({len(entries)})", title_justify="left")
    for col in ("kind", "id", "name", "key facts", "as_of"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(e.KIND, e.id, e.name, key_facts(e), e.as_of)
    print_table(table)
    output.console.print(
        "prices: nominal figure (quoted: public prices cited; assumption: a stated basis, no "
        "listing cited; no-public-price: none to cite); `fabricplan catalog show ID` gives "
        "each one's range, basis and sources."
    )


def _flatten(prefix: str, value: Any, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out.append((prefix, value))


@app.command("show")
def show_cmd(entry_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JSON_OPT) -> None:
    """Show every field of one entry, with its source."""
    try:
        entry = default_catalog().get(entry_id)
    except UnknownIdError as exc:
        fail(str(exc), as_json=as_json)
    record = entry_record(entry)
    if isinstance(entry, Model):
        p = count_params(entry)
        record["derived"] = {"params_b": p.total / 1e9, "active_params_b": p.active / 1e9}
    if as_json:
        emit_json(record)
        return
    rows: list[tuple[str, Any]] = []
    _flatten("", record, rows)
    print_table(kv_table(f"{entry.KIND} {entry.id}", ((k, fmt(v, 4)) for k, v in rows)))
