"""One layer's compute (workload/layer_compute.py): its passes against their analytic parts."""

import dataclasses

import numpy as np
import pytest

from fabricplan.catalog import default_catalog
from fabricplan.workload import Hardware, Plans, shape_of
from fabricplan.workload.gemm import gemm_seconds, store_bytes_per_s
from fabricplan.workload.layer_compute import (
    BACKWARD_PER_FORWARD,
    FLASH_BACKWARD_FACTOR,
    layer_compute,
)
from fabricplan.workload.plan import hbm_bytes_per_s, matmul_flops

CAT = default_catalog()
HW = Hardware(gpu=CAT.gpu("h100"), gpus=64, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
S = shape_of(CAT.model("llama3-8b"))


def _plans(**flags: object) -> Plans:
    one = np.ones(4)
    return Plans.of(
        tp=np.array([1, 2, 4, 8]),
        pp=one,
        dp=np.array([64, 32, 16, 8]),
        zero=one,
        micro_batch=one,
        global_batch=np.full(4, 64.0),
        seq_len=np.full(4, 8192.0),
        sp=np.array([False, True, True, True]),
        **flags,
    )


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_recomputation_reruns_what_it_names(recompute):
    c = layer_compute(S, _plans(recompute=recompute), HW)
    want = {"none": 0.0 * c.fwd, "selective": c.score, "full": c.fwd}[recompute]
    np.testing.assert_array_equal(c.recompute, want)


def test_fused_attention_backward_is_its_flops_at_the_backward_rate():
    c = layer_compute(S, _plans(), HW)
    # the passes hold their attention kernels, and the backward does 2.5x the forward's work
    assert np.all(c.fwd > c.score) and np.all(c.bwd > c.score_bwd)
    assert np.all(c.score_bwd > FLASH_BACKWARD_FACTOR * c.score * 0.999)
    # TP splits the heads: a quarter of the attention at TP 4 that TP 1 does
    assert c.score[2] == pytest.approx(c.score[0] / 4)


def test_unfused_attention_runs_at_the_matmul_rate_and_twice_back():
    c = layer_compute(S, _plans(flash=False), HW)
    np.testing.assert_allclose(c.score_bwd, BACKWARD_PER_FORWARD * c.score)
    tokens = 8192.0
    flops = tokens * S.score_flops_per_ctx * 8192.0 / np.array([1, 2, 4, 8])
    np.testing.assert_allclose(c.score, flops / matmul_flops(HW.gpu, "bf16"))


def test_the_output_head_is_its_gemms_and_the_loss_bytes():
    p = _plans()
    c = layer_compute(S, p, HW)
    hbm = hbm_bytes_per_s(HW.gpu)
    store, peak = store_bytes_per_s(HW.gpu.arch, hbm), matmul_flops(HW.gpu, "bf16")
    tp, h, v, tokens = p.tp, float(S.hidden), S.vocab, 8192.0
    gemms = gemm_seconds(3 * tokens * S.logits_flops / tp, tokens * (v / tp + h), peak, store)
    wgrad = gemm_seconds(0.0, h * v / tp, peak, store, 8.0)  # FP32 main gradient, fused
    assert np.all(c.logits > gemms + wgrad)  # and the cross-entropy's bytes
    # the loss's bytes are the rest, by the logit: 52 bytes each
    np.testing.assert_allclose(c.logits - gemms - wgrad, tokens * v / tp * 52.0 / hbm)


def test_fp8_adds_casts_and_runs_the_gemms_faster():
    bf16 = layer_compute(S, _plans(), HW)
    fp8 = layer_compute(S, _plans(precision="fp8"), HW)
    assert np.all(fp8.fwd < bf16.fwd) and np.all(fp8.bwd < bf16.bwd)
    # attention stays in BF16
    np.testing.assert_array_equal(fp8.score, bf16.score)


def test_the_ep_overlap_shares_are_parts_of_the_passes():
    moe = shape_of(CAT.model("mixtral-8x7b"))
    p = dataclasses.replace(_plans(ep_comm_overlap=True), ep=np.array([8, 4, 2, 1]))
    c = layer_compute(moe, p, HW)
    assert np.all((0 < c.fwd_attn) & (c.fwd_attn < 1)) and np.all(
        (0 < c.bwd_attn) & (c.bwd_attn < 1)
    )
    assert layer_compute(moe, _plans(), HW).fwd_attn == 0.0
