"""The plan search: the best plan is at least as fast as any valid plan, every plan it returns
runs and fits, the alternatives' reasons are real differences, and ``fabricplan plan``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.planning import SearchSpace, batches, evaluate, job_of, search_scenario
from fabricplan.planning.search import reasons
from fabricplan.planning.space import CP_MIN_TOKENS_PER_RANK, MICRO_BATCH_MAX
from fabricplan.scenario import ScenarioError, load_scenario
from fabricplan.workload import comm, shape_of, training_step
from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario
from fabricplan.workload.step import STEP_PARTS

ROOT = Path(__file__).resolve().parent.parent
CAT = default_catalog()
# small enough to search in well under a second: llama3-8b on 16 H100, 8k context
SMALL = ROOT / "examples" / "16-gpu-finetune.yaml"


@cache
def _small(overrides: tuple[str, ...] = ()):
    sc = load_scenario(SMALL, overrides=list(overrides), catalog=CAT)
    return sc, search_scenario(sc, CAT, backend=NO_CONGESTION, top=5)


def _per_token(c) -> float:
    return 1.0 / c.tokens_per_s


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8]),
    vp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2]),
    mb=st.sampled_from([1, 2, 4, 8]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
    overlap_dp=st.booleans(),
    tp_comm_overlap=st.booleans(),
)
def test_no_valid_plan_is_faster_than_the_search_s_best(
    tp, pp, vp, cp, mb, zero, recompute, overlap_dp, tp_comm_overlap
):
    sc, found = _small()
    sets = [
        f"workload.parallel.{k}={v}"
        for k, v in (
            ("tp", tp),
            ("pp", pp),
            ("vp", vp),
            ("cp", cp),
            ("zero", zero),
            ("tp_comm_overlap", str(tp_comm_overlap).lower()),
        )
    ]
    sets += [
        f"workload.micro_batch={mb}",
        f"workload.recompute={recompute}",
        f"workload.overlap_dp={str(overlap_dp).lower()}",
    ]
    try:
        hand = load_scenario(SMALL, overrides=sets, catalog=CAT)
    except ScenarioError:
        assume(False)
    w = hand.workload
    m = CAT.model(w.model)
    # the space's own bounds: whole stages and chunks, long enough context per CP rank
    assume(m.layers % pp == 0 and (m.layers // pp) % vp == 0 and mb <= MICRO_BATCH_MAX)
    assume(cp == 1 or w.seq_len // cp >= CP_MIN_TOKENS_PER_RANK)
    assume(vp == 1 or (w.global_batch // (w.parallel.dp * mb)) % pp == 0)
    fab = sc.cluster.fabrics[0]
    st_ = training_step(
        shape_of(m),
        plans_from_scenario(hand),
        hardware_from_scenario(hand, CAT, fab),
        backend=NO_CONGESTION,
    )
    assume(bool(st_.memory.fits[0]))
    best = found[0].result.best
    assert best is not None
    hand_per_token = float(st_.time[0] / st_.tokens[0])
    assert _per_token(best) <= hand_per_token * (1 + 1e-12)


def test_every_plan_returned_divides_the_cluster_fits_and_loads():
    sc, found = _small()
    cap = found[0].result.capacity_GB
    for f in found:
        r = f.result
        assert r.best is not None and r.fitting > 0 and r.evaluated >= r.fitting
        for c in [r.best, *(a.plan for a in r.alternatives)]:
            assert c.tp * c.pp * c.cp * c.dp == sc.cluster.gpus
            assert c.global_batch % (c.dp * c.micro_batch) == 0
            assert (c.dp * c.cp) % c.ep == 0
            assert c.fits and c.memory_GB <= cap
            sets = [
                f"workload.parallel.{k}={getattr(c, k)}" for k in ("tp", "pp", "vp", "cp", "zero")
            ]
            load_scenario(
                SMALL, overrides=[*sets, f"workload.micro_batch={c.micro_batch}"], catalog=CAT
            )
        for a in r.faster_unfit:
            assert not a.plan.fits and a.plan.memory_GB > cap
            assert a.plan.tokens_per_s > r.best.tokens_per_s
            assert a.reasons[0].part == "memory"
        # alternatives are other layouts, slower than the best, in order
        layouts = [a.plan.layout for a in r.alternatives]
        assert r.best.layout not in layouts and len(set(layouts)) == len(layouts)
        rel = [a.relative for a in r.alternatives]
        assert all(x <= 1.0 for x in rel) and rel == sorted(rel, reverse=True)


def test_reasons_are_real_breakdown_differences():
    _, found = _small()
    r = found[0].result
    assert r.alternatives
    for a in r.alternatives:
        assert a.reasons == reasons(a.plan, r.best)
        scale = (
            r.best.tokens_per_s * r.best.step_time_s / (a.plan.tokens_per_s * a.plan.step_time_s)
        )
        for why in a.reasons:
            if why.part in STEP_PARTS:
                real = a.plan.breakdown[why.part] * scale - r.best.breakdown[why.part]
                assert why.delta_s > 0 and np.isclose(why.delta_s, real)
                assert why.text().startswith(f"+{why.delta_s:.3g} s")
            else:
                assert why.part == "total"


def test_the_space_lists_only_valid_plans_without_duplicates():
    sc, _ = _small()
    job = job_of(sc, CAT)
    seen = set()
    for f, p in batches(job, SearchSpace()):
        assert np.all(p.tp * p.pp * p.cp * p.dp == job.gpus)
        assert np.all(p.global_batch % (p.dp * p.micro_batch) == 0)
        assert np.all((p.vp == 1) | (p.pp > 1))
        if f.tp_comm_overlap:
            assert np.all(p.tp > 1)
        if f.cp_comm != "p2p":
            assert np.all(p.cp > 1)
        for row in zip(p.tp, p.pp, p.vp, p.cp, p.ep, p.micro_batch, p.zero, strict=True):
            key = (*row, f)
            assert key not in seen
            seen.add(key)


def test_the_search_s_table_matches_the_step_model_plan_by_plan():
    sc, _ = _small()
    job, hw = job_of(sc, CAT), hardware_from_scenario(sc, CAT, sc.cluster.fabrics[0])
    space = SearchSpace(
        zero=(1,),
        recompute=("selective",),
        overlap_dp=(True,),
        tp_comm_overlap=(False,),
        cp_comm=("p2p",),
    )
    table = evaluate(shape_of(job.model), job, hw, space, NO_CONGESTION)
    ((_, plans),) = list(batches(job, space))
    for i in (0, len(plans) // 2, len(plans) - 1):
        one = plans.take(i)
        st_ = training_step(shape_of(job.model), one, hw, backend=NO_CONGESTION)
        assert table.time[i] == st_.time[0]


def test_equal_collectives_priced_once_equal_each_priced_alone(monkeypatch):
    """Pricing the distinct collectives of a large batch once gives what pricing every one
    does, bit for bit."""
    cat = CAT
    s = shape_of(cat.model("mixtral-8x7b"))
    sc = load_scenario(ROOT / "examples" / "256-gpu-moe.yaml", catalog=cat)
    hw = hardware_from_scenario(sc, cat, "roce-400g")
    job = job_of(sc, cat)
    _, plans = next(iter(batches(job, SearchSpace())))
    assert len(plans) * 3 > comm.DISTINCT_MIN_ROWS
    fast = training_step(s, plans, hw)
    monkeypatch.setattr(comm, "DISTINCT_MIN_ROWS", 10**12)
    slow = training_step(s, plans, hw)
    for part in ("time", "tp_comm", "ep_comm", "dp_comm", "pp_comm", "cp_comm"):
        assert np.array_equal(getattr(fast, part), getattr(slow, part))
    single = training_step(s, plans.take(slice(0, 1)), hw)
    assert single.time[0] == fast.time[0]


def test_the_best_plan_beats_the_scenario_s_own():
    _, found = _small()
    for f in found:
        d = f.to_dict()
        assert d["scenario_plan"]["fits"]
        assert d["best_over_scenario_plan"] >= 0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "160",
        "PYTHONPATH": str(ROOT / "src"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "fabricplan", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_plan_json_and_table():
    proc = _cli(
        "plan", "examples/16-gpu-finetune.yaml", "--json", "--congestion", "none", "--top", "2"
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["fabric"] for d in doc] == ["ib-ndr", "roce-400g"]
    d = doc[0]
    assert d["congestion_backend"] == "none" and len(d["alternatives"]) == 2
    assert d["best"]["fits"] and d["plans_evaluated"] >= d["plans_fitting"] > 0
    assert all(a["why"] and a["why"][0]["text"] for a in d["alternatives"])
    proc = _cli(
        "plan",
        "examples/16-gpu-finetune.yaml",
        "--congestion",
        "none",
        "--top",
        "1",
        "--fabric",
        "ib-ndr",
    )
    assert proc.returncode == 0, proc.stderr
    assert "the fastest plan that fits" in proc.stdout and "best" in proc.stdout
    assert "…" not in proc.stdout


def test_cli_plan_refuses_serving_and_bad_options():
    proc = _cli("plan", "examples/inference-405b.yaml", "--json")
    assert proc.returncode == 2
    assert "training" in json.loads(proc.stdout)["error"]
    proc = _cli("plan", "examples/16-gpu-finetune.yaml", "--fabric", "nope")
    assert proc.returncode == 2 and "unknown id" in proc.stderr
    proc = _cli("plan", "examples/16-gpu-finetune.yaml", "--top", "-1")
    assert proc.returncode == 2
