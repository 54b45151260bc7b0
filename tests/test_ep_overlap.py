"""Expert all-to-alls behind another micro-batch's compute (ep_comm_overlap): phase by phase,
only in paired micro-batches, never below either stream."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.planning import SearchSpace, batches, job_of, search_scenario
from fabricplan.scenario import load_scenario
from fabricplan.workload import Hardware, Plans, training_step
from fabricplan.workload.ep_overlap import merged_layer_exposed, paired_microbatches
from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario
from fabricplan.workload.shapes import shape_of
from test_cli import run

CAT = default_catalog()
times = st.floats(0.0, 10.0, allow_nan=False)


def test_each_all_to_all_hides_only_behind_its_own_phase():
    # every phase's compute outlasts its all-to-alls: nothing shows
    assert float(merged_layer_exposed(1.0, 2.0, 2.0, 2.0, 2.0)) == 0.0
    # no compute: all four show
    assert float(merged_layer_exposed(1.0, 0.0, 0.0, 0.0, 0.0)) == 4.0
    # a = 1; combine(bwd) beside attention fwd 0.5 shows 0.5; dispatch(fwd) beside MLP bwd 0.2
    # shows 0.8; dispatch(bwd) beside MLP fwd 2 hides; combine(fwd) beside attention bwd 3
    # hides: 1.3 exposed although the layer's 5.7 s of compute dwarfs the 4 s of all-to-alls
    assert float(merged_layer_exposed(1.0, 0.5, 2.0, 3.0, 0.2)) == pytest.approx(1.3)
    # the recomputed forward's all-to-alls go with the backward's dispatch
    assert float(merged_layer_exposed(1.0, 2.0, 2.0, 2.0, 2.0, extra_bwd=2.0)) == 1.0


@given(times, times, times, times, times, times)
def test_a_merged_layer_is_never_shorter_than_either_stream(a, af, mf, ab, mb, x):
    exposed = float(merged_layer_exposed(a, af, mf, ab, mb, x))
    comm, compute = 4 * a + x, af + mf + ab + mb
    assert -1e-9 <= exposed <= comm + 1e-9
    assert compute + exposed >= comm - 1e-9


def test_only_a_forward_and_another_micro_batchs_backward_pair():
    # no pipeline: the first forward and the last backward run alone
    assert float(paired_microbatches(8, 1, 1)) == 7.0
    # interleaved, 8 stages x 4 chunks: rank 0 warms up with 7 x 2 + 3 x 8 = 38 chunks,
    # 9.5 micro-batches
    assert float(paired_microbatches(128, 8, 4)) == pytest.approx(128 - 9.5)
    assert float(paired_microbatches(4, 8, 4)) == 0.0


def _mixtral(**kw):
    s = shape_of(CAT.model("mixtral-8x7b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=256, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=2, pp=1, dp=128, ep=8, global_batch=1024, seq_len=4096, **kw)
    return s, p, hw


def test_with_compute_to_spare_only_the_unpaired_micro_batch_shows():
    s, p, hw = _mixtral()
    off = training_step(s, p, hw, backend=NO_CONGESTION)
    on = training_step(s, replace(p, ep_comm_overlap=True), hw, backend=NO_CONGESTION)
    # 8 micro-batches: 7 pair up and hide their all-to-alls, the first forward's and the last
    # backward's show (one micro-batch's worth)
    assert on.ep_comm_total[0] == off.ep_comm_total[0]
    assert on.ep_comm[0] == pytest.approx(off.ep_comm[0] / 8, rel=1e-9)
    hidden = off.ep_comm[0] - on.ep_comm[0]
    # the hidden all-to-alls hold SMs beside the compute, which loses them
    assert on.overlap_slowdown[0] > off.overlap_slowdown[0]
    assert on.time[0] < off.time[0] - 0.9 * hidden
    assert on.time[0] >= on.compute[0] and on.time[0] >= on.ep_comm_total[0]


def test_a_dense_model_is_unchanged_bit_for_bit():
    s = shape_of(CAT.model("llama3-8b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=64, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=1, pp=1, dp=64, global_batch=256, seq_len=8192)
    off = training_step(s, p, hw, backend=NO_CONGESTION)
    on = training_step(s, replace(p, ep_comm_overlap=True), hw, backend=NO_CONGESTION)
    assert on.time[0] == off.time[0] and on.breakdown() == off.breakdown()


def test_step_hides_the_moe_examples_all_to_alls():
    args = ("step", "examples/256-gpu-moe.yaml", "--json")
    off = {r["fabric"]: r for r in json.loads(run(*args).stdout)}
    on_run = run(*args, "--set", "workload.parallel.ep_comm_overlap=true")
    on = {r["fabric"]: r for r in json.loads(on_run.stdout)}
    for fabric in ("ib-ndr", "roce-400g"):
        b_off, b_on = off[fabric]["breakdown"], on[fabric]["breakdown"]
        assert b_on["ep_comm_s"] == pytest.approx(b_off["ep_comm_s"] / 8, rel=1e-6)
        assert on[fabric]["step_time_s"] < off[fabric]["step_time_s"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("workload.parallel.ep=1",), "needs ep > 1"),
        (("workload.parallel.pp=2", "workload.parallel.dp=auto"), "needs vp > 1 when pp > 1"),
    ],
)
def test_the_overlap_asks_for_what_it_needs(sets, message):
    args = ["step", "examples/256-gpu-moe.yaml", "--set", "workload.parallel.ep_comm_overlap=true"]
    for s in sets:
        args += ["--set", s]
    out = run(*args)
    assert out.returncode == 2
    assert "workload.parallel.ep_comm_overlap" in out.stderr and message in out.stderr
    assert "Traceback" not in out.stderr


def test_the_plan_search_tries_the_overlap_only_where_megatron_allows_it():
    sc = load_scenario("examples/256-gpu-moe.yaml", catalog=CAT)
    tried = 0
    for flags, plans in batches(job_of(sc, CAT), SearchSpace()):
        if flags.ep_comm_overlap:
            assert plans.ep_comm_overlap
            assert ((plans.ep > 1) & ((plans.pp == 1) | (plans.vp > 1))).all()
            tried += len(plans)
    assert tried > 0
    # the best plan found is no slower than the scenario's own plan with the overlap on
    own = sc.workload.parallel.model_copy(update={"ep_comm_overlap": True})
    hand = plans_from_scenario(
        sc.model_copy(update={"workload": sc.workload.model_copy(update={"parallel": own})})
    )
    assert hand.ep_comm_overlap
    shape = shape_of(CAT.model(sc.workload.model))
    for found in search_scenario(sc, CAT, backend=NO_CONGESTION):
        hw = hardware_from_scenario(sc, CAT, found.result.fabric)
        hand_t = float(training_step(shape, hand, hw, backend=NO_CONGESTION).time[0])
        best = found.result.best
        assert best is not None and best.step_time_s <= hand_t * (1 + 1e-9)
