"""Pipeline layouts (Megatron-Core's pipeline_model_parallel_layout) and MTP modules: read and
checked as Megatron-Core does, each stage's load from its chunks, the busiest stage chosen by
its time, and a step that charges exactly that stage."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.catalog.architecture import count_params
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.scenario.layout import LayoutError, check_layout, chunks
from fabricplan.workload import Hardware, Plans, WorkloadError, training_step
from fabricplan.workload.layer_compute import layer_compute
from fabricplan.workload.memory import memory
from fabricplan.workload.pipeline_layout import StageLoad, busiest_stage, stage_loads
from fabricplan.workload.plan import OPTIMIZER_BYTES, WEIGHT_BYTES
from fabricplan.workload.shapes import (
    LOGITS_BYTES_PER_LOGIT,
    activation_bytes_per_token_layer,
    shape_of,
)
from test_cli import run

CAT = default_catalog()
DSV3 = shape_of(CAT.model("deepseek-v3"))
H100 = "Et|(tt|)*30mL"  # Megatron-Bridge's DeepSeek-V3 on H100, 8 x 4 chunks
B200 = "Et*4|(t*4|)*14tmL"  # its 16-chunk layout


def test_layouts_unroll_as_megatron_core_reads_them():
    assert len(chunks(H100)) == 32 and chunks(H100)[:2] == ("Et", "tt")
    assert chunks(H100)[-1] == "mL" and "".join(chunks(H100)).count("t") == 61
    assert chunks(B200) == ("Etttt", *["tttt"] * 14, "tmL")
    assert chunks("E, t*2 | t L") == ("Ett", "tL")  # commas and spaces are cosmetic
    check_layout(H100, 61, 1, 8, 4)
    check_layout(B200, 61, 1, 16, 1)
    check_layout(B200, 61, 1, 8, 2)


@pytest.mark.parametrize(
    ("layout", "mtp", "pp", "vp", "says"),
    [
        (H100, 1, 8, 2, "32 chunks; pp x vp is 8 x 2 = 16"),
        ("tE|tL", 0, 2, 1, "begin with the embedding"),
        ("Et|tL|L", 0, 3, 1, "end with the loss"),
        ("Et|tL", 0, 2, 1, "2 decoder layers t; the model has 61"),
        (H100, 0, 8, 4, "1 MTP modules m; workload.mtp_layers is 0"),
        ("E(t)*60|mtL", 1, 2, 1, "must follow every decoder layer"),
        ("Et|x", 0, 2, 1, "unknown symbol 'x'"),
        ("E(t)*99999999|L", 0, 2, 1, "over 100,000 symbols"),
    ],
)
def test_a_layout_that_does_not_fit_says_why(layout, mtp, pp, vp, says):
    with pytest.raises(LayoutError, match=re.escape(says)):
        check_layout(layout, 61, mtp, pp, vp)


def test_each_stage_holds_its_chunks():
    # chunk c on stage c % 8: stage 0 the embedding and 7 layers, stage 7 6 layers, the MTP
    # module and the loss, the others 8 layers
    assert set(stage_loads(H100, 8)) == {StageLoad(7, 0, 0), StageLoad(8, 0, 0), StageLoad(6, 1, 2)}
    assert set(stage_loads(B200, 16)) == {StageLoad(4, 0, 0), StageLoad(1, 1, 2)}
    assert StageLoad(6, 1, 2).units == 7


def test_the_busiest_stage_is_the_slowest():
    args = (61, 8, 4, H100, 1, 8.0)
    # a head dearer than a layer: the last stage (6 layers, the MTP module's and 2 heads)
    assert busiest_stage(*args, 1.0, 3.0, 0.5) == (7.0, 2.0, 1.0)
    # a cheap head: a middle stage of 8 layers
    assert busiest_stage(*args, 1.0, 0.1, 0.0) == (8.0, 0.0, 0.0)
    # no layout: the even split, with the MTP modules and their heads on the last stage
    assert busiest_stage(61, 8, 1, None, 1, 8.0, 1.0, 3.0, 0.5) == (9.0, 2.0, 1.0)
    with pytest.raises(LayoutError, match="different pp or vp"):
        busiest_stage(61, [8.0, 16.0], [4.0, 4.0], H100, 1, 8.0, 1.0, 1.0, 0.0)


@given(st.floats(0.01, 10.0), st.floats(0.0, 30.0), st.floats(0.0, 5.0), st.sampled_from([8, 16]))
def test_the_busiest_stage_is_the_most_expensive_one(per_layer, head, proj, pp):
    layout, vp = (H100, 4) if pp == 8 else (B200, 1)
    units, heads, mtp = busiest_stage(61, pp, vp, layout, 1, 8.0, per_layer, head, proj)
    costs = [s.units * per_layer + s.heads * head + s.mtp * proj for s in stage_loads(layout, pp)]
    assert units * per_layer + heads * head + mtp * proj == pytest.approx(max(costs), rel=1e-12)


IB = Hardware(gpu=CAT.gpu("h100"), gpus=1024, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
PLAN = Plans.of(tp=2, pp=8, vp=4, dp=64, ep=64, global_batch=8192, seq_len=4096)


def test_an_mtp_module_costs_a_layer_a_head_and_its_projection():
    even = training_step(DSV3, PLAN, IB, backend=NO_CONGESTION)
    mtp = replace(PLAN, mtp_layers=1)
    with_mtp = training_step(DSV3, mtp, IB, backend=NO_CONGESTION)
    c = layer_compute(DSV3, mtp, IB)
    assert c.mtp_proj[0] > 0 and layer_compute(DSV3, PLAN, IB).mtp_proj == 0.0
    per_mb = c.fwd[0] + c.bwd[0] + c.recompute[0] + c.logits[0] + c.mtp_proj[0]
    m = PLAN.microbatches[0]
    assert with_mtp.compute[0] - even.compute[0] == pytest.approx(m * per_mb, rel=1e-9)


def test_an_mtp_module_counts_in_the_model_flops_as_megatron_counts_it():
    """megatron/training/training.py, num_floating_point_operations (core_v0.14.0): one more
    layer of the last layer's kind (DeepSeek-V3's is a MoE layer), 3h + 2h^2 for its norms and
    projection, and one more pass through the output head; 6 FLOPs a weight a token."""
    m = CAT.model("deepseek-v3")
    pc, h, v, seq = count_params(m), m.hidden, m.vocab, 4096
    a = m.mla
    assert a is not None
    core = 6 * m.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim) * seq
    module = 6 * (pc.attention_per_layer + pc.moe_active_ffn_per_layer + 3 * h + 2 * h * h)
    module += core + 6 * h * v
    even = training_step(DSV3, PLAN, IB, backend=NO_CONGESTION)
    mtp = training_step(DSV3, replace(PLAN, mtp_layers=1), IB, backend=NO_CONGESTION)
    tokens = 8192 * seq
    assert mtp.model_flops[0] - even.model_flops[0] == pytest.approx(tokens * module, rel=1e-12)
    # a dense model's last layer is its average one
    dense = shape_of(CAT.model("llama3-70b"))
    assert dense.last_layer_proj_flops == dense.proj_flops


def test_a_layout_charges_its_busiest_stage():
    laid = replace(PLAN, mtp_layers=1, pipeline_layout=H100)
    st_ = training_step(DSV3, laid, IB, backend=NO_CONGESTION)
    c = layer_compute(DSV3, laid, IB)
    units, heads, mtp = (7.0, 2.0, 1.0)  # stage 7 on these kernels (checked below)
    costs = {
        s: s.units * (c.fwd[0] + c.bwd[0] + c.recompute[0]) + s.heads * c.logits[0]
        for s in stage_loads(H100, 8)
    }
    assert max(costs, key=costs.get) == StageLoad(6, 1, 2)
    want = (
        units * (c.fwd[0] + c.bwd[0] + c.recompute[0]) + heads * c.logits[0] + mtp * c.mtp_proj[0]
    )
    assert st_.compute[0] == pytest.approx(PLAN.microbatches[0] * want, rel=1e-9)
    with pytest.raises(WorkloadError, match="pipeline_layout: has 32 chunks"):
        training_step(
            DSV3,
            replace(laid, vp=np.array([2.0])),
            IB,
        )


def test_the_cli_takes_a_layout_and_refuses_one_that_does_not_fit():
    base = ["step", "examples/256-gpu-moe.yaml", "--json", "--set", "workload.model=deepseek-v3"]
    base += ["--set", "cluster.gpu=b200"]
    par = ["--set", "workload.parallel.tp=1", "--set", "workload.parallel.ep=8"]
    good = run(
        *base,
        *par,
        "--set",
        "workload.parallel.pp=16",
        "--set",
        "workload.mtp_layers=1",
        "--set",
        f"workload.parallel.pipeline_layout={B200}",
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)[0]["step_time_s"] > 0
    # the layout sets the stages: no warning that pp leaves them uneven, which an even split gets
    table = [a for a in base if a != "--json"]
    laid = [*par, "--set", "workload.parallel.pp=16", "--set", "workload.mtp_layers=1"]
    laid += ["--set", f"workload.parallel.pipeline_layout={B200}"]
    shown = run(*table, *laid)
    assert "uneven" not in shown.stderr
    assert f"tp 1 pp 16 dp 16 cp 1 ep 8, stages {B200}, 1 MTP" in " ".join(shown.stdout.split())
    even = run(*table, *par, "--set", "workload.parallel.pp=16")
    assert even.returncode == 0 and "stages will be uneven" in even.stderr
    bad = run(
        *base,
        *par,
        "--set",
        "workload.parallel.pp=16",
        "--set",
        f"workload.parallel.pipeline_layout={B200}",
    )
    assert bad.returncode == 2
    said = bad.stdout + bad.stderr
    assert "workload.parallel.pipeline_layout" in said
    assert "1 MTP modules m; workload.mtp_layers is 0" in said


def test_an_mtp_module_is_held_in_memory_on_the_last_stage():
    # one stage: the module's layer, projection, activations and logits all add
    flat = Plans.of(tp=8, pp=1, dp=128, ep=64, zero=1, global_batch=1024, seq_len=4096)
    base, with_mtp = memory(DSV3, flat, IB), memory(DSV3, replace(flat, mtp_layers=1), IB)
    h = DSV3.hidden
    dense = (DSV3.last_layer_params + 2 * h * h) / 8
    expert = DSV3.last_layer_expert_params / (8 * 64)
    states = (WEIGHT_BYTES + flat.grad_bytes) * (dense + expert)
    states += OPTIMIZER_BYTES * (dense / 128 + expert / 2)  # ZeRO-1 over dp, experts over dp/ep
    per_token = float(activation_bytes_per_token_layer(DSV3, 4096, 8, True, "selective", True))
    acts = per_token * 4096 + 4096 * DSV3.vocab / 8 * LOGITS_BYTES_PER_LOGIT
    assert with_mtp.total[0] - base.total[0] == pytest.approx(states + acts, rel=1e-9)
    # sixteen stages: the first holds sixteen micro-batches in flight, the last one: the
    # module does not make the last stage the busier, and the memory stays the first stage's
    deep = Plans.of(tp=1, pp=16, dp=128, ep=64, zero=1, global_batch=1024, seq_len=4096)
    assert memory(DSV3, replace(deep, mtp_layers=1), IB).total[0] == memory(DSV3, deep, IB).total[0]


def test_a_layout_sets_each_stage_s_memory():
    """Under a layout each stage holds its own layers and tables: B200's map puts the embedding
    and four layers on stage 0, which holds pp micro-batches in flight; the last stage holds one
    layer, the MTP module and two heads' logits for one."""
    plan = Plans.of(tp=1, pp=16, dp=128, ep=64, zero=1, global_batch=4096, seq_len=4096)
    laid = replace(plan, mtp_layers=1, pipeline_layout=B200)
    got = memory(DSV3, laid, IB)
    layer = (DSV3.params_total - DSV3.params_embedding - DSV3.params_expert) / DSV3.layers
    expert = DSV3.params_expert / DSV3.layers
    dense = 4 * layer + DSV3.vocab * DSV3.hidden  # four layers and the input embedding
    states = (WEIGHT_BYTES + plan.grad_bytes) * (dense + 4 * expert / 64)
    states += OPTIMIZER_BYTES * (dense / 128 + 4 * expert / 64 / 2)
    per_token = float(activation_bytes_per_token_layer(DSV3, 4096, 1, False, "selective", True))
    acts = 16 * 4 * per_token * 4096  # sixteen micro-batches of four layers in flight
    assert got.total[0] == pytest.approx(states + acts, rel=1e-9)
    assert got.activations[0] == pytest.approx(acts, rel=1e-12)
    # the even split's estimate holds 61 / 16 layers a stage: the layout's first stage more
    assert got.total[0] > memory(DSV3, replace(plan, mtp_layers=1), IB).total[0]
