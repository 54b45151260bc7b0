"""The sweep engine's hardware positions (advise's drivers, the claims' latency cases) and what
a fault in one combination does: reported with it, not stored, retried by the next run."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DESIGN_EXAMPLE
from fabricplan.scenario import load_scenario
from fabricplan.scenario.yaml_io import parse_yaml
from fabricplan.sweep.engine import CACHE, Spec, evaluate_variants
from fabricplan.sweep.executors import InProcess
from fabricplan.sweep.grid import parse_grid
from fabricplan.sweep.run import run_sweep
from fabricplan.sweep.store import load
from fabricplan.sweep.variants import Variant
from fabricplan.workload import evaluate_scenario
from fabricplan.workload.positions import Positions, latency_and_goodput

BASE = parse_yaml(DESIGN_EXAMPLE.read_text())


def _fault_at(monkeypatch: pytest.MonkeyPatch, gpus: int) -> None:
    import fabricplan.sweep.evaluate as ev

    real = ev.evaluate_one

    def faulty(sc, *args, **kwargs):
        if sc.cluster.gpus == gpus:
            raise RuntimeError("injected fault")
        return real(sc, *args, **kwargs)

    monkeypatch.setattr(ev, "evaluate_one", faulty)


def test_a_fault_is_reported_not_stored_and_retried(cat, monkeypatch, tmp_path: Path):
    CACHE.clear()
    axes = parse_grid(["cluster.gpus=256,512"])
    out = tmp_path / "s.duckdb"
    spec = Spec("step", cat, keep_going=True)
    with monkeypatch.context() as m:
        _fault_at(m, 512)
        s = run_sweep(BASE, axes, spec, out, InProcess())
    assert (s.evaluated, s.skipped, s.failed) == (1, 0, 1)
    assert s.failed_examples == [
        {"point": {"cluster.gpus": 512}, "error": "RuntimeError: injected fault"}
    ]
    assert sorted(load(out)["cluster.gpus"].unique()) == [256]
    # the fault gone, the same sweep evaluates only what failed
    again = run_sweep(BASE, axes, spec, out, InProcess())
    assert (again.already_stored, again.evaluated, again.failed) == (1, 1, 0)
    assert sorted(load(out)["cluster.gpus"].unique()) == [256, 512]
    CACHE.clear()


def test_without_keep_going_a_fault_propagates(cat, monkeypatch):
    CACHE.clear()
    _fault_at(monkeypatch, 512)
    sc = load_scenario(DESIGN_EXAMPLE, overrides=["cluster.gpus=512"])
    with pytest.raises(RuntimeError, match="injected fault"):
        evaluate_variants([Variant(0, {}, sc)], Spec("step", cat))


def test_positions_through_the_engine_equal_the_direct_evaluation(cat):
    sc = load_scenario(DESIGN_EXAMPLE)
    slow = latency_and_goodput(1.0, 0.0)  # latency at its high end, goodput at its low end
    plain, moved = evaluate_variants(
        [Variant(0, {}, sc), Variant(1, {}, sc, positions=slow)], Spec("step", cat)
    )
    assert plain.scenario_hash != moved.scenario_hash
    direct = evaluate_scenario(sc, cat, adjust=lambda hw: slow.apply(hw, cat), adjust_key=slow)
    for p, m, d in zip(plain.outcomes, moved.outcomes, direct, strict=True):
        assert m.outputs.step_time_s == d.figures.step_time_s
        assert m.outputs.step_time_s > p.outputs.step_time_s


def test_positions_limited_to_fabrics_leave_the_others(cat):
    sc = load_scenario(DESIGN_EXAMPLE)
    roce = Positions(rdma_latency=1.0, fabrics=("roce-400g",))
    plain, moved = evaluate_variants(
        [Variant(0, {}, sc), Variant(1, {}, sc, positions=roce)], Spec("step", cat)
    )
    for p, m in zip(plain.outcomes, moved.outcomes, strict=True):
        if p.fabric == "roce-400g":
            assert m.outputs.step_time_s > p.outputs.step_time_s
        else:
            assert m.outputs.step_time_s == p.outputs.step_time_s


def test_positions_are_only_for_the_step_level(cat):
    sc = load_scenario(DESIGN_EXAMPLE)
    with pytest.raises(ValueError, match="step level only"):
        evaluate_variants(
            [Variant(0, {}, sc, positions=latency_and_goodput(0.0, 0.0))], Spec("cost", cat)
        )
