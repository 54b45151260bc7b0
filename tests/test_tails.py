"""Latency under load: the batched probe loop makes exactly the draws of a plain per-probe loop,
so the runs after it (and every slowdown they give) are those of the simple formulation."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fabricplan.collectives import p2p_latency_us
from fabricplan.congestion import simulate, tails
from fabricplan.congestion.case import Case
from fabricplan.congestion.simulate import run_case
from fabricplan.topology.graph import LEAF


def _reference(net, routed, job_hops, util, queue_kb, fab, switch_latency_ns, rng, probes):
    """One probe at a time, numpy on each probe's lanes: the model as first written."""
    if len(job_hops) == 0:
        return np.zeros(0)
    pick = rng.choice(job_hops, probes)
    order = np.argsort(routed.flow, kind="stable")
    flow_sorted = routed.flow[order]
    lo = np.searchsorted(flow_sorted, pick, "left")
    hi = np.searchsorted(flow_sorted, pick, "right")
    mtu_s = fab.mtu_bytes / (net.capacity * 1e3)
    out = np.empty(probes)
    switch_out = net.graph.vertex_kind[net.tail] >= LEAF
    for i in range(probes):
        idx = order[lo[i] : hi[i]]
        lanes, w = routed.lane[idx], routed.weight[idx]
        taken = lanes[rng.random(len(lanes)) < w]
        hops = int(np.count_nonzero(switch_out[taken]))
        wait = 0.0
        for lane in taken[switch_out[taken]]:
            samples = queue_kb.get(int(lane))
            if samples:
                wait += samples[rng.integers(len(samples))] * 1024 / (net.capacity[lane] * 1e3)
                continue
            rho = min(util[lane], tails.MAX_RHO)
            if rng.random() < rho:
                wait += rng.exponential(rho * mtu_s[lane] / (2 * (1 - rho)))
        out[i] = p2p_latency_us(fab, max(hops, 1), switch_latency_ns) + wait
    return out


# The first has hot queues (PFC), so the queue-sample branch is exercised; the IB one routes
# adaptively (lanes carry fractions of a flow); the rest cover background, oversubscription and
# fragmented placement.
CASES = [
    Case(fabric="roce-400g", pattern="incast", gpus=64, seeds=2),
    Case(fabric="roce-400g", pattern="incast", gpus=64, seeds=2, roce_quality="misconfigured"),
    Case(fabric="ib-ndr", pattern="ring-allreduce", gpus=128, seeds=2),
    Case(
        fabric="roce-400g",
        pattern="alltoall",
        gpus=128,
        seeds=2,
        oversubscription=2.0,
        background=0.3,
    ),
    Case(fabric="tcp-100g", pattern="tree-allreduce", gpus=64, seeds=2, placement="fragmented"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.fabric}-{c.pattern}-{c.roce_quality}")
def test_probe_loop_draws_as_the_reference(monkeypatch, case):
    seen = []

    def both(net, routed, job_hops, util, queue_kb, fab, switch_latency_ns, rng, probes):
        twin = copy.deepcopy(rng)
        want = _reference(
            net, routed, job_hops, util, queue_kb, fab, switch_latency_ns, twin, probes
        )
        got = tails.latency_under_load(
            net, routed, job_hops, util, queue_kb, fab, switch_latency_ns, rng, probes
        )
        same_state = rng.bit_generator.state == twin.bit_generator.state
        seen.append((got.tobytes() == want.tobytes(), same_state, bool(queue_kb)))
        return got

    monkeypatch.setattr(simulate, "latency_under_load", both)
    run_case(case)
    assert seen and all(same and state for same, state, _ in seen)
    if case is CASES[0]:
        assert any(hot for *_, hot in seen)
