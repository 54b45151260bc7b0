"""Catalog entries for transformer models: dimensions, mixture of experts, latent attention."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from fabricplan.catalog.models import HARDWARE_KINDS, Entry, _Frozen


class Moe(_Frozen):
    experts: int = Field(gt=1)
    top_k: int = Field(gt=0)
    shared_experts: int = Field(default=0, ge=0)
    expert_ffn_hidden: int = Field(gt=0)
    dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense FFN")
    # Group-limited routing (DeepSeek-V3's node-limited routing): the experts form ``groups``
    # equal groups in order, and a token picks its top_k experts inside the ``group_top_k``
    # groups it ranks highest. None: no limit (every group).
    groups: int = Field(default=1, gt=0, description="routing groups the experts form")
    group_top_k: int | None = Field(default=None, gt=0, description="groups a token may use")

    @model_validator(mode="after")
    def _k(self) -> Moe:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.experts % self.groups:
            raise ValueError(f"groups ({self.groups}) must divide experts ({self.experts})")
        g = self.routing_groups
        if g > self.groups:
            raise ValueError(f"group_top_k ({g}) exceeds groups ({self.groups})")
        if self.top_k > g * self.experts // self.groups:
            raise ValueError(f"top_k ({self.top_k}) exceeds the experts of {g} groups")
        return self

    @property
    def routing_groups(self) -> int:
        """Groups a token's experts may come from."""
        return self.groups if self.group_top_k is None else self.group_top_k


class Mla(_Frozen):
    """DeepSeek multi-head latent attention dimensions."""

    q_lora_rank: int = Field(gt=0)
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


# What Megatron-Core's selective recomputation can rerun (TransformerConfig.recompute_modules,
# core_v0.14.0); the step model prices each (workload.recompute).
RecomputeModule = Literal[
    "core_attn", "mla_up_proj", "layernorm", "mlp", "moe_act", "shared_experts", "moe"
]


class TrainedPlan(_Frozen):
    """The parallel layout a model was trained with, as its authors published it.

    ``assumed`` names the fields the source leaves open; their values here are assumptions
    (said in ``note``), the rest are the source's own.
    """

    tp: int = Field(gt=0)
    pp: int = Field(gt=0)
    ep: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    vp: int = Field(default=1, gt=0, description="interleaved 1F1B: model chunks per stage")
    zero: int = Field(ge=0, le=3, description="ZeRO stage (3 = FSDP that re-gathers weights)")
    recompute: Literal["none", "selective", "full"]
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None,
        min_length=1,
        description="what selective recomputation ran again; None: the core attention "
        "(Megatron-Core's default)",
    )
    mtp_layers: int = Field(default=0, ge=0, le=16, description="multi-token-prediction modules")
    pipeline_layout: str | None = Field(
        default=None,
        min_length=1,
        description="the stages' layers as Megatron-Core's pipeline_model_parallel_layout "
        "string; None: layers split evenly, the output head and MTP modules on the last stage",
    )
    ep_dispatch: Literal["alltoall", "hierarchical"] = Field(
        default="alltoall",
        description="how the expert all-to-alls crossed nodes: hierarchical, one copy of a token "
        "per destination node, forwarded over NVLink there",
    )
    gpus: int | None = Field(default=None, gt=0, description="GPUs trained on; None: unpublished")
    source: str = Field(min_length=1, description="paper and section, or repository and file")
    assumed: tuple[Literal["vp", "zero", "recompute", "pipeline_layout"], ...] = ()
    note: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> TrainedPlan:
        if self.gpus is not None:
            if self.gpus % (self.tp * self.pp * self.cp):
                raise ValueError(f"tp x pp x cp does not divide the published gpus ({self.gpus})")
            if (self.gpus // (self.tp * self.pp)) % self.ep:  # experts spread over dp x cp
                raise ValueError(f"ep ({self.ep}) does not divide dp x cp at {self.gpus} GPUs")
        if self.recompute_modules is not None and self.recompute != "selective":
            raise ValueError("recompute_modules needs recompute = 'selective'")
        if self.assumed and not self.note:
            raise ValueError("say in 'note' why the assumed fields take their values")
        return self


class Model(Entry):
    KIND: ClassVar[str] = "model"

    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    ffn_hidden: int = Field(gt=0, description="dense FFN inner size")
    vocab: int = Field(gt=0)
    max_seq_len: int = Field(gt=0)
    attention: Literal["mha", "gqa", "mla"]
    gated_mlp: bool = Field(description="SwiGLU-style FFN with three matrices")
    bias: bool = False
    tied_embeddings: bool = False
    position_embedding: Literal["rope", "learned"] = "rope"
    params_published_b: float = Field(gt=0, description="total parameters as published, billions")
    active_params_published_b: float | None = Field(default=None, gt=0)
    moe: Moe | None = None
    mla: Mla | None = None
    trained_plan: TrainedPlan | None = None

    @model_validator(mode="after")
    def _shape(self) -> Model:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})")
        if (self.attention == "mla") != (self.mla is not None):
            raise ValueError("mla dimensions are required exactly when attention is 'mla'")
        if self.moe and self.moe.dense_layers > self.layers:
            raise ValueError("moe.dense_layers exceeds layers")
        if self.trained_plan is not None:
            self._check_plan(self.trained_plan)
        return self

    def _check_plan(self, t: TrainedPlan) -> None:
        if self.heads % t.tp or t.pp > self.layers or t.pp * t.vp > self.layers:
            raise ValueError("trained_plan: tp must divide heads, pp x vp must not exceed layers")
        experts = self.moe.experts if self.moe is not None else 1
        if experts % t.ep:
            raise ValueError(f"trained_plan: ep ({t.ep}) must divide the experts ({experts})")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


CATALOG_KINDS: dict[str, type[Entry]] = {**HARDWARE_KINDS, Model.KIND: Model}
