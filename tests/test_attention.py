"""Fused attention's kernel rates: the published table, interpolated, on the GPU's own clock."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.attention import attention_rates, tables
from fabricplan.workload.inference import serve

CAT = default_catalog()


def test_table_points_are_the_benchmark_scaled_to_the_gpus_sustained_rate():
    t = tables()["hopper"]
    h100 = CAT.gpu("h100")
    sustained = 700e12  # any sustained matmul rate: the table scales with it
    fwd, bwd = attention_rates(h100, sustained, np.array([4096.0]), causal=False)
    # FlashAttention-3 Figs. 5-6, cuDNN at 4k: 609 forward, 499 backward, of a 792.1 burst matmul
    assert fwd[0] == pytest.approx(609.0 / 792.1 * sustained)
    assert bwd[0] == pytest.approx(499.0 / 792.1 * sustained)
    fwd_c, bwd_c = attention_rates(h100, sustained, np.array([4096.0]), causal=True)
    assert fwd_c[0] == pytest.approx(518.0 / 792.1 * sustained)
    # the backward pass loses to the mask what the forward pass does at that length
    assert bwd_c[0] == pytest.approx(499.0 * 518.0 / 609.0 / 792.1 * sustained)
    assert t.source.startswith("FlashAttention-3")


# cuDNN's own H200 run (cuDNN frontend benchmark/benchmark_results.csv, cuDNN 9.1, clocks locked
# at 1,980 MHz, 16k tokens of 16 heads of 128): the causal backward pass, measured, by length
CUDNN_H200_CAUSAL_BWD = {4096: 444.0, 8192: 464.0, 16384: 498.0}


def test_assumed_causal_backward_is_within_7_percent_of_a_measured_one():
    # the Hopper table has no causal backward: it takes the forward pass's loss to the mask
    for seq, measured in CUDNN_H200_CAUSAL_BWD.items():
        _, bwd = attention_rates(CAT.gpu("h100"), 792.1e12, np.array([float(seq)]), True)
        assert bwd[0] / 1e12 == pytest.approx(measured, rel=0.07), seq
        assert bwd[0] / 1e12 < measured  # the later cuDNN is faster in every pass


def test_lengths_between_points_interpolate_in_log2_and_clip_at_the_ends():
    h100 = CAT.gpu("h100")
    fwd, _ = attention_rates(h100, 792.1e12, np.array([2048.0 * 2**0.5, 256.0, 131072.0]), False)
    assert fwd[0] == pytest.approx((617.0 + 609.0) / 2 * 1e12)
    assert fwd[1] == pytest.approx(574.0e12)  # below 1k: the 1k rate
    assert fwd[2] == pytest.approx(595.0e12)  # above 16k: the 16k rate


def test_gpus_without_a_table_keep_the_matmul_rate():
    a100 = CAT.gpu("a100")
    fwd, bwd = attention_rates(a100, 250e12, np.array([2048.0]), causal=True)
    assert fwd[0] == bwd[0] == 250e12


def test_other_head_sizes_take_their_own_rows():
    h100, burst = CAT.gpu("h100"), 792.1e12
    seq = np.array([4096.0])
    # Figs. 5-6 at 4k, cuDNN: head dim 64 forward 408, causal 363, backward 417
    fwd, bwd = attention_rates(h100, burst, seq, causal=False, head_dim=64)
    assert (fwd[0], bwd[0]) == pytest.approx((408.0e12, 417.0e12))
    fwd_c, bwd_c = attention_rates(h100, burst, seq, causal=True, head_dim=64)
    assert (fwd_c[0], bwd_c[0]) == pytest.approx((363.0e12, 417.0e12 * 363.0 / 408.0))
    # head dim 256: forward 581, causal 483; no published backward, so head dim 128's (499),
    # with the mask's loss at 256
    fwd, bwd = attention_rates(h100, burst, seq, causal=True, head_dim=256)
    assert (fwd[0], bwd[0]) == pytest.approx((483.0e12, 499.0e12 * 483.0 / 581.0))
    # between measured head sizes: linear in log2 of the head size; beyond them, held
    mid, _ = attention_rates(h100, burst, seq, causal=False, head_dim=64 * 2**0.5)
    assert mid[0] == pytest.approx((408.0 + 609.0) / 2 * 1e12)
    small, _ = attention_rates(h100, burst, seq, causal=False, head_dim=32)
    assert small[0] == pytest.approx(408.0e12)


def test_a_models_head_size_is_its_query_key_head():
    assert shape_of(CAT.model("llama3-70b")).head_dim == 128
    # multi-head latent attention: the query/key head is the no-position part plus the rotary
    mla = CAT.model("deepseek-v3").mla
    assert shape_of(CAT.model("deepseek-v3")).head_dim == (
        mla.qk_nope_head_dim + mla.qk_rope_head_dim
    )


def test_training_and_prefill_price_attention_at_the_models_head_size():
    # the same model with a head of 64 (whose kernel runs at two thirds of 128's rate) takes
    # longer: the step and the prompt's prefill both read the shape's head size
    s = shape_of(CAT.model("llama3-8b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=8, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=1, pp=1, dp=8, global_batch=8, seq_len=8192)

    def step_s(shape):
        return float(training_step(shape, p, hw, backend=NO_CONGESTION).compute[0])

    def prefill_s(shape):
        kw = dict(tp=8, pp=1, prompt=8192, output=128, batch=1, disaggregated=False)
        return serve(shape, hw, precision="bf16", backend=NO_CONGESTION, **kw).ttft

    narrow = replace(s, head_dim=64)
    assert step_s(narrow) > step_s(s)
    assert prefill_s(narrow) > prefill_s(s)


@given(st.floats(256, 1 << 20), st.booleans(), st.floats(16, 1024))
def test_attention_never_beats_the_matmul_it_is_measured_against(seq, causal, head_dim):
    fwd, bwd = attention_rates(CAT.gpu("h100"), 708e12, np.array([seq]), causal, head_dim)
    assert 0 < fwd[0] < 708e12 and 0 < bwd[0] < 708e12


def test_blackwell_rates_are_cudnns_gb200_run_with_the_mask_measured_in_both_passes():
    t = tables()["blackwell"]
    b200 = CAT.gpu("b200")
    sustained = 1456.3e12
    # cuDNN 9.27 on a GB200 (the B200's die), head dim 128, at 8k: causal 1,552 forward and
    # 1,297 backward, both measured with the mask; without it 1,701 and 1,434; all of the
    # GB200's 1,822 burst matmul, carried to the B200's sustained rate
    fwd, bwd = attention_rates(b200, sustained, np.array([8192.0]), causal=True)
    assert fwd[0] == pytest.approx(1552.0 / 1822.0 * sustained)
    assert bwd[0] == pytest.approx(1297.0 / 1822.0 * sustained)
    plain_f, plain_b = attention_rates(b200, sustained, np.array([8192.0]), causal=False)
    assert (plain_f[0], plain_b[0]) == pytest.approx(
        (1701.0 / 1822.0 * sustained, 1434.0 / 1822.0 * sustained)
    )
    # one head size measured: every head size takes its rates
    fwd64, bwd64 = attention_rates(b200, sustained, np.array([8192.0]), True, head_dim=64)
    assert (fwd64[0], bwd64[0]) == (fwd[0], bwd[0])
    # between lengths, log2-linear; beyond 16k, the 16k rates
    mid, _ = attention_rates(b200, sustained, np.array([4096.0 * 2**0.5]), causal=True)
    assert mid[0] == pytest.approx((1334.0 + 1552.0) / 2 / 1822.0 * sustained)
    far, far_b = attention_rates(b200, sustained, np.array([131072.0]), causal=True)
    assert (far[0], far_b[0]) == pytest.approx(
        (1608.0 / 1822.0 * sustained, 1271.0 / 1822.0 * sustained)
    )
    assert t.backward_causal is not None and tables()["hopper"].backward_causal is None


@given(st.floats(256, 1 << 20), st.booleans(), st.floats(16, 1024))
def test_blackwell_attention_never_beats_its_matmul(seq, causal, head_dim):
    fwd, bwd = attention_rates(CAT.gpu("b200"), 1456e12, np.array([seq]), causal, head_dim)
    assert 0 < fwd[0] < 1456e12 and 0 < bwd[0] < 1456e12
