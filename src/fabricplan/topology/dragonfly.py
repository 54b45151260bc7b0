"""Dragonfly sizing (Kim, Dally, Scott, Abts, ISCA 2008).

Routers with ``p`` endpoint ports, ``a - 1`` local ports (every router of a group linked to
every other) and ``h`` global ports. The balanced choice ``a = 2p = 2h`` keeps local and global
channels as loaded as the endpoint links under uniform traffic; the leaf oversubscription ``o``
sets ``p = o*h``. Groups are fully connected by global links, so at most ``a*h + 1`` groups.

Minimal routing crosses at most 4 routers (source, the group's gateway, the destination
group's gateway, destination); Valiant routing detours through a random intermediate group
and crosses at most 6.
"""

from __future__ import annotations

import math

from fabricplan.topology.layout import INT_ROUNDOFF, Hops, Layout, TopologyError


def router_shape(radix: int, oversubscription: float) -> tuple[int, int, int]:
    """(p, a, h) for a router of ``radix`` ports: ``p + (a - 1) + h <= radix``, ``a = 2h``."""
    h = math.floor((radix + 1) / (oversubscription + 3) + INT_ROUNDOFF)
    p = math.floor(oversubscription * h + INT_ROUNDOFF)
    return p, 2 * h, h


def max_ports(radix: int, oversubscription: float) -> int:
    p, a, h = router_shape(radix, oversubscription)
    return a * p * (a * h + 1)


def size_dragonfly(
    nodes: int,
    nics_per_node: int,
    gpus_per_node: int,
    radix: int,
    line_rate_gbps: float,
    oversubscription: float = 1.0,
) -> Layout:
    p, a, h = router_shape(radix, oversubscription)
    if h < 1 or p < 1:
        raise TopologyError(f"a {radix}-port router is too small for a dragonfly")
    ports = nodes * nics_per_node
    routers = math.ceil(ports / p)
    groups = math.ceil(routers / a)
    if groups > a * h + 1:
        raise TopologyError("needs more groups than global ports allow")
    per_group = a if groups > 1 else routers
    # Spread the global ports of each group evenly over the other groups.
    width = (a * h) // (groups - 1) if groups > 1 else 0
    local = groups * per_group * (per_group - 1) // 2
    global_links = groups * (groups - 1) // 2 * width
    if groups == 1:
        same = 1 if routers == 1 else 2
        hops = Hops(same_rail=same, cross_rail=same, max=same, valiant_max=same)
        half = per_group // 2
        cut = float(half * (per_group - half))  # local links across a split of one group
    else:
        hops = Hops(same_rail=4, cross_rail=4, max=4, valiant_max=6)
        half = groups // 2
        cut = float(half * (groups - half) * width)
    return Layout(
        design="dragonfly",
        nodes=nodes,
        nics_per_node=nics_per_node,
        gpus_per_node=gpus_per_node,
        radix=radix,
        line_rate_gbps=line_rate_gbps,
        switches={"leaf": groups * per_group, "spine": 0, "core": 0},
        links={"node_leaf": ports, "local": local, "global": global_links},
        hops=hops,
        bisection_links=min(nodes // 2 * nics_per_node, cut),
        max_endpoints=max_ports(radix, oversubscription),
        tiers=1,
        dragonfly={
            "p": p,
            "a": per_group,
            "h": h,
            "groups": groups,
            "routers": groups * per_group,
            "global_width": width,
        },
        notes=(f"routers: {p} endpoint, {per_group - 1} local and {h} global ports each",),
    )
