"""The providers catalog (seed 002's table) and the `providers` command."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from fabricplan.catalog.providers import (
    QUESTIONS,
    Provider,
    filter_providers,
    load_providers,
    scorecard,
)
from fabricplan.cli.app import app
from test_cli import run

ROCE = ["hot-aisle", "nscale", "tensorwave", "oci"]
HYPERSCALERS = ["aws", "gcp", "azure", "oci"]
FIELDS = {
    "id",
    "name",
    "fabric",
    "ib_availability",
    "gbps_per_gpu_low",
    "gbps_per_gpu_high",
    "speed_text",
    "availability",
    "topology",
    "topology_documented",
    "ib_price_note",
    "source",
    "as_of",
    "nodes",
}


def invoke(*args: str):
    # catch_exceptions=False: a crash fails the test with its traceback instead of an exit code
    return CliRunner().invoke(
        app, ["providers", *args], env={"COLUMNS": "100"}, catch_exceptions=False
    )


@pytest.fixture(scope="module")
def providers() -> dict[str, Provider]:
    return {p.id: p for p in load_providers()}


def test_catalog_has_the_seeds_17_rows_and_the_hyperscalers(providers):
    assert len(providers) == 21
    seed = [p for p in providers.values() if p.id not in HYPERSCALERS]
    assert len(seed) == 17 and not any(p.nodes for p in seed)
    assert all(p.source == "seed 002: provider comparison table" for p in seed)
    assert all(p.as_of == "undated (seed 002)" for p in seed)
    assert [p.id for p in providers.values()][-4:] == HYPERSCALERS


def test_every_node_type_names_catalog_ids(providers, cat):
    nodes = {n.id: n for p in providers.values() for n in p.nodes}
    assert len(nodes) == 15
    for n in nodes.values():
        cat.fabric(n.fabric), cat.gpu(n.gpu)
    assert nodes["p5.48xlarge"].fabric == "efa-gen2-100g" and nodes["p5.48xlarge"].nics == 32
    assert nodes["a3-highgpu-8g"].gbps_per_gpu == 100
    assert nodes["nd96isr-h100-v5"].fabric == "ib-ndr"


def test_cli_predict_p5():
    """32 EFA ports run as 8 NCCL devices of 4 x 12 GB/s; 2 nodes reach the NVLS-Tree cap."""
    result = invoke("--predict", "p5.48xlarge", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["provider"] == "aws" and out["system"]["nics_per_node"] == 8
    assert out["system"]["nic_GBps"] == pytest.approx(48.0)
    big = out["rows"][-1]
    assert big["algorithm"] == "NVLSTree" and big["busbw_GBps"] == pytest.approx(461, rel=0.01)
    assert out["rows"][0]["time_us"] == pytest.approx(63.0, abs=0.5)


def test_cli_predict_errors():
    assert invoke("--predict", "nope").exit_code == 2
    assert invoke("--nodes", "4").exit_code == 2


@pytest.mark.parametrize(
    "pid",
    ["fluidstack", "gmi-cloud", "hyperstack", "nebius", "runpod", "sf-compute", "voltage-park"],
)
def test_not_documented_topology_is_none(providers, pid):
    p = providers[pid]
    assert p.topology is None and p.topology_documented is False
    assert scorecard(p)["topology"] == {"answer": None, "status": "ask"}


def test_seed_values_kept(providers):
    assert [pid for pid, p in providers.items() if p.fabric == "roce"] == ROCE
    assert providers["coreweave"].topology == "Non-blocking fat-tree (rail-optimized)"
    assert (providers["runpod"].gbps_per_gpu_low, providers["runpod"].gbps_per_gpu_high) == (
        200,
        400,
    )
    vast = providers["vast.ai"]
    assert vast.gbps_per_gpu_low is None and vast.speed_text == "Varies by host"
    assert "2.49" in (providers["voltage-park"].ib_price_note or "")
    assert sum(p.ib_price_note is not None for p in providers.values()) == 1


def test_model_rejects_inconsistent_rows(providers):
    row = providers["crusoe"].model_dump()
    for bad in (
        {"topology": None},
        {"gbps_per_gpu_high": None},
        {"fabric": "roce"},
        {"id": "Crusoe"},
        {"extra": 1},
    ):
        with pytest.raises(ValidationError):
            Provider.model_validate({**row, **bad})


def test_scorecard_statuses(providers):
    keys = [k for k, _ in QUESTIONS]
    assert keys == [
        "topology",
        "generation",
        "validated",
        "nccl_benchmarks",
        "roce_tuning",
        "issue_resolution",
    ]
    card = scorecard(providers["vultr"])
    assert list(card) == keys
    assert card["topology"]["status"] == card["generation"]["status"] == "known"
    assert all(card[k] == {"answer": None, "status": "ask"} for k in keys[2:])
    # a rate without a generation, and RoCE without a version, are only partial answers
    assert scorecard(providers["crusoe"])["generation"]["status"] == "partial"
    assert scorecard(providers["nscale"])["generation"]["status"] == "partial"


def test_filters(providers):
    ps = list(providers.values())
    assert [p.id for p in filter_providers(ps, "roce", None)] == ROCE
    ib = {p.id for p in filter_providers(ps, "ib", None)}
    assert {"lambda", "runpod", "sf-compute", "hyperstack"} <= ib  # IB in some tiers only
    assert ib.isdisjoint({"ovhcloud", "vast.ai", *ROCE})
    assert filter_providers(ps, None, 8) == ps
    big = {p.id for p in filter_providers(ps, None, 16)}
    assert "crusoe" not in big and "vast.ai" not in big and "lambda" in big
    with pytest.raises(ValueError, match="ib, roce"):
        filter_providers(ps, "nope", None)


@given(
    fabric=st.sampled_from([None, "ib", "roce"]),
    a=st.none() | st.integers(min_value=1, max_value=100_000),
    b=st.integers(min_value=1, max_value=100_000),
)
def test_filter_subset_and_monotone(fabric, a, b):
    ps = load_providers()
    small = filter_providers(ps, fabric, a)
    assert all(p in ps for p in small)
    lo, hi = (a, b) if a is None or a <= b else (b, a)
    assert set(filter_providers(ps, fabric, hi)) <= set(filter_providers(ps, fabric, lo))


def test_cli_json_roce():
    result = invoke("--fabric", "roce", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["id"] for r in out] == ROCE


def test_cli_json_all():
    result = invoke("--json")
    out = json.loads(result.stdout)
    assert len(out) == 21
    for r in out:
        assert set(r) == FIELDS | {"scorecard"}
        assert set(r["scorecard"]) == {k for k, _ in QUESTIONS}
        assert {v["status"] for v in r["scorecard"].values()} <= {"known", "partial", "ask"}


def test_cli_bad_fabric():
    result = invoke("--fabric", "nope")
    assert result.exit_code == 2
    assert "--fabric" in result.stderr and "'nope'" in result.stderr
    assert "ib, roce" in result.stderr
    assert "Traceback" not in result.output


def test_cli_table_lists_questions():
    result = invoke("--min-gpus", "16")
    assert result.exit_code == 0
    assert "CoreWeave" in result.stdout and "Crusoe" not in result.stdout
    assert "no cluster sizes" in result.stdout
    for i, (key, _) in enumerate(QUESTIONS, start=1):
        assert f"Q{i} {key}:" in result.stdout


def test_installed_entry_point():
    proc = run("providers", "--fabric", "roce", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == ROCE
