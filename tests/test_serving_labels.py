"""Serving figures are per replica and in total, labelled as such: total = per replica x
replicas, and the scenario's concurrency is per replica."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.workload.inference import ServingRates
from test_cli import run

SERVING = "examples/inference-405b.yaml"


@given(st.integers(1, 512), st.integers(1, 4096), st.floats(0.1, 1e5), st.floats(0.1, 1e5))
def test_serving_totals_are_per_replica_times_replicas(replicas, streams, out_s, in_s):
    r = ServingRates(replicas, streams, out_s, in_s)
    d = r.to_dict()
    assert d["streams_total"] == replicas * streams
    assert d["output_tokens_per_s_total"] == pytest.approx(replicas * out_s)
    assert d["input_tokens_per_s_total"] == pytest.approx(replicas * in_s)


def test_step_serving_json_is_per_replica_and_total():
    out = run("step", SERVING, "--set", "workload.serving.concurrency=128", "--json")
    assert out.returncode == 0, out.stderr
    for r in json.loads(out.stdout):
        # 64 GPUs in replicas of tp 8 x pp 2: 4 replicas of 128 streams each
        assert r["replicas"] == 4 and r["streams_per_replica"] == 128
        assert r["streams_total"] == 512
        per, total = r["output_tokens_per_s_per_replica"], r["output_tokens_per_s_total"]
        assert total == pytest.approx(4 * per) and r["tokens_per_s"] == total
        # each request brings 2,048 prompt tokens for its 512 output tokens
        assert r["input_tokens_per_s_per_replica"] == pytest.approx(4 * per)
        assert r["input_tokens_per_s_total"] == pytest.approx(
            4 * r["input_tokens_per_s_per_replica"]
        )
        # one replica decodes its batch of 128 each inter-token interval
        assert per == pytest.approx(128 / r["itl_s"])


def test_step_serving_table_labels_per_replica_and_total():
    out = run("step", SERVING)
    assert out.returncode == 0, out.stderr
    js = {r["fabric"]: r for r in json.loads(run("step", SERVING, "--json").stdout)}
    assert "4 replicas of 16 GPUs (tp 8 x pp 2)" in out.stdout
    assert "32 concurrent streams per replica" in out.stdout and "128 in total" in out.stdout
    for head in ("output tok/s per replica", "output tok/s total", "input tok/s total"):
        assert head in out.stdout
    ib = next(line for line in out.stdout.splitlines() if "│ ib-ndr" in line and "," in line)
    per = js["ib-ndr"]["output_tokens_per_s_per_replica"]
    assert f"{per:,.0f}" in ib and f"{4 * per:,.0f}" in ib


def test_scenario_show_says_concurrency_is_per_replica():
    out = run("scenario", "show", SERVING, "--json")
    sv = json.loads(out.stdout)["workload"]["serving"]
    assert sv["concurrency"] == 32 and sv["replicas"] == 4 and sv["streams_total"] == 128
    assert "concurrency 32 per" in run("scenario", "show", SERVING).stdout
