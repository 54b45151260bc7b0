"""Which ingress port of a switch feeds which of its egress ports, flow by flow.

Flow control acts per port: a congested egress queue pauses (PFC) or withholds credits from
(InfiniBand) the *ingress* ports its packets came in on, and a switch's arbiter shares an
egress port among its ingress ports. Both need, for every hop flow crossing an egress lane,
the lane it arrived on. Routing is fixed for a run, so the pairs are built once per seed and
every event of the run selects from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fabricplan.congestion import kernels
from fabricplan.congestion.groups import runs, unique_inverse
from fabricplan.congestion.network import Network, Routed
from fabricplan.topology.graph import LEAF


@dataclass(frozen=True)
class PortPairs:
    """(egress lane ``out``, ingress lane ``into``) of one hop flow ``flow`` at one switch, and
    the share ``weight`` of that flow's rate that enters on ``into`` and leaves on ``out``;
    ``e_out`` and ``e_in`` are the routed entries (indices into the :class:`Routed` arrays)
    the pair joins."""

    out: np.ndarray
    into: np.ndarray
    flow: np.ndarray
    weight: np.ndarray
    e_out: np.ndarray
    e_in: np.ndarray

    def __len__(self) -> int:
        return len(self.out)


def port_pairs(net: Network, routed: Routed) -> PortPairs:
    """Join every routed entry leaving a switch with the entries of the same hop flow entering
    it. A split flow (queue pairs on different paths, sprayed packets) that enters a switch on
    several lanes and leaves on several is spread in proportion: ``w_in * w_out / w_through``."""
    kind = net.graph.vertex_kind
    lane = routed.lane
    e_out = (kind[net.tail[lane]] >= LEAF).nonzero()[0]
    e_in = (kind[net.head[lane]] >= LEAF).nonzero()[0]
    vertices = np.int64(net.graph.vertices)
    k_out = routed.flow[e_out].astype(np.int64) * vertices + net.tail[lane[e_out]]
    k_in = routed.flow[e_in].astype(np.int64) * vertices + net.head[lane[e_in]]
    order = np.argsort(k_in, kind="stable")
    k_sorted = k_in[order]
    # each (flow, switch) the entries enter by: where its run starts among the sorted entries
    # and how long it is; a leaving entry looks its key up among the runs' (fewer) keys
    starts, member = runs(k_sorted)
    keys = k_sorted[starts]
    at = np.searchsorted(keys, k_out)
    hit = at < len(keys)
    hit[hit] = keys[at[hit]] == k_out[hit]
    at = at[hit]
    lo, count = np.zeros(len(k_out), np.int64), np.zeros(len(k_out), np.int64)
    lo[hit] = starts[at]
    count[hit] = np.append(starts[1:], len(k_sorted))[at] - starts[at]
    n = int(count.sum())
    first = count.cumsum() - count
    rep_out = np.repeat(e_out, count)
    rep_in = e_in[order[np.repeat(lo, count) + np.arange(n) - np.repeat(first, count)]]
    # what the flow carries through the switch: the weight of everything it brings in
    first_in = np.empty(len(k_in), np.int64)  # each entering entry's run start
    first_in[order] = starts[member]
    through = np.bincount(first_in, weights=routed.weight[e_in], minlength=len(k_sorted))
    w_through = through[np.repeat(lo, count)]
    weight = routed.weight[rep_in] * routed.weight[rep_out] / np.maximum(w_through, 1e-300)
    return PortPairs(lane[rep_out], lane[rep_in], routed.flow[rep_out], weight, rep_out, rep_in)


class PathArrivals:
    """What each port pair brings: what its flow's senders push, as far as every lane before
    it lets through. A lane fed more than it carries delivers its arrivals in proportion
    (FIFO); arrivals and lane loads are settled together, pass by pass along the paths (a lane
    can be early on one flow's path and late on another's)."""

    def __init__(
        self,
        net: Network,
        routed: Routed,
        col_of: np.ndarray,
        pp: PortPairs,
        ports: np.ndarray | None = None,
    ) -> None:
        """``ports``: the distinct (egress, ingress) lanes of ``pp`` as ``out * lanes + into``
        (:func:`port_ids`), when the caller has them."""
        self.cap = np.asarray(net.capacity, float)
        self.col_of = col_of
        self.lane, self.weight = routed.lane, routed.weight
        self.col = col_of[routed.flow]
        # entries that leave a NIC: where a flow's pushes enter the fabric
        self.first = net.graph.vertex_kind[net.tail[routed.lane]] < LEAF
        self.pp = pp
        self.levels = _entry_levels(net, self.lane, pp, ports)
        # pass by pass (small runs, or lanes in loops): as many passes as port pairs on a path
        self.passes = (
            0 if self.levels is not None else _depth(len(self.lane), pp.e_out, pp.e_in) + 1
        )

    @classmethod
    def of(
        cls,
        like: PathArrivals,
        net: Network,
        routed: Routed,
        pp: PortPairs,
        ports: np.ndarray,
        first: np.ndarray,
    ) -> PathArrivals:
        """Arrivals on new paths of ``like``'s run, from what a compiled rebuild already has
        (the port ids, which entries leave a NIC): what ``PathArrivals(net, routed,
        like.col_of, pp, ports)`` gives, without finding those again."""
        new = cls.__new__(cls)
        new.cap, new.col_of = like.cap, like.col_of
        new.lane, new.weight = routed.lane, routed.weight
        new.col = like.col_of[routed.flow]
        new.first, new.pp = first, pp
        new.levels = _entry_levels(net, routed.lane, pp, ports)
        new.passes = (
            0 if new.levels is not None else _depth(len(routed.lane), pp.e_out, pp.e_in) + 1
        )
        return new

    def brought(self, push: np.ndarray, sel: np.ndarray) -> np.ndarray:
        """GB/s each selected pair brings, for columns pushing ``push``."""
        pp = self.pp
        if len(self.lane) >= kernels.COMPILED_MIN_SIZE:
            senders = (self.lane, self.first, self.col, self.weight, np.asarray(push, float))
            pairs = (pp.e_in, pp.e_out, pp.weight, sel)
            levels = self.levels if self.levels is not None else NO_LEVELS
            return kernels.brought()(*senders, self.cap, *pairs, self.passes, levels)
        # the same passes in array code (:func:`kernels._brought`), for small runs
        start = np.where(self.first, push[self.col] * self.weight, 0.0)
        e_out, e_in = pp.e_out[sel], pp.e_in[sel]
        per_in = pp.weight[sel] / np.maximum(self.weight[e_in], 1e-300)  # pair's part
        arr = start
        bring = np.zeros(len(sel))
        lane_at, cap_at = self._compact
        lane_in, n_lanes = lane_at[e_in], len(cap_at)
        for _ in range(self.passes):
            load = np.bincount(lane_at, weights=arr, minlength=n_lanes)
            fifo = np.minimum(1.0, cap_at / np.maximum(load, 1e-300))
            bring = arr[e_in] * fifo[lane_in] * per_in
            arr = start + np.bincount(e_out, weights=bring, minlength=len(arr))
        return bring

    @cached_property
    def _compact(self) -> tuple[np.ndarray, np.ndarray]:
        """Small runs sum loads over the lanes their entries cross only, not every lane: each
        entry's place among those lanes, and their capacities (built when the array code first
        needs them: the compiled event reads every lane)."""
        lanes, lane_at = unique_inverse(self.lane)
        return lane_at, self.cap[lanes]


def _entry_levels(
    net: Network, lane: np.ndarray, pp: PortPairs, ports: np.ndarray | None
) -> tuple[np.ndarray, ...] | None:
    """A large run's entries and pairs grouped by their lane's level (orders and group
    pointers), for the arrivals' one sweep level by level; None for a small run, or where lanes
    feed each other in a loop. ``ports``: ``port_ids(net, pp.out, pp.into)[0]``, when the
    caller has them."""
    if len(lane) < kernels.COMPILED_MIN_SIZE:
        return None
    if ports is None:
        ports = port_ids(net, pp.out, pp.into)[0]
    if kernels.loaded():  # the compiled grouping a seed's compiled run uses (the same order)
        from fabricplan.congestion.rebuild_kernel import entry_levels  # imports Numba

        i64 = np.int64
        got = entry_levels(
            np.asarray(lane, i64),
            np.asarray(pp.e_in, i64),
            np.asarray(ports, i64),
            net.lanes,
            MAX_LANE_CHAIN,
        )
        return got if len(got[1]) else None
    level = lane_levels(len(net.capacity), ports % net.lanes, ports // net.lanes)
    if level is None:
        return None
    # levels are at most MAX_LANE_CHAIN: as 16-bit keys, numpy's stable sort is a radix sort
    # (the same order, a fraction of the time on 100k entries)
    entry_level = level[lane].astype(np.int16)
    pair_level = entry_level[pp.e_in]
    bins = int(level.max(initial=0)) + 2
    return (
        np.argsort(entry_level, kind="stable"),
        np.r_[0, np.cumsum(np.bincount(entry_level, minlength=bins - 1))],
        np.argsort(pair_level, kind="stable"),
        np.r_[0, np.cumsum(np.bincount(pair_level, minlength=bins - 1))],
    )


def _depth(entries: int, e_out: np.ndarray, e_in: np.ndarray) -> int:
    """The most port pairs on any flow's path: how many passes carry arrivals to its end."""
    depth = np.zeros(entries, np.int64)
    for k in range(1, entries + 1):
        nxt = np.zeros(entries, np.int64)
        np.maximum.at(nxt, e_out, depth[e_in] + 1)
        if not np.count_nonzero(nxt != depth):  # settled (cheaper than np.array_equal)
            return k - 1
        depth = nxt
    return int(depth.max(initial=0))


NO_LEVELS = tuple(np.zeros(0, np.int64) for _ in range(4))  # lanes in loops: pass by pass
# Lane chains longer than this are taken for loops (no up/down routing makes chains this
# long: a 3-tier fat-tree's are 5 pairs); arrivals then settle pass by pass.
MAX_LANE_CHAIN = 64


def lane_levels(lanes: int, into: np.ndarray, out: np.ndarray) -> np.ndarray | None:
    """Each lane's level: the most port pairs on any chain of lanes feeding it (0: fed by no
    other lane); None when lanes feed each other in a loop."""
    if kernels.loaded():
        from fabricplan.congestion.rebuild_kernel import chain_levels  # imports Numba

        settled, level = chain_levels(
            lanes, np.asarray(into, np.int64), np.asarray(out, np.int64), MAX_LANE_CHAIN
        )
        return level if settled else None
    edges = np.unique(into.astype(np.int64) * lanes + out)
    src, dst = edges // lanes, edges % lanes
    level = np.zeros(lanes, np.int64)
    for _ in range(MAX_LANE_CHAIN + 1):
        nxt = level.copy()
        np.maximum.at(nxt, dst, level[src] + 1)
        if np.array_equal(nxt, level):
            return level
        level = nxt
    return None


# Port ids come from a table of every (egress lane, ingress port) cell (5 bytes a cell) up to
# this many cells and when the pairs outnumber the cells by this share; else from sorting the
# pairs (a ring's few hundred thousand pairs over a 65k-GPU fabric's tens of millions of cells).
DENSE_PORT_CELLS = 16 * 2**20
DENSE_PAIRS_PER_CELL = 0.25


def port_ids(net: Network, out: np.ndarray, into: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ports ``out * lanes + into`` of the pairs (egress ``out``, ingress ``into``),
    sorted, and each pair's index among them: ``np.unique(..., return_inverse=True)``, found
    through a table of each egress lane's possible ingress ports (a switch has a few dozen)
    instead of sorting the tens of millions of pairs a sprayed all-to-all has."""
    lanes = net.lanes
    by_head, _, width, local, first = net.ingress_table
    cells = lanes * width
    if cells > DENSE_PORT_CELLS or len(out) < DENSE_PAIRS_PER_CELL * cells:
        return unique_inverse(out.astype(np.int64) * lanes + into)
    cell = out.astype(np.int64) * width + local[into]
    seen = np.zeros(cells, bool)
    seen[cell] = True
    index = np.cumsum(seen, dtype=np.int32) - 1
    used = np.flatnonzero(seen)
    # back to lanes: the ingress lane at that place of the switch the egress lane leaves from
    port_out = used // width
    port_in = by_head[first[net.tail[port_out]] + used % width]
    return port_out * lanes + port_in, index[cell]
