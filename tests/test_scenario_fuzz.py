"""Property tests: any input gives a valid, resolved scenario or a clean ScenarioError."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricplan.congestion.settings import FlowSettings
from fabricplan.scenario import Scenario, ScenarioError, load_scenario, scenario_from_data

FIELDS = [
    ("name",),
    ("cluster",),
    ("cluster", "gpu"),
    ("cluster", "gpus"),
    ("cluster", "gpus_per_node"),
    ("cluster", "nics_per_node"),
    ("cluster", "fabric"),
    ("cluster", "topology"),
    ("cluster", "topology", "design"),
    ("cluster", "topology", "oversubscription"),
    ("cluster", "topology", "switch"),
    ("cluster", "roce_quality"),
    ("cluster", "routing"),
    ("cluster", "flow_control"),
    ("cluster", "flow_control", "pfc_xoff_kb"),
    ("cluster", "flow_control", "pfc_xon_kb"),
    ("cluster", "flow_control", "congestion_control"),
    ("workload",),
    ("workload", "kind"),
    ("workload", "model"),
    ("workload", "tokens"),
    ("workload", "seq_len"),
    ("workload", "global_batch"),
    ("workload", "micro_batch"),
    ("workload", "parallel"),
    ("workload", "parallel", "tp"),
    ("workload", "parallel", "pp"),
    ("workload", "parallel", "dp"),
    ("workload", "parallel", "ep"),
    ("workload", "parallel", "cp"),
    ("workload", "parallel", "zero"),
    ("workload", "parallel", "vp"),
    ("workload", "parallel", "pipeline_engine"),
    ("workload", "parallel", "pipeline_layout"),
    ("workload", "parallel", "ep_dispatch"),
    ("workload", "mtp_layers"),
    ("workload", "recompute_modules"),
    ("workload", "precision"),
    ("workload", "serving", "concurrency"),
    ("organization", "network_maturity"),
    ("organization", "growth"),
    ("organization", "growth", "target_gpus"),
    ("costs", "mode"),
    ("costs", "pue"),
    ("costs", "lifecycle_years"),
    ("bogus",),
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "h100",
            "a100",
            "ib-ndr",
            "roce-400g",
            "auto",
            "llama3-70b",
            "mixtral-8x7b",
            "tuned",
            "fat-tree",
            "qm9700",
            "fp8",
            "inference",
            "spray",
            "dcqcn",
            "deepspeed",
            "megatron",
            "mla_up_proj",
            "hierarchical",
            "Et|(tt|)*30mL",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)


def base() -> dict:
    return {
        "cluster": {"gpu": "h100", "gpus": 64, "fabric": ["ib-ndr", "roce-400g"]},
        "workload": {"model": "llama3-70b", "parallel": {"tp": 8, "pp": 2}},
    }


def check_invariants(s: Scenario) -> None:
    c = s.cluster
    assert c.gpus_per_node is not None and c.nics_per_node is not None
    assert c.nodes * c.gpus_per_node == c.gpus
    assert c.fabrics and len(set(c.fabrics)) == len(c.fabrics)
    assert FlowSettings(**c.flow_control.model_dump()).problems() == []
    if s.workload is not None:
        w = s.workload
        p = w.parallel
        assert isinstance(p.dp, int) and p.tp * p.pp * p.cp * p.dp == c.gpus
        assert w.seq_len and w.global_batch and w.global_batch % (p.dp * w.micro_batch) == 0
        if p.pipeline_engine == "deepspeed":  # its engine neither interleaves nor takes layouts
            assert p.vp == 1 and p.pipeline_layout is None


def outcome(data, overrides=()) -> None:
    try:
        s = scenario_from_data(data, overrides=overrides)
    except ScenarioError as exc:
        assert exc.problems, "an error must say what is wrong"
        for p in exc.problems:
            assert p.message and isinstance(p.field, str)
            str(p)  # renders
    else:
        check_invariants(s)


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(values)
def test_any_data_is_valid_or_a_clean_error(data):
    outcome(data)


@FAST
@given(st.lists(st.tuples(st.sampled_from(FIELDS), values), min_size=1, max_size=4))
def test_mutated_scenarios_are_valid_or_clean_errors(mutations):
    data = base()
    for path, value in mutations:
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
    outcome(data)


@FAST
@given(
    gpus=st.integers(1, 4096),
    gpn=st.sampled_from([1, 2, 4, 8, 16]),
    tp=st.sampled_from([1, 2, 3, 4, 8, 16]),
    pp=st.integers(1, 32),
    cp=st.sampled_from([1, 2, 4]),
    ep=st.sampled_from([1, 2, 4, 8]),
    model=st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x7b", "deepseek-v3"]),
    batch=st.one_of(st.none(), st.integers(1, 8192)),
)
def test_structured_plans(gpus, gpn, tp, pp, cp, ep, model, batch):
    data = {
        "cluster": {"gpus": gpus, "gpus_per_node": gpn},
        "workload": {
            "model": model,
            "global_batch": batch,
            "parallel": {"tp": tp, "pp": pp, "cp": cp, "ep": ep},
        },
    }
    outcome(data)


@FAST
@given(st.lists(st.text(max_size=30), max_size=3))
def test_any_set_override_is_valid_or_a_clean_error(overrides):
    outcome(base(), overrides)


def file_outcome(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            check_invariants(load_scenario(path))
        except ScenarioError as exc:
            assert exc.problems


@FAST
@given(st.text(max_size=200))
def test_any_text_file_is_valid_or_a_clean_error(text):
    file_outcome(text)


@FAST
@given(values)
def test_any_yaml_document_is_valid_or_a_clean_error(data):
    file_outcome(yaml.safe_dump({"cluster": data, "workload": {"model": "llama3-8b"}}))
