"""Workload model: known analytic cases, vectorised = scalar, memory fit, properties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.scenario import load_scenario
from fabricplan.validation.training_runs import gpt_model
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.comm import base_system
from fabricplan.workload.memory import memory
from fabricplan.workload.plan import OPTIMIZER_BYTES, hardware_from_scenario
from fabricplan.workload.shapes import activation_bytes_per_token_layer, model_flops_per_token

CAT = default_catalog()
H100 = CAT.gpu("h100")
COMMON = {"vocab": 51200, "seq_len": 2048}
GPT_18B = {"params_b": 18.4, "heads": 48, "hidden": 6144, "layers": 40}


def _hw(gpus: int, fabric: str = "ib-ndr", gpu=H100) -> Hardware:
    return Hardware(gpu=gpu, gpus=gpus, gpus_per_node=8, nics_per_node=8, fabric=fabric)


def test_hardware_flops_match_megatrons_formula():
    """Narayanan et al. SC'21 eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) with recomputation."""
    s = shape_of(gpt_model(GPT_18B, COMMON))
    p = Plans.of(
        tp=8, pp=1, dp=1, global_batch=8, seq_len=2048, sp=False, recompute="full", flash=False
    )
    st_ = training_step(s, p, _hw(8, gpu=CAT.gpu("a100")), backend=NO_CONGESTION)
    b, sl, h, layers, v = 8, 2048, 6144, 40, 51200
    formula = 96 * b * sl * layers * h**2 * (1 + sl / (6 * h) + v / (16 * layers * h))
    assert st_.hw_flops[0] == pytest.approx(formula, rel=0.01)


def test_model_flops_are_megatrons_count():
    """Megatron-Core's num_floating_point_operations (megatron/training/training.py, 2024-07):
    12 B s l h^2 ((1 + g/a + s/h) + f/h + V/(2 l h)) per step, the logit layer counted once."""
    s = shape_of(CAT.model("llama3-70b"))  # untied, GQA 64/8, gated FFN 28672
    seq, layers, h, vocab = 8192, 80, 8192, 128256
    ratio = (1 + 8 / 64 + seq / h) + 28672 / h * 3 / 2 + vocab / (2 * layers * h)
    assert model_flops_per_token(s, seq) == pytest.approx(12 * layers * h**2 * ratio, rel=1e-3)


def test_a_lookup_table_costs_no_flops():
    """Tying the input embedding to the output head removes weights but no matmul."""
    row = {"params_b": 1.7, "heads": 16, "hidden": 2048, "layers": 24}
    common = {"vocab": 131072, "seq_len": 4096}
    tied = shape_of(gpt_model({**row, "tied_embeddings": True}, common))
    untied = shape_of(gpt_model({**row, "tied_embeddings": False}, common))
    assert untied.params_active - tied.params_active == 131072 * 2048
    assert model_flops_per_token(untied, 4096) == model_flops_per_token(tied, 4096)
    # 6 x weights overstates the untied model by its input embedding, 14 % at this size
    six_n = 6 * untied.params_active + 3 * 24 * untied.score_flops_per_ctx * 4096
    assert six_n / model_flops_per_token(untied, 4096) == pytest.approx(1.143, abs=0.005)


def test_activation_memory_is_korthikantis():
    """Korthikanti et al. 2022, Table 2: sbh(34 + 5as/h) per layer; /t with TP+SP; 2sbh when
    the whole layer is recomputed."""
    s = shape_of(gpt_model(GPT_18B, COMMON))
    h, a, sl = 6144, 48, 2048
    full = activation_bytes_per_token_layer(s, sl, 1, False, "none", False)
    assert full == pytest.approx(h * (34 + 5 * a * sl / h))
    tp_only = activation_bytes_per_token_layer(s, sl, 8, False, "none", False)
    assert tp_only == pytest.approx(h * (10 + 24 / 8 + 5 * a * sl / (h * 8)))
    sp = activation_bytes_per_token_layer(s, sl, 8, True, "selective", False)
    assert sp == pytest.approx(34 * h / 8)
    assert activation_bytes_per_token_layer(s, sl, 8, False, "full", False) == 2 * h


def test_bubble_is_pipeline_stages_minus_one_over_chunks():
    s = shape_of(CAT.model("llama3-8b"))
    for vp in (1, 2):
        p = Plans.of(tp=1, pp=4, dp=2, vp=vp, global_batch=16, seq_len=4096)
        st_ = training_step(s, p, _hw(8), backend=NO_CONGESTION)
        m = 16 / 2
        per_mb = (st_.compute + st_.tp_comm + st_.pp_comm + st_.ep_comm + st_.cp_comm) / m
        assert st_.bubble[0] == pytest.approx(3 / vp * per_mb[0])


def test_vectorised_equals_one_at_a_time():
    s = shape_of(CAT.model("llama3-70b"))
    tp = np.array([8, 4, 8, 2])
    pp = np.array([4, 8, 2, 8])
    p = Plans.of(
        tp=tp, pp=pp, dp=512 // (tp * pp), global_batch=1024, seq_len=8192, recompute="full"
    )
    together = training_step(s, p, _hw(512, "roce-400g")).time
    alone = []
    for t, q in zip(tp, pp, strict=True):
        one = Plans.of(
            tp=t, pp=q, dp=512 // (t * q), global_batch=1024, seq_len=8192, recompute="full"
        )
        alone.append(training_step(s, one, _hw(512, "roce-400g")).time[0])
    assert together == pytest.approx(alone, rel=1e-9)


def test_fabric_only_changes_what_crosses_the_network():
    """Single-node tensor parallelism never touches the fabric; data parallelism does."""
    s = shape_of(CAT.model("llama3-70b"))
    p = Plans.of(
        tp=8, pp=4, dp=16, global_batch=1024, seq_len=8192, recompute="full", overlap_dp=False
    )
    ib = training_step(s, p, _hw(512, "ib-ndr"))
    tcp = training_step(s, p, _hw(512, "tcp-100g"))
    assert ib.tp_comm[0] == pytest.approx(tcp.tp_comm[0])
    assert tcp.dp_comm[0] > 2 * ib.dp_comm[0]
    assert tcp.time[0] > ib.time[0]


def test_zero_shards_the_optimizer_state():
    s = shape_of(CAT.model("llama3-8b"))
    mem = [
        memory(s, Plans.of(tp=1, pp=1, dp=16, global_batch=64, seq_len=4096, zero=z), _hw(16))
        for z in (0, 1, 2, 3)
    ]
    assert mem[1].optimizer[0] == pytest.approx(mem[0].optimizer[0] / 16)
    assert mem[2].gradients[0] == pytest.approx(mem[1].gradients[0] / 16)
    assert mem[3].weights[0] == pytest.approx(mem[2].weights[0] / 16)
    assert mem[0].optimizer[0] == pytest.approx(s.params_total * 12, rel=0.01)


@settings(max_examples=60, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8]),
    mb=st.sampled_from([1, 2]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
    flash=st.booleans(),
)
def test_any_valid_plan_gives_a_finite_positive_step(tp, pp, mb, zero, recompute, flash):
    s = shape_of(CAT.model("llama3-8b"))
    dp = 64 // (tp * pp)
    p = Plans.of(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=mb,
        zero=zero,
        global_batch=dp * mb * 8,
        seq_len=4096,
        sp=tp > 1,
        recompute=recompute,
        flash=flash,
    )
    st_ = training_step(s, p, _hw(64), backend=NO_CONGESTION)
    assert np.isfinite(st_.time).all() and (st_.time > 0).all()
    parts = sum(st_.breakdown().values())
    assert parts == pytest.approx(st_.time[0], rel=1e-9)
    # hardware FLOPs never undercount the model's
    assert st_.hw_flops[0] >= 0.9 * st_.model_flops[0]


@pytest.mark.parametrize(
    ("precision", "per_weight", "passes"), [("bf16", 2 + 2 * 4, 8), ("fp16", 2 + 2 * 2, 7)]
)
def test_unfused_gradient_accumulation_costs_its_hbm_traffic(precision, per_weight, passes):
    """Without accumulation fused into the weight-gradient GEMM each micro-batch reads the new
    16-bit gradient and reads + writes the accumulator; FP16 autograd skips the first one."""
    s = shape_of(gpt_model(GPT_18B, COMMON))
    kw = {"tp": 8, "pp": 1, "dp": 1, "global_batch": 8, "seq_len": 2048, "precision": precision}
    fused = training_step(s, Plans.of(**kw), _hw(8), backend=NO_CONGESTION)
    unfused = training_step(
        s, Plans.of(grad_accum_fusion=False, **kw), _hw(8), backend=NO_CONGESTION
    )
    n = (s.params_total - s.params_embedding) / 8 + s.params_embedding / 8
    hbm = H100.hbm_TBps * 1e12 * H100.hbm_efficiency
    # the fused weight-gradient GEMMs read and write the FP32 main gradient in their epilogue
    # (8 bytes per weight), the unfused ones store a 16-bit gradient (2), every micro-batch
    gemm_weights = (s.layers * s.proj_flops / 2 + s.hidden * s.vocab) / 8
    expected = (passes * n * per_weight - 8 * (8 - 2) * gemm_weights) / hbm
    assert unfused.time[0] - fused.time[0] == pytest.approx(expected, rel=1e-6)
    assert unfused.compute[0] - fused.compute[0] == pytest.approx(expected, rel=1e-6)


SMALL_H100 = {"params_b": 1.7, "heads": 16, "hidden": 2048, "layers": 24}


def _small(vocab: int):
    return shape_of(gpt_model(SMALL_H100, {"vocab": vocab, "seq_len": 4096}))


def test_the_loss_over_the_vocabulary_costs_its_matmul_and_hbm_traffic():
    """Per token on the last stage: the output head (3 passes x 2 h V FLOPs) and the unfused
    cross-entropy (52 bytes per logit, Megatron's op sequence)."""
    kw = {"tp": 1, "pp": 1, "dp": 1, "global_batch": 4, "seq_len": 4096, "flash": True}
    big, small = (
        training_step(_small(v), Plans.of(**kw), _hw(1), backend=NO_CONGESTION)
        for v in (131072, 65536)
    )
    tokens, dv = 4 * 4096, 131072 - 65536
    peak = H100.bf16_dense_tflops * 1e12 * H100.matmul_efficiency
    hbm = H100.hbm_TBps * 1e12 * H100.hbm_efficiency
    # the head's GEMMs also store their outputs (see workload/gemm.py): the logits (2 bytes
    # each), and the weight gradient h x V (the FP32 main gradient read and written, 8 bytes)
    # once per micro-batch; the input gradient is h wide whatever the vocabulary
    stores = (tokens * dv * 2 + 4 * 2048 * dv * 8) / hbm
    expected = tokens * dv * (3 * 2 * 2048 / peak + 52 / hbm) + stores
    # the optimizer step also grows with the vocabulary's weights; everything else is equal
    diff = (big.time[0] - big.optimizer[0]) - (small.time[0] - small.optimizer[0])
    assert diff == pytest.approx(expected, rel=1e-9)


def test_the_last_stage_holds_one_micro_batch_of_logits():
    s = _small(131072)
    tokens, logits = 4096, 4096 * 131072 * 6  # 2-byte logits + the FP32 softmax kept
    one = Plans.of(tp=1, pp=1, dp=1, global_batch=8, seq_len=4096, recompute="full")
    smaller = _small(65536)
    diff = memory(s, one, _hw(1)).activations[0] - memory(smaller, one, _hw(1)).activations[0]
    assert diff == pytest.approx(tokens * 65536 * 6)
    # 4 stages, full recompute: the first stage keeps 4 micro-batches of 2h bytes per token
    # per layer, the last one micro-batch plus its logits, which is more
    four = Plans.of(tp=1, pp=4, dp=1, global_batch=8, seq_len=4096, recompute="full")
    one_mb = 2 * 2048 * tokens * 24 / 4
    assert memory(s, four, _hw(4)).activations[0] == pytest.approx(one_mb + logits)
    # without recompute the first stage's activations are larger again
    none = Plans.of(tp=1, pp=4, dp=1, global_batch=8, seq_len=4096, recompute="none", flash=True)
    acts = memory(s, none, _hw(4)).activations[0]
    per_token = activation_bytes_per_token_layer(s, 4096, 1, False, "none", True)
    assert acts == pytest.approx(4 * per_token * tokens * 6)  # 1F1B: pp micro-batches
    vp2 = Plans.of(
        tp=1, pp=4, vp=2, dp=1, global_batch=8, seq_len=4096, recompute="none", flash=True
    )
    # interleaved: 2 (pp - 1) + (vp - 1) pp + 1 = 11 chunk passes of 3 layers each
    assert memory(s, vp2, _hw(4)).activations[0] == pytest.approx(11 * per_token * tokens * 3)


def test_a_group_too_large_to_simulate_is_a_workload_error():
    from fabricplan.workload import WorkloadError
    from fabricplan.workload.comm import congestion_factor

    hw = _hw(8 * 4096)
    with pytest.raises(WorkloadError) as err:
        congestion_factor(hw, "alltoall", 4096)
    msg = str(err.value)
    assert msg.startswith("workload.parallel:") and "4,096 nodes" in msg and "GiB" in msg


def test_stacked_plans_are_the_rows_of_each():
    s = shape_of(CAT.model("llama3-8b"))
    one = Plans.of(tp=2, pp=1, dp=8, global_batch=64, seq_len=4096)
    two = Plans.of(
        tp=np.array([1, 4]), pp=np.array([2, 1]), dp=np.array([8, 4]), global_batch=64, seq_len=4096
    )
    both = training_step(s, Plans.stack([one, two]), _hw(16), backend=NO_CONGESTION).time
    apart = [
        *training_step(s, one, _hw(16), backend=NO_CONGESTION).time,
        *training_step(s, two, _hw(16), backend=NO_CONGESTION).time,
    ]
    assert both == pytest.approx(apart, rel=1e-12)
    with pytest.raises(ValueError, match="scalar flag"):
        Plans.stack(
            [one, Plans.of(tp=2, pp=1, dp=8, global_batch=64, seq_len=4096, recompute="full")]
        )


def test_the_scenarios_switch_sets_the_latency_of_every_hop():
    """cluster.topology.switch reaches the collective model: a deep-buffer chassis adds its
    3.5 us at each of the switches past the first (3 hops on 16k GPUs)."""
    sets = ["cluster.fabric=roce-400g", "cluster.topology.switch=arista-7816r3"]
    sc = load_scenario("examples/16k-gpu-frontier.yaml", overrides=sets, catalog=CAT)
    hw = hardware_from_scenario(sc, CAT, "roce-400g")
    assert (hw.switch, hw.spine_oversubscription) == ("arista-7816r3", 1.0)
    chassis, default = base_system(hw), base_system(replace(hw, switch=None))
    rdma = CAT.fabric("roce-400g").rdma_latency_us.nominal
    per_hop = CAT.switch("arista-7816r3").port_to_port_latency_ns.nominal / 1000
    assert chassis.switch_hops == 3
    assert chassis.p2p_latency_us == pytest.approx(rdma + 2 * per_hop)
    assert default.p2p_latency_us < chassis.p2p_latency_us - 5


def test_suggested_plans_keep_the_expert_groups_whole():
    """DeepSeek-V3 at 131k context on 1,024 GPUs, ZeRO-3 and full recompute, does not fit with
    tp 1. More TP fits but shrinks dp: with ep 256, TP 8 leaves dp 128, which ep must divide,
    so only TP 4 is suggested; with ep 128 both are."""
    from fabricplan.workload.evaluate import _alternatives

    s = shape_of(CAT.model("deepseek-v3"))
    kw = {
        "tp": 1,
        "pp": 1,
        "dp": 1024,
        "global_batch": 1024,
        "seq_len": 131072,
        "zero": 3,
        "recompute": "full",
    }
    p256, p128 = Plans.of(ep=256, **kw), Plans.of(ep=128, **kw)
    assert not memory(s, p256, _hw(1024)).fits[0]
    assert [a.split(" (")[0] for a in _alternatives(s, p256, _hw(1024))] == ["tp: 4"]
    assert [a.split(" (")[0] for a in _alternatives(s, p128, _hw(1024))] == ["tp: 4", "tp: 8"]


def test_expert_state_is_sharded_over_the_expert_data_parallel_group():
    """ZeRO shards a routed expert's weights, gradients and optimizer state over the ranks that
    hold the same expert: dp x cp / ep, not dp x cp. With ep equal to dp every expert has one
    copy and nothing of it is sharded."""
    s = shape_of(CAT.model("mixtral-8x7b"))
    kw = {"tp": 1, "pp": 1, "dp": 8, "global_batch": 8, "seq_len": 4096, "zero": 3}
    one, eight = memory(s, Plans.of(ep=1, **kw), _hw(8)), memory(s, Plans.of(ep=8, **kw), _hw(8))
    expert = s.params_expert
    dense = s.params_total - s.params_expert
    # ep 1: everything sharded 8 ways; ep 8: experts split 8 ways by ep, not sharded further
    assert one.optimizer[0] == pytest.approx((dense + expert) * OPTIMIZER_BYTES / 8, rel=1e-9)
    assert eight.optimizer[0] == pytest.approx((dense / 8 + expert / 8) * OPTIMIZER_BYTES, rel=1e-9)


def test_fragmented_placement_reaches_the_congestion_simulator():
    """cluster.placement: a 16-node ring on a RoCE fat-tree runs collision-free side by side;
    scattered over a fabric twice its size, its flows cross the spine and ECMP collides."""
    from fabricplan.workload.comm import congestion_factor

    sets = [
        "cluster.placement=fragmented",
        "cluster.topology.design=fat-tree",
        "cluster.fabric=roce-400g",
    ]
    sc = load_scenario("examples/256-gpu-moe.yaml", overrides=sets, catalog=CAT)
    hw = hardware_from_scenario(sc, CAT, "roce-400g")
    assert hw.placement == "fragmented"
    assert congestion_factor(hw, "ring-allreduce", 16) > 1.2
    assert congestion_factor(replace(hw, placement="contiguous"), "ring-allreduce", 16) == 1.0


def test_matmul_rate_is_the_sustained_figure_per_precision():
    """FP8 runs at its own sustained share of the FP8 peak where one is measured, else at the
    BF16 share; a GPU without FP8 tensor cores runs FP8 plans at its BF16 rate."""
    from fabricplan.workload.plan import matmul_flops

    assert matmul_flops(H100, "bf16") == pytest.approx(708.5e12, rel=1e-4)  # H200 MSMF
    assert matmul_flops(H100, "fp8") == pytest.approx(1288.7e12, rel=1e-4)
    a100 = CAT.gpu("a100")
    assert (
        matmul_flops(a100, "fp8") == matmul_flops(a100, "bf16") == pytest.approx(230e12, rel=1e-3)
    )
    no_fp8_share = H100.model_copy(update={"fp8_matmul_efficiency": None})
    assert matmul_flops(no_fp8_share, "fp8") == pytest.approx(1979e12 * H100.matmul_efficiency)
    # sustained is below every burst figure the catalog's sources give for the same part
    for gpu, burst in (("a100", 267.9), ("h100", 792.1), ("h200", 841.9), ("b200", 1770.9)):
        assert matmul_flops(CAT.gpu(gpu), "bf16") < burst * 1e12


def test_every_plan_a_misfit_is_pointed_to_fits_as_written():
    """The 'fits with' hint names plans a user can write back into the scenario: each one,
    applied as written, fits (sequence parallelism is named when only it makes a plan fit)."""
    from fabricplan.workload import WorkloadError
    from fabricplan.workload.evaluate import evaluate_scenario

    field = {
        "tp": "workload.parallel.tp",
        "pp": "workload.parallel.pp",
        "zero": "workload.parallel.zero",
        "recompute": "workload.recompute",
        "sequence_parallel": "workload.parallel.sequence_parallel",
    }
    base = [
        "workload.parallel.sequence_parallel=false",
        "workload.recompute=none",
        "workload.parallel.tp=2",
        "workload.parallel.pp=2",
    ]
    sc = load_scenario("examples/llama3-70b-512-h100.yaml", catalog=CAT, overrides=base)
    with pytest.raises(WorkloadError) as err:
        evaluate_scenario(sc, CAT, backend=NO_CONGESTION)
    hints = str(err.value).split("fits with ")[1].split(", or ")
    assert any("sequence_parallel: true" in h for h in hints)
    for hint in hints:
        pairs = [kv.split(": ") for kv in hint.rsplit(" (", 1)[0].split(", ")]
        extra = [f"{field[k]}={v}" for k, v in pairs]
        fixed = load_scenario(
            "examples/llama3-70b-512-h100.yaml", catalog=CAT, overrides=base + extra
        )
        assert evaluate_scenario(fixed, CAT, backend=NO_CONGESTION), hint


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x7b"]),
    fabric=st.sampled_from(["tcp-100g", "roce-400g", "ib-ndr"]),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 2]),
    zero=st.integers(0, 3),
    micro_batches=st.sampled_from([1, 2, 8]),
    overlap=st.booleans(),
)
def test_a_step_is_never_shorter_than_what_it_must_wait_for(
    model, fabric, tp, pp, zero, micro_batches, overlap
):
    # the step holds all the compute, and the data-parallel stream (reductions, gathers,
    # ZeRO-3's re-gathers) has to end inside it, however much compute runs beside it
    s = shape_of(CAT.model(model))
    dp = 64 // (tp * pp)
    p = Plans.of(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=1,
        zero=zero,
        seq_len=2048,
        sp=tp > 1,
        global_batch=dp * micro_batches,
        overlap_dp=overlap,
    )
    st_ = training_step(s, p, _hw(64, fabric), backend=NO_CONGESTION)
    assert st_.time[0] >= st_.compute[0] * (1 - 1e-12)
    assert st_.time[0] >= st_.dp_comm_total[0] + st_.optimizer[0] - 1e-12
    assert sum(st_.breakdown().values()) == pytest.approx(st_.time[0], rel=1e-9)


def test_zero3_on_slow_ethernet_waits_for_its_gathers():
    # Llama 3 8B on 64 H100 over 100 Gb/s TCP with ZeRO-3 and one micro-batch: more traffic
    # than compute, and layer by layer not all of it fits behind its layer
    s = shape_of(CAT.model("llama3-8b"))
    p = Plans.of(tp=1, pp=1, dp=64, micro_batch=1, zero=3, seq_len=8192, sp=False, global_batch=64)
    st_ = training_step(s, p, _hw(64, "tcp-100g"), backend=NO_CONGESTION)
    assert st_.dp_comm_total[0] > st_.compute[0]
    assert st_.time[0] > st_.dp_comm_total[0] + st_.optimizer[0]
    # On InfiniBand every layer's traffic fits behind its layer, and only the ends show: the
    # root's (embedding and head) and the first layer's gathers before the forward, the first
    # layer's and the root's reductions after the backward. Per micro-batch the stream is two
    # gathers of every weight (forward, backward) and one reduction of every gradient; nothing
    # is gathered after the optimizer step.
    from fabricplan.workload.comm import collectives_s

    hw = _hw(64, "ib-ndr")
    ib = training_step(s, p, hw, backend=NO_CONGESTION)
    layer, root, one = (s.params_total - s.params_embedding) / 32, s.params_embedding, np.ones(1)
    a, r, a0, r0 = (
        collectives_s(hw, [(op, 64 * one, one, n * one, "ring-allreduce")], NO_CONGESTION)[0][0]
        for op, n in (
            ("all_gather", 2 * layer),
            ("reduce_scatter", 4 * layer),
            ("all_gather", 2 * root),
            ("reduce_scatter", 4 * root),
        )
    )
    assert ib.dp_comm_total[0] == pytest.approx(a0 + r0 + 32 * (2 * a + r), rel=1e-9)
    assert ib.dp_comm[0] == pytest.approx(a0 + a + r + r0, rel=1e-9)


def test_the_last_gradient_bucket_and_the_first_parameter_bucket_cannot_hide():
    # overlapped bucket by bucket (Megatron-Core's default bucket: max(40M, 1M x DP) params):
    # even with far more compute than traffic, one bucket's share of each stream is exposed
    from fabricplan.workload.overlap import ddp_bucket_params

    s = shape_of(CAT.model("llama3-8b"))
    p = Plans.of(
        tp=1,
        pp=1,
        dp=64,
        micro_batch=1,
        zero=1,
        seq_len=8192,
        sp=False,
        global_batch=64 * 16,
        overlap_dp=True,
    )
    st_ = training_step(s, p, _hw(64, "ib-ndr"), backend=NO_CONGESTION)
    n = s.params_total  # no model parallelism: every GPU holds every parameter
    share = float(ddp_bucket_params(np.array([64.0]))[0]) / n
    assert 0 < share < 1
    assert st_.compute[0] > 10 * st_.dp_comm_total[0]  # plenty to hide behind
    assert st_.dp_comm[0] == pytest.approx(share * st_.dp_comm_total[0], rel=0.05)


def test_gradients_reduced_in_bf16_halve_the_reduction_and_the_buffer():
    """--grad-reduce-in-bf16 (NeMo's recipes): the main gradients are BF16, so the data-parallel
    reduce-scatter moves half the bytes, the gradient buffer holds half, and the fused
    weight-gradient GEMMs read and write 4 bytes a weight in their epilogue instead of 8; the
    parameter all-gather (BF16 weights) does not change."""
    s = shape_of(gpt_model(GPT_18B, COMMON))
    kw = {"tp": 8, "pp": 1, "dp": 16, "global_batch": 64, "seq_len": 2048, "zero": 1}
    fp32 = training_step(s, Plans.of(**kw), _hw(128), backend=NO_CONGESTION)
    bf16 = training_step(s, Plans.of(grad_reduce_bf16=True, **kw), _hw(128), backend=NO_CONGESTION)
    assert bf16.memory.gradients[0] == pytest.approx(fp32.memory.gradients[0] / 2)
    assert bf16.memory.weights[0] == fp32.memory.weights[0]
    assert bf16.dp_comm_total[0] < fp32.dp_comm_total[0]
    # the compute saves the epilogue's 4 bytes a weight per micro-batch, nothing else
    n_gemm = (s.layers * s.proj_flops / 2 + s.hidden * s.vocab) / 8
    hbm = H100.hbm_TBps * 1e12 * H100.hbm_efficiency
    micro_batches = 64 / 16
    saved = micro_batches * n_gemm * (8 - 4) / hbm
    assert fp32.compute[0] - bf16.compute[0] == pytest.approx(saved, rel=1e-6)
    # FP16 training keeps its 16-bit gradients either way
    fp16 = Plans.of(precision="fp16", **kw)
    assert fp16.grad_bytes == Plans.of(precision="fp16", grad_reduce_bf16=True, **kw).grad_bytes


def test_a_pipeline_runs_at_its_slowest_stage():
    """126 layers over 16 stages: the stages holding 8 set each micro-batch's time, so the step
    is the one of 128 layers (8 a stage) with the same weights, not 126/16 = 7.875 layers'."""
    s = shape_of(CAT.model("llama3-405b"))
    assert s.layers == 126
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=1024, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=8, pp=16, dp=8, global_batch=128, seq_len=8192)
    uneven = training_step(s, p, hw, backend=NO_CONGESTION)
    full = training_step(replace(s, layers=128), p, hw, backend=NO_CONGESTION)
    assert uneven.time[0] == full.time[0] and uneven.compute[0] == full.compute[0]
