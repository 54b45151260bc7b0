"""The web API fuzzed from its own OpenAPI schema, and the example scenario with random
overrides: whatever a request holds, the answer is never a server error (5xx). Bounded to a few
hundred requests, under half a minute."""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from fabricplan.web import create_app
from fabricplan.web.models import DEMO_SCENARIO

# Requests generated per operation: enough to reach every field's edge values and a good share
# of random ones, within the suite's time.
EXAMPLES_PER_OPERATION = 40

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())
CLIENT = TestClient(create_app())


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same requests on every run: a failure is reproducible
)
def test_no_request_is_a_server_error(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error])


def test_the_fuzz_covers_every_operation() -> None:
    paths = {op.path for op in (r.ok() for r in schema.get_all_operations())}
    assert {"/api/scenario/check", "/api/advise", "/api/grade", "/api/report"} <= paths


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# Overrides on the example scenario: the fields the form edits, most with values a person might
# type (so the models run), some with hostile ones (out of range, wrong type, empty, huge).
PLAUSIBLE = {
    "cluster.gpus": ["64", "128", "256", "1024", "2048", "520"],
    "cluster.gpu": ["h100", "h200", "b200", "a100"],
    "cluster.fabric": ["[ib-ndr, roce-400g]", "[ib-xdr, roce-800g]", "[roce-200g]", "[tcp-100g]"],
    "cluster.topology.design": ["fat-tree", "rail-optimized", "rail-only", "dragonfly"],
    "cluster.topology.oversubscription": ["1", "2", "3.5"],
    "cluster.roce_quality": ["tuned", "default", "misconfigured"],
    "workload.model": ["llama3-70b", "llama3-8b", "mixtral-8x7b"],
    "workload.parallel.tp": ["1", "2", "4", "8"],
    "workload.parallel.pp": ["1", "2", "4", "8"],
    "costs.mode": ["own", "rent"],
    "costs.gpu_hour_price": ["0.5", "2", "3.5"],
    "organization.network_maturity": ["low", "medium", "high"],
    "organization.growth.target_gpus": ["2048", "4096"],
}
HOSTILE = st.one_of(
    st.integers(-10, 10**7).map(str),
    st.sampled_from(["0", "1e30", "nan", "-inf", "[]", "{}", "", "null", "true", "'8'"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=20),
)
KEYS = sorted(PLAUSIBLE)
PLAUSIBLE_SET = st.sampled_from(KEYS).flatmap(
    lambda k: st.sampled_from(PLAUSIBLE[k]).map(lambda v: f"{k}={v}")
)
HOSTILE_SET = st.tuples(st.sampled_from(KEYS), HOSTILE).map("=".join)
OVERRIDES = st.lists(
    st.one_of(PLAUSIBLE_SET, PLAUSIBLE_SET, PLAUSIBLE_SET, HOSTILE_SET), max_size=3
)


@given(sets=OVERRIDES, path=st.sampled_from(["/api/scenario/check", "/api/step", "/api/advise"]))
@settings(max_examples=60, deadline=None, derandomize=True)
def test_the_example_scenario_with_any_overrides_is_never_a_server_error(sets, path):
    body = {"scenario": DEMO_SCENARIO, "set": sets}
    if path != "/api/scenario/check":
        body["congestion"] = "none"  # the model's paths, in bounded time
    if path == "/api/advise":
        body["break_even"] = False
    r = CLIENT.post(path, json=body)
    assert r.status_code in (200, 422), (sets, r.status_code, r.text[:300])
