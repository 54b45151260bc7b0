"""fabricplan.api, the Python front door: each function gives the command's --json figures for
the same input (the command run in this process), its DataFrames have the rows and columns the
documents name, bad input raises InputError with the command's problems, and importing it
leaves pandas, DuckDB, Ray, matplotlib and FastAPI out."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import DESIGN_EXAMPLE, ROOT
from fabricplan import api
from fabricplan.cli.app import app

PATH = str(DESIGN_EXAMPLE)


def cli_json(*args: str) -> object:
    """The command's --json document, run in this process."""
    res = CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False)
    return json.loads(res.stdout)


def same(doc: object) -> object:
    """A document as JSON carries it (tuples as lists)."""
    return json.loads(json.dumps(doc))


def cells(frame) -> list[dict]:
    """A DataFrame's rows with every missing value as None."""
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in frame.astype(object).to_dict("records")
    ]


@pytest.fixture(scope="module")
def sc():
    return api.load(PATH)


def test_import_leaves_the_heavy_packages_out():
    code = (
        "import sys, fabricplan.api; "
        "print(sorted(m for m in ('pandas', 'duckdb', 'ray', 'matplotlib', 'fastapi', "
        "'fabricplan.cli', 'fabricplan.workload') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_load_takes_a_path_text_or_data_with_overrides():
    text = DESIGN_EXAMPLE.read_text()
    by_path = api.load(DESIGN_EXAMPLE, set=["cluster.gpus=1024"])
    by_text = api.load(text, set=["cluster.gpus=1024"])
    assert by_path.workload.parallel.dp == 32  # dp: auto, resolved for 1,024 GPUs
    assert by_text.model_dump(exclude={"name"}) == by_path.model_dump(exclude={"name"})
    import yaml

    by_data = api.load(yaml.safe_load(text))
    assert by_data.cluster.gpus == 512


def test_bad_scenario_raises_input_error_with_the_commands_problems():
    with pytest.raises(api.InputError) as info:
        api.load(PATH, set=["workload.precision=fp4", "cluster.gpus=0"])
    err = info.value
    assert isinstance(err, ValueError)
    fields = {p.field for p in err.problems}
    assert {"workload.precision", "cluster.gpus"} <= fields
    assert "workload.precision" in str(err)
    # the same problems, worded the same, as the command's --json
    cli = cli_json("step", PATH, "--set", "workload.precision=fp4", "--set", "cluster.gpus=0")
    assert err.to_dict() == cli


def test_other_bad_input_names_the_option():
    with pytest.raises(api.InputError, match="unknown backend 'fast'"):
        api.step(PATH, congestion="fast")
    with pytest.raises(api.InputError, match="unknown id ib-nope"):
        api.step(PATH, fabrics=["ib-nope"])
    with pytest.raises(api.InputError) as info:
        api.sweep(PATH, {"cluster.gpus": [256, 0], "cluster.nope": [1]})
    assert {p.field for p in info.value.problems} == {"cluster.gpus", "cluster.nope"}
    assert "outside the allowed range" in str(info.value)
    with pytest.raises(api.InputError, match="nodes: 0 is outside the allowed range"):
        api.collective(nodes=0)
    with pytest.raises(TypeError):
        api.to_frame(42)


def test_step_is_the_commands_step(sc):
    res = api.step(sc)
    assert same(res.document()) == cli_json("step", PATH)
    roce = res["roce-400g"]
    assert roce.outputs.step_time_s == roce.document["step_time_s"]
    assert roce.outputs.tokens_per_s * roce.outputs.step_time_s == pytest.approx(1024 * 8192)
    assert roce.result.validation.inside
    frame = api.to_frame(res)
    assert list(frame["fabric"]) == ["ib-ndr", "roce-400g"]
    assert {"step_time_s", "mfu", "breakdown.tp_comm_s", "validation.inside"} <= set(frame)
    assert frame["step_time_s"].tolist() == [f.outputs.step_time_s for f in res]
    assert frame.loc[1, "breakdown.bubble_s"] == roce.breakdown["bubble_s"]


def test_step_with_options(sc):
    res = api.step(sc, fabrics="ib-ndr", congestion="none")
    assert same(res.document()) == cli_json(
        "step", PATH, "--fabric", "ib-ndr", "--congestion", "none"
    )
    assert [f.fabric for f in res] == ["ib-ndr"]


def test_plan_is_the_commands_plan(sc):
    res = api.plan(sc, top=3)
    assert same(res.document()) == cli_json("plan", PATH, "--top", "3")
    best = res.best["roce-400g"]
    assert (best.tp, best.pp, best.vp) == (4, 2, 20)
    frame = res.to_frame()
    first = frame[(frame.fabric == "roce-400g") & (frame.role == "best")].iloc[0]
    assert first["tokens_per_s"] == best.tokens_per_s
    per_fabric = frame[frame.fabric == "ib-ndr"]
    assert per_fabric["role"].tolist()[:4] == ["best", "alternative", "alternative", "alternative"]
    assert per_fabric["role"].tolist()[-1] == "scenario_plan"
    assert "bubble" in " ".join(frame["why"])
    assert {"breakdown.bubble_s", "relative_throughput", "fits"} <= set(frame)


def test_advise_is_the_commands_advise(sc):
    a = api.advise(sc, seed=0)
    assert same(api.document(a)) == cli_json("advise", PATH)
    frame = api.to_frame(a)
    assert list(frame["fabric"]) == [f.fabric for f in a.fabrics]
    assert frame["recommended"].tolist() == [f.fabric == a.recommendation.fabric for f in a.fabrics]
    assert frame["tco_usd"].tolist() == [f.tco_usd for f in a.fabrics]


def test_topology_and_collective_are_the_commands(sc):
    t = api.topology(sc)
    assert same(t.document()) == cli_json("topology", "--scenario", PATH)
    frame = t.to_frame()
    assert list(frame["fabric"]) == ["ib-ndr", "roce-400g"]
    assert frame["bisection_GBps"].tolist() == [d.to_dict()["bisection_GBps"] for d in t]
    one = api.topology(gpus=1024, fabric="ib-ndr", oversubscription=(2, 1))
    cli = cli_json("topology", "--gpus", "1024", "--fabric", "ib-ndr", "--oversubscription", "2,1")
    assert same(one.document()) == cli

    table = api.collective("all_reduce", gpu="h100", nodes=2, fabric="ib-ndr", sizes=["1K", 2**30])
    cli = cli_json(
        "collective", "--gpu", "h100", "--nodes", "2", "--fabric", "ib-ndr", "--sizes", "1K,1G"
    )
    assert same(api.document(table)) == cli
    frame = api.to_frame(table)
    assert frame["size_bytes"].tolist() == [1024, 2**30]
    assert frame["busbw_GBps"].tolist() == [r.busbw_GBps for r in table.rows]


def test_sweep_is_the_commands_sweep(sc, tmp_path):
    cli_out = tmp_path / "cli.duckdb"
    summary = cli_json(
        "sweep",
        "run",
        PATH,
        "--grid",
        "cluster.gpus=256,512,100",
        "--jobs",
        "1",
        "--out",
        str(cli_out),
    )
    res = api.sweep(sc, {"cluster.gpus": [256, 512, 100]}, jobs=1)
    assert [r.point for r in res.records] == [{"cluster.gpus": g} for g in (256, 512, 100)]
    assert res.records[2].skipped  # 100 GPUs: tp x pp = 32 does not divide it
    ok = res.records[1].outcomes
    assert [o.fabric for o in ok] == ["ib-ndr", "roce-400g"]
    steps = api.step(sc)
    assert [o.outputs for o in ok] == [f.outputs for f in steps]

    stored = api.load_sweep(cli_out)
    mine = res.to_frame()
    assert list(mine.columns) == list(stored.columns)
    assert len(mine) == 5  # two fabrics at 256 and 512, one skipped row
    assert cells(mine.drop(columns="time")) == cells(stored.drop(columns="time"))
    assert res.document()["combinations"] == summary["combinations"] == 3
    assert res.document()["skipped"] == summary["skipped"] == 1

    # written to a file, as the command writes it; the grid as --grid texts
    out = tmp_path / "api.duckdb"
    again = api.sweep(PATH, ["cluster.gpus=256,512,100"], jobs=1, out=out)
    assert again.document()["out"] == str(out)
    assert cells(again.to_frame().drop(columns="time")) == cells(stored.drop(columns="time"))


def test_sweep_of_cost_follows_dp_and_takes_range_texts(sc):
    res = api.sweep(
        sc,
        {"cluster.gpus": "512..1024:x2", "costs.gpu_hour_price": [2.0, 3.0]},
        what="cost",
        jobs=1,
    )
    frame = res.to_frame()
    assert len(frame) == 8
    assert {"cost_same_work_usd", "cheapest", "cluster.gpus", "costs.gpu_hour_price"} <= set(frame)
    # the file's dp: auto follows the swept size, as the command's sweep does
    assert set(frame["followed"].dropna()) == set()
    assert frame.groupby("cluster.gpus")["cheapest"].sum().tolist() == [2, 2]
