"""The published training runs as data: their rows, the configuration each describes, and the
model's error on each as last recorded.

This module reads files only (no workload model), so the workload layer can ask where a result
stands against the runs without rerunning them. :mod:`.training_runs` reruns them;
:mod:`.record_errors` writes the errors it finds to ``recorded_errors.toml``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fabricplan.catalog import Catalog, Model, default_catalog
from fabricplan.catalog.architecture import count_params

DATA = Path(str(resources.files("fabricplan.validation") / "data"))
ACCEPTANCE = DATA / "megatron_sc21.toml"
HELD_BACK = DATA / "held_back"
# Runs of NVIDIA's published benchmarking recipes, read after the model was set (held back too,
# kept apart from the held-back suite, whose 24 rows are its own yardstick)
RECIPES = DATA / "recipes"
RECORDED_ERRORS = DATA / "recorded_errors.toml"
# The suites of ``fabricplan validate`` that hold training runs.
SUITE_TRAINING = "training"
SUITE_HELD_BACK = "held-back"
SUITE_RECIPES = "recipes"


def load_rows(path: Path) -> list[dict[str, Any]]:
    """A source file's rows, each with the file's ``[common]`` setup under it."""
    data = tomllib.loads(path.read_text())
    return [{**data["common"], **row} for row in data["row"]]


def suite_files() -> list[tuple[str, Path]]:
    """(suite, file) for every training source: the acceptance table, the held-back runs,
    then the recipes' runs."""
    return (
        [(SUITE_TRAINING, ACCEPTANCE)]
        + [(SUITE_HELD_BACK, f) for f in sorted(HELD_BACK.glob("*.toml"))]
        + [(SUITE_RECIPES, f) for f in sorted(RECIPES.glob("*.toml"))]
    )


def row_label(r: dict[str, Any]) -> str:
    """A row's name within its source: its ``label``, else its size."""
    return str(r.get("label") or f"{r.get('params_b', r.get('model'))}B")


def gpt_model(row: dict[str, Any], common: dict[str, Any]) -> Model:
    """The papers' GPT: LayerNorm with biases, GELU FFN of 4h, learned positions, tied
    input/output embeddings, unless the row says otherwise (Megatron-LM's GPT shares them; a
    row may give ``kv_heads``, ``ffn_hidden``, ``gated_mlp``, ``bias``, ``position_embedding``
    and ``tied_embeddings`` of its own)."""
    h, heads = row["hidden"], row["heads"]
    kv_heads = row.get("kv_heads", heads)
    return Model(
        id=f"gpt-{row['params_b']}b",
        name=f"GPT {row['params_b']}B",
        layers=row["layers"],
        hidden=h,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=row.get("ffn_hidden", 4 * h),
        vocab=common["vocab"],
        max_seq_len=common["seq_len"],
        attention="gqa" if kv_heads < heads else "mha",
        gated_mlp=row.get("gated_mlp", False),
        bias=row.get("bias", True),
        tied_embeddings=row.get("tied_embeddings", True),
        position_embedding=row.get("position_embedding", "learned"),
        params_published_b=row["params_b"],
        source=str(common.get("source", "published run")),
        as_of="2021-04",
    )


def row_model(r: dict[str, Any], cat: Catalog) -> Model:
    """The catalog's model when the row names one, else the paper's GPT of the row's shape."""
    return cat.model(r["model"]) if "model" in r else gpt_model(r, r)


@dataclass(frozen=True)
class Configuration:
    """One training job on one fabric, as the validated envelope compares it."""

    gpu: str
    fabric_family: str
    params: int  # counted from the model's dimensions (``count_params``)
    moe: bool
    attention: str
    gpus: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vp: int
    zero: int
    precision: str
    seq_len: int
    # what runs the pipeline schedule (pipe_boundary): megatron | deepspeed; "none" without a
    # pipeline, where the engine does nothing
    pipeline_engine: str = "none"


def engine_of(engine: str, pp: int) -> str:
    """A configuration's pipeline engine as the envelope compares it: none without a
    pipeline."""
    return engine if pp > 1 else "none"


@dataclass(frozen=True)
class ValidatedRun:
    """One published training run: the configuration the model was checked on, and its error
    (predicted / measured throughput - 1) as last recorded."""

    suite: str  # SUITE_TRAINING or SUITE_HELD_BACK
    source: str
    label: str
    fabric: str
    config: Configuration
    error: float

    def to_dict(self) -> dict[str, Any]:
        c = vars(self.config)
        return {
            "suite": self.suite,
            "source": self.source,
            "label": self.label,
            "fabric": self.fabric,
            **{k: v for k, v in c.items() if k != "params"},
            "params_b": self.config.params / 1e9,
            "error": self.error,
        }


def recorded_errors(path: Path = RECORDED_ERRORS) -> dict[tuple[str, str], float]:
    """(source, label) -> the model's error on that row when it was last recorded."""
    data = tomllib.loads(path.read_text())
    return {(r["source"], r["label"]): float(r["error"]) for r in data["row"]}


def _run(suite: str, r: dict[str, Any], cat: Catalog, error: float) -> ValidatedRun:
    model = row_model(r, cat)
    cp = int(r.get("cp", 1))
    config = Configuration(
        gpu=r["gpu"],
        fabric_family=cat.fabric(r["fabric"]).family,
        params=count_params(model).total,
        moe=model.moe is not None,
        attention=model.attention,
        gpus=int(r["gpus"]),
        tp=int(r["tp"]),
        pp=int(r["pp"]),
        dp=int(r["gpus"]) // (r["tp"] * r["pp"] * cp),
        cp=cp,
        ep=int(r.get("ep", 1)),
        vp=int(r.get("vp", 1)),
        zero=int(r.get("zero", 0)),
        precision=r["precision"],
        seq_len=int(r["seq_len"]),
        pipeline_engine=engine_of(r.get("pipeline_engine", "megatron"), int(r["pp"])),
    )
    return ValidatedRun(suite, r["source"], row_label(r), r["fabric"], config, error)


@cache
def validated_runs() -> tuple[ValidatedRun, ...]:
    """Every published training run of the ``training`` and ``held-back`` suites with its
    recorded error, read once per process (a few milliseconds: no model is run)."""
    cat = default_catalog()
    errors = recorded_errors()
    out = []
    for suite, path in suite_files():
        for r in load_rows(path):
            key = (r["source"], row_label(r))
            if key not in errors:
                raise ValueError(
                    f"{RECORDED_ERRORS.name}: no error recorded for {key[0]}, {key[1]}; "
                    "record them again (python -m fabricplan.validation.record_errors)"
                )
            out.append(_run(suite, r, cat, errors[key]))
    return tuple(out)
