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


def _switch_lanes(net: Network, routed: Routed, pick: np.ndarray) -> tuple[np.ndarray, ...]:
    """For the flows ``pick``, in one pass: each one's hop lanes (``count``), and over all of
    them the switch output lanes in routing order: each probe's range of them (``start``,
    ``end``), their position among their flow's lanes, weight and lane."""
    order = np.argsort(routed.flow, kind="stable")  # each flow's lanes together, in order
    per_flow = np.bincount(routed.flow, minlength=int(pick.max(initial=0)) + 1)
    lo = (np.cumsum(per_flow) - per_flow)[pick]
    count = per_flow[pick]
    first = np.cumsum(count) - count
    flat = order[np.repeat(lo - first, count) + np.arange(count.sum())]
    lanes = routed.lane[flat]
    at_switch = np.flatnonzero(net.graph.vertex_kind[net.tail[lanes]] >= LEAF)
    probe_of = np.repeat(np.arange(len(pick)), count)[at_switch]
    end = np.searchsorted(probe_of, np.arange(len(pick)), "right")
    start = np.concatenate([[0], end[:-1]])
    position = at_switch - np.repeat(first, count)[at_switch]
    return count, start, end, position, routed.weight[flat][at_switch], lanes[at_switch]


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
    probes run on plain Python numbers: numpy on the handful of lanes of one probe costs more
    than the probe's arithmetic."""
    if len(job_hops) == 0:
        return np.zeros(0)
    pick = rng.choice(job_hops, probes)
    count, start, end, position, weight, lane_at = _switch_lanes(net, routed, pick)
    # utilisation and M/D/1 mean wait of the switch lanes the probes cross (only those: a big
    # fabric has millions of lanes)
    used = np.unique(lane_at)
    rho = np.minimum(util[used], MAX_RHO)
    with np.errstate(divide="ignore", invalid="ignore"):
        mtu_us = fab.mtu_bytes / (net.capacity[used] * 1e3)  # per packet
        mean = rho * mtu_us / (2 * (1 - rho))
    lanes = used.tolist()
    rho_of = dict(zip(lanes, rho.tolist(), strict=True))
    mean_of = dict(zip(lanes, mean.tolist(), strict=True))
    capacity = dict(zip(lanes, net.capacity[used].tolist(), strict=True))
    base_us: dict[int, float] = {}  # by switch hops
    random, exponential = rng.random, rng.exponential
    position, weight, lane_at = position.tolist(), weight.tolist(), lane_at.tolist()
    out: list[float] = []
    for n, a, b in zip(count.tolist(), start.tolist(), end.tolist(), strict=True):
        draw = random(n).tolist()
        hops, wait = 0, 0.0
        for j in range(a, b):
            if not draw[position[j]] < weight[j]:
                continue
            hops += 1
            lane = lane_at[j]
            samples = queue_kb.get(lane)
            if samples:
                wait += samples[rng.integers(len(samples))] * 1024 / (capacity[lane] * 1e3)
            elif random() < rho_of[lane]:
                wait += exponential(mean_of[lane])
        hops = max(hops, 1)
        if hops not in base_us:
            base_us[hops] = p2p_latency_us(fab, hops, switch_latency_ns)
        out.append(base_us[hops] + wait)
    return np.array(out, dtype=float)
