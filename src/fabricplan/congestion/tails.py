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


def _switch_lanes(net: Network, routed: Routed, pick: np.ndarray
                  ) -> tuple[list[int], list[int], list[int], list[float], list[int]]:  # fmt: skip
    """For the flows ``pick``, in one pass: each one's hop lanes (``count``), and over all of
    them the switch output lanes in routing order: where each probe's end (``ends``), their
    position among their flow's lanes, weight and lane."""
    order = np.argsort(routed.flow, kind="stable")
    flow_sorted = routed.flow[order]
    lo = np.searchsorted(flow_sorted, pick, "left")
    count = np.searchsorted(flow_sorted, pick, "right") - lo
    first = np.cumsum(count) - count
    flat = order[np.repeat(lo - first, count) + np.arange(count.sum())]
    lanes = routed.lane[flat]
    at_switch = np.flatnonzero(net.graph.vertex_kind[net.tail[lanes]] >= LEAF)
    probe_of = np.repeat(np.arange(len(pick)), count)[at_switch]
    ends = np.searchsorted(probe_of, np.arange(len(pick)), "right")
    position = at_switch - np.repeat(first, count)[at_switch]
    return (count.tolist(), ends.tolist(), position.tolist(),
            routed.weight[flat][at_switch].tolist(), lanes[at_switch].tolist())  # fmt: skip


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
    """Latency samples (us) of small messages between the job's NICs under this load.

    Per probe, in this order: one uniform per hop lane of its flow (each hop's lanes share the
    flow's weight), then per switch output lane taken a queue draw: a sample of a hot lane's
    queue, or a uniform against the utilisation and, if under it, an exponential wait. The
    loop runs on plain Python numbers (numpy on a handful of elements per probe costs more than
    the probe's arithmetic) and draws exactly that sequence, merging two uniforms in one call
    where they are adjacent: a lane of full weight is always taken, so when the first switch
    lane is one, its uniform directly follows the hop lanes'."""
    if len(job_hops) == 0:
        return np.zeros(0)
    pick = rng.choice(job_hops, probes)
    count, ends, position, weight, lane_at = _switch_lanes(net, routed, pick)
    capacity = net.capacity.tolist()
    rho = np.minimum(util, MAX_RHO)
    mtu_us = fab.mtu_bytes / (net.capacity * 1e3)  # per packet per lane
    rho_of = rho.tolist()
    mean_of = (rho * mtu_us / (2 * (1 - rho))).tolist()  # M/D/1 mean wait
    one_switch_us = p2p_latency_us(fab, 1, switch_latency_ns)
    base_us: dict[int, float] = {}  # by switch hops
    random, exponential = rng.random, rng.exponential
    out = []
    k = 0
    for n, end in zip(count, ends, strict=True):
        wait = 0.0
        if k < end and weight[k] >= 1.0 and not queue_kb.get(lane_at[k]):
            draw = random(n + 1)
            lane = lane_at[k]
            if draw[n] < rho_of[lane]:
                wait += exponential(mean_of[lane])
            k += 1
            if k == end:  # the only switch lane: most probes
                out.append(one_switch_us + wait)
                continue
            draw = draw.tolist()
            hops = 1
        else:
            draw = random(n).tolist()
            hops = 0
        for j in range(k, end):  # from the lane after a merged one
            if not draw[position[j]] < weight[j]:
                continue
            hops += 1
            lane = lane_at[j]
            samples = queue_kb.get(lane)
            if samples:
                wait += samples[rng.integers(len(samples))] * 1024 / (capacity[lane] * 1e3)
            elif random() < rho_of[lane]:
                wait += exponential(mean_of[lane])
        k = end
        hops = max(hops, 1)
        if hops not in base_us:
            base_us[hops] = p2p_latency_us(fab, hops, switch_latency_ns)
        out.append(base_us[hops] + wait)
    return np.array(out, dtype=float)
