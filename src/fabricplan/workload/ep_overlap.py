"""Expert-parallel all-to-alls hidden behind another micro-batch's compute (``ep_comm_overlap``).

Megatron-Core's batch-level overlap (core v0.14: ``--overlap-moe-expert-parallel-comm`` with
``--delay-wgrad-compute``, its combined 1F1B schedule) runs the forward of one micro-batch and
the backward of the one before it together, layer by layer, on two streams:

    communication:  combine (bwd)  | dispatch (fwd), dispatch (bwd)   | combine (fwd)
    compute:        attention fwd  | MLP bwd (+ wgrad), MLP fwd        | attention bwd (+ wgrad)

Each phase lasts as long as the longer of its two streams, so an all-to-all hides only behind
the compute of its own phase, never behind the whole layer. The middle phase is two: the
forward's dispatch beside the MLP backward (which needs only the combine before it), then the
backward's dispatch (which needs that MLP backward) beside the MLP forward (which needs the
forward's dispatch). DeepSeek-V3's DualPipe pairs a forward and a backward chunk the same way
(technical report, arXiv 2412.19437, Sec. 3.2.1).

Only a forward and a backward of different micro-batches pair up. Without pipelining the first
forward and the last backward run alone (``combined_1f1b_schedule_for_no_pipelining``); in an
interleaved pipeline (which the overlap requires when pp > 1) the first stage's warm-up
forwards and cool-down backwards do too: Megatron-Core starts it with (pp - 1) x 2 + (vp - 1)
x pp model chunks of forwards (``get_pp_rank_microbatches``, rank 0), 1 / vp of a micro-batch
each.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec


def merged_layer_exposed(
    a2a: ArrayLike,
    attn_fwd: ArrayLike,
    mlp_fwd: ArrayLike,
    attn_bwd: ArrayLike,
    mlp_bwd: ArrayLike,
    extra_bwd: ArrayLike = 0.0,
) -> np.ndarray:
    """All-to-all time left exposed in one layer of a merged forward/backward pair: ``a2a`` is
    one dispatch or combine (the four are alike: the same tokens go out and come back),
    ``extra_bwd`` the recomputed forward's own all-to-alls, run with the backward's dispatch.
    Never negative, never more than the all-to-alls themselves."""
    a, af, mf, ab, mb, x = (
        vec.floats(v) for v in (a2a, attn_fwd, mlp_fwd, attn_bwd, mlp_bwd, extra_bwd)
    )
    middle = vec.maximum(a, mb) + vec.maximum(a + x, mf)
    merged = vec.maximum(a, af) + middle + vec.maximum(a, ab)
    return merged - (af + mf + ab + mb)


def paired_microbatches(m: ArrayLike, pp: ArrayLike, vp: ArrayLike) -> np.ndarray:
    """Micro-batches (on the first stage, which waits longest) whose forward runs merged with
    another's backward: all but the first without pipelining; with an interleaved pipeline,
    all but the warm-up forwards (in micro-batches: ((pp - 1) x 2 + (vp - 1) x pp) / vp)."""
    m, pp, vp = (vec.floats(v) for v in (m, pp, vp))
    warm = vec.where(pp > 1, ((pp - 1) * 2 + (vp - 1) * pp) / vec.maximum(vp, 1.0), 1.0)
    return vec.maximum(m - vec.maximum(warm, 1.0), 0.0)


def hidden_per_step(
    a2a: ArrayLike,
    attn_fwd: ArrayLike,
    mlp_fwd: ArrayLike,
    attn_bwd: ArrayLike,
    mlp_bwd: ArrayLike,
    extra_bwd: ArrayLike,
    layers: ArrayLike,
    microbatches: ArrayLike,
    pp: ArrayLike,
    vp: ArrayLike,
) -> np.ndarray:
    """All-to-all seconds a step hides: in each paired micro-batch, every layer's dispatches
    and combines (4 x ``a2a`` + ``extra_bwd``) less what stays exposed."""
    a2a = vec.floats(a2a)
    exposed = merged_layer_exposed(a2a, attn_fwd, mlp_fwd, attn_bwd, mlp_bwd, extra_bwd)
    per_layer = 4.0 * a2a + vec.floats(extra_bwd) - exposed
    return vec.floats(layers) * paired_microbatches(microbatches, pp, vp) * per_layer
