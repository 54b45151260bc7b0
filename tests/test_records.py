"""The typed records the layers hand each other print as the documents they replaced: the same
keys, in the same order, holding the records' own figures."""

from __future__ import annotations

from conftest import ROOT
from fabricplan.advise import advise
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.scenario import load_scenario
from fabricplan.workload import ServingFigures, TrainingFigures, evaluate_scenario

TRAINING_KEYS = [
    "fabric",
    "kind",
    "step_time_s",
    "tokens_per_s",
    "tflops_per_gpu",
    "hw_tflops_per_gpu",
    "mfu",
    "comm_exposed_fraction",
    "time_to_train_days",
    "gpu_hours",
    "memory_per_gpu_GB",
    "breakdown",
    "validation",
    "expected_time_to_train_days",
    "expected_gpu_hours",
    "goodput",
    "expected_run",
]
SERVING_KEYS = [
    "fabric",
    "kind",
    "step_time_s",
    "ttft_s",
    "itl_s",
    "tokens_per_s",
    "replicas",
    "streams_per_replica",
    "streams_total",
    "output_tokens_per_s_per_replica",
    "output_tokens_per_s_total",
    "input_tokens_per_s_per_replica",
    "input_tokens_per_s_total",
    "tflops_per_gpu",
    "mfu",
    "comm_exposed_fraction",
    "network_fraction",
    "time_to_train_days",
    "gpu_hours",
    "memory_per_gpu_GB",
    "breakdown",
    "validation",
    "expected_time_to_train_days",
    "expected_gpu_hours",
    "goodput",
]


def test_a_training_result_prints_its_figures_in_the_documents_order(cat):
    sc = load_scenario(ROOT / "examples" / "64-gpu-70b-training.yaml", catalog=cat)
    for r in evaluate_scenario(sc, cat, backend=NO_CONGESTION):
        f = r.figures
        assert isinstance(f, TrainingFigures) and r.serving is None and r.kind == "training"
        d = r.to_dict()
        assert list(d) == TRAINING_KEYS
        assert (d["step_time_s"], d["mfu"], d["gpu_hours"]) == (f.step_time_s, f.mfu, f.gpu_hours)
        assert d["expected_run"] == r.expected_run_document() and r.expected is not None
        assert d["goodput"] == r.expected.goodput < 1.0
        assert list(f.to_dict()) == TRAINING_KEYS[1:12]


def test_a_serving_result_prints_its_rates_in_the_documents_order(cat):
    sc = load_scenario(ROOT / "examples" / "inference-405b.yaml", catalog=cat)
    for r in evaluate_scenario(sc, cat, backend=NO_CONGESTION):
        f = r.serving
        assert isinstance(f, ServingFigures) and r.training is None
        d = r.to_dict()
        assert list(d) == SERVING_KEYS
        assert d["output_tokens_per_s_total"] == f.output_tokens_per_s == f.tokens_per_s
        assert d["replicas"] == f.rates.replicas > 0
        assert (d["goodput"], d["time_to_train_days"], r.expected_run_document()) == (None,) * 3


def test_the_advice_prints_each_fabric_as_its_record(cat):
    sc = load_scenario(ROOT / "examples" / "64-gpu-70b-training.yaml", catalog=cat)
    a = advise(sc, cat, backend=NO_CONGESTION, break_even=False)
    d = a.to_dict()
    assert d["recommendation"]["fabric"] == a.recommendation.fabric
    assert d["recommendation"]["reasons"] == a.recommendation.reasons
    assert d["break_even_gpus"] == {"gpus": None, "note": "not computed"}
    for doc, f in zip(d["fabrics"], a.fabrics, strict=True):
        assert doc["fabric"] == f.fabric == f.result.fabric
        assert doc["cost_same_work_usd"] == f.cost_same_work_usd
        assert doc["step_time_s"] == f.step_time_s == f.result.figures.step_time_s
        assert doc["replicas"] is None and f.rates is None  # training serves no tokens
    assert [s["swing_usd"] for s in d["sensitivity"]] == [s.swing_usd for s in a.sensitivity]
    assert d["uncertainty"]["p_cheapest"] == a.uncertainty.p_cheapest
    assert [q["question"] for q in d["questions"]] == [q.question for q in a.questions]
