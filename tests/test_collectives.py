"""The collective model against cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from fabricplan.collectives import (
    SystemArrays,
    build_system,
    bus_factor,
    p2p_latency_us,
    predict,
    sweep,
)
from fabricplan.collectives import nccl_constants as K

GiB = 2**30


def big(system, op="all_reduce", **kw):
    """busbw at 64 GiB: the bandwidth limit with latency negligible."""
    return predict(system, op, [64 * GiB], **kw).rows[0]


def test_nccl_tests_bus_factors():
    assert bus_factor("all_reduce", 16) == pytest.approx(2 * 15 / 16)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce_scatter", 64) == pytest.approx(63 / 64)
    assert bus_factor("alltoall", 4) == pytest.approx(3 / 4)
    for op in ("broadcast", "reduce", "sendrecv"):
        assert bus_factor(op, 32) == 1.0


def test_rows_follow_the_nccl_tests_definitions():
    table = predict(build_system("h100", 4, "ib-ndr"), "all_reduce")
    for r in table.rows:
        assert r.algbw_GBps == pytest.approx(r.size_bytes / (r.time_us * 1e3))
        assert r.busbw_GBps == pytest.approx(r.algbw_GBps * 2 * 31 / 32)


def test_ring_is_bounded_by_the_nics():
    # A multi-node ring crosses each node boundary once per channel: busbw = NICs x goodput.
    s = build_system("h100", 2, "ib-ndr")
    assert big(s, algorithms=["ring"]).busbw_GBps == pytest.approx(8 * 48.0, rel=0.01)
    half = build_system("h100", 2, "ib-ndr", nics_per_node=4)
    assert big(half, algorithms=["ring"]).busbw_GBps == pytest.approx(4 * 48.0, rel=0.01)


def test_two_node_tree_beats_the_nic_aggregate():
    # With two nodes NVLS-Tree sends each byte across the network once per direction, half a
    # ring's traffic, so busbw exceeds 8 x 48 GB/s; NCCL caps it at 8 x 57.7 (Hopper, 2 nodes).
    two = big(build_system("h100", 2, "ib-ndr"))
    assert two.algorithm == "NVLSTree"
    assert two.busbw_GBps == pytest.approx(8 * 57.7, rel=0.01)
    assert two.busbw_GBps > 8 * 48.0
    # Beyond two nodes the tree loses that advantage: back to the ring ceiling.
    eight = big(build_system("h100", 8, "ib-ndr"))
    assert eight.busbw_GBps == pytest.approx(8 * 48.0, rel=0.02)


def test_tree_latency_grows_with_log_of_nodes():
    # Tree/LL: 2 x floor(log2 nodes) network steps of hwLat[NET][Tree][LL] = 5.0 us each.
    t = {
        n: predict(build_system("h100", n, "ib-ndr", hops=3), "all_reduce", [8]).rows[0]
        for n in (4, 8, 16)
    }
    assert t[8].algorithm == "Tree" and t[8].protocol == "LL"
    assert t[8].time_us - t[4].time_us == pytest.approx(2 * 5.0)
    assert t[16].time_us - t[8].time_us == pytest.approx(2 * 5.0)


def test_fabric_latency_enters_every_network_step(cat):
    # RoCE and IB differ per network step by their measured one-way latency (same hops).
    ib = build_system("h100", 2, "ib-ndr", hops=1)
    roce = build_system("h100", 2, "roce-400g", hops=1)
    delta = roce.net_step_delta_us
    expected = (
        cat.fabric("roce-400g").rdma_latency_us.nominal
        - cat.fabric("ib-ndr").rdma_latency_us.nominal
    )
    assert delta == pytest.approx(expected)
    t_ib = predict(ib, "all_reduce", [8]).rows[0].time_us
    t_roce = predict(roce, "all_reduce", [8]).rows[0].time_us
    assert t_roce - t_ib == pytest.approx(2 * delta)  # tree: up and down, one level
    # like-for-like point-to-point latency is the catalog figure plus extra switch hops
    sw = cat.switch("arista-7060x6").port_to_port_latency_ns.nominal
    assert p2p_latency_us(cat.fabric("roce-400g"), 3, sw) == pytest.approx(
        cat.fabric("roce-400g").rdma_latency_us.nominal + 2 * sw / 1000
    )


def test_large_message_bandwidth_is_the_same_for_ib_and_roce_at_equal_goodput():
    ib = big(build_system("h100", 4, "ib-ndr"), algorithms=["ring"])
    roce = big(build_system("h100", 4, "roce-400g"), algorithms=["ring"])
    assert roce.busbw_GBps / ib.busbw_GBps == pytest.approx(47.0 / 48.0, rel=0.01)


def test_pcie_gen4_caps_a_400g_nic():
    s = build_system("a100", 2, "roce-400g")
    assert s.nic_GBps == pytest.approx(31.5, rel=0.01)  # Gen4 x16, not the NIC's 47 GB/s


def test_tcp_is_bounded_by_socket_goodput(cat):
    s = build_system("h100", 4, "tcp-100g")
    assert big(s, algorithms=["ring"]).busbw_GBps == pytest.approx(
        8 * cat.fabric("tcp-100g").nic_goodput_GBps.nominal, rel=0.01
    )
    # small messages: tree up and down two levels = 4 network steps, each slower by the
    # difference between kernel TCP and RDMA latency
    t_tcp = predict(s, "all_reduce", [8]).rows[0].time_us
    t_ib = predict(build_system("h100", 4, "ib-ndr"), "all_reduce", [8]).rows[0].time_us
    assert t_tcp - t_ib == pytest.approx(4 * s.net_step_delta_us, abs=0.01)
    assert s.net_step_delta_us == pytest.approx(15.0 - 1.1)


def test_single_node_uses_nvlink():
    row = big(build_system("h100", 1, "ib-ndr"))
    assert row.algorithm == "NVLS"
    assert 440 < row.busbw_GBps < 500  # measured 474 GB/s on 8 x H100 (nccl-tests issue 290)
    a100 = big(build_system("a100", 1, "ib-hdr"))
    assert a100.algorithm == "Ring"  # no NVLink SHARP on A100
    assert a100.busbw_GBps == pytest.approx(300 * 0.8, rel=0.01)


def test_alltoall_is_bounded_by_traffic_leaving_the_node():
    # 16 ranks on 2 nodes: each node sends 8 x S x 8/16 = 4 S through 8 x 48 GB/s of NICs,
    # so algbw -> 96 GB/s and busbw -> 15/16 of that.
    row = big(build_system("h100", 2, "ib-ndr"), "alltoall")
    assert row.algorithm == "P2P"
    assert row.busbw_GBps == pytest.approx(96 * 15 / 16, rel=0.01)


def test_sendrecv_across_nodes_is_one_nic():
    assert big(build_system("h100", 2, "ib-ndr"), "sendrecv").busbw_GBps == pytest.approx(
        48, rel=0.01
    )


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "broadcast", "reduce"])
def test_other_collectives_reach_the_ring_ceiling(op):
    row = big(build_system("h100", 4, "ib-ndr"), op)
    assert row.busbw_GBps == pytest.approx(8 * 48.0, rel=0.02)


def test_pat_only_with_one_gpu_per_node():
    # NCCL enables PAT only when every node holds one rank (NCCL_PAT_ENABLE auto).
    one = build_system("h100", 8, "ib-ndr", gpus_per_node=1, nics_per_node=1)
    eight = build_system("h100", 8, "ib-ndr")
    pat = predict(one, "all_gather", [2**20], algorithms=["pat"]).rows[0]
    assert pat.algorithm == "PAT" and np.isfinite(pat.time_us)
    assert not np.isfinite(
        predict(eight, "all_gather", [2**20], algorithms=["pat"]).rows[0].time_us
    )


def test_forcing_an_algorithm_never_beats_the_tuner_by_its_own_estimate():
    from fabricplan.collectives.model import times

    s = build_system("h100", 4, "ib-ndr")
    sizes = np.array([2**i for i in range(3, 34, 3)], dtype=float)
    estimate = times(SystemArrays.of([s]), "all_reduce", sizes, mechanics=False)[0]
    free = predict(s, "all_reduce", sizes.astype(int).tolist()).rows
    for algo in ("ring", "tree", "nvlstree"):
        forced = predict(s, "all_reduce", sizes.astype(int).tolist(), algorithms=[algo]).rows
        for i, (a, b) in enumerate(zip(free, forced, strict=True)):
            assert estimate[(i, *_cell(a))] <= estimate[(i, *_cell(b))] + 1e-9


def _cell(row) -> tuple[int, int]:
    """A predicted row's (algorithm, protocol) indices in the model's time tables."""
    algo = row.algorithm.lower().replace("nvlstree", "nvls_tree")
    return K.ALGO_INDEX[algo], K.PROTOCOLS.index(row.protocol)


def test_sweep_matches_single_predictions():
    systems = [
        build_system(g, n, f)
        for g, n, f in [
            ("h100", 2, "ib-ndr"),
            ("a100", 4, "roce-200g"),
            ("b200", 16, "roce-400g"),
            ("mi300x", 3, "tcp-100g"),
        ]
    ]
    sizes = np.array([8, 4096, 2**20, 2**26, 2**31], dtype=float)
    res = sweep(SystemArrays.of(systems), "all_reduce", sizes)
    for i, s in enumerate(systems):
        rows = predict(s, "all_reduce", sizes.astype(int).tolist()).rows
        assert res.time_us[i] == pytest.approx([r.time_us for r in rows])


def test_sharp_enables_collnet_only_on_infiniband():
    assert build_system("h100", 4, "ib-ndr", sharp=True).sharp is True
    assert build_system("h100", 4, "roce-400g", sharp=True).sharp is False


def test_unknown_algorithm_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown algorithm 'rng'"):
        predict(build_system("h100", 2, "ib-ndr"), "all_reduce", [8], algorithms=["rng"])


def test_constants_keep_nccl_shapes():
    assert K.BASE_LAT_US.shape == (7, 3)
    assert K.HW_LAT_US.shape == (3, 7, 3)
    assert K.TREE_CORRECTION.shape == (3, 24)


def test_the_design_sets_the_switch_hops_the_collectives_see():
    """64 H100 nodes on 64-port NDR switches: a rail needs two leaves (3 hops), as does a
    fat-tree; rail-only keeps each rail on one switch (1); dragonfly is 2 inside a group. The
    workload's communicators take the scenario's design."""
    from fabricplan.catalog import default_catalog
    from fabricplan.workload import Hardware
    from fabricplan.workload.comm import base_system

    hops = {
        d: build_system("h100", 64, "ib-ndr", design=d).switch_hops
        for d in ("rail-optimized", "fat-tree", "rail-only", "dragonfly")
    }
    assert hops == {"rail-optimized": 3, "fat-tree": 3, "rail-only": 1, "dragonfly": 2}
    hw = Hardware(
        gpu=default_catalog().gpu("h100"),
        gpus=512,
        gpus_per_node=8,
        nics_per_node=8,
        fabric="ib-ndr",
        design="rail-only",
    )
    assert base_system(hw).switch_hops == 1


def test_tree_chunk_is_one_simple_step_or_the_whole_channel_part():
    from fabricplan.collectives.model import SIMPLE
    from fabricplan.collectives.pipeline import tree_chunk_bytes

    part = np.array([[4 * 2**20, 2**20, 256 * 1024]])
    chunk = tree_chunk_bytes(part, SIMPLE, np.array([2.0]), np.array([8.0]))
    # NCCL >= 2.20 no longer shrinks the Simple tree chunk: 4 MiB / 8 steps, capped by the part
    assert chunk[0].tolist() == [512 * 1024, 512 * 1024, 256 * 1024]


def test_tree_ll128_chunk_follows_nccls_nsteps_rule():
    from fabricplan.collectives.model import LL128
    from fabricplan.collectives.pipeline import tree_chunk_bytes

    # 2 nodes x 8: nstepsLL128 = 1 + 1 + 0.8 = 2.8, so halve below 22.4 then 5.6 chunks a channel
    part = np.array([[8 * 2**20, 256 * 1024, 16 * 1024]])
    chunk = tree_chunk_bytes(part, LL128, np.array([2.0]), np.array([8.0]))
    assert K.LL128_STEP_DATA_BYTES == 576000
    # 8 MiB: 14 chunks of 576000 < 22.4 -> 288000 (29 chunks) and kept
    # 256 KiB: -> 72000 (first rule stops at 128 KiB), 3 chunks < 5.6 -> 36000 (7 chunks)
    # 16 KiB: halved to 18000, then capped by the part
    assert chunk[0].tolist() == [288000, 36000, 16 * 1024]


def test_nvls_tree_chunk_follows_nccls_rule():
    from fabricplan.collectives.pipeline import nvls_tree_chunk_bytes

    mib = 2**20
    sizes = np.array([[4 * mib, 8 * mib, 32 * mib, 64 * mib, 1024 * mib]] * 2, dtype=float)
    # H100: 16 NVLS channels x 8 heads = 128 chunks in flight. Two nodes: 128 KiB, 64 KiB below
    # 4 x 128 x 128 KiB = 64 MiB, 32 KiB below 1 x 128 x 64 KiB = 8 MiB. Four nodes start at
    # 64 KiB (NVLSTREE_MAX_CHUNKSIZE's default from 4 nodes), so only the last rule applies.
    chunk = nvls_tree_chunk_bytes(
        sizes, np.array([16.0, 16.0]), np.array([8.0, 8.0]), np.array([2.0, 4.0])
    )
    k = 1024
    assert chunk.tolist() == [
        [32 * k, 64 * k, 64 * k, 128 * k, 128 * k],
        [32 * k, 64 * k, 64 * k, 64 * k, 64 * k],
    ]


def test_nvls_tree_fill_is_loops_through_its_stages():
    from fabricplan.collectives.pipeline import nvls_tree_fill_us

    # a lag of 3 loop-times; a loop of 8 heads x 128 KiB on each of 16 channels at 256 GB/s in
    # all takes 65.536 us
    fill = nvls_tree_fill_us(
        np.array([[2.0**30]]),
        np.array([256.0]),
        np.array([16.0]),
        np.array([8.0]),
        np.array([2.0]),
        np.array([3.0]),
    )
    assert fill[0, 0] == pytest.approx(3 * 8 * 131072 * 16 / 256e3)


def test_nvls_tree_lag_takes_each_stage_at_its_own_rate():
    from fabricplan.collectives.pipeline import nvls_tree_lag

    one = np.array([1.0])
    # every stage at the pace: 2 NVLS stages + 2 network hops per level, less the one the
    # bandwidth term counts
    same = nvls_tree_lag(60 * one, 60 * one, 100 * one, np.array([1.0, 2.0]))
    assert same.tolist() == [3.0, 5.0]
    # the network twice as fast as the NVLS stages (two nodes): its hops take half a loop-time
    assert nvls_tree_lag(60 * one, 120 * one, 100 * one, one)[0] == pytest.approx(2.0)
    # NCCL's cap below both: every stage is faster than the pace
    assert nvls_tree_lag(60 * one, 120 * one, 30 * one, one)[0] == pytest.approx(0.5)
    # no NVLS (a rate of 0): no fill
    assert nvls_tree_lag(0 * one, 120 * one, 30 * one, one)[0] == 0.0


def test_pipeline_fill_is_lag_step_times():
    from fabricplan.collectives.pipeline import pipeline_fill_us

    fill = pipeline_fill_us(
        np.array([[1e6, 5e5]]), np.array([16.0]), np.array([160.0]), np.array([3.0])
    )
    # a step of 1 MB on each of 16 channels at 160 GB/s in all takes 100 us; 3 of them lag
    assert fill[0].tolist() == pytest.approx([300.0, 150.0])
    none = pipeline_fill_us(np.array([[1e6]]), np.array([16.0]), np.array([0.0]), np.array([3.0]))
    assert none[0, 0] == 0.0


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_tree_simple_fill_is_two_passes_of_store_and_forward(nodes):
    from fabricplan.collectives.model import SIMPLE, TREE, tables
    from fabricplan.collectives.pipeline import tree_fill_us

    # H100 nodes of 8 GPUs: a chain of 7 NVLink hops, and log2(nodes) network hops. Each pass
    # (reduce, then broadcast) is paid at the slowest hop's pace in the bandwidth term; the
    # last chunk still crosses every other hop once: 7 NVLink hops at the GPU's NVLink share
    # per channel, and the network hops but one at the tree's per-channel bus rate (twice its
    # algbw). Alone in a node the NVLink hops are the tree and one of them is the pace. 4 MiB
    # is one chunk per channel (under a 512 KiB step); at 512 MiB a chunk is one 512 KiB step
    sa = SystemArrays.of([build_system("h100", nodes, "ib-ndr")])
    _, bw, channels = tables(sa, "all_reduce")
    ch = float(channels[0])
    bus = 2 * float(bw[0, TREE, SIMPLE]) / ch  # GB/s per channel
    nvl = max(float(sa.nvl[0]) / ch, bus)
    levels = {1: 0, 2: 1, 4: 2}[nodes]
    sizes = np.array([[4.0 * 2**20, 512.0 * 2**20]])
    tree, _ = tree_fill_us(sa, sizes, bw, channels)
    for got, chunk in zip(tree[0, :, SIMPLE], (4.0 * 2**20 / ch, 512.0 * 2**10), strict=True):
        assert chunk <= 512 * 2**10
        # alone in a node: 6 of the 7 NVLink hops; else all 7, and the network hops but one
        per_pass = 6 * chunk / nvl if nodes == 1 else 7 * chunk / nvl + (levels - 1) * chunk / bus
        assert got == pytest.approx(2 * per_pass / 1000)


def test_tree_ll128_fill_is_in_the_time_not_in_nccls_choice():
    from fabricplan.collectives.model import LL128, TREE, tables, times

    sa = SystemArrays.of([build_system("h100", nodes=2, fabric="ib-ndr")])
    size = 4 * 2**20
    real = times(sa, "all_reduce", np.array([size]))
    estimate = times(sa, "all_reduce", np.array([size]), mechanics=False)
    _, bw, channels = tables(sa, "all_reduce")
    # 16 channels: 256 KiB a channel -> 36000-byte chunks; 2 nodes: the network hop up and down,
    # so one step-time lags
    step_us = 36000 * channels[0] / (1000.0 * bw[0, TREE, LL128])
    assert real[0, 0, TREE, LL128] - estimate[0, 0, TREE, LL128] == pytest.approx(step_us)
    r = sweep(sa, "all_reduce", np.array([size]))
    flat = estimate[0, 0].ravel()
    assert r.algorithm[0, 0] * 3 + r.protocol[0, 0] == int(np.argmin(flat))
    assert r.time_us[0, 0] == pytest.approx(real[0, 0].ravel()[np.argmin(flat)])


def test_small_messages_run_on_fewer_channels_than_nccls_estimate_assumes():
    from fabricplan.collectives.model import LL, RING, SIMPLE, TREE, tables, times

    sa = SystemArrays.of([build_system("h100", nodes=2, fabric="ib-ndr")])
    lat, bw, channels = tables(sa, "all_reduce")
    full = channels[0]
    assert full == 16  # 8 NICs, doubled at run time
    ranks = 16
    sizes = np.array([8, 4096, 12 * 4096, 16 * 4096, 2**20], dtype=float)
    real = times(sa, "all_reduce", sizes)
    estimate = times(sa, "all_reduce", sizes, mechanics=False)

    def bw_term(i: int, algo: int, proto: int) -> float:  # the estimate's, on all channels
        if algo == TREE:  # with NCCL's tree correction by size
            return estimate[0, i, algo, proto] - lat[0, algo, proto]
        return sizes[i] / (1000.0 * bw[0, algo, proto])

    # Tree/LL: a channel needs 512 threads x 8 bytes; one channel up to 8 KiB, 12 at 48 KiB,
    # all 16 from 64 KiB
    for i, used in ((0, 1), (1, 1), (2, 12), (3, 16), (4, 16)):
        extra = real[0, i, TREE, LL] - estimate[0, i, TREE, LL]
        assert extra == pytest.approx(bw_term(i, TREE, LL) * (full / used - 1))
    # Ring/LL: the threshold is multiplied by the ranks: 512 x 8 x 16 = 64 KiB a channel
    extra = real[0, 4, RING, LL] - estimate[0, 4, RING, LL]
    used = 2**20 // (512 * 8 * ranks)
    assert used == 16 and extra == pytest.approx(0.0)
    extra = real[0, 3, RING, LL] - estimate[0, 3, RING, LL]
    assert extra == pytest.approx(bw_term(3, RING, LL) * (full - 1))
    # Simple: 512 x 64 bytes a channel, so 1 MiB runs on all 16 on the ring; at 64 KiB on two
    extra = real[0, 3, RING, SIMPLE] - estimate[0, 3, RING, SIMPLE]
    assert extra == pytest.approx(bw_term(3, RING, SIMPLE) * (full / 2 - 1))
    assert real[0, 4, RING, SIMPLE] == pytest.approx(estimate[0, 4, RING, SIMPLE])
    # never faster than the estimate, and the choice is still made on the estimate
    assert np.all(real[np.isfinite(real)] >= estimate[np.isfinite(real)] - 1e-9)
    r = sweep(sa, "all_reduce", sizes)
    assert r.algorithm[0, 1] == TREE and r.protocol[0, 1] == LL
    assert r.time_us[0, 1] == pytest.approx(real[0, 1, TREE, LL])


@pytest.mark.parametrize("nodes", [2, 3, 8])
@pytest.mark.parametrize("k", [1, 2, 3, 8])
@pytest.mark.parametrize("ar", [False, True])
def test_ring_latency_counts_the_crossings_on_its_critical_path(nodes, k, ar):
    """Walk the ring: ranks 0..n-1 in order, node r // k; the link r -> r + 1 crosses the
    network where the nodes differ. An all-gather's last piece to rank r has come n - 1 hops
    from r + 1; an all-reduce's chunk c is reduced from c + 1 round to c, then gathered from c
    round to c - 1 (2 (n - 1) hops). The slowest chain crosses the network as often as the
    model counts; NCCL's tuner counts nNodes - 1 (twice for all-reduce)."""
    from fabricplan.collectives.latency import ring_crossings

    n = nodes * k

    def crossings(start: int, hops: int) -> int:
        return sum((start + i) % n // k != (start + i + 1) % n // k for i in range(hops))

    hops = 2 * (n - 1) if ar else n - 1
    walked = max(crossings((r + 1) % n, hops) for r in range(n))
    args = (ar, np.array([float(nodes)]), np.array([float(k)]), np.array([float(hops)]))
    assert ring_crossings(*args, tuner=False)[0] == walked
    assert ring_crossings(*args, tuner=True)[0] == (2 if ar else 1) * (nodes - 1)
