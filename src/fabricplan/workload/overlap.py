"""Communication hidden behind compute: only as much as the framework's granularity allows, and
never for free.

A stream overlaps compute unit by unit: data-parallel gradient buckets as the backward pass
fills them, parameter buckets as the forward pass needs them, ZeRO-3 / FSDP parameter gathers
and gradient reductions one layer (one FSDP unit) ahead. Each unit's communication can hide
only behind the compute that runs at the same time, so with equal units (the model's layers
are equal) a stream of total time ``comm`` beside total compute ``window`` shows
``chain_exposed``: one unit whole (the first gather before any compute, or the last reduction
after all of it) and, of every other unit, what outlasts its share of the compute.

While communication runs beside compute its kernels hold SMs (NCCL: one thread block per
channel; Transformer Engine's userbuffers: a fixed number), and the compute beside them runs
on the rest (``sm_tax``). That is the mechanism modelled; contention for HBM is not (a ring
over one 400 Gb/s NIC reads and writes at most ~100 GB/s, about 3 % of an H100's HBM). As a
check on its size, not a fit: 16 channels take 12 % of an H100's 132 SMs and 15 % of an A100's
108, a compute slowdown of 14 % and 17 % while they run; Lee et al. (arXiv 2507.03114, 2025)
measured an average of 18.9 % (at most 40 %) for compute overlapped with collectives in GPT
and Llama training on 4 A100, H100, MI210 and MI250.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec

# Megatron-Core's default data-parallel bucket: max(40M, 1M x DP size) parameters
# (DistributedDataParallelConfig.bucket_size, megatron/core/distributed, core v0.7).
DDP_BUCKET_MIN_PARAMS = 40_000_000
DDP_BUCKET_PARAMS_PER_RANK = 1_000_000


def ddp_bucket_params(dp: ArrayLike) -> np.ndarray:
    """Parameters per data-parallel bucket: Megatron-Core's default, max(40M, 1M x DP size)
    (``DistributedDataParallelConfig.bucket_size``, megatron/core/distributed), so that larger
    DP groups get larger, less latency-bound buckets."""
    return vec.maximum(DDP_BUCKET_MIN_PARAMS, DDP_BUCKET_PARAMS_PER_RANK * vec.floats(dp))


def bucket_units(params: ArrayLike, dp: ArrayLike, bucketed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(buckets, parameters per bucket) of ``params`` parameters synchronised over a
    data-parallel group of ``dp`` ranks: Megatron-Core's default buckets when ``bucketed``
    (overlapped communication), else one bucket of everything, as Megatron-Core makes it when
    gradient reduction is not overlapped (``DistributedDataParallel.__init__``, core_r0.8.0).
    The bucket count is fractional: a smaller last bucket costs its share of one."""
    n = vec.floats(params)
    size = vec.minimum(ddp_bucket_params(dp), n) if bucketed else n
    units = vec.where(size > 0, n / vec.where(size > 0, size, 1.0), 0.0)
    return units, size


def chain_exposed(comm: ArrayLike, window: ArrayLike, unit_share: ArrayLike) -> np.ndarray:
    """Exposed time of a stream cut into equal units (``unit_share`` of it each) that overlaps
    equal units of compute one for one: the unit at the open end cannot hide, every other one
    shows what outlasts its unit of compute. The comm stream runs its units one after another,
    so the result is never less than ``comm`` minus ``window``."""
    comm, window, s = (vec.floats(x) for x in (comm, window, unit_share))
    return s * comm + (1.0 - s) * vec.maximum(comm - window, 0.0)


def sm_tax(comm: ArrayLike, compute: ArrayLike, sm_share: ArrayLike) -> np.ndarray:
    """Extra compute time while communication kernels hold ``sm_share`` of the SMs for ``comm``
    seconds beside ``compute`` seconds of work: the work runs on the other SMs while they run,
    losing ``sm_share`` of each such second, and stretches at most to ``compute / (1 -
    sm_share)`` when the communication outlasts it."""
    comm, compute, s = (vec.floats(x) for x in (comm, compute, sm_share))
    return s * vec.minimum(comm, compute / (1.0 - s))


def zero3_exposed(
    gather: ArrayLike,
    reduce: ArrayLike,
    root_gather: ArrayLike,
    root_reduce: ArrayLike,
    fwd_window: ArrayLike,
    bwd_window: ArrayLike,
    head_bwd: ArrayLike,
    layers: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Exposed and hidden ZeRO-3 / FSDP communication of one micro-batch on one stage.

    Units are as FSDP wraps a transformer: one per layer (``gather``, ``reduce``: one layer's
    all-gather and reduce-scatter; ``*_window``: one layer's compute-stream time in each pass),
    and the root (embedding and output head: ``root_*``). PyTorch FSDP's defaults
    (torch/distributed/fsdp, 2.x):
    - forward: each layer's all-gather is issued one layer ahead (implicit prefetch from the
      all-gather stream; ``forward_prefetch`` only moves the issue on the CPU;
      ``limit_all_gathers`` keeps two in flight). The root's gather and the first layer's
      cannot overlap anything (docs, notes/fsdp "FSDP Prefetch Nuances");
    - backward (``BackwardPrefetch.BACKWARD_PRE``): the next layer's all-gather is issued
      before the current layer's gradient computation, and the current layer's reduce-scatter
      after it. All of FSDP's collectives share one NCCL stream per device (``BackwardPrefetch``
      docstring), in the order they are issued, so beside each layer's backward run the
      previous layer's reduce-scatter and the next layer's gather: the gather alone beside the
      last layer (nothing has been reduced yet), the reduction alone beside the first (nothing
      is left to gather). The root keeps its parameters from the forward
      (``_post_forward_reshard``) and its pre-backward prefetches the last layer's gather beside
      the head's backward (``head_bwd``); the first layer's reduction and the root's run after
      all compute.

    Returns (exposed, hidden) seconds per micro-batch.
    """
    a, r, a0, r0, f, b, hb, n = (
        vec.floats(x)
        for x in (
            gather,
            reduce,
            root_gather,
            root_reduce,
            fwd_window,
            bwd_window,
            head_bwd,
            layers,
        )
    )
    n = vec.maximum(n, 1.0)
    fwd = a0 + chain_exposed(n * a, n * f, 1.0 / n)
    steps = n - 1.0  # hand-overs from one layer's backward to the next
    bwd = (
        vec.maximum(a - hb, 0.0)
        + vec.minimum(steps, 1.0) * (vec.maximum(a - b, 0.0) + vec.maximum(r - b, 0.0))
        + vec.maximum(steps - 1.0, 0.0) * vec.maximum(a + r - b, 0.0)
        + r
        + r0
    )
    total = a0 + r0 + n * (2 * a + r)
    exposed = fwd + bwd
    return exposed, total - exposed


def data_parallel_exposed(
    grad: ArrayLike,
    param: ArrayLike,
    bucket_share: ArrayLike,
    zero3: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    fwd_window: ArrayLike,
    bwd_window: ArrayLike,
    head_bwd: ArrayLike,
    layers: ArrayLike,
    microbatches: ArrayLike,
    overlap: bool,
) -> np.ndarray:
    """Exposed data-parallel time per step. Once per step, bucket by bucket (``bucket_share``
    of the stream each): the gradient reduction (``grad``) behind the last backward pass, the
    parameter gather (``param``) behind the next forward; the last gradient bucket is filled
    only when the backward pass ends, and the first parameter bucket is needed before the
    forward starts. ZeRO-3's per-layer traffic (``zero3``: a layer's gather and reduction, the
    root's gather and reduction) in every micro-batch, see ``zero3_exposed``. ``*_window`` is
    one layer's compute-stream time in each pass. Without ``overlap`` everything is exposed."""
    z3_exposed, z3_hidden = zero3_exposed(*zero3, fwd_window, bwd_window, head_bwd, layers)
    m, n = vec.floats(microbatches), vec.floats(layers)
    if not overlap:
        return vec.floats(grad) + param + m * (z3_exposed + z3_hidden)
    once = chain_exposed(grad, n * np.asarray(bwd_window), bucket_share) + chain_exposed(
        param, n * np.asarray(fwd_window), bucket_share
    )
    return once + m * z3_exposed
