"""Serving reads the weights its batch uses: a MoE model's decode step reads the experts its
tokens are routed to, not one token's active share; prefill is never shorter than reading the
weights once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware
from fabricplan.workload.inference import serve
from fabricplan.workload.plan import WEIGHT_BYTES, hbm_bytes_per_s
from fabricplan.workload.shapes import shape_of, touched_expert_share, weights_read_per_pass

CAT = default_catalog()
DSV3 = shape_of(CAT.model("deepseek-v3"))
DENSE = shape_of(CAT.model("llama3-70b"))
HW = Hardware(gpu=CAT.gpu("h100"), gpus=32, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")


def _serve(shape, batch, prompt=2048, tp=8, pp=4):
    kw = dict(tp=tp, pp=pp, prompt=prompt, output=512, batch=batch, disaggregated=False)
    return serve(shape, HW, precision="bf16", backend=NO_CONGESTION, **kw)


def test_one_token_touches_its_top_k_and_a_batch_the_expected_distinct_experts():
    # DeepSeek-V3: 8 of 256 routed experts a token
    assert DSV3.experts == 256 and DSV3.top_k == 8
    assert float(touched_expert_share(DSV3, 1)) == pytest.approx(8 / 256)
    # 32 tokens: each expert escapes all of them with probability (1 - 8/256)^32
    assert float(touched_expert_share(DSV3, 32)) == pytest.approx(1 - (248 / 256) ** 32)
    assert float(touched_expert_share(DSV3, 32)) == pytest.approx(0.638, abs=1e-3)
    assert float(touched_expert_share(DENSE, 32)) == 0.0


def test_one_token_reads_the_active_weights_and_a_large_batch_all_of_them():
    for s in (DSV3, DENSE):
        active = s.params_active - s.params_embedding
        assert float(weights_read_per_pass(s, 1)) == pytest.approx(active, rel=1e-12)
        everything = s.params_total - s.params_embedding
        assert float(weights_read_per_pass(s, 1e6)) == pytest.approx(everything, rel=1e-12)
    # a dense model reads the same whatever the batch
    assert float(weights_read_per_pass(DENSE, 64)) == float(weights_read_per_pass(DENSE, 1))


@given(st.integers(1, 4096), st.integers(1, 4096))
def test_more_tokens_never_read_fewer_weights(a, b):
    lo, hi = sorted((a, b))
    assert float(weights_read_per_pass(DSV3, lo)) <= float(weights_read_per_pass(DSV3, hi))
    assert 0.0 <= float(touched_expert_share(DSV3, hi)) <= 1.0


def test_a_moe_decode_step_is_never_shorter_than_reading_its_batchs_experts():
    hbm = hbm_bytes_per_s(HW.gpu)
    for batch in (1, 8, 32, 128):
        r = _serve(DSV3, batch)
        floor = float(weights_read_per_pass(DSV3, batch)) * WEIGHT_BYTES / 8 / hbm
        assert r.parts["decode_compute_s"] >= floor
    # at a batch of 32 the step reads 64 % of the experts: about 12x one token's share of
    # routed weights, so the step is several times the active-parameter bound
    one = _serve(DSV3, 1).parts["decode_compute_s"]
    assert _serve(DSV3, 32).parts["decode_compute_s"] > 5 * one


def test_prefill_is_never_shorter_than_reading_the_weights_once():
    hbm = hbm_bytes_per_s(HW.gpu)
    for shape in (DSV3, DENSE):
        for prompt in (16, 512, 8192):
            r = _serve(shape, 1, prompt=prompt)
            floor = float(weights_read_per_pass(shape, prompt)) * WEIGHT_BYTES / 8 / hbm
            assert r.parts["prefill_s"] >= floor
