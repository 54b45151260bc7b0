"""The scenario report's bill of materials (per fabric, by part, as ``topology`` sizes it) and
its assumptions and sources (the cost assumptions' bases, every part's price and its status,
the model's validated range and what it does not model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fabricplan.catalog import Catalog
from fabricplan.catalog.models import Price
from fabricplan.cost import load_assumptions
from fabricplan.report import charts, fmt
from fabricplan.report.html import Column, Html, bullets, figure, join, table, tag
from fabricplan.topology import FabricDesign

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fabricplan.report.scenario_report import ScenarioReport

# The network bill's parts as FabricDesign.cost_usd names them.
BOM_PARTS = (("switches", "switches"), ("optics_and_cables", "optics and cables"), ("nics", "NICs"))
STATUS = {
    "quoted": "public quote",
    "assumption": "assumption",
    "no-public-price": "no public price",
}


@dataclass(frozen=True)
class BomLine:
    """One part of a fabric's bill: how many, and the catalog price it is priced at."""

    fabric: str
    kind: str  # switch, NIC, cable, transceiver
    part: str  # catalog id
    name: str
    count: int
    price: Price


def bom_lines(designs: tuple[FabricDesign, ...], cat: Catalog) -> tuple[BomLine, ...]:
    out = []
    for d in designs:
        f = d.fabric.id
        out.append(BomLine(f, "switch", d.switch.id, d.switch.name, d.switch_count, d.switch.price))
        out.append(BomLine(f, "NIC", d.nic.id, d.nic.name, d.nics, d.nic.price))
        cables: dict[str, int] = {}
        for m in d.media:
            if m.links:
                cables[m.cable_id] = cables.get(m.cable_id, 0) + m.cables
        for cid, n in cables.items():
            c = cat.cable(cid)
            out.append(BomLine(f, "cable", cid, c.name, n, c.price))
        for tid, n in d.transceivers.items():
            t = cat.transceiver(tid)
            out.append(BomLine(f, "transceiver", tid, t.name, n, t.price))
    return tuple(out)


def bom_chart(r: ScenarioReport) -> Html:
    names = [d.fabric.id for d in r.designs]
    parts = [(label, [d.cost_usd[key] for d in r.designs]) for key, label in BOM_PARTS]
    return charts.stacked_bars(
        "bom",
        charts.Stack(names, parts, "US dollars (catalog prices)", fmt.money, money=True),
        "network bill of materials by part",
    )


def _tiers(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or fmt.NONE


def bom_section(r: ScenarioReport, ch: Mapping[str, Html]) -> Html:
    ds = r.designs
    cols = [Column(""), *(Column(d.fabric.id, numeric=True) for d in ds)]
    o = [d.oversubscription for d in ds]
    rows = [
        ["switch", *(f"{d.switch.id} ({d.layout.radix} ports)" for d in ds)],
        ["tiers", *(f"{d.layout.tiers}" for d in ds)],
        ["oversubscription (leaf, spine)", *(f"{a:g}:1, {b:g}:1" for a, b in o)],
        ["switches per tier", *(_tiers(d.layout.switches) for d in ds)],
        ["links per tier", *(_tiers(d.layout.links) for d in ds)],
        ["cables per tier", *(_tiers({m.tier: m.cables for m in d.media}) for d in ds)],
        ["transceivers", *(f"{sum(d.transceivers.values()):,}" for d in ds)],
        ["NICs", *(f"{d.nics:,} x {d.nic.id}" for d in ds)],
        [
            "bisection (line rate, one way)",
            *(fmt.number(d.layout.bisection_GBps, 0, "GB/s") for d in ds),
        ],
        ["switch hops (max)", *(f"{d.layout.hops.max}" for d in ds)],
        [
            "power (switches, optics, NICs)",
            *(fmt.number(d.power_w["total"] / 1e3, 1, "kW") for d in ds),
        ],
        *[[label, *(fmt.money(d.cost_usd[key]) for d in ds)] for key, label in BOM_PARTS],
        ["network total", *(fmt.money(d.cost_usd["total"]) for d in ds)],
        ["at every part's low price", *(fmt.money(d.cost_range_usd[0]) for d in ds)],
        ["at every part's high price", *(fmt.money(d.cost_range_usd[1]) for d in ds)],
        ["optics priced as", *(d.optics for d in ds)],
    ]
    parts = [
        [
            b.fabric,
            b.kind,
            b.part,
            f"{b.count:,}",
            fmt.money(b.price.usd),
            f"{fmt.money(b.price.band[0])} to {fmt.money(b.price.band[1])}",
            STATUS[b.price.status],
        ]
        for b in r.parts
    ]
    part_cols = [
        Column("fabric"),
        Column("part"),
        Column("catalog id"),
        Column("count", numeric=True),
        Column("unit price", numeric=True),
        Column("range", numeric=True),
        Column("price status"),
    ]
    caption = (
        f"The network each fabric needs for {r.scenario.cluster.gpus:,} GPUs "
        f"({r.scenario.cluster.topology.design}), priced at catalog prices: switches, optics "
        "and cables, NICs. The GPU servers are not part of it."
    )
    notes = [n for d in ds for n in _price_notes(d)]
    return join(
        [
            figure(ch["bom"], caption),
            table(cols, rows, caption="Per fabric"),
            table(part_cols, parts, caption="Parts (unit price as the catalog gives it)"),
            bullets(notes, cls="note") if notes else Html(""),
        ]
    )


def _price_notes(d: FabricDesign) -> list[str]:
    out = []
    if d.no_public_price:
        out.append(
            f"{d.fabric.id}: no public price for {', '.join(d.no_public_price)}: priced by "
            "assumption; a quote would replace it"
        )
    if d.no_listing_cited:
        out.append(
            f"{d.fabric.id}: no listing cited for {', '.join(d.no_listing_cited)}: priced by "
            "a stated assumption (its basis is in the table below)"
        )
    if d.oem_fallback:
        out.append(
            f"{d.fabric.id}: no compatible part in the catalog for {', '.join(d.oem_fallback)}: "
            "priced as OEM"
        )
    return out


def assumptions_section(r: ScenarioReport) -> Html:
    a = r.advice
    basis = load_assumptions().basis()
    assumption_rows = [[k.replace("_", " "), v] for k, v in basis.items() if v]
    prices = {}
    for b in r.parts:
        prices.setdefault(b.part, b)
    price_rows = [
        [b.part, b.name, STATUS[b.price.status], b.price.basis, _quotes(b.price)]
        for b in prices.values()
    ]
    summaries = [(f.fabric, f.validation.summary()) for f in a.fabrics if f.validation is not None]
    validation = [f"{fabric}: {summary}" for fabric, summary in summaries if summary]
    not_modelled = [f"{f.fabric}: {'; '.join(f.not_modelled)}" for f in a.fabrics if f.not_modelled]
    return join(
        [
            tag(
                "p",
                "Every price and risk rate below is a labelled assumption unless a public "
                "quote is cited for it.",
                cls="verdict",
            ),
            bullets(a.notes),
            table(
                [Column("cost assumption"), Column("basis")],
                assumption_rows,
                caption="Cost and risk assumptions (catalog economics/costs.toml)",
            ),
            table(
                [
                    Column("part"),
                    Column("name"),
                    Column("status"),
                    Column("basis"),
                    Column("quotes"),
                ],
                price_rows,
                caption="Part prices and their sources",
            ),
            tag("h3", "Where the model was validated"),
            bullets(validation)
            if validation
            else tag("p", "No validation data applies.", cls="note"),
            tag("h3", "Not modelled"),
            bullets(not_modelled) if not_modelled else tag("p", "Nothing listed.", cls="note"),
        ]
    )


def _quotes(p: Price) -> str:
    if not p.quotes:
        return fmt.NONE
    return "; ".join(f"{fmt.money(q.usd)} ({q.channel}, {q.source}, {q.as_of})" for q in p.quotes)
