"""The web API fuzzed from its own OpenAPI schema: whatever a request holds, the answer is never
a server error (5xx). Bounded to a few hundred requests, about half a minute."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from fabricplan.web import create_app

# Requests generated per operation: enough to reach every field's edge values and a good share
# of random ones, within the suite's time.
EXAMPLES_PER_OPERATION = 40

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


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
