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
