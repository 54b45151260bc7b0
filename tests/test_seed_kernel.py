"""A flowlet run in one compiled call (seed_kernel) against the Python loop it stands for."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from fabricplan.congestion import kernels, seed_run
from fabricplan.congestion.dcqcn import quality
from fabricplan.congestion.fill_kernel import fill_parts
from fabricplan.congestion.fill_links import lane_links, lone_rows_pruned, row_links
from fabricplan.congestion.flowcontrol import FlowControl
from fabricplan.congestion.flowfile import FlowList
from fabricplan.congestion.flowlet import FlowletMoves
from fabricplan.congestion.jitted import unique_pairs
from fabricplan.congestion.network import Routed
from fabricplan.congestion.precompile import FLOWLET_CASE
from fabricplan.congestion.seed_parts import add_reduce
from fabricplan.congestion.simulate import run_case
from fabricplan.congestion.waterfill import LEVEL_MERGE, complete, max_min_rates
from fabricplan.topology.graph import LEAF
from test_flowlet import BYTES, FC, MTU, _fabric, _policy


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1200), st.integers(0, 2**31))
def test_the_compiled_sum_is_numpys_pairwise_sum_bit_for_bit(n, seed):
    # the paused share of each event is a mean NumPy sums pairwise: the compiled run must make
    # the same additions in the same order, whatever the length (blocks of 8 and 128, halves)
    x = np.random.default_rng(seed).random(n) * np.random.default_rng(seed + 1).random(n)
    assert add_reduce(x) == np.add.reduce(x)


def _moves(seed: int, timeout_us: float = 10.0):
    """Four flows from leaf 0 to leaf 1, started on one uplink (the collision flowlet moves
    break up), as the flowlet tests build them; the moves and the columns' arrays."""
    g, net = _fabric()
    src = np.array([g.nic(i, 0) for i in range(4)])
    dst = np.array([g.nic(i, 0) for i in range(4, 8)])
    leaf = net.leaf_of(src[:1])[0]
    ups = np.flatnonzero((net.tail == leaf) & (g.vertex_kind[net.head] >= LEAF))
    pre = np.full(net.lanes, 10.0)
    pre[ups[0]] = 0.0
    rng = np.random.default_rng(seed)
    routed = net.route(src, dst, "flowlet", rng, preload=pre)
    n = len(src)
    nic = float(net.capacity[net.uplink(src[:1])][0])
    push, cap, job, clocked = (
        np.full(n, nic),
        np.full(n, np.inf),
        np.ones(n, bool),
        np.zeros(n, bool),
    )

    def build(r: Routed, pairs=None):
        from scipy.sparse import csr_matrix

        from fabricplan.congestion.flowcontrol import Phases

        a = csr_matrix((r.weight, (r.lane, r.flow)), shape=(net.lanes, n))
        return Phases(net, r, np.arange(n), a, a.T.tocsr(), push, cap, clocked, job, FC, 6.0, pairs)

    moves = FlowletMoves(
        net, routed, np.arange(n), np.ones(n, bool), build, dst, _policy(timeout_us), rng
    )
    starts = np.random.default_rng(seed).uniform(0, 20, n) * (seed % 2)  # staggered, or not
    return moves, net, (np.full(n, BYTES), starts, cap, push, job, clocked)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([5, 32, 33, 200, 3000]),
    st.sampled_from([1, 3, 40, 400]),
    st.integers(0, 2**31),
)
def test_the_compiled_sort_of_key_pairs_is_numpys_unique(n, n_hi, seed):
    """unique_pairs by insertion (a few keys) or by counting: either way np.unique's sorted
    keys and inverse."""
    rng = np.random.default_rng(seed)
    n_lo = 150
    hi = rng.integers(0, n_hi, n)
    lo = rng.integers(0, n_lo, n)
    keys, inverse = unique_pairs(hi, lo, n_hi, n_lo)
    want, want_inverse = np.unique(hi * n_lo + lo, return_inverse=True)
    assert np.array_equal(keys, want) and np.array_equal(inverse, want_inverse)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000))
def test_a_compiled_run_is_the_python_loop_bit_for_bit(seed):
    kernels.fill()  # a process that holds the compiled kernels
    moves, net, columns = _moves(seed)
    done = seed_run.compiled_run(moves, FC, columns)
    assert done is not None
    ref, _, _ = _moves(seed)
    size, starts, cap = columns[:3]
    want = complete(ref.phases.a, net.capacity, size, starts, cap, rates=ref)
    assert np.array_equal(done.finish_us, want.finish_us)
    assert done.events == want.events and done.durations_us == want.durations_us
    assert moves.moves == ref.moves
    for k in ("lane", "flow", "weight"):
        assert np.array_equal(getattr(moves.routed, k), getattr(ref.routed, k)), k
    got, rec = moves.record, ref.record
    assert got.paused == rec.paused and got.busiest == rec.busiest
    assert got.queue_kb == rec.queue_kb
    assert np.array_equal(got.utilisation, rec.utilisation)
    assert (got.victims is None) == (rec.victims is None)
    if rec.victims is not None:
        assert np.array_equal(got.victims, rec.victims)
    # and the same draws: both generators end in the same state
    assert moves.rng.random() == ref.rng.random()


def test_the_collision_breaks_up_in_the_compiled_run_as_in_the_loop():
    # the four-way collision of the flowlet tests: moves are made, and the run ends far sooner
    # than four flows sharing one uplink would
    kernels.fill()
    moves, _, columns = _moves(0)  # all starting at once
    done = seed_run.compiled_run(moves, FC, columns)
    assert done is not None and moves.moves >= 3
    alone_us = BYTES / (float(columns[3][0]) * 1e3)
    assert alone_us < done.finish_us.max() < 2 * alone_us  # not 4x: the collision ended


def test_runs_without_the_compiled_kernels_or_with_dcqcn_take_the_loop(monkeypatch):
    moves, _, columns = _moves(0)
    monkeypatch.setattr(kernels, "loaded", lambda: False)
    assert seed_run.compiled_run(moves, FC, columns) is None
    monkeypatch.undo()
    dcqcn = FlowControl.of("pfc", True, quality("tuned"), MTU)  # the preset's DCQCN on
    assert dcqcn.dcqcn
    kernels.fill()
    assert seed_run.compiled_run(moves, dcqcn, columns) is None


@pytest.mark.parametrize(
    "extra",
    [
        {"pattern": "incast"},
        {"pattern": "alltoall", "jitter_us": 5.0},
        {"pattern": "incast", "background": 0.3},
        # paths that stay as routed: the same loop without moves
        {"pattern": "incast", "routing": "ecmp", "qps": 2},
        {"pattern": "alltoall", "routing": "adaptive", "jitter_us": 5.0},
        {"pattern": "incast", "routing": "ecmp", "background": 0.3},
    ],
)
def test_a_case_gives_the_same_figures_run_compiled_or_in_the_loop(extra, monkeypatch):
    # end to end, probes included (they read the record's queues and the paths at the end)
    kernels.fill()
    # the flowlet incast the install compiles the kernels with, smaller and over three seeds
    case = replace(FLOWLET_CASE, gpus=64, size_bytes=2**22, seeds=3, **extra)
    runs = []

    def counted(run):
        def call(*args):
            runs.append(run(*args))
            return runs[-1]

        return call

    for name in ("compiled_run", "compiled_fixed_run"):
        monkeypatch.setattr(seed_run, name, counted(getattr(seed_run, name)))
    fast = run_case(case, workers=1)
    assert len(runs) == 3 and all(r is not None for r in runs)  # each seed in one call
    monkeypatch.setattr(seed_run, "compiled_run", lambda *a: None)
    monkeypatch.setattr(seed_run, "compiled_fixed_run", lambda *a: None)
    slow = run_case(case, workers=1)
    assert np.array_equal(fast.times_us, slow.times_us)
    assert fast.fct_us == slow.fct_us and fast.latency_us == slow.latency_us
    assert fast.paused_fraction == slow.paused_fraction
    assert fast.victim_flows == slow.victim_flows and fast.hottest_links == slow.hottest_links


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31))
def test_dropping_the_looser_rows_of_a_lone_flow_leaves_the_rates_as_they_were(seed):
    # arbiter rows that hold one flow: only its tightest can bind; the fill without the others
    # must give the very same rates (the rows kept keep their order), and the same as the
    # array code's max-min fill of the whole matrix (entries of one cell summed)
    rng = np.random.default_rng(seed)
    n_links, n_cols = 6, 5
    lane_rows = [
        sorted(rng.choice(n_cols, rng.integers(1, 4), replace=False)) for _ in range(n_links)
    ]
    indptr = np.r_[0, np.cumsum([len(r) for r in lane_rows])].astype(np.int64)
    indices = np.array([c for r in lane_rows for c in r], np.int64)
    data = rng.choice([1.0, 0.5, 2.0, 0.0], len(indices))
    extra = [[int(rng.integers(n_cols))] for _ in range(rng.integers(1, 12))]
    extra += [list(rng.choice(n_cols, 2)) for _ in range(rng.integers(0, 3))]  # a cell twice
    rows = np.array([r for r, e in enumerate(extra) for _ in e], np.int64)
    cols = np.array([c for e in extra for c in e], np.int64)
    weights = rng.choice([1.0, 0.5, 2.0], len(rows))
    caps = rng.choice([1.0, 2.0, 3.0, 4.0, np.inf], len(extra))  # equal shares: ties too
    capacity = rng.uniform(1, 10, n_links)
    running = rng.random(n_cols) < 0.8
    uncapped = np.full(n_cols, np.inf)
    rates = {}
    for prune in (False, True):
        given = (rows, cols, weights, caps)
        if prune:
            given = lone_rows_pruned(given, n_cols)
            assert len(given[3]) <= len(caps) and np.isin(given[3], caps).all()
        lanes = lane_links((indptr, indices, data), n_cols)
        rows_part, extra_cap = row_links(n_links, n_cols, given)
        assert len(extra_cap) == len(given[3])
        caps_all = np.concatenate([capacity, extra_cap])
        rates[prune] = fill_parts(lanes, rows_part, caps_all, running, uncapped)
        # the lanes' links and the rows joined into one problem: the very same rates
        joined = _joined(lanes, rows_part)
        assert np.array_equal(kernels.fill()(*joined, caps_all, running, uncapped), rates[prune])
    assert np.array_equal(rates[False], rates[True])
    whole = csr_matrix((data, indices, indptr), shape=(n_links, n_cols)).toarray()
    below = np.zeros((len(extra), n_cols))
    np.add.at(below, (rows, cols), weights)
    a = csr_matrix(np.vstack([whole, below]))
    expected = max_min_rates(a, np.concatenate([capacity, caps]), running)
    assert np.allclose(rates[True], expected, rtol=LEVEL_MERGE, atol=1e-12)


def _joined(lanes: tuple, rows: tuple) -> tuple:
    """The lanes' links and the rows' as one problem of the fill: per link its columns (lanes,
    then rows), per column its links (its lanes', then its rows')."""
    l_ptr, l_flow, f_ptr, f_link, f_w = lanes
    r_ptr, r_flow, g_ptr, g_link, g_w = rows
    n_cols = len(f_ptr) - 1
    ptr = np.r_[l_ptr, l_ptr[-1] + r_ptr[1:]]
    flows = np.r_[l_flow, r_flow]
    per_col = [
        (
            np.r_[f_link[f_ptr[f] : f_ptr[f + 1]], g_link[g_ptr[f] : g_ptr[f + 1]]],
            np.r_[f_w[f_ptr[f] : f_ptr[f + 1]], g_w[g_ptr[f] : g_ptr[f + 1]]],
        )
        for f in range(n_cols)
    ]
    c_ptr = np.r_[0, np.cumsum([len(k) for k, _ in per_col])]
    link = np.concatenate([k for k, _ in per_col]).astype(np.int32)
    weight = np.concatenate([w for _, w in per_col])
    return ptr.astype(np.int32), flows.astype(np.int32), c_ptr.astype(np.int32), link, weight


def test_a_lone_flows_looser_rows_go_and_the_rest_keep_their_order():
    # rows 0 and 1 hold column 0 alone (caps 4 and 2 over weight 1), row 2 holds columns 0
    # and 1, row 3 holds column 1 alone in two entries (weights 0.5 + 0.5, cap 3), row 4
    # holds column 1 alone at an equal share (cap 3): the first of equal ones stays
    rows = np.array([0, 1, 2, 2, 3, 3, 4], np.int64)
    cols = np.array([0, 0, 0, 1, 1, 1, 1], np.int64)
    weights = np.array([1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 1.0])
    caps = np.array([4.0, 2.0, 5.0, 3.0, 3.0])
    r, c, w, kept_caps = lone_rows_pruned((rows, cols, weights, caps), 2)
    assert r.tolist() == [0, 1, 1, 2, 2]
    assert c.tolist() == [0, 0, 1, 1, 1]
    assert w.tolist() == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert kept_caps.tolist() == [2.0, 5.0, 3.0]


def test_a_large_flowlet_run_gives_the_same_figures_in_one_compiled_call_or_in_the_loop(
    monkeypatch,
):
    # an all-to-all among 80 hosts of the reference suite's fabric under flowlet routing, above
    # kernels.COMPILED_MIN_SIZE: in one compiled call a seed (its arrivals swept level by
    # level, the fill's lane links kept per set of paths), or in the Python loop whose events
    # take the array code and whose batches of moves rebuild the tables in one compiled call
    # or in array code: the figures must not depend on which
    from fabricplan.congestion import compiled_phases
    from fabricplan.validation import packet_level as P

    kernels.fill()
    src, dst = np.nonzero(~np.eye(80, dtype=bool))
    flows = FlowList(src, dst, np.full(len(src), 200_000.0), np.zeros(len(src)))
    case = P.flow_case(128, flows, "flowlet", seeds=1)
    sizes, calls = [], []
    whole_run, compiled_moved = seed_run.compiled_run, compiled_phases.moved

    def run(moves, *args):
        sizes.append(len(moves.routed.lane))
        return whole_run(moves, *args)

    def moved(*args):
        calls.append(compiled_moved(*args))
        return calls[-1]

    monkeypatch.setattr(seed_run, "compiled_run", run)
    fast = run_case(case, P.reference_catalog(), probes=False, workers=1)
    assert sizes and min(sizes) >= kernels.COMPILED_MIN_SIZE
    monkeypatch.setattr(seed_run, "compiled_run", lambda *a: None)
    monkeypatch.setattr(compiled_phases, "moved", moved)
    loop = run_case(case, P.reference_catalog(), probes=False, workers=1)
    assert [c for c in calls if c is not None]  # the loop's batches rebuilt compiled
    monkeypatch.setattr(compiled_phases, "moved", lambda *a: None)
    slow = run_case(case, P.reference_catalog(), probes=False, workers=1)
    for other in (loop, slow):
        assert np.array_equal(fast.times_us, other.times_us)
        assert fast.fct_us == other.fct_us and fast.paused_fraction == other.paused_fraction
        assert fast.victim_flows == other.victim_flows
        assert fast.hottest_links == other.hottest_links
