"""Overlap that is physically possible: analytic cases, an event timeline, and the step's bounds
over random plans."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.comm import collectives_s, nccl_sm_share, spans_nodes
from fabricplan.workload.overlap import chain_exposed, sm_tax, zero3_exposed
from fabricplan.workload.tp_overlap import ring_exchange
from test_cli import run

CAT = default_catalog()
H100 = CAT.gpu("h100")
times = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


def _hw(gpus: int, fabric: str = "ib-ndr") -> Hardware:
    return Hardware(gpu=H100, gpus=gpus, gpus_per_node=8, nics_per_node=8, fabric=fabric)


def test_a_chain_shows_one_unit_and_what_outlasts_the_rest():
    # 4 buckets of 1 s behind 10 s of compute: only the bucket at the open end shows
    assert chain_exposed(4.0, 10.0, 0.25) == pytest.approx(1.0)
    # behind 2 s of compute (0.5 s a unit): 1 + 3 x (1 - 0.5)
    assert chain_exposed(4.0, 2.0, 0.25) == pytest.approx(2.5)
    # one unit: nothing to overlap with
    assert chain_exposed(4.0, 100.0, 1.0) == pytest.approx(4.0)


def test_sm_tax_is_the_share_of_each_second_beside_compute():
    assert sm_tax(1.0, 10.0, 0.1) == pytest.approx(0.1)
    # communication outlasting the compute: the compute runs on 90 % of the SMs throughout
    assert sm_tax(10.0, 1.0, 0.1) == pytest.approx(1.0 / 0.9 - 1.0)
    assert sm_tax(3.0, 2.0, 0.0) == 0.0


def test_two_layers_by_hand():
    """Root gather 0.5, per layer gather 1 and reduce 2, forward 1.5 and backward 2 a layer,
    head backward 0.4. Forward: root and first gather wait (1.5), the second hides behind the
    first layer. Backward: the last layer's gather outlasts the head by 0.6; the first layer's
    gather hides behind the last layer's backward, the last layer's reduction behind the first
    layer's; then the first layer's reduction (2) and the root's (0.5). Exposed 4.6 of 9."""
    exposed, hidden = zero3_exposed(1.0, 2.0, 0.5, 0.5, 1.5, 2.0, 0.4, 2)
    assert exposed == pytest.approx(1.5 + 0.6 + 2.0 + 0.5)
    assert exposed + hidden == pytest.approx(0.5 + 0.5 + 2 * (2 * 1.0 + 2.0))


def _timeline(a, r, a0, r0, f, b, hb, layers):
    """One micro-batch event by event: one compute stream, one NCCL stream running collectives
    in the order FSDP issues them. Returns the time beyond the compute."""
    comm = a0 + a  # the root's gather, then the first layer's (issued before any compute)
    t, ready = a0, {1: comm}
    for i in range(1, layers + 1):
        start = max(t, ready[i])
        if i < layers:  # the next layer's gather is issued as this one starts
            comm = max(comm, start) + a
            ready[i + 1] = comm
        t = start + f
    comm = max(comm, t) + a  # the root's pre-backward prefetches the last layer's gather
    ready, t = {layers: comm}, t + hb
    for i in range(layers, 0, -1):
        start = max(t, ready[i])
        if i > 1:  # BACKWARD_PRE: the next gather before this layer's gradients
            comm = max(comm, start) + a
            ready[i - 1] = comm
        t = start + b
        comm = max(comm, t) + r  # this layer's reduce-scatter after its gradients
    comm = max(comm, t) + r0
    return max(comm, t) - layers * (f + b) - hb


@settings(max_examples=300, deadline=None)
@given(a=times, r=times, a0=times, r0=times, f=times, b=times, hb=times, layers=st.integers(1, 9))
def test_zero3_exposure_is_the_event_timeline(a, r, a0, r0, f, b, hb, layers):
    exposed, hidden = zero3_exposed(a, r, a0, r0, f, b, hb, layers)
    assert exposed == pytest.approx(_timeline(a, r, a0, r0, f, b, hb, layers), abs=1e-9)
    assert hidden >= -1e-12
    # what hides is bounded by the compute it hides behind
    assert hidden <= layers * (f + b) + hb + 1e-9


def test_a_context_parallel_step_hides_behind_one_block_of_attention():
    # cp = 4: 3 K/V transfers of 1 s go round while 4 blocks of 0.8 s of attention run; each
    # transfer has only the block already there to hide behind, so 3 x 0.2 s show, although
    # the whole attention (3.2 s) is longer than the whole ring (3 s)
    assert ring_exchange(3.0, 3.2, 4) == pytest.approx(0.6)
    assert ring_exchange(3.0, 4.0, 4) == pytest.approx(0.0)


def test_nccl_kernels_hold_one_sm_per_channel():
    hw = _hw(64)
    # 8 GPUs a node, 8 NICs: a ring across nodes runs 2 channels per NIC, one inside a node 2
    # per GPU; with one GPU per node it has its own NIC only
    share = nccl_sm_share(hw, np.array([64, 8, 8, 1]), np.array([1, 1, 8, 1]))
    assert share == pytest.approx([16 / 132, 16 / 132, 2 / 132, 0.0])
    assert list(spans_nodes(hw, np.array([64, 8, 8, 1]), np.array([1, 1, 8, 1]))) == [
        True,
        False,
        True,
        False,
    ]


def test_overlapped_communication_is_not_free():
    # Llama 3 8B ZeRO-1 on 64 H100: the gradient reduction hides behind the backward pass but
    # its kernels hold 16 of 132 SMs meanwhile, so the compute beside it runs longer
    s = shape_of(CAT.model("llama3-8b"))
    kw = {"tp": 1, "pp": 1, "dp": 64, "zero": 1, "seq_len": 8192, "sp": False, "global_batch": 64}
    on = training_step(s, Plans.of(**kw), _hw(64), backend=NO_CONGESTION)
    off = training_step(s, Plans.of(overlap_dp=False, **kw), _hw(64), backend=NO_CONGESTION)
    # what hides is the overlapped stream (its buckets' collectives) less what shows of it
    hidden = on.dp_comm_total[0] - on.dp_comm[0]
    assert 0 < hidden and on.dp_comm[0] < off.dp_comm[0]
    assert on.overlap_slowdown[0] == pytest.approx(hidden * 16 / 132, rel=1e-9)
    assert off.overlap_slowdown[0] == 0
    assert on.time[0] < off.time[0]


MODELS = {"llama3-8b": 32, "llama3-70b": 80, "mixtral-8x7b": 32}


@settings(max_examples=120, deadline=None)
@given(
    model=st.sampled_from(sorted(MODELS)),
    fabric=st.sampled_from(["tcp-100g", "roce-400g", "ib-ndr"]),
    tp=st.sampled_from([1, 2, 8, 16]),
    pp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2, 4]),
    ep=st.sampled_from([1, 2, 8]),
    zero=st.integers(0, 3),
    micro_batches=st.sampled_from([1, 3]),
    seq_len=st.sampled_from([2048, 16384]),
    overlap=st.booleans(),
    tp_overlap=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
    cp_comm=st.sampled_from(["p2p", "all_gather"]),
    ep_overlap=st.booleans(),
    mtp=st.sampled_from([0, 0, 1]),
    engine=st.sampled_from(["megatron", "deepspeed"]),
    sp=st.booleans(),
)
def test_a_step_holds_every_stream_that_must_finish_inside_it(
    model,
    fabric,
    tp,
    pp,
    cp,
    ep,
    zero,
    micro_batches,
    seq_len,
    overlap,
    tp_overlap,
    recompute,
    cp_comm,
    ep_overlap,
    mtp,
    engine,
    sp,
):
    s = shape_of(CAT.model(model))
    gpus = 128
    dp = gpus // (tp * pp * cp)
    if dp < 1 or (dp * cp) % ep or (s.params_expert == 0 and ep > 1):
        return
    layout = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "zero": zero}
    flags = {
        "overlap_dp": overlap,
        "tp_comm_overlap": tp_overlap,
        "recompute": recompute,
        "cp_comm": cp_comm,
        "ep_comm_overlap": ep_overlap,
        "mtp_layers": mtp,  # multi-token-prediction modules on the last stage
        "pipeline_engine": engine,  # what a stage does at its boundaries (pipe_boundary)
    }
    sp = sp and tp > 1
    p = Plans.of(**layout, seq_len=seq_len, sp=sp, global_batch=dp * micro_batches, **flags)
    hw = _hw(gpus, fabric)
    r = training_step(s, p, hw, backend=NO_CONGESTION)
    t = r.time[0] * (1 + 1e-9)
    assert r.overlap_slowdown[0] >= 0
    assert t >= r.compute[0] + r.overlap_slowdown[0]
    # the data-parallel stream (ZeRO-3's per-layer gathers and reductions included) must end
    # before the optimizer step; TP, EP and the CP ring run inside every layer
    assert t >= r.dp_comm_total[0] + r.optimizer[0]
    for total in (r.tp_comm_total, r.ep_comm_total, r.cp_comm_total, r.pp_comm):
        assert t >= total[0]
    # streams that cross the network from the same GPU share its NIC: their times add up
    crossing = [
        (r.dp_comm_total, spans_nodes(hw, dp * cp, tp)),
        (r.tp_comm_total, spans_nodes(hw, tp, 1)),
        (r.ep_comm_total, spans_nodes(hw, ep, tp * cp)),
        (r.cp_comm_total, spans_nodes(hw, cp, tp)),
        (r.pp_comm, spans_nodes(hw, pp, tp * cp * dp)),
    ]
    assert t >= sum(total[0] for total, on in crossing if on)
    assert sum(r.breakdown().values()) == pytest.approx(r.time[0], rel=1e-9)
    # hiding communication never makes a step slower, even though it costs SMs, beyond what
    # its smaller collectives cost (overlapped, the stream goes bucket by bucket; not
    # overlapped, it is one collective)
    apart = training_step(s, replace(p, overlap_dp=False), hw, backend=NO_CONGESTION)
    extra = max(r.dp_comm_total[0] - apart.dp_comm_total[0], 0.0)
    assert r.time[0] <= (apart.time[0] + extra) * (1 + 1e-9)


def test_step_reports_the_compute_lost_to_overlap():
    sets = ("--set", "cluster.gpus=64", "--set", "cluster.fabric=tcp-100g")
    out = json.loads(run("step", "examples/16-gpu-finetune.yaml", *sets, "--json").stdout)[0]
    b = out["breakdown"]
    assert b["overlap_slowdown_s"] > 0
    assert sum(v for k, v in b.items() if k != "dp_comm_total_s") == pytest.approx(
        out["step_time_s"]
    )
    # ZeRO-3 over 100 Gb/s: the layer-by-layer traffic does not all fit behind the layers
    assert out["step_time_s"] > b["dp_comm_total_s"] + b["optimizer_s"]
    assert b["dp_comm_s"] > 0.1 * out["step_time_s"]


def _one(x: float) -> np.ndarray:
    return np.array([float(x)])


def _cp_case(tp: int, cp_comm: str = "p2p"):
    """Llama 3 70B (8 KV heads of 128), 128k tokens over cp = 4 on 32 H100s, 2 micro-batches."""
    s = shape_of(CAT.model("llama3-70b"))
    dp = 32 // (tp * 4)
    p = Plans.of(
        tp=tp,
        pp=1,
        dp=dp,
        cp=4,
        zero=1,
        seq_len=131072,
        sp=tp > 1,
        global_batch=2 * dp,
        cp_comm=cp_comm,
    )
    return s, p, training_step(s, p, _hw(32), backend=NO_CONGESTION)


def test_context_parallel_moves_only_the_kv_heads_of_its_tp_rank():
    """TP splits the 8 KV heads: a CP rank's K/V block is tokens x 2 x (8 / tp) x 128 x 2 B,
    and the ring moves cp - 1 blocks forward, twice that backward and once more when the
    recomputed attention runs, every layer and micro-batch."""
    for tp in (2, 8):
        s, _, r = _cp_case(tp)
        block = 131072 / 4 * 2 * (8 / tp) * 128 * 2
        request = ("sendrecv", _one(4), _one(tp), _one(block), "ring-allreduce")
        (one,) = collectives_s(_hw(32), [request], NO_CONGESTION)
        # forward, backward (2x), and the selective recomputation's forward again
        assert r.cp_comm_total[0] == pytest.approx(2 * s.layers * 3 * 4 * one[0], rel=1e-9)


def test_all_gather_context_parallel_is_exposed():
    """All-gather CP (Llama 3): the forward gathers all of K/V before the attention, the
    backward gathers it again (and once more for the recomputed attention) and reduce-scatters
    dK/dV, all on the critical path; the ring hides most of the same bytes behind the
    attention."""
    s, _, r = _cp_case(8, "all_gather")
    size = 4 * 131072 / 4 * 2 * 1 * 128 * 2
    requests = [
        (op, _one(4), _one(8), _one(size), "ring-allreduce")
        for op in ("all_gather", "reduce_scatter")
    ]
    ag, rs = collectives_s(_hw(32), requests, NO_CONGESTION)
    # forward, backward, and the selective recomputation's forward again
    assert r.cp_comm[0] == pytest.approx(2 * s.layers * (3 * ag[0] + rs[0]), rel=1e-9)
    _, _, ring = _cp_case(8)
    assert ring.cp_comm[0] < r.cp_comm[0]
