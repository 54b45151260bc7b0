"""The explicit graph of a design: every GPU, NIC and switch, every link, and their paths.

Vertices are numbered in blocks: GPUs, then one NVLink domain (NVSwitch) per node, then NICs,
then switches tier by tier. Edges are undirected, stored once as parallel arrays; parallel
cables between the same two switches are one edge with a ``width``. The congestion layer reads
the capacities and routes on its own (``congestion.network``); :meth:`FabricGraph.paths` and
the distance helpers enumerate shortest paths explicitly, for the topology tests and benchmark
that check the routing against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix

from fabricplan.topology.bfs import hop_distances
from fabricplan.topology.layout import Layout, Plane

# Distance arrays kept per graph for path queries (one float per vertex each): enough for the
# destinations of one collective's flows without holding a graph's worth of memory per query.
DISTANCE_CACHE_ENTRIES = 256

VERTEX_KINDS = ("gpu", "nvswitch", "nic", "leaf", "spine", "core")
EDGE_KINDS = ("nvlink", "pcie", "node_leaf", "leaf_spine", "spine_core", "local", "global")
GPU, NVSWITCH, NIC, LEAF, SPINE, CORE = range(len(VERTEX_KINDS))
E_NVLINK, E_PCIE, E_NODE_LEAF, E_LEAF_SPINE, E_SPINE_CORE, E_LOCAL, E_GLOBAL = range(
    len(EDGE_KINDS)
)


@dataclass
class _Edges:
    u: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)
    w: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)

    def add(self, u: np.ndarray, v: np.ndarray, width: np.ndarray | int, kind: int) -> None:
        u, v = np.asarray(u, np.int64).ravel(), np.asarray(v, np.int64).ravel()
        self.u.append(u)
        self.v.append(v)
        self.w.append(np.broadcast_to(np.asarray(width, np.int32), u.shape).copy())
        self.kind.append(np.full(u.shape, kind, np.int8))


@dataclass(frozen=True, eq=False)  # arrays do not compare; a graph is its own identity
class FabricGraph:
    nodes: int
    gpus_per_node: int
    nics_per_node: int
    vertex_kind: np.ndarray  # int8, VERTEX_KINDS
    src: np.ndarray  # int64 per edge
    dst: np.ndarray
    width: np.ndarray  # parallel links (int32)
    edge_kind: np.ndarray  # int8, EDGE_KINDS
    capacity_GBps: np.ndarray  # one direction, per edge (all parallel links)
    _distances: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    @property
    def vertices(self) -> int:
        return len(self.vertex_kind)

    @property
    def nbytes(self) -> int:
        arrays = (
            self.vertex_kind,
            self.src,
            self.dst,
            self.width,
            self.edge_kind,
            self.capacity_GBps,
        )
        return sum(a.nbytes for a in arrays)

    def gpu(self, node: int, index: int) -> int:
        return node * self.gpus_per_node + index

    def nic(self, node: int | np.ndarray, rail: int | np.ndarray) -> int | np.ndarray:
        """NIC vertex of ``rail`` on ``node`` (arrays broadcast)."""
        return self.nodes * (self.gpus_per_node + 1) + node * self.nics_per_node + rail

    def count(self, kind: int) -> int:
        return int(np.count_nonzero(self.vertex_kind == kind))

    def links(self, kind: int) -> int:
        return int(self.width[self.edge_kind == kind].sum())

    def ports_used(self) -> np.ndarray:
        """Links ending at each vertex (a switch must not exceed its radix)."""
        out = np.zeros(self.vertices, np.int64)
        np.add.at(out, self.src, self.width)
        np.add.at(out, self.dst, self.width)
        return out

    @cached_property
    def adjacency(self) -> csr_matrix:
        """Symmetric CSR adjacency; values are parallel link counts."""
        n = self.vertices
        rows, cols = np.concatenate([self.src, self.dst]), np.concatenate([self.dst, self.src])
        return csr_matrix((np.concatenate([self.width, self.width]), (rows, cols)), shape=(n, n))

    def distances_to(self, dst: int) -> np.ndarray:
        """Hops from every vertex to ``dst`` (inf where unreachable), cached per graph."""
        dist = self._distances.get(dst)
        if dist is None:
            if len(self._distances) >= DISTANCE_CACHE_ENTRIES:
                self._distances.clear()
            adj = self.adjacency  # symmetric: hops to dst are hops from it
            dist = hop_distances(adj.indptr, adj.indices, dst)
            self._distances[dst] = dist
        return dist

    def paths(self, src: int, dst: int, limit: int = 256) -> list[list[int]]:
        """All shortest paths from ``src`` to ``dst`` (vertex lists), at most ``limit``."""
        dist = self.distances_to(dst)
        if not np.isfinite(dist[src]):
            return []
        adj = self.adjacency
        out: list[list[int]] = []
        stack = [[src]]
        while stack and len(out) < limit:
            path = stack.pop()
            here = path[-1]
            if here == dst:
                out.append(path)
                continue
            nbrs = adj.indices[adj.indptr[here] : adj.indptr[here + 1]]
            stack.extend([*path, int(n)] for n in nbrs[dist[nbrs] == dist[here] - 1][::-1])
        return out

    def valiant_paths(self, src: int, via: int, dst: int, limit: int = 64) -> list[list[int]]:
        """Non-minimal paths through switch ``via`` (Valiant routing picks it at random in
        another dragonfly group): a shortest path there, then one on to ``dst``."""
        firsts = self.paths(src, via, limit)
        seconds = self.paths(via, dst, limit)
        return [a + b[1:] for a in firsts for b in seconds][:limit]

    def switch_hops(self, src: int, dst: int) -> int:
        """Switches on a shortest path between two vertices."""
        path = self.paths(src, dst, limit=1)
        if not path:
            return -1
        return int(np.count_nonzero(self.vertex_kind[path[0]] >= LEAF))


def _balanced(items: int, bins: int) -> np.ndarray:
    """Bin of each item when ``items`` are spread evenly over ``bins`` in order."""
    return (np.arange(items, dtype=np.int64) * bins) // items


def _clos_plane(e: _Edges, p: Plane, nic_ids: np.ndarray, base: int) -> int:
    """Wire one plane whose switches start at vertex ``base``; returns the next free vertex.
    ``nic_ids`` is (nodes, groups * ports_per_node): the NICs this plane serves."""
    leaves = p.leaves
    spine0 = base + leaves
    core0 = spine0 + p.spines
    node_leaf = _balanced(p.nodes, p.leaves_per_group)  # leaf within its group, per node
    for col in range(nic_ids.shape[1]):
        group = col // p.ports_per_node if p.tiers > 1 else 0
        e.add(nic_ids[:, col], base + group * p.leaves_per_group + node_leaf, 1, E_NODE_LEAF)
    if p.tiers == 1:
        return spine0
    leaf = np.arange(leaves)
    if p.tiers == 2:
        spine = np.arange(p.spines_per_pod)
        u, v = np.meshgrid(base + leaf, spine0 + spine, indexing="ij")
        e.add(u, v, p.leaf_spine_width, E_LEAF_SPINE)
        return core0
    group, within = leaf // p.leaves_per_group, leaf % p.leaves_per_group
    pod = group * p.pods_per_group + _balanced(p.leaves_per_group, p.pods_per_group)[within]
    j = np.arange(p.spines_per_pod)
    u = np.repeat(base + leaf, p.spines_per_pod)
    v = spine0 + np.repeat(pod, p.spines_per_pod) * p.spines_per_pod + np.tile(j, leaves)
    e.add(u, v, p.leaf_spine_width, E_LEAF_SPINE)
    spines = np.arange(p.spines)
    c = np.arange(p.cores_per_group)
    u = np.repeat(spine0 + spines, p.cores_per_group)
    v = core0 + np.repeat(spines % p.spines_per_pod, p.cores_per_group) * p.cores_per_group
    e.add(u, v + np.tile(c, p.spines), p.spine_core_width, E_SPINE_CORE)
    return core0 + p.cores


def _dragonfly(e: _Edges, lay: Layout, nic_ids: np.ndarray, base: int) -> int:
    d = lay.dragonfly
    groups, a, h, width = d["groups"], d["a"], d["h"], d["global_width"]
    routers = groups * a
    flat = nic_ids.ravel()
    e.add(flat, base + _balanced(len(flat), routers), 1, E_NODE_LEAF)
    i, j = np.triu_indices(a, k=1)
    offs = np.arange(groups)[:, None] * a
    e.add(base + offs + i, base + offs + j, 1, E_LOCAL)
    if groups > 1:
        gi, gj = np.triu_indices(groups, k=1)
        t = np.arange(width)
        # the k-th other group of group x takes global slots k*width .. k*width + width - 1
        slot_i = ((gj - 1) * width)[:, None] + t
        slot_j = (gi * width)[:, None] + t
        ru = base + gi[:, None] * a + slot_i // h
        rv = base + gj[:, None] * a + slot_j // h
        e.add(ru, rv, 1, E_GLOBAL)
    return base + routers


def build_graph(lay: Layout, nvlink_GBps: float, pcie_GBps: float) -> FabricGraph:
    """Every vertex and link of ``lay`` (GPUs, NVLink domains, NICs, switches)."""
    n, k, m = lay.nodes, lay.gpus_per_node, lay.nics_per_node
    gpus = n * k
    nvs0, nic0 = gpus, gpus + n
    sw0 = nic0 + n * m
    e = _Edges()
    gpu = np.arange(gpus)
    e.add(gpu, nvs0 + gpu // k, 1, E_NVLINK)
    gpu_nic = (np.arange(k) * m) // k  # GPUs share NICs evenly when there are fewer NICs
    e.add(gpu, nic0 + (gpu // k) * m + np.tile(gpu_nic, n), 1, E_PCIE)
    nic_ids = nic0 + np.arange(n * m).reshape(n, m)
    kinds = [np.full(sw0, GPU, np.int8)]
    kinds[0][nvs0:nic0] = NVSWITCH
    kinds[0][nic0:sw0] = NIC
    if lay.design == "dragonfly":
        end = _dragonfly(e, lay, nic_ids, sw0)
        kinds.append(np.full(end - sw0, LEAF, np.int8))
    else:
        nxt = sw0
        per_plane = m // len(lay.planes)
        for r, plane in enumerate(lay.planes):
            cols = nic_ids[:, r * per_plane : (r + 1) * per_plane]
            end = _clos_plane(e, plane, cols, nxt)
            tier = np.full(end - nxt, LEAF, np.int8)
            tier[plane.leaves : plane.leaves + plane.spines] = SPINE
            tier[plane.leaves + plane.spines :] = CORE
            kinds.append(tier)
            nxt = end
    src, dst = np.concatenate(e.u), np.concatenate(e.v)
    width, kind = np.concatenate(e.w), np.concatenate(e.kind)
    per_link = np.where(
        kind == E_NVLINK, nvlink_GBps, np.where(kind == E_PCIE, pcie_GBps, lay.line_rate_gbps / 8)
    )
    return FabricGraph(n, k, m, np.concatenate(kinds), src, dst, width, kind, per_link * width)
