"""The parallel plan and the hardware it runs on, as arrays so that one call can evaluate many.

A :class:`Plans` holds N training plans (one per array element); :func:`plans_from_scenario`
builds the single plan a scenario describes. The scenario layer has already checked that the
plan divides the cluster and the model; memory fit is checked in :mod:`.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property, lru_cache

import numpy as np

from fabricplan.catalog import Catalog, Gpu, default_catalog
from fabricplan.congestion.network_backend import NetworkSpec
from fabricplan.congestion.settings import FlowSettings
from fabricplan.scenario import Scenario
from fabricplan.scenario.checks import no_rdma_dispatch
from fabricplan.workload import vec
from fabricplan.workload.recompute import DEFAULT_RECOMPUTE_MODULES

# Bytes per gradient element in the data-parallel reduction. Megatron-LM requires
# --accumulate-allreduce-grads-in-fp32 with BF16 (megatron/training/arguments.py), so BF16 and
# FP8 runs reduce FP32 gradients; FP16 runs (2021-era Megatron) reduce FP16 ones.
GRAD_BYTES = {"bf16": 4.0, "fp8": 4.0, "fp16": 2.0}
# Bytes per weight in the forward/backward copy of the model.
WEIGHT_BYTES = 2.0
# Mixed-precision Adam keeps an FP32 master copy, momentum and variance: 12 bytes per weight
# (Rajbhandari et al., ZeRO, SC'20, Sec. 3.1: K = 12).
OPTIMIZER_BYTES = 12.0
# Gradient accumulation outside the weight-gradient GEMM (before Megatron-LM's
# --gradient-accumulation-fusion of 2022-02, and in plain PyTorch DDP/FSDP): every micro-batch
# reads the new 16-bit gradient and reads and writes the accumulator (``GRAD_BYTES`` wide).
NEW_GRAD_BYTES = 2.0
# Bytes per gradient when they are kept and reduced in BF16 (Megatron-LM's
# --grad-reduce-in-bf16; NeMo's recipes: grad_reduce_in_fp32=False, grad_sync_dtype: bf16):
# the main-gradient buffer is BF16, so the reduction moves half the bytes of FP32's.
BF16_GRAD_BYTES = 2.0


@dataclass(frozen=True)
class Hardware:
    """The cluster a plan runs on: one GPU type and one fabric."""

    gpu: Gpu
    gpus: int
    gpus_per_node: int
    nics_per_node: int
    fabric: str
    design: str = "rail-optimized"
    oversubscription: float = 1.0
    roce_quality: str = "tuned"
    placement: str = "contiguous"  # or "fragmented": the congestion simulator's placements
    switch: str | None = None  # None: the fabric's default switch
    spine_oversubscription: float = 1.0
    # The scenario's catalog, for the collective model and the congestion simulator; None
    # means the packaged one.
    catalog: Catalog | None = None
    routing: str | None = None  # None: the fabric's default routing (catalog)
    flow: FlowSettings = field(default_factory=FlowSettings)  # over the RoCE quality preset
    # The catalog the congestion backend reads, when it is not ``catalog``: a variant of the
    # fabric's latency or goodput (advise's drivers) keeps the congestion answers of the
    # catalog it varies, so that they are not simulated again.
    network_catalog: Catalog | None = None

    def __hash__(self) -> int:
        # Every cache keyed by the hardware hashes it, and its catalog (pydantic models) makes
        # that cost microseconds: hashed once, kept on the object (not pickled: a string's
        # hash differs from one process to the next).
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    @property
    def network(self) -> NetworkSpec:
        """What a congestion backend reads about this cluster's network."""
        return NetworkSpec(
            gpu=self.gpu.id,
            fabric=self.fabric,
            gpus_per_node=self.gpus_per_node,
            nics_per_node=self.nics_per_node,
            design=self.design,
            oversubscription=self.oversubscription,
            spine_oversubscription=self.spine_oversubscription,
            switch=self.switch,
            roce_quality=self.roce_quality,
            placement=self.placement,
            routing=self.routing,
            flow=self.flow,
            catalog=self.catalog if self.network_catalog is None else self.network_catalog,
        )


# A plan's scalar settings, shared by all rows of one Plans; every other field is an array.
PLAN_FLAGS = (
    "recompute",
    "flash",
    "overlap_dp",
    "precision",
    "grad_accum_fusion",
    "grad_reduce_bf16",
    "tp_comm_overlap",
    "cp_comm",
    "ep_comm_overlap",
    "ep_dispatch",
    "fp8_recipe",
    "pipeline_layout",
    "mtp_layers",
    "recompute_modules",
    "pipeline_engine",
)


@dataclass(frozen=True)
class Plans:
    """N training plans as parallel integer arrays (shape (N,)); ``scalars`` gives one plan's
    as NumPy scalars, which the step model also takes (see vec)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    vp: np.ndarray
    zero: np.ndarray
    micro_batch: np.ndarray
    global_batch: np.ndarray
    seq_len: np.ndarray
    sp: np.ndarray  # bool
    recompute: str = "selective"  # none | selective | full
    flash: bool = True
    overlap_dp: bool = True
    precision: str = "bf16"  # bf16 | fp8 | fp16
    grad_accum_fusion: bool = True  # weight-gradient GEMMs accumulate in place
    grad_reduce_bf16: bool = False  # gradients kept and reduced in BF16, not FP32
    tp_comm_overlap: bool = False  # userbuffers: TP collectives behind GEMMs, see tp_overlap
    cp_comm: str = "p2p"  # context parallel's K/V exchange: p2p (ring) | all_gather
    ep_comm_overlap: bool = False  # all-to-alls behind another micro-batch's compute, ep_overlap
    # expert all-to-alls: alltoall (every expert copy on its own) | hierarchical (one copy per
    # destination node, forwarded over NVLink there: DeepEP, HybridEP) | auto (hierarchical
    # where the fabric has RDMA, see dispatch_on), see ep_dispatch
    ep_dispatch: str = "alltoall"
    # FP8 scaling: delayed (an amax history) | current (each tensor's own amax, a pass of its
    # own before the cast), see gemm.fp8_current_cast_bytes
    fp8_recipe: str = "delayed"
    # what each pipeline stage holds, as Megatron-Core's pipeline_model_parallel_layout writes
    # it (None: layers split evenly), and the multi-token-prediction modules trained, see
    # pipeline_layout
    pipeline_layout: str | None = None
    mtp_layers: int = 0
    # what selective recomputation reruns (Megatron-Core's recompute_modules), see recompute
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    # the engine that runs the pipeline schedule: megatron | deepspeed, see pipe_boundary
    pipeline_engine: str = "megatron"

    @classmethod
    def of(cls, **kw: object) -> Plans:
        """Broadcast scalars and arrays (tp=..., pp=..., ...) to one length; the scalar
        settings (``PLAN_FLAGS``) keep their defaults unless given."""
        flags = {k: kw.pop(k) for k in PLAN_FLAGS if k in kw}
        names = [f.name for f in fields(cls) if f.name not in PLAN_FLAGS]
        defaults = {"cp": 1, "ep": 1, "vp": 1, "zero": 1, "micro_batch": 1, "sp": True}
        values = [np.asarray(kw.get(n, defaults.get(n))) for n in names]
        if any(v.dtype == object for v in values):
            missing = [n for n, v in zip(names, values, strict=True) if v.dtype == object]
            raise ValueError(f"missing plan fields: {', '.join(missing)}")
        b = np.broadcast_arrays(*[np.atleast_1d(v) for v in values])
        cols = {
            n: np.array(v, dtype=bool if n == "sp" else float)
            for n, v in zip(names, b, strict=True)
        }
        return cls(**cols, **flags)  # type: ignore[arg-type]

    @classmethod
    def stack(cls, plans: list[Plans]) -> Plans:
        """One Plans of all of ``plans``' rows; they must share the scalar flags."""
        first = plans[0]
        flags = {k: getattr(first, k) for k in PLAN_FLAGS}
        if any(getattr(q, k) != v for q in plans for k, v in flags.items()):
            raise ValueError("Plans.stack: the plans differ in a scalar flag")
        arrays = {
            f.name: np.concatenate([getattr(q, f.name) for q in plans])
            for f in fields(cls)
            if f.name not in flags
        }
        return cls(**arrays, **flags)

    def __len__(self) -> int:
        return len(self.tp) if vec.is_batch(self.tp) else 1

    @cached_property
    def scalars(self) -> Plans:
        """The one plan of a single-plan Plans with NumPy scalars for its arrays: the step model
        runs on them about three times as fast (see vec)."""
        if len(self) != 1:
            raise ValueError(f"Plans.scalars: {len(self)} plans, not one")
        names = [f.name for f in fields(self) if f.name not in PLAN_FLAGS]
        return replace(self, **{n: getattr(self, n)[0] for n in names})

    def take(self, rows: int | slice | np.ndarray) -> Plans:
        """The plans at ``rows`` (an index, a slice or an index array), flags kept."""
        keep = np.atleast_1d(np.arange(len(self))[rows])
        names = [f.name for f in fields(self) if f.name not in PLAN_FLAGS]
        return replace(self, **{n: getattr(self, n)[keep] for n in names})

    @cached_property
    def microbatches(self) -> np.ndarray:
        return self.global_batch / (self.dp * self.micro_batch)

    @cached_property
    def tokens_per_micro_batch(self) -> np.ndarray:
        """Tokens one GPU holds in a micro-batch: context parallelism splits the sequence."""
        return self.micro_batch * self.seq_len / self.cp

    @cached_property
    def sp_split(self) -> np.ndarray:
        """How many ways sequence parallelism splits the parts of a layer that TP does not
        (norms, residuals, dropout): TP where it is on, else 1."""
        return vec.where(self.sp, self.tp, 1)

    @property
    def grad_bytes(self) -> float:
        """Bytes per gradient in the main-gradient buffer and its reduction."""
        return BF16_GRAD_BYTES if self.grad_reduce_bf16 else GRAD_BYTES[self.precision]

    @property
    def grad_accum_bytes(self) -> float:
        """HBM bytes per weight per micro-batch spent accumulating gradients outside the GEMM.
        FP16 autograd keeps the first micro-batch's gradient as is; an FP32 main-gradient
        buffer is added to on every micro-batch."""
        if self.grad_accum_fusion:
            return 0.0
        return NEW_GRAD_BYTES + 2 * self.grad_bytes


def runs_fp8(gpu: Gpu, precision: str) -> bool:
    """Whether the GEMMs run in FP8: asked, on a GPU with FP8 tensor cores (else BF16)."""
    return precision == "fp8" and bool(gpu.fp8_dense_tflops)


def matmul_flops(gpu: Gpu, precision: str) -> float:
    """FLOP/s of a large matmul sustained at the power limit (catalog ``matmul_efficiency``, or
    ``fp8_matmul_efficiency``): FP8 when asked and the GPU has FP8 tensor cores, else BF16."""
    if runs_fp8(gpu, precision):
        return gpu.fp8_dense_tflops * 1e12 * (gpu.fp8_matmul_efficiency or gpu.matmul_efficiency)
    return gpu.bf16_dense_tflops * 1e12 * gpu.matmul_efficiency


def hbm_bytes_per_s(gpu: Gpu) -> float:
    """Achievable HBM bandwidth (catalog ``hbm_efficiency`` of the peak)."""
    return gpu.hbm_TBps * 1e12 * gpu.hbm_efficiency


@lru_cache(maxsize=256)
def dispatch_on(hw: Hardware, ep_dispatch: str) -> str:
    """The expert dispatcher a plan runs on ``hw``: ``auto`` is hierarchical where the fabric
    offers RDMA (DeepEP and HybridEP send over InfiniBand or RoCE), alltoall elsewhere."""
    if ep_dispatch != "auto":
        return ep_dispatch
    cat = hw.catalog or default_catalog()
    return "alltoall" if no_rdma_dispatch(cat, [hw.fabric]) else "hierarchical"


def hardware_from_scenario(s: Scenario, cat: Catalog, fabric: str) -> Hardware:
    c = s.cluster
    assert c.gpus_per_node is not None and c.nics_per_node is not None, "resolve first"
    return Hardware(
        gpu=cat.gpu(c.gpu),
        gpus=c.gpus,
        gpus_per_node=c.gpus_per_node,
        nics_per_node=c.nics_for(fabric),
        fabric=fabric,
        design=c.topology.design,
        oversubscription=c.topology.oversubscription,
        roce_quality=c.roce_quality,
        placement=c.placement,
        switch=c.switch_for(fabric),
        spine_oversubscription=c.topology.spine_oversubscription,
        catalog=cat,
        routing=c.routing,
        flow=FlowSettings(**c.flow_control.model_dump()),
    )


def plans_from_scenario(s: Scenario) -> Plans:
    w = s.workload
    assert w is not None and w.seq_len is not None and w.global_batch is not None, "resolve first"
    p = w.parallel
    assert p.dp != "auto", "resolve first"
    return Plans.of(
        tp=p.tp,
        pp=p.pp,
        dp=p.dp,
        cp=p.cp,
        ep=p.ep,
        vp=p.vp,
        zero=p.zero,
        micro_batch=w.micro_batch,
        global_batch=w.global_batch,
        seq_len=w.seq_len,
        sp=p.sequence_parallel and p.tp > 1,
        recompute=w.recompute,
        flash=w.flash_attention,
        overlap_dp=w.overlap_dp,
        precision=w.precision,
        grad_accum_fusion=w.grad_accum_fusion,
        grad_reduce_bf16=w.grad_reduce == "bf16",
        tp_comm_overlap=p.tp_comm_overlap,
        cp_comm=p.cp_comm,
        ep_comm_overlap=p.ep_comm_overlap,
        ep_dispatch=p.ep_dispatch,
        fp8_recipe=w.fp8_recipe,
        pipeline_layout=p.pipeline_layout,
        mtp_layers=w.mtp_layers,
        recompute_modules=tuple(w.recompute_modules or DEFAULT_RECOMPUTE_MODULES),
        pipeline_engine=p.pipeline_engine,
    )
