"""Fused attention's kernel rates: the published table, interpolated, on the GPU's own clock."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.workload.attention import attention_rates, tables

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


@given(st.floats(256, 1 << 20), st.booleans())
def test_attention_never_beats_the_matmul_it_is_measured_against(seq, causal):
    fwd, bwd = attention_rates(CAT.gpu("h100"), 708e12, np.array([seq]), causal)
    assert 0 < fwd[0] < 708e12 and 0 < bwd[0] < 708e12
