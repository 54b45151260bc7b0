"""Per-packet spraying's queues, one-sweep port arrivals, the compiled DCQCN fluid model, and
seeds that draw the same whichever process runs them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fabricplan.congestion import kernels, ports, simulate
from fabricplan.congestion.case import Case
from fabricplan.congestion.dcqcn import FLUID_HORIZON_US, _integrate, quality
from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.simulate import run_case
from fabricplan.congestion.spraying import spray_drain_us
from fabricplan.topology.clos import size_clos
from fabricplan.topology.graph import build_graph

# --- spraying ---------------------------------------------------------------------------------


def _leaf_spine():
    # 32 one-NIC nodes on 16-port switches: four leaves of 8 hosts with 8 uplinks each (to two
    # spines, four links apiece), 400 Gb/s
    g = build_graph(size_clos("fat-tree", 32, 1, 1, 16, 400.0), 450.0, 50.0)
    return Network(g, 1.0), g


def _sprayed(net: Network, g, src: np.ndarray, dst: np.ndarray) -> Routed:
    return net.route(g.nic(src, 0), g.nic(dst, 0), "spray", np.random.default_rng(0))


def test_a_saturated_uplink_set_queues_as_the_brownian_maximum_says():
    # eight senders at line rate sprayed over their leaf's eight uplinks: each uplink at load 1
    # with per-packet variance 8 x (1/8)(7/8); after tau packets its queue is |N(0, var tau)| in
    # law, and a flow waits for the longest queue where it splits: at least the longest of the
    # eight uplinks (E max of 8 half-normals = 1.783 sd), at most the longest of those and the
    # eight spine downlinks it splits over again (each less varied: 16 draws, 2.077 sd)
    net, g = _leaf_spine()
    src = np.arange(8)
    r = _sprayed(net, g, src, src + 8)
    col_of = np.arange(len(src))
    rate = np.full(8, 50.0)
    dur = np.full(8, 80.0)  # 4 MB at 50 GB/s
    mtu = 9000.0
    draws = [
        spray_drain_us(net, r, col_of, rate, dur, mtu, np.random.default_rng(s)).max()
        for s in range(400)
    ]
    slot = mtu / 50e3
    sd = np.sqrt(8 * (1 / 8) * (7 / 8) * 80.0 / slot) * slot
    assert 1.783 * sd * 0.95 < np.mean(draws) < 2.077 * sd * 1.05


def test_a_lightly_loaded_uplink_set_leaves_almost_no_queue_and_unsplit_paths_none():
    net, g = _leaf_spine()
    src = np.arange(8)
    r = _sprayed(net, g, src, src + 8)
    col_of = np.arange(8)
    rng = np.random.default_rng(1)
    light = spray_drain_us(net, r, col_of, np.full(8, 25.0), np.full(8, 160.0), 9000.0, rng)
    full = spray_drain_us(net, r, col_of, np.full(8, 50.0), np.full(8, 80.0), 9000.0, rng)
    assert light.max() < 0.25 * full.max()
    # within one leaf nothing splits: no queue at all
    same_leaf = _sprayed(net, g, np.arange(4), np.arange(4, 8))
    flat = np.full(4, 50.0)
    none = spray_drain_us(net, same_leaf, np.arange(4), flat, np.full(4, 80.0), 9000.0, rng)
    assert np.all(none == 0.0)


def test_spraying_costs_a_permutation_its_queues(monkeypatch):
    # 4 MB per flow, every flow leaving its leaf: sprayed uplinks at load ~1 queue a few us
    # (the square root of ~450 packets, a 180 ns packet time), against none in the fluid run
    case = Case(
        gpus=512,
        pattern="permutation",
        shift=128,
        seeds=3,
        jitter_us=0.0,
        fabric="roce-400g",
        design="fat-tree",
        size_bytes=4_000_000,
        routing="spray",
    )
    queued = run_case(case, probes=False)
    monkeypatch.setattr(simulate, "spray_drain_us", lambda *a: np.zeros(len(a[3])))
    fluid = run_case(case, probes=False)
    extra = queued.fct_us["max"] - fluid.fct_us["max"]
    assert 2.0 < extra < 20.0
    assert queued.fct_us["p50"] > fluid.fct_us["p50"]


# --- port arrivals in one sweep ---------------------------------------------------------------


def test_lane_levels_order_up_down_lanes_and_refuse_loops():
    # lanes 0 -> 1 -> 2 and 0 -> 2: levels 0, 1, 2
    lv = ports.lane_levels(3, np.array([0, 1, 0]), np.array([1, 2, 2]))
    assert lv.tolist() == [0, 1, 2]
    assert ports.lane_levels(2, np.array([0, 1]), np.array([1, 0])) is None


def test_arrivals_in_one_sweep_equal_the_passes():
    case = Case(gpus=512, pattern="alltoall", seeds=1, fabric="roce-400g", design="fat-tree")
    saved = ports.lane_levels
    try:
        one = run_case(case, probes=False, workers=1)
        ports.lane_levels = lambda *a: None  # the pass-by-pass kernel
        passes = run_case(case, probes=False, workers=1)
    finally:
        ports.lane_levels = saved
    assert one.fct_us == pytest.approx(passes.fct_us, rel=1e-9)
    assert one.times_us == pytest.approx(passes.times_us, rel=1e-9)


# --- the compiled DCQCN fluid model -----------------------------------------------------------


def test_compiled_fluid_model_keeps_the_queue_at_the_marking_band():
    q = quality("tuned")
    keys = [(16, 50.0, 50.0 / 16 * 2, 4), (2, 50.0, 50.0, 1)]
    traces = _integrate(keys, q, 4096)
    for tr in traces:
        steps = tr.cum.shape[1] - 1
        assert steps == int(FLUID_HORIZON_US / 0.5)
        util = (tr.cum[1, -1] - tr.cum[1, steps // 2]) / (steps - steps // 2)
        assert 0.5 < util <= 1.0 + 1e-9  # the link stays busy once DCQCN settles
        assert max(tr.queue_kb[len(tr.queue_kb) // 2 :]) < q.kmax_kb * 4
    assert callable(kernels.dcqcn_fluid())


# --- seeds ------------------------------------------------------------------------------------


def test_seeds_draw_the_same_in_worker_processes_and_in_any_number():
    case = Case(gpus=256, pattern="alltoall", seeds=4, fabric="roce-400g", design="fat-tree")
    one = run_case(case, probes=False, workers=1)
    two = run_case(case, probes=False, workers=2)
    assert one.times_us.tolist() == two.times_us.tolist()
    assert one.fct_us == two.fct_us
    first = run_case(replace(case, seeds=2), probes=False, workers=1)
    assert first.times_us.tolist() == one.times_us[:2].tolist()
