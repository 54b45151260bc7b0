"""Data-parallel buckets priced one collective each, and selective recomputation with fused
attention (Megatron-Core's checkpointed core attention)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.attention import attention_rates
from fabricplan.workload.comm import collectives_s
from fabricplan.workload.memory import params_per_gpu
from fabricplan.workload.overlap import bucket_units
from fabricplan.workload.plan import WEIGHT_BYTES, matmul_flops
from fabricplan.workload.shapes import CAUSAL_FRACTION

CAT = default_catalog()
H100 = CAT.gpu("h100")


def _hw(gpus: int) -> Hardware:
    return Hardware(gpu=H100, gpus=gpus, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")


def test_bucket_units_follow_megatron_core_default_bucket():
    # max(40M, 1M x DP): 48M parameters at DP 48, 40M at DP 8
    units, size = bucket_units(np.array([480e6, 480e6]), np.array([48.0, 8.0]), True)
    assert size.tolist() == [48e6, 40e6]
    assert units.tolist() == [10.0, 12.0]
    # a model smaller than one bucket is one bucket of itself
    units, size = bucket_units(np.array([10e6]), np.array([48.0]), True)
    assert (units[0], size[0]) == (1.0, 10e6)
    # not overlapped: the whole buffer is one bucket
    units, size = bucket_units(np.array([480e6]), np.array([48.0]), False)
    assert (units[0], size[0]) == (1.0, 480e6)
    # nothing to synchronise (no experts): no collective
    units, size = bucket_units(np.array([0.0]), np.array([48.0]), True)
    assert (units[0], size[0]) == (0.0, 0.0)


def test_each_gradient_bucket_is_its_own_collective():
    # ZeRO-1 over 64 GPUs on 8 nodes: per step, n / 64M reduce-scatters of 64M FP32 gradients
    # and as many all-gathers of 64M BF16 weights, each priced at a bucket's size
    s = shape_of(CAT.model("llama3-8b"))
    p = Plans.of(tp=1, pp=1, dp=64, zero=1, seq_len=8192, sp=False, global_batch=64 * 4)
    hw = _hw(64)
    st_ = training_step(s, p, hw, backend=NO_CONGESTION)
    n = float(params_per_gpu(s, p)[0])
    bucket = 64e6
    one = [np.array([64.0]), np.array([1.0])]
    rs, ag = collectives_s(
        hw,
        [
            ("reduce_scatter", *one, np.array([bucket * p.grad_bytes]), None),
            ("all_gather", *one, np.array([bucket * WEIGHT_BYTES]), None),
        ],
        NO_CONGESTION,
    )
    assert st_.dp_comm_total[0] == pytest.approx(n / bucket * (rs[0] + ag[0]), rel=1e-9)
    # smaller collectives reach less of the link: dearer than one collective of everything
    whole = collectives_s(
        hw, [("reduce_scatter", *one, np.array([n * p.grad_bytes]), None)], NO_CONGESTION
    )[0]
    assert n / bucket * rs[0] > whole[0]


def test_selective_recomputation_reruns_the_fused_attention_forward():
    # one GPU, no communication: selective recomputation adds exactly one attention forward
    # per layer and micro-batch at the fused kernel's causal forward rate
    s = shape_of(CAT.model("llama3-8b"))
    seq, mbs = 8192, 2
    kw = dict(tp=1, pp=1, dp=1, seq_len=seq, sp=False, global_batch=mbs, flash=True)
    hw = _hw(8)
    none = training_step(s, Plans.of(recompute="none", **kw), hw, backend=NO_CONGESTION)
    sel = training_step(s, Plans.of(recompute="selective", **kw), hw, backend=NO_CONGESTION)
    fwd_rate, _ = attention_rates(H100, matmul_flops(H100, "bf16"), np.array([seq]), True)
    score = seq * s.score_flops_per_ctx * seq * CAUSAL_FRACTION / fwd_rate[0]
    assert sel.compute[0] - none.compute[0] == pytest.approx(mbs * s.layers * score, rel=1e-9)
