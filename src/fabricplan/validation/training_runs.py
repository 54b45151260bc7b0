"""Published training runs against the workload model: predicted vs measured throughput.

Each data file holds one source: a ``[common]`` table with the setup its source states and
``[[row]]`` tables that may override any of it. A row is measured in exactly one of
``hw_tflops_per_gpu`` (Megatron's count, with the recomputed forward pass),
``model_tflops_per_gpu`` (matmul weights + attention, Megatron's count), ``mfu`` (model FLOPs
over the BF16 dense peak), ``step_s`` (seconds per iteration) or ``tokens_per_s_per_gpu``
(tokens trained per second per GPU, which no FLOP count enters). Nothing here is fitted to
them. Models that are not in the catalog (the GPT family of the Megatron papers) are built from
the row's shape with the papers' conventions.

``megatron_sc21.toml`` is the issue's acceptance table; ``held_back/`` holds the other runs,
each with the assumptions its source leaves open written next to it, and ``recipes/`` the runs
of NVIDIA's published benchmarking recipes, read once the model was set.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricplan.catalog import Catalog, default_catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.validation.runs import (
    ACCEPTANCE,
    DATA,
    HELD_BACK,
    RECIPES,
    load_rows,
    row_label,
    row_model,
)
from fabricplan.validation.runs import (
    gpt_model as gpt_model,  # re-exported: tests build the papers' GPT from here
)
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.recompute import DEFAULT_RECOMPUTE_MODULES

# the acceptance bound for every row
TFLOPS_TOLERANCE = 0.10
METRICS = ("hw_tflops_per_gpu", "model_tflops_per_gpu", "mfu", "step_s", "tokens_per_s_per_gpu")


@dataclass(frozen=True)
class TrainingCheck:
    row: dict[str, Any]
    metric: str
    predicted: float
    step_time_s: float
    hw_tflops: float
    model_tflops: float
    mfu: float
    breakdown: dict[str, float]

    @property
    def measured(self) -> float:
        return float(self.row[self.metric])

    @property
    def error(self) -> float:
        """Throughput error: positive when the model is faster than the run."""
        if self.metric == "step_s":
            return self.measured / self.predicted - 1
        return self.predicted / self.measured - 1

    @property
    def label(self) -> str:
        return row_label(self.row)

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {
            "source": r["source"],
            "label": self.label,
            "gpus": r["gpus"],
            "tp": r["tp"],
            "pp": r["pp"],
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
            "error": self.error,
            "step_time_s": self.step_time_s,
            "hw_tflops_per_gpu": self.hw_tflops,
            "model_tflops_per_gpu": self.model_tflops,
            "mfu": self.mfu,
            "breakdown": self.breakdown,
        }


def _check(r: dict[str, Any], cat: Catalog, backend: NetworkBackend) -> TrainingCheck:
    shape = shape_of(row_model(r, cat))
    gpu = cat.gpu(r["gpu"])
    hw = Hardware(
        gpu=gpu,
        gpus=r["gpus"],
        gpus_per_node=gpu.node.gpus_per_node,
        nics_per_node=r.get("nics_per_node", gpu.node.nics_per_node),
        fabric=r["fabric"],
        design=r["design"],
        roce_quality=r.get("roce_quality", "tuned"),
    )
    cp = r.get("cp", 1)
    dp = r["gpus"] // (r["tp"] * r["pp"] * cp)
    plan = Plans.of(
        tp=r["tp"],
        pp=r["pp"],
        dp=dp,
        cp=cp,
        ep=r.get("ep", 1),
        vp=r.get("vp", 1),
        zero=r.get("zero", 0),
        micro_batch=r["micro_batch"],
        global_batch=r["batch"],
        seq_len=r["seq_len"],
        sp=r.get("sp", False),
        recompute=r["recompute"],
        flash=r.get("flash", True),
        overlap_dp=r.get("overlap_dp", True),
        precision=r["precision"],
        grad_accum_fusion=r.get("grad_accum_fusion", True),
        grad_reduce_bf16=r.get("grad_reduce", "fp32") == "bf16",
        tp_comm_overlap=r.get("tp_comm_overlap", False),
        cp_comm=r.get("cp_comm", "p2p"),
        ep_comm_overlap=r.get("ep_comm_overlap", False),
        ep_dispatch=r.get("ep_dispatch", "alltoall"),
        fp8_recipe=r.get("fp8_recipe", "delayed"),
        pipeline_layout=r.get("pipeline_layout"),
        mtp_layers=r.get("mtp_layers", 0),
        recompute_modules=tuple(r.get("recompute_modules", DEFAULT_RECOMPUTE_MODULES)),
        pipeline_engine=r.get("pipeline_engine", "megatron"),
    )
    st = training_step(shape, plan, hw, backend=backend)
    t = float(st.time[0])
    per_gpu = t * r["gpus"] * 1e12
    hw_tf = float(st.hw_flops[0]) / per_gpu
    model_tf = float(st.model_flops[0]) / per_gpu
    mfu = model_tf / gpu.bf16_dense_tflops
    metrics = [m for m in METRICS if m in r]
    if len(metrics) != 1:
        raise ValueError(f"row {r.get('label', r)}: give exactly one of {', '.join(METRICS)}")
    metric = metrics[0]
    predicted = {
        "hw_tflops_per_gpu": hw_tf,
        "model_tflops_per_gpu": model_tf,
        "mfu": mfu,
        "step_s": t,
        "tokens_per_s_per_gpu": float(st.tokens[0]) / t / r["gpus"],
    }[metric]
    return TrainingCheck(r, metric, predicted, t, hw_tf, model_tf, mfu, st.breakdown())


def check_file(
    path: Path,
    catalog: Catalog | None = None,
    gpu: str | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> list[TrainingCheck]:
    """The file's rows (only those on ``gpu``, if given) against the model, the network's
    congestion priced by ``backend``."""
    cat = catalog or default_catalog()
    return [_check(r, cat, backend) for r in load_rows(path) if gpu is None or r["gpu"] == gpu]


def check_training(
    path: Path | None = None,
    catalog: Catalog | None = None,
    gpu: str | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> list[TrainingCheck]:
    """The acceptance table: Megatron-LM SC'21 Table 1."""
    return check_file(path or ACCEPTANCE, catalog, gpu, backend)


def check_held_back(
    catalog: Catalog | None = None,
    gpu: str | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
    folder: Path = HELD_BACK,
) -> list[TrainingCheck]:
    """Every other published run, one file per source (``folder``: the held-back runs, or the
    recipes' runs, ``RECIPES``)."""
    return [c for f in sorted(folder.glob("*.toml")) for c in check_file(f, catalog, gpu, backend)]


def check_recipes(
    catalog: Catalog | None = None,
    gpu: str | None = None,
    backend: NetworkBackend = DEFAULT_BACKEND,
) -> list[TrainingCheck]:
    """The runs of NVIDIA's published benchmarking recipes (held back too, a suite apart)."""
    return check_held_back(catalog, gpu, backend, folder=RECIPES)


@dataclass(frozen=True)
class CeilingCase:
    """The published runs on one GPU rerun with one published matmul ceiling."""

    gpu: str
    tflops: float
    efficiency: float
    label: str
    protocol: str
    source: str
    in_catalog: bool
    errors: list[float]  # Table 1 rows, then the held-back rows on this GPU
    acceptance_rows: int  # how many of ``errors`` are Table 1 rows

    @property
    def acceptance_within(self) -> int:
        return sum(abs(e) <= TFLOPS_TOLERANCE for e in self.errors[: self.acceptance_rows])

    @property
    def held_back_within(self) -> int:
        return sum(abs(e) <= TFLOPS_TOLERANCE for e in self.errors[self.acceptance_rows :])

    def to_dict(self) -> dict[str, Any]:
        n = self.acceptance_rows
        return {
            "gpu": self.gpu,
            "tflops": self.tflops,
            "matmul_efficiency": self.efficiency,
            "label": self.label,
            "protocol": self.protocol,
            "source": self.source,
            "in_catalog": self.in_catalog,
            "table1_errors": self.errors[:n],
            "table1_within_10pct": self.acceptance_within,
            "held_back_errors": self.errors[n:],
            "held_back_within_10pct": self.held_back_within,
        }


# The catalog writes efficiencies to 4 decimals.
CATALOG_ROUNDING = 5e-4


def ceiling_sensitivity(
    catalog: Catalog | None = None, backend: NetworkBackend = DEFAULT_BACKEND
) -> list[CeilingCase]:
    """Table 1 and the held-back runs on the same GPU under every published matmul ceiling of
    ``matmul_ceilings.toml``. Reports the spread; the model keeps the catalog's figure."""
    cat = catalog or default_catalog()
    data = tomllib.loads((DATA / "matmul_ceilings.toml").read_text())
    out = []
    for c in data["ceiling"]:
        gpu = cat.gpu(c["gpu"])
        ours = bool(c.get("in_catalog", False))  # the catalog's own figure, as it rounds it
        eff = c["tflops"] / gpu.bf16_dense_tflops
        if ours and abs(eff - gpu.matmul_efficiency) > CATALOG_ROUNDING:
            raise ValueError(
                f"matmul_ceilings.toml: {gpu.id}'s in_catalog figure {c['tflops']} "
                f"TFLOP/s is not the catalog's {gpu.matmul_efficiency:.4f} of peak"
            )
        eff = gpu.matmul_efficiency if ours else eff
        varied = cat if ours else cat.with_entry(gpu.model_copy(update={"matmul_efficiency": eff}))
        table1 = check_training(catalog=varied, gpu=gpu.id, backend=backend)
        held = check_held_back(varied, gpu=gpu.id, backend=backend)
        out.append(
            CeilingCase(
                gpu=gpu.id,
                tflops=c["tflops"],
                efficiency=eff,
                label=c["label"],
                protocol=c["protocol"],
                source=c["source"],
                in_catalog=ours,
                errors=[k.error for k in table1 + held],
                acceptance_rows=len(table1),
            )
        )
    return out
