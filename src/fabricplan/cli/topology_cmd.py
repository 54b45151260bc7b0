"""``fabricplan topology``: switches, cables, optics, hops, bisection, power of a design."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.output import console, emit_json, fail_with, kv_table, print_table
from fabricplan.cli.scenario_cmd import load_or_fail
from fabricplan.cli.system_opts import (
    GPN_OPT,
    JSON_OPT,
    NICS_OPT,
    SCENARIO_OPT,
    SET_OPT,
    SWITCH_OPT,
)
from fabricplan.ops import BadInput
from fabricplan.ops.topology import design_fabrics, topology_document
from fabricplan.scenario.models import MAX_GPUS
from fabricplan.topology import DESIGNS, FabricDesign
from fabricplan.topology.cabling import DEFAULT_LENGTHS


def topology(
    gpus: int | None = typer.Option(
        None, "--gpus", callback=within(1, MAX_GPUS), help="GPUs in the cluster."
    ),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU id (default h100)."),
    design: str | None = typer.Option(
        None, "--design", help=f"One of: {', '.join(DESIGNS)} (default rail-optimized)."
    ),
    fabric: str | None = typer.Option(
        None, "--fabric", help="Fabric id (default: InfiniBand at the GPU's NIC speed)."
    ),
    switch: str | None = SWITCH_OPT,
    oversubscription: str | None = typer.Option(
        None, "--oversubscription", help="Leaf down:up ratio, or LEAF,SPINE (default 1)."
    ),
    gpus_per_node: int | None = GPN_OPT,
    nics_per_node: int | None = NICS_OPT,
    cable_length: list[str] | None = typer.Option(
        None,
        "--cable-length",
        metavar="TIER=M",
        help="Override an assumed cable run, e.g. node_leaf=3 (repeatable).",
    ),
    compatible_optics: bool | None = typer.Option(
        None,
        "--compatible-optics/--oem-optics",
        help="Price third-party compatible or OEM cables and optics for every fabric (default: "
        "the scenario's costs.optics, else each fabric's policy: OEM on InfiniBand, "
        "multi-vendor on Ethernet).",
    ),
    scenario: Path | None = SCENARIO_OPT,
    set_: list[str] | None = SET_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Size a fabric: switches and cables per tier, optics, NICs, bisection, hops, power.

    With --scenario and no --fabric, every fabric the scenario lists is designed (JSON:
    {"designs": [...]}); otherwise one design (JSON: the design object).
    """
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(scenario, set_, as_json, cat) if scenario is not None else None
    try:
        designs = design_fabrics(
            gpus=gpus,
            gpu=gpu,
            design=design,
            fabric=fabric,
            switch=switch,
            oversubscription=oversubscription,
            gpus_per_node=gpus_per_node,
            nics_per_node=nics_per_node,
            cable_length=cable_length,
            compatible_optics=compatible_optics,
            scenario=sc,
            catalog=cat,
        )
    except BadInput as exc:
        fail_with(exc, as_json)
    if as_json:
        emit_json(topology_document(designs))
        return
    for d in designs:
        _print(d)


def price_notes(d: FabricDesign) -> list[str]:
    """What the bill's prices rest on that a buyer must quote."""
    out = []
    if d.no_public_price:
        out.append(f"no public price for {', '.join(d.no_public_price)}: priced by assumption")
    if d.no_listing_cited:
        out.append(
            f"no listing cited for {', '.join(d.no_listing_cited)}: priced by assumption "
            "(each one's basis: fabricplan catalog show ID)"
        )
    if d.oem_fallback:
        out.append(
            f"no compatible part in the catalog for {', '.join(d.oem_fallback)}: priced as OEM"
        )
    return out


def _tiers(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or "-"


def _print(d: FabricDesign) -> None:
    data = d.to_dict()
    lay = d.layout
    h = data["hops"]
    hops = f"same rail {h['same_rail']}, cross rail {h['cross_rail']}"
    hops += " (via NVLink)" if h["cross_rail_via"] == "nvlink" else ""
    hops += f", max {h['max']}"
    if "valiant_max" in h:
        hops += f", Valiant {h['valiant_max']}"
    o = data["oversubscription"]
    rows = [
        (
            "cluster",
            f"{d.gpus:,} x {d.gpu} = {lay.nodes:,} nodes x {lay.gpus_per_node} GPUs, "
            f"{lay.nics_per_node} NICs ({d.nic.id}) each",
        ),
        (
            "fabric",
            f"{d.fabric.id}: {d.switch.id}, {lay.radix} ports at {lay.line_rate_gbps:g} "
            f"Gb/s, {lay.tiers} tier(s), oversubscription {o['leaf']:g}:1 leaf, "
            f"{o['spine']:g}:1 spine",
        ),
        ("switches", _tiers(lay.switches)),
        ("links", _tiers(lay.links)),
        ("cables", _tiers(data["cables"])),
        ("transceivers", f"{data['transceivers']:,}"),
        ("NICs", f"{d.nics:,}"),
        ("bisection", f"{data['bisection_GBps']:,.0f} GB/s (line rate, one direction)"),
        ("switch hops", hops),
        ("largest cluster", f"{data['max_gpus']:,} GPUs ({data['max_endpoints']:,} NIC ports)"),
        ("power", f"{data['power_kw']:,.1f} kW (switches, optics, NICs)"),
        ("cost", _cost_text(d)),
    ]
    print_table(kv_table(f"{lay.design} fabric", rows))
    media = Table(title="parts per tier", title_justify="left", title_style="bold")
    for col in ("tier", "links", "run (m)", "medium", "cable", "cables", "transceivers"):
        right = col in ("links", "run (m)", "cables")
        media.add_column(col, justify="right" if right else "left", overflow="fold")
    for m in d.media:
        if m.links:
            mods = ", ".join(f"{n:,} x {t}" for t, n in m.transceivers.items()) or "-"
            media.add_row(
                m.tier,
                f"{m.links:,}",
                f"{m.length_m:g}",
                m.medium,
                m.cable_id,
                f"{m.cables:,}",
                mods,
            )
    print_table(media)
    defaults = DEFAULT_LENGTHS[lay.design]
    runs = ", ".join(
        f"{m.tier} {m.length_m:g} m" + ("" if m.length_m == defaults[m.tier] else " (given)")
        for m in d.media
        if m.links
    )
    console.print(f"cable runs: {runs}; change with --cable-length TIER=M", highlight=False)
    for note in (*lay.notes, *price_notes(d)):
        console.print(f"note: {note}", highlight=False)


def _cost_text(d: FabricDesign) -> str:
    low, high = d.cost_range_usd
    return (
        f"${d.cost_usd['total']:,.0f} (catalog prices, {d.optics} optics; "
        f"${low:,.0f} to ${high:,.0f} at every part's low and high price)"
    )
