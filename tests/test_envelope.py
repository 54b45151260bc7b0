"""The validated envelope: derived from the published runs, with the model's errors on them."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from statistics import median

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.scenario import load_scenario
from fabricplan.validation.envelope import (
    ALL_GPUS,
    NEAR_DIMENSIONS,
    NEAREST_RUNS,
    SERVING,
    SPANS,
    check,
    envelopes,
    validation_of,
)
from fabricplan.validation.record_errors import current_checks
from fabricplan.validation.runs import (
    SUITE_HELD_BACK,
    SUITE_RECIPES,
    SUITE_TRAINING,
    ValidatedRun,
    load_rows,
    recorded_errors,
    suite_files,
    validated_runs,
)
from test_cli import run

RUNS = validated_runs()


def by_label(label: str) -> ValidatedRun:
    (r,) = [r for r in RUNS if r.label == label]
    return r


def test_every_published_row_is_read_with_its_recorded_error():
    rows = [(s, r) for s, path in suite_files() for r in load_rows(path)]
    assert len(RUNS) == len(rows) == 62
    assert sum(r.suite == SUITE_TRAINING for r in RUNS) == 10  # Table 1
    assert sum(r.suite == SUITE_HELD_BACK for r in RUNS) == 24
    assert sum(r.suite == SUITE_RECIPES for r in RUNS) == 28  # NVIDIA's recipes, H100 and B200
    assert {r.config.gpu for r in RUNS} == {"a100", "h100", "b200"}
    assert len(recorded_errors()) == 62


def test_recorded_errors_match_the_model():
    """The stored errors ``step`` reads are what the model gives today: if this fails, the model
    changed; record them again (python -m fabricplan.validation.record_errors)."""
    recorded = recorded_errors()
    for c in current_checks():
        assert recorded[(c.row["source"], c.label)] == pytest.approx(c.error, abs=1e-4), c.label


def test_spans_are_the_min_and_max_of_the_rows_on_each_gpu():
    rows = [r for _, path in suite_files() for r in load_rows(path)]
    h100 = [r for r in rows if r["gpu"] == "h100"]
    env = envelopes()["h100"]
    assert env.name == "H100" and len(env.runs) == len(h100) == 31
    gpus = [r.config.gpus for r in env.runs]
    assert (min(gpus), max(gpus)) == (min(r["gpus"] for r in h100), max(r["gpus"] for r in h100))
    assert (min(gpus), max(gpus)) == (8, 16384)  # the recipes' Llama 3.1 8B on one node
    # context parallel: Llama 3's 131k run (16) and the recipes' Llama 3.1 runs (2)
    assert env.span("cp") == (1, 16)
    assert env.choices("zero") == [1, 2]


def test_acceptance_row_is_inside_with_its_errors():
    row = by_label("76.1B")  # Table 1: 1,024 A100, TP 8, PP 4
    v = check(row.config)
    assert v.inside and v.outside == () and v.compared_on == "A100"
    # its nearest runs on A100 (log2 distance over size, GPUs, tp, pp, cp, sequence)
    assert [r.label for r in v.nearest] == ["76.1B", "145.6B", "39.1B", "176B 384 GPUs", "310.1B"]
    errors = recorded_errors()
    own = errors[("Narayanan et al. SC'21, Table 1", "76.1B")]
    assert v.nearest[0].error == own and 0 < own < 0.10  # the docs' +8.4 %
    near = [abs(r.error) for r in v.nearest]
    assert v.nearest_errors is not None
    assert v.nearest_errors.median_abs == pytest.approx(median(near))
    assert v.nearest_errors.worst_abs == pytest.approx(max(near)) == pytest.approx(own)
    assert v.suites == (SUITE_TRAINING, SUITE_HELD_BACK)
    # every A100 run's errors: Table 1, Korthikanti, BLOOM, MT-NLG (the worst, +9.5 %)
    a100 = ("Narayanan", "Korthikanti", "BLOOM", "MT-NLG")
    every = [abs(e) for (src, _), e in errors.items() if src.startswith(a100)]
    assert v.envelope_errors is not None and v.envelope_errors.runs == len(every) == 22
    assert v.envelope_errors.worst_abs == pytest.approx(max(every), abs=1e-4)
    assert 0.09 < v.envelope_errors.worst_abs < 0.10
    assert v.summary().startswith("inside the validated range: errors seen on the 5 nearest")


def test_an_unvalidated_gpu_is_outside_compared_with_every_gpu():
    c = replace(by_label("462B 6144 GPUs").config, gpu="h200", gpus=4096, dp=32)
    v = check(c)
    assert not v.inside and v.compared_on == ALL_GPUS
    assert [o.dimension for o in v.outside] == ["gpu"]
    assert v.outside[0].reason == (
        "4,096 H200 GPUs: GPU type never validated (validated: A100, H100, B200)"
    )
    assert v.envelope_errors is not None and v.envelope_errors.runs == 62


def test_b200_fp8_is_compared_with_its_own_runs():
    """NVIDIA's B200 summaries (FP8; NeMo 25.02, Megatron-Bridge 25.11): the B200 has its own
    envelope, and the model's errors there (+11 to +35 % on the Llama runs) are what a B200 job
    is told, not the H100's (about 5 % on the runs nearest in size)."""
    row = by_label("Llama 3 70B, 64 B200")
    near = replace(row.config, gpus=128, dp=8)
    v = check(near)
    assert v.inside and v.compared_on == "B200"
    assert all(r.config.gpu == "b200" for r in v.nearest)
    assert v.nearest_errors is not None and v.nearest_errors.median_abs > 0.15
    bf16 = check(replace(near, precision="bf16"))
    assert [o.dimension for o in bf16.outside] == ["precision"]
    assert bf16.outside[0].reason == "precision bf16 never validated on B200 (fp8 only)"


def test_a_pipeline_engine_is_inside_only_on_a_gpu_whose_runs_used_it():
    """DeepSpeed's pipeline engine ran MT-NLG and BLOOM on A100; every H100 run is Megatron's."""
    mt = by_label("530B 2,240 GPUs")
    assert mt.config.pipeline_engine == "deepspeed" and check(mt.config).inside
    h100 = by_label("70B 768 GPUs").config
    assert h100.pipeline_engine == "megatron" and check(h100).inside
    v = check(replace(h100, pipeline_engine="deepspeed"))
    assert [o.dimension for o in v.outside] == ["pipeline_engine"]
    assert v.outside[0].reason == (
        "pipeline engine deepspeed never validated on H100 (megatron, none only)"
    )
    # without a pipeline the engine runs nothing: "none", as every pipeline-free run
    flat = by_label("1.7B 48 GPUs").config
    assert flat.pp == 1 and flat.pipeline_engine == "none" and check(flat).inside


def test_expert_parallel_beyond_the_runs_fp16_zero3_and_tcp_are_outside():
    c = replace(
        by_label("70B 768 GPUs").config,
        ep=128,
        moe=True,
        precision="fp16",
        zero=3,
        fabric_family="tcp",
    )
    v = check(c)
    assert not v.inside
    # MoE on H100 since the recipes' DeepSeek-V3 run (EP 64)
    assert {o.dimension for o in v.outside} == {"ep", "precision", "zero", "fabric_family"}
    reasons = {o.dimension: o.reason for o in v.outside}
    assert reasons["ep"] == "expert parallel 128 outside the validated 1-64 on H100"
    # FP8 on H100 since the recipes' runs of NeMo's performance summary
    assert reasons["precision"] == "precision fp16 never validated on H100 (bf16, fp8 only)"
    assert reasons["zero"] == "ZeRO stage 3 never validated on H100 (1, 2 only)"
    assert reasons["fabric_family"] == (
        "fabric family tcp never validated on H100 (infiniband, roce only)"
    )
    # the nearest runs are still reported: the H100's MoE run first (this is a MoE job), then
    # the dense 70B run itself
    assert [r.label for r in v.nearest[:2]] == ["DeepSeek-V3, 1,024 H100, 25.09", "70B 768 GPUs"]


def test_a_moe_job_is_told_the_moe_runs_errors_first():
    dsv3 = by_label("DeepSeek-V3, 1,024 H100, 25.09")
    v = check(replace(dsv3.config, gpus=512, dp=32))
    assert v.inside and v.nearest[0].label == dsv3.label
    assert v.nearest[0].error == recorded_errors()[(dsv3.source, dsv3.label)]
    # the MoE runs are few: a BF16 MoE job is told the FP8 one's error first too
    assert check(replace(dsv3.config, precision="bf16")).nearest[0].label == dsv3.label
    # a dense job of the same shape is told dense runs' errors only
    dense = check(replace(dsv3.config, moe=False, ep=1, attention="gqa"))
    assert all(not r.config.moe for r in dense.nearest)


def test_a_size_beyond_the_runs_names_the_range():
    c = replace(by_label("1.7B 48 GPUs").config, gpus=32768)  # its data parallel kept
    (o,) = check(c).outside
    assert o.dimension == "gpus" and o.validated == "8-16,384"
    assert o.reason == "GPU count 32,768 outside the validated 8-16,384 on H100"


def test_scenarios_moe_and_serving(cat):
    moe = load_scenario("examples/256-gpu-moe.yaml", catalog=cat)
    # on H100, MoE and EP 8 lie within the runs (DeepSeek-V3's EP 64 among them)
    assert validation_of(moe, cat, "ib-ndr").inside
    on_a100 = moe.model_copy(update={"cluster": moe.cluster.model_copy(update={"gpu": "a100"})})
    v = validation_of(on_a100, cat, "ib-ndr")
    assert not v.inside and {"ep", "moe"} <= {o.dimension for o in v.outside}
    serving = load_scenario("examples/inference-405b.yaml", catalog=cat)
    s = validation_of(serving, cat, "ib-ndr")
    assert s is SERVING and not s.inside and s.kind == "inference" and s.nearest == ()
    assert s.summary() == "serving is not validated: the suites hold no published serving run"


def test_frontier_example_is_nearest_to_llama3(cat):
    sc = load_scenario("examples/16k-gpu-frontier.yaml", catalog=cat)
    v = validation_of(sc, cat, "roce-400g")
    assert v.inside and v.nearest[0].label == "405B 16,384 GPUs"
    assert v.nearest[0].error == recorded_errors()[("Llama 3 paper, Table 4", "405B 16,384 GPUs")]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RUNS))
def test_a_configuration_matching_a_run_is_inside(row):
    v = check(row.config)
    assert v.inside and v.outside == ()
    assert len(v.nearest) == NEAREST_RUNS
    # the nearest run is the row itself, or one with the same shape (Korthikanti's twin rows)
    first = v.nearest[0]
    assert all(getattr(first.config, d) == getattr(row.config, d) for d in NEAR_DIMENSIONS)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_within_every_span_is_inside_and_beyond_one_is_outside(data):
    row = data.draw(st.sampled_from(RUNS))
    env = envelopes()[row.config.gpu]
    values = {}
    for dim, _ in SPANS:
        lo, hi = env.span(dim)
        values[dim] = data.draw(st.integers(lo, hi), label=dim)
    inside = replace(row.config, **values)
    assert check(inside).inside
    dim = data.draw(st.sampled_from([d for d, _ in SPANS]), label="beyond")
    _, hi = env.span(dim)
    beyond = replace(inside, **{dim: math.ceil(hi * 1.5) + 1})
    assert [o.dimension for o in check(beyond).outside] == [dim]


def test_step_prints_the_warning_and_json_carries_the_record():
    args = ("step", "examples/256-gpu-moe.yaml", "--fabric", "ib-ndr")
    cp = ("--set", "workload.parallel.cp=32")  # the runs on H100 go to 16
    proc = run(*args, *cp)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())  # the line wraps at the terminal's width
    assert "warning: ib-ndr: outside the validated range: context parallel 32 outside" in text
    assert "errors seen on the 5 nearest validated runs (" in text
    (r,) = json.loads(run(*args, *cp, "--json").stdout)
    v = r["validation"]
    assert v["inside"] is False and v["kind"] == "training" and v["compared_on"] == "H100"
    assert [o["dimension"] for o in v["outside"]] == ["cp"]
    assert len(v["nearest"]) == 5 and set(v["suites"]) <= {"held-back", "recipes"}
    assert v["nearest"][0]["label"] == "DeepSeek-V3, 1,024 H100, 25.09"  # the MoE run first
    assert v["nearest_errors"]["worst_abs"] == max(abs(n["error"]) for n in v["nearest"])


def test_step_inside_and_serving_lines():
    out = run("step", "examples/llama3-70b-512-h100.yaml", "--fabric", "ib-ndr").stdout
    assert "ib-ndr: inside the validated range" in " ".join(out.split())
    assert "warning" not in out
    serving = run("step", "examples/inference-405b.yaml").stdout
    assert "warning: roce-400g, ib-ndr, tcp-100g: serving is not validated" in " ".join(
        serving.split()
    )
    (r, *_) = json.loads(run("step", "examples/inference-405b.yaml", "--json").stdout)
    assert r["validation"]["inside"] is False and r["validation"]["kind"] == "inference"


def test_advise_carries_the_record_per_fabric():
    args = ("advise", "examples/16-gpu-finetune.yaml", "--no-break-even")
    a = json.loads(run(*args, "--json").stdout)
    for f in a["fabrics"]:
        v = f["validation"]
        assert v["inside"] is False
        # 16 GPUs lie within the H100 runs' 8-16,384 since the recipes' runs: ZeRO 3 does not
        assert {o["dimension"] for o in v["outside"]} == {"zero"}
    text = " ".join(run(*args).stdout.split())
    assert "warning: ib-ndr, roce-400g: outside the validated range: ZeRO stage 3" in text


def test_validate_suite_envelope():
    a100, h100, b200 = json.loads(run("validate", "--suite", "envelope", "--json").stdout)
    assert (b200["gpu"], b200["runs"], b200["choices"]["precision"]) == ("B200", 9, ["fp8"])
    assert (a100["gpu"], a100["runs"], h100["gpu"], h100["runs"]) == ("A100", 22, "H100", 31)
    # expert parallelism: the recipes' DeepSeek-V3 runs (EP 64 on H100, EP 8 and 32 on B200)
    assert h100["spans"]["gpus"] == [8, 16384] and h100["spans"]["ep"] == [1, 64]
    assert b200["spans"]["ep"] == [1, 32] and a100["spans"]["ep"] == [1, 1]
    assert h100["choices"]["moe"] == [False, True] and a100["choices"]["moe"] == [False]
    assert a100["choices"]["precision"] == ["bf16", "fp16"] and h100["choices"]["zero"] == [1, 2]
    assert h100["errors"]["worst_abs"] == max(abs(r.error) for r in envelopes()["h100"].runs)
    text = run("validate", "--suite", "envelope").stdout
    assert "8-16,384" in text and "1.65B-1,008B" in text
    refused = run("validate", "--suite", "envelope", "--congestion", "none")
    assert refused.returncode == 2 and "runs no model" in refused.stderr


def test_nearest_runs_share_the_gemm_rate():
    """An FP8 job is told the FP8 runs' errors (NeMo's FP8 summary: the model 4-21 % fast) and a
    BF16 job the 16-bit runs', even where an FP8 run is nearer by shape."""
    fp8_row = by_label("Llama 3 8B, 8 GPUs")  # FP8, 8 GPUs, CP 2
    assert fp8_row.config.precision == "fp8"
    bf16 = replace(fp8_row.config, precision="bf16")
    near_bf16 = check(bf16).nearest
    assert fp8_row not in near_bf16 and all(r.config.precision != "fp8" for r in near_bf16)
    assert near_bf16[0].label == "Llama 3.1 8B, 8 GPUs"  # the BF16 recipe of the same shape
    near_fp8 = check(fp8_row.config).nearest
    assert near_fp8[0] == fp8_row and all(r.config.precision == "fp8" for r in near_fp8)
    v = check(fp8_row.config)
    assert v.inside and v.nearest_errors is not None and v.nearest_errors.median_abs > 0.10
