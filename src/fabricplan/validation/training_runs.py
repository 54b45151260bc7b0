"""Published training runs against the workload model: predicted vs measured TFLOP/s per GPU.

The rows live in ``data/megatron_sc21.toml`` with the setup their sources state; nothing here is
fitted to them. Models that are not in the catalog (the GPT family of the paper) are built from
the row's shape with the paper's conventions.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricplan.catalog import Catalog, Model, default_catalog
from fabricplan.validation.nccl_runs import DATA
from fabricplan.workload import Hardware, Plans, shape_of, training_step

# the paper's error bound for this table (the acceptance figure)
TFLOPS_TOLERANCE = 0.10


@dataclass(frozen=True)
class TrainingCheck:
    row: dict[str, Any]
    predicted_tflops: float
    step_time_s: float
    breakdown: dict[str, float]

    @property
    def measured_tflops(self) -> float:
        return float(self.row["tflops_per_gpu"])

    @property
    def error(self) -> float:
        return self.predicted_tflops / self.measured_tflops - 1

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {
            "source": "Narayanan et al. SC'21 Table 1",
            "params_b": r["params_b"],
            "gpus": r["gpus"],
            "tp": r["tp"],
            "pp": r["pp"],
            "measured_tflops_per_gpu": self.measured_tflops,
            "predicted_tflops_per_gpu": self.predicted_tflops,
            "error": self.error,
            "step_time_s": self.step_time_s,
            "breakdown": self.breakdown,
        }


def gpt_model(row: dict[str, Any], common: dict[str, Any]) -> Model:
    """The paper's GPT: LayerNorm with biases, GELU FFN of 4h, learned positions, tied
    input/output embeddings (Megatron-LM's GPT shares the word embeddings)."""
    h = row["hidden"]
    return Model(
        id=f"gpt-{row['params_b']}b", name=f"GPT {row['params_b']}B (SC'21)", layers=row["layers"],
        hidden=h, heads=row["heads"], kv_heads=row["heads"], ffn_hidden=4 * h,
        vocab=common["vocab"], max_seq_len=common["seq_len"], attention="mha",
        gated_mlp=False, bias=True, tied_embeddings=True, position_embedding="learned",
        params_published_b=row["params_b"], source="Narayanan et al. SC'21 Table 1",
        as_of="2021-04",
    )  # fmt: skip


def check_training(path: Path | None = None, catalog: Catalog | None = None
                   ) -> list[TrainingCheck]:  # fmt: skip
    cat = catalog or default_catalog()
    data = tomllib.loads((path or DATA / "megatron_sc21.toml").read_text())
    common = data["common"]
    gpu = cat.gpu(common["gpu"])
    out = []
    for row in data["row"]:
        shape = shape_of(gpt_model(row, common))
        hw = Hardware(gpu=gpu, gpus=row["gpus"], gpus_per_node=gpu.node.gpus_per_node,
                      nics_per_node=gpu.node.nics_per_node, fabric=common["fabric"],
                      design=common["design"])  # fmt: skip
        dp = row["gpus"] // (row["tp"] * row["pp"])
        plan = Plans.of(
            tp=row["tp"], pp=row["pp"], dp=dp, vp=row["vp"], zero=0,
            micro_batch=row["micro_batch"], global_batch=row["batch"],
            seq_len=common["seq_len"], sp=False, recompute=common["recompute"], flash=False,
            overlap_dp=row["overlap_dp"], precision=common["precision"],
        )  # fmt: skip
        st = training_step(shape, plan, hw)
        t = float(st.time[0])
        out.append(TrainingCheck(row, float(st.hw_flops[0]) / t / row["gpus"] / 1e12, t,
                                 st.breakdown()))  # fmt: skip
    return out
