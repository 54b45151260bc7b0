"""The user's cluster, workload, organisation and money, validated.

>>> from fabricplan.scenario import load_scenario
>>> s = load_scenario("examples/llama3-70b-512-h100.yaml", overrides=["cluster.gpus=1024"])
>>> s.cluster.nodes
128
"""

from fabricplan.scenario.checks import check_scenario, scenario_warnings
from fabricplan.scenario.errors import Problem, ScenarioError
from fabricplan.scenario.load import (
    default_fabric,
    load_scenario,
    resolve,
    scenario_from_data,
    scenario_from_text,
)
from fabricplan.scenario.models import (
    Cluster,
    Costs,
    Growth,
    Organization,
    Parallel,
    Scenario,
    Serving,
    Topology,
    Workload,
)
from fabricplan.scenario.overrides import apply_overrides, parse_override
from fabricplan.scenario.summary import summarize

__all__ = [
    "Cluster",
    "Costs",
    "Growth",
    "Organization",
    "Parallel",
    "Problem",
    "Scenario",
    "ScenarioError",
    "Serving",
    "Topology",
    "Workload",
    "apply_overrides",
    "check_scenario",
    "default_fabric",
    "load_scenario",
    "parse_override",
    "resolve",
    "scenario_from_data",
    "scenario_from_text",
    "scenario_warnings",
    "summarize",
]
