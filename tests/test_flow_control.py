"""Flow control over time: analytic cases for PFC and credits (per-port arbitration, capacity
that comes back, head-of-line victims, window-bounded queues), the pieces it is built from,
flow lists, permutations and the routing modes, and the packet-level comparison."""

from __future__ import annotations

import csv
import json
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from fabricplan.congestion import groupfill, kernels, pfc_kernel
from fabricplan.congestion import traffic as T
from fabricplan.congestion.case import Case, CaseError
from fabricplan.congestion.dcqcn import quality
from fabricplan.congestion.flowcontrol import FlowControl, Phases
from fabricplan.congestion.flowfile import FlowFileError, FlowList, parse_flows
from fabricplan.congestion.groupfill import group_fill
from fabricplan.congestion.network import Network
from fabricplan.congestion.ports import port_pairs
from fabricplan.congestion.settings import FlowSettings
from fabricplan.congestion.simulate import run_case
from fabricplan.congestion.waterfill import complete, max_min_rates
from fabricplan.topology.clos import size_clos
from fabricplan.topology.graph import LEAF, build_graph
from fabricplan.validation import packet_level as P
from test_cli import run

PFC_ONLY = FlowControl.of(
    "pfc", True, quality("tuned"), 4096, FlowSettings(congestion_control="none")
)
CREDIT = FlowControl("credit", None, 4096)


def _fabric(nodes: int = 16, radix: int = 8):
    """One NIC per node on a 2-tier fat-tree of ``radix``-port switches (4 nodes a leaf)."""
    lay = size_clos("fat-tree", nodes, 1, 1, radix, 400.0)
    g = build_graph(lay, 450.0, 64.0)
    return g, Network(g, 1.0)


def _phases(net, src, dst, fc, seed=0, push=None, clocked=None):
    r = net.route(src, dst, "ecmp", np.random.default_rng(seed))
    n = len(src)
    a = csr_matrix((r.weight, (r.lane, r.flow)), shape=(net.lanes, n))
    nic = float(net.capacity[net.uplink(src[:1])][0])
    push = np.full(n, nic) if push is None else push
    clocked = np.zeros(n, bool) if clocked is None else clocked
    ph = Phases(
        net,
        r,
        np.arange(n),
        a,
        a.T.tocsr(),
        push,
        np.full(n, np.inf),
        clocked,
        np.ones(n, bool),
        fc,
        5.0,
    )
    return ph, a, r, nic


# --- per-port arbitration and capacity that comes back -------------------------------------


@pytest.mark.parametrize("fc", [PFC_ONLY, CREDIT], ids=["pfc", "credit"])
def test_incast_shares_the_receiver_per_ingress_port(fc):
    # 3 senders on the receiver's leaf and 4 remote ones: the receiver's port is shared among
    # its ingress ports round-robin, so each local sender gets a port's share and the remote
    # ones split what their spine ports get (the parking-lot unfairness of lossless fabrics)
    g, net = _fabric()
    src = np.array([g.nic(i, 0) for i in (1, 2, 3, 4, 5, 6, 7)])
    dst = np.full(len(src), g.nic(0, 0))
    ph, a, r, nic = _phases(net, src, dst, fc)
    rates = ph(np.ones(len(src), bool), np.full(len(src), 1e6))
    spines = {int(x) for x in np.unique(r.lane) if net.head[x] == net.leaf_of(dst[:1])[0]} - {
        int(x) for x in net.uplink(src)
    }
    ports = 3 + len(spines)  # three local NIC ports and the spine ports the remote flows took
    assert rates[:3] == pytest.approx(np.full(3, nic / ports))
    assert rates.sum() == pytest.approx(nic)  # the receiving link stays full
    assert rates[3:].max() <= nic / ports + 1e-9
    # per flow, max-min would give every sender the same
    assert max_min_rates(a, net.capacity)[:7] == pytest.approx(np.full(7, nic / 7))


@pytest.mark.parametrize("fc", [PFC_ONLY, CREDIT], ids=["pfc", "credit"])
def test_a_spine_serves_its_share_round_robin_between_the_leaves_feeding_it(fc):
    # 3 local senders and 12 remote ones (3 leaves of 4): the receiver's leaf gives each of its
    # ingress ports (3 NIC ports, the spine links used) an equal share; a spine held to that
    # share serves the uplinks feeding it round-robin, and each leaf its hosts: a flow alone on
    # its uplink gets that uplink's whole part, not a per-flow split of the spine's
    g, net = _fabric()
    src = np.array([g.nic(i, 0) for i in range(1, 16)])
    dst = np.full(len(src), g.nic(0, 0))
    into_leaf = net.leaf_of(dst[:1])[0]
    for seed in range(4):
        ph, _, r, nic = _phases(net, src, dst, fc, seed=seed)
        rates = ph(np.ones(len(src), bool), np.full(len(src), 1e6))
        down, up = {}, {}  # remote flow -> its spine's link into the receiver's leaf, its uplink
        for lane, f in zip(r.lane.tolist(), r.flow.tolist(), strict=True):
            if net.head[lane] == into_leaf and net.tail[lane] != src[f]:
                down[f] = lane
            elif net.tail[lane] == net.leaf_of(src[f : f + 1])[0]:
                up[f] = lane
        share = nic / (3 + len(set(down.values())))
        for f, lane in down.items():
            feeders = {up[x] for x in down if down[x] == lane}
            mates = sum(1 for x in down if down[x] == lane and up[x] == up[f])
            assert rates[f] == pytest.approx(share / len(feeders) / mates, rel=1e-6), seed
        assert rates.sum() == pytest.approx(nic)


@pytest.mark.parametrize("fc", [PFC_ONLY, CREDIT], ids=["pfc", "credit"])
def test_an_incast_ends_at_the_receivers_rate(fc):
    # work-conserving: whatever the arbitration, the last byte of an N -> 1 incast of S bytes
    # each arrives at N S / C, because PFC keeps the receiving link full to the end
    g, net = _fabric()
    src = np.array([g.nic(i, 0) for i in range(1, 16)])
    dst = np.full(len(src), g.nic(0, 0))
    ph, a, _, nic = _phases(net, src, dst, fc)
    size = np.full(len(src), 1e6)
    done = complete(a, net.capacity, size, rates=ph)
    assert done.finish_us.max() == pytest.approx(len(src) * 1e6 / (nic * 1e3), rel=1e-6)
    # local senders finish first: they hold a whole port's share
    assert done.finish_us[:3].max() < done.finish_us[3:].min()


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 15),
    st.sampled_from(["pfc", "credit"]),
    st.floats(0.0, 1.0),
)
def test_the_compiled_pfc_event_gives_the_array_codes_rates_bit_for_bit(seed, n, fc, windowed):
    # one event of credit or PFC-only flow control is compiled for small problems
    # (pfc_kernel); the array code it stands for must give the same floats, pauses and queues
    kernels.fill()  # the compiled path runs once the process has the kernels
    g, net = _fabric()
    rng = np.random.default_rng(seed)
    src = np.array([g.nic(int(i), 0) for i in rng.integers(0, 16, n)])
    dst = np.array([g.nic(int(i), 0) for i in rng.integers(0, 16, n)])
    clocked = rng.random(n) < windowed
    push = rng.uniform(5.0, 50.0, n)
    control = {"pfc": PFC_ONLY, "credit": CREDIT}[fc]
    running = rng.random(n) < 0.8
    got = []
    for compiled in (True, False):
        ph, *_ = _phases(net, src, dst, control, seed=seed, push=push, clocked=clocked)
        assert ph._compiled
        ph._compiled = compiled
        rates = ph(running, np.full(n, 1e6))
        got.append((rates, ph.last_pause, ph.last_queues, ph.record.victims))
    (r1, p1, q1, v1), (r2, p2, q2, v2) = got
    assert np.array_equal(r1, r2) and np.array_equal(p1, p2) and q1 == q2
    assert (v1 is None and v2 is None) or np.array_equal(v1, v2)


def test_a_victims_rate_comes_back_when_the_incast_ends():
    # a victim shares a spine-to-leaf link with incast flows: while they run, pauses hold it
    # back; when they end, it gets the link back (it is not cut for the whole run)
    g, net = _fabric()
    far = [
        n
        for n in range(16)
        if net.leaf_of(np.array([g.nic(n, 0)]))[0] != net.leaf_of(np.array([g.nic(0, 0)]))[0]
    ]
    for seed in range(200):
        src = np.array([g.nic(n, 0) for n in far[:8]] + [g.nic(far[-1], 0)])
        dst = np.array([g.nic(0, 0)] * 8 + [g.nic(1, 0)])
        ph, _, _, nic = _phases(net, src, dst, PFC_ONLY, seed=seed)
        first = ph(np.ones(9, bool), np.full(9, 1e6))
        if ph.record.victims is not None and ph.record.victims[8]:
            break
    else:
        raise AssertionError("no seed puts the victim behind a paused port")
    assert first[8] < 0.9 * nic
    alone = ph(np.r_[np.zeros(8, bool), True], np.r_[np.zeros(8), 1e6])
    assert alone[8] == pytest.approx(nic)


def test_windows_below_the_pause_threshold_do_not_pause():
    # three NCCL channels (4 MiB windows) collide on one port: their queue can reach 12 MiB,
    # far above XOFF, so the feeders are paused; with a threshold above the windows nothing is
    g, net = _fabric(nodes=8, radix=8)
    src = np.array([g.nic(i, 0) for i in (1, 2, 3)])
    dst = np.full(3, g.nic(0, 0))
    nic = float(net.capacity[net.uplink(src[:1])][0])
    push = np.full(3, nic / 2)  # each a channel at half its NIC
    clocked = np.ones(3, bool)
    low, *_ = _phases(net, src, dst, PFC_ONLY, push=push, clocked=clocked)
    low(np.ones(3, bool), np.full(3, 1e9))
    assert low.record.paused[0] > 0
    deep = FlowControl.of(
        "pfc",
        True,
        quality("tuned"),
        4096,
        FlowSettings(pfc_xoff_kb=8192, congestion_control="none"),
    )
    high, *_ = _phases(net, src, dst, deep, push=push, clocked=clocked)
    high(np.ones(3, bool), np.full(3, 1e9))
    assert high.record.paused[0] == 0.0


def test_tuned_ecn_holds_windowed_collisions_below_pfc():
    # ECN marks at 5 KB, far below XOFF: DCQCN keeps the queue there, so NCCL channels that
    # collide are not paused; the default profile marks above XOFF, so PFC acts first
    g, net = _fabric(nodes=8, radix=8)
    src = np.array([g.nic(i, 0) for i in (1, 2, 3)])
    dst = np.full(3, g.nic(0, 0))
    nic = float(net.capacity[net.uplink(src[:1])][0])
    paused = {}
    for name in ("tuned", "default"):
        fc = FlowControl.of("pfc", True, quality(name), 4096)
        ph, *_ = _phases(net, src, dst, fc, push=np.full(3, nic / 2), clocked=np.ones(3, bool))
        ph(np.ones(3, bool), np.full(3, 1e9))
        paused[name] = ph.record.paused[0]
    assert paused["tuned"] == 0.0 and paused["default"] > 0


# --- pieces ---------------------------------------------------------------------------------


def test_group_fill_is_max_min_within_each_group():
    got = group_fill(
        np.array([0, 0, 0, 1, 1]), np.array([1.0, 5.0, 5.0, 0.2, 0.3]), np.array([6.0, 1.0])
    )
    assert got == pytest.approx([1.0, 2.5, 2.5, 0.2, 0.3])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3), st.floats(0.01, 10.0) | st.sampled_from([0.5, 1.0, 2.0])
        ),  # equal demands in a group too
        min_size=1,
        max_size=30,
    ),
    st.lists(st.floats(0.1, 20.0), min_size=4, max_size=4),
)
def test_group_fill_never_exceeds_demand_or_capacity(items, caps):
    group = np.array([g for g, _ in items])
    demand = np.array([d for _, d in items])
    cap = np.array(caps)
    got = group_fill(group, demand, cap)
    # a few items are filled one by one in Python, more as arrays: the two agree to the bit,
    # and so does the compiled fill the PFC event runs
    with patch.object(groupfill, "SMALL_GROUPS", -1):
        assert np.array_equal(group_fill(group, demand, cap), got)
    assert np.array_equal(pfc_kernel._group_fill(group, demand, cap), got)
    assert (got <= demand + 1e-9).all()
    used = np.bincount(group, weights=got, minlength=4)
    assert (used <= cap + 1e-9).all()
    # work-conserving: a group below its capacity gave every item all it asked for
    short = used < cap - 1e-9
    assert np.allclose(got[short[group]], demand[short[group]])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 10.0), st.floats(0.0, 10.0)), min_size=1, max_size=60))
def test_group_fill_of_lone_items_is_the_lesser_of_demand_and_capacity(pairs):
    # the arbiter takes this shortcut where every sub-group is alone in the group above it
    demand = np.array([d for d, _ in pairs])
    cap = np.array([c for _, c in pairs])
    group = np.arange(len(pairs))
    for small in (groupfill.SMALL_GROUPS, -1):  # item by item, and as arrays
        with patch.object(groupfill, "SMALL_GROUPS", small):
            assert np.array_equal(group_fill(group, demand, cap), np.minimum(demand, cap))


def test_port_pairs_carry_each_flow_through_each_switch_once():
    g, net = _fabric()
    rng = np.random.default_rng(3)
    src = np.array([g.nic(i, 0) for i in range(16)])
    dst = np.roll(src, -5)
    for mode, kw in (("ecmp", {"qps": 3}), ("adaptive", {}), ("spray", {})):
        r = net.route(src, dst, mode, rng, **kw)
        pp = port_pairs(net, r)
        # what enters a switch on its way out through a lane is that lane's share of the flow
        w_out = np.bincount(pp.flow * net.lanes + pp.out, weights=pp.weight)
        at_switch = net.graph.vertex_kind[net.tail[r.lane]] >= LEAF
        want = np.bincount(
            r.flow[at_switch] * net.lanes + r.lane[at_switch],
            weights=r.weight[at_switch],
            minlength=len(w_out),
        )
        assert w_out == pytest.approx(want[: len(w_out)]), mode


def _pairs_by_search(net, r):
    """Port pairs joined by a sorted search of every entering entry for each leaving one:
    what :func:`port_pairs` gives, computed the plain way."""
    kind, lane, v = net.graph.vertex_kind, r.lane, np.int64(net.graph.vertices)
    e_out = (kind[net.tail[lane]] >= LEAF).nonzero()[0]
    e_in = (kind[net.head[lane]] >= LEAF).nonzero()[0]
    k_out = r.flow[e_out].astype(np.int64) * v + net.tail[lane[e_out]]
    k_in = r.flow[e_in].astype(np.int64) * v + net.head[lane[e_in]]
    order = np.argsort(k_in, kind="stable")
    k_sorted = k_in[order]
    lo = np.searchsorted(k_sorted, k_out, "left")
    count = np.searchsorted(k_sorted, k_out, "right") - lo
    first = count.cumsum() - count
    rep_out = np.repeat(e_out, count)
    rep_in = e_in[order[np.repeat(lo, count) + np.arange(count.sum()) - np.repeat(first, count)]]
    through = np.bincount(
        np.searchsorted(k_sorted, k_in), weights=r.weight[e_in], minlength=len(k_sorted)
    )
    w = r.weight[rep_in] * r.weight[rep_out] / np.maximum(through[np.repeat(lo, count)], 1e-300)
    return lane[rep_out], lane[rep_in], r.flow[rep_out], w, rep_out, rep_in


@pytest.mark.parametrize(
    ("mode", "kw"), [("ecmp", {"qps": 3}), ("adaptive", {}), ("spray", {}), ("flowlet", {})]
)
def test_port_pairs_equal_a_plain_sorted_search(mode, kw):
    """Port pairs found from the runs of the entering entries' keys are those a sorted
    search of every key finds, to the bit."""
    g, net = _fabric(nodes=32)
    src = np.array([g.nic(i, 0) for i in range(32)])
    for shift in (1, 7, 19):
        r = net.route(src, np.roll(src, -shift), mode, np.random.default_rng(shift), **kw)
        pp = port_pairs(net, r)
        got = (pp.out, pp.into, pp.flow, pp.weight, pp.e_out, pp.e_in)
        for a, b in zip(got, _pairs_by_search(net, r), strict=True):
            assert np.array_equal(a, b)


# --- routing modes ---------------------------------------------------------------------------


def test_hash_polarization_concentrates_flows():
    # the same hash at every tier sends flows that met on a leaf uplink down the same spine
    # port: the fullest link is fuller, over many seeds, than with independent hashes
    lay = size_clos("fat-tree", 64, 1, 1, 16, 400.0)
    g = build_graph(lay, 450.0, 64.0)
    net = Network(g, 1.0)
    src = np.array([g.nic(i, 0) for i in range(64)])
    dst = np.roll(src, -16)

    def worst(polarized: bool) -> float:
        out = []
        for s in range(60):
            r = net.route(src, dst, "ecmp", np.random.default_rng(s), polarized=polarized)
            load = np.bincount(r.lane, weights=r.weight, minlength=net.lanes)
            sw = net.graph.vertex_kind[net.tail] >= LEAF
            out.append(load[sw].max())
        return float(np.mean(out))

    assert worst(True) > worst(False)


def test_flowlet_steers_new_flows_around_standing_load():
    # other tenants' standing load is visible to a flowlet switch; the job's own flows, which
    # start together, are not (so without background flowlet hashes like ECMP)
    g, net = _fabric()
    src = np.array([g.nic(1, 0)])
    dst = np.array([g.nic(12, 0)])
    leaf = net.leaf_of(src)[0]
    ups = np.flatnonzero((net.tail == leaf) & (net.graph.vertex_kind[net.head] >= LEAF))
    pre = np.zeros(net.lanes)
    pre[ups] = 10.0
    pre[ups[1]] = 0.0
    for s in range(20):
        r = net.route(src, dst, "flowlet", np.random.default_rng(s), preload=pre)
        assert ups[1] in r.lane


# --- traffic ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [1, 5, None])
def test_a_permutation_sends_and_receives_once_per_nic(shift):
    g, _ = _fabric()
    tr = T.permutation(g, np.arange(16), 1e6, shift, np.random.default_rng(1))
    assert sorted(tr.src.tolist()) == sorted(tr.dst.tolist()) == sorted(g.nic(np.arange(16), 0))
    assert not (tr.src == tr.dst).any()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 63),
            st.integers(0, 63),
            st.integers(1, 10**9),
            st.floats(0, 1e6, allow_nan=False),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_flow_files_read_back_what_was_written(rows):
    text = "src,dst,bytes,start_us\n" + "\n".join(f"{a},{b},{c},{d!r}" for a, b, c, d in rows)
    fl = parse_flows(text)
    assert fl.src.tolist() == [r[0] for r in rows]
    assert fl.size_bytes.tolist() == [float(r[2]) for r in rows]
    assert fl.start_us.tolist() == [r[3] for r in rows]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "empty"),
        ("src,dst\n0,1\n", "missing bytes"),
        ("src,dst,bytes,colour\n0,1,5,red\n", "unknown colour"),
        ("src,dst,bytes\n0,1,-5\n", "line 2: bytes '-5'"),
        ("src,dst,bytes\n0,1.5,5\n", "line 2: dst '1.5'"),
        ("src,dst,bytes\n0,1,5\n0,1\n", "line 3: 2 fields"),
        ("src,dst,bytes\n0,1,nan\n", "line 2: bytes 'nan'"),
        ("src,dst,bytes\n", "no flows"),
    ],
)
def test_a_bad_flow_file_names_line_and_field(text, where):
    with pytest.raises(FlowFileError, match=where):
        parse_flows(text)


def test_a_flow_to_a_nic_outside_the_job_is_refused():
    fl = FlowList(np.array([0]), np.array([99]), np.array([1e6]), np.zeros(1))
    with pytest.raises(FlowFileError, match="dst 99 is not a NIC of the job; NICs are numbered"):
        run_case(Case(gpus=16, gpus_per_node=8, pattern="flows", flows=fl, seeds=1))


def test_flow_settings_are_checked_with_field_value_and_range():
    with pytest.raises(CaseError, match="pfc_xoff_kb: -1"):
        Case(flow=FlowSettings(pfc_xoff_kb=-1)).check()
    with pytest.raises(CaseError, match="congestion_control: 'tcp'"):
        Case(flow=FlowSettings(congestion_control="tcp")).check()
    with pytest.raises(CaseError, match=r"pfc_xon_kb: 300.*at most pfc_xoff_kb"):
        Case(flow=FlowSettings(pfc_xon_kb=300, pfc_xoff_kb=200)).check()


# --- the command line ----------------------------------------------------------------------------


def test_congestion_runs_a_flow_file_and_reports_completion_times(tmp_path):
    f = tmp_path / "flows.csv"
    f.write_text("src,dst,bytes,start_us\n0,9,4000000,0\n1,9,4000000,0\n2,10,4000000,50\n")
    out = run(
        "congestion",
        "--gpus",
        "16",
        "--gpus-per-node",
        "1",
        "--nics-per-node",
        "1",
        "--fabric",
        "roce-400g",
        "--flows",
        str(f),
        "--seeds",
        "2",
        "--jitter-us",
        "0",
        "--congestion-control",
        "none",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    nic = 47.0  # roce-400g goodput, GB/s
    alone = 4e6 / (nic * 1e3)
    # two flows into NIC 9 share it; the third runs alone (it starts later, elsewhere)
    assert d["fct_max_us"] == pytest.approx(2 * alone, rel=0.05)
    assert d["fct_p50_us"] == pytest.approx(2 * alone, rel=0.05)
    assert d["case"]["flows"] == "flows.csv" and d["case"]["flow"]["congestion_control"] == "none"


def test_congestion_permutation_with_a_shift(tmp_path):
    out = run(
        "congestion",
        "--gpus",
        "64",
        "--gpus-per-node",
        "1",
        "--nics-per-node",
        "1",
        "--pattern",
        "permutation",
        "--shift",
        "8",
        "--routing",
        "adaptive",
        "--seeds",
        "1",
        "--jitter-us",
        "0",
        "--size",
        "4M",
        "--json",
    )
    d = json.loads(out.stdout)
    assert d["p50_slowdown"] == pytest.approx(1.0, abs=0.01)  # adaptive routing: no collisions


def test_congestion_refuses_a_bad_flow_file(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("src,dst,bytes\n0,1,lots\n")
    out = run("congestion", "--flows", str(f))
    assert out.returncode == 2
    assert "bad.csv: line 2: bytes 'lots' is not allowed" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr


# --- against the packet-level reference -----------------------------------------------------------


def test_ecmp_permutation_and_incast_match_the_packet_level_reference():
    # recorded from a packet-level simulator on its own fabric, never used to set anything
    for name in ("perm128", "perm1024", "ring1024", "incast16", "incast64", "a2a64"):
        case = next(c for c in P.CASES if c.name == name)
        c = P.compare(case, "ecmp")
        assert c.within, (name, c.errors)


# --- rail-optimized fabrics at scale -------------------------------------------------------------


def _leaving(design: str, seed: int = 0) -> tuple[int, int]:
    """Ring flows that leave their leaf, and the most on any one leaf, for 512 GPUs placed
    fragmented over 1,024 (RoCE 400G, 128-port switches)."""
    from fabricplan.topology import design_fabric

    d = design_fabric(1024, design, "roce-400g")
    g = build_graph(d.layout, 450.0, 64.0)
    net = Network(g, 1.0)
    job = T.place(g.nodes, 64, "fragmented", np.random.default_rng(seed))
    tr = T.ring(g, job, 1e6)
    s_leaf, d_leaf = net.leaf_of(tr.src), net.leaf_of(tr.dst)
    out = s_leaf[s_leaf != d_leaf]
    return len(out), int(np.bincount(out).max(initial=0))


def test_rail_optimized_meets_spine_ecmp_as_a_fat_tree_does():
    # The same routing at the leaf uplinks: traffic that leaves its leaf collides under ECMP on
    # either design. A double binary tree's edges span the job, so on rail-optimized leaves it
    # loses to collisions too; a ring's neighbours in host order share their rail's leaf (64
    # nodes a leaf), so only the few hops at leaf boundaries leave it, against every rail's
    # hops at every boundary on a fat-tree leaf (8 nodes a leaf): that, not the routing, is
    # why a fragmented ring barely notices ECMP on a rail-optimized fabric.
    base = dict(gpus=512, placement="fragmented", routing="ecmp", seeds=3)
    tree = run_case(Case(design="rail-optimized", pattern="tree-allreduce", **base))
    ring = run_case(Case(design="rail-optimized", pattern="ring-allreduce", **base))
    fat = run_case(Case(design="fat-tree", pattern="ring-allreduce", **base))
    assert np.median(tree.network_slowdowns) >= 1.2  # 1.25 on most seeds, 1.5 on some
    assert np.median(ring.network_slowdowns) < 1.01
    assert np.median(fat.network_slowdowns) >= 1.4
    rail_out, rail_most = _leaving("rail-optimized")
    fat_out, fat_most = _leaving("fat-tree")
    # two channels a NIC at half its rate each: only three on one uplink lose anything
    assert rail_most <= 2 * T.CHANNELS_PER_NIC < fat_most
    assert fat_out > 4 * rail_out


def test_valiant_and_ugal_spread_a_ring_over_a_dragonfly_group():
    # a ring between neighbouring routers of one group puts every crossing channel on one
    # local link under minimal routing; a detour through a random third router spreads it
    base = dict(gpus=1024, design="dragonfly", routing="adaptive", seeds=2, jitter_us=0.0)
    slow = {
        r: float(np.median(run_case(Case(dragonfly=r, **base)).network_slowdowns))
        for r in ("minimal", "valiant", "ugal")
    }
    assert slow["minimal"] == pytest.approx(8.0, rel=0.01)  # 16 half-NIC channels on one link
    assert slow["valiant"] < slow["minimal"] / 2
    assert slow["ugal"] < slow["minimal"] / 2
    with pytest.raises(CaseError, match="dragonfly: 'random'"):
        Case(dragonfly="random").check()


def test_roce_quality_reaches_the_data_parallel_ring():
    # the 256-GPU MoE example on a 2:1 RoCE fat-tree: its data-parallel ring channels collide
    # on the leaf uplinks. Tuned ECN holds their queues below XOFF; the default profile lets
    # PFC pause their NICs where a collision fills a port past XOFF (the other channel of each
    # NIC is a victim), which the expected slowdown barely shows (0.3 % of the reduction over
    # 40 seeds); with PFC off the collision overflows the port and go-back-N collapses the ring.
    from fabricplan.catalog import default_catalog
    from fabricplan.scenario import load_scenario
    from fabricplan.workload import evaluate_scenario

    cat = default_catalog()
    dp = {}
    for q in ("tuned", "default", "misconfigured"):
        sc = load_scenario(
            "examples/256-gpu-moe.yaml",
            catalog=cat,
            overrides=[
                "cluster.topology.design=fat-tree",
                "cluster.topology.oversubscription=2",
                f"cluster.roce_quality={q}",
            ],
        )
        (r,) = evaluate_scenario(sc, cat, ["roce-400g"])
        dp[q] = r.figures.breakdown["dp_comm_total_s"]
    assert dp["tuned"] <= dp["default"] < dp["misconfigured"]
    assert dp["misconfigured"] / dp["tuned"] > 3


def test_a_routing_a_fabric_does_not_offer_is_warned_about():
    out = run(
        "scenario", "check", "examples/64-gpu-70b-training.yaml", "--set", "cluster.routing=flowlet"
    )
    assert out.returncode == 0
    assert "cluster.routing: is not among ib-ndr's routings (adaptive, static)" in out.stdout
    assert "roce-400g's routings" not in out.stdout  # RoCE switches offer flowlet routing
    ecmp = run(
        "scenario", "check", "examples/64-gpu-70b-training.yaml", "--set", "cluster.routing=ecmp"
    )
    assert "cluster.routing" not in ecmp.stdout  # static tables hash as ECMP does


def test_deeper_spreading_pauses_the_remote_senders_too(monkeypatch):
    # level 1: each hot port pauses the ports feeding it (the receiver's local NICs; the links
    # from remote leaves into a crowded spine); level 2: a paused link that cannot carry what
    # arrives for it pauses its own feeders, the remote senders' NICs (switched off by
    # default; kept so the comparison with the packet-level reference can be rerun with it)
    from fabricplan.congestion import flowcontrol

    g, net = _fabric()
    src = np.array([g.nic(i, 0) for i in range(1, 16)])
    dst = np.full(len(src), g.nic(0, 0))
    kind = net.graph.vertex_kind
    far = net.leaf_of(src)[net.leaf_of(src) != net.leaf_of(dst[:1])[0]]
    leaf_up = (kind[net.tail] < LEAF) & np.isin(net.head, far)  # remote senders' NIC links
    seen = {}
    spread = flowcontrol.Phases._spread

    def keep(self, *args):
        out = spread(self, *args)
        seen[flowcontrol.SPREAD_LEVELS] = out.copy()
        return out

    monkeypatch.setattr(flowcontrol.Phases, "_spread", keep)
    for levels in (1, 2):
        monkeypatch.setattr(flowcontrol, "SPREAD_LEVELS", levels)
        ph, *_ = _phases(net, src, dst, PFC_ONLY)
        ph._compiled = False  # the array code, where the spreading is (the kernel has level 1)
        ph(np.ones(len(src), bool), np.full(len(src), 1e6))
    # the second level only adds pauses, and adds them at the remote senders' NICs
    assert (seen[2] >= seen[1]).all()
    assert (seen[2][leaf_up] > seen[1][leaf_up]).any()


def test_a_flow_list_has_no_bus_bandwidth(tmp_path):
    f = tmp_path / "two.csv"
    f.write_text("src,dst,bytes\n0,1,1000000\n2,3,1000000\n")
    out = run(
        "congestion",
        "--gpus",
        "8",
        "--gpus-per-node",
        "1",
        "--nics-per-node",
        "1",
        "--flows",
        str(f),
        "--seeds",
        "1",
    )
    assert out.returncode == 0, out.stderr
    assert "2 flows from two.csv on 8 x h100" in out.stdout
    assert "busbw" not in out.stdout


@pytest.mark.parametrize(
    ("mode", "kw"),
    [
        ("ecmp", {"qps": 3}),
        ("ecmp", {"polarized": True}),
        ("spray", {}),
        ("adaptive", {"load": True}),
        ("flowlet", {"load": True}),  # a flowlet switch weighs the standing load
    ],
)
def test_small_fabrics_route_from_their_closer_port_table_as_by_search(mode, kw):
    """A small fabric keeps each switch's closer ports per target in a table; routing from it
    gives the routes (and draws the random numbers) a hop-by-hop search gives, load-aware
    routing included."""
    from fabricplan.congestion import network

    g = _fabric(nodes=32)[0]
    src = np.array([g.nic(i, 0) for i in range(32)])
    dst = np.roll(src, -9)
    kw = dict(kw)
    plain = Network(g, 1.0)
    uneven = np.random.default_rng(5).random(plain.lanes) * 40
    preload = uneven if kw.pop("load", False) else None
    routes = []
    for cells in (network.CLOSER_TABLE_CELLS, -1):
        with patch.object(network, "CLOSER_TABLE_CELLS", cells):
            net = Network(g, 1.0)  # its tables are kept per network: a fresh one each time
            rng = np.random.default_rng(11)
            r = net.route(src, dst, mode, rng, preload=preload, demand=np.full(32, 5.0), **kw)
            routes.append((r.lane, r.flow, r.weight, rng.random()))
    (lane, flow, weight, after), (lane2, flow2, weight2, after2) = routes
    assert np.array_equal(lane, lane2) and np.array_equal(flow, flow2)
    assert np.array_equal(weight, weight2) and after == after2


def test_distances_to_a_second_set_of_targets_come_from_the_whole_table():
    """Once a network is asked about a second set of target switches (other tenants' flows,
    routed apart from the job's), it keeps the distances to every switch: each answer equals
    the search for those targets alone, and a fabric too large for the whole table searches as
    before."""
    from fabricplan.congestion import network
    from fabricplan.topology.bfs import hop_distances

    lay = size_clos("fat-tree", 128, 1, 1, 8, 400.0)  # 3 tiers
    g = build_graph(lay, 450.0, 64.0)
    asks = [np.array([0, 3]), np.array([5]), np.array([1, 2, 7]), np.array([0, 3])]
    for cells, whole in ((network.ALL_DISTANCES_CELLS, True), (0, False)):
        with patch.object(network, "ALL_DISTANCES_CELLS", cells):
            net = Network(g, 1.0)
            nbrs = net._switch_neighbours
            for targets in asks:
                assert np.array_equal(net._distances(targets), hop_distances(*nbrs, targets))
            assert bool(net._whole_distances) is whole
            assert net._distances(asks[0]).shape == (2, len(nbrs[0]) - 1)


def test_the_reference_runs_carry_whole_packets_where_its_sender_sends_them():
    # htsim_roce sends every packet full, the last one too; htsim_eqds's last one is partial:
    # the flow lists run here carry the bytes each simulator put on the wire
    s = P.setting()
    flows = FlowList(np.array([0, 1]), np.array([2, 3]), np.array([5e5, 4_005_000.0]), np.zeros(2))
    assert P.whole_packets(flows, s.packet_bytes).size_bytes.tolist() == [504_000, 4_005_000]
    runs = P.simulator_of()
    assert {runs[("a2a64", r)] for r in ("ecmp", "flowlet")} <= set(s.whole_packet_simulators)
    assert runs[("a2a64", "spray")] not in s.whole_packet_simulators


def test_the_reference_incasts_fastest_runs_are_kept_beside_their_medians():
    # the speed benchmark reads the incasts fastest against fastest too: the fastest of the
    # reference's many runs of each, never above the median the ratios compare with
    fastest, wall = P.fastest_wall_s(), P.measured()
    assert set(fastest) == {(c, r) for c in ("incast16", "incast64") for r in P.ROUTINGS}
    for key, s in fastest.items():
        assert 0.8 * wall[key]["wall_s"] < s <= wall[key]["wall_s"]
    assert fastest["incast64", "flowlet"] == pytest.approx(0.0512)


# the recorded runs in which one flow never finished (reference.toml's notes)
LEFT_OUT = {("incast24v", "flowlet"), ("a2a24x2", "flowlet")}


def test_developed_and_held_back_cases_are_the_recorded_traffic():
    # each recorded run carried as many flows as the case's list, over 5 seeds (one flowlet
    # run left out, as its notes say), on the routings the RoCE simulator has; no case is in
    # two sets
    m = P.measured()
    suite = {c.name for c in P.CASES}
    developed = {c.name for c in P.DEVELOPED}
    held = {c.name for c in P.HELD_BACK}
    assert not (suite & developed or suite & held or developed & held)
    for cases, data in ((P.DEVELOPED, "htsim_developed.csv"), (P.HELD_BACK, "htsim_held_back.csv")):
        rows = list(csv.DictReader((P.DATA / data).read_text().splitlines()))
        for case in cases:
            n = len(case.flows().src)
            for routing in ("ecmp", "flowlet"):
                mine = [r for r in rows if (r["case"], r["routing"]) == (case.name, routing)]
                assert {int(r["flows"]) for r in mine} == {n}, case.name
                # a flowlet run in which a flow never finished in htsim, left out (notes)
                left_out = (case.name, routing) in {
                    ("incast24v", "flowlet"),
                    ("a2a24x2", "flowlet"),
                }
                assert m[(case.name, routing)]["seeds"] == (4 if left_out else 5)
        assert {r["case"] for r in rows} == {c.name for c in cases}
        assert {r["routing"] for r in rows} == {"ecmp", "flowlet"}


def test_an_incast_senders_other_flows_are_held_with_it_as_in_the_packet_simulator():
    # 8 -> 1: the receiver's link sets the pace, within 1 % under both routings. Where each
    # incast sender also sends elsewhere, PFC reaches its NIC and holds that flow with the
    # incast (nic_turns): the median flow within 12 % of the simulator under ECMP, where one
    # level of pauses alone had it 35-78 % early; the tails stay within 2 %
    for c in P.check_all(only="incast8", cases=P.DEVELOPED):
        assert all(abs(e) < 0.01 for e in c.errors.values()), (c.routing, c.errors)
    for name in ("incast24v", "incast32nic", "inc7heavy"):
        ecmp = next(c for c in P.check_all(only=name, cases=P.DEVELOPED) if c.routing == "ecmp")
        assert -0.12 < ecmp.errors["p50"] < 0.05, (name, ecmp.errors)
        assert abs(ecmp.errors["max"]) < 0.02, (name, ecmp.errors)
    # 24 senders, each with two flows beside the incast: the incast's flows fill the port pairs
    # near the receiver together, so the NICs are held within microseconds, and the median
    # (a victim) is within 25 %; with each held flow filling every port of its path alone it
    # was 66 % early
    mix = P.check_all(only="incast24mix", cases=P.DEVELOPED)
    ecmp = next(c for c in mix if c.routing == "ecmp")
    assert -0.25 < ecmp.errors["p50"] < 0.05 and abs(ecmp.errors["max"]) < 0.02, ecmp.errors


def test_a_long_all_to_all_keeps_its_senders_free_as_in_the_packet_simulator():
    # 5 MB a pair over 64 hosts: the flows last long enough for ECMP collisions to strand the
    # thresholds' worth of bytes; a NIC held to its most held flow slowed it 8-9 %, held as
    # fast as its held flows drain together it is within 6 %
    ecmp = next(c for c in P.check_all(only="a2a64long", cases=P.DEVELOPED) if c.routing == "ecmp")
    assert all(abs(e) < 0.07 for e in ecmp.errors.values()), ecmp.errors


def test_traffic_beside_an_incast_on_other_nics_is_the_documented_miss():
    # a permutation of every host beside a 32 -> 1 incast from half of them: in the packet
    # simulator the incast's pauses spread through the switches and slow the median
    # permutation flow 2.7x; here pauses spread one level between switches, so it is 62 %
    # early (docs/congestion.md; "not modelled"); the tail, the incast's, is right
    ecmp = next(c for c in P.check_all(only="permincast", cases=P.DEVELOPED) if c.routing == "ecmp")
    assert ecmp.errors["p50"] < -0.5 and abs(ecmp.errors["max"]) < 0.01, ecmp.errors


def test_flowlet_moves_resend_as_the_packet_simulator_retransmits_where_senders_send_one_flow():
    # go-back-N after a move: where each incast sender sends only its incast flow, what the
    # moves send again is within half of what htsim retransmits (median over seeds), and its
    # flowlet tails are within 10 %; ECMP moves nothing and resends nothing, as htsim
    for name in ("incast32", "incast28up", "twoincast"):
        for c in P.check_all(only=name, cases=P.DEVELOPED):
            if c.routing == "ecmp":
                assert c.resent_bytes is None and c.within, (name, c.errors)
                continue
            ours, ref = c.resent_bytes
            assert 0.5 < ours / ref < 1.5, (name, ours, ref)
            assert abs(c.errors["p99"]) < 0.1, (name, c.errors)
