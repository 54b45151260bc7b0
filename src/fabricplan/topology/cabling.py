"""Which cable or optics each tier's links use, and how many of each.

Per tier the cheapest catalog option that fits is chosen (prices are catalog assumptions):
a copper or active cable whose cage matches both ends and whose reach covers the tier's
length, else fibre with a transceiver at each end (same fibre mode at both ends). Twin-port
modules and breakout cables carry two links each. Lengths are assumptions (``DEFAULT_LENGTHS``)
that callers override per tier. Which parts are bought, OEM or compatible, follows the
fabric's optics policy (``OPTICS_POLICY``) unless the caller asks for one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from fabricplan.catalog import Catalog
from fabricplan.catalog.models import Cable, LinkLayer, Nic, Switch, Transceiver
from fabricplan.topology.layout import TopologyError

Quality = Literal["oem", "compatible"]
# "policy": what the fabric's family buys by default (OPTICS_POLICY); else forced for every part.
Optics = Literal["policy", "oem", "compatible"]
OPTICS_CHOICES: tuple[Optics, ...] = ("policy", "oem", "compatible")
# What is actually bought, by fabric family. InfiniBand sites buy NVIDIA LinkX cables and optics:
# NVIDIA qualifies and supports its own parts on Quantum switches, and its SuperPOD reference
# designs list them. Ethernet optics are a multi-vendor market (MSA modules from several makers,
# qualified by the switch vendor or the buyer), priced here by the compatible entries.
OPTICS_POLICY: dict[str, Quality] = {
    "infiniband": "oem",
    "roce": "compatible",
    "uec": "compatible",
    "tcp": "compatible",
    "srd": "compatible",  # AWS EFA is rented only; its gear is never priced
}


def resolve_optics(optics: Optics, family: str) -> Quality:
    """The parts a fabric of ``family`` is priced with under ``optics``."""
    return OPTICS_POLICY[family] if optics == "policy" else optics


# Assumed cable run per tier, metres. Why: a fat-tree's leaf sits at the top of the rack
# (~2 m to a node); a rail's leaf serves nodes in several racks (DGX SuperPOD puts them in the
# scalable unit's network racks), ~20 m; leaf to spine runs along a row, ~30 m; spine to core
# crosses rows, ~100 m (beyond multimode SR4's 50 m). Dragonfly: a group spans a few racks.
DEFAULT_LENGTHS: dict[str, dict[str, float]] = {
    "fat-tree": {"node_leaf": 2.0, "leaf_spine": 30.0, "spine_core": 100.0},
    "rail-optimized": {"node_leaf": 20.0, "leaf_spine": 30.0, "spine_core": 100.0},
    "rail-only": {"node_leaf": 20.0, "leaf_spine": 30.0, "spine_core": 100.0},
    "dragonfly": {"node_leaf": 2.0, "local": 10.0, "global": 100.0},
}


@dataclass(frozen=True)
class TierMedia:
    """The physical parts that carry one tier's links."""

    tier: str
    links: int
    length_m: float
    medium: str  # dac, acc, aoc or optical
    cables: int  # copper/AOC cables, or fibres for optical links
    cable_id: str
    transceivers: dict[str, int] = field(default_factory=dict)
    power_w: float = 0.0
    cost_usd: float = 0.0
    cost_range_usd: tuple[float, float] = (0.0, 0.0)  # at every part's low and high price
    no_public_price: tuple[str, ...] = ()  # parts priced without any public price
    no_listing_cited: tuple[str, ...] = ()  # parts priced by a stated assumption, no listing
    oem_fallback: tuple[str, ...] = ()  # OEM parts used where compatible ones were asked for

    def to_dict(self) -> dict:
        return {
            "links": self.links,
            "length_m": self.length_m,
            "medium": self.medium,
            "cable": self.cable_id,
            "cables": self.cables,
            "transceivers": self.transceivers,
            "power_w": self.power_w,
            "cost_usd": self.cost_usd,
            "cost_range_usd": list(self.cost_range_usd),
            "no_public_price": list(self.no_public_price),
            "no_listing_cited": list(self.no_listing_cited),
            "oem_fallback": list(self.oem_fallback),
        }


@dataclass(frozen=True)
class End:
    """One end of a tier's links: a switch port or a NIC port."""

    cage: str
    host: bool  # a NIC: single-port cages take single-port modules only
    max_module_ports: int = 2
    max_module_gbps: float = float("inf")  # the cage's electrical lanes: 1.6T needs 1.6T cages


def switch_end(switch: Switch) -> End:
    return End(cage=switch.cage, host=False, max_module_gbps=switch.cage_gbps)


def nic_end(nic: Nic) -> End:
    return End(
        cage=nic.cage,
        host=True,
        max_module_ports=nic.ports,
        max_module_gbps=nic.ports * nic.port_speed_gbps,
    )


def _wanted(
    item: Cable | Transceiver, layer: LinkLayer, rate: float, length: float, optics: Quality
) -> bool:
    return (
        layer in item.link_layers
        and item.link_speed_gbps >= rate
        and item.max_length_m >= length
        and (optics == "compatible" or item.oem)
    )


class _PerLink(NamedTuple):
    """One way to build a link: its price and power per link, and the parts it takes."""

    cost_usd: float
    power_w: float
    medium: str
    cable: Cable  # the copper/AOC cable, or the fibre of an optical link
    modules: tuple[Transceiver, ...] = ()  # one per end of an optical link

    @property
    def parts(self) -> tuple[Cable | Transceiver, ...]:
        return (self.cable, *self.modules)

    def band(self) -> tuple[float, float]:
        """Price per link at every part's low and at every part's high price."""
        if not self.modules:
            low, high = self.cable.price.band
            return low / self.cable.breakout, high / self.cable.breakout
        bands = [self.cable.price.band] + [
            (t.price.band[0] / t.ports, t.price.band[1] / t.ports) for t in self.modules
        ]
        return sum(b[0] for b in bands), sum(b[1] for b in bands)


def _cable_options(
    cat: Catalog, layer: LinkLayer, rate: float, length: float, a: End, b: End, optics: Quality
) -> list[_PerLink]:
    kind = "switch-host" if b.host else "switch-switch"
    out = []
    for c in cat.entries("cable"):
        assert isinstance(c, Cable)
        if c.medium == "fiber" or not _wanted(c, layer, rate, length, optics):
            continue
        if c.form_factor != a.cage or c.ends not in (kind, "any"):
            continue
        if b.host and c.breakout == 1 and c.form_factor != b.cage:
            continue
        out.append(_PerLink(c.price.usd / c.breakout, c.power_w / c.breakout, c.medium, c))
    return out


def _optical_options(
    cat: Catalog, layer: LinkLayer, rate: float, length: float, a: End, b: End, optics: Quality
) -> list[_PerLink]:
    """Fibre plus the cheapest module (per link) at each end, for each fibre mode."""
    out = []
    for mode in ("multimode", "singlemode"):
        fibres = [
            c
            for c in cat.entries("cable")
            if isinstance(c, Cable)
            and c.medium == "fiber"
            and c.fiber_mode == mode
            and _wanted(c, layer, 0, length, "compatible")
        ]
        ends = []
        for end in (a, b):
            mods = [
                t
                for t in cat.entries("transceiver")
                if isinstance(t, Transceiver)
                and t.fiber_mode == mode
                and t.form_factor == end.cage
                and t.ports <= end.max_module_ports
                and t.speed_gbps <= end.max_module_gbps
                and _wanted(t, layer, rate, length, optics)
            ]
            ends.append(min(mods, key=lambda t: t.price.usd / t.ports, default=None))
        if not fibres or ends[0] is None or ends[1] is None:
            continue
        fibre = min(fibres, key=lambda f: f.price.usd)
        modules = (ends[0], ends[1])
        cost = fibre.price.usd + sum(t.price.usd / t.ports for t in modules)
        power = sum(t.power_w / t.ports for t in modules)
        out.append(_PerLink(cost, power, "optical", fibre, modules))
    return out


def choose_media(
    cat: Catalog,
    tier: str,
    links: int,
    length: float,
    layer: LinkLayer,
    rate: float,
    a: End,
    b: End,
    optics: Quality = "oem",
) -> TierMedia:
    """The cheapest way to build ``links`` links of one tier. Compatible parts wanted but
    missing fall back to OEM ones, and the tier names them (``oem_fallback``)."""
    if links == 0:
        return TierMedia(tier, 0, length, "none", 0, "")
    options: list[_PerLink] = []
    qualities: tuple[Quality, ...] = (optics, "oem")
    for quality in qualities:
        options = _cable_options(cat, layer, rate, length, a, b, quality)
        options += _optical_options(cat, layer, rate, length, a, b, quality)
        if options:
            break
    if not options:
        raise TopologyError(
            f"no cable or transceiver in the catalog joins {a.cage} to {b.cage} ports at "
            f"{rate:g} Gb/s ({layer}) over {length:g} m for the {tier} tier; add one with "
            "--catalog FILE or change the cable length"
        )
    best = min(options, key=lambda o: o.cost_usd)
    if best.medium == "optical":
        cables = links
        ends: dict[Transceiver, int] = {}
        for t in best.modules:
            ends[t] = ends.get(t, 0) + 1
        # each end of every link needs a module port; twin-port modules serve two links
        modules = {t.id: math.ceil(links * n / t.ports) for t, n in ends.items()}
    else:
        cables = math.ceil(links / best.cable.breakout)
        modules = {}
    low, high = best.band()
    parts = dict.fromkeys(p.id for p in best.parts)  # ordered, without repeats
    by_id = {p.id: p for p in best.parts}
    return TierMedia(
        tier,
        links,
        length,
        best.medium,
        cables,
        best.cable.id,
        modules,
        power_w=best.power_w * links,
        cost_usd=best.cost_usd * links,
        cost_range_usd=(low * links, high * links),
        no_public_price=tuple(i for i in parts if not by_id[i].price.public),
        no_listing_cited=tuple(i for i in parts if by_id[i].price.status == "assumption"),
        oem_fallback=tuple(i for i in parts if optics == "compatible" and by_id[i].oem),
    )
