"""The flows a collective puts on the network, per NCCL algorithm, and where the job sits.

A *hop flow* is one NIC-to-NIC connection; hop flows that move at one rate form a *column*.
A ring channel is one column: NCCL pipelines each channel around the ring, so in steady state
every hop of the channel runs at the pace of its slowest hop. Tree channels are coupled the
same way. All-to-all and incast flows are independent columns.

Byte counts follow the algorithms: a ring all-reduce of S bytes over N ranks moves
2(N-1)/N * S / C over every hop of each of its C channels (nccl-tests doc/PERFORMANCE.md);
a tree moves S / C up and S / C down each edge; in an all-to-all each rank sends S / N to every
rank, through the NIC on the destination GPU's rail (PXN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.collectives.nccl_constants import RUNTIME_CHANNEL_FACTOR
from fabricplan.topology.graph import FabricGraph

PATTERNS = (
    "ring-allreduce",
    "tree-allreduce",
    "alltoall",
    "incast",
    "pipeline",
    "permutation",
    "flows",
)
PLACEMENTS = ("contiguous", "fragmented")
# The search finds one channel per NIC; NCCL doubles them at run time (the same factor the
# collective model uses), so each NIC carries that many ring connections.
CHANNELS_PER_NIC = RUNTIME_CHANNEL_FACTOR


@dataclass(frozen=True)
class Traffic:
    src: np.ndarray  # NIC vertex per hop flow
    dst: np.ndarray
    column: np.ndarray  # column of each hop flow
    column_bytes: np.ndarray  # bytes over each hop of a column (inf: background)
    column_nodes: list[np.ndarray]  # job nodes whose readiness a column waits for
    background: np.ndarray  # bool per column
    demand_GBps: np.ndarray  # per column: rate cap (background) or inf
    # per column: a pipeline that only sends what it has received (ring and tree channels), so
    # it never offers more than its bottleneck share; open-loop senders push at NIC speed
    self_clocked: np.ndarray

    @property
    def columns(self) -> int:
        return len(self.column_bytes)

    def plus(self, other: Traffic) -> Traffic:
        off = self.columns
        return Traffic(
            np.concatenate([self.src, other.src]),
            np.concatenate([self.dst, other.dst]),
            np.concatenate([self.column, other.column + off]),
            np.concatenate([self.column_bytes, other.column_bytes]),
            self.column_nodes + other.column_nodes,
            np.concatenate([self.background, other.background]),
            np.concatenate([self.demand_GBps, other.demand_GBps]),
            np.concatenate([self.self_clocked, other.self_clocked]),
        )


def place(
    cluster_nodes: int, job_nodes: int, placement: str, rng: np.random.Generator
) -> np.ndarray:
    """Nodes of the job in rank order: the first ones (contiguous) or a random set, sorted as
    a scheduler lists hosts (fragmented)."""
    if placement == "contiguous":
        return np.arange(job_nodes)
    if placement == "fragmented":
        return np.sort(rng.choice(cluster_nodes, job_nodes, replace=False))
    raise ValueError(f"unknown placement '{placement}'; known: {', '.join(PLACEMENTS)}")


def _columns(
    src: list[np.ndarray], dst: list[np.ndarray], nodes: list[np.ndarray], size: float
) -> Traffic:
    col = np.concatenate([np.full(len(s), i) for i, s in enumerate(src)])
    n = len(src)
    return Traffic(
        np.concatenate(src),
        np.concatenate(dst),
        col,
        np.full(n, size),
        nodes,
        np.zeros(n, bool),
        np.full(n, np.inf),
        np.ones(n, bool),
    )


def ring(
    g: FabricGraph, nodes: np.ndarray, size: float, channels: int = CHANNELS_PER_NIC
) -> Traffic:
    """Ring all-reduce: per rail and channel, node i sends to node i+1 on the same rail."""
    ranks = len(nodes) * g.gpus_per_node
    per_hop = 2 * (ranks - 1) / ranks * size / (g.nics_per_node * channels)
    nxt = np.roll(nodes, -1)
    src, dst, who = [], [], []
    if len(nodes) > 1:
        for rail in range(g.nics_per_node):
            for _ in range(channels):
                src.append(g.nic(nodes, rail))
                dst.append(g.nic(nxt, rail))
                who.append(nodes)
    return _columns(src, dst, who, per_hop)


def _btree_parent(n: int, shift: int) -> np.ndarray:
    """Parent position of each position in a binary tree over ``n`` positions (heap order),
    positions rotated by ``shift``; -1 for the root. NCCL's double binary tree uses two trees
    in which each node is a leaf in one and interior in the other; a rotated second heap is
    the same idea (each node's role differs between the trees)."""
    pos = (np.arange(n) - shift) % n
    parent_pos = np.where(pos == 0, -1, (pos - 1) // 2)
    return np.where(parent_pos < 0, -1, (parent_pos + shift) % n)


def tree(
    g: FabricGraph, nodes: np.ndarray, size: float, channels: int = CHANNELS_PER_NIC
) -> Traffic:
    """Tree all-reduce: each channel runs one of two binary trees over the nodes, reducing up
    and broadcasting down every edge at once."""
    n = len(nodes)
    per_edge = size / (g.nics_per_node * channels)
    src, dst, who = [], [], []
    if n > 1:
        for rail in range(g.nics_per_node):
            for ch in range(channels):
                parent = _btree_parent(n, shift=(ch % 2) * (n // 2))
                child = np.flatnonzero(parent >= 0)
                a = g.nic(nodes[child], rail)
                b = g.nic(nodes[parent[child]], rail)
                src.append(np.concatenate([a, b]))
                dst.append(np.concatenate([b, a]))
                who.append(nodes)
    return _columns(src, dst, who, per_edge)


def alltoall(g: FabricGraph, nodes: np.ndarray, size: float) -> Traffic:
    """All-to-all: every node pair, on every rail, as independent flows."""
    n, k, m = len(nodes), g.gpus_per_node, g.nics_per_node
    ranks = n * k
    per_flow = k * k * size / (ranks * m)
    a, b = np.nonzero(~np.eye(n, dtype=bool))
    rails = np.arange(m)
    src = g.nic(nodes[a][:, None], rails).ravel()
    dst = g.nic(nodes[b][:, None], rails).ravel()
    who = [np.array([x]) for x in np.repeat(nodes[a], m)]
    return _independent(src, dst, np.full(len(src), per_flow), who)


def incast(g: FabricGraph, nodes: np.ndarray, size: float) -> Traffic:
    """Every other node of the job sends ``size`` bytes to the first node's rail-0 NIC."""
    senders = nodes[1:]
    src = g.nic(senders, 0)
    dst = np.full(len(src), g.nic(int(nodes[0]), 0))
    return _independent(src, dst, np.full(len(src), size), [np.array([s]) for s in senders])


def pipeline(g: FabricGraph, nodes: np.ndarray, size: float) -> Traffic:
    """Pipeline-parallel sends: each node passes ``size`` bytes of activations to the next
    stage's node, split over its rails, as independent flows."""
    m = g.nics_per_node
    a, b = nodes[:-1], nodes[1:]
    rails = np.arange(m)
    src = g.nic(a[:, None], rails).ravel()
    dst = g.nic(b[:, None], rails).ravel()
    who = [np.array([x]) for x in np.repeat(a, m)]
    return _independent(src, dst, np.full(len(src), size / m), who)


def _independent(
    src: np.ndarray, dst: np.ndarray, size: np.ndarray, who: list[np.ndarray]
) -> Traffic:
    """Open-loop flows, each its own column (every sender pushes at its NIC share)."""
    cols = len(src)
    return Traffic(
        src,
        dst,
        np.arange(cols),
        np.asarray(size, float),
        who,
        np.zeros(cols, bool),
        np.full(cols, np.inf),
        np.zeros(cols, bool),
    )


def job_nics(g: FabricGraph, nodes: np.ndarray, index: np.ndarray) -> np.ndarray:
    """NIC vertices of the job's NICs numbered from 0 in the order hosts are placed (the NICs
    of the first node, rail by rail, then the next node's)."""
    m = g.nics_per_node
    index = np.asarray(index, np.int64)
    return np.asarray(g.nic(nodes[index // m], index % m))


def permutation(
    g: FabricGraph,
    nodes: np.ndarray,
    size: float,
    shift: int | None,
    rng: np.random.Generator | None = None,
) -> Traffic:
    """Every NIC of the job sends ``size`` bytes to one other: NIC i to NIC i + ``shift``
    (modulo the job's NICs), or to a random other NIC (a random derangement) when ``shift``
    is None."""
    n = len(nodes) * g.nics_per_node
    i = np.arange(n)
    if shift is None:
        rng = rng or np.random.default_rng(0)
        while True:  # a uniform derangement: about e tries
            dst = rng.permutation(n)
            if not (dst == i).any():
                break
    else:
        dst = (i + shift) % n
    src_v, dst_v = job_nics(g, nodes, i), job_nics(g, nodes, dst)
    who = [np.array([x]) for x in nodes[i // g.nics_per_node]]
    return _independent(src_v, dst_v, np.full(n, size), who)


def flow_list(
    g: FabricGraph, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray, size: np.ndarray
) -> Traffic:
    """Given flows between the job's NICs (indices from 0 in host order)."""
    who = [np.zeros(0, np.int64)] * len(src)  # they start when the file says, not on a rank
    return _independent(job_nics(g, nodes, src), job_nics(g, nodes, dst), size, who)


def flow_count(
    name: str, nodes: int, nics_per_node: int, channels: int = CHANNELS_PER_NIC, listed: int = 0
) -> int:
    """How many flows :func:`pattern` makes for ``nodes`` nodes, without making them."""
    m = nics_per_node
    counts = {
        "ring-allreduce": nodes * m * channels if nodes > 1 else 0,
        "tree-allreduce": 2 * (nodes - 1) * m * channels,
        "alltoall": nodes * (nodes - 1) * m,
        "incast": nodes - 1,
        "pipeline": (nodes - 1) * m,
        "permutation": nodes * m,
        "flows": listed,
    }
    if name not in counts:
        raise ValueError(f"unknown pattern '{name}'; known: {', '.join(PATTERNS)}")
    return counts[name]


def pattern(
    name: str,
    g: FabricGraph,
    nodes: np.ndarray,
    size: float,
    channels: int = CHANNELS_PER_NIC,
    shift: int | None = None,
    rng: np.random.Generator | None = None,
) -> Traffic:
    """The traffic of a named pattern over the job's ``nodes`` (a flow list is given, not
    made: :func:`flow_list`)."""
    if name == "permutation":
        return permutation(g, nodes, size, shift, rng)
    if name == "ring-allreduce":
        return ring(g, nodes, size, channels)
    if name == "tree-allreduce":
        return tree(g, nodes, size, channels)
    if name == "alltoall":
        return alltoall(g, nodes, size)
    if name == "incast":
        return incast(g, nodes, size)
    if name == "pipeline":
        return pipeline(g, nodes, size)
    if name == "flows":
        raise ValueError("pattern 'flows' is given as a list (flow_list), not made")
    raise ValueError(f"unknown pattern '{name}'; known: {', '.join(PATTERNS)}")


def background(
    g: FabricGraph, busy: np.ndarray, load: float, nic_GBps: float, rng: np.random.Generator
) -> Traffic:
    """Other tenants: every NIC of the nodes outside the job sends to a random NIC on its rail
    (another node) at ``load`` x its goodput, for the whole step."""
    m = g.nics_per_node
    idle = np.setdiff1d(np.arange(g.nodes), busy) if load > 0 else np.zeros(0, np.int64)
    if load <= 0 or len(idle) == 0 or g.nodes < 2:
        return Traffic(
            *(np.zeros(0, np.int64),) * 3,
            np.zeros(0),
            [],
            np.zeros(0, bool),
            np.zeros(0),
            np.zeros(0, bool),
        )
    s_node = np.repeat(idle, m)
    rail = np.tile(np.arange(m), len(idle))
    d_node = (s_node + rng.integers(1, g.nodes, len(s_node))) % g.nodes
    src = g.nic(s_node, rail)
    dst = g.nic(d_node, rail)
    cols = len(src)
    return Traffic(
        src,
        dst,
        np.arange(cols),
        np.full(cols, np.inf),
        [np.zeros(0, np.int64)] * cols,
        np.ones(cols, bool),
        np.full(cols, load * nic_GBps),
        np.zeros(cols, bool),
    )
