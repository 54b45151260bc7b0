"""Expected time-to-train: checkpoints and interruptions beside the ideal run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DESIGN_EXAMPLE
from fabricplan.catalog import default_catalog
from fabricplan.catalog.reliability import Cause, load_reliability
from fabricplan.cost import fabric_cost, load_assumptions
from fabricplan.scenario import load_scenario
from fabricplan.workload import WorkloadError, evaluate_scenario
from fabricplan.workload.interruptions import (
    checkpoint_bytes,
    checkpoint_plan,
    expected_run,
    hours_per_interruption,
)
from fabricplan.workload.shapes import shape_of

CAT = default_catalog()
REL = load_reliability()
L405 = checkpoint_bytes(shape_of(CAT.model("llama3-405b")))
L70 = checkpoint_bytes(shape_of(CAT.model("llama3-70b")))


def test_table5_rates_add_up_to_the_published_counts():
    unplanned = [c for c in REL.causes if not c.planned]
    assert sum(c.observed_events for c in unplanned) == 419
    assert sum(c.observed_events for c in REL.causes) == 466
    (fabric,) = [c for c in REL.causes if c.fabric]
    assert fabric.name == "network switch/cable" and fabric.observed_events == 35


def test_one_cause_analytic_case():
    """One unplanned cause at 1e-4 per GPU-hour on 1,000 GPUs (0.1 an hour, MTBF 10 h), 1 GB/s
    of storage per GPU, a 1 TB checkpoint (1 s to write), a 0.25 h restart."""
    rel = replace(
        REL,
        causes=(Cause("x", "test", 1, per_gpu_hour=1e-4),),
        restart_h=0.25,
        checkpoint_bytes_per_s_per_gpu=1e9,
    )
    run = expected_run(100.0, 1000, 1e12, rel, "infiniband", "high")
    interval_s = math.sqrt(2 * 1.0 * 10 * 3600)  # Young: sqrt(2 C MTBF) = 268.3 s
    assert run.checkpoint_write_s == pytest.approx(1.0)
    assert run.checkpoint_interval_h * 3600 == pytest.approx(interval_s)
    loss = interval_s / 2 / 3600 + 0.25  # half an interval of work + restart, per event
    ckpt_h = 100 * 3600 / interval_s * 1.0 / 3600
    wall = (100 + ckpt_h) / (1 - 0.1 * loss)
    assert run.expected_h == pytest.approx(wall)
    # N events x loss per event is the time they cost
    assert run.interruptions == pytest.approx(0.1 * wall)
    assert run.interruption_h == pytest.approx(run.interruptions * loss)
    assert run.expected_h == pytest.approx(100 + run.checkpoint_h + run.interruption_h)
    assert run.goodput == pytest.approx(100 / wall)
    assert run.fabric_interruptions == 0


def test_llama3_405b_54_days_reproduce():
    """16,384 H100 for 54 days of wall-clock time: Table 5's 419 unexpected and 47 planned
    interruptions, and the paper's >90 % effective training time."""
    run = expected_run(1000.0, 16384, L405, REL, "roce", "high")
    per_54_days = 54 * 24 / run.expected_h
    assert run.interruptions * per_54_days == pytest.approx(466, abs=0.5)
    planned = next(c for c in run.by_cause if c.cause == "planned maintenance")
    assert (run.interruptions - planned.interruptions) * per_54_days == pytest.approx(419, abs=0.5)
    # 14.4 per 1,000 GPU-years is the same 35 events, rounded
    assert run.fabric_interruptions * per_54_days == pytest.approx(35, abs=0.2)
    assert REL.observed_goodput_above < run.goodput < 0.95


def test_fabric_events_and_their_price_are_the_cost_models():
    sc = load_scenario(DESIGN_EXAMPLE, catalog=CAT)
    a = load_assumptions()
    for r in evaluate_scenario(sc, CAT, ["ib-ndr", "roce-400g"]):
        e = r.expected
        assert e is not None
        c = fabric_cost(sc, CAT, a, r.fabric)
        assert c.risk_hours_per_event == pytest.approx(e.restart_h + e.lost_work_per_interruption_h)
        per_run = c.risk_events_per_year * e.expected_h / (365 * 24)
        assert e.fabric_interruptions == pytest.approx(per_run)
        assert e.fabric_interruption_h == pytest.approx(per_run * c.risk_hours_per_event)


def test_serving_loses_only_the_restart():
    sc = load_scenario(DESIGN_EXAMPLE.with_name("inference-405b.yaml"), catalog=CAT)
    assert hours_per_interruption(sc, CAT, "roce") == pytest.approx(10 / 60)


def test_a_job_that_never_finishes_is_refused():
    with pytest.raises(WorkloadError, match="never finishes"):
        expected_run(1000.0, 1_000_000, L405, REL, "roce", "low")


@settings(max_examples=60, deadline=None)
@given(
    ideal_h=st.floats(1.0, 1e5),
    gpus=st.integers(8, 100_000),
    family=st.sampled_from(["infiniband", "roce", "tcp", "uec"]),
    maturity=st.sampled_from(["low", "medium", "high"]),
)
def test_expected_is_never_below_ideal(ideal_h, gpus, family, maturity):
    run = expected_run(ideal_h, gpus, L70, REL, family, maturity)
    assert run.expected_h >= ideal_h
    assert 0 < run.goodput <= 1
    assert run.expected_h == pytest.approx(ideal_h + run.checkpoint_h + run.interruption_h)


@settings(max_examples=60, deadline=None)
@given(gpus=st.integers(8, 50_000), more=st.integers(1, 50_000))
def test_more_gpus_are_interrupted_more_often(gpus, more):
    def per_day(n: int) -> float:
        run = expected_run(100.0, n, L70, REL, "roce", "medium")
        return run.interruptions / run.expected_h * 24

    assert per_day(gpus + more) > per_day(gpus)


@settings(max_examples=40, deadline=None)
@given(ideal_h=st.floats(10.0, 1e4), gpus=st.integers(64, 32_768))
def test_a_less_mature_roce_loses_more_to_the_fabric(ideal_h, gpus):
    loss = {
        m: expected_run(ideal_h, gpus, L70, REL, "roce", m).fabric_interruption_h
        for m in ("low", "medium", "high")
    }
    assert loss["low"] > loss["medium"] > loss["high"] > 0
    ib = expected_run(ideal_h, gpus, L70, REL, "infiniband", "low").fabric_interruption_h
    assert loss["low"] > ib


def test_checkpoint_interval_shrinks_as_the_job_grows():
    small = checkpoint_plan(REL, 512, L70, "infiniband", "medium")
    large = checkpoint_plan(REL, 16384, L70, "infiniband", "medium")
    # write time and MTBF both fall as 1/GPUs, so Young's interval does too
    assert large.interval_s == pytest.approx(small.interval_s * 512 / 16384, rel=1e-9)
