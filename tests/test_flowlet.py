"""Flowlet switching at PFC pauses: the gap, the moves and what they cost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from fabricplan.congestion import move_kernel
from fabricplan.congestion.adaptive import TIE_JITTER_GBPS
from fabricplan.congestion.dcqcn import quality
from fabricplan.congestion.flowcontrol import FlowControl, Phases
from fabricplan.congestion.flowlet import MAX_MOVES_PER_FLOW, FlowletMoves, FlowletPolicy
from fabricplan.congestion.network import Network, Routed
from fabricplan.congestion.ports import PortPairs
from fabricplan.congestion.settings import FlowSettings
from fabricplan.congestion.waterfill import complete
from fabricplan.topology.clos import size_clos
from fabricplan.topology.graph import LEAF, build_graph

MTU = 9000
XOFF_KB, XON_KB, BUFFER_KB = 15 * 9000 / 1024, 12 * 9000 / 1024, 200 * 9000 / 1024
FC = FlowControl.of(
    "pfc",
    True,
    quality("tuned"),
    MTU,
    FlowSettings(
        pfc_xoff_kb=XOFF_KB, pfc_xon_kb=XON_KB, buffer_kb=BUFFER_KB, congestion_control="none"
    ),
)
BYTES = 4e6


def _fabric():
    """16 NICs on a 2-tier fat-tree of 8-port switches: 4 a leaf, 4 uplinks a leaf."""
    g = build_graph(size_clos("fat-tree", 16, 1, 1, 8, 400.0), 450.0, 50.0)
    return g, Network(g, 1.0)


def _policy(timeout_us: float, move_share: float = 1.0, nic: float = 50.0) -> FlowletPolicy:
    return FlowletPolicy.of(
        timeout_us, move_share, XOFF_KB, XON_KB, BUFFER_KB, 1.0, nic, 6.0, MTU, go_back_n=True
    )


def _run(timeout_us: float, seed: int = 0, nodes=(0, 1, 2, 3), to=(4, 5, 6, 7)):
    """Flows from leaf 0 to leaf 1, all started on the same uplink (as flowlet switching sends
    flows that start together: the ports look alike); the run with flowlet moves."""
    g, net = _fabric()
    src, dst = np.array([g.nic(i, 0) for i in nodes]), np.array([g.nic(i, 0) for i in to])
    leaf = net.leaf_of(src[:1])[0]
    ups = np.flatnonzero((net.tail == leaf) & (g.vertex_kind[net.head] >= LEAF))
    pre = np.full(net.lanes, 0.0)
    pre[ups] = 10.0
    pre[ups[0]] = 0.0
    rng = np.random.default_rng(seed)
    routed = net.route(src, dst, "flowlet", rng, preload=pre)
    n = len(src)
    nic = float(net.capacity[net.uplink(src[:1])][0])

    def build(r: Routed, pairs: PortPairs | None = None) -> Phases:
        a = csr_matrix((r.weight, (r.lane, r.flow)), shape=(net.lanes, n))
        return Phases(
            net,
            r,
            np.arange(n),
            a,
            a.T.tocsr(),
            np.full(n, nic),
            np.full(n, np.inf),
            np.zeros(n, bool),
            np.ones(n, bool),
            FC,
            6.0,
            pairs,
        )

    moves = FlowletMoves(
        net, routed, np.arange(n), np.ones(n, bool), build, dst, _policy(timeout_us), rng
    )
    a = moves.phases.a
    done = complete(a, net.capacity, np.full(n, BYTES), rates=moves)
    return done.finish_us, moves, nic, net, src, dst


def test_the_gap_and_the_resend_follow_the_pfc_settings():
    p = _policy(10.0, nic=50.0)
    kb_us = 50.0 * 1e3 / 1024  # 50 GB/s in KB per us
    # XOFF - XON plus a hop's round trip at line rate (the PFC headroom)
    assert p.headroom_kb == pytest.approx(XOFF_KB - XON_KB + 2 * 1.0 * kb_us)
    # go-back-N: the flow's part of XON left on the old path, plus a round trip at its own
    # rate on a free new path, or at most its part of XOFF on a held one
    share, push = np.array([1.0, 1.0, 0.25]), np.array([50.0, 50.0, 1.0])
    got = p.resend_kb(share, push, np.array([False, True, False]))
    assert got == pytest.approx(
        [XON_KB + 6.0 * kb_us, XON_KB + XOFF_KB, 0.25 * XON_KB + 6.0 * kb_us / 50]
    )
    quiet = FlowletPolicy.of(10, 1, XOFF_KB, XON_KB, BUFFER_KB, 1.0, 50.0, 6.0, MTU, False)
    assert not quiet.resend_kb(np.ones(2), np.ones(2), np.zeros(2, bool)).any()


def test_a_four_way_collision_breaks_up_at_the_first_long_pause():
    # 4 flows on one uplink: each sender is paused 3/4 of the time, in gaps of
    # headroom / (rate / 4), about 10.4 us at 50 GB/s: above a 10 us timeout, so each flow
    # may move at its first gap to an empty uplink
    finish, moves, nic, *_ = _run(timeout_us=10.0)
    alone_us = BYTES / (nic * 1e3)
    assert moves.moves >= 3
    assert finish.max() < 2 * alone_us  # not 4x: the collision ended early
    # the movers resent what go-back-N loses, so they take longer than a flow alone would
    assert finish.min() > alone_us


def test_with_a_long_timeout_the_collision_stays():
    finish, moves, nic, *_ = _run(timeout_us=256.0)
    alone_us = BYTES / (nic * 1e3)
    assert moves.moves == 0
    assert finish.max() == pytest.approx(4 * alone_us, rel=0.02)


def test_a_two_way_collision_pauses_too_briefly_to_move():
    # 2 flows: gaps of headroom / (rate / 2), about 5.2 us, under the 10 us timeout
    finish, moves, nic, *_ = _run(timeout_us=10.0, nodes=(0, 1), to=(4, 5))
    assert moves.moves == 0
    assert finish.max() == pytest.approx(2 * BYTES / (nic * 1e3), rel=0.02)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_moved_flows_still_run_from_their_sender_to_their_receiver(seed):
    finish, moves, nic, net, src, dst = _run(timeout_us=10.0, seed=seed)
    r = moves.routed
    for f in range(len(src)):
        lanes = r.lane[r.flow == f]
        w = r.weight[r.flow == f]
        assert w.sum() == pytest.approx(len(lanes))  # one queue pair: whole lanes
        # a path: out of the sender's NIC, into the receiver's, and every switch it enters
        # it leaves once
        tails, heads = net.tail[lanes], net.head[lanes]
        assert net.uplink(src[f : f + 1])[0] in lanes
        assert net.downlink(dst[f : f + 1])[0] in lanes
        assert sorted(np.setdiff1d(heads, [dst[f]]).tolist()) == sorted(
            np.setdiff1d(tails, [src[f]]).tolist()
        )
    # no flow ends before it could have sent its bytes alone, and no flow moved past the guard
    assert (finish >= BYTES / (nic * 1e3) * (1 - 1e-9)).all()
    assert (moves.moved <= MAX_MOVES_PER_FLOW).all()


def test_flowlet_moves_match_the_packet_level_reference_on_a_permutation():
    # the reference's switches move flows at pauses over 10 us: a permutation's collisions of
    # four break up, so its tail is about 1.5x the lone flow's, not ECMP's 2x
    from fabricplan.validation import packet_level as P

    perm = next(c for c in P.CASES if c.name == "perm128")
    flowlet, ecmp = P.compare(perm, "flowlet"), P.compare(perm, "ecmp")
    assert all(abs(e) <= P.TOLERANCE for e in flowlet.errors.values())
    assert flowlet.predicted["p99"] < 0.85 * ecmp.predicted["p99"]
    # an incast has no better path; the moves between its sender's equal ports reorder it,
    # and go-back-N makes it slower than under ECMP
    incast = next(c for c in P.CASES if c.name == "incast16")
    assert (
        P.compare(incast, "flowlet").predicted["p99"] > P.compare(incast, "ecmp").predicted["p99"]
    )


def test_what_flowlet_routing_leaves_out_is_said_only_where_it_routes():
    from fabricplan.congestion.case import Case
    from fabricplan.congestion.simulate import run_case

    said = {}
    for routing in ("flowlet", "ecmp"):
        case = Case(gpu="h100", gpus=64, fabric="roce-400g", routing=routing, seeds=1)
        said[routing] = run_case(case).not_modelled
    assert any("flowlet switch" in x for x in said["flowlet"])
    assert not any("flowlet" in x for x in said["ecmp"])
    assert said["flowlet"][1:] == said["ecmp"]


def test_flows_that_are_new_flowlets_at_every_packet_keep_their_port_until_it_queues():
    # an all-to-all of 64 hosts sends each flow one packet every 11 us (63 flows a NIC), over
    # the reference's 10 us timeout: every packet is a chance to move, but a switch keeps a
    # flow's port while no other is strictly emptier (htsim's getNextHop). Flows start on one
    # port each, as under ECMP, and leave the ports their next switch pauses: most of ECMP's
    # tail goes, and the flows do not all end with their NICs as a perfect spread would
    from fabricplan.validation import packet_level as P

    a2a = next(c for c in P.CASES if c.name == "a2a64")
    flowlet, ecmp = P.compare(a2a, "flowlet", seeds=2), P.compare(a2a, "ecmp", seeds=2)
    assert flowlet.predicted["max"] < 0.8 * ecmp.predicted["max"]
    assert flowlet.predicted["max"] > 1.01 * flowlet.predicted["p50"]
    assert abs(flowlet.errors["p50"]) <= P.TOLERANCE
    assert abs(flowlet.errors["p99"]) <= P.TOLERANCE


def test_batching_moves_does_not_quicken_them(monkeypatch):
    # moves due within MOVE_MERGE of the elapsed time are made together, some early; a flow
    # moved early still draws its next chances from when its move was due, so the 64-to-1
    # incast's tail does not depend on the batching (it once went from +3 % to +116 % between
    # a window of 5 % and of 15 %, as early moves piled up to the per-flow cap)
    from fabricplan.congestion import flowlet
    from fabricplan.validation import packet_level as P

    incast = next(c for c in P.CASES if c.name == "incast64")
    tails = []
    for window in (0.05, 0.15):
        monkeypatch.setattr(flowlet, "MOVE_MERGE", window)
        tails.append(P.compare(incast, "flowlet", seeds=2).predicted["p99"])
    assert tails[1] == pytest.approx(tails[0], rel=0.08)


def test_moves_rejoin_only_the_moved_flows_port_pairs(monkeypatch):
    # after a batch of moves the port pairs are the old ones of the flows that stayed
    # (renumbered) and the moved flows' joined again: the same pairs as joining every flow's
    from fabricplan.congestion import compiled_phases, flowcontrol, seed_run
    from fabricplan.congestion.ports import port_pairs
    from fabricplan.validation import packet_level as P

    original = flowcontrol.Phases.__init__
    checked = []

    def init(self, *args):
        given = args[11] if len(args) > 11 else None
        if given is not None:
            full = port_pairs(args[0], args[1])

            def rows(pp):
                order = np.lexsort((pp.e_in, pp.e_out))
                return [np.asarray(x)[order] for x in (pp.out, pp.into, pp.flow, pp.weight)]

            assert len(given) == len(full)
            for a, b in zip(rows(given), rows(full), strict=True):
                assert np.allclose(a, b, rtol=1e-12, atol=0)
            checked.append(len(given))
        original(self, *args)

    monkeypatch.setattr(flowcontrol.Phases, "__init__", init)
    # the array rebuild (runs whose events are not compiled; compiled ones: the next tests),
    # in the Python loop (a run in one compiled call builds no Phases)
    monkeypatch.setattr(compiled_phases, "moved", lambda *a: None)
    monkeypatch.setattr(seed_run, "compiled_run", lambda *a: None)
    incast = next(c for c in P.CASES if c.name == "incast16")
    P.compare(incast, "flowlet", seeds=2)
    assert len(checked) >= 5  # every batch of moves of two seeds


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_moved_flow_is_routed_on_as_the_router_routes_flowlets(seed):
    # the compiled moves choose each hop as Network.route does for flowlet routing (the least
    # standing load among the closer ports, equal ones split by the same draws): from a flow's
    # own leaf both give the same path, lane for lane
    g, net = _fabric()
    rng = np.random.default_rng(seed)
    n = 12
    src = np.array([g.nic(int(i), 0) for i in rng.integers(0, 16, n)])
    dst = np.array([g.nic(int(i), 0) for i in rng.integers(0, 16, n)])
    levels = rng.integers(0, 4, net.lanes).astype(float)
    whole = net.route(src, dst, "flowlet", np.random.default_rng(seed), preload=levels)
    # queues whose levels are those (whole numbers of KB over thresholds at 0.5, 1.5, 2.5)
    standing = (levels, np.array([0.5, 1.5, 2.5]), np.zeros(net.lanes))
    tw = net.towards(dst)
    most = int(tw.tables[0].max())  # room for every flow's hops
    lanes = np.empty(n * (most + 1), np.int64)
    flows = np.empty(n * (most + 1), np.int64)
    k = move_kernel._route_into(
        np.arange(n),
        net.leaf_of(src) - tw.sw0,
        tw.row,
        standing,
        tw.tables,
        TIE_JITTER_GBPS,
        np.random.default_rng(seed),
        (lanes, flows),
        np.empty((2, n), np.int64),
    )
    lanes, flows = lanes[:k], flows[:k]
    # the router's entries: uplinks, downlinks, then the switch hops; the moves' start at the
    # downlinks, since the lanes up to the switch a flow moves at are already its own
    assert np.array_equal(lanes, whole.lane[n:]) and np.array_equal(flows, whole.flow[n:])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_the_compiled_rebuild_after_moves_gives_the_tables_the_array_code_builds(seed):
    # after a batch of moves a small PFC-only run rebuilds its port tables in one compiled call
    # (rebuild_kernel); they must be the arrays, in their order, that the array code builds
    from fabricplan.congestion import compiled_phases, flowlet, kernels

    kernels.fill()  # the events run compiled too in a process that has the kernels
    seen, holder = [], {}
    moved, change = compiled_phases.moved, flowlet.FlowletMoves.change

    def keep(self, now_us):
        holder["moves"] = self
        return change(self, now_us)

    def both(ph, routed, leave, fresh, went):
        out = moved(ph, routed, leave, fresh, went)
        assert out is not None
        r, new = out
        m = holder["moves"]
        lane = np.concatenate([routed.lane[~leave], fresh.lane])
        flow = np.concatenate([routed.flow[~leave], fresh.flow])
        weight = np.concatenate([routed.weight[~leave], fresh.weight])
        ref_r = Routed(lane, flow, weight)
        ref = m.build(ref_r, m._pairs_after(leave, ref_r, np.flatnonzero(went)))
        assert all(np.array_equal(getattr(r, k), getattr(ref_r, k)) for k in ref_r.__dict__)
        for k in ("out", "into", "flow", "weight", "e_out", "e_in"):
            assert np.array_equal(getattr(new.pairs, k), getattr(ref.pairs, k)), k
        for k in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(new.a, k), getattr(ref.a, k)), k
        assert np.array_equal(new.port_keys, ref.port_keys)
        assert np.array_equal(new.p_port, ref.p_port)
        assert new.arrivals.passes == ref.arrivals.passes
        assert np.array_equal(new.arrivals.first, ref.arrivals.first)
        assert np.array_equal(new._upstream, ref._upstream_pairs())
        assert np.array_equal(new.p_window_kb, ref.p_window_kb)
        seen.append(len(fresh.lane))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(flowlet.FlowletMoves, "change", keep)
        mp.setattr(compiled_phases, "moved", both)
        _run(timeout_us=10.0, seed=seed)
    assert seen  # the four-way collision breaks up: moves were made


def test_a_one_off_run_rebuilds_compiled_and_keeps_the_array_events(monkeypatch):
    # a process without the compiled fill (a one-off run) takes the array code for its events;
    # its rebuilds after moves are compiled all the same, and must give the array rebuild's run
    from fabricplan.congestion import compiled_phases, kernels

    monkeypatch.setattr(kernels, "loaded", lambda: False)
    finish, moves, *_ = _run(timeout_us=10.0, seed=3)
    monkeypatch.setattr(compiled_phases, "moved", lambda *a: None)
    finish2, moves2, *_ = _run(timeout_us=10.0, seed=3)
    assert moves.moves == moves2.moves > 0
    assert np.array_equal(finish, finish2)


def test_a_switch_sees_the_pause_of_an_up_port_only_where_other_ingress_ports_feed_it():
    # lanes: 0, 1 = two NIC links into a leaf; 2 = the leaf's up port; 3 = the spine's port on
    # towards the incast's receiver, paused by it (the feeder of a hot port)
    from fabricplan.congestion.due_kernel import seen_paused

    last_pause = np.array([0.0, 0.0, 0.0, 0.6])
    up_lane = np.array([True, True, True, False])
    held = np.array([True, True, False])  # columns 0, 1 held; column 2 not
    running = np.ones(3, bool)
    # pairs (egress, ingress, column): at the leaf NIC -> up port, at the spine up -> down
    one_feeder = (np.array([2, 3]), np.array([0, 2]), np.array([0, 0]))
    seen = seen_paused(last_pause, held, running, one_feeder, up_lane)
    # one sender's packets alone: drained by the time its pause ends, nothing to see
    assert seen.tolist() == last_pause.tolist()
    two_feeders = (np.array([2, 2, 3, 3]), np.array([0, 1, 2, 2]), np.array([0, 1, 0, 1]))
    seen = seen_paused(last_pause, held, running, two_feeders, up_lane)
    # two ingress ports keep the up port queued: it shows its next switch's pause
    assert seen.tolist() == [0.0, 0.0, 0.6, 0.6]
    # the same traffic, but the flows through the spine are not held: no pause to see
    seen = seen_paused(last_pause, np.zeros(3, bool), running, two_feeders, up_lane)
    assert seen.tolist() == last_pause.tolist()
    # a second feeder that does not run adds nothing
    seen = seen_paused(last_pause, held, np.array([True, False, True]), two_feeders, up_lane)
    assert seen[2] == 0.0


def test_flows_beside_an_incast_move_where_their_up_port_is_fed_twice():
    # the packet-level reference's 16 -> 1 incast whose senders (two leaves) send three more
    # flows each moved 87 flows a run (seed 1); with one level of paused ports in view the
    # model moved 0-5 a seed, with the up ports its next switch pauses in view 15-42; the
    # 8 -> 1 incast with one remote sender (one feeder) moves none, as in the reference
    from fabricplan.validation import packet_level as P

    cases = {c.name: c for c in P.DEVELOPED}
    mix = P.compare(cases["incast16x4"], "flowlet")
    lone = P.compare(cases["incast8"], "flowlet")
    assert mix.resent_bytes[0] > 1e6
    assert lone.resent_bytes[0] == 0.0
