"""The MoE layers' token permutation: its bytes by dispatcher and experts per GPU (the copies
Megatron-Core's token dispatchers make), and exactly those bytes over HBM in a layer's time."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.workload import Hardware, Plans
from fabricplan.workload.layer_compute import layer_compute
from fabricplan.workload.moe_permute import (
    PERMUTE_ELEMS_PER_COPY_BWD,
    PERMUTE_ELEMS_PER_COPY_FWD,
    PERMUTE_ELEMS_PER_TOKEN,
    SORT_ELEMS_PER_COPY,
    permutation_elems,
)
from fabricplan.workload.plan import hbm_bytes_per_s
from fabricplan.workload.shapes import ACT_BYTES, shape_of

CAT = default_catalog()
DSV3 = shape_of(CAT.model("deepseek-v3"))
MIXTRAL = shape_of(CAT.model("mixtral-8x7b"))
IB = Hardware(gpu=CAT.gpu("h100"), gpus=256, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")


def test_the_copies_each_dispatcher_makes():
    h = 7168.0
    # DeepSeek-V3 (top 8 of 256) over EP 8: 32 experts a GPU, so the all-to-all dispatcher also
    # sorts the copies by local expert and back, forward and backward
    fwd, bwd = permutation_elems(DSV3, 8, "alltoall")
    assert fwd == ((3 + 4) * 8 + 1) * h and bwd == ((4 + 4) * 8 + 1) * h
    # one expert a GPU (EP 256): nothing to sort
    assert permutation_elems(DSV3, 256, "alltoall") == ((3 * 8 + 1) * h, (4 * 8 + 1) * h)
    # the hierarchical dispatcher permutes its received tokens once, with no sorts
    assert permutation_elems(DSV3, 8, "hierarchical") == ((3 * 8 + 1) * h, (4 * 8 + 1) * h)
    assert permutation_elems(shape_of(CAT.model("llama3-8b")), 8, "alltoall") == (0.0, 0.0)


@given(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256]), st.booleans())
def test_the_backward_moves_more_and_sorts_only_add(ep, hierarchical):
    dispatch = "hierarchical" if hierarchical else "alltoall"
    fwd, bwd = permutation_elems(DSV3, ep, dispatch)
    k, h = DSV3.top_k, DSV3.hidden
    least = (PERMUTE_ELEMS_PER_COPY_FWD * k + PERMUTE_ELEMS_PER_TOKEN) * h
    assert least <= fwd <= least + SORT_ELEMS_PER_COPY * k * h
    assert bwd - fwd == (PERMUTE_ELEMS_PER_COPY_BWD - PERMUTE_ELEMS_PER_COPY_FWD) * k * h


def test_a_layer_spends_exactly_the_sorts_bytes_over_hbm():
    """The two dispatchers' layers differ by the sorts alone: their bytes, the tokens a GPU
    holds (sequence parallelism splits them by TP), averaged over the MoE share of layers."""
    p = Plans.of(tp=2, pp=1, dp=128, ep=8, global_batch=1024, seq_len=4096)
    a2a = layer_compute(DSV3, p, IB)
    flex = layer_compute(DSV3, replace(p, ep_dispatch="hierarchical"), IB)
    sorts = SORT_ELEMS_PER_COPY * DSV3.top_k * DSV3.hidden
    per_token = ACT_BYTES * sorts * DSV3.moe_layers / DSV3.layers / hbm_bytes_per_s(IB.gpu)
    want = 4096 / 2 * per_token
    assert a2a.fwd[0] - flex.fwd[0] == pytest.approx(want, rel=1e-9)
    assert a2a.bwd[0] - flex.bwd[0] == pytest.approx(want, rel=1e-9)
    assert a2a.score[0] == flex.score[0]


def test_mixtral_over_eight_gpus_has_nothing_to_sort():
    p = Plans.of(tp=1, pp=1, dp=256, ep=8, global_batch=1024, seq_len=4096)
    a2a = layer_compute(MIXTRAL, p, IB)
    flex = layer_compute(MIXTRAL, replace(p, ep_dispatch="hierarchical"), IB)
    assert a2a.fwd[0] == flex.fwd[0] and a2a.bwd[0] == flex.bwd[0]
