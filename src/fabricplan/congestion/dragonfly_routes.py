"""Route choice between dragonfly routers: minimal, Valiant or UGAL.

A detour is planned per flow before the hop-by-hop walk (:meth:`Network.route`), which then
takes each leg, to the intermediate router and on to the destination, with the fabric's
per-hop choice (ECMP, adaptive, ...).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix

from fabricplan.topology.graph import E_GLOBAL, E_LOCAL

if TYPE_CHECKING:
    from fabricplan.congestion.network import Network

# Route choice between dragonfly routers (the per-hop choice applies within each leg).
DRAGONFLY_ROUTINGS = ("minimal", "valiant", "ugal")


class DragonflyRoutes:
    """The router groups of a dragonfly and the detours its flows take."""

    def __init__(self, net: Network) -> None:
        self.net = net

    @cached_property
    def has_groups(self) -> bool:
        """Whether the fabric is a dragonfly (routers joined in groups by local links): else
        every flow goes minimally, whatever route choice is asked."""
        return bool((self.net.graph.edge_kind == E_LOCAL).any())

    @cached_property
    def router_group(self) -> np.ndarray:
        """Dragonfly group of every switch (local numbers): the routers joined by local links."""
        from scipy.sparse.csgraph import connected_components

        g = self.net.graph
        sw0, _, _ = self.net.switch_table
        n_sw = g.vertices - sw0
        local = np.flatnonzero(g.edge_kind == E_LOCAL)
        adj = csr_matrix(
            (np.ones(len(local)), (g.src[local] - sw0, g.dst[local] - sw0)), shape=(n_sw, n_sw)
        )
        return connected_components(adj, directed=False)[1]

    def via(
        self,
        s_leaf: np.ndarray,
        d_leaf: np.ndarray,
        dragonfly: str,
        rng: np.random.Generator,
        demand: np.ndarray | None,
    ) -> np.ndarray:
        """Per flow, the intermediate router of a Valiant detour (local number), or -1 for a
        minimal route. ``valiant``: every flow between two routers detours through a random
        third router (Valiant & Brebner 1981; in a third group for flows between groups, as
        Kim et al., ISCA 2008). ``ugal``: the flows between two routers (two groups) go
        minimally while the direct local (global) links have room, and the rest detour: the
        fluid form of UGAL-G, which sends a packet minimally until its queue beats a detour's."""
        n = len(s_leaf)
        none = np.full(n, -1)
        if dragonfly == "minimal" or not self.has_groups:
            return none
        if dragonfly not in DRAGONFLY_ROUTINGS:
            raise ValueError(
                f"unknown dragonfly routing '{dragonfly}'; known: {', '.join(DRAGONFLY_ROUTINGS)}"
            )
        grp = self.router_group
        routers = len(grp)
        apart = s_leaf != d_leaf
        if routers < 3 or not apart.any():
            return none
        same = grp[s_leaf] == grp[d_leaf]
        lo, hi = np.minimum(s_leaf, d_leaf), np.maximum(s_leaf, d_leaf)
        pick = rng.integers(0, routers - 2, n)  # a router other than the two ends
        pick = pick + (pick >= lo)
        pick = pick + (pick >= hi)
        n_groups = int(grp.max()) + 1
        g_lo = np.minimum(grp[s_leaf], grp[d_leaf])
        g_hi = np.maximum(grp[s_leaf], grp[d_leaf])
        if n_groups >= 3:  # between groups: a router of a third group
            members = np.argsort(grp, kind="stable")
            first = np.searchsorted(grp[members], np.arange(n_groups))
            size = np.bincount(grp, minlength=n_groups)
            third = rng.integers(0, n_groups - 2, n)
            third = third + (third >= g_lo)
            third = third + (third >= g_hi)
            pick = np.where(same, pick, members[first[third] + rng.integers(0, size[third])])
        detour = apart.copy()
        if dragonfly == "ugal":
            rate = np.ones(n) if demand is None else np.asarray(demand, float)
            key, room = self._direct_capacity
            k = np.where(same, lo * routers + hi, routers * routers + g_lo * n_groups + g_hi)
            pos = np.minimum(np.searchsorted(key, k), len(key) - 1)
            has = key[pos] == k
            want = np.bincount(pos[apart & has], weights=rate[apart & has], minlength=len(key))
            p_min = np.where(has, np.minimum(1.0, room / np.maximum(want, 1e-300))[pos], 0.0)
            detour = apart & (rng.random(n) >= p_min)
        return np.where(detour, pick, -1)

    @cached_property
    def _direct_capacity(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted keys of router pairs (local links) and group pairs (global links), and the
        GB/s of direct links each pair has in one direction."""
        g = self.net.graph
        sw0, _, _ = self.net.switch_table
        grp = self.router_group
        routers, n_groups = len(grp), int(grp.max()) + 1
        keys, caps = [], []
        for kind in (E_LOCAL, E_GLOBAL):
            e = np.flatnonzero(g.edge_kind == kind)
            a, b = g.src[e] - sw0, g.dst[e] - sw0
            base, span = 0, routers
            if kind == E_GLOBAL:
                a, b = grp[a], grp[b]
                base, span = routers * routers, n_groups
            keys.append(base + np.minimum(a, b) * span + np.maximum(a, b))
            caps.append(g.capacity_GBps[e] * self.net.efficiency)
        uniq, inv = np.unique(np.concatenate(keys), return_inverse=True)
        return uniq, np.bincount(inv, weights=np.concatenate(caps))
