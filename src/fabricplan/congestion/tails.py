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
    # Every probe's hop lanes (its flow's, in routing order) in one flat array; the loop below
    # needs only the switch output lanes, as plain Python numbers: numpy calls on a handful of
    # elements per probe would cost more than the probe's arithmetic.
    count = hi - lo
    flat = order[np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(count.sum())]
    lanes = routed.lane[flat]
    at_switch = np.flatnonzero(net.graph.vertex_kind[net.tail[lanes]] >= LEAF)
    probe_of = np.repeat(np.arange(probes), count)[at_switch]
    ends = np.searchsorted(probe_of, np.arange(probes), "right").tolist()
    position = (at_switch - np.repeat(np.cumsum(count) - count, count)[at_switch]).tolist()
    weight = routed.weight[flat][at_switch].tolist()
    lane_at = lanes[at_switch].tolist()
    capacity = net.capacity.tolist()
    mtu_s = (fab.mtu_bytes / (net.capacity * 1e3)).tolist()  # us per packet per lane
    rho_of = np.minimum(util, MAX_RHO).tolist()
    base_us: dict[int, float] = {}  # by switch hops
    out = np.empty(probes)
    start = 0
    # The random draws are those of a per-probe loop, in the same order: the hop lanes'
    # weights, then each taken switch lane's queue draw.
    for i, n in enumerate(count.tolist()):
        draw = rng.random(n).tolist()  # each hop's lanes share the flow's weight
        hops = 0
        wait = 0.0
        for k in range(start, ends[i]):
            if not draw[position[k]] < weight[k]:
                continue
            hops += 1
            lane = lane_at[k]
            samples = queue_kb.get(lane)
            if samples:
                wait += samples[rng.integers(len(samples))] * 1024 / (capacity[lane] * 1e3)
                continue
            rho = rho_of[lane]
            if rng.random() < rho:
                wait += rng.exponential(rho * mtu_s[lane] / (2 * (1 - rho)))
        start = ends[i]
        hops = max(hops, 1)
        if hops not in base_us:
            base_us[hops] = p2p_latency_us(fab, hops, switch_latency_ns)
        out[i] = base_us[hops] + wait
    return out
