"""Point-to-point collectives: sendrecv and alltoall.

NCCL runs these as grouped sends and receives, outside its algorithm/protocol tuner, so their
cost is built from the same ingredients: the per-step latencies of NCCL's ring (one hop), the
NIC and NVLink bandwidths, and how much of the traffic must leave the node.
"""

from __future__ import annotations

import numpy as np

from fabricplan.collectives import nccl_constants as K
from fabricplan.collectives.model import LL, RING, SIMPLE, SystemArrays, as_sizes

# Assumption: per-peer launch and proxy cost of a grouped send/recv; NCCL publishes no figure.
# Calibrate against alltoall_perf output with `fabricplan calibrate`.
P2P_PER_PEER_US = 0.5
# Channels NCCL gives one remote peer's sends (NCCL_NCHANNELS_PER_NET_PEER: 2 by default in
# 2.19, src/graph/paths.cc; from 2.2x "2 per NIC, reduced with scale"): what a plugin's
# per-channel limit leaves a single send
P2P_NET_CHANNELS_PER_PEER = 2


def _hop_latency(sa: SystemArrays, proto: int, across_nodes: np.ndarray) -> np.ndarray:
    net = K.HW_LAT_US[K.HW_NET, RING, proto] + sa.delta * (2 if proto == SIMPLE else 1)
    intra = K.HW_LAT_US[K.HW_NVLINK, RING, proto]
    return K.BASE_LAT_US[RING, proto] + np.where(across_nodes, net, intra)


def p2p_times(
    sa: SystemArrays, op: str, sizes: np.ndarray, slowdown: np.ndarray | float = 1.0
) -> np.ndarray:
    """Time (us) per (N, S, protocol) for LL and Simple (inf for LL128, unused by p2p).
    ``slowdown`` (>= 1, scalar or (N,)) stretches the time the traffic spends on the fabric."""
    sizes = as_sizes(sizes, len(sa))
    n = sa.nodes * sa.k
    multi = sa.nodes > 1
    slow = np.asarray(slowdown, dtype=float)
    if slow.shape != (len(sa),):
        slow = np.broadcast_to(slow, (len(sa),))
    out = np.full((*sizes.shape, 3), np.inf)
    if op == "sendrecv":
        # nccl-tests sends to rank+1: with several nodes one pair per node boundary uses a NIC.
        nic = np.minimum(sa.nic, P2P_NET_CHANNELS_PER_PEER * sa.ch_bw)
        link = np.where(multi, np.minimum(nic, sa.nvl) / slow, sa.nvl)
        for proto, factor in ((LL, K.RING_LL_FACTOR), (SIMPLE, 1.0)):
            lat = _hop_latency(sa, proto, multi)
            out[..., proto] = lat[:, None] + sizes / (1000.0 * link[:, None] * factor)
        return out
    if op != "alltoall":
        raise ValueError(f"{op} is not a point-to-point collective")
    # Each rank sends size/n to every peer. A node's NICs carry k ranks' traffic to the
    # (n - k) ranks outside it; each GPU's NVLink carries its traffic to the k - 1 inside.
    out_of_node = sa.k * (n - sa.k) / n / (np.maximum(sa.m, 1) * sa.nic) * slow
    in_node = (sa.k - 1) / n / sa.nvl
    per_byte = np.maximum(np.where(multi, out_of_node, 0.0), in_node)  # us per KB, below
    for proto, factor in ((LL, K.RING_LL_FACTOR), (SIMPLE, 1.0)):
        lat = _hop_latency(sa, proto, multi) + (n - 1) * P2P_PER_PEER_US
        out[..., proto] = lat[:, None] + sizes * per_byte[:, None] / (1000.0 * factor)
    return out
