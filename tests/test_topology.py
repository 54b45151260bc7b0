"""Topology sizing, parts and the explicit graph: reference designs, analytic cases, graph
invariants (ports, counts, hops, bisection by max-flow) over generated designs."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow, shortest_path

from fabricplan.topology import (
    TopologyError,
    bfs,
    build_graph,
    design_fabric,
    job_hops,
    size_fabric,
)
from fabricplan.topology.bfs import hop_distances
from fabricplan.topology.clos import max_plane_ports, size_clos, split_ports
from fabricplan.topology.dragonfly import router_shape, size_dragonfly
from fabricplan.topology.graph import CORE, E_NVLINK, E_PCIE, LEAF, NIC, SPINE

# NVIDIA DGX SuperPOD reference architectures (QM9700, 8 rails, non-blocking): H100 RA
# RA-11333-001 for 1-4 scalable units; the B200 RA's compute fabric table for 2-64 units.
SUPERPOD = [
    # nodes, leaf, spine, core, leaf-spine links, spine-core links
    (32, 8, 4, 0, 256, 0),
    (64, 16, 8, 0, 512, 0),
    (128, 32, 16, 0, 1024, 0),
    (256, 64, 32, 0, 2048, 0),
    (512, 128, 128, 64, 4096, 4096),
    (1024, 256, 256, 128, 8192, 8192),
    (2048, 512, 512, 256, 16384, 16384),
]


@pytest.mark.parametrize(("nodes", "leaf", "spine", "core", "ls", "sc"), SUPERPOD)
def test_dgx_superpod_reference(nodes, leaf, spine, core, ls, sc):
    d = design_fabric(nodes * 8, "rail-optimized", "ib-ndr", switch="qm9700").to_dict()
    assert d["switches"] == {"leaf": leaf, "spine": spine, "core": core}
    assert d["cables"]["node_leaf"] == nodes * 8
    assert d["cables"]["leaf_spine"] == ls
    assert d["cables"].get("spine_core", 0) == sc
    assert d["nics"] == nodes * 8


def test_superpod_hops_and_bisection():
    one_su = design_fabric(256).to_dict()
    assert one_su["hops"] == {
        "same_rail": 1,
        "cross_rail": 3,
        "max": 3,
        "cross_rail_via": "network",
    }
    big = design_fabric(4096).to_dict()
    assert (big["hops"]["same_rail"], big["hops"]["cross_rail"]) == (3, 5)
    assert big["bisection_GBps"] == pytest.approx(4096 / 2 * 50)  # non-blocking: half at 50 GB/s
    assert big["max_endpoints"] == 64**3 // 4


def test_clos_analytic_reach():
    assert split_ports(64, 1.0) == (32, 32)
    assert split_ports(64, 3.0) == (48, 16)
    assert max_plane_ports(64, 1, 1, 2) == 64**2 // 2
    assert max_plane_ports(64, 1, 1, 3) == 64**3 // 4
    assert max_plane_ports(40, 1, 1, 3) == 16000  # QM8700 at HDR


def test_oversubscription_divides_bisection():
    full = size_clos("fat-tree", 72, 8, 8, 64, 400)
    third = size_clos("fat-tree", 72, 8, 8, 64, 400, o_leaf=3.0)
    # 3:1 leaves (48 down, 16 up at radix 64), 6 nodes each: a third of the cross-leaf capacity
    assert full.bisection_links == 72 * 8 / 2
    assert third.bisection_links == pytest.approx(full.bisection_links / 3)
    assert third.switches["spine"] < full.switches["spine"]


def test_rail_only_has_no_spine_when_a_rail_fits_one_switch():
    lay = size_clos("rail-only", 64, 8, 8, 64, 400)
    assert lay.switches == {"leaf": 8, "spine": 0, "core": 0}
    assert lay.hops.cross_rail_via == "nvlink" and lay.hops.max == 1


def test_dragonfly_balanced_shape():
    assert router_shape(64, 1.0) == (16, 32, 16)  # p + (a - 1) + h = 63 <= 64
    lay = size_dragonfly(1024, 8, 8, 64, 400)
    d = lay.dragonfly
    assert d["groups"] == 16 and d["routers"] == 512
    assert lay.links["global"] == 16 * 15 // 2 * (32 * 16 // 15)
    assert (lay.hops.max, lay.hops.valiant_max) == (4, 6)


def test_job_hops():
    assert job_hops(1, 8, 8, 64, 400) == 0
    assert job_hops(8, 8, 8, 64, 400) == 1
    assert job_hops(64, 8, 8, 64, 400) == 3
    assert job_hops(2048, 8, 8, 64, 400) == 5


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"gpus": 100_000}, "reaches at most 65,536 GPUs"),
        ({"gpus": 1024, "oversubscription": 0.5}, "between 1 (non-blocking) and 64"),
        ({"gpus": 1020}, "use 1016 or 1024"),
        ({"gpus": 1024, "switch": "sn5600"}, "try qm9700"),
        ({"gpus": 1024, "design": "torus"}, "unknown design"),
        ({"gpus": 1024, "cable_lengths": {"spine_leaf": 3.0}}, "unknown cable tier"),
    ],
)
def test_impossible_requests_say_what_works(kwargs, needle):
    with pytest.raises(TopologyError) as err:
        design_fabric(**kwargs)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("gpus", "design", "fabric", "o"),
    [
        (1024, "rail-optimized", "ib-ndr", 1.0),
        (2048, "fat-tree", "roce-400g", 2.0),
        (512, "rail-only", "ib-ndr", 1.0),
        (4096, "dragonfly", "roce-400g", 1.0),
    ],
)
def test_sizing_alone_is_the_designs_sizing(gpus, design, fabric, o):
    """A network simulation sizes the fabric without its cables: the same layout and parts as
    the full design, and the same refusals."""
    full = design_fabric(gpus, design, fabric, oversubscription=o)
    sized = size_fabric(gpus, design, fabric, oversubscription=o)
    assert sized.layout == full.layout
    assert (sized.gpu, sized.fabric, sized.switch, sized.nic) == (
        full.gpu,
        full.fabric,
        full.switch,
        full.nic,
    )
    with pytest.raises(TopologyError, match="use 1016 or 1024"):
        size_fabric(1020, design, fabric)


def test_too_big_suggests_alternatives():
    with pytest.raises(TopologyError) as err:
        design_fabric(100_000)
    text = str(err.value)
    assert "switch q3400" in text and "leaf oversubscription" in text


def test_media_choice_follows_length():
    short = design_fabric(256, "fat-tree", cable_lengths={"node_leaf": 2.0, "leaf_spine": 2.0})
    media = {m.tier: m for m in short.media}
    assert media["node_leaf"].cable_id == "dac-ndr-splitter"  # one cage -> two NICs
    assert media["node_leaf"].cables == 128
    assert media["leaf_spine"].medium == "dac" and media["leaf_spine"].cables == 128
    long = design_fabric(4096)
    media = {m.tier: m for m in long.media}
    assert media["spine_core"].transceivers == {"xcvr-osfp-800g-2xdr4": 4096}  # 100 m: DR
    assert media["node_leaf"].transceivers == {
        "xcvr-osfp-800g-2xsr4": 2048,
        "xcvr-osfp-400g-sr4": 4096,
    }


def test_compatible_optics_cost_less():
    oem = design_fabric(1024).cost_usd["optics_and_cables"]
    compat = design_fabric(1024, optics="compatible").cost_usd["optics_and_cables"]
    assert compat < 0.6 * oem


def test_power_adds_up():
    d = design_fabric(256)
    p = d.power_w
    assert p["switches"] == pytest.approx(12 * 750.0)
    assert p["nics"] == pytest.approx(256 * 25.0)
    assert p["total"] == pytest.approx(p["switches"] + p["optics_and_cables"] + p["nics"])


# --- the explicit graph ----------------------------------------------------------------------


def _natural_split_flow(g) -> int:
    """Max flow from the first half of nodes' NICs to the last half's, over network links."""
    keep = ~np.isin(g.edge_kind, (E_NVLINK, E_PCIE))
    u, v, w = g.src[keep], g.dst[keep], g.width[keep]
    n = g.vertices
    half = g.nodes // 2
    a = [g.nic(x, r) for x in range(half) for r in range(g.nics_per_node)]
    b = [g.nic(x, r) for x in range(g.nodes - half, g.nodes) for r in range(g.nics_per_node)]
    rows = np.concatenate([u, v, np.full(len(a), n), b])
    cols = np.concatenate([v, u, a, np.full(len(b), n + 1)])
    data = np.concatenate([w, w, np.ones(len(a) + len(b), np.int32)]).astype(np.int32)
    mat = csr_matrix((data, (rows, cols)), shape=(n + 2, n + 2))
    mat.sum_duplicates()
    return maximum_flow(mat, n, n + 1).flow_value


designs = st.sampled_from(["fat-tree", "rail-optimized", "rail-only", "dragonfly"])


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    design=designs,
    radix=st.sampled_from([8, 12, 16]),
    nodes=st.integers(2, 96),
    nics=st.sampled_from([1, 2, 4]),
    o=st.sampled_from([1.0, 2.0, 3.0]),
)
def test_graph_matches_layout(design, radix, nodes, nics, o):
    try:
        if design == "dragonfly":
            lay = size_dragonfly(nodes, nics, nics, radix, 400, o)
        else:
            lay = size_clos(design, nodes, nics, nics, radix, 400, o, 1.0)
    except TopologyError:
        assume(False)  # beyond this small switch's reach: not an example
    g = build_graph(lay, nvlink_GBps=450, pcie_GBps=50)
    switches = g.vertex_kind >= LEAF
    assert g.ports_used()[switches].max() <= radix  # no switch has more links than ports
    assert g.count(NIC) == nodes * nics
    counts = [g.count(LEAF), g.count(SPINE), g.count(CORE)]
    assert counts == [lay.switches["leaf"], lay.switches["spine"], lay.switches["core"]]
    total_links = int(g.width[~np.isin(g.edge_kind, (E_NVLINK, E_PCIE))].sum())
    assert total_links == sum(lay.links.values())
    # Clos bisection is the max-flow between the halves; dragonfly's cut formula a bound.
    flow = _natural_split_flow(g)
    if design == "dragonfly":
        assert lay.bisection_links <= flow + 1e-9
    else:
        assert lay.bisection_links == pytest.approx(flow)
    # Worst-case hops from the graph equal the layout's (Clos: first vs last node).
    if design != "dragonfly":
        same = g.switch_hops(g.nic(0, 0), g.nic(nodes - 1, 0))
        assert same == lay.hops.same_rail
        if nics > 1:
            assert g.switch_hops(g.nic(0, 0), g.nic(nodes - 1, 1)) == lay.hops.cross_rail
    else:
        hops = {g.switch_hops(g.nic(0, 0), g.nic(x, 0)) for x in range(1, nodes)}
        assert max(hops) <= lay.hops.max


@pytest.mark.parametrize(
    ("design", "nodes", "nics", "o"),
    [
        ("fat-tree", 64, 4, 1.0),
        ("fat-tree", 64, 2, 3.0),
        ("rail-optimized", 64, 4, 1.0),
        ("rail-optimized", 96, 2, 2.0),
        ("rail-only", 32, 4, 1.0),
        ("fat-tree", 96, 1, 1.0),
    ],
)
def test_bisection_equals_max_flow_on_regular_designs(design, nodes, nics, o):
    lay = size_clos(design, nodes, nics, nics, 16, 400, o, 1.0)
    g = build_graph(lay, nvlink_GBps=450, pcie_GBps=50)
    assert _natural_split_flow(g) == pytest.approx(lay.bisection_links)


def test_dragonfly_valiant_paths_detour_through_a_third_group():
    lay = size_dragonfly(64, 1, 1, 8, 400)  # p=2, a=4, h=2: 8 groups of 4 routers
    assert lay.dragonfly["groups"] == 8
    g = build_graph(lay, 450, 50)
    src, dst = g.nic(0, 0), g.nic(63, 0)
    first_router = int(np.flatnonzero(g.vertex_kind == LEAF)[0])
    via = first_router + 3 * 4  # a router of group 3
    minimal = g.paths(src, dst)
    detour = g.valiant_paths(src, via, dst)
    assert detour and all(via in p for p in detour)
    hops = {int(np.count_nonzero(g.vertex_kind[p] >= LEAF)) for p in detour}
    assert max(hops) <= lay.hops.valiant_max
    assert min(hops) > min(int(np.count_nonzero(g.vertex_kind[p] >= LEAF)) for p in minimal)


def test_paths_are_ecmp_sets():
    g = build_graph(design_fabric(4096).layout, 450, 50)
    paths = g.paths(g.nic(0, 0), g.nic(511, 1))
    # across pods: any of 16 spines of the pod x 4 cores of that spine's group
    assert len(paths) == 16 * 4
    assert all(len(p) == 7 for p in paths)  # NIC, leaf, spine, core, spine, leaf, NIC
    assert len({tuple(p) for p in paths}) == len(paths)


@given(
    n=st.integers(1, 40),
    edges=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=120),
    sources=st.lists(st.integers(0, 39), min_size=1, max_size=4),
    directed=st.booleans(),
)
def test_hop_distances_equal_scipy_shortest_path(n, edges, sources, directed):
    r = np.array([u % n for u, _ in edges], np.int64)
    c = np.array([v % n for _, v in edges], np.int64)
    a = csr_matrix((np.ones(len(r)), (r, c)), shape=(n, n))
    a = a if directed else (a + a.T).tocsr()
    src = np.array(sources) % n
    ref = shortest_path(a, unweighted=True, indices=src, directed=directed)
    # small searches walk lists; the others go in sparse passes: take 3 sources per pass
    # here, so a case of 4 needs two of them
    with patch.object(bfs, "SOURCES_PER_PASS", 3), patch.object(bfs, "SMALL_SEARCH_EDGES", -1):
        got = hop_distances(a.indptr, a.indices, src)
    assert got.dtype == ref.dtype and np.array_equal(got, ref)
    walked = hop_distances(a.indptr, a.indices, src)
    assert walked.dtype == ref.dtype and np.array_equal(walked, ref)
    one = shortest_path(a, unweighted=True, indices=int(src[0]), directed=directed)
    assert np.array_equal(hop_distances(a.indptr, a.indices, int(src[0])), one)
