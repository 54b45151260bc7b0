"""The compiled rebuild's pieces against the array code they stand for: the same arrays, in the
same order (the events that read them sum in that order)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.congestion import kernels, moved_tables, ports, route_kernel, seed_run
from fabricplan.congestion import rebuild_kernel as R
from fabricplan.congestion.flowcontrol import Phases
from fabricplan.congestion.network import Network
from fabricplan.congestion.ports import port_pairs
from fabricplan.congestion.waterfill import matrix_of
from fabricplan.topology.clos import size_clos
from fabricplan.topology.graph import LEAF, build_graph

_G = build_graph(size_clos("fat-tree", 32, 1, 1, 8, 400.0), 450.0, 64.0)
_NET = Network(_G, 1.0)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([("ecmp", 1), ("ecmp", 3), ("spray", 1), ("adaptive", 1)]),
)
def test_port_pairs_compiled_are_the_array_codes(seed, how):
    # split flows (queue pairs on different paths, sprayed or adaptive pieces) enter and leave
    # a switch on several lanes: the pairs are every (leaving, entering) entry of one flow
    mode, qps = how
    rng = np.random.default_rng(seed)
    n = 24
    src = np.array([_G.nic(int(i), 0) for i in rng.integers(0, 32, n)])
    dst = np.array([_G.nic(int(i), 0) for i in rng.integers(0, 32, n)])
    r = _NET.route(src, dst, mode, rng, qps=qps, demand=np.full(n, 10.0))
    ref = port_pairs(_NET, r)
    got = R.port_pairs(
        r.lane,
        r.flow,
        np.asarray(r.weight, float),
        (_NET.tail, _NET.head, _G.vertex_kind),
        LEAF,
    )
    for name, x in zip(("out", "into", "flow", "weight", "e_out", "e_in"), got, strict=True):
        assert np.array_equal(getattr(ref, name), x), name


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3000), st.booleans())
def test_the_compiled_matrix_is_matrix_of(seed, n, repeats):
    # entries by lane, then column; cells that meet are summed (scipy's matrix), in entry order
    rng = np.random.default_rng(seed)
    lanes, columns = 40, 30
    if repeats:
        lane, col = rng.integers(0, lanes, n), rng.integers(0, columns, n)
    else:  # distinct cells: the array code keeps the entries as they are
        cells = rng.choice(lanes * columns, min(n, lanes * columns), replace=False)
        lane, col = cells // columns, cells % columns
    weight = rng.uniform(0.1, 2.0, len(lane))
    ref = matrix_of(lane, col, weight, (lanes, columns))
    indptr, indices, data = moved_tables.matrix_of(lane, col, weight, lanes, columns)
    assert np.array_equal(indptr, ref.indptr) and np.array_equal(indices, ref.indices)
    if repeats:
        assert data == pytest.approx(np.asarray(ref.data), rel=1e-12)
    else:
        assert np.array_equal(data, ref.data)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 600), st.floats(0.0, 0.5), st.booleans())
def test_the_matrix_after_moves_is_the_matrix_sorted_whole(seed, n, share, repeats):
    # the columns that moved lose their entries and take new ones at the end (fresh lanes);
    # the others keep theirs, renumbered in order: merging the cells that stayed with the
    # moved columns' gives the arrays the whole sort gives, in their order
    rng = np.random.default_rng(seed)
    lanes, columns = 30, 25
    lane, col = rng.integers(0, lanes, n), rng.integers(0, columns, n)
    if not repeats:  # one entry per cell
        cells = np.unique(lane * columns + col)
        lane, col = cells // columns, cells % columns
    weight = rng.uniform(0.1, 2.0, len(lane))
    before = moved_tables.matrix_of(lane, col, weight, lanes, columns)
    moved = rng.random(columns) < share
    stay = ~moved[col] | (rng.random(len(col)) < 0.5)  # a moved column may keep some entries
    k = int(rng.integers(0, 3 * int(moved.sum()) + 1))
    fresh_col = rng.choice(np.flatnonzero(moved), k) if moved.any() else np.zeros(0, np.int64)
    lane = np.concatenate([lane[stay], rng.integers(0, lanes, len(fresh_col))])
    col = np.concatenate([col[stay], fresh_col])
    weight = np.concatenate([weight[stay], rng.uniform(0.1, 2.0, len(fresh_col))])
    whole = moved_tables.matrix_of(lane, col, weight, lanes, columns)
    after = moved_tables.matrix_after(before, (lane, col, weight), moved, lanes)
    for a, b in zip(after, whole, strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(0, 3))
def test_port_ids_after_moves_are_those_sorted_whole(seed, m, how):
    # pairs kept (in order) then new ones: the ids looked up among the keys before while the
    # set of ports stays, or sorted again when a port appears or goes (how: 0 the same ports,
    # 1 a new one, 2 one gone, 3 none before)
    rng = np.random.default_rng(seed)
    lanes = 12
    out, into = rng.integers(0, lanes, m), rng.integers(0, lanes, m)
    keys, ids = moved_tables.unique_pairs(out, into, lanes, lanes)
    kept = np.flatnonzero(rng.random(m) < 0.7)
    new = rng.integers(0, m, m - len(kept))  # the moved flows' pairs: ports in use before
    p_out, p_in = np.concatenate([out[kept], out[new]]), np.concatenate([into[kept], into[new]])
    if how == 1:
        p_out, p_in = np.append(p_out, lanes - 1), np.append(p_in, lanes - 1)
    elif how == 2 and len(kept):
        p_out, p_in, kept = p_out[1:], p_in[1:], kept[1:]
    if how == 3:
        keys = np.zeros(0, np.int64)
    whole = moved_tables.unique_pairs(p_out, p_in, lanes, lanes)
    after = moved_tables.ports_after((keys, ids), kept, (p_out, p_in), lanes)
    assert np.array_equal(after[0], whole[0]) and np.array_equal(after[1], whole[1])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_the_compiled_upstream_pairs_are_the_array_codes(seed, one_flow):
    # per pair, the pair that brought its flow into the switch before: by entry when each
    # column is one hop flow, by (column, lane) when columns couple several (ring channels)
    rng = np.random.default_rng(seed)
    n = 8
    src = np.array([_G.nic(int(i), 0) for i in rng.integers(0, 32, n)])
    dst = np.array([_G.nic(int(i), 0) for i in rng.integers(0, 32, n)])
    r = _NET.route(src, dst, "ecmp", rng)
    pp = port_pairs(_NET, r)
    col_of = np.arange(n) if one_flow else rng.integers(0, 3, n)
    ph = SimpleNamespace(
        _upstream=None,
        _one_flow_per_column=one_flow,
        pairs=pp,
        p_col=col_of[pp.flow],
        p_out=pp.out,
        p_in=pp.into,
        net=_NET,
    )
    ref = Phases._upstream_pairs(ph)
    got = R._upstream(col_of[pp.flow], pp.out, pp.into, pp.e_out, pp.e_in, _NET.lanes, one_flow)
    assert np.array_equal(ref, got)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(
        [("ecmp", 1, False), ("ecmp", 4, False), ("ecmp", 2, True), ("flowlet", 1, False)]
    ),
    st.sampled_from([16, 32]),
)
def test_hashed_routing_compiled_takes_the_array_codes_paths(seed, how, nodes):
    # the same draws in the same order: the same lanes, pieces and weights, and the generator
    # left where the array code leaves it (the seed's later draws depend on it); a network
    # keeps the walk of its last flows, so its second seed routes them from the kept one; ECMP
    # ignores the load other tenants leave on the lanes
    mode, qps, polarized = how
    # radix 8: two tiers at 16 nodes, three at 32
    g = build_graph(size_clos("fat-tree", nodes, 1, 1, 8, 400.0), 450.0, 64.0)
    rng = np.random.default_rng(seed)
    n = 3 * nodes
    src = np.array([g.nic(int(i), 0) for i in rng.integers(0, nodes, n)])
    dst = np.array([g.nic(int(i), 0) for i in rng.integers(0, nodes, n)])
    routed, walks, walk = {}, [], route_kernel.hashed_hops
    lanes = Network(g, 1.0).lanes
    preload = rng.random(lanes) if mode == "ecmp" and seed % 2 else None

    def spy(*args):
        walks.append(args)
        return walk(*args)

    for compiled in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kernels, "loaded", lambda c=compiled: c)
            mp.setattr(route_kernel, "hashed_hops", spy)
            net = Network(g, 1.0)
            for second in (False, True):
                draws = np.random.default_rng(seed + 1 + second)
                kw = {"qps": qps, "polarized": polarized, "preload": preload}
                r = net.route(src, dst, mode, draws, **kw)
                routed[compiled, second] = (r, draws.random())
    assert len(walks) == 2  # the compiled walk, only when the kernels are loaded
    assert walks[0][0][0] is walks[1][0][0]  # the second seed's pieces: the kept ones
    for second in (False, True):
        (a, after_a), (b, after_b) = routed[False, second], routed[True, second]
        assert np.array_equal(a.lane, b.lane) and a.lane.dtype == b.lane.dtype
        assert np.array_equal(a.flow, b.flow) and np.array_equal(a.weight, b.weight)
        assert after_a == after_b
        assert len(np.unique(a.flow)) == n
    assert not np.array_equal(routed[True, False][0].lane, routed[True, True][0].lane)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([16, 32]))
def test_reachable_ports_kept_by_leaves_are_those_of_the_paths_switches(seed, nodes):
    # each seed's hashes take other switches; the ports reachable from them are those
    # reachable from the paths' leaves, kept from the seed before
    g = build_graph(size_clos("fat-tree", nodes, 1, 1, 8, 400.0), 450.0, 64.0)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2 * nodes))
    src = np.array([g.nic(int(i), 0) for i in rng.integers(0, nodes, n)])
    dst = np.array([g.nic(int(i), 0) for i in rng.integers(0, nodes, n)])
    net = Network(g, 1.0)
    tw, kind = net.towards(dst), g.vertex_kind
    for draw in range(3):
        r = net.route(src, dst, "ecmp", np.random.default_rng([seed, draw]))
        tails = net.tail[r.lane]
        got = seed_run._reachable_ports(tw, tails, kind, net.up_down)
        on_path = np.zeros(len(tw.out), bool)
        on_path[tails[kind[tails] >= LEAF] - tw.sw0] = True
        reach, want = seed_run._ports_from(tw, on_path, net.up_down)
        assert np.array_equal(got, want)
        assert reach[on_path].all()
    # a path through a switch its leaves do not reach by closer ports (a detour: here a spine
    # beside flows that never leave their leaf) is worked out from its own switches
    local = np.array([g.nic(0, 0)])
    tw = net.towards(local)
    spine = int(np.flatnonzero(kind >= LEAF)[-1])  # the last switch: the top tier's
    tails = np.concatenate([net.tail[net.route(local, local, "ecmp", rng).lane], [spine]])
    on_path = np.zeros(len(tw.out), bool)
    on_path[tails[kind[tails] >= LEAF] - tw.sw0] = True
    reach, want = seed_run._ports_from(tw, on_path, net.up_down)
    leaves = on_path & (kind[tw.sw0 :] == LEAF)
    assert not seed_run._ports_from(tw, leaves, net.up_down)[0][spine - tw.sw0]
    got = seed_run._reachable_ports(tw, tails, kind, net.up_down)
    assert reach[spine - tw.sw0] and np.array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(0, 80), st.booleans())
def test_lane_levels_compiled_are_the_array_codes(seed, lanes, pairs, loops):
    # lanes feeding lanes: up/down chains (from lower to higher numbers), or any pairs, which
    # may close a loop (None); chains longer than MAX_LANE_CHAIN are refused alike
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, lanes, (2, pairs))
    into, out = (a, b) if loops else (np.minimum(a, b), np.maximum(a, b))
    keep = into != out
    into, out = into[keep], out[keep]
    most = int(rng.integers(1, 8)) if seed % 3 == 0 else ports.MAX_LANE_CHAIN
    levels = {}
    for compiled in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kernels, "loaded", lambda c=compiled: c)
            mp.setattr(ports, "MAX_LANE_CHAIN", most)
            levels[compiled] = ports.lane_levels(lanes, into, out)
    if levels[False] is None:
        assert levels[True] is None
    else:
        assert np.array_equal(levels[False], levels[True])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.integers(1, 120), st.booleans())
def test_entry_levels_compiled_are_the_array_codes(seed, lanes, entries, loops):
    # routed entries on random lanes, port pairs joining two entries (from a lower lane to a
    # higher one, or any two, which may close a loop): the entries and pairs grouped by their
    # lane's level, in the same stable order compiled or not (None for a loop alike)
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    lane = rng.integers(0, lanes, entries)
    e_in, e_out = rng.integers(0, entries, (2, int(rng.integers(0, 2 * entries))))
    if not loops:
        e_in, e_out = np.where(lane[e_in] <= lane[e_out], (e_in, e_out), (e_out, e_in))
    keep = lane[e_in] != lane[e_out]
    e_in, e_out = e_in[keep], e_out[keep]
    keys = np.unique(lane[e_out] * lanes + lane[e_in])
    net = SimpleNamespace(lanes=lanes, capacity=np.ones(lanes))
    pp = SimpleNamespace(e_in=e_in, out=lane[e_out], into=lane[e_in])
    got = {}
    for compiled in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(kernels, "loaded", lambda c=compiled: c)
            mp.setattr(kernels, "COMPILED_MIN_SIZE", 0)
            got[compiled] = ports._entry_levels(net, lane, pp, keys)
    if got[False] is None:
        assert got[True] is None
    else:
        assert got[True] is not None and len(got[False]) == len(got[True]) == 4
        for a, b in zip(got[False], got[True], strict=True):
            assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=200))
def test_places_sorted_by_group_are_numpys_stable_sort(groups):
    # the counting sort the rebuild, the fill's rows and the round-robin shares start from:
    # places by group, in place order within each group, as a stable argsort gives them
    from fabricplan.congestion.jitted import by_group, group_order

    g = np.array(groups, np.int64)
    got = group_order(g, 10)
    assert np.array_equal(got, np.argsort(g, kind="stable"))
    assert np.array_equal(got, by_group(np.arange(len(g)), g, 10))
