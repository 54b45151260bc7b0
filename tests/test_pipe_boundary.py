"""A pipeline stage's boundaries by engine: Megatron's paired exchanges and scatter/gather,
DeepSpeed's one-at-a-time transfers and its rebuilds of TP-split tensors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import shape_of, training_step
from fabricplan.workload.pipe_boundary import (
    DEEPSPEED_REBUILDS_PER_MICRO_BATCH,
    MEGATRON_GATHERS_PER_MICRO_BATCH,
    TRANSFERS_PER_MICRO_BATCH,
    boundary_seconds,
    gather_ranks,
    rebuild_hbm_share,
)
from fabricplan.workload.plan import Hardware, Plans
from test_cli import run

CAT = default_catalog()
A100 = Hardware(CAT.gpu("a100"), 256, 8, 8, "ib-hdr", "fat-tree", catalog=CAT)
LLAMA = shape_of(CAT.model("llama3-70b"))


def test_who_gathers_what_it_receives():
    tp, pp = np.array([1, 8, 8, 8]), np.array([4, 4, 1, 4])
    sp = np.array([False, False, False, True])
    # Megatron gathers the TP ranks' slices without sequence parallelism only, and only
    # between stages; DeepSpeed rebuilds whenever TP > 1 splits a pipeline's tensors
    assert gather_ranks("megatron", tp, pp, sp).tolist() == [1, 8, 1, 1]
    assert gather_ranks("deepspeed", tp, pp, sp).tolist() == [1, 8, 1, 8]


def test_boundary_seconds_analytically():
    t, g, nbytes, hbm = 1e-3, 2e-4, 1e8, 2e12

    def seconds(engine: str, pp: int, ranks: int = 8, gather: float = g, vp: int = 1) -> float:
        return float(boundary_seconds(engine, pp, vp, t, gather, ranks, nbytes, hbm).total)

    # Megatron, a middle stage: two paired exchanges, two gathers after the receives
    assert seconds("megatron", 4) == pytest.approx(2 * t + 2 * g)
    assert TRANSFERS_PER_MICRO_BATCH == {"megatron": 2, "deepspeed": 4}
    assert (MEGATRON_GATHERS_PER_MICRO_BATCH, DEEPSPEED_REBUILDS_PER_MICRO_BATCH) == (2, 3)
    # DeepSpeed, a middle stage: four blocking transfers; three rebuilds, each the gather plus a
    # zero fill and a clone of the whole tensor and the rank's slice copied in (3 + 2/8)
    assert float(rebuild_hbm_share(8)) == 3.25
    rebuild = g + 3.25 * nbytes / hbm
    assert seconds("deepspeed", 4) == pytest.approx(4 * t + 3 * rebuild)
    # without TP nothing is split: no gather, no rebuild
    assert seconds("deepspeed", 4, ranks=1, gather=0.0) == pytest.approx(4 * t)
    # a chain of two stages: each receives one way only
    assert seconds("deepspeed", 2) == pytest.approx(2 * t + 2 * rebuild)
    assert seconds("megatron", 2) == pytest.approx(2 * t + g)
    # interleaved over two stages the chain is longer: middle-stage counts again
    assert seconds("megatron", 2, vp=2) == pytest.approx(2 * t + 2 * g)
    # only the transfers cross between stages: the gathers are TP-group collectives and the
    # rebuilds' fills and copies memory-bound kernels
    deep = boundary_seconds("deepspeed", 4, 1, t, g, 8, nbytes, hbm)
    assert float(deep.sends) == pytest.approx(4 * t)
    assert float(deep.gathers) == pytest.approx(3 * g)
    assert float(deep.copies) == pytest.approx(3 * 3.25 * nbytes / hbm)
    assert float(boundary_seconds("megatron", 4, 1, t, g, 8, nbytes, hbm).copies) == 0.0


def _plans(engine: str, **kw: object) -> Plans:
    base: dict[str, object] = {
        "tp": 8,
        "pp": 4,
        "dp": 8,
        "micro_batch": 1,
        "global_batch": 512,
        "seq_len": 4096,
        "sp": False,
        "recompute": "full",
        "pipeline_engine": engine,
    }
    return Plans.of(**(base | kw))


def test_deepspeed_costs_its_extra_boundary_work_in_every_slot_of_the_pipeline():
    mega = training_step(LLAMA, _plans("megatron"), A100, backend=NO_CONGESTION)
    deep = training_step(LLAMA, _plans("deepspeed"), A100, backend=NO_CONGESTION)
    m, pp = 512 / 8, 4
    # more sends between stages, a third gather in the TP group, the rebuilds' copies
    parts = ("pp_comm", "tp_comm", "compute")
    more = [float(getattr(deep, k)[0]) - float(getattr(mega, k)[0]) for k in parts]
    assert all(d > 0 for d in more)
    extra = sum(more) / m  # per micro-batch
    # the boundary is on the critical path: every slot of the 1F1B pipeline (m + pp - 1) pays it
    assert float(deep.time[0] - mega.time[0]) == pytest.approx((m + pp - 1) * extra, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8]),
    sp=st.booleans(),
    mb=st.sampled_from([1, 2]),
)
def test_deepspeed_is_never_faster_and_equal_without_a_pipeline(tp, pp, sp, mb):
    kw = {"tp": tp, "pp": pp, "sp": sp and tp > 1, "micro_batch": mb, "dp": 256 // (tp * pp)}
    kw["global_batch"] = kw["dp"] * mb * 8
    mega = training_step(LLAMA, _plans("megatron", **kw), A100, backend=NO_CONGESTION)
    deep = training_step(LLAMA, _plans("deepspeed", **kw), A100, backend=NO_CONGESTION)
    assert float(deep.time[0]) >= float(mega.time[0])
    if pp == 1:
        assert float(deep.time[0]) == float(mega.time[0])
    # a step is never shorter than the stage boundaries it must wait for
    assert float(deep.time[0]) >= float(deep.pp_comm[0])


def test_megatron_gathers_only_without_sequence_parallelism():
    with_sp = training_step(LLAMA, _plans("megatron", sp=True), A100, backend=NO_CONGESTION)
    without = training_step(LLAMA, _plans("megatron"), A100, backend=NO_CONGESTION)
    # the same sends either way: a gather is TP-group work, not a pipeline send
    assert float(without.pp_comm[0]) == float(with_sp.pp_comm[0]) > 0
    # with sequence parallelism Megatron gathers nothing, DeepSpeed still rebuilds
    deep = training_step(LLAMA, _plans("deepspeed", sp=True), A100, backend=NO_CONGESTION)
    assert float(deep.tp_comm[0]) > float(with_sp.tp_comm[0])
    assert float(deep.compute[0]) > float(with_sp.compute[0])  # the rebuilds' copies


def _scenario(tmp_path: Path, parallel: str) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(
        "name: ds\ncluster: {gpu: a100, gpus: 256, fabric: [ib-hdr]}\n"
        "workload:\n  model: llama3-70b\n  global_batch: 512\n  recompute: full\n"
        f"  parallel: {{{parallel}}}\n"
    )
    return f


def test_cli_prices_the_deepspeed_pipeline_and_refuses_what_it_cannot_run(tmp_path: Path):
    base = "tp: 8, pp: 4, sequence_parallel: false"
    steps = {}
    for engine in ("megatron", "deepspeed"):
        f = _scenario(tmp_path, f"{base}, pipeline_engine: {engine}")
        out = json.loads(run("step", str(f), "--json").stdout)
        steps[engine] = out[0]["step_time_s"]
    assert steps["deepspeed"] > steps["megatron"]
    assert "deepspeed pipeline" in run("step", str(f)).stdout
    bad = _scenario(tmp_path, f"{base}, pipeline_engine: deepspeed, vp: 2")
    r = run("step", str(bad))
    assert r.returncode == 2
    assert "workload.parallel.pipeline_engine" in r.stderr and "vp = 1" in r.stderr
    laid = _scenario(
        tmp_path, f"{base}, pipeline_engine: deepspeed, pipeline_layout: 'E(t*20|)*3t*20L'"
    )
    r = run("step", str(laid))
    assert r.returncode == 2 and "takes no pipeline_layout" in r.stderr
    assert "(got 'E(t*20|)*3t*20L')" in r.stderr


def test_the_search_keeps_deepspeed_plans_uninterleaved():
    from fabricplan.planning.space import Job, SearchSpace, batches

    def vps(engine: str) -> set[float]:
        job = Job(CAT.model("llama3-70b"), 256, 8, 4096, 512, pipeline_engine=engine)
        out: set[float] = set()
        for _, plans in batches(job, SearchSpace()):
            assert plans.pipeline_engine == engine
            out |= set(plans.vp.tolist())
        return out

    assert max(vps("megatron")) > 1  # the space interleaves where Megatron can
    assert vps("deepspeed") == {1.0}


@pytest.mark.parametrize("engine", ["megatron", "deepspeed"])
def test_one_plan_is_its_row_of_the_batch(engine: str):
    tp, pp = np.array([1, 2, 4, 8, 8, 2]), np.array([2, 4, 8, 1, 4, 8])
    dp = 256 // (tp * pp)
    batch = _plans(engine, tp=tp, pp=pp, dp=dp, global_batch=dp * 16, sp=tp == 2)
    whole = training_step(LLAMA, batch, A100)
    for i in range(len(batch)):
        one = training_step(LLAMA, batch.take(i), A100)
        # the scalar path prices the same boundaries bit for bit
        assert float(one.time[0]) == float(whole.time[i])
        assert float(one.pp_comm[0]) == float(whole.pp_comm[i])


def test_cli_plan_search_says_it_keeps_the_deepspeed_pipeline_uninterleaved(tmp_path: Path):
    f = _scenario(tmp_path, "tp: 8, pp: 4, sequence_parallel: false, pipeline_engine: deepspeed")
    out = run("plan", str(f), "--top", "10").stdout
    assert "every plan runs DeepSpeed's pipeline engine" in out
    assert not re.search(r"\bvp [2-9]", out)  # no interleaved layout among the plans shown


def test_scenario_show_names_the_deepspeed_pipeline(tmp_path: Path):
    deep = _scenario(tmp_path, "tp: 8, pp: 4, sequence_parallel: false, pipeline_engine: deepspeed")
    assert "DeepSpeed's pipeline engine" in run("scenario", "show", str(deep)).stdout
    flat = _scenario(tmp_path, "tp: 8, pp: 1, pipeline_engine: deepspeed")  # no pipeline to run
    assert "DeepSpeed" not in run("scenario", "show", str(flat)).stdout
