"""The per-model break-even's plans: published training layouts, adapted and searched plans."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fabricplan.advise.reference_plan import NO_LAYOUT, reference_plan
from fabricplan.catalog import default_catalog
from fabricplan.catalog.transformer import Model, TrainedPlan
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.scenario import load_scenario
from fabricplan.workload import shape_of, training_step
from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario
from test_cli import run

CAT = default_catalog()
# a scenario without a growth target, so that every size up to 4,096 GPUs is valid
SC = load_scenario("examples/64-gpu-70b-training.yaml", catalog=CAT)
IB, ROCE = "ib-ndr", "roce-400g"


def _plan(model: str, gpus: int):
    got = reference_plan(SC, CAT, model, gpus, IB, ROCE)
    assert got is not None
    return got


def test_catalog_holds_the_published_layouts_with_their_sources():
    ds = CAT.model("deepseek-v3").trained_plan
    assert ds is not None
    assert (ds.tp, ds.pp, ds.ep, ds.zero, ds.gpus) == (1, 16, 64, 1, 2048)
    assert "2412.19437" in ds.source and "3.2" in ds.source
    ll = CAT.model("llama3-405b").trained_plan
    assert ll is not None and (ll.tp, ll.pp, ll.cp, ll.gpus) == (8, 16, 1, 16384)
    assert "2407.21783" in ll.source and set(ll.assumed) == {"vp", "recompute"}
    gpt = CAT.model("gpt3-175b").trained_plan
    assert gpt is not None and (gpt.tp, gpt.pp, gpt.gpus) == (8, 16, None)
    for model in ("llama3-8b", "llama3-70b", "mixtral-8x7b"):  # no layout published
        assert CAT.model(model).trained_plan is None


def test_catalog_rejects_a_layout_the_model_cannot_run():
    ds = CAT.model("deepseek-v3")
    plan = ds.trained_plan.model_dump()  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="must divide the experts"):
        Model.model_validate({**ds.model_dump(), "trained_plan": {**plan, "ep": 3, "gpus": None}})
    with pytest.raises(ValidationError, match="does not divide dp x cp"):
        TrainedPlan.model_validate({**plan, "gpus": 1024 + 512})  # dp 96: not a multiple of 64
    with pytest.raises(ValidationError, match="note"):
        TrainedPlan.model_validate({**plan, "assumed": ["vp"], "note": ""})


def test_deepseek_v3_runs_its_published_layout_where_it_fits():
    got = _plan("deepseek-v3", 2048)  # the size it was trained on
    p = got.to_dict()
    assert got.origin == "published" and "2412.19437" in (got.source or "")
    assert (p["tp"], p["pp"], p["ep"], p["dp"], p["zero"]) == (1, 16, 64, 128, 1)
    assert p["why"] == "published layout, dp refilled to 128"
    assert _plan("deepseek-v3", 4096).to_dict()["dp"] == 256


def test_deepseek_v3_published_plan_trains_its_mtp_module_and_reruns_what_it_reran():
    ds = CAT.model("deepseek-v3").trained_plan
    assert ds is not None and ds.mtp_layers == 1
    assert ds.recompute_modules == ("layernorm", "mla_up_proj")  # Sec. 3.2.3
    assert ds.pipeline_layout is not None and "pipeline_layout" in ds.assumed
    w = _plan("deepseek-v3", 2048).scenario.workload
    assert w is not None
    assert (w.mtp_layers, w.recompute_modules) == (1, ["layernorm", "mla_up_proj"])
    assert w.parallel.pipeline_layout == ds.pipeline_layout
    # adapted plans train the MTP module too (it is the objective), without the layout
    adapted = _plan("deepseek-v3", 512).scenario.workload
    assert adapted is not None and adapted.mtp_layers == 1
    assert adapted.parallel.pipeline_layout is None


def _step(s) -> float:
    st = training_step(
        shape_of(CAT.model("deepseek-v3")),
        plans_from_scenario(s),
        hardware_from_scenario(s, CAT, IB),
        backend=NO_CONGESTION,
    )
    return float(st.time[0])


def test_deepseek_v3_layout_keeps_the_head_and_mtp_module_off_a_four_layer_stage():
    s = _plan("deepseek-v3", 2048).scenario
    assert s.workload is not None
    even = s.model_copy(
        update={
            "workload": s.workload.model_copy(
                update={
                    "parallel": s.workload.parallel.model_copy(update={"pipeline_layout": None})
                }
            )
        }
    )
    # split evenly, one stage holds four layers, the head and the MTP module (a layer, its
    # projection and a second pass through the head); under the layout the busiest stage holds
    # four layers and nothing else, so the step is shorter
    assert _step(s) < _step(even)


def test_catalog_rejects_recompute_modules_without_selective_recomputation():
    plan = CAT.model("deepseek-v3").trained_plan.model_dump()  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="recompute = 'selective'"):
        TrainedPlan.model_validate({**plan, "recompute": "full"})
    with pytest.raises(ValidationError, match="recompute_modules"):
        TrainedPlan.model_validate({**plan, "recompute_modules": ["attention"]})


def test_deepseek_v3_keeps_ep_64_where_the_published_layout_cannot_run():
    # 512 GPUs: 1 x 16 leaves dp 32, which 64-way EP cannot divide; EP 64 still fits otherwise
    got = _plan("deepseek-v3", 512)
    assert got.origin == "adapted" and got.to_dict()["ep"] == 64
    assert "ep 64 must divide dp x cp (32)" in got.why and "at least the published 64" in got.why
    # 1,024 GPUs: the layout divides but 16 stages of 8K sequences do not fit in 80 GB
    got = _plan("deepseek-v3", 1024)
    assert got.origin == "adapted" and "does not fit at 1,024 GPUs" in got.why
    assert got.to_dict()["ep"] == 64
    # 256 GPUs: no fitting plan has EP 64 (with dp x cp = 64 every expert would have one copy,
    # its optimizer state unsharded): the largest EP that fits
    got = _plan("deepseek-v3", 256)
    assert got.origin == "adapted" and got.to_dict()["ep"] == 32
    assert "the largest with a fitting plan" in got.why
    # adapted, it keeps the dispatcher DeepSeek-V3 ran: one copy of a token a node
    assert got.scenario.workload is not None
    assert got.scenario.workload.parallel.ep_dispatch == "hierarchical"
    assert _plan("deepseek-v3", 2048).scenario.workload.parallel.ep_dispatch == "hierarchical"
    assert _plan("mixtral-8x7b", 256).scenario.workload.parallel.ep_dispatch == "alltoall"
    # 128 GPUs: 671B weights with BF16 weights, FP32 gradients and Adam state are 12 TB, more
    # than 128 GPUs hold (9.4 TB usable): nothing fits
    assert reference_plan(SC, CAT, "deepseek-v3", 128, IB, ROCE) is None


def test_a_model_without_a_published_layout_is_searched():
    for model in ("mixtral-8x7b", "llama3-8b"):
        got = _plan(model, 256)
        assert got.origin == "searched" and got.why == NO_LAYOUT and got.source is None
    assert NO_LAYOUT == "searched plan (no published layout)"


def test_gpt3_published_layout_is_adapted_below_its_model_parallel_size():
    assert _plan("gpt3-175b", 128).origin == "published"  # 8 x 16: dp 1
    got = _plan("gpt3-175b", 64)
    assert got.origin == "adapted" and "does not divide 64 GPUs" in got.why


@settings(max_examples=20, deadline=None)
@given(
    model=st.sampled_from(CAT.ids("model")),
    nodes=st.sampled_from([2, 4, 8, 16, 32, 64, 128, 256, 512]),
)
def test_the_plan_used_divides_the_cluster_and_fits_in_memory(model: str, nodes: int):
    gpus = 8 * nodes
    got = reference_plan(SC, CAT, model, gpus, IB, ROCE)
    if got is None:
        return
    p = got.to_dict()
    assert p["tp"] * p["pp"] * p["cp"] * p["dp"] == gpus and (p["dp"] * p["cp"]) % p["ep"] == 0
    assert p["tp"] <= 8  # within the node
    s = got.scenario
    step = training_step(
        shape_of(CAT.model(model)),
        plans_from_scenario(s),
        hardware_from_scenario(s, CAT, IB),
        backend=NO_CONGESTION,
    )
    assert step.memory.fits[0]
    layout = CAT.model(model).trained_plan
    assert (got.origin == "searched") == (layout is None)
    if got.origin == "published":
        assert layout is not None
        published = layout.model_dump(include={"tp", "pp", "ep", "cp", "vp", "zero", "recompute"})
        assert {k: p[k] for k in published} == published


def test_break_even_per_model_names_each_plan_and_its_origin_through_the_cli():
    out = run("advise", "examples/256-gpu-moe.yaml", "--break-even-models", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["model"]: r for r in json.loads(out.stdout)["break_even_gpus"]["by_model"]}
    ds = rows["deepseek-v3"]
    here = ds["plan_at_scenario_size"]
    assert (here["ep"], here["origin"], here["gpus"]) == (32, "adapted", 256)
    assert ds["published_layout"]["ep"] == 64 and "2412.19437" in here["source"]
    assert ds["published_layout"]["ep_dispatch"] == "hierarchical"
    assert [p["gpus"] for p in ds["plans"]] == ds["evaluated_gpus"]
    gpt = rows["gpt3-175b"]["plan_at_scenario_size"]
    assert (gpt["tp"], gpt["pp"], gpt["dp"], gpt["origin"]) == (8, 16, 2, "published")
    mix = rows["mixtral-8x7b"]
    assert mix["published_layout"] is None
    assert {p["origin"] for p in mix["plans"]} == {"searched"}
    table = run("advise", "examples/256-gpu-moe.yaml", "--break-even-models")
    assert table.returncode == 0, table.stderr
    assert "mixtral-8x7b: searched plan (no published layout)" in table.stdout
    assert "deepseek-v3: here published 1·16·64 at 256 GPUs" in table.stdout
    assert "2·4·32, full" in table.stdout and "adapted 256-512" in table.stdout
