"""The senders' NICs on a lossless fabric without congestion control (congestion.nic_turns):
round-robin turns, stranded bytes filling the pause thresholds (shared by the held flows through
a port pair), the NIC held as its held flows drain; the compiled twin bit for bit; a whole run
against the analytic answer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.congestion import kernels, seed_run
from fabricplan.congestion import simulate as S
from fabricplan.congestion.flowfile import FlowList
from fabricplan.congestion.nic_turns import (
    FILL_ROUNDOFF,
    HELD_TOLERANCE,
    ONSET_MERGE,
    NicTurns,
    held_nics,
)
from fabricplan.validation import packet_level as P

C = 50.0  # GB/s, the NIC lane's
XOFF = 1000.0  # bytes per ingress port


def _turns(nic, lanes=3):
    return NicTurns(np.array(nic, np.int64), XOFF, np.zeros(lanes), np.zeros(lanes))


def _own_pairs(ports):
    """Port pairs where each column crosses ``ports[c]`` pairs that no other column crosses:
    (pair id, column, weight)."""
    col = np.repeat(np.arange(len(ports)), ports)
    return np.arange(len(col)), col, np.ones(len(col))


def test_a_held_flow_keeps_its_turn_then_fills_the_thresholds_and_holds_the_nic():
    # one NIC (lane 0), two flows: one held to 12.5 GB/s downstream, one free (max-min would
    # give it the other 37.5). Round-robin turns are 25 each, and the held flow takes its turn
    # although its bytes wait in the fabric: the free one gets 25, a pause of 1 - 37.5/50
    cap = np.array([C, C, C])
    t, pairs = _turns([0, 0]), _own_pairs([2, 1])
    running = np.ones(2, bool)
    rates = np.array([12.5, 37.5])
    p, out = held_nics(t, running, rates, cap, np.zeros(len(cap)), pairs)
    assert p[0] == pytest.approx(0.25) and not p[1:].any()
    assert out is None  # turns only: the NIC is not paused yet
    # the held flow strands 25 - 12.5 GB/s against XOFF on each of its 2 port pairs
    assert t.excess[0] == pytest.approx(12.5)
    assert t.onset_us == pytest.approx(2 * XOFF / 12.5e3)
    t.elapse(t.onset_us)
    p, out = held_nics(t, running, rates, cap, np.zeros(len(cap)), pairs)
    # filled: the NIC sends as fast as the held flow drains, half the time, and every flow of
    # it (the free one too) gets what its turn then gives, 12.5
    assert p[0] == pytest.approx(0.5) and out[0] == pytest.approx(0.5)
    assert t.onset_us == np.inf


def test_nothing_binds_for_one_flow_a_nic_free_flows_or_flows_of_no_nic():
    cap = np.array([C, C, C])
    # one flow on its NIC, held: holding the NIC holds nothing else, and no event is drawn
    t, pairs = _turns([0]), _own_pairs([3])
    assert held_nics(t, np.ones(1, bool), np.array([5.0]), cap, np.zeros(3), pairs) is None
    assert t.onset_us == np.inf and t.excess[0] == pytest.approx(45.0)
    # two flows at their turns: nothing held
    t, pairs = _turns([1, 1]), _own_pairs([3, 3])
    assert held_nics(t, np.ones(2, bool), np.array([25.0, 25.0]), cap, np.zeros(3), pairs) is None
    assert not t.excess.any()
    # not open-loop senders (-1): left out
    t = _turns([-1, -1])
    assert held_nics(t, np.ones(2, bool), np.array([1.0, 49.0]), cap, np.zeros(3), pairs) is None


def test_stranded_bytes_drain_once_nothing_is_held():
    cap = np.array([C, C, C])
    t, pairs = _turns([0, 0]), _own_pairs([1, 1])
    held_nics(t, np.ones(2, bool), np.array([12.5, 37.5]), cap, np.zeros(3), pairs)
    t.elapse(0.04)
    assert t.stranded[0] == pytest.approx(500.0)
    held_nics(t, np.ones(2, bool), np.array([25.0, 25.0]), cap, np.zeros(3), pairs)
    assert t.stranded[0] == 0.0


def test_a_flow_slowed_only_by_its_nics_own_pause_strands_nothing():
    # the NIC link paused half the time by its first switch: turns are 12.5 of 25 sent; a flow
    # at 12 is held (it strands 0.5 GB/s), one at 12.5 only waits with the NIC and is not
    cap = np.array([C, C, C])
    pause = np.array([0.5, 0.0, 0.0])
    t, pairs = _turns([0, 0]), _own_pairs([2, 2])
    assert held_nics(t, np.ones(2, bool), np.array([12.0, 12.5]), cap, pause, pairs) is None
    assert t.excess[0] == pytest.approx(0.5)
    t = _turns([0, 0])
    held_nics(t, np.ones(2, bool), np.array([12.5, 12.5]), cap, pause, pairs)
    assert not t.excess.any()


def test_held_flows_through_one_port_pair_fill_its_threshold_together():
    # NICs 0 and 1 each send a held flow (12.5 of a 25 turn) and a free one. The held flows
    # cross one port pair of their own each, then share a pair (an incast's pair next to its
    # receiver): each fills its own XOFF at 12.5 GB/s and the shared one at 25, so each NIC's
    # onset is XOFF / 12.5 + XOFF / 25, not 2 XOFF / 12.5 as if alone
    cap = np.array([C, C, C])
    t = _turns([0, 0, 1, 1])
    pairs = (np.array([0, 1, 2, 2]), np.array([0, 2, 0, 2]), np.ones(4))
    rates = np.array([12.5, 37.5, 12.5, 37.5])
    held_nics(t, np.ones(4, bool), rates, cap, np.zeros(3), pairs)
    assert t.onset_us == pytest.approx(XOFF / 12.5e3 + XOFF / 25e3)
    # the same flows split evenly over two egress ports at the shared switch (weights 1/2):
    # one ingress threshold still, filled by both
    t = _turns([0, 0, 1, 1])
    pairs = (np.array([0, 1, 2, 3, 2, 3]), np.array([0, 2, 0, 0, 2, 2]), np.ones(6))
    pairs[2][2:] = 0.5
    held_nics(t, np.ones(4, bool), rates, cap, np.zeros(3), pairs)
    assert t.onset_us == pytest.approx(XOFF / 12.5e3 + XOFF / 25e3)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 40), st.integers(1, 6))
def test_the_compiled_nics_are_the_array_code_bit_for_bit(seed, n, lanes):
    from fabricplan.congestion.nic_kernel import held_nics as compiled

    rng = np.random.default_rng(seed)
    nic = rng.integers(-1, lanes, n)
    # port pairs: each column crosses a few, some shared between columns, some split
    m = int(rng.integers(0, 4 * n + 1))
    pairs = (
        rng.integers(0, max(m // 2, 1), m),
        rng.integers(0, n, m),
        rng.choice([1.0, 0.5, 0.125], m),
    )
    running = rng.random(n) < 0.8
    cap = rng.choice([25.0, 50.0, 100.0], lanes)
    rates = rng.random(n) * 60 * rng.choice([0.3, 1.0], n)
    stranded = rng.random(lanes) * 4000 * rng.choice([0.0, 1.0], lanes)
    pause = rng.random(lanes) * rng.choice([0.0, 1.0], lanes)
    t = NicTurns(nic, XOFF, stranded.copy(), np.zeros(lanes))
    t.elapsed_us = float(rng.random() * 100)
    want = held_nics(t, running, rates, cap, pause, pairs)
    s = stranded.copy()
    window = ONSET_MERGE * t.elapsed_us
    p, binds, out, paused, excess, onset, _live = compiled(
        nic, pairs, XOFF, s, running, rates, cap, pause, HELD_TOLERANCE, FILL_ROUNDOFF, window
    )
    assert binds == (want is not None)
    if want is not None:
        assert np.array_equal(p, want[0])
        assert paused == (want[1] is not None)
        if paused:
            assert np.array_equal(out, want[1])
    assert np.array_equal(excess, t.excess) and np.array_equal(s, t.stranded)
    assert onset == t.onset_us


def test_only_open_loop_senders_with_one_nic_take_turns(monkeypatch):
    # a flow across leaves and one within a leaf, as the run builds them: each its NIC's lane;
    # a windowed or rate-limited sender gets no turn
    from fabricplan.topology.graph import LEAF

    seen = []
    of = NicTurns.of

    def keep(*args):
        seen.append(args)
        return of(*args)

    monkeypatch.setattr(S.NicTurns, "of", keep)
    flows = FlowList(np.array([8, 16]), np.array([0, 17]), np.full(2, 1e5), np.zeros(2))
    S.run_case(P.flow_case(128, flows, "ecmp", seeds=1), P.reference_catalog(), probes=False)
    net, routed, col_of, open_loop, xoff_kb = seen[0]
    t = of(net, routed, col_of, open_loop, xoff_kb)
    first = net.graph.vertex_kind[net.tail[routed.lane]] < LEAF
    assert t.nic.tolist() == routed.lane[first].tolist()
    assert t.threshold_bytes == xoff_kb * 1024
    t = of(net, routed, col_of, np.array([True, False]), xoff_kb)
    assert t.nic[1] == -1 and t.nic[0] >= 0


def _per_flow(src, dst, size, routing="adaptive"):
    got = []
    run = S._run_seed

    def keep(st, seed):
        out = run(st, seed)
        got.append(out.fct_us)
        return out

    flows = FlowList(np.array(src), np.array(dst), np.array(size, float), np.zeros(len(src)))
    S._run_seed = keep
    try:
        S.run_case(P.flow_case(128, flows, routing, seeds=1), P.reference_catalog(), probes=False)
    finally:
        S._run_seed = run
    return got[0]


def test_an_incast_senders_other_flow_runs_at_its_turn_then_with_the_incast():
    # hosts 8, 16, 24, 32 send 1 MB to host 0 (adaptive routing: no ECMP collision to draw);
    # host 32 also sends 2 MB to host 33 on its own leaf. Host 32's NIC gives each flow a turn
    # of 25 GB/s: its other flow runs at 25 until the incast flow's stranded bytes fill its
    # part of XOFF on the switches of its path, then at the incast flow's rate r until the
    # incast ends, then alone at 50 GB/s. (Max-min alone would give it 50 - r from the start.)
    kernels.fill()
    xoff = P.setting().pfc_xoff_packets * P.setting().packet_bytes
    lat_a = _per_flow([32], [0], [1e6])[0] - 1e6 / (C * 1e3)
    lat_b = _per_flow([32], [33], [2e6])[0] - 2e6 / (C * 1e3)
    fct = _per_flow([8, 16, 24, 32, 32], [0, 0, 0, 0, 33], [1e6] * 4 + [2e6])
    assert np.allclose(fct[:4], fct[0])
    end_a = fct[0] - lat_a
    r = 1e6 / (end_a * 1e3)  # GB/s
    # host 32's flow fills XOFF on its ingress at leaf 4 and at its spines alone (its parts
    # over the 8 spines, 1/8 each, make one threshold per switch); at host 0's leaf it shares
    # with the other three senders, each of which pushes C and gets r
    x32, x = C / 2 - r, C - r
    t1 = (2 + x32 / (x32 + 3 * x)) * xoff / (x32 * 1e3)
    sent = C / 2 * 1e3 * t1 + r * 1e3 * (end_a - t1)
    assert t1 < end_a and sent < 2e6
    want = end_a + (2e6 - sent) / (C * 1e3)
    assert fct[4] - lat_b == pytest.approx(want, rel=0.005)
    assert want > 1.5 * 2e6 / ((C - r) * 1e3)  # far from what max-min alone gives


@pytest.mark.parametrize("routing", ["ecmp", "flowlet", "adaptive"])
def test_held_nics_give_the_same_figures_run_compiled_or_in_the_loop(routing, monkeypatch):
    # an incast whose senders send elsewhere too (NICs held) and a NIC with two incast flows;
    # adaptive routing splits each flow over the spines (port pairs of weight 1/8)
    kernels.fill()
    src = np.r_[np.arange(16, 32), np.arange(16, 32), np.arange(24, 40)]
    dst = np.r_[np.zeros(16, int), 64 + np.arange(16), np.full(16, 8)]
    flows = FlowList(src, dst, np.full(48, 500_000.0), np.zeros(48))
    case = P.flow_case(128, flows, routing, seeds=2)
    fast = S.run_case(case, P.reference_catalog(), probes=False, workers=1)
    monkeypatch.setattr(seed_run, "compiled_run", lambda *a: None)
    monkeypatch.setattr(seed_run, "compiled_fixed_run", lambda *a: None)
    slow = S.run_case(case, P.reference_catalog(), probes=False, workers=1)
    assert np.array_equal(fast.times_us, slow.times_us)
    assert fast.fct_us == slow.fct_us and fast.paused_fraction == slow.paused_fraction
    assert fast.victim_flows == slow.victim_flows
    # the bytes flowlet moves send again, summed alike (none without moves)
    assert fast.resent_bytes == slow.resent_bytes
    assert (fast.resent_bytes > 0) == (routing == "flowlet")
