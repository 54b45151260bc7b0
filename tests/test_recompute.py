"""Selective recomputation by module (Megatron-Core's recompute_modules): the model's parts it
reruns, priced as the forward prices them, the all-to-alls a recomputed MoE layer sends again,
the K/V exchange only a recomputed core attention repeats, and the scenario's checks."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, training_step
from fabricplan.workload.gemm import gemm_seconds, store_bytes_per_s
from fabricplan.workload.layer_compute import layer_compute
from fabricplan.workload.plan import hbm_bytes_per_s, matmul_flops
from fabricplan.workload.recompute import (
    LAYERNORM_ELEMS_PER_H,
    RECOMPUTE_MODULES,
    rerun,
)
from fabricplan.workload.shapes import ACT_BYTES, shape_of
from test_cli import run

CAT = default_catalog()
DSV3 = shape_of(CAT.model("deepseek-v3"))
MIXTRAL = shape_of(CAT.model("mixtral-8x7b"))
LLAMA = shape_of(CAT.model("llama3-8b"))
H100 = CAT.gpu("h100")
HBM = hbm_bytes_per_s(H100)
PEAK = matmul_flops(H100, "bf16")
STORE = store_bytes_per_s(H100.arch, HBM)


@pytest.mark.parametrize("s", [DSV3, MIXTRAL, LLAMA], ids=lambda s: s.name)
def test_the_ffn_splits_add_up(s):
    ffn = s.proj_flops - s.attn_proj_flops
    assert s.dense_ffn_flops + s.shared_ffn_flops + s.routed_ffn_flops == pytest.approx(ffn)
    assert 0 <= s.dense_act_elems + s.routed_act_elems <= s.ffn_act_elems


def test_deepseek_v3_s_mla_up_projections():
    # q: 1,536 -> 128 x (128 + 64); k/v: 512 -> 128 x (128 + 128); 2 FLOPs a weight
    assert DSV3.mla_up_flops == 2 * 128 * (1536 * 192 + 512 * 256)
    assert LLAMA.mla_up_flops == 0


def _rerun(s, modules, core=1e-3, permute=0.0):
    return rerun(s, modules, 4096.0, 2.0, 2.0, core, permute, PEAK, HBM)


def test_each_module_is_priced_as_the_forward_prices_it():
    core = 1e-3
    assert _rerun(DSV3, ("core_attn",), core).seconds == core
    up = _rerun(DSV3, ("mla_up_proj",), core)
    assert up.seconds == up.attention == gemm_seconds(4096 * DSV3.mla_up_flops / 2, 0, PEAK, STORE)
    norms = _rerun(DSV3, ("layernorm",), core)
    want = 4096 * ACT_BYTES * LAYERNORM_ELEMS_PER_H * DSV3.hidden / 2 / HBM
    assert norms.seconds == pytest.approx(want) and norms.attention == pytest.approx(want / 2)
    act = _rerun(DSV3, ("moe_act",), core)
    assert act.seconds == pytest.approx(4096 * ACT_BYTES * DSV3.routed_act_elems / 2 / HBM)
    assert act.attention == 0
    # the whole MoE layer holds its activation and shared experts: no double count with them
    moe = _rerun(DSV3, ("moe",), core, permute=57 * 7168)
    with_parts = _rerun(DSV3, ("moe", "moe_act", "shared_experts"), core, permute=57 * 7168)
    assert moe.seconds == with_parts.seconds > 0


@given(st.sets(st.sampled_from(RECOMPUTE_MODULES), min_size=1), st.sampled_from(RECOMPUTE_MODULES))
def test_another_module_never_costs_less(modules, more):
    base = _rerun(DSV3, tuple(sorted(modules))).seconds
    assert _rerun(DSV3, tuple(sorted(modules | {more}))).seconds >= base >= 0


IB = Hardware(gpu=H100, gpus=256, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")


def _plan(**kw):
    return Plans.of(tp=1, pp=1, dp=256, ep=8, global_batch=1024, seq_len=4096, **kw)


def test_a_recomputed_moe_layer_sends_its_all_to_alls_again():
    p = _plan(recompute="selective")
    core = training_step(MIXTRAL, p, IB, backend=NO_CONGESTION)
    moe = training_step(
        MIXTRAL, replace(p, recompute_modules=("core_attn", "moe")), IB, backend=NO_CONGESTION
    )
    # forward and backward each dispatch and combine once; the rerun forward once more
    assert moe.ep_comm_total[0] == pytest.approx(1.5 * core.ep_comm_total[0], rel=1e-12)
    assert moe.compute[0] > core.compute[0]


def test_only_a_recomputed_core_attention_repeats_the_kv_exchange():
    p = Plans.of(tp=1, pp=1, dp=32, cp=8, global_batch=32, seq_len=65536, recompute="selective")
    core = training_step(LLAMA, p, IB, backend=NO_CONGESTION)
    norms = training_step(
        LLAMA, replace(p, recompute_modules=("layernorm",)), IB, backend=NO_CONGESTION
    )
    # p2p ring: forward 1 block exchange, backward 2, the rerun forward 1 more
    assert norms.cp_comm_total[0] == pytest.approx(core.cp_comm_total[0] * 3 / 4, rel=1e-12)


def test_a_layer_reruns_what_its_modules_name():
    p = _plan(recompute="selective")
    c = layer_compute(DSV3, replace(p, recompute_modules=("mla_up_proj", "mlp")), IB)
    default = layer_compute(DSV3, p, IB)
    assert c.recompute[0] != default.recompute[0] and c.fwd[0] == default.fwd[0]
    assert default.rec_attn[0] == default.recompute[0]


BASE = ["step", "examples/256-gpu-moe.yaml", "--json"]


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        (
            ["workload.recompute=full", "workload.recompute_modules=[moe]"],
            "needs recompute: selective",
        ),
        (["workload.recompute_modules=[mla_up_proj]"], "mla_up_proj needs multi-latent attention"),
        (["workload.recompute_modules=[shared_experts]"], "shared_experts needs shared experts"),
        (["workload.recompute_modules=[moe, moe]"], "names a module twice"),
        (["workload.recompute_modules=[attention]"], "workload.recompute_modules"),
    ],
)
def test_the_scenario_refuses_modules_that_do_not_fit(sets, says):
    args = [a for kv in sets for a in ("--set", kv)]
    proc = run(*BASE, *args)
    assert proc.returncode == 2
    assert says in proc.stdout + proc.stderr


def test_the_cli_prices_a_module_list():
    core = run(*BASE)
    moe = run(*BASE, "--set", "workload.recompute_modules=[core_attn, moe]")
    assert core.returncode == moe.returncode == 0
    t0, t1 = (json.loads(x.stdout)[0]["step_time_s"] for x in (core, moe))
    assert t1 > t0
