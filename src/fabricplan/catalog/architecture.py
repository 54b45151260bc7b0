"""Parameter counts derived from a model's architecture.

Counting weights from the shapes (rather than trusting a headline number) lets tests check the
catalog's dimensions against each model's published size, and gives later layers exact sizes
for gradients, optimizer state and per-layer traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricplan.catalog.transformer import Model


@dataclass(frozen=True)
class ParamCount:
    """Weights of one model, split the way parallelism splits them."""

    embedding: int  # input embedding (+ learned positions) + output head if untied
    attention_per_layer: int
    dense_ffn_per_layer: int
    moe_ffn_per_layer: int  # all experts + shared experts + router, on an MoE layer
    moe_active_ffn_per_layer: int  # what one token touches on an MoE layer
    norms: int
    dense_layers: int
    moe_layers: int

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.norms
            + (self.dense_layers + self.moe_layers) * self.attention_per_layer
            + self.dense_layers * self.dense_ffn_per_layer
            + self.moe_layers * self.moe_ffn_per_layer
        )

    @property
    def active(self) -> int:
        """Parameters used per token (equal to ``total`` for a dense model)."""
        return self.total - self.moe_layers * (
            self.moe_ffn_per_layer - self.moe_active_ffn_per_layer
        )


def _attention(m: Model) -> int:
    if m.mla is not None:
        a = m.mla
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        return (
            m.hidden * a.q_lora_rank  # q down-projection
            + a.q_lora_rank  # its norm
            + a.q_lora_rank * m.heads * qk_dim  # q up-projection
            + m.hidden * (a.kv_lora_rank + a.qk_rope_head_dim)  # joint kv down + rope key
            + a.kv_lora_rank  # its norm
            + a.kv_lora_rank * m.heads * (a.qk_nope_head_dim + a.v_head_dim)  # k/v up
            + m.heads * a.v_head_dim * m.hidden  # output projection
        )
    hd = m.head_dim
    q_and_o = 2 * m.hidden * m.heads * hd
    kv = 2 * m.hidden * m.kv_heads * hd
    bias = (m.heads * hd + 2 * m.kv_heads * hd + m.hidden) if m.bias else 0
    return q_and_o + kv + bias


def ffn_weights(m: Model, inner: int) -> int:
    """Weights of one FFN of ``inner`` width (gated: three matrices), biases included."""
    mats = 3 if m.gated_mlp else 2
    bias = (inner * (mats - 1) + m.hidden) if m.bias else 0
    return mats * m.hidden * inner + bias


def count_params(m: Model) -> ParamCount:
    """Count the weights of ``m`` from its dimensions."""
    embedding = m.vocab * m.hidden * (1 if m.tied_embeddings else 2)
    if m.position_embedding == "learned":
        embedding += m.max_seq_len * m.hidden
    norm_width = 2 * m.hidden if m.bias else m.hidden  # LayerNorm has a bias, RMSNorm not
    norms = (2 * m.layers + 1) * norm_width
    dense_ffn = ffn_weights(m, m.ffn_hidden)
    if m.moe is None:
        return ParamCount(embedding, _attention(m), dense_ffn, 0, 0, norms, m.layers, 0)
    e = m.moe
    expert = ffn_weights(m, e.expert_ffn_hidden)
    router = m.hidden * e.experts
    moe_all = (e.experts + e.shared_experts) * expert + router
    moe_active = (e.top_k + e.shared_experts) * expert + router
    return ParamCount(
        embedding,
        _attention(m),
        dense_ffn,
        moe_all,
        moe_active,
        norms,
        e.dense_layers,
        m.layers - e.dense_layers,
    )
