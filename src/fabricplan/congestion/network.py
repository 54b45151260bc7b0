"""The fabric as the congestion layer sees it: directed lanes and hop-by-hop routing.

Every physical link becomes two *lanes* (one per direction); parallel cables between two
switches are separate lanes, because an ECMP hash picks one port, not a bundle. Routing walks
all flows one hop at a time, vectorised: at each switch the candidates are the lanes one hop
closer (in switch hops) to the destination's leaf, which are exactly the equal-cost next hops
of ECMP on Clos and minimal dragonfly routes.

Routing modes:
- ``ecmp``: each queue pair is hashed onto one candidate (uniform, a fresh seed per run);
- ``flowlet``: switch adaptive routing on flowlets (Broadcom's dynamic load balancing, Cisco
  and Arista flowlet switching; Kandula et al., "Dynamic load balancing without packet
  reordering", CCR 2007): a flow may change path only at a gap longer than the flowlet
  timeout. A switch rates its ports by load quantised into a few levels (an EWMA of the
  port's use), so the flows of a collective, which start within microseconds, find their
  peers' first packets invisible and the ports tied: each takes a port at random, steered
  only by load that was already there (other tenants), and keeps it while it sends back to
  back. Per flow, like ECMP, at the start; a flow that a PFC pause stops for longer than the
  timeout moves later (:mod:`fabricplan.congestion.flowlet`, routed on from its switch by the
  same rule, :mod:`fabricplan.congestion.move_kernel`), and a flow whose NIC interleaves it
  with so many others that every packet is a new flowlet is routed as ``adaptive``
  (``job_routes._route_job``);
- ``adaptive``: load-aware choice per packet with reordering at the NIC (InfiniBand adaptive
  routing, Spectrum-X): each flow is cut into pieces routed in rounds, each piece taking the
  least-loaded candidate given the pieces before it;
- ``spray``: every packet on a different path: the flow splits evenly over all candidates.

``polarized``: every tier hashes alike, so flows that share a port at one tier pick the same
port index at the next (hash polarization, which switches avoid by seeding each tier's hash
differently; MegaScale, NSDI 2024, and Alibaba HPN, SIGCOMM 2024, report its effect).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import csr_matrix

from fabricplan.congestion import kernels
from fabricplan.congestion.adaptive import TIE_JITTER_GBPS, adaptive_pick
from fabricplan.congestion.dragonfly_routes import DragonflyRoutes
from fabricplan.congestion.groups import first_inverse, runs, unique_inverse
from fabricplan.topology.bfs import hop_distances
from fabricplan.topology.graph import (
    E_NODE_LEAF,
    E_NVLINK,
    E_PCIE,
    LEAF,
    FabricGraph,
)

if TYPE_CHECKING:
    from fabricplan.congestion.route_kernel import HashedWalk

ROUTINGS = ("ecmp", "flowlet", "adaptive", "spray")
# Pieces per flow and routing rounds for adaptive routing: enough that the last pieces see an
# almost complete load picture (a per-packet scheme sees it exactly).
ADAPTIVE_PIECES = 8
ADAPTIVE_ROUNDS = 16
# Routing gathers each piece's candidate ports and their next hops (two int64 arrays) and a
# distance per candidate (a third): 24 bytes per piece per switch port.
ROUTE_BYTES_PER_PIECE_PORT = 24
# (piece, port) cells a spraying hop examines at once: bounds its scratch arrays to ~100 MB
# whatever the fan-out has made of the pieces.
ROUTE_BLOCK_CELLS = 1 << 22
# (target, switch, port) cells up to which a fabric keeps each switch's closer ports per
# target in a table for every seed, instead of finding them again at every hop (small fabrics:
# a 128-host fat-tree's all-to-all has 6k; building a 1,024-host one's would cost more than
# its seeds save).
CLOSER_TABLE_CELLS = 1 << 14
# Switch-to-switch hop distances kept whole (8 bytes a cell) up to this many cells: 16 MB, a
# fabric of about 1,450 switches. Every fabric to 16,384 GPUs fits (640 switches for a 3-tier
# RoCE fat-tree, 1,280 for InfiniBand's); a 65,536-GPU one (2,560) searches per set of
# targets, as every fabric did before.
ALL_DISTANCES_CELLS = 1 << 21


class RouteTooLarge(MemoryError):
    """Spraying has split a case's flows over more (lane, flow) pairs than the caller allows."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        super().__init__(f"over {entries:,} (lane, flow) pairs")


@dataclass(frozen=True)
class Routed:
    """Flow x lane incidence: ``lane[i]`` carries ``weight[i]`` of flow ``flow[i]``'s rate."""

    lane: np.ndarray
    flow: np.ndarray
    weight: np.ndarray

    def matrix(self, lanes: int, flows: int) -> csr_matrix:
        return csr_matrix((self.weight, (self.lane, self.flow)), shape=(lanes, flows))


@dataclass(frozen=True)
class Towards:
    """Per switch (local number: vertex - ``sw0``) its outgoing switch lanes ``out`` (padded with
    -1) and the switches they lead to ``heads`` (0 for padding); per flow its row of ``dist``
    (hops from each switch to the flow's leaf) and its receiver's downlink."""

    sw0: int
    out: np.ndarray
    heads: np.ndarray
    row: np.ndarray
    dist: np.ndarray
    downlink: np.ndarray

    @property
    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What a compiled router reads: ``dist``, ``out``, ``heads``, ``downlink``."""
        return self.dist, self.out, self.heads, self.downlink


def closer_ports(dist: np.ndarray, out: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Per (target, switch, port): whether the port leads one hop closer to the target
    (``dist``: hops from each switch to each target; ``out``, ``heads``: the switch table's
    lanes, -1 for padding, and the switches they lead to)."""
    return (out >= 0) & (dist[:, heads] == dist[:, :, None] - 1)


@dataclass(frozen=True)
class UpDown:
    """Per vertex its tier (NICs and below under the leaves); per lane whether it climbs a
    tier, whether it leaves a switch upwards (and those lanes), whether it enters a NIC."""

    tier: np.ndarray
    up_lane: np.ndarray
    switch_ups: np.ndarray
    is_switch_up: np.ndarray
    into_nic: np.ndarray


@dataclass(frozen=True, eq=False)
class Network:
    """Lanes of a :class:`FabricGraph` with their capacities (GB/s of payload)."""

    graph: FabricGraph
    efficiency: float  # payload share of the line rate (the fabric's NIC goodput / line rate)

    @cached_property
    def _lane_edges(self) -> tuple[np.ndarray, np.ndarray]:
        g = self.graph
        width = g.width.astype(np.int64)
        edge = np.repeat(np.arange(len(width)), width)
        return edge, np.concatenate([np.zeros(1, np.int64), np.cumsum(width)])

    @cached_property
    def tail(self) -> np.ndarray:
        edge, _ = self._lane_edges
        return np.stack([self.graph.src[edge], self.graph.dst[edge]], 1).ravel()

    @cached_property
    def head(self) -> np.ndarray:
        edge, _ = self._lane_edges
        return np.stack([self.graph.dst[edge], self.graph.src[edge]], 1).ravel()

    @cached_property
    def edge(self) -> np.ndarray:
        return np.repeat(self._lane_edges[0], 2)

    @cached_property
    def kind(self) -> np.ndarray:
        return self.graph.edge_kind[self.edge]

    @cached_property
    def capacity(self) -> np.ndarray:
        g = self.graph
        per_link = g.capacity_GBps / g.width
        network = (self.kind != E_NVLINK) & (self.kind != E_PCIE)
        return np.where(network, per_link[self.edge] * self.efficiency, per_link[self.edge])

    @property
    def lanes(self) -> int:
        return len(self.tail)

    @cached_property
    def _nic_lanes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per NIC (in vertex order): its uplink lane, downlink lane and leaf switch."""
        g = self.graph
        nic0 = g.nodes * (g.gpus_per_node + 1)
        n = g.nodes * g.nics_per_node
        up = np.full(n, -1)
        down = np.full(n, -1)
        leaf = np.full(n, -1)
        lanes = np.flatnonzero(self.kind == E_NODE_LEAF)
        from_nic = lanes[(self.tail[lanes] >= nic0) & (self.tail[lanes] < nic0 + n)]
        to_nic = lanes[(self.head[lanes] >= nic0) & (self.head[lanes] < nic0 + n)]
        # a NIC with several ports keeps the first: the collective layer counts ports as NICs
        up[self.tail[from_nic[::-1]] - nic0] = from_nic[::-1]
        down[self.head[to_nic[::-1]] - nic0] = to_nic[::-1]
        leaf[self.tail[from_nic[::-1]] - nic0] = self.head[from_nic[::-1]]
        return up, down, leaf

    def nic_index(self, nic_vertex: np.ndarray) -> np.ndarray:
        g = self.graph
        return np.asarray(nic_vertex) - g.nodes * (g.gpus_per_node + 1)

    def uplink(self, nic_vertex: np.ndarray) -> np.ndarray:
        return self._nic_lanes[0][self.nic_index(nic_vertex)]

    def downlink(self, nic_vertex: np.ndarray) -> np.ndarray:
        return self._nic_lanes[1][self.nic_index(nic_vertex)]

    def leaf_of(self, nic_vertex: np.ndarray) -> np.ndarray:
        return self._nic_lanes[2][self.nic_index(nic_vertex)]

    @cached_property
    def switch_table(self) -> tuple[int, np.ndarray, np.ndarray]:
        """First switch vertex, and per switch its outgoing switch lanes (padded with -1) and
        their heads (local switch numbers)."""
        g = self.graph
        sw0 = int(np.flatnonzero(g.vertex_kind >= LEAF)[0])
        n_sw = g.vertices - sw0
        lanes = np.flatnonzero((self.tail >= sw0) & (self.head >= sw0))
        tail = self.tail[lanes] - sw0
        order = np.argsort(tail, kind="stable")
        lanes, tail = lanes[order], tail[order]
        degree = np.bincount(tail, minlength=n_sw)
        width = max(int(degree.max(initial=0)), 1)
        slot = np.arange(len(lanes)) - np.repeat(np.cumsum(degree) - degree, degree)
        out = np.full((n_sw, width), -1, np.int64)
        out[tail, slot] = lanes
        heads = np.where(out >= 0, self.head[np.maximum(out, 0)] - sw0, -1)
        return sw0, out, heads

    @cached_property
    def ingress_table(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        """Lanes grouped by the vertex they enter (in lane order within a group): the order,
        where each group starts, the largest group, each lane's place in its group, and per
        vertex its group's start (-1: entered by no lane). Numbers a switch's ingress ports
        (:func:`fabricplan.congestion.ports.port_ids`) for every seed."""
        lanes = self.lanes
        by_head = np.lexsort((np.arange(lanes), self.head))
        starts = np.r_[0, np.flatnonzero(np.diff(self.head[by_head])) + 1]
        sizes = np.diff(np.r_[starts, lanes])
        local = np.empty(lanes, np.int64)
        local[by_head] = np.arange(lanes) - np.repeat(starts, sizes)
        first = np.full(int(self.head.max(initial=0)) + 1, -1, np.int64)
        first[self.head[by_head[starts]]] = starts
        return by_head, starts, int(sizes.max(initial=1)), local, first

    @cached_property
    def _switch_neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR neighbour lists of the switches (local numbers), each neighbour once (parallel
        lanes lead to the same switch)."""
        _, _, heads = self.switch_table
        n_sw = heads.shape[0]
        row = np.repeat(np.arange(n_sw), heads.shape[1])
        pair = np.unique(row[heads.ravel() >= 0] * n_sw + heads.ravel()[heads.ravel() >= 0])
        return np.searchsorted(pair // n_sw, np.arange(n_sw + 1)), pair % n_sw

    @cached_property
    def _heads_or_zero(self) -> np.ndarray:
        """``switch_table``'s heads with 0 for padding: a harmless index where ``out`` is -1
        (routing only takes candidates with a lane)."""
        return np.maximum(self.switch_table[2], 0)

    @cached_property
    def _last_distances(self) -> dict[bytes, np.ndarray]:
        # The last search's answer, by its targets: every seed of a case with the job on the
        # same nodes routes towards the same leaves. One entry: at 64k GPUs it is 80 MB.
        return {}

    @cached_property
    def _whole_distances(self) -> list[np.ndarray]:
        return []  # the distances to every switch, once a second set of targets is asked for

    def _distances(self, targets: np.ndarray) -> np.ndarray:
        """Switch hops from every switch to each target switch (local numbers), (T, S).

        The last answer is kept by its targets. A network asked about a second set of targets
        (other tenants' flows are routed apart from the job's, and flowlet moves look up every
        flow's receiver) keeps
        the distances to every switch instead, when they fit ``ALL_DISTANCES_CELLS``, and
        answers from them: the same numbers, one search instead of one per set."""
        key = np.asarray(targets, np.int64).tobytes()
        last, whole = self._last_distances, self._whole_distances
        if key not in last:
            n_sw = len(self._switch_neighbours[0]) - 1
            if not whole and last and n_sw * n_sw <= ALL_DISTANCES_CELLS:
                whole.append(hop_distances(*self._switch_neighbours, np.arange(n_sw)))
            last.clear()
            if whole:
                last[key] = whole[0][np.asarray(targets, np.int64)]
            else:
                last[key] = hop_distances(*self._switch_neighbours, targets)
        return last[key]

    @cached_property
    def _last_towards(self) -> dict[bytes, Towards]:
        return {}  # the last answer, by its receivers: every seed of a case asks the same

    def towards(self, dst: np.ndarray) -> Towards:
        """What a switch needs to send flows on towards NICs ``dst`` (vertices) hop by hop, as
        :meth:`route` does: the switch tables, and for each flow its receiver's downlink and its
        row of the hop counts from every switch to the receivers' leaves (shared: read only)."""
        key = np.asarray(dst, np.int64).tobytes()
        last = self._last_towards
        if key not in last:
            last.clear()
            sw0, out, _ = self.switch_table
            targets, row = unique_inverse(self.leaf_of(dst) - sw0)
            dist = np.ascontiguousarray(self._distances(targets), np.int64)
            last[key] = Towards(sw0, out, self._heads_or_zero, row, dist, self.downlink(dst))
        return last[key]

    @cached_property
    def up_down(self) -> UpDown:
        """The tiers lanes climb and descend (:class:`UpDown`; shared: read only)."""
        kind = self.graph.vertex_kind
        tier = np.where(kind >= LEAF, kind, LEAF - 1)  # NICs and below: under the leaves
        up_lane = tier[self.head] > tier[self.tail]
        switch_ups = np.flatnonzero(up_lane & (tier[self.tail] >= LEAF))
        is_switch_up = np.zeros(self.lanes, bool)
        is_switch_up[switch_ups] = True
        return UpDown(tier, up_lane, switch_ups, is_switch_up, kind[self.head] < LEAF)

    @cached_property
    def _last_closer(self) -> dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {}  # the last table, by its targets, as for the distances

    def _closer_table(
        self, targets: np.ndarray, dist: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per (target, switch) (row ``target * switches + switch``): which of the switch's
        ports lead one hop closer to the target, how many do, and the ports' columns with the
        closer ones first, in port order: what :meth:`_candidates_at` finds for one hop's
        pieces. None above ``CLOSER_TABLE_CELLS``."""
        _, out, _ = self.switch_table
        n_t, n_sw = dist.shape
        if n_t * n_sw * out.shape[1] > CLOSER_TABLE_CELLS:
            return None
        key = np.asarray(targets, np.int64).tobytes()
        last = self._last_closer
        if key not in last:
            last.clear()
            ok = closer_ports(dist, out, self._heads_or_zero).reshape(n_t * n_sw, out.shape[1])
            last[key] = (ok, ok.sum(1), np.argsort(~ok, axis=1, kind="stable"))
        return last[key]

    def route(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        mode: str,
        rng: np.random.Generator,
        qps: int = 1,
        demand: np.ndarray | None = None,
        preload: np.ndarray | None = None,
        max_entries: int | None = None,
        polarized: bool = False,
        dragonfly: str = "minimal",
    ) -> Routed:
        """Lanes of NIC-to-NIC flows ``src[i] -> dst[i]`` (NIC vertices), with weights.

        ``demand`` (GB/s per flow) and ``preload`` (GB/s per lane already used, e.g. by
        background traffic) steer adaptive routing; ECMP and spraying ignore load. Spraying
        splits a flow over every closer port at every hop, so its pieces multiply with the
        fabric's fan-out: past ``max_entries`` (lane, flow) pairs it raises
        :class:`RouteTooLarge`.
        """
        if mode not in ROUTINGS:
            raise ValueError(f"unknown routing '{mode}'; known: {', '.join(ROUTINGS)}")
        src, dst = np.asarray(src), np.asarray(dst)
        # hashed pieces (ECMP ignores load; a flowlet switch places a new flow by hash on an
        # empty fabric) over minimal paths: the compiled walk, where it runs
        hashed = mode == "ecmp" or (mode == "flowlet" and preload is None)
        minimal = dragonfly == "minimal" or not self.dragonfly_routes.has_groups
        if hashed and minimal:
            walk = self._hashed_walk(src, dst, qps)
            if walk is not None:
                return walk.route(polarized, rng)
        n = len(src)
        sw0, out, _ = self.switch_table
        s_leaf = self.leaf_of(src) - sw0
        d_leaf = self.leaf_of(dst) - sw0
        via = self.dragonfly_routes.via(s_leaf, d_leaf, dragonfly, rng, demand)
        targets, t_idx = unique_inverse(np.concatenate([d_leaf, via[via >= 0]]))
        t_via = np.full(n, -1)
        t_via[via >= 0] = t_idx[n:]
        t_idx = t_idx[:n]
        dist = self._distances(targets)
        table = self._closer_table(targets, dist)
        hops_to = dist.ravel()  # [target * switches + switch]: flat gathers beat 2-D ones
        n_sw = dist.shape[1]
        pieces = {"ecmp": qps, "flowlet": qps, "adaptive": ADAPTIVE_PIECES, "spray": 1}[mode]
        flow = np.repeat(np.arange(n), pieces)
        here = np.repeat(s_leaf, pieces)
        mass = np.full(len(flow), 1.0 / pieces)
        # a detour (Valiant) heads for its intermediate router first, then for the destination
        tgt = np.where(t_via[flow] >= 0, t_via[flow], t_idx[flow])
        then = np.where(t_via[flow] >= 0, t_idx[flow], -1)
        ends = [self.uplink(src), self.downlink(dst)]
        lanes_out = ends
        flows_out = [np.arange(n)] * len(ends)
        weights_out = [np.ones(n)] * len(ends)
        load = np.zeros(self.lanes) if preload is None else np.asarray(preload, float).copy()
        # what a flowlet switch sees when the job's flows start: the standing load only
        standing = None if preload is None else load.copy()
        rate = np.ones(n) if demand is None else np.asarray(demand, float)
        entries = len(ends) * n  # the NIC up- and downlinks above
        bounds = np.array([0, len(flow)])  # one round, but for adaptive routing
        if mode == "adaptive":
            rounds = rng.integers(0, ADAPTIVE_ROUNDS, len(flow))
            # the pieces of each round, in piece order (a stable sort keeps it within a round;
            # on 16-bit keys numpy's stable sort is a radix sort)
            by_round = np.argsort(rounds.astype(np.int16), kind="stable")
            flow, here, mass, tgt = flow[by_round], here[by_round], mass[by_round], tgt[by_round]
            then = then[by_round]
            bounds = np.searchsorted(rounds[by_round], np.arange(int(rounds.max(initial=0)) + 2))
        # a polarized hash: one draw per piece, used at every tier
        u_hash = rng.random(len(flow)) if polarized else np.zeros(len(flow))
        for a, b in itertools.pairwise(bounds.tolist()):
            f, v, w, t, u = flow[a:b], here[a:b], mass[a:b], tgt[a:b], u_hash[a:b]
            nx = then[a:b]
            while len(f):
                d_here = hops_to[t * n_sw + v]
                turn = (d_here == 0) & (nx >= 0)  # at the intermediate router: on to the end
                if turn.any():
                    t, nx = np.where(turn, nx, t), np.where(turn, -1, nx)
                    d_here = hops_to[t * n_sw + v]
                moving = d_here > 0
                f, v, w, t, d_here = f[moving], v[moving], w[moving], t[moving], d_here[moving]
                u, nx = u[moving], nx[moving]
                if not len(f):
                    break
                fast = table is not None and len(f) * out.shape[1] <= ROUTE_BLOCK_CELLS
                if fast:
                    ok_of, count_of, closer_first = table
                    cell = t * n_sw + v
                    count = count_of[cell]
                    if not count.all():
                        raise ValueError("no route between two NICs of the fabric")
                if mode == "spray":
                    if fast:
                        rows, col = ok_of[cell].nonzero()
                        lane, v = out[v[rows], col], self._heads_or_zero[v[rows], col]
                    else:
                        rows, lane, v, count = self._closer_lanes(v, t, d_here, hops_to)
                    entries += len(rows)
                    if max_entries is not None and entries > max_entries:
                        raise RouteTooLarge(entries)
                    f, w, t, u, nx = f[rows], (w / count)[rows], t[rows], u[rows], nx[rows]
                    # merge pieces of one flow that meet at the same switch
                    key = f.astype(np.int64) * out.shape[0] + v
                    first, inv = first_inverse(key)
                    lanes_out.append(lane)
                    flows_out.append(f)
                    weights_out.append(w)
                    w = np.bincount(inv, weights=w)
                    f, v, t, u, nx = f[first], v[first], t[first], u[first], nx[first]
                    continue
                if fast and hashed:
                    draw = u if polarized else rng.random(len(f))
                    col = closer_first[cell, np.floor(draw * count).astype(np.int64)]
                    lane, v = out[v, col], self._heads_or_zero[v, col]
                elif hashed:
                    at, cand, nxt, ok, count = self._candidates_at(v, t, d_here, hops_to)
                    draw = u if polarized else rng.random(len(f))
                    pick = np.floor(draw * count[at]).astype(np.int64)
                    # each (switch, target)'s closer ports first, in port order
                    closer_first = np.argsort(~ok, axis=1, kind="stable")
                    col = closer_first[at, pick]
                    lane, v = cand[at, col], nxt[at, col]
                else:
                    if fast:  # the table's rows: what _candidates_at finds, per piece
                        ok, cand, nxt = ok_of[cell], out[v], self._heads_or_zero[v]
                    else:
                        at, cand, nxt, ok, count = self._candidates_at(v, t, d_here, hops_to)
                        cand, nxt, ok, count = cand[at], nxt[at], ok[at], count[at]
                    if mode == "flowlet":  # least standing load; equal loads split at random
                        score = np.where(ok, standing[np.maximum(cand, 0)], np.inf)
                        col = np.argmin(score + rng.random(ok.shape) * TIE_JITTER_GBPS, axis=1)
                    else:  # adaptive: least loaded first, then round-robin over candidates
                        key = v.astype(np.int64) * len(targets) + t
                        col = adaptive_pick(ok, cand, count, key, load, rng)
                    row = np.arange(len(f))
                    lane, v = cand[row, col], nxt[row, col]
                np.add.at(load, lane, w * rate[f])
                lanes_out.append(lane)
                flows_out.append(f)
                weights_out.append(w)
        return Routed(
            np.concatenate(lanes_out), np.concatenate(flows_out), np.concatenate(weights_out)
        )

    @cached_property
    def _last_walk(self) -> dict[tuple[bytes, bytes, int], HashedWalk | None]:
        return {}  # the last walk, by its flows: every seed of a case routes the same ones

    def _hashed_walk(self, src: np.ndarray, dst: np.ndarray, qps: int) -> HashedWalk | None:
        """What :meth:`route` hands the compiled walk (:mod:`.route_kernel`) for flows
        ``src -> dst`` hashed over minimal paths (ECMP; flowlet routing over an empty fabric),
        made once per set of flows: only the draws differ from seed to seed. None where the walk
        does not run compiled: a process without the kernels, a fabric too large for the
        closer-port table."""
        if not kernels.loaded():
            return None
        key = (src.tobytes(), dst.tobytes(), qps)
        last = self._last_walk
        if key not in last:
            last.clear()
            last[key] = self._make_walk(src, dst, qps)
        return last[key]

    def _make_walk(self, src: np.ndarray, dst: np.ndarray, qps: int) -> HashedWalk | None:
        from fabricplan.congestion.route_kernel import HashedWalk  # imports Numba

        n = len(src)
        sw0, out, _ = self.switch_table
        targets, t_idx = unique_inverse(self.leaf_of(dst) - sw0)
        dist = self._distances(targets)
        table = self._closer_table(targets, dist)
        if table is None or n * qps * out.shape[1] > ROUTE_BLOCK_CELLS:
            return None
        flow = np.repeat(np.arange(n), qps)
        pieces = (flow, np.repeat(self.leaf_of(src) - sw0, qps), np.full(len(flow), 1.0 / qps))
        return HashedWalk(
            (*pieces, t_idx[flow]),
            (dist.ravel(), dist.shape[1]),
            (table[2], table[1]),
            (out, self._heads_or_zero),
            (self.uplink(src), self.downlink(dst)),
        )

    @cached_property
    def dragonfly_routes(self) -> DragonflyRoutes:
        """Route choice between dragonfly routers and groups (minimal, Valiant, UGAL)."""
        return DragonflyRoutes(self)

    def _candidates(
        self, v: np.ndarray, t: np.ndarray, d_here: np.ndarray, hops_to: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Per piece at switch ``v`` heading for target ``t``: its ports (lanes) and the switches
        they lead to, which of them are one hop closer, and how many are."""
        at, cand, nxt, ok, count = self._candidates_at(v, t, d_here, hops_to)
        return cand[at], nxt[at], ok[at], count[at]

    def _candidates_at(
        self, v: np.ndarray, t: np.ndarray, d_here: np.ndarray, hops_to: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """:meth:`_candidates` once per distinct (switch, target): the row of each piece, then
        the rows' ports, next switches, closer-port masks and counts. Thousands of pieces share
        a few hundred such pairs (an all-to-all's 130k flows leave 32 leaves for 32 others)."""
        _, out, _ = self.switch_table
        key = v.astype(np.int64) * (int(t.max(initial=0)) + 1) + t
        order = np.argsort(key, kind="stable")
        starts, member = runs(key[order])
        first, at = order[starts], np.empty(len(key), np.int64)  # as np.unique returns them
        at[order] = member
        v, t, d_here = v[first], t[first], d_here[first]
        cand, nxt = out[v], self._heads_or_zero[v]
        ok = (cand >= 0) & (hops_to[(t * len(out))[:, None] + nxt] == d_here[:, None] - 1)
        count = ok.sum(1)
        if (count == 0).any():
            raise ValueError("no route between two NICs of the fabric")
        return at, cand, nxt, ok, count

    def _closer_lanes(
        self, v: np.ndarray, t: np.ndarray, d_here: np.ndarray, hops_to: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Every (piece, port) one hop closer to the piece's target: the piece's row, the lane,
        the switch it leads to, and each piece's number of such ports. Gathered in blocks of
        ``ROUTE_BLOCK_CELLS`` so that the (pieces x ports) scratch stays small when spraying
        has multiplied the pieces."""
        step = max(1, ROUTE_BLOCK_CELLS // self.switch_table[1].shape[1])
        parts: list[tuple[np.ndarray, ...]] = []
        for a in range(0, len(v), step):
            block = slice(a, a + step)
            cand, nxt, ok, count = self._candidates(v[block], t[block], d_here[block], hops_to)
            rows, cols = np.nonzero(ok)
            parts.append((rows + a, cand[rows, cols], nxt[rows, cols], count))
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(x) for x in zip(*parts, strict=True))
