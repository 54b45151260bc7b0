"""Per-token arithmetic of a transformer: FLOPs, bytes moved by memory-bound ops, activations.

Everything here is per token and per layer (forward pass, whole layer before any parallel
split), so the step model can scale it by tokens and divide it by the parallel plan. Weight
counts come from :func:`fabricplan.catalog.count_params`; a matmul costs 2 FLOPs per weight per
token.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.catalog import Model, count_params
from fabricplan.catalog.architecture import ffn_weights
from fabricplan.workload import vec

# Bytes per activation element in BF16/FP16 training and serving.
ACT_BYTES = 2
# Share of the query x key pairs a causal mask keeps: a fused (flash) kernel skips the rest.
CAUSAL_FRACTION = 0.5
# Tensor-parallel all-reduces per layer per pass (after attention and after the FFN; Shoeybi et
# al., Megatron-LM, 2019, Fig. 3).
TP_COLLECTIVES_PER_LAYER = 2

# Elements each memory-bound op reads + writes per token in a Megatron-style layer (forward),
# counted from the op graph: LayerNorm reads and writes h (x2 norms = 4h); bias + dropout +
# residual reads two h-vectors, writes one and a 1-byte mask (3.5h, x2 = 7h).
NORM_RESIDUAL_ELEMS_PER_H = 11.0
# Unfused attention moves every score (one per head and key) several times: the QK^T matmul
# writes it, fused scale+mask+softmax reads it and writes the probabilities, dropout reads
# those and writes them with a 1-byte mask, the AV matmul reads them: 6.5 elements per score
# (the tensors Korthikanti et al. 2022 count for memory: 2 + 2 + 1 bytes per score).
SOFTMAX_ELEMS_PER_SCORE = 6.5

# Vocabulary-parallel cross-entropy, unfused, bytes per logit element on one GPU (op by op in
# Megatron-LM's _VocabParallelCrossEntropy, the same in its 2021 mpu/cross_entropy.py and its
# 2024 core/tensor_parallel/cross_entropy.py): forward casts the 2-byte logits to FP32 (2 + 4),
# takes the max (4), subtracts it (4 + 4), exponentiates (4 + 4), sums (4) and normalises
# (4 + 4); backward scales the softmax by the loss gradient (4 + 4) and casts it back (4 + 2).
CROSS_ENTROPY_BYTES_PER_LOGIT = 52.0
# Bytes per logit element alive at once: the 2-byte logits and their FP32 copy, which is kept
# as the softmax for the backward pass (same source).
LOGITS_BYTES_PER_LOGIT = 6.0

# A multi-token-prediction module in Megatron-Core's FLOP count (megatron/training/training.py,
# num_floating_point_operations, core_v0.14.0): one more layer of the last layer's kind, a
# 2h -> h projection, one more pass through the output head, and its norms: 3h elements a token
# (the embedding's and the hidden state's norms and its final one), which that count charges as
# weights.
MTP_NORM_ELEMS_PER_H = 3.0
# Its projection of the embedding's and the hidden state's concatenation (2h) back to h: 2h^2
# weights (DeepSeek-V3 Technical Report, Sec. 2.2; Megatron-Core's eh_proj).
MTP_PROJ_PARAMS_PER_H2 = 2.0

# Activation bytes stored per token per layer, Korthikanti et al. (2022), "Reducing Activation
# Recomputation in Large Transformer Models", Sec. 4: s*b*h*(10 + 24/t + 5*a*s/(h*t)) with tensor
# parallelism t. The 10h (norm inputs, dropout masks, the inputs of QKV and of the FFN) is
# replicated unless sequence parallelism shards it; of the 24h that TP splits, 8h is attention
# (Q, K, V, output-projection input) and 16h the FFN (4f for f = 4h; 6f when gated). Scores
# take 5 bytes per (head, key).
ACT_REPLICATED_PER_H = 10.0
ACT_ATTN_SPLIT_PER_H = 8.0
ACT_SCORE_BYTES = 5.0


@dataclass(frozen=True)
class Shape:
    """A model's per-token, per-layer costs (forward)."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    params_total: float
    params_active: float
    params_embedding: float  # input embedding + output head (if untied)
    params_expert: float  # all routed-expert weights (sharded by ep), 0 for dense
    moe_layers: int
    top_k: int
    experts: int  # routed experts per MoE layer, 0 for dense
    expert_groups: int  # groups the routed experts form (group-limited routing), 1 if none
    expert_groups_used: int  # groups a token's experts may come from
    proj_flops: float  # attention projections + FFN (active), averaged over layers
    attn_proj_flops: float  # of which the attention projections
    attn_out_flops: float  # of which the attention output projection (row-parallel)
    ffn_out_flops: float  # of which the FFN down projection (row-parallel)
    score_flops_per_ctx: float  # QK^T and AV per token per context position
    head_dim: int  # the attention kernel's query/key head dimension (MLA: nope + rope)
    ffn_act_elems: float  # FFN activation-function elements read + written
    ffn_act_bytes: float  # FFN activations stored (bytes) beyond the fixed 3h
    kv_elems: float  # K and V elements per token per layer (KV cache, context parallel)
    kv_heads: int  # how far TP can split the KV cache (MLA's latent is not split)
    logits_flops: float  # output head per token
    # Parts that Megatron-Core's recompute_modules can run again (see layer_compute), forward
    # FLOPs or activation elements per token, averaged over the layers as proj_flops is
    mla_up_flops: float = 0.0  # MLA's q and k/v up-projections (column-parallel)
    dense_ffn_flops: float = 0.0  # the dense layers' FFNs
    shared_ffn_flops: float = 0.0  # the MoE layers' shared experts
    routed_ffn_flops: float = 0.0  # the MoE layers' routed experts (top_k) and router
    dense_act_elems: float = 0.0  # of ffn_act_elems: the dense layers'
    routed_act_elems: float = 0.0  # of ffn_act_elems: the routed experts'
    # the weights of one layer of the last layer's kind (a MoE layer's where the model has any),
    # the routed experts apart: what a multi-token-prediction module's layer holds
    last_layer_params: float = 0.0
    last_layer_expert_params: float = 0.0

    @property
    def attn_in_flops(self) -> float:
        """Q, K and V projections (column-parallel)."""
        return self.attn_proj_flops - self.attn_out_flops

    @property
    def params_layer_dense(self) -> float:
        """The layers' weights but the routed experts' (no embedding or output head): what
        TP x PP split and expert parallelism does not."""
        return self.params_total - self.params_embedding - self.params_expert

    @property
    def last_layer_proj_flops(self) -> float:
        """Forward projection FLOPs per token of the model's last layer: a MoE layer's where
        the model has any (its dense layers come first), else the average layer's."""
        if not self.moe_layers:
            return self.proj_flops
        moe_share = self.moe_layers / self.layers
        return self.attn_proj_flops + (self.shared_ffn_flops + self.routed_ffn_flops) / moe_share

    @property
    def ffn_in_flops(self) -> float:
        """FFN up (and gate) projections (column-parallel)."""
        return self.proj_flops - self.attn_proj_flops - self.ffn_out_flops


# Models whose shape is kept: advise and a sweep ask for the same model at every variant.
SHAPES_KEPT = 64


@lru_cache(maxsize=SHAPES_KEPT)
def shape_of(m: Model) -> Shape:
    """The per-token costs of catalog model ``m`` (kept: a shape is frozen)."""
    pc = count_params(m)
    layers = pc.dense_layers + pc.moe_layers
    ffn_w = (
        pc.dense_layers * pc.dense_ffn_per_layer + pc.moe_layers * pc.moe_active_ffn_per_layer
    ) / layers
    if m.moe is not None:
        width_moe = (m.moe.top_k + m.moe.shared_experts) * m.moe.expert_ffn_hidden
    else:
        width_moe = 0
    inner = (pc.dense_layers * m.ffn_hidden + pc.moe_layers * width_moe) / layers
    # gated: reads gate and up (2f), writes f; otherwise reads f, writes f
    act_elems = 3 * inner if m.gated_mlp else 2 * inner
    act_bytes = (6 if m.gated_mlp else 4) * inner
    if m.mla is not None:
        a = m.mla
        score = 2 * m.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
        kv = a.kv_lora_rank + a.qk_rope_head_dim  # the compressed latent is what is cached
        v_width = m.heads * a.v_head_dim
        head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
    else:
        score = 4 * m.heads * m.head_dim
        kv = 2 * m.kv_heads * m.head_dim
        v_width = m.heads * m.head_dim
        head_dim = m.head_dim
    expert = 0.0
    last_dense = float(pc.attention_per_layer + pc.dense_ffn_per_layer)
    last_expert = 0.0
    per_act = 3 if m.gated_mlp else 2  # activation elements per FFN inner element
    split: dict[str, float] = {
        "dense_ffn_flops": 2.0 * pc.dense_layers * pc.dense_ffn_per_layer / layers,
        "dense_act_elems": per_act * pc.dense_layers * m.ffn_hidden / layers,
    }
    if m.moe is not None:
        expert_one = (3 if m.gated_mlp else 2) * m.hidden * m.moe.expert_ffn_hidden
        expert = pc.moe_layers * m.moe.experts * expert_one
        last_expert = float(m.moe.experts * expert_one)
        last_dense = float(pc.attention_per_layer + pc.moe_ffn_per_layer) - last_expert
        shared = m.moe.shared_experts * ffn_weights(m, m.moe.expert_ffn_hidden)
        moe_share = pc.moe_layers / layers
        split["shared_ffn_flops"] = 2.0 * moe_share * shared
        split["routed_ffn_flops"] = 2.0 * moe_share * (pc.moe_active_ffn_per_layer - shared)
        split["routed_act_elems"] = per_act * moe_share * m.moe.top_k * m.moe.expert_ffn_hidden
    if m.mla is not None:
        a = m.mla
        split["mla_up_flops"] = (
            2.0
            * m.heads
            * (
                a.q_lora_rank * (a.qk_nope_head_dim + a.qk_rope_head_dim)
                + a.kv_lora_rank * (a.qk_nope_head_dim + a.v_head_dim)
            )
        )
    return Shape(
        name=m.id,
        layers=layers,
        hidden=m.hidden,
        heads=m.heads,
        vocab=m.vocab,
        params_total=float(pc.total),
        params_active=float(pc.active),
        params_embedding=float(pc.embedding),
        params_expert=float(expert),
        moe_layers=pc.moe_layers,
        top_k=m.moe.top_k if m.moe else 0,
        experts=m.moe.experts if m.moe else 0,
        expert_groups=m.moe.groups if m.moe else 1,
        expert_groups_used=m.moe.routing_groups if m.moe else 1,
        proj_flops=2.0 * (pc.attention_per_layer + ffn_w),
        attn_proj_flops=2.0 * pc.attention_per_layer,
        attn_out_flops=2.0 * v_width * m.hidden,
        ffn_out_flops=2.0 * inner * m.hidden,
        score_flops_per_ctx=float(score),
        head_dim=head_dim,
        ffn_act_elems=float(act_elems),
        ffn_act_bytes=float(act_bytes),
        kv_elems=float(kv),
        kv_heads=1 if m.mla is not None else m.kv_heads,
        logits_flops=2.0 * m.hidden * m.vocab,
        last_layer_params=last_dense,
        last_layer_expert_params=last_expert,
        **split,
    )


def gemm_outputs_per_token(s: Shape, tp: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Output elements per token of one layer's projection GEMMs on one GPU, forward and
    input-gradient (backward). A column-parallel GEMM (QKV, FFN up/gate) splits its output by
    ``tp``; a row-parallel one (attention output, FFN down) splits its inner dimension and
    stores the full hidden width (partial sums). The input gradients are the reverse: the
    column-parallel GEMMs' are h wide, the row-parallel ones' split. MoE layers are counted as
    one down projection per token (their top-k outputs are not separated here)."""
    tp = vec.floats(tp)
    h = float(s.hidden)
    qkv, ffn_in = s.attn_in_flops / (2 * h), s.ffn_in_flops / (2 * h)
    return (qkv + ffn_in) / tp + 2 * h, row_parallel_inputs_per_token(s, tp) + 2 * h


def row_parallel_inputs_per_token(s: Shape, tp: ArrayLike) -> np.ndarray:
    """Input elements per token of one layer's row-parallel GEMMs on one GPU (the attention
    output and FFN down projections' inner dimension, split by ``tp``): what an FP8 layer casts
    before them (:func:`.gemm.fp8_cast_bytes`), and the width of their input gradients."""
    h = float(s.hidden)
    attn_out, ffn_out = s.attn_out_flops / (2 * h), s.ffn_out_flops / (2 * h)
    return (attn_out + ffn_out) / vec.floats(tp)


def touched_expert_share(s: Shape, tokens: ArrayLike) -> np.ndarray:
    """Expected share of a MoE layer's routed experts that at least one of ``tokens`` tokens
    is sent to: each token picks ``top_k`` of ``experts``, so an expert escapes one token with
    probability 1 - k/E and all of them with (1 - k/E)^tokens. It assumes balanced, independent
    routing (what load balancing aims at); real routing is skewed and touches fewer experts, so
    the share errs high (weight reads err slow). 0 for a dense model."""
    t = vec.floats(tokens)
    if s.experts == 0:
        return np.zeros_like(t)
    return 1.0 - (1.0 - s.top_k / s.experts) ** vec.maximum(t, 0.0)


def weights_read_per_pass(s: Shape, tokens: ArrayLike) -> np.ndarray:
    """Parameters (embeddings and output head excepted) a forward pass over ``tokens`` tokens
    reads from memory, each once: every dense weight (attention, dense and shared-expert FFNs)
    and the routed experts that some token is sent to (``touched_expert_share``). One token
    reads the active parameters; a batch of a MoE model reads more than that, up to all of
    its experts (DeepSeek-V3: 8 of 256 experts a token, so 32 tokens touch 64 % of them)."""
    routed_active = s.params_expert * s.top_k / s.experts if s.experts else 0.0
    always = s.params_active - s.params_embedding - routed_active
    return always + s.params_expert * touched_expert_share(s, tokens)


def weight_flops_per_token(s: Shape) -> float:
    """Forward matmul FLOPs per token against the weights (2 per weight): every layer's
    projections (active experts only) and the output head. Lookup tables cost nothing."""
    return s.layers * s.proj_flops + s.logits_flops


def model_flops_per_token(s: Shape, seq_len: ArrayLike, mtp_layers: int = 0) -> np.ndarray:
    """Training FLOPs per token, no recomputation: 3 passes (forward, two backward) over every
    matmul weight, plus attention over the full context (not halved for causal masking).

    Matmul weights are the layers' projections and the output head; an input embedding or
    learned position table is a lookup and costs no FLOPs. This is Megatron's count
    (``num_floating_point_operations``, megatron/training/training.py, 2024, whose logit term
    covers the output layer once) and PaLM's 6N + 12 L H Q T (Chowdhery et al. 2022, App. B)
    when input and output embeddings are tied. Each of ``mtp_layers`` multi-token-prediction
    modules adds what Megatron-Core's count adds for it (``MTP_NORM_ELEMS_PER_H``)."""
    ctx = np.asarray(seq_len)
    total = weight_flops_per_token(s) + s.layers * s.score_flops_per_ctx * ctx
    if mtp_layers:
        h = float(s.hidden)
        module = (
            s.last_layer_proj_flops
            + s.score_flops_per_ctx * ctx
            + 2.0 * (MTP_PROJ_PARAMS_PER_H2 * h * h + MTP_NORM_ELEMS_PER_H * h)
            + s.logits_flops
        )
        total = total + mtp_layers * module
    return 3.0 * total


def activation_bytes_per_token_layer(
    s: Shape, seq_len: ArrayLike, tp: ArrayLike, sp: ArrayLike, recompute: str, flash: bool
) -> np.ndarray:
    """Stored activations per token per layer on one GPU (Korthikanti et al. 2022, Table 2);
    ``seq_len``, ``tp`` and ``sp`` may be arrays of plans."""
    h = s.hidden
    tp, sp = vec.floats(tp), vec.bools(sp)
    if recompute == "full":
        return ACT_BYTES * h / vec.where(sp, tp, 1)  # only the layer input is kept
    split = ACT_ATTN_SPLIT_PER_H * h + s.ffn_act_bytes
    replicated = ACT_REPLICATED_PER_H * h
    per_gpu = vec.where(sp, (split + replicated) / tp, split / tp + replicated)
    if not (flash or recompute == "selective"):
        per_gpu = per_gpu + ACT_SCORE_BYTES * s.heads * vec.floats(seq_len) / tp
    return per_gpu
