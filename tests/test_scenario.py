"""Scenario loading: defaults, overrides, and one clear message per kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from conftest import DESIGN_EXAMPLE, EXAMPLES, ROOT
from fabricplan.scenario import (
    Scenario,
    ScenarioError,
    load_scenario,
    parse_override,
    scenario_from_data,
    scenario_warnings,
    summarize,
)
from fabricplan.scenario.load import _submodel
from fabricplan.scenario.yaml_io import parse_yaml


def base() -> dict:
    return {
        "cluster": {"gpu": "h100", "gpus": 64, "fabric": ["ib-ndr", "roce-400g"]},
        "workload": {"model": "llama3-70b", "parallel": {"tp": 8, "pp": 2}},
    }


def problems_of(data, overrides=()) -> dict[str, str]:
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(data, overrides=overrides)
    out: dict[str, str] = {}
    for p in err.value.problems:
        out[p.field] = f"{out[p.field]} | {p}" if p.field in out else str(p)
    return out


def test_the_readmes_scenario_is_valid_and_complete(tmp_path: Path):
    """The README documents the format with one scenario that sets every field."""
    text = (ROOT / "README.md").read_text()
    start = text.index("name: llama3-70b-on-512-h100")
    path = tmp_path / "readme.yaml"
    path.write_text(text[start : text.index("```", start)])
    s = load_scenario(path)
    assert s.cluster.topology.spine_oversubscription == 1.0 and s.costs.optics == "policy"
    assert s.workload is not None and s.workload.parallel.tp_comm_overlap is False

    def missing(data: dict, model: type[BaseModel], at: str) -> list[str]:
        out = []
        for name, f in model.model_fields.items():
            if name not in data:
                out.append(at + name)
            elif isinstance(data[name], dict) and (sub := _submodel(f.annotation)) is not None:
                out += missing(data[name], sub, f"{at}{name}.")
        return out

    assert missing(parse_yaml(path.read_text()), Scenario, "") == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_loads(path: Path, cat):
    s = load_scenario(path)
    c = s.cluster
    assert c.nodes * c.gpus_per_node == c.gpus
    if s.workload is not None:
        p = s.workload.parallel
        assert p.tp * p.pp * p.cp * p.dp == c.gpus
        assert summarize(s, cat)["cluster"]["gpus"] == c.gpus


def test_examples_cover_the_seed_tiers():
    sizes = {load_scenario(p).cluster.gpus for p in EXAMPLES}
    assert {16, 64, 256, 1024, 16384} <= sizes
    assert any(load_scenario(p).workload.kind == "inference" for p in EXAMPLES)


def test_design_example_resolves(cat):
    s = load_scenario(DESIGN_EXAMPLE)
    assert s.name == "llama3-70b-on-512-h100"
    assert s.cluster.fabrics == ("ib-ndr", "roce-400g")
    assert s.cluster.nodes == 64
    assert s.workload.parallel.dp == 16  # 512 / (8 x 4)
    assert s.workload.tokens == 1.5e13  # "1.5e13" is a number (YAML 1.2), not text
    assert s.organization.growth.target_gpus == 2048


def test_defaults_come_from_the_catalog():
    s = scenario_from_data({"cluster": {"gpu": "a100", "gpus": 32}})
    assert s.cluster.gpus_per_node == 8 and s.cluster.nics_per_node == 8
    # default comparison: InfiniBand and RoCE at the reference node's NIC speed (200G for A100)
    assert s.cluster.fabrics == ("ib-hdr", "roce-200g")
    assert s.workload is None
    assert s.costs.gpu_hour_price == 3.0


def test_workload_defaults():
    s = scenario_from_data(base())
    w = s.workload
    assert w.parallel.dp == 4
    assert w.seq_len == 8192
    # 4M-token batch rounded up to a multiple of dp x micro_batch: 4,194,304 / 8192 = 512
    assert w.global_batch == 512 and w.global_batch % 4 == 0
    assert w.tokens == pytest.approx(20 * 70.55e9, rel=1e-3)  # Chinchilla 20 tokens/param


def test_single_fabric_string_is_a_list():
    data = base()
    data["cluster"]["fabric"] = "roce-400g"
    assert scenario_from_data(data).cluster.fabrics == ("roce-400g",)


def test_unknown_fabric_lists_the_known_ones():
    data = base()
    data["cluster"]["fabric"] = ["ib-ndr", "roce-401g"]
    msg = problems_of(data)["cluster.fabric[1]"]
    assert "unknown fabric" in msg and "did you mean 'roce-400g'" in msg
    assert "ib-hdr" in msg and "tcp-25g" in msg and "'roce-401g'" in msg


def test_tp_that_does_not_divide_the_node():
    data = base()
    data["workload"]["parallel"]["tp"] = 3
    msg = problems_of(data)["workload.parallel.tp"]
    assert "gpus_per_node (8)" in msg and "(got 3)" in msg


@pytest.mark.parametrize(
    ("path", "value", "expect"),
    [
        (("cluster", "gpus"), 0, "must be greater than 0"),
        (("cluster", "gpus"), -8, "must be greater than 0"),
        (("cluster", "gpus_per_node"), 0, "must be greater than 0"),
        (("cluster", "nics_per_node"), -1, "must be greater than 0"),
        (("workload", "parallel", "pp"), 0, "must be greater than 0"),
        (("workload", "seq_len"), -5, "must be greater than 0"),
        (("workload", "tokens"), 0, "must be greater than 0"),
        (("cluster", "gpus"), 2.5, "whole number"),
        (("cluster", "gpus"), "many", "whole number"),
        (("cluster", "roce_quality"), "great", "one of 'tuned', 'default' or 'misconfigured'"),
        (("workload", "kind"), "serving", "'training' or 'inference'"),
        (("workload", "parallel", "dp"), "all", "positive whole number or 'auto'"),
        (("workload", "parallel", "zero"), 4, "at most 3"),
        (("cluster", "topology"), "fat", "mapping"),
    ],
)
def test_bad_values_name_field_value_and_rule(path, value, expect):
    data = base()
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    problems = problems_of(data)
    field = ".".join(path)
    assert field in problems, problems
    assert expect in problems[field]
    assert f"(got {value!r})" in problems[field]


def test_unknown_key_lists_allowed_keys():
    data = base()
    data["cluster"]["colour"] = "blue"
    data["extra"] = 1
    problems = problems_of(data)
    assert "allowed here: gpu, gpus" in problems["cluster.colour"]
    assert "cluster, workload, organization, costs" in problems["extra"]


def test_all_structural_problems_reported_together():
    data = base()
    data["cluster"]["gpus"] = -1
    data["cluster"]["fabric"] = ["ib-ndr", "nope"]
    data["workload"]["model"] = "llama4"
    assert {"cluster.gpus", "cluster.fabric[1]", "workload.model"} <= set(problems_of(data))


@pytest.mark.parametrize(
    ("change", "field", "expect"),
    [
        (
            {"cluster": {"gpus": 100}},
            "cluster.gpus",
            "multiple of gpus_per_node (8); use 96 or 104",
        ),
        (
            {"cluster": {"gpu": "a100"}, "workload": {"precision": "fp8"}},
            "workload.precision",
            "a100 has no FP8",
        ),
        ({"workload": {"parallel": {"ep": 2}}}, "workload.parallel.ep", "needs an MoE model"),
        ({"workload": {"parallel": {"dp": 3}}}, "workload.parallel.dp", "that is dp = 4"),
        ({"workload": {"global_batch": 6}}, "workload.global_batch", "multiple of dp x micro"),
        (
            {"workload": {"parallel": {"pp": 16}}},
            "workload.parallel",
            "tp x pp x cp = 128 does not divide gpus (64)",
        ),
        (
            {"workload": {"model": "gpt3-175b", "parallel": {"tp": 64, "pp": 1}}},
            "workload.parallel.tp",
            "attention heads (96)",
        ),
        (
            {"cluster": {"topology": {"switch": "qm9700"}}},
            "cluster.topology.switch",
            "cannot carry roce-400g",
        ),
        (
            {"cluster": {"fabric": ["ib-xdr"], "topology": {"switch": "qm9700"}}},
            "cluster.topology.switch",
            "no port fast enough",
        ),
        ({"cluster": {"fabric": ["ib-ndr", "ib-ndr"]}}, "cluster.fabric", "more than once"),
        (
            {
                "workload": {
                    "parallel": {"tp": 8, "tp_comm_overlap": True, "sequence_parallel": False}
                }
            },
            "workload.parallel.tp_comm_overlap",
            "needs sequence_parallel: true",
        ),
        (
            {"workload": {"parallel": {"tp": 16, "pp": 1, "tp_comm_overlap": True}}},
            "workload.parallel.tp_comm_overlap",
            "tp = 16 > gpus_per_node = 8",
        ),
        (
            {"organization": {"growth": {"target_gpus": 32, "months": 12}}},
            "organization.growth.target_gpus",
            "at least cluster.gpus (64)",
        ),
    ],
)
def test_cross_field_rules(change, field, expect):
    data = base()
    for section, values in change.items():
        target = data.setdefault(section, {})
        for k, v in values.items():
            if isinstance(v, dict) and isinstance(target.get(k), dict):
                target[k] = {**target[k], **v}
            else:
                target[k] = v
    problems = problems_of(data)
    assert field in problems, problems
    assert expect in problems[field]


@pytest.mark.parametrize("routing", ["ecmp", "flowlet", "adaptive", "spray", None])
def test_routing_and_flow_control_are_accepted(routing):
    data = base()
    flow = {
        "pfc_xoff_kb": 400,
        "pfc_xon_kb": 300.5,
        "buffer_kb": 2048,
        "ecn_kmin_kb": 5,
        "ecn_kmax_kb": 200,
        "congestion_control": "none",
    }
    data["cluster"] |= {"routing": routing, "flow_control": flow}
    c = scenario_from_data(data).cluster
    assert c.routing == routing
    assert c.flow_control.model_dump() == {
        **flow,
        "pfc_xoff_kb": 400.0,
        "buffer_kb": 2048.0,
        "ecn_kmin_kb": 5.0,
        "ecn_kmax_kb": 200.0,
    }
    plain = scenario_from_data(base()).cluster
    assert plain.routing is None and set(plain.flow_control.model_dump().values()) == {None}


def test_scenario_show_names_the_routing_that_will_be_simulated(cat):
    data = base()
    shown = [f["routing"] for f in summarize(scenario_from_data(data), cat)["fabrics"]]
    assert shown == ["adaptive", "ecmp"]  # ib-ndr's and roce-400g's defaults (catalog)
    data["cluster"]["routing"] = "spray"
    assert [f["routing"] for f in summarize(scenario_from_data(data), cat)["fabrics"]] == [
        "spray",
        "spray",
    ]


@pytest.mark.parametrize(
    ("field", "value", "others", "expect"),
    [
        ("routing", "ecmp-hash", {}, "one of 'ecmp', 'flowlet', 'adaptive' or 'spray'"),
        ("routing", 3, {}, "one of 'ecmp', 'flowlet', 'adaptive' or 'spray'"),
        ("flow_control.pfc_xoff_kb", -5.0, {}, "a queue depth in KB, above 0 and at most"),
        ("flow_control.buffer_kb", 0.0, {}, "a queue depth in KB, above 0 and at most"),
        ("flow_control.ecn_kmax_kb", 2e6, {}, "at most 1,048,576"),
        ("flow_control.buffer_kb", "big", {}, "must be a number"),
        ("flow_control.congestion_control", "timely", {}, "must be one of dcqcn, none"),
        ("flow_control.pfc_xon_kb", 600.0, {"pfc_xoff_kb": 500}, "at most pfc_xoff_kb (500)"),
        ("flow_control.ecn_kmin_kb", 300.0, {"ecn_kmax_kb": 200}, "at most ecn_kmax_kb (200)"),
        ("flow_control.pause", 1, {}, "allowed here: pfc_xoff_kb, pfc_xon_kb, buffer_kb"),
    ],
)
def test_bad_routing_and_flow_control_name_field_value_and_what_is_allowed(
    field, value, others, expect
):
    data = base()
    name = field.removeprefix("flow_control.")
    if field.startswith("flow_control."):
        data["cluster"]["flow_control"] = {**others, name: value}
    else:
        data["cluster"][field] = value
    problems = problems_of(data)
    assert f"cluster.{field}" in problems, problems
    assert expect in problems[f"cluster.{field}"]
    assert f"(got {value!r})" in problems[f"cluster.{field}"]


def test_flow_control_without_a_roce_fabric_is_flagged(cat):
    data = base()
    data["cluster"] |= {"fabric": "ib-ndr", "flow_control": {"pfc_xoff_kb": 400}}
    warnings = {w.field: w for w in scenario_warnings(scenario_from_data(data), cat)}
    assert "no RoCE fabric" in warnings["cluster.flow_control"].message
    data["cluster"]["fabric"] = ["ib-ndr", "roce-400g"]
    assert "cluster.flow_control" not in {
        w.field for w in scenario_warnings(scenario_from_data(data), cat)
    }


def test_a_fabric_rented_on_other_nodes_is_flagged(cat):
    """TCPX comes on A3 High with 4 NICs: compared on an 8-NIC H100 node the scenario gives, it
    is flagged, with the node it is rented as; at 4 NICs, or on a fabric with no rented node
    type, it is not. A fabric's own entry that no node type has is flagged under its key."""
    data = base()
    data["cluster"] |= {"gpu": "h100", "fabric": ["ib-ndr", "tcpx-200g"], "nics_per_node": 8}
    warnings = {w.field: w for w in scenario_warnings(scenario_from_data(data), cat)}
    w = warnings["cluster.nics_per_node"]
    assert "tcpx-200g with h100 is rented as a3-highgpu-8g (4 NICs)" in w.message
    assert w.value == 8
    data["cluster"]["nics_per_node"] = 4
    assert "cluster.nics_per_node" not in {
        w.field for w in scenario_warnings(scenario_from_data(data), cat)
    }
    del data["cluster"]["nics_per_node"]
    data["cluster"]["nics_per_fabric"] = {"tcpx-200g": 2}
    warnings = {w.field: w for w in scenario_warnings(scenario_from_data(data), cat)}
    assert warnings["cluster.nics_per_fabric.tcpx-200g"].value == 2


def test_a_fabric_only_rented_comes_on_the_nodes_that_rent_it(cat):
    """Without nics_per_node, a fabric only rented gets the NIC count of the node types that
    rent it with the scenario's GPU (EFA on p5: 32 x 100G; TCPX on A3 High: 4 x 200G), the
    others the GPU's reference node (8), and nothing is flagged; a given nics_per_node keeps
    every fabric on it, and a fabric's own entry wins over both."""
    data = base()
    data["cluster"] |= {"fabric": ["ib-ndr", "efa-gen2-100g", "tcpx-200g", "tcpxo-200g"]}
    s = scenario_from_data(data)
    nics = {f: s.cluster.nics_for(f) for f in s.cluster.fabrics}
    assert nics == {"ib-ndr": 8, "efa-gen2-100g": 32, "tcpx-200g": 4, "tcpxo-200g": 8}
    assert s.cluster.nics_per_node == 8
    assert not [w for w in scenario_warnings(s, cat) if "rented as" in w.message]
    shown = {f["id"]: (f["nics_per_node"], f["rented_as"]) for f in summarize(s, cat)["fabrics"]}
    assert shown == {
        "ib-ndr": (8, []),
        "efa-gen2-100g": (32, ["p5.48xlarge"]),
        "tcpx-200g": (4, ["a3-highgpu-8g"]),
        "tcpxo-200g": (8, ["a3-megagpu-8g"]),
    }
    given = scenario_from_data(data, overrides=["cluster.nics_per_node=8"])
    assert {given.cluster.nics_for(f) for f in given.cluster.fabrics} == {8}
    own = scenario_from_data(data, overrides=["cluster.nics_per_fabric.efa-gen2-100g=16"])
    assert own.cluster.nics_for("efa-gen2-100g") == 16
    assert own.cluster.nics_for("tcpx-200g") == 4
    # on a GPU no provider rents it with, the fabric keeps the reference node
    data["cluster"] |= {"gpu": "b200", "fabric": ["ib-ndr", "tcpx-200g"]}
    assert scenario_from_data(data).cluster.nics_for("tcpx-200g") == 8


def test_nics_per_fabric_names_compared_fabrics_and_counts_in_range():
    data = base()
    data["cluster"]["nics_per_fabric"] = {"tcpx-200g": 4}
    msg = problems_of(data)["cluster.nics_per_fabric.tcpx-200g"]
    assert "tcpx-200g is not in cluster.fabric (ib-ndr, roce-400g)" in msg
    data["cluster"]["nics_per_fabric"] = {"roce-400g": 0}
    assert "cluster.nics_per_fabric.roce-400g" in problems_of(data)
    data["cluster"]["nics_per_fabric"] = {"roce-400g": 4}
    s = scenario_from_data(data)
    assert (s.cluster.nics_for("roce-400g"), s.cluster.nics_for("ib-ndr")) == (4, 8)


def test_moe_expert_parallel_is_accepted():
    data = base()
    data["workload"] = {"model": "mixtral-8x7b", "parallel": {"tp": 2, "ep": 8}}
    assert scenario_from_data(data).workload.parallel.ep == 8


def test_set_overrides_any_field():
    s = load_scenario(
        DESIGN_EXAMPLE,
        overrides=[
            "cluster.gpus=1024",
            "cluster.fabric=[roce-400g]",
            "costs.pue=1.2",
            "organization.growth.months=36",
            "workload.parallel.dp=auto",
        ],
    )
    assert s.cluster.gpus == 1024 and s.cluster.nodes == 128
    assert s.cluster.fabrics == ("roce-400g",)
    assert s.costs.pue == 1.2
    assert s.organization.growth.months == 36
    assert s.workload.parallel.dp == 32


def test_set_to_unknown_field_is_rejected():
    with pytest.raises(ScenarioError) as err:
        load_scenario(DESIGN_EXAMPLE, overrides=["cluster.gpu_count=8"])
    assert err.value.problems[0].field == "cluster.gpu_count"


@pytest.mark.parametrize("bad", ["cluster.gpus", "=3", "cluster..gpus=1", "name.x=1"])
def test_bad_set_syntax(bad):
    with pytest.raises(ScenarioError) as err:
        load_scenario(DESIGN_EXAMPLE, overrides=[bad])
    assert err.value.problems[0].field == "--set"


def test_parse_override_types_values():
    assert parse_override("cluster.gpus=1024") == (["cluster", "gpus"], 1024)
    assert parse_override("workload.tokens=1e12") == (["workload", "tokens"], 1e12)
    assert parse_override("cluster.fabric=[a, b]") == (["cluster", "fabric"], ["a", "b"])
    assert parse_override("name=[open") == (["name"], "[open")  # unparsable YAML stays text


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_file_problems(tmp_path: Path):
    cases = {
        "": "empty",
        "- 1\n- 2\n": "must be a mapping",
        "cluster: [1, 2\n": "line 2",
        "cluster:\n  gpus: 8\n  gpus: 16\n": "appears twice (first on line 2)",
    }
    for text, expect in cases.items():
        with pytest.raises(ScenarioError) as err:
            load_scenario(write(tmp_path, text))
        assert expect in str(err.value), (text, str(err.value))
    with pytest.raises(ScenarioError, match="cannot read file"):
        load_scenario(tmp_path / "missing.yaml")


def test_name_defaults_to_file_stem(tmp_path: Path):
    s = load_scenario(write(tmp_path, "cluster: {gpus: 8}\n"))
    assert s.name == "s"


def test_warnings_do_not_block(cat):
    s = scenario_from_data(
        {
            "cluster": {"gpus": 16384, "fabric": "ib-ndr", "roce_quality": "default"},
            "workload": {
                "model": "llama3-405b",
                "parallel": {"tp": 8, "pp": 16},
                "seq_len": 200000,
            },
        }
    )
    fields = {w.field for w in scenario_warnings(s, cat)}
    assert fields == {"workload.parallel.pp", "workload.seq_len", "cluster.roce_quality"}


def test_summary_numbers(cat):
    s = load_scenario(DESIGN_EXAMPLE)
    summary = summarize(s, cat)
    ib, roce = summary["fabrics"]
    assert ib["injection_per_node_GBps"] == pytest.approx(8 * 48.0)
    assert roce["roce_quality"] == "tuned" and ib["roce_quality"] is None
    w = summary["workload"]
    assert w["tokens_per_step"] == 1024 * 8192
    # 6 N T / (GPUs x peak): 6 x 70.55e9 x 1.5e13 / (512 x 989e12) s
    expected_days = 6 * 70.5537e9 * 1.5e13 / (512 * 989e12) / 86400
    assert w["days_at_peak"] == pytest.approx(expected_days, rel=1e-4)


def test_pcie_limit_is_flagged(cat):
    # a ConnectX-8 (Gen6 x16, ~121 GB/s) carries 800G in a Gen6 host, but an H100 node's
    # Gen5 slots train it at 63 GB/s, below 800G's ~94 GB/s of goodput
    s = scenario_from_data({"cluster": {"gpu": "h100", "gpus": 16, "fabric": "roce-800g"}})
    facts = summarize(s, cat)["fabrics"][0]
    assert facts["pcie_limited"] is True
    assert facts["goodput_per_port_GBps"] == pytest.approx(63.015, rel=1e-4)
    ndr = scenario_from_data({"cluster": {"gpu": "h100", "gpus": 16, "fabric": "ib-ndr"}})
    assert summarize(ndr, cat)["fabrics"][0]["pcie_limited"] is False


@pytest.mark.parametrize(
    ("speed", "expect"),
    [
        (400, ("ib-ndr", "roce-400g")),
        (200, ("ib-hdr", "roce-200g")),
        (800, ("ib-xdr", "roce-800g")),
        (1600, ("ib-xdr", "roce-800g")),
        (100, ("ib-hdr", "roce-100g")),
        (50, ("ib-hdr", "roce-100g")),
    ],
)
def test_default_fabrics_follow_the_nic_speed(cat, speed, expect):
    """Same line rate, else the fastest the NIC can run, else the slowest there is."""
    from fabricplan.scenario.load import default_fabrics_at

    assert default_fabrics_at(cat, speed) == expect


def test_gradient_reduction_dtype_reaches_the_plan():
    """``workload.grad_reduce``: fp32 (Megatron-LM's default) or bf16 (NeMo's recipes), into the
    plan the step model prices; anything else names the field and what is allowed."""
    from fabricplan.workload.plan import plans_from_scenario

    data = base()
    data["workload"]["grad_reduce"] = "bf16"
    p = plans_from_scenario(scenario_from_data(data))
    assert p.grad_reduce_bf16 and p.grad_bytes == 2.0
    assert not plans_from_scenario(scenario_from_data(base())).grad_reduce_bf16
    data["workload"]["grad_reduce"] = "fp8"
    problem = problems_of(data)["workload.grad_reduce"]
    assert "fp8" in problem and "fp32" in problem and "bf16" in problem


def test_the_fp8_recipe_needs_fp8_and_current_scaling_costs_time():
    from test_cli import run

    base = ("step", "examples/llama3-70b-512-h100.yaml", "--json")
    refused = run(*base[:2], "--set", "workload.fp8_recipe=current")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "workload.fp8_recipe" in refused.stderr and "needs precision fp8" in refused.stderr
    fp8 = ("--set", "workload.precision=fp8")
    delayed = json.loads(run(*base, *fp8).stdout)
    current = json.loads(run(*base, *fp8, "--set", "workload.fp8_recipe=current").stdout)
    for d, c in zip(delayed, current, strict=True):
        assert c["breakdown"]["compute_s"] > d["breakdown"]["compute_s"]
