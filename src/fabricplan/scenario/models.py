"""The scenario file's shape: cluster, workload, organisation and money.

These models check structure and ranges. Checks that need the catalog or span several fields
live in :mod:`fabricplan.scenario.checks`; :func:`fabricplan.scenario.load.resolve` then fills the
defaults that depend on the catalog. ``None`` on a field here means "use the default"; a
scenario returned by the loader has every such default filled in.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricplan.catalog.transformer import RecomputeModule

Design = Literal["fat-tree", "rail-optimized", "rail-only", "dragonfly"]
RoceQuality = Literal["tuned", "default", "misconfigured"]
# Where the job's nodes sit: side by side (a dedicated cluster), or scattered over a fabric twice
# the job's size, as a busy shared cluster hands them out.
Placement = Literal["contiguous", "fragmented"]
# How switches spread flows over equal-cost paths (the congestion simulator's routings).
Routing = Literal["ecmp", "flowlet", "adaptive", "spray"]
Maturity = Literal["low", "medium", "high"]
MATURITIES: tuple[str, ...] = get_args(Maturity)

MAX_GPUS = 1_000_000  # beyond any announced cluster; catches typos such as an extra zero or two
# Upper bounds of the workload's counts: each far beyond any published run, so they only catch
# typos and junk, which would otherwise run into float overflow or hours of arithmetic.
MAX_TOKENS = 1e17  # training tokens; Llama 3 405B used 1.56e13
MAX_GLOBAL_BATCH = 10_000_000  # sequences per step; the largest published runs use a few thousand
MAX_MICRO_BATCH = 65_536  # sequences per GPU per micro-step; memory caps real ones far lower
MAX_SERVING_TOKENS = 10_000_000  # prompt or output tokens per request: the longest contexts
MAX_CONCURRENCY = 1_000_000  # requests in flight per replica
MAX_NAME_CHARS = 200  # a scenario's name is a label printed in titles
MAX_NICS_PER_NODE = 64  # scale-out NICs a node can hold: AWS p5 has 32
NicCount = Annotated[int, Field(gt=0, le=MAX_NICS_PER_NODE)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Topology(_Strict):
    design: Design = "rail-optimized"
    oversubscription: float = Field(
        default=1.0, ge=1.0, le=64.0, description="leaf downlink:uplink ratio; 1 = non-blocking"
    )
    spine_oversubscription: float = Field(
        default=1.0, ge=1.0, le=64.0, description="spine downlink:uplink ratio (3-tier fabrics)"
    )
    switch: str | None = Field(default=None, description="catalog switch id; default per fabric")


class FlowControl(_Strict):
    """Flow-control settings over the RoCE quality's preset; None keeps the preset's value.
    Ranges and order are checked by ``congestion.settings.FlowSettings`` (scenario.checks)."""

    pfc_xoff_kb: float | None = Field(default=None, description="queue at which PFC pauses")
    pfc_xon_kb: float | None = Field(default=None, description="queue at which PFC resumes")
    buffer_kb: float | None = Field(default=None, description="egress queue from shared buffer")
    ecn_kmin_kb: float | None = Field(default=None, description="queue where ECN marking starts")
    ecn_kmax_kb: float | None = Field(default=None, description="queue where all are marked")
    congestion_control: str | None = Field(default=None, description="dcqcn | none (PFC only)")


class Cluster(_Strict):
    gpu: str = "h100"
    gpus: int = Field(gt=0, le=MAX_GPUS)
    gpus_per_node: int | None = Field(default=None, gt=0, le=1024)
    nics_per_node: int | None = Field(default=None, gt=0, le=MAX_NICS_PER_NODE)
    fabric: tuple[str, ...] | None = Field(default=None, description="one id or a list to compare")
    nics_per_fabric: dict[str, NicCount] | None = Field(
        default=None,
        description="NICs per node on a compared fabric whose nodes have another count than "
        "nics_per_node (a cloud's node type: tcpx-200g on A3 High has 4); a fabric only rented "
        "defaults to the count of the node types that rent it with this GPU, unless "
        "nics_per_node is given",
    )
    topology: Topology = Topology()
    roce_quality: RoceQuality = "tuned"
    placement: Placement = Field(
        default="contiguous",
        description="contiguous nodes, or fragmented over a fabric twice the job's size",
    )
    routing: Routing | None = Field(default=None, description="None: each fabric's default")
    flow_control: FlowControl = FlowControl()

    @field_validator("fabric", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list | tuple) and not value:
            raise ValueError("give at least one fabric id")
        return value

    @property
    def nodes(self) -> int:
        assert self.gpus_per_node is not None, "resolve the scenario first"
        return self.gpus // self.gpus_per_node

    @property
    def fabrics(self) -> tuple[str, ...]:
        assert self.fabric is not None, "resolve the scenario first"
        return self.fabric

    def nics_for(self, fabric: str) -> int:
        """NICs per node on ``fabric``: its own count where it has one, else the cluster's."""
        assert self.nics_per_node is not None, "resolve the scenario first"
        return (self.nics_per_fabric or {}).get(fabric, self.nics_per_node)

    def switch_for(self, fabric: str) -> str | None:
        """The scenario's switch on one of its own fabrics (checked to carry them all); None,
        the fabric's default switch, on any other fabric a command is asked about."""
        return self.topology.switch if fabric in self.fabrics else None


class Parallel(_Strict):
    tp: int = Field(default=1, gt=0, le=1024)
    pp: int = Field(default=1, gt=0, le=1024)
    dp: int | Literal["auto"] = "auto"
    ep: int = Field(default=1, gt=0, le=1024)
    cp: int = Field(default=1, gt=0, le=1024)
    zero: int = Field(default=1, ge=0, le=3, description="ZeRO stage (3 = FSDP)")
    vp: int = Field(default=1, gt=0, le=128, description="interleaved 1F1B: model chunks per stage")
    sequence_parallel: bool = Field(default=True, description="shard norms/dropout over tp")
    tp_comm_overlap: bool = Field(
        default=False,
        description="hide TP collectives behind the GEMMs beside them (Megatron-Core "
        "--tp-comm-overlap); needs sequence_parallel and tp within one node",
    )
    ep_comm_overlap: bool = Field(
        default=False,
        description="hide the expert all-to-alls behind another micro-batch's compute, layer "
        "part by layer part (Megatron-Core --overlap-moe-expert-parallel-comm "
        "--delay-wgrad-compute; DeepSeek-V3's DualPipe pairs passes alike); needs ep > 1, a MoE "
        "model and, with pp > 1, an interleaved pipeline (vp > 1)",
    )
    ep_dispatch: Literal["alltoall", "hierarchical", "auto"] = Field(
        default="alltoall",
        description="how the expert all-to-alls move tokens between nodes: alltoall, every "
        "expert copy on its own (Megatron-Core's alltoall dispatcher); hierarchical, one copy "
        "per destination node, forwarded over NVLink there (DeepEP, HybridEP: Megatron-Core's "
        "flex dispatcher; InfiniBand and RoCE only); auto, hierarchical on each fabric that "
        "can run it and alltoall on the others",
    )
    pipeline_layout: str | None = Field(
        default=None,
        max_length=2000,
        description="what each pipeline stage holds, as Megatron-Core's "
        "pipeline_model_parallel_layout writes it: pp x vp chunks separated by |, chunk c on "
        "stage c % pp; E the embedding, t a decoder layer, m an MTP module, L the loss; "
        "(...)*n and x*n repeat (DeepSeek-V3 on 8 x 4 chunks: 'Et|(tt|)*30mL'). None: the "
        "layers split evenly, the head and the MTP modules on the last stage",
    )
    pipeline_engine: Literal["megatron", "deepspeed"] = Field(
        default="megatron",
        description="what runs the pipeline schedule: megatron (Megatron-LM / Megatron-Core: a "
        "stage sends and receives at once; without sequence parallelism the receiver "
        "all-gathers the TP ranks' slices); deepspeed (DeepSpeed's PipelineEngine, as "
        "Megatron-DeepSpeed runs it: one blocking transfer at a time, four a micro-batch, and "
        "three rebuilds of the TP-split tensors; no interleaving)",
    )
    cp_comm: Literal["p2p", "all_gather"] = Field(
        default="p2p",
        description="how context parallelism exchanges K/V (Transformer Engine cp_comm_type): "
        "p2p, a ring hidden behind the attention of the block already there; all_gather, the "
        "whole K/V gathered before the attention, exposed (Llama 3)",
    )

    @field_validator("dp", mode="before")
    @classmethod
    def _dp(cls, value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("must be a positive whole number or 'auto'")
        return value


class Serving(_Strict):
    """Inference load; only read when ``workload.kind`` is ``inference``."""

    prompt_tokens: int = Field(default=1024, gt=0, le=MAX_SERVING_TOKENS)
    output_tokens: int = Field(default=256, gt=0, le=MAX_SERVING_TOKENS)
    concurrency: int = Field(
        default=64, gt=0, le=MAX_CONCURRENCY, description="requests in flight per replica"
    )
    disaggregated: bool = Field(default=False, description="prefill and decode on separate nodes")


class Workload(_Strict):
    kind: Literal["training", "inference"] = "training"
    model: str
    tokens: float | None = Field(default=None, gt=0, le=MAX_TOKENS, description="training tokens")
    seq_len: int | None = Field(default=None, gt=0, le=10_000_000)
    global_batch: int | None = Field(
        default=None, gt=0, le=MAX_GLOBAL_BATCH, description="sequences per step"
    )
    micro_batch: int = Field(default=1, gt=0, le=MAX_MICRO_BATCH)
    parallel: Parallel = Parallel()
    precision: Literal["bf16", "fp8"] = "bf16"
    fp8_recipe: Literal["delayed", "current"] = Field(
        default="delayed",
        description="how Transformer Engine scales FP8 tensors: delayed, by an amax history "
        "(MXFP8's block scaling moves the same bytes); current, by each tensor's own amax, "
        "found in a pass of its own before the cast (NVIDIA's FP8-CS recipes)",
    )
    mtp_layers: int = Field(
        default=0,
        ge=0,
        le=16,
        description="multi-token-prediction modules trained (DeepSeek-V3 and Megatron-Bridge's "
        "recipe: 1), each a layer, a projection and a pass through the output head",
    )
    recompute: Literal["none", "selective", "full"] = "selective"
    recompute_modules: list[RecomputeModule] | None = Field(
        default=None,
        min_length=1,
        max_length=7,
        description="what selective recomputation runs again in the backward pass "
        "(Megatron-Core's recompute_modules): core_attn, mla_up_proj (MLA models), layernorm, "
        "mlp (the dense MLPs), moe_act, shared_experts, moe (the whole MoE layer, its "
        "all-to-alls included); null: core_attn",
    )
    flash_attention: bool = Field(default=True, description="fused attention: no s x s tensors")
    overlap_dp: bool = Field(default=True, description="overlap gradient reduction with backward")
    grad_accum_fusion: bool = Field(
        default=True, description="gradients accumulate inside the weight-gradient GEMM"
    )
    grad_reduce: Literal["fp32", "bf16"] = Field(
        default="fp32",
        description="dtype gradients are kept and reduced in (bf16: Megatron's "
        "--grad-reduce-in-bf16, NeMo's recipes); fp16 training reduces in fp16 either way",
    )
    serving: Serving = Serving()


class Growth(_Strict):
    target_gpus: int = Field(gt=0, le=MAX_GPUS)
    months: int = Field(gt=0, le=120)


class Organization(_Strict):
    network_maturity: Maturity = "medium"
    time_to_production_weeks: float = Field(default=8.0, gt=0, le=520)
    growth: Growth | None = None


class Costs(_Strict):
    """Money inputs. The defaults are labelled assumptions, overridable per scenario."""

    mode: Literal["own", "rent"] = "own"
    # Assumption: seed 001's illustrative bare-metal H100 rate, mid-2025.
    gpu_hour_price: float = Field(default=3.0, ge=0, le=1000)
    # Assumption: a typical US industrial electricity rate.
    power_price_kwh: float = Field(default=0.10, ge=0, le=10)
    lifecycle_years: float = Field(default=4.0, gt=0, le=15)
    # Assumption: power usage effectiveness of a modern air/liquid-cooled GPU hall.
    pue: float = Field(default=1.3, ge=1.0, le=3.0)
    # Which cables and optics are priced: "policy" buys what each fabric's family buys (NVIDIA
    # LinkX on InfiniBand, multi-vendor modules on Ethernet: topology.cabling.OPTICS_POLICY);
    # "oem" or "compatible" forces one for every fabric (seed 003: compatible parts cost a
    # fraction of OEM ones).
    optics: Literal["policy", "oem", "compatible"] = "policy"


class Scenario(_Strict):
    name: str = Field(default="scenario", min_length=1, max_length=MAX_NAME_CHARS)
    cluster: Cluster
    workload: Workload | None = None
    organization: Organization = Organization()
    costs: Costs = Costs()
