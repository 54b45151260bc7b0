"""Folded-Clos sizing: fat-tree, rail-optimized and rail-only designs of up to three tiers.

The rules, with ``k`` the switch radix at the line rate and ``o`` a tier's oversubscription
(down:up ports):

- a leaf gives ``d = floor(k*o/(1+o))`` ports to nodes and the rest to spines; it needs
  ``ceil(used/o)`` uplinks;
- two tiers while every leaf can reach every spine: the fewest spines ``S`` such that every
  leaf has the same number of parallel links to every spine (uplinks rounded up to a multiple
  of ``S`` where the leaf has spare ports), so ECMP spreads evenly (:func:`spread`);
- three tiers otherwise: leaves form pods of at most ``d_spine`` leaves with their own spines
  (sized by the same rule); spine ``j`` of every pod connects to core group ``j``.
  In rail-optimized designs pods never mix rails.

This reproduces NVIDIA's DGX SuperPOD reference architectures (QM9700, 8 rails): 32, 64 and
128 nodes give 8/4, 16/8, 32/16 leaf/spine switches and 256/512/1024 leaf-spine links; 512
nodes give 128 leaf, 128 spine and 64 core switches (docs/topology.md).
"""

from __future__ import annotations

import math

import numpy as np

from fabricplan.topology.layout import INT_ROUNDOFF, Hops, Layout, Plane, TopologyError

MAX_TIERS = 3  # deeper Clos fabrics are not built for GPU clusters


def worst_hops(tiers: int) -> int:
    """Switches on the longest up-down path of a folded Clos: up every tier and down again."""
    return 2 * tiers - 1


def split_ports(radix: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a switch with ``radix`` ports at this down:up ratio."""
    down = math.floor(radix * oversubscription / (1 + oversubscription) + INT_ROUNDOFF)
    return down, radix - down


def spread(up: int, below: int, upper_ports: int, spare: int) -> tuple[int, int] | None:
    """Fewest upper switches ``S`` for ``below`` lower switches that each need ``up`` uplinks
    and may use up to ``spare`` ports for them, giving every lower switch the same number of
    parallel links ``w`` to every upper one (so ECMP spreads evenly) with ``below * w`` at most
    ``upper_ports``. Returns (S, w), or None when no such S exists."""
    for count in range(max(math.ceil(below * up / upper_ports), 1), up + 1):
        width = math.ceil(up / count)
        if below * width <= upper_ports and count * width <= spare:
            return count, width
    return None


def max_plane_ports(radix: int, o_leaf: float, o_spine: float, tiers: int) -> int:
    """NIC ports one plane reaches with ``tiers`` tiers of this switch (every port used)."""
    d, _ = split_ports(radix, o_leaf)
    ds, _ = split_ports(radix, o_spine)
    return {1: radix, 2: radix * d, 3: radix * ds * d}[tiers]


def max_clos_ports(
    design: str, radix: int, nics_per_node: int, o_leaf: float, o_spine: float
) -> int:
    """NIC ports a Clos design reaches in :data:`MAX_TIERS` tiers (rail-only: per rail)."""
    per_plane = max_plane_ports(radix, o_leaf, o_spine, MAX_TIERS)
    return per_plane * nics_per_node if design == "rail-only" else per_plane


def size_plane(
    nodes: int, ports_per_node: int, groups: int, radix: int, o_leaf: float, o_spine: float
) -> Plane:
    """Size one Clos plane: ``groups`` leaf groups (rails) of ``nodes`` nodes each."""
    k = radix
    if nodes * ports_per_node * groups <= k:
        return Plane(
            tiers=1,
            groups=1,
            leaves_per_group=1,
            nodes=nodes,
            ports_per_node=ports_per_node * groups,
        )
    d, u = split_ports(k, o_leaf)
    per_leaf = d // ports_per_node
    if per_leaf == 0 or u == 0:
        raise TopologyError(
            f"a leaf with {k} ports at oversubscription {o_leaf:g} has {d} node ports, fewer "
            f"than the {ports_per_node} ports one node needs; use a rail design or a "
            "lower oversubscription"
        )
    leaves = math.ceil(nodes / per_leaf)
    fullest = math.ceil(nodes / leaves) * ports_per_node
    up = math.ceil(fullest / o_leaf - INT_ROUNDOFF)
    two = spread(up, groups * leaves, k, k - fullest)
    if two is not None:
        return Plane(
            tiers=2,
            groups=groups,
            leaves_per_group=leaves,
            nodes=nodes,
            ports_per_node=ports_per_node,
            spines_per_pod=two[0],
            leaf_spine_width=two[1],
        )
    ds, us = split_ports(k, o_spine)
    pods_per_group = math.ceil(leaves / ds)
    pod_leaves = math.ceil(leaves / pods_per_group)
    pod = spread(up, pod_leaves, ds, k - fullest)
    assert pod is not None  # pod_leaves <= ds: one link from each leaf to each of `up` spines
    pod_spines, width = pod
    spine_up = math.ceil(pod_leaves * width / o_spine - INT_ROUNDOFF)
    pods = groups * pods_per_group
    core = spread(spine_up, pods, k, k - pod_leaves * width) if us else None
    if core is None:
        raise TopologyError("needs a fourth tier")
    return Plane(
        tiers=3,
        groups=groups,
        leaves_per_group=leaves,
        nodes=nodes,
        ports_per_node=ports_per_node,
        pods_per_group=pods_per_group,
        spines_per_pod=pod_spines,
        leaf_spine_width=width,
        cores_per_group=core[0],
        spine_core_width=core[1],
    )


def _plane_links(p: Plane) -> dict[str, int]:
    up = p.spines_per_pod * p.leaf_spine_width
    spine_up = p.cores_per_group * p.spine_core_width
    return {
        "node_leaf": p.nodes * p.ports_per_node * p.groups,
        "leaf_spine": p.leaves * up if p.tiers >= 2 else 0,
        "spine_core": p.spines * spine_up if p.tiers == 3 else 0,
    }


def _plane_hops(p: Plane, rail_groups: bool) -> tuple[int, int]:
    """(same-rail, cross-rail) worst-case switch hops inside one plane: from the highest tier
    a path between two such NICs must climb to."""
    if p.tiers == 1 or (rail_groups and p.leaves_per_group == 1):
        same = 1  # one switch holds them (rail designs: the rail's only leaf)
    elif p.tiers == 2 or p.pods == 1 or (rail_groups and p.pods_per_group == 1):
        same = 2  # one pod holds them
    else:
        same = 3
    # different rails meet only at the top of a rail-grouped plane
    cross = p.tiers if rail_groups else same
    return worst_hops(same), worst_hops(cross)


def _plane_bisection(p: Plane) -> float:
    """Links' worth of capacity (max-flow) from the first to the last floor(nodes/2) nodes.

    Pairs inside a leaf need no uplink, pairs inside a pod no core link, so the flow is: the
    pairs each leaf switches locally, then each pod's pairs between its leaves (limited by
    their uplinks), then what is left crosses the core (limited by each pod's spine uplinks).
    Leaves spread their links evenly over spines and spines over cores, which makes this
    greedy order optimal; tests check it against max-flow on the explicit graph.
    """
    n, lg = p.nodes, p.leaves_per_group
    half = n // 2
    if p.tiers == 1:
        return float(half * p.ports_per_node * p.groups)
    leaf = (np.arange(n) * lg) // n
    a = np.bincount(leaf[:half], minlength=lg) * p.ports_per_node
    b = np.bincount(leaf[n - half :], minlength=lg) * p.ports_per_node
    local = np.minimum(a, b)
    up = p.spines_per_pod * p.leaf_spine_width
    ea, eb = np.minimum(a - local, up), np.minimum(b - local, up)
    if p.tiers == 2:  # one pod holding every group's leaves
        xa, yb = ea.sum() * p.groups, eb.sum() * p.groups
        return float(local.sum() * p.groups + min(xa, yb))
    pod = (np.arange(lg) * p.pods_per_group) // lg
    xa = np.bincount(pod, ea, minlength=p.pods_per_group)
    yb = np.bincount(pod, eb, minlength=p.pods_per_group)
    pairs = np.minimum(xa, yb)
    core_cap = p.spines_per_pod * p.cores_per_group * p.spine_core_width
    ra, rb = np.minimum(xa - pairs, core_cap), np.minimum(yb - pairs, core_cap)
    inside = (local.sum() + pairs.sum()) * p.groups
    return float(inside + min(ra.sum() * p.groups, rb.sum() * p.groups))


def size_clos(
    design: str,
    nodes: int,
    nics_per_node: int,
    gpus_per_node: int,
    radix: int,
    line_rate_gbps: float,
    o_leaf: float = 1.0,
    o_spine: float = 1.0,
) -> Layout:
    """Size a fat-tree, rail-optimized or rail-only fabric for ``nodes`` nodes."""
    m = nics_per_node
    if design == "fat-tree":
        plane, planes, rails = size_plane(nodes, m, 1, radix, o_leaf, o_spine), 1, False
    elif design == "rail-optimized":
        plane, planes, rails = size_plane(nodes, 1, m, radix, o_leaf, o_spine), 1, True
    elif design == "rail-only":
        plane, planes, rails = size_plane(nodes, 1, 1, radix, o_leaf, o_spine), m, False
    else:
        raise ValueError(f"not a Clos design: {design}")
    links = {key: n * planes for key, n in _plane_links(plane).items()}
    switches = {
        "leaf": plane.leaves * planes,
        "spine": plane.spines * planes,
        "core": plane.cores * planes,
    }
    same, cross = _plane_hops(plane, rails)
    if design == "rail-only":
        # no path between rails: NCCL (PXN) moves the data over NVLink to the GPU on the
        # destination's rail first, so cross-rail traffic sees the same-rail switch hops.
        hops = Hops(same_rail=same, cross_rail=same, max=same, cross_rail_via="nvlink")
    else:
        hops = Hops(same_rail=same, cross_rail=cross, max=max(same, cross))
    notes = []
    if plane.tiers < 3 and o_spine != 1.0:
        notes.append(f"spine oversubscription {o_spine:g} unused: the design has no core tier")
    if plane.tiers == 1 and design != "rail-only":
        notes.append("all NICs fit one switch: the rails share it")
    return Layout(
        design=design,
        nodes=nodes,
        nics_per_node=m,
        gpus_per_node=gpus_per_node,
        radix=radix,
        line_rate_gbps=line_rate_gbps,
        switches=switches,
        links=links,
        hops=hops,
        bisection_links=_plane_bisection(plane) * planes,
        max_endpoints=max_clos_ports(design, radix, m, o_leaf, o_spine),
        tiers=plane.tiers,
        planes=(plane,) * planes,
        notes=tuple(notes),
    )
