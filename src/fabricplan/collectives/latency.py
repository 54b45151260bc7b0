"""Collective latency: NCCL's base and per-hop latencies (src/graph/tuning.cc) by algorithm
and protocol, counted along each algorithm's path through NVLink and the network."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.indices import (
    CN_CHAIN,
    CN_DIRECT,
    NVLS,
    NVLS_TREE,
    PAT,
    RING,
    SIMPLE,
    TREE,
    A,
    P,
)

if TYPE_CHECKING:
    from fabricplan.collectives.model import SystemArrays


def ring_steps(op: str, n: np.ndarray) -> np.ndarray:
    """Steps of a ring collective over ``n`` ranks."""
    if op == "all_reduce":
        return 2 * (n - 1)
    if op in ("all_gather", "reduce_scatter"):
        return n - 1
    return n  # broadcast, reduce


def latencies(sa: SystemArrays, op: str, delta: np.ndarray, tuner: bool) -> np.ndarray:
    """The latency (us) per (N, algo, proto) of every configuration: NCCL's base and per-hop
    latencies (tuning.cc), ``delta`` (us, (N,)) added to every network step. ``tuner``: the
    ring's network steps as NCCL's tuner counts them, else those on its critical path."""
    lat = np.zeros((len(sa), A, P))
    nodes, k = sa.nodes, sa.k
    n = nodes * k
    single = nodes == 1
    multi = ~single
    ar = op == "all_reduce"
    agrs = op in ("all_gather", "reduce_scatter")
    nsteps = ring_steps(op, n)
    intra_lat = K.HW_LAT_US[K.HW_NVLINK]  # (A, P)
    net = K.HW_LAT_US[K.HW_NET]
    ppn1 = (k == 1)[:, None, None]
    inter_lat = np.where(ppn1, net[TREE][None, None, :], net[None, :, :])
    inter_lat = inter_lat + delta[:, None, None]
    inter_lat[:, :, SIMPLE] += delta[:, None]  # NCCL adds the plugin latency twice (flush)
    base = K.BASE_LAT_US[None]
    log2n = np.floor(np.log2(np.maximum(nodes, 1)))[:, None]

    if op in ("broadcast", "reduce"):
        lat[:, RING] = base[:, RING] + np.where(
            single[:, None], intra_lat[RING][None], inter_lat[:, RING]
        )
    else:
        per_proto = np.array([1.0, 1.0, K.NET_OVERHEAD_SIMPLE_MULT])  # LL, LL128, Simple
        overhead = np.where(single[:, None], 0.0, K.NET_OVERHEAD_US * per_proto)
        intra_ring = np.maximum(intra_lat[RING][None], overhead)
        n_inter = np.where(single, 0, ring_crossings(ar, nodes, k, nsteps, tuner))[:, None]
        lat[:, RING] = (
            base[:, RING] + (nsteps[:, None] - n_inter) * intra_ring + n_inter * inter_lat[:, RING]
        )
    if ar:
        lat[:, TREE] = base[:, TREE] + 2 * (
            (k - 1)[:, None] * intra_lat[TREE][None] + log2n * inter_lat[:, TREE]
        )
        lat[:, CN_DIRECT] = (
            2
            * (
                np.minimum(1, k - 1)[:, None] * intra_lat[CN_DIRECT][None]
                + (k - 1)[:, None] * K.COLLNET_DIRECT_PER_GPU_LAT_US
            )
            + inter_lat[:, CN_DIRECT]
        )
        lat[:, CN_CHAIN] = 2 * (k - 1)[:, None] * intra_lat[CN_CHAIN][None] + inter_lat[:, CN_CHAIN]
        lat[:, NVLS_TREE] = intra_lat[NVLS_TREE][None] + 2 * log2n * inter_lat[:, NVLS_TREE]
    if ar or agrs:
        lat[:, NVLS] = intra_lat[NVLS][None] + np.where(multi[:, None], inter_lat[:, NVLS], 0.0)
    if agrs:
        lat[:, PAT] = (
            base[:, PAT]
            + log2n * inter_lat[:, PAT] / K.PAT_NET_LAT_DIVISOR
            + K.PAT_PER_RANK_LAT_US * n[:, None]
        )

    return lat


def ring_crossings(
    ar: bool, nodes: np.ndarray, k: np.ndarray, nsteps: np.ndarray, tuner: bool
) -> np.ndarray:
    """Network crossings on a multi-node ring's latency path. NCCL's tuner counts one per
    node boundary less one (nNodes - 1; twice for all-reduce; tuning.cc). The collective ends
    when the last rank has its last piece, which has come nsteps hops round the ring: an
    all-gather's last piece to a rank crosses every node boundary but the one the rank sends
    over (nNodes of them when the rank's own next hop is NVLink, as it is for some rank once a
    node holds 2 GPUs); an all-reduce's reduce-scatter chain and then all-gather chain miss
    the two links either side of one rank (2 nNodes crossings once a node holds 3 GPUs, one
    less with 2). With one GPU per node every hop crosses."""
    if tuner:
        return 2 * (nodes - 1) if ar else nodes - 1
    crossings = 2 * nodes - (k == 2) if ar else nodes
    return np.minimum(crossings, nsteps)
