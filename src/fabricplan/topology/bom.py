"""A fabric design and its bill of materials: the topology layer's main entry point."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from fabricplan.catalog import Catalog, default_catalog
from fabricplan.catalog.models import Fabric, Nic, Switch
from fabricplan.catalog.providers import node_nics
from fabricplan.topology.cabling import (
    DEFAULT_LENGTHS,
    Optics,
    Quality,
    TierMedia,
    choose_media,
    nic_end,
    resolve_optics,
    switch_end,
)
from fabricplan.topology.clos import size_clos
from fabricplan.topology.dragonfly import size_dragonfly
from fabricplan.topology.layout import DESIGNS, MAX_OVERSUBSCRIPTION, Layout, TopologyError
from fabricplan.topology.reach import check_reach


@dataclass(frozen=True)
class FabricDesign:
    """A sized fabric: switches, links, parts, power and (assumed) prices."""

    gpu: str
    gpus: int
    fabric: Fabric
    switch: Switch
    nic: Nic
    layout: Layout
    media: tuple[TierMedia, ...]
    oversubscription: tuple[float, float]
    optics: Quality = "oem"  # the parts it is priced with (the fabric's policy, or forced)

    @cached_property
    def transceivers(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.media:
            for tid, n in m.transceivers.items():
                out[tid] = out.get(tid, 0) + n
        return out

    @property
    def nics(self) -> int:
        return self.layout.endpoints

    @property
    def switch_count(self) -> int:
        return sum(self.layout.switches.values())

    @cached_property
    def power_w(self) -> dict[str, float]:
        sw = self.switch_count * self.switch.power_typical_w
        media = sum(m.power_w for m in self.media)
        nics = self.nics * self.nic.power_w
        return {
            "switches": sw,
            "optics_and_cables": media,
            "nics": nics,
            "total": sw + media + nics,
        }

    @cached_property
    def cost_usd(self) -> dict[str, float]:
        sw = self.switch_count * self.switch.price.usd
        cables = sum(m.cost_usd for m in self.media)
        nics = self.nics * self.nic.price.usd
        return {
            "switches": sw,
            "optics_and_cables": cables,
            "nics": nics,
            "total": sw + cables + nics,
        }

    @cached_property
    def cost_range_usd(self) -> tuple[float, float]:
        """The bill at every part's low and at every part's high catalog price."""
        sw, nic = self.switch.price.band, self.nic.price.band
        media = [m.cost_range_usd for m in self.media]
        ends = [
            self.switch_count * sw[i] + self.nics * nic[i] + sum(m[i] for m in media)
            for i in (0, 1)
        ]
        return ends[0], ends[1]

    @cached_property
    def no_public_price(self) -> tuple[str, ...]:
        """The parts of this bill priced without any public price: a quote is needed."""
        ids = [e.id for e in (self.switch, self.nic) if not e.price.public]
        ids += [i for m in self.media for i in m.no_public_price]
        return tuple(dict.fromkeys(ids))

    @cached_property
    def no_listing_cited(self) -> tuple[str, ...]:
        """The parts of this bill priced by a stated assumption: no public listing is cited."""
        ids = [e.id for e in (self.switch, self.nic) if e.price.status == "assumption"]
        ids += [i for m in self.media for i in m.no_listing_cited]
        return tuple(dict.fromkeys(ids))

    @cached_property
    def oem_fallback(self) -> tuple[str, ...]:
        """OEM parts priced where compatible ones were asked for (none in the catalog)."""
        return tuple(dict.fromkeys(i for m in self.media for i in m.oem_fallback))

    def prices_dict(self) -> dict:
        return {
            "optics": self.optics,
            "range_usd": list(self.cost_range_usd),
            "no_public_price": list(self.no_public_price),
            "no_listing_cited": list(self.no_listing_cited),
            "oem_fallback": list(self.oem_fallback),
        }

    def to_dict(self) -> dict:
        lay = self.layout
        cables = {m.tier: m.cables for m in self.media}
        return {
            "design": lay.design,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "nodes": lay.nodes,
            "gpus_per_node": lay.gpus_per_node,
            "nics_per_node": lay.nics_per_node,
            "fabric": self.fabric.id,
            "switch": self.switch.id,
            "nic": self.nic.id,
            "radix": lay.radix,
            "line_rate_gbps": lay.line_rate_gbps,
            "oversubscription": {
                "leaf": self.oversubscription[0],
                "spine": self.oversubscription[1],
            },
            "tiers": lay.tiers,
            "switches": dict(lay.switches),
            "links": dict(lay.links),
            "cables": cables,
            "transceivers": sum(self.transceivers.values()),
            "transceivers_by_id": dict(self.transceivers),
            "nics": self.nics,
            "bisection_GBps": lay.bisection_GBps,
            "hops": lay.hops.to_dict(),
            "max_endpoints": lay.max_endpoints,
            "max_gpus": lay.max_endpoints * lay.gpus_per_node // lay.nics_per_node,
            "power_kw": self.power_w["total"] / 1000,
            "power_w_by_part": dict(self.power_w),
            "cost_usd": {**self.cost_usd, "assumption": True},
            "prices": self.prices_dict(),
            "media": {m.tier: m.to_dict() for m in self.media},
            "dragonfly": dict(lay.dragonfly) or None,
            "notes": list(lay.notes),
        }


def _media_plan(
    cat: Catalog,
    lay: Layout,
    fabric: Fabric,
    switch: Switch,
    nic: Nic,
    lengths: dict[str, float],
    optics: Quality,
) -> tuple[TierMedia, ...]:
    sw, host = switch_end(switch), nic_end(nic)
    out = []
    for tier, links in lay.links.items():
        length = lengths[tier]
        far = host if tier == "node_leaf" else sw
        out.append(
            choose_media(
                cat, tier, links, length, fabric.link_layer, fabric.line_rate_gbps, sw, far, optics
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class SizedFabric:
    """A fabric sized for a cluster, before its cables are chosen: what a network simulation
    needs (the layout and its switch), without the media plan and prices of a full design."""

    gpu: str
    fabric: Fabric
    switch: Switch
    nic: Nic
    layout: Layout


def size_fabric(
    gpus: int,
    design: str = "rail-optimized",
    fabric: str = "ib-ndr",
    *,
    gpu: str = "h100",
    switch: str | None = None,
    oversubscription: float = 1.0,
    spine_oversubscription: float = 1.0,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    catalog: Catalog | None = None,
) -> SizedFabric:
    """Size ``design`` for ``gpus`` GPUs on ``fabric``: its switches, tiers and links.

    Raises :class:`TopologyError` (a ``ValueError``) with what would work instead when the
    request is impossible.
    """
    cat = catalog or default_catalog()
    g = cat.gpu(gpu)
    fab = cat.fabric(fabric)
    sw = cat.switch(switch or fab.default_switch)
    nic = cat.nic(fab.default_nic)
    k_g = gpus_per_node or g.node.gpus_per_node
    m = nics_per_node or node_nics(cat, gpu, fabric)
    if design not in DESIGNS:
        raise TopologyError(f"unknown design '{design}'; known: {', '.join(DESIGNS)}")
    for name, value in (
        ("oversubscription", oversubscription),
        ("spine oversubscription", spine_oversubscription),
    ):
        if not (math.isfinite(value) and 1.0 <= value <= MAX_OVERSUBSCRIPTION):
            raise TopologyError(
                f"{name} must be between 1 (non-blocking) and {MAX_OVERSUBSCRIPTION:g}, "
                f"got {value:g}: below 1 "
                "would mean more uplinks than node ports, which buys nothing"
            )
    if gpus % k_g:
        below, above = gpus // k_g * k_g, (gpus // k_g + 1) * k_g
        near = f"{below} or {above}" if below else f"{above} or more"
        raise TopologyError(f"{gpus} GPUs is not a whole number of {k_g}-GPU nodes; use {near}")
    if sw.link_layer != fab.link_layer:
        raise TopologyError(
            f"switch {sw.id} is {sw.link_layer}, fabric {fab.id} needs {fab.link_layer}; "
            f"try {fab.default_switch}"
        )
    radix = sw.radix_at(fab.line_rate_gbps)
    if radix < 2:
        raise TopologyError(
            f"switch {sw.id} has no {fab.line_rate_gbps:g} Gb/s ports "
            f"(its ports run at {sw.port_speed_gbps:g} Gb/s); try {fab.default_switch}"
        )
    nodes = gpus // k_g
    check_reach(cat, design, nodes, m, k_g, fab, sw, oversubscription, spine_oversubscription)
    if design == "dragonfly":
        lay = size_dragonfly(nodes, m, k_g, radix, fab.line_rate_gbps, oversubscription)
    else:
        lay = size_clos(
            design,
            nodes,
            m,
            k_g,
            radix,
            fab.line_rate_gbps,
            oversubscription,
            spine_oversubscription,
        )
    return SizedFabric(g.id, fab, sw, nic, lay)


def design_fabric(
    gpus: int,
    design: str = "rail-optimized",
    fabric: str = "ib-ndr",
    *,
    gpu: str = "h100",
    switch: str | None = None,
    oversubscription: float = 1.0,
    spine_oversubscription: float = 1.0,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    cable_lengths: dict[str, float] | None = None,
    optics: Optics = "policy",
    catalog: Catalog | None = None,
) -> FabricDesign:
    """Size ``design`` for ``gpus`` GPUs on ``fabric`` (:func:`size_fabric`) and count its
    parts, priced with the fabric's optics policy unless ``optics`` forces OEM or compatible
    parts.

    Raises :class:`TopologyError` (a ``ValueError``) with what would work instead when the
    request is impossible.
    """
    cat = catalog or default_catalog()
    sized = size_fabric(
        gpus,
        design,
        fabric,
        gpu=gpu,
        switch=switch,
        oversubscription=oversubscription,
        spine_oversubscription=spine_oversubscription,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        catalog=cat,
    )
    fab, sw, nic, lay = sized.fabric, sized.switch, sized.nic, sized.layout
    lengths = {**DEFAULT_LENGTHS[design], **(cable_lengths or {})}
    unknown = set(cable_lengths or {}) - set(DEFAULT_LENGTHS[design])
    if unknown:
        raise TopologyError(
            f"unknown cable tier(s) {', '.join(sorted(unknown))} for {design}; "
            f"known: {', '.join(DEFAULT_LENGTHS[design])}"
        )
    quality = resolve_optics(optics, fab.family)
    media = _media_plan(cat, lay, fab, sw, nic, lengths, quality)
    return FabricDesign(
        sized.gpu,
        gpus,
        fab,
        sw,
        nic,
        lay,
        media,
        (oversubscription, spine_oversubscription),
        quality,
    )
