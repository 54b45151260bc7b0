"""The hop-by-hop walk of hashed routing (ECMP, and flowlet routing's first paths), compiled:
:meth:`.network.Network.route`'s loop for pieces that each take one of their switch's ports
one hop closer to their leaf, drawn uniformly, from its table of such ports.

Each seed of a small case routes its flows once: the array code's dozen calls per hop made
about a third of the router's time on an incast (105 against 70 us a call, measured on this
project's 2-core machine). The same draws come from the same generator in the same order, and
the pieces leave in the same order, so the paths are those of the array code (tested). What
the walk starts from (:class:`HashedWalk`) a network keeps for the flows it last routed: every
seed of a case routes the same flows, with draws of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabricplan.congestion.jitted import jit
from fabricplan.congestion.network import Routed


@jit
def hashed_hops(
    pieces: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    hops_to: np.ndarray,
    n_sw: int,
    table: tuple[np.ndarray, np.ndarray],
    switches: tuple[np.ndarray, np.ndarray],
    polarized: bool,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The switch lanes of pieces (flow, switch, weight, target, hash draw) from their leaves
    to their targets' leaves: hop by hop, the pieces not there yet each take the closer port
    their draw picks (one draw per piece per hop from ``rng``; ``polarized``: the piece's own
    draw at every hop). ``hops_to``: switch hops to each target (``target * n_sw + switch``);
    ``table``: per (target, switch) cell, its closer ports first and how many there are;
    ``switches``: each switch's ports (lanes) and the switches they lead to.

    Returns the lanes, their pieces' flows and weights, hop after hop."""
    flow, at, weight = pieces[0].copy(), pieces[1].copy(), pieces[2].copy()
    target, own_draw = pieces[3].copy(), pieces[4].copy()
    closer_first, count_of = table
    out, heads = switches
    n = len(flow)
    lanes = np.empty(0, np.int64)
    flows = np.empty(0, np.int64)
    weights = np.empty(0)
    while n:
        keep = 0
        for i in range(n):
            if hops_to[target[i] * n_sw + at[i]] > 0:
                flow[keep], at[keep], weight[keep] = flow[i], at[i], weight[i]
                target[keep], own_draw[keep] = target[i], own_draw[i]
                keep += 1
        n = keep
        if n == 0:
            break
        for i in range(n):
            if count_of[target[i] * n_sw + at[i]] == 0:
                raise ValueError("no route between two NICs of the fabric")
        draw = own_draw[:n] if polarized else rng.random(n)
        hop = np.empty(n, np.int64)
        for i in range(n):
            cell = target[i] * n_sw + at[i]
            col = closer_first[cell, np.int64(math.floor(draw[i] * count_of[cell]))]
            hop[i] = out[at[i], col]
            at[i] = heads[at[i], col]
        lanes = np.concatenate((lanes, hop))
        flows = np.concatenate((flows, flow[:n].astype(np.int64)))
        weights = np.concatenate((weights, weight[:n]))
    return lanes, flows, weights


@dataclass(frozen=True)
class HashedWalk:
    """Flows to route by hash over minimal paths, as :meth:`.network.Network.route` starts
    them: the pieces (flow, leaf, weight, target), the hops from each switch to each target
    (flat) and the switches' count, the table of closer ports, the switches' ports and where
    they lead, the flows' NIC up- and downlinks. Every seed of a case routes the same flows
    with its own draws, so a network keeps the last one (the array code that sets them up
    cost an incast's seed about as much as the walk)."""

    pieces: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    hops: tuple[np.ndarray, int]
    table: tuple[np.ndarray, np.ndarray]
    switches: tuple[np.ndarray, np.ndarray]
    ends: tuple[np.ndarray, np.ndarray]

    def route(self, polarized: bool, rng: np.random.Generator) -> Routed:
        """The flows' lanes: their NIC uplinks, their downlinks, then the switch lanes hop
        after hop (a polarized hash draws one number per piece first, for every tier)."""
        flow = self.pieces[0]
        u_hash = rng.random(len(flow)) if polarized else np.zeros(len(flow))
        lane, f, w = hashed_hops(
            (*self.pieces, u_hash),
            *self.hops,
            self.table,
            self.switches,
            polarized,
            rng,
        )
        up, down = self.ends
        n = len(up)
        every = np.arange(n)
        return Routed(
            np.concatenate([up, down, lane.astype(self.switches[0].dtype)]),
            np.concatenate([every, every, f]),
            np.concatenate([np.ones(n), np.ones(n), w]),
        )
