"""What the step-model benchmarks share: the 512-GPU example's model and hardware, and random
plans over it (``step.py``, ``plan.py``)."""

from __future__ import annotations

import numpy as np

from fabricplan.catalog import default_catalog
from fabricplan.workload import Hardware, Plans, shape_of
from fabricplan.workload.shapes import Shape


def llama70b_on_512_h100() -> tuple[Shape, Hardware]:
    """Llama 3 70B on 512 H100 (8 GPUs and 8 NICs a node), RoCE 400G at default quality."""
    cat = default_catalog()
    hw = Hardware(
        gpu=cat.gpu("h100"),
        gpus=512,
        gpus_per_node=8,
        nics_per_node=8,
        fabric="roce-400g",
        roce_quality="default",
    )
    return shape_of(cat.model("llama3-70b")), hw


def random_plans(n: int, gpus: int, seed: int = 0) -> Plans:
    """``n`` plans with TP, PP, micro-batch, sequence and ZeRO stage drawn at random (the rest
    of ``gpus`` data-parallel, 16 micro-batches a step, full recomputation)."""
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8, 16], n)
    mb = rng.choice([1, 2, 4], n)
    dp = gpus // (tp * pp)
    return Plans.of(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=mb,
        global_batch=dp * mb * 16,
        seq_len=rng.choice([2048, 4096, 8192], n),
        zero=rng.integers(0, 4, n),
        sp=tp > 1,
        recompute="full",
    )
