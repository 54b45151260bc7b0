"""Selective recomputation by module: what the backward pass runs of a layer's forward again.

Megatron-Core (core_v0.14.0, TransformerConfig.recompute_modules, used with
``recompute_granularity = "selective"``; default ``["core_attn"]``) checkpoints the modules it
is given and reruns their forward in the backward pass:
- ``core_attn``: the core attention (scores, softmax, AV: the fused kernel's forward);
- ``mla_up_proj``: MLA's q and k/v up-projections (and RoPE, not priced: elementwise on the
  rope dimensions);
- ``layernorm``: the layer's two norms (input_layernorm, pre_mlp_layernorm);
- ``mlp``: the dense MLP, on the layers whose MLP is not a MoE layer (transformer_layer.py:
  ``if not isinstance(self.mlp, MoELayer)``);
- ``moe_act``: the routed experts' activation function;
- ``shared_experts``: the MoE layers' shared experts;
- ``moe``: the whole MoE layer, its token permutation and its dispatch and combine all-to-alls
  included (the step model runs those again in the backward pass, ``reruns_moe``).
Each module's forward is priced as the layer's forward prices it: GEMMs at their main loop's
rate (their output stores, a few % of a large GEMM, are left out: errs fast), memory-bound
work at HBM bandwidth. The TP collectives inside a recomputed MLP are not run again here
(errs fast); the activation memory is the core attention's (memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np

from fabricplan.catalog.transformer import RecomputeModule
from fabricplan.workload.shapes import ACT_BYTES, Shape

RECOMPUTE_MODULES: tuple[str, ...] = get_args(RecomputeModule)
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)  # TransformerConfig's default
# Hidden-state elements per h per token the "layernorm" module reruns: a layer's two norms
# (Megatron-Core's input_layernorm and pre_mlp_layernorm), each reading the hidden state and
# writing its output.
LAYERNORM_ELEMS_PER_H = 4.0


@dataclass(frozen=True)
class Rerun:
    """Seconds per layer and micro-batch on one GPU that the backward pass spends running
    modules' forward again (shape (N,) or one plan's scalar), and of them the attention part's
    (norm, up-projections, core attention)."""

    seconds: np.ndarray | float
    attention: np.ndarray | float


def rerun(
    s: Shape,
    modules: tuple[str, ...],
    tokens: np.ndarray,
    tp: np.ndarray,
    sp_div: np.ndarray,
    core_attn: np.ndarray,
    permute_fwd_elems: np.ndarray | float,
    peak_proj: float,
    hbm: float,
) -> Rerun:
    """What ``modules`` cost the backward pass; ``core_attn`` is the core attention's forward
    (the fused kernel and any softmax traffic), ``permute_fwd_elems`` the MoE layer's token
    permutation per token (moe_permute)."""
    per_token_bytes = tokens * ACT_BYTES / hbm
    attention = 0.0 * tokens
    other = 0.0 * tokens
    if "core_attn" in modules:
        attention = attention + core_attn
    if "mla_up_proj" in modules:
        attention = attention + tokens * s.mla_up_flops / tp / peak_proj
    if "layernorm" in modules:
        norms = per_token_bytes * LAYERNORM_ELEMS_PER_H * s.hidden / sp_div
        attention, other = attention + norms / 2, other + norms / 2
    if "mlp" in modules:
        gemms = tokens * s.dense_ffn_flops / tp / peak_proj
        other = other + gemms + per_token_bytes * s.dense_act_elems / tp
    shared_act = s.ffn_act_elems - s.dense_act_elems - s.routed_act_elems
    if "moe" in modules:
        experts = s.routed_ffn_flops + s.shared_ffn_flops
        gemms = tokens * experts / tp / peak_proj
        acts = (s.routed_act_elems + shared_act) / tp
        moe_share = s.moe_layers / s.layers
        other = other + gemms + per_token_bytes * (acts + permute_fwd_elems * moe_share / sp_div)
    else:
        if "moe_act" in modules:
            other = other + per_token_bytes * s.routed_act_elems / tp
        if "shared_experts" in modules:
            gemms = tokens * s.shared_ffn_flops / tp / peak_proj
            other = other + gemms + per_token_bytes * shared_act / tp
    return Rerun(attention + other, attention)
