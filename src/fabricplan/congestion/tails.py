"""Small-message latency while the collective runs: base RDMA latency plus switch queueing.

A 64-byte probe follows the path of a random job connection. At a hot link it waits behind the
queue the flow-control model left there (sampled over the step); at other links it meets the
queue of an M/D/1 server at that link's utilisation: P(wait > 0) = rho and, for the tail, an
exponential with the M/D/1 mean wait rho * s / (2 (1 - rho)) for a packet service time s
(Kleinrock, Queueing Systems vol. 1, Pollaczek-Khinchine formula).
"""

from __future__ import annotations

import numpy as np

from fabricplan.catalog import Fabric
from fabricplan.collectives import p2p_latency_us
from fabricplan.congestion.network import Network, Routed
from fabricplan.topology.graph import LEAF

# Probes per case, spread over its seeds (at least PROBES_MIN per seed).
PROBES_PER_CASE = 5000
PROBES_MIN = 50
# A link never runs at full utilisation in the queueing formula (it would diverge); above this
# the hot-link model applies instead.
MAX_RHO = 0.98


def latency_under_load(
    net: Network,
    routed: Routed,
    job_hops: np.ndarray,
    util: np.ndarray,
    queue_kb: dict[int, tuple[float, ...]],
    fab: Fabric,
    switch_latency_ns: float,
    rng: np.random.Generator,
    probes: int = PROBES_MIN,
) -> np.ndarray:
    """Latency samples (us) of small messages between the job's NICs under this load."""
    if len(job_hops) == 0:
        return np.zeros(0)
    pick = rng.choice(job_hops, probes)
    order = np.argsort(routed.flow, kind="stable")
    flow_sorted = routed.flow[order]
    lo = np.searchsorted(flow_sorted, pick, "left")
    hi = np.searchsorted(flow_sorted, pick, "right")
    mtu_s = fab.mtu_bytes / (net.capacity * 1e3)  # us per packet per lane
    out = np.empty(probes)
    switch_out = net.graph.vertex_kind[net.tail] >= LEAF
    for i in range(probes):
        idx = order[lo[i] : hi[i]]
        lanes, w = routed.lane[idx], routed.weight[idx]
        taken = lanes[rng.random(len(lanes)) < w]  # each hop's lanes share the flow's weight
        hops = int(np.count_nonzero(switch_out[taken]))
        wait = 0.0
        for lane in taken[switch_out[taken]]:
            samples = queue_kb.get(int(lane))
            if samples:
                wait += samples[rng.integers(len(samples))] * 1024 / (net.capacity[lane] * 1e3)
                continue
            rho = min(util[lane], MAX_RHO)
            if rng.random() < rho:
                wait += rng.exponential(rho * mtu_s[lane] / (2 * (1 - rho)))
        out[i] = p2p_latency_us(fab, max(hops, 1), switch_latency_ns) + wait
    return out
