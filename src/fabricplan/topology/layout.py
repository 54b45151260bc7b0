"""What a sized fabric looks like, independent of how it was sized: the shared result type.

A :class:`Layout` counts switches and links per tier and says how they are wired (enough for
:mod:`fabricplan.topology.graph` to build the explicit graph). Sizing lives in
:mod:`fabricplan.topology.clos` and :mod:`fabricplan.topology.dragonfly`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DESIGNS = ("fat-tree", "rail-optimized", "rail-only", "dragonfly")
# Down:up port ratios accepted per tier: 1 is non-blocking; the scenario file's field has the
# same bound (beyond 64:1 a leaf would have fewer uplinks than any catalog switch makes sense of).
MAX_OVERSUBSCRIPTION = 64.0
# Port counts are ratios of radix and oversubscription computed in floats: a count that is a
# whole number in exact arithmetic must round to it, not one below or above.
INT_ROUNDOFF = 1e-9


class TopologyError(ValueError):
    """A request no design can meet; the message says what would work."""


@dataclass(frozen=True)
class Hops:
    """Switches crossed between two NICs, worst case (1 = both on one switch)."""

    same_rail: int
    cross_rail: int
    max: int
    cross_rail_via: str = "network"  # "nvlink" in rail-only designs
    valiant_max: int | None = None  # dragonfly non-minimal routing

    def to_dict(self) -> dict:
        out = {
            "same_rail": self.same_rail,
            "cross_rail": self.cross_rail,
            "max": self.max,
            "cross_rail_via": self.cross_rail_via,
        }
        if self.valiant_max is not None:
            out["valiant_max"] = self.valiant_max
        return out


@dataclass(frozen=True)
class Plane:
    """One folded Clos: ``groups`` groups of leaves (rails, or all leaves), each split into
    ``pods_per_group`` pods. Leaves carry ``nodes_per_leaf`` nodes with ``ports_per_node``
    ports each on that leaf; every count is per plane."""

    tiers: int  # 1, 2 or 3
    groups: int
    leaves_per_group: int
    nodes: int  # nodes attached to this plane
    ports_per_node: int  # NIC ports a node puts on one leaf
    pods_per_group: int = 1
    spines_per_pod: int = 0  # 2-tier: all spines form one "pod"
    leaf_spine_width: int = 0  # parallel links between a leaf and each spine it reaches
    cores_per_group: int = 0  # core switches each spine index reaches
    spine_core_width: int = 0

    @property
    def leaves(self) -> int:
        return self.groups * self.leaves_per_group

    @property
    def pods(self) -> int:
        return self.groups * self.pods_per_group if self.tiers == 3 else 1

    @property
    def spines(self) -> int:
        return self.pods * self.spines_per_pod if self.tiers >= 2 else 0

    @property
    def cores(self) -> int:
        return self.spines_per_pod * self.cores_per_group if self.tiers == 3 else 0


@dataclass(frozen=True)
class Layout:
    """Switch and link counts of one design, plus its reach and paths' lengths."""

    design: str
    nodes: int
    nics_per_node: int
    gpus_per_node: int
    radix: int
    line_rate_gbps: float
    switches: dict[str, int]
    links: dict[str, int]  # logical links per tier at the line rate
    hops: Hops
    bisection_links: float  # links' worth of line rate between the two halves of the nodes
    max_endpoints: int  # NIC ports the design reaches with this switch
    tiers: int
    planes: tuple[Plane, ...] = ()  # Clos designs: identical planes (rail-only: one per rail)
    dragonfly: dict[str, int] = field(default_factory=dict)  # p, a, h, groups, routers
    notes: tuple[str, ...] = ()

    @property
    def endpoints(self) -> int:
        return self.nodes * self.nics_per_node

    @property
    def bisection_GBps(self) -> float:
        return self.bisection_links * self.line_rate_gbps / 8
