"""The sweep engine: records equal the direct evaluation, dependent fields follow or the
combination is skipped with its reason, the DuckDB store's columns and values."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DESIGN_EXAMPLE
from fabricplan.scenario import load_scenario
from fabricplan.scenario.yaml_io import parse_yaml
from fabricplan.sweep.engine import CACHE, Spec, evaluate_variants
from fabricplan.sweep.executors import InProcess, Local
from fabricplan.sweep.grid import parse_grid
from fabricplan.sweep.records import output_columns
from fabricplan.sweep.run import run_sweep, variants
from fabricplan.sweep.store import StoreError, load
from fabricplan.workload import evaluate_scenario

BASE = parse_yaml(DESIGN_EXAMPLE.read_text())


def test_step_records_equal_direct_evaluation(cat):
    axes = parse_grid(["cluster.gpus=256,1024"])
    vs = variants(BASE, axes, cat)
    records = evaluate_variants(vs, Spec("step", cat))
    assert [r.point for r in records] == [{"cluster.gpus": 256}, {"cluster.gpus": 1024}]
    for r in records:
        sc = load_scenario(DESIGN_EXAMPLE, overrides=[f"cluster.gpus={r.point['cluster.gpus']}"])
        direct = evaluate_scenario(sc, cat)
        assert [o.fabric for o in r.outcomes] == [d.fabric for d in direct]
        for o, d in zip(r.outcomes, direct, strict=True):
            assert o.outputs.step_time_s == d.figures.step_time_s
            assert o.outputs.mfu == d.figures.mfu
            assert o.outputs.expected_gpu_hours == d.expected_gpu_hours


def test_advise_records_equal_advise(cat):
    from fabricplan.advise import advise

    axes = parse_grid(["costs.gpu_hour_price=2.5"])
    (r,) = evaluate_variants(variants(BASE, axes, cat), Spec("advise", cat))
    sc = load_scenario(DESIGN_EXAMPLE, overrides=["costs.gpu_hour_price=2.5"])
    a = advise(sc, cat)
    for o, f in zip(r.outcomes, a.fabrics, strict=True):
        assert o.outputs.cost_same_work_usd == f.cost_same_work_usd
        assert o.outputs.tco_usd == f.tco_usd
        assert o.outputs.recommendation == a.recommendation.fabric
        assert o.outputs.p_cheapest == a.uncertainty.p_cheapest[o.fabric]
        assert o.outputs.break_even_gpus == a.break_even_gpus.gpus


def test_dependent_fields_follow_or_skip_with_reason(cat):
    # the example grows to 2,048 GPUs: at 4,096 the target follows instead of failing
    axes = parse_grid(["cluster.gpus=4096", "workload.parallel.pp=4,3"])
    v4096, v_pp3 = variants(BASE, axes, cat)
    assert v4096.scenario is not None
    assert v4096.scenario.organization.growth.target_gpus == 4096
    assert "organization.growth.target_gpus -> 4096" in v4096.followed
    # a plan that does not divide the size is skipped, with the check's words
    assert v_pp3.scenario is None
    assert "tp x pp x cp = 24 does not divide gpus (4096)" in v_pp3.skipped
    records = evaluate_variants([v4096, v_pp3], Spec("step", cat))
    assert records[0].ok and not records[1].ok and "does not divide" in records[1].skipped


def test_a_written_dp_follows_the_swept_size(cat):
    base = {**BASE, "workload": {**BASE["workload"], "parallel": {"tp": 8, "pp": 4, "dp": 16}}}
    (v,) = variants(base, parse_grid(["cluster.gpus=1024"]), cat)
    assert v.scenario is not None and v.scenario.workload.parallel.dp == 32
    assert "workload.parallel.dp -> auto" in v.followed


def test_equal_contents_are_evaluated_once(cat, monkeypatch):
    import fabricplan.sweep.executors as ex

    calls = []
    real = ex.run_chunk
    monkeypatch.setattr(
        ex, "run_chunk", lambda ctx, chunk: calls.append(len(chunk)) or real(ctx, chunk)
    )
    axes = parse_grid(["cluster.gpus=512", "workload.parallel.dp=auto,16"])
    # dp auto is 16 at 512 GPUs: one content, two combinations
    vs = variants(BASE, axes, cat)
    records = evaluate_variants(vs, Spec("step", cat), executor=InProcess())
    assert sum(calls) == 1 and len(records) == 2
    assert records[0].scenario_hash == records[1].scenario_hash
    assert records[0].combination != records[1].combination
    # and again from the cache, without evaluating
    evaluate_variants(vs, Spec("step", cat), executor=InProcess())
    assert sum(calls) == 1
    CACHE.clear()


def test_store_columns_and_values(cat, tmp_path: Path):
    axes = parse_grid(["cluster.gpus=256,512", "workload.parallel.pp=4,3"])
    out = tmp_path / "s.duckdb"
    s = run_sweep(BASE, axes, Spec("cost", cat), out, InProcess())
    assert (s.combinations, s.evaluated, s.skipped) == (4, 4, 2)
    df = load(out)
    names = list(df.columns)
    assert names[:4] == ["combination", "combination_index", "cluster.gpus", "workload.parallel.pp"]
    assert names[4:8] == ["fabric", "status", "reason", "followed"]
    assert names[8:-4] == [n for n, _ in output_columns("cost")]
    assert names[-4:] == ["what", "fabricplan_version", "scenario_hash", "time"]
    assert len(df) == 2 * 2 + 2  # two fabrics per evaluated combination, one row per skip
    ok = df[df.status == "ok"]
    assert set(ok.fabric) == {"ib-ndr", "roce-400g"}
    sc = load_scenario(DESIGN_EXAMPLE, overrides=["cluster.gpus=256"])
    (ib, _) = evaluate_scenario(sc, cat)
    row = ok[(ok["cluster.gpus"] == 256) & (ok.fabric == "ib-ndr")].iloc[0]
    assert row.step_time_s == ib.figures.step_time_s
    assert ok.groupby("combination").cheapest.sum().eq(1).all()
    assert (df[df.status == "skipped"].reason.str.contains("does not divide")).all()
    # a rerun finds everything stored
    again = run_sweep(BASE, axes, Spec("cost", cat), out, InProcess())
    assert (again.already_stored, again.evaluated) == (4, 0)
    assert len(load(out)) == 6
    # another sweep into the same file is refused
    with pytest.raises(StoreError, match="holds another sweep"):
        run_sweep(BASE, parse_grid(["cluster.gpus=256"]), Spec("cost", cat), out, InProcess())
    # the same points from another base scenario too
    other = {**BASE, "costs": {**BASE["costs"], "lifecycle_years": 5}}
    with pytest.raises(StoreError, match="another base scenario"):
        run_sweep(other, axes, Spec("cost", cat), out, InProcess())


def test_local_processes_give_the_rows_of_this_process(cat, tmp_path: Path):
    axes = parse_grid(["cluster.gpus=64,128,256", "costs.gpu_hour_price=2,3"])
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    run_sweep(BASE, axes, Spec("cost", cat), a, InProcess())
    CACHE.clear()
    run_sweep(BASE, axes, Spec("cost", cat), b, Local(2))
    drop = ["time"]
    assert load(a).drop(columns=drop).equals(load(b).drop(columns=drop))
