"""One transformer layer's compute for one micro-batch on one GPU, pass by pass: the roofline
the step model's compute stream is made of.

The projections are GEMMs priced by shape (:mod:`.gemm`: the main loop at the sustained
matmul rate, then the output store); fused attention runs at its kernels' published rates by
head size, length and pass (:mod:`.attention`), unfused attention as batched matmuls with its
softmax's traffic; the memory-bound ops (norms, residuals, activation functions, an unfused
softmax) move their bytes at achievable HBM bandwidth; an FP8 layer adds the casts of its
GEMMs' operands. The last pipeline stage also runs the output head and the loss over the
vocabulary, priced here per micro-batch. What the step model does with these (recomputation,
overlap, the pipeline) is :mod:`.training`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricplan.workload import vec
from fabricplan.workload.attention import attention_rates
from fabricplan.workload.gemm import (
    OUT_BYTES,
    WGRAD_FUSED_BYTES,
    fp8_cast_bytes,
    fp8_current_cast_bytes,
    gemm_seconds,
    store_bytes_per_s,
)
from fabricplan.workload.moe_permute import permutation_elems
from fabricplan.workload.plan import (
    Hardware,
    Plans,
    dispatch_on,
    hbm_bytes_per_s,
    matmul_flops,
    runs_fp8,
)
from fabricplan.workload.recompute import DEFAULT_RECOMPUTE_MODULES, rerun
from fabricplan.workload.shapes import (
    ACT_BYTES,
    CAUSAL_FRACTION,
    CROSS_ENTROPY_BYTES_PER_LOGIT,
    NORM_RESIDUAL_ELEMS_PER_H,
    SOFTMAX_ELEMS_PER_SCORE,
    Shape,
    gemm_outputs_per_token,
    row_parallel_inputs_per_token,
)

# The backward pass of a matmul computes the input and the weight gradients: twice the forward
# FLOPs (Narayanan et al. SC'21, Sec. 5.1: forward + backward = 3x the forward).
BACKWARD_PER_FORWARD = 2
PASSES_FWD_BWD = 1 + BACKWARD_PER_FORWARD
# FlashAttention-2 (Dao 2023, Sec. 3.1.1): the backward pass does 2.5x the forward's attention
# matmul FLOPs, not 2x, because it recomputes the scores.
FLASH_BACKWARD_FACTOR = 2.5


@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one layer's compute, one micro-batch on one GPU, per plan (shape (N,))."""

    fwd: np.ndarray  # the forward pass
    bwd: np.ndarray  # the backward pass
    recompute: np.ndarray  # what the backward pass runs of the forward again
    score: np.ndarray  # the attention kernel's forward, inside fwd
    score_bwd: np.ndarray  # its backward, inside bwd
    # the attention part's share of fwd and bwd (its projections, scores, first norm and
    # softmax): where expert all-to-alls overlap a layer part by part; 0 without that overlap
    fwd_attn: np.ndarray | float
    bwd_attn: np.ndarray | float
    logits: np.ndarray  # the last stage's output head and loss, all passes
    # an MTP module's projection of two hidden states to one (2h -> h), all passes; 0 without
    # MTP modules (see pipeline_layout)
    mtp_proj: np.ndarray | float = 0.0
    # of recompute, the attention part's (full: fwd_attn of it): where expert all-to-alls
    # overlap the recomputed forward
    rec_attn: np.ndarray | float = 0.0


def layer_compute(s: Shape, p: Plans, hw: Hardware) -> LayerCompute:
    """One layer's compute for every plan in ``p`` for model ``s`` on ``hw``."""
    # projections in FP8 when asked; attention stays in BF16
    peak_proj, peak_attn = matmul_flops(hw.gpu, p.precision), matmul_flops(hw.gpu, "bf16")
    hbm = hbm_bytes_per_s(hw.gpu)
    h = float(s.hidden)
    tokens = p.tokens_per_micro_batch
    ctx = p.seq_len * (CAUSAL_FRACTION if p.flash else 1.0)
    sp_div = p.sp_split

    # the projections' GEMMs, each storing its output after its main loop (see .gemm);
    # column-parallel GEMMs split their outputs by TP, row-parallel ones their inner
    # dimension, so they store the full width
    fwd_out, dgrad_out = gemm_outputs_per_token(s, p.tp)
    # fused, the weight-gradient GEMM reads and writes the main gradient in its epilogue: FP32
    # (WGRAD_FUSED_BYTES), or BF16 when it is kept in BF16 (twice its 2 bytes)
    fused = 2 * p.grad_bytes if p.grad_reduce_bf16 else WGRAD_FUSED_BYTES
    wgrad_bytes = fused if p.grad_accum_fusion else OUT_BYTES
    store = store_bytes_per_s(hw.gpu.arch, hbm)
    proj_flops = tokens * s.proj_flops / p.tp
    proj = gemm_seconds(proj_flops, tokens * fwd_out, peak_proj, store)
    proj_bwd = gemm_seconds(
        BACKWARD_PER_FORWARD * proj_flops, tokens * dgrad_out, peak_proj, store
    ) + gemm_seconds(0.0, s.proj_flops / 2 / p.tp, peak_proj, store, wgrad_bytes)
    attn_flops = tokens * s.score_flops_per_ctx * ctx / p.tp
    if p.flash:  # a fused kernel's own rates, by head size, length and pass (causal models)
        attn_fwd, attn_bwd = attention_rates(
            hw.gpu, peak_attn, p.seq_len, causal=True, head_dim=s.head_dim
        )
        score = attn_flops / attn_fwd
        score_bwd = FLASH_BACKWARD_FACTOR * attn_flops / attn_bwd
    else:  # batched matmuls at the matmul rate; the softmax's traffic is counted below
        score = attn_flops / peak_attn
        score_bwd = BACKWARD_PER_FORWARD * score
    norm_elems = NORM_RESIDUAL_ELEMS_PER_H * h / sp_div
    softmax_elems = 0.0 if p.flash else SOFTMAX_ELEMS_PER_SCORE * s.heads * p.seq_len / p.tp
    mem = tokens * ACT_BYTES * (norm_elems + s.ffn_act_elems / p.tp + softmax_elems) / hbm
    softmax_mem = tokens * ACT_BYTES * softmax_elems / hbm
    fwd = proj + score + mem
    bwd = proj_bwd + BACKWARD_PER_FORWARD * mem + score_bwd
    perm_fwd: np.ndarray | float = 0.0
    if s.experts:  # the MoE layers' token permutation, averaged over the layers as the rest
        perm_fwd, perm_bwd = permutation_elems(s, p.ep, dispatch_on(hw, p.ep_dispatch))
        perm = tokens / sp_div * ACT_BYTES * s.moe_layers / s.layers / hbm
        fwd = fwd + perm * perm_fwd
        bwd = bwd + perm * perm_bwd
    fwd_attn = bwd_attn = 0.0
    if p.ep_comm_overlap:
        attn_share = s.attn_proj_flops / s.proj_flops
        mem_attn = tokens * ACT_BYTES * (norm_elems / 2 + softmax_elems) / hbm
        fwd_attn = (attn_share * proj + score + mem_attn) / fwd
        bwd_attn = (attn_share * proj_bwd + score_bwd + BACKWARD_PER_FORWARD * mem_attn) / bwd
    if runs_fp8(hw.gpu, p.precision):  # Transformer Engine casts FP8 GEMMs' operands (.gemm)
        # the row-parallel GEMMs' inputs (proj, FC2), every output, the two layer norms' outputs
        # (QKV's and FC1's inputs)
        rows, norms = row_parallel_inputs_per_token(s, p.tp), 2 * h
        if p.fp8_recipe == "current":
            attn_out = s.attn_out_flops / (2 * h) / p.tp
            cast_fwd, cast_bwd = fp8_current_cast_bytes(
                attn_out, rows - attn_out, fwd_out, norms / sp_div
            )
        else:
            cast_fwd, cast_bwd = fp8_cast_bytes(rows, fwd_out, norms / sp_div, norms)
        fwd = fwd + tokens * cast_fwd / hbm
        bwd = bwd + tokens * cast_bwd / hbm
    if p.recompute == "full":
        recompute = fwd
        rec_attn = fwd_attn * fwd
    elif p.recompute == "selective":
        # the core attention (scores, softmax, dropout, AV; Korthikanti et al. 2022, Sec. 5) runs
        # again in the backward pass; fused, that is the attention kernel's forward: Megatron-Core
        # checkpoints it whenever recomputation is selective (core_r0.8.0,
        # megatron/core/transformer/attention.py, Attention.__init__: checkpoint_core_attention =
        # recompute_granularity == 'selective'; forward: _checkpointed_attention_forward), or
        # the modules recompute_modules names (recompute)
        recompute = rec_attn = score + softmax_mem
        if p.recompute_modules != DEFAULT_RECOMPUTE_MODULES:
            again = rerun(
                s,
                p.recompute_modules,
                tokens,
                p.tp,
                sp_div,
                recompute,
                perm_fwd,
                peak_proj,
                hbm,
            )
            recompute, rec_attn = again.seconds, again.attention
    else:
        recompute = rec_attn = vec.full(fwd, 0.0)
    # last stage: the output head, then the loss over the vocabulary, memory-bound
    # (forward stores the logits, the input gradient h per token, the weight gradient h x V)
    head_flops = PASSES_FWD_BWD * tokens * s.logits_flops / p.tp
    logits = (
        gemm_seconds(head_flops, tokens * (s.vocab / p.tp + h), peak_proj, store)
        + gemm_seconds(0.0, h * s.vocab / p.tp, peak_proj, store, wgrad_bytes)
        + tokens * s.vocab / p.tp * CROSS_ENTROPY_BYTES_PER_LOGIT / hbm
    )
    mtp_proj = 0.0
    if p.mtp_layers:  # column-parallel over TP, its output stored (DeepSeek-V3's eh_proj)
        mtp_proj = gemm_seconds(
            PASSES_FWD_BWD * tokens * 4 * h * h / p.tp, tokens * h / p.tp, peak_proj, store
        )
    return LayerCompute(
        fwd, bwd, recompute, score, score_bwd, fwd_attn, bwd_attn, logits, mtp_proj, rec_attn
    )
