from __future__ import annotations

from pathlib import Path

import pytest

from fabricplan.catalog import Catalog, default_catalog

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
DESIGN_EXAMPLE = ROOT / "examples" / "llama3-70b-512-h100.yaml"


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return default_catalog()


@pytest.fixture(autouse=True)
def _fresh_workload_memo():
    """Each test computes the workload model afresh: a test that patches the model must not be
    answered from evaluations another test kept (workload.memo, and the sweep engine's cache)."""
    from fabricplan.sweep.engine import CACHE
    from fabricplan.workload.memo import MEMO

    MEMO.clear()
    CACHE.clear()
    yield
