"""How far each design reaches with a switch, and what to suggest when a request is too big."""

from __future__ import annotations

from fabricplan.catalog import Catalog
from fabricplan.catalog.models import Fabric, Switch
from fabricplan.topology import dragonfly
from fabricplan.topology.clos import MAX_TIERS, max_clos_ports
from fabricplan.topology.layout import DESIGNS, TopologyError

# Leaf ratios worth suggesting when a design falls short: the common oversubscribed builds.
SUGGESTED_OVERSUBSCRIPTION = (2.0, 3.0, 4.0)


def max_ports(design: str, radix: int, nics_per_node: int, o_leaf: float, o_spine: float) -> int:
    """NIC ports ``design`` reaches with switches of ``radix`` ports."""
    if design == "dragonfly":
        return dragonfly.max_ports(radix, o_leaf)
    return max_clos_ports(design, radix, nics_per_node, o_leaf, o_spine)


def check_reach(
    cat: Catalog,
    design: str,
    nodes: int,
    nics_per_node: int,
    gpus_per_node: int,
    fabric: Fabric,
    switch: Switch,
    o_leaf: float,
    o_spine: float,
) -> None:
    """Raise a :class:`TopologyError` listing alternatives if the request is out of reach."""
    rate = fabric.line_rate_gbps
    want = nodes * nics_per_node
    limit = max_ports(design, switch.radix_at(rate), nics_per_node, o_leaf, o_spine)
    if want <= limit:
        return

    def gpus(ports: int) -> str:
        return f"{ports * gpus_per_node // nics_per_node:,} GPUs"

    ideas = []
    for other in cat.entries("switch"):
        assert isinstance(other, Switch)
        r = other.radix_at(rate)
        if other.link_layer == switch.link_layer and r >= 2:
            reach = max_ports(design, r, nics_per_node, o_leaf, o_spine)
            if reach >= want:
                ideas.append(f"switch {other.id} ({r} ports at {rate:g}G, up to {gpus(reach)})")
    for other in DESIGNS:
        reach = max_ports(other, switch.radix_at(rate), nics_per_node, o_leaf, o_spine)
        if other != design and reach >= want:
            ideas.append(f"design {other} (up to {gpus(reach)})")
    for o in SUGGESTED_OVERSUBSCRIPTION:
        reach = max_ports(design, switch.radix_at(rate), nics_per_node, o, o_spine)
        if o > o_leaf and reach >= want:
            ideas.append(f"leaf oversubscription {o:g} (up to {gpus(reach)})")
            break
    tiers = "groups" if design == "dragonfly" else f"{MAX_TIERS} tiers"
    raise TopologyError(
        f"{design} with {switch.id} ({switch.radix_at(rate)} ports at {rate:g} Gb/s) reaches "
        f"at most {gpus(limit)} in {tiers}; asked for {gpus(want)}. "
        + ("Would work: " + "; ".join(ideas) if ideas else "No catalog switch reaches it.")
    )
