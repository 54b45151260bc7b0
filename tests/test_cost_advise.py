"""Cost layer and advise: seed 001's arithmetic exactly, TCO parts, the recommendation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NO_CONGESTION
from fabricplan.cost import fabric_cost, load_assumptions, run_cost
from fabricplan.scenario import load_scenario
from test_cli import run

CAT = default_catalog()


def test_seed_001_run_cost_example_exactly():
    """1,024 GPUs x 30 days at $3: ~$2.2M; 5 % loss = 36,864 GPU-hours, ~$110k, 1.5 days."""
    r = run_cost(1024, 30, 3.0, 0.05)
    assert r.gpu_hours == 737_280
    assert r.cost_usd == 2_211_840
    assert r.wasted_gpu_hours == 36_864
    assert r.wasted_usd == pytest.approx(110_592)
    assert r.extra_days == pytest.approx(1.5)


def test_cost_command_prints_the_seed_figures():
    out = run("cost", "--gpus", "1024", "--days", "30", "--gpu-hour-price", "3", "--loss", "0.05")
    assert out.returncode == 0
    for text in ("737,280", "$2.2M", "36,864", "$110k", "1.50 days"):
        assert text in out.stdout
    js = json.loads(
        run("cost", "--gpus", "1024", "--days", "30", "--loss", "0.05", "--json").stdout
    )
    assert js["wasted_gpu_hours"] == 36_864
    assert run("cost", "--gpus", "1024", "--days", "30", "--loss", "1.5").returncode == 2


@given(st.integers(1, 100_000), st.floats(0.1, 365), st.floats(0, 20), st.floats(0, 1))
def test_run_cost_is_linear(gpus, days, price, loss):
    r = run_cost(gpus, days, price, loss)
    assert r.cost_usd == pytest.approx(gpus * days * 24 * price)
    assert r.wasted_usd == pytest.approx(r.cost_usd * loss)
    assert r.extra_days == pytest.approx(days * loss)


def test_owned_tco_adds_up_its_parts():
    sc = load_scenario("examples/16k-gpu-frontier.yaml", catalog=CAT)
    a = load_assumptions()
    c = fabric_cost(sc, CAT, a, "ib-ndr", run_gpu_hours=1e6, run_days=30)
    years = sc.costs.lifecycle_years
    assert c.capex_servers_usd == 16384 * a.server_usd_per_gpu("h100")
    expected = (
        c.capex_network_usd
        + c.capex_servers_usd
        + years
        * (
            c.power_usd_per_year
            + c.staff_usd_per_year
            + c.support_usd_per_year
            + c.risk_usd_per_year
        )
        + c.stabilisation_usd
    )
    assert c.tco_usd == pytest.approx(expected)
    # power: GPUs at node power (DGX H100: 10.2 kW per 8 x 700 W) plus the fabric, times PUE
    assert c.power_kw > 16384 * 0.7 * 1.8
    # risk: Llama 3's 14.4 network interruptions per 1,000 GPUs per year at high maturity
    assert c.risk_events_per_year == pytest.approx(14.4 * 16.384)
    assert c.cost_per_run_usd == pytest.approx(1e6 * c.gpu_hour_cost_usd + c.risk_per_run_usd)


def test_roce_costs_more_staff_and_stabilisation_at_low_maturity():
    sc = load_scenario(
        "examples/16k-gpu-frontier.yaml",
        catalog=CAT,
        overrides=["organization.network_maturity=low"],
    )
    a = load_assumptions()
    ib = fabric_cost(sc, CAT, a, "ib-ndr")
    roce = fabric_cost(sc, CAT, a, "roce-400g")
    assert roce.staff_fte > ib.staff_fte
    assert roce.stabilisation_weeks > ib.stabilisation_weeks
    assert roce.risk_events_per_year == pytest.approx(3 * ib.risk_events_per_year)
    assert roce.capex_network_usd < ib.capex_network_usd


def test_staff_team_is_shared_pro_rata_on_small_fabrics():
    a = load_assumptions()
    full = a.raw["staff"]["full_team_switches"]
    (ib_base, ib_rate), (roce_base, roce_rate) = (
        a.raw["staff"]["fte"][f]["medium"] for f in ("infiniband", "roce")
    )
    # one switch for 16 GPUs: 1/full of the fixed team plus the per-GPU share
    assert a.staff_fte("roce", "medium", 16, 1) == pytest.approx(
        roce_base / full + roce_rate * 0.016
    )
    # from full_team_switches on, the whole team; more switches add nothing beyond the per-GPU
    # share
    for sw in (full, 4 * full):
        assert a.staff_fte("infiniband", "medium", 4096, sw) == pytest.approx(
            ib_base + ib_rate * 4.096
        )
    # the RoCE premium in engineers is a fraction of an FTE on one switch and the full gap at scale
    gap_small = a.staff_fte("roce", "medium", 16, 1) - a.staff_fte("infiniband", "medium", 16, 1)
    gap_large = a.staff_fte("roce", "medium", 16384, 640) - a.staff_fte(
        "infiniband", "medium", 16384, 1280
    )
    assert 0 < gap_small < 0.1 < gap_large


def test_advise_json_has_the_documented_shape():
    out = run("advise", "examples/64-gpu-70b-training.yaml", "--json")
    assert out.returncode == 0, out.stderr
    js = json.loads(out.stdout)
    assert set(js) >= {"recommendation", "fabrics", "break_even_gpus", "sensitivity", "questions"}
    rec = js["recommendation"]
    assert rec["fabric"] in {f["fabric"] for f in js["fabrics"]}
    assert rec["confidence"] in {"high", "medium", "low"} and rec["reasons"]
    for f in js["fabrics"]:
        for key in (
            "step_time_s",
            "time_to_train_days",
            "gpu_hours",
            "expected_time_to_train_days",
            "expected_gpu_hours",
            "risk_hours_per_event",
            "capex_usd",
            "opex_usd_per_year",
            "tco_usd",
            "cost_per_run_usd",
            "risk_usd",
        ):
            assert isinstance(f[key], float) and f[key] > 0
        assert f["expected_time_to_train_days"] > f["time_to_train_days"]
        assert 0 < f["goodput"] < 1 and f["expected_run"]["fabric_interruptions"] > 0
    best = min(js["fabrics"], key=lambda f: f["cost_same_work_usd"])
    assert best["fabric"] == rec["fabric"] or best["misses_time_to_production"]
    assert len(js["questions"]) == 6
    assert sum(js["uncertainty"]["p_cheapest"].values()) == pytest.approx(1.0)
    swings = [d["swing_usd"] for d in js["sensitivity"]]
    assert swings == sorted(swings, reverse=True)


def test_advise_flips_with_maturity():
    """Same cluster, two organisations: the answer follows the inputs, not a fixed rule. Both
    fabrics priced with OEM optics, so that the gear differs by its switches alone."""
    low = json.loads(
        run(
            "advise",
            "examples/64-gpu-70b-training.yaml",
            "--no-break-even",
            "--set",
            "organization.network_maturity=low",
            "--set",
            "costs.optics=oem",
            "--json",
        ).stdout
    )
    high = json.loads(
        run(
            "advise",
            "examples/64-gpu-70b-training.yaml",
            "--no-break-even",
            "--set",
            "organization.network_maturity=high",
            "--set",
            "costs.optics=oem",
            "--json",
        ).stdout
    )

    def margin(js, fab):
        return next(f["cost_same_work_usd"] for f in js["fabrics"] if f["fabric"] == fab)

    gap_low = margin(low, "roce-400g") - margin(low, "ib-ndr")
    gap_high = margin(high, "roce-400g") - margin(high, "ib-ndr")
    assert gap_low > gap_high  # RoCE's staffing and stabilisation weigh more in a low-maturity team
    # and at 64 GPUs that is enough to turn the answer: the cheaper fabric for the same work
    # changes sides, and the recommendation with it
    assert gap_low > 0 > gap_high
    assert low["recommendation"]["fabric"] == "ib-ndr"
    assert high["recommendation"]["fabric"] == "roce-400g"
    assert (
        run(
            "advise",
            "examples/64-gpu-70b-training.yaml",
            "--set",
            "organization.network_maturity=expert",
        ).returncode
        == 2
    )


def test_break_even_stays_cheaper_from_the_smallest_size_on():
    from fabricplan.advise.break_even import SizeRow, _stays_cheaper

    def rows(flags: list[bool]) -> list[SizeRow]:
        return [SizeRow(16 * 2**i, 1.0, 1.0, None, None, f) for i, f in enumerate(flags)]

    assert _stays_cheaper(rows([False, True, True])) == 32
    assert _stays_cheaper(rows([True, False, True])) == 64
    assert _stays_cheaper(rows([True, True, False])) is None
    assert _stays_cheaper([]) is None


def test_break_even_by_maturity_orders_with_roce_operating_cost():
    """Lower maturity makes RoCE dearer to run, never cheaper: its break-even comes no later."""
    from fabricplan.advise.break_even import MATURITIES, break_even_gpus

    cat = default_catalog()
    sc = load_scenario("examples/64-gpu-70b-training.yaml", catalog=cat)
    be = break_even_gpus(sc, cat)
    assert set(be.by_maturity) == set(MATURITIES)
    assert be.gpus == be.by_maturity[sc.organization.network_maturity]
    order = [be.by_maturity[m] or float("inf") for m in MATURITIES]
    assert order == sorted(order)
    # at 512 GPUs, with a $30k quote for the InfiniBand switch and OEM optics on both fabrics,
    # the order has something to order: IB pays for itself only at low maturity
    quoted = quoted_ib_switch(cat, 30_000)
    demo = load_scenario(
        "examples/llama3-70b-512-h100.yaml", overrides=["costs.optics=oem"], catalog=quoted
    )
    assert break_even_gpus(demo, quoted).by_maturity == {
        "low": 1024,
        "medium": None,
        "high": None,
    }
    # at the catalog's prices, with each fabric's optics policy, it pays at no maturity
    plain = load_scenario("examples/llama3-70b-512-h100.yaml", catalog=cat)
    assert set(break_even_gpus(plain, cat).by_maturity.values()) == {None}


def quoted_ib_switch(cat, usd: float):
    """The catalog with a site's quote for InfiniBand's default switch (a quote is its own
    range)."""
    sw = cat.switch("qm9700")
    price = sw.price.model_copy(update={"usd": usd, "low": usd, "high": usd})
    return cat.with_entry(sw.model_copy(update={"price": price}))


def test_growth_target_is_evaluated_and_followed():
    from fabricplan.advise import advise
    from fabricplan.advise.growth import growth_evaluation

    cat = default_catalog()
    plain = load_scenario("examples/64-gpu-70b-training.yaml", catalog=cat)
    assert growth_evaluation(plain, cat)[0] is None
    grow = load_scenario("examples/llama3-70b-512-h100.yaml", catalog=cat)
    g = growth_evaluation(grow, cat)[0]
    assert g is not None and g.target_gpus == grow.organization.growth.target_gpus
    scores = g.cost_same_work_usd
    assert scores is not None and g.cheapest == min(scores, key=scores.get)
    assert g.margin == pytest.approx(sorted(scores.values())[1] / min(scores.values()) - 1)
    a = advise(grow, cat, break_even=False)
    assert a.recommendation.fabric == g.cheapest  # within the lifecycle: follow the target
    assert a.recommendation.growth.target_gpus == g.target_gpus
    assert any(r.startswith("growth to") for r in a.recommendation.reasons)
    late = grow.model_copy(
        update={
            "organization": grow.organization.model_copy(
                update={"growth": grow.organization.growth.model_copy(update={"months": 120})}
            )
        }
    )
    assert growth_evaluation(late, cat)[0].within_lifecycle is False


def test_reference_plan_fits_divides_and_rejects_what_cannot_fit():
    from fabricplan.advise.reference_plan import reference_plan
    from fabricplan.workload import shape_of, training_step
    from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario

    cat = default_catalog()
    sc = load_scenario("examples/16-gpu-finetune.yaml", catalog=cat)
    # 405B parameters at 2 bytes of weight and 2 of gradient need 1.62 TB; 16 H100 hold 1.28 TB
    assert reference_plan(sc, cat, "llama3-405b", 16, "ib-ndr", "roce-400g") is None
    got = reference_plan(sc, cat, "llama3-8b", 16, "ib-ndr", "roce-400g")
    assert got is not None and got.origin == "searched"
    s = got.scenario
    assert s.cluster.fabrics == ("ib-ndr", "roce-400g")
    par = s.workload.parallel
    assert par.tp * par.pp * par.dp == 16 and s.workload.model == "llama3-8b"
    st = training_step(
        shape_of(cat.model("llama3-8b")),
        plans_from_scenario(s),
        hardware_from_scenario(s, cat, "ib-ndr"),
        backend=NO_CONGESTION,
    )
    assert st.memory.fits[0]


def test_advise_break_even_per_model_through_the_cli():
    from fabricplan.advise.break_even import MATURITIES

    out = run("advise", "examples/64-gpu-70b-training.yaml", "--break-even-models", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["break_even_gpus"]["by_model"]
    assert [r["model"] for r in rows] == CAT.ids("model")
    for r in rows:
        assert set(r["by_maturity"]) == set(MATURITIES)
        order = [r["by_maturity"][m] or float("inf") for m in MATURITIES]
        assert order == sorted(order)  # lower maturity never delays IB's break-even
        assert all(16 <= n <= 128 for n in r["evaluated_gpus"])  # two nodes to twice the size
        p = r["plan_at_scenario_size"]
        if p is not None:
            assert p["tp"] * p["pp"] * p["dp"] == 64 and p["dp"] % p["ep"] == 0
    assert next(r for r in rows if r["model"] == "llama3-8b")["plan_at_scenario_size"] is not None


def test_reasons_name_the_synchronisation_pattern_and_serving_latency():
    from fabricplan.advise import advise
    from fabricplan.advise.records import FabricAdvice

    cat = default_catalog()
    moe = advise(load_scenario("examples/256-gpu-moe.yaml", catalog=cat), cat, break_even=False)
    sync = [r for r in moe.recommendation.reasons if r.startswith("synchronisation")]
    best = next(f for f in moe.fabrics if f.fabric == moe.recommendation.fabric)
    comm = {k: v for k, v in best.breakdown.items() if k.endswith("_comm_s")}
    assert max(comm, key=comm.get) == "ep_comm_s"  # MoE: the all-to-all is the largest part
    assert len(sync) == 1 and "expert all-to-all" in sync[0]
    assert f"{comm['ep_comm_s'] / best.step_time_s:.1%}" in sync[0]
    assert "over the fabric" in sync[0]

    # tensor parallelism: on NVLink inside a node, over the fabric once TP spans two nodes
    def tp_line(overrides: list[str]) -> str:
        sc = load_scenario("examples/64-gpu-70b-training.yaml", catalog=cat, overrides=overrides)
        rs = advise(sc, cat, break_even=False).recommendation.reasons
        return next(r for r in rs if r.startswith("synchronisation"))

    assert "tensor-parallel" in tp_line([]) and "on NVLink" in tp_line([])
    spanning = tp_line(["workload.parallel.tp=16", "workload.parallel.pp=1"])
    assert "tensor-parallel" in spanning and "over the fabric" in spanning

    def serving(overrides: list[str]) -> tuple[FabricAdvice, str]:
        sc = load_scenario("examples/inference-405b.yaml", catalog=cat, overrides=overrides)
        a = advise(sc, cat, break_even=False)
        f = next(f for f in a.fabrics if f.fabric == a.recommendation.fabric)
        line = next(r for r in a.recommendation.reasons if r.startswith("serving latency"))
        return f, line

    inside, line = serving([])
    assert inside.network_fraction < 0.01 and "barely matters" in line
    across, line = serving(["workload.parallel.tp=16", "workload.parallel.pp=1"])
    assert across.network_fraction > 0.01 and "every token's path" in line
    assert f"{across.network_fraction:.1%}" in line


def test_confidence_follows_the_growth_target_when_the_choice_rests_on_it():
    from fabricplan.advise import advise

    cat = default_catalog()
    sc = load_scenario("examples/64-gpu-70b-training.yaml", catalog=cat)
    today = advise(sc, cat, break_even=False)
    grow = load_scenario(
        "examples/64-gpu-70b-training.yaml",
        catalog=cat,
        overrides=["organization.growth.target_gpus=512", "organization.growth.months=12"],
    )
    a = advise(grow, cat, break_even=False)
    g = a.recommendation.growth
    assert g is not None
    assert today.uncertainty.gpus == 64
    # IB is cheapest at 64 GPUs and RoCE at 512 (its 128-port switches need half the boxes)
    assert g.cheapest != today.recommendation.fabric
    # the recommendation follows the target, and so does its Monte Carlo
    assert a.recommendation.fabric == g.cheapest
    assert a.uncertainty.gpus == 512
    assert a.recommendation.p_cheapest == a.uncertainty.p_cheapest[g.cheapest]
    assert a.recommendation.p_cheapest != today.uncertainty.p_cheapest[g.cheapest]
    # and so does the tornado: at the target the recommended fabric is the cheaper one, so the
    # runner-up's margin is positive with every driver as assumed
    assert all(d.gpus == 512 for d in a.sensitivity)
    prices = [d for d in a.sensitivity if d.driver != "latency"]
    assert any(d.margin_at_low_usd > 0 and d.margin_at_high_usd > 0 for d in prices)


def test_tipping_point_is_where_the_two_fabrics_cost_the_same():
    from fabricplan.advise.decide import _sensitivity
    from fabricplan.advise.performance import perf_table
    from fabricplan.advise.scoring import COST_DRIVERS, build_parts, evaluate, nominal_multipliers

    cat = default_catalog()
    sc = load_scenario("examples/llama3-70b-512-h100.yaml", catalog=cat)
    perf, costs = evaluate(sc, cat, backend=NO_CONGESTION)
    parts = build_parts(sc, cat, perf, costs).with_perf(perf_table(sc, cat, NO_CONGESTION))
    nominal = parts.scores(nominal_multipliers(1))[:, 0]
    best, other = int(nominal.argmin()), int(nominal.argmax())
    names = [p.fabric for p in perf]
    tipped = [d for d in _sensitivity(parts, best, other, names) if d.tips_at is not None]
    assert tipped
    for d in tipped:
        m = nominal_multipliers(1)
        if d.fabric is None:
            m[d.driver] = np.array([d.tips_at])
        else:  # a price quoted per fabric: only that fabric's moves
            m[d.driver] = np.ones((len(names), 1))
            m[d.driver][names.index(d.fabric)] = d.tips_at
        s = parts.scores(m)[:, 0]
        # a price is linear; a performance driver is scored between the model's grid points
        assert s[best] == pytest.approx(s[other], rel=1e-9 if d.driver in COST_DRIVERS else 1e-6)


def test_roce_tuning_reason_reports_each_quality():
    from dataclasses import replace

    from fabricplan.advise import advise
    from fabricplan.advise.roce_tuning import QUALITIES, tuning_reason

    cat = default_catalog()
    a = advise(load_scenario("examples/256-gpu-moe.yaml", catalog=cat), cat, break_even=False)
    t = a.recommendation.roce_tuning
    assert t is not None
    assert set(t.lost_to_congestion) == set(QUALITIES) and t.fabric == "roce-400g"
    # congestion can only slow a step down, and the scenario's own quality costs nothing extra
    assert all(v >= -1e-9 for v in t.lost_to_congestion.values())
    assert t.run_usd_vs_own[t.quality] == 0
    assert any(r.startswith("RoCE tuning") for r in a.recommendation.reasons)
    differ = replace(
        t,
        quality="tuned",
        lost_to_congestion={"tuned": 0.01, "default": 0.05, "misconfigured": 0.4},
        run_usd_vs_own={"tuned": 0.0, "default": 40_000.0, "misconfigured": 390_000.0},
    )
    line = tuning_reason(differ)
    assert "'tuned' loses 1.0%" in line and "'default' 5.0% (+$40k per run)" in line
    assert "'misconfigured' 40.0% (+$390k per run)" in line
    same = replace(differ, lost_to_congestion=dict.fromkeys(QUALITIES, 0.02))
    assert "comes from the topology" in tuning_reason(same)


def test_cost_prices_the_design_topology_shows():
    """The scenario's spine oversubscription, switch and optics reach the cost layer as they
    reach `fabricplan topology`: one scenario, one bill of materials."""
    example = "examples/16k-gpu-frontier.yaml"
    sets = ["cluster.topology.spine_oversubscription=2", "costs.optics=compatible"]
    a = load_assumptions()
    sc = load_scenario(example, overrides=sets, catalog=CAT)
    base = load_scenario(example, catalog=CAT)
    cost = fabric_cost(sc, CAT, a, "ib-ndr")
    assert cost.capex_network_usd < 0.9 * fabric_cost(base, CAT, a, "ib-ndr").capex_network_usd
    args = ["topology", "--scenario", example, "--fabric", "ib-ndr", "--json"]
    topo = json.loads(run(*args, *(x for s in sets for x in ("--set", s))).stdout)
    assert topo["oversubscription"]["spine"] == 2
    assert topo["cost_usd"]["total"] == pytest.approx(cost.capex_network_usd)
    # the flag still wins over the scenario
    oem = json.loads(run(*args, "--oem-optics", *(x for s in sets for x in ("--set", s))).stdout)
    assert oem["cost_usd"]["total"] > topo["cost_usd"]["total"]
    # a deep-buffer chassis as every switch: the scenario's switch is priced, not the default
    roce = ["cluster.fabric=roce-400g"]
    deep = load_scenario(
        example, overrides=[*roce, "cluster.topology.switch=arista-7816r3"], catalog=CAT
    )
    default = load_scenario(example, overrides=roce, catalog=CAT)
    chassis = fabric_cost(deep, CAT, a, "roce-400g").capex_network_usd
    assert chassis > 1.2 * fabric_cost(default, CAT, a, "roce-400g").capex_network_usd


def test_performance_drivers_rerun_the_workload_model():
    """The performance drivers' table is the workload model's own step time: at the nominal
    positions the scenario's step; at the latency grid's low end the step of a catalog whose
    fabric and switch latencies sit at their catalog lows; the congestion driver's low end the
    step without congestion. Between grid points the time is interpolated, never extrapolated
    from a share of the step."""
    from fabricplan.advise.performance import perf_table
    from fabricplan.advise.scoring import nominal_multipliers
    from fabricplan.workload import evaluate_scenario

    cat = default_catalog()
    sc = load_scenario("examples/256-gpu-moe.yaml", catalog=cat)
    steps = [r.figures.step_time_s for r in evaluate_scenario(sc, cat)]
    table = perf_table(sc, cat, DEFAULT_BACKEND)
    assert table.nominal == pytest.approx(steps, rel=1e-12)
    assert table.time(nominal_multipliers(1))[:, 0] == pytest.approx(steps, rel=1e-12)
    for k, fab in enumerate(sc.cluster.fabrics):
        f = cat.fabric(fab)
        sw = cat.switch(f.default_switch)
        lat, port = f.rdma_latency_us, sw.port_to_port_latency_ns
        fast = f.model_copy(update={"rdma_latency_us": lat.model_copy(update={"typical": lat.low})})
        fast_sw = sw.model_copy(
            update={"port_to_port_latency_ns": port.model_copy(update={"typical": port.low})}
        )
        low = cat.with_entry(fast).with_entry(fast_sw)
        (r,) = evaluate_scenario(sc, low, [fab])
        assert table.grid[k, 0, 1] == pytest.approx(r.figures.step_time_s, rel=1e-9)
        (free,) = evaluate_scenario(sc, cat, [fab], backend=NO_CONGESTION)
        assert table.uncongested[k] * steps[k] == pytest.approx(free.figures.step_time_s)
        # lower latency and more goodput never slow the step
        assert table.grid[k, 0, 2] <= table.grid[k, 1, 1] <= table.grid[k, 2, 0]
    m = nominal_multipliers(3)
    m["latency"] = np.array([0.0, 0.25, 0.5])
    t = table.time(m)
    assert t[:, 1] == pytest.approx((table.grid[:, 0, 1] + table.grid[:, 1, 1]) / 2)


def test_advise_table_states_a_missing_break_even_plainly(tmp_path):
    from fabricplan.catalog.write import entries_to_toml

    out = run("advise", "examples/16-gpu-finetune.yaml").stdout
    assert "break-even: none (InfiniBand does not repay its premium" in out
    assert "none GPUs" not in out
    site = tmp_path / "site.toml"
    site.write_text(entries_to_toml([quoted_ib_switch(CAT, 30_000).switch("qm9700")]))
    demo = run(
        "advise",
        "examples/llama3-70b-512-h100.yaml",
        "--catalog",
        str(site),
        "--set",
        "costs.optics=oem",
    ).stdout
    assert "break-even by network maturity: low 1,024, medium none, high none" in demo


def test_dollars_round_before_the_unit_is_picked():
    from fabricplan.cost import usd

    assert usd(999_600) == "$1M"  # was "$1e+03k"
    assert usd(53_123_456) == "$53.1M" and usd(711e6) == "$711M"
    assert usd(2_211_840, sig=2) == "$2.2M" and usd(110_592, sig=2) == "$110k"
    assert usd(-12_345) == "-$12.3k" and usd(0) == "$0" and usd(None) == "-"


@pytest.mark.parametrize(
    ("runner_up_cost", "close"), [(1.01, True), (0.99, True), (1.2, False), (0.8, False)]
)
def test_a_close_call_is_judged_on_the_size_of_the_margin(runner_up_cost, close):
    """The recommended fabric can cost more than the runner-up today (it is cheaper at the
    growth target, or the runner-up misses the deadline): a 20 % gap either way is no close
    call, a 1 % one is."""
    from types import SimpleNamespace

    from fabricplan.advise.reasons import reasons
    from fabricplan.workload.inference import ServingRates

    sc = load_scenario("examples/inference-405b.yaml", catalog=CAT)
    base = {
        "tokens_per_s": 1000.0,
        "step_time_s": 1.0,
        "time_to_train_days": None,
        "risk_events_per_year": 1.0,
        "risk_usd_per_hour": 0.0,
        "cluster_usd_per_hour": 1.0,
        "rates": ServingRates(4, 8, 250.0, 1000.0),
        "itl_s": None,
        "network_fraction": None,
        "misses_time_to_production": False,
    }
    fabrics = [
        SimpleNamespace(**base, fabric="ib-ndr", cost_same_work_usd=1e6),
        SimpleNamespace(**base, fabric="roce-400g", cost_same_work_usd=runner_up_cost * 1e6),
    ]
    line = next(r for r in reasons(sc, fabrics, 0, 1, [], "rent-serve") if "cost per" in r)
    assert f"{runner_up_cost - 1:+.1%} for roce-400g" in line
    assert ("a close call" in line) is close


def test_a_rentals_tornado_has_only_the_drivers_its_cost_reads():
    from fabricplan.advise import advise

    cat = default_catalog()
    sc = load_scenario("examples/16-gpu-finetune.yaml", catalog=cat)
    assert sc.costs.mode == "rent"
    drivers = {d.driver for d in advise(sc, cat, break_even=False).sensitivity}
    assert drivers == {"price", "risk", "latency", "goodput", "roce_quality", "congestion"}


def test_network_prices_are_drawn_per_fabric_and_an_even_margin_is_called_indeterminate():
    """Switches, NICs and optics are quoted per fabric: the tornado moves one fabric's at a
    time, and the Monte Carlo draws them independently, so the margin between two fabrics
    whose network bills are both uncertain is uncertain too (a shared draw would cancel)."""
    from types import SimpleNamespace

    from fabricplan.advise import advise
    from fabricplan.advise.decide import cost_indeterminate

    cat = default_catalog()
    a = advise(load_scenario("examples/256-gpu-moe.yaml", catalog=cat), cat, break_even=False)
    rows = [d for d in a.sensitivity if d.driver == "network"]
    assert sorted(str(d.fabric) for d in rows) == ["ib-ndr", "roce-400g"]
    # each fabric's own gear price pulls the margin its own way
    signs = {d.fabric: np.sign(d.margin_at_high_usd - d.margin_at_low_usd) for d in rows}
    assert signs[a.recommendation.fabric] == -1 and len(set(signs.values())) == 2
    undecided = a.recommendation.cost_indeterminate
    assert undecided is not None and undecided.margin_p10_p90_usd[0] < 0
    assert any("of ib-ndr" in s for s in undecided.settle_with)
    # by construction: a margin band above zero is decided, one spanning zero is not
    sens = [
        SimpleNamespace(driver="network", label="gear"),
        SimpleNamespace(driver="latency", label="lat"),
    ]
    ahead = np.array([np.full(100, 10.0), np.linspace(11.0, 20.0, 100)])
    assert cost_indeterminate(ahead, 0, 1, sens) is None
    even = np.array([np.full(100, 10.0), np.linspace(5.0, 15.0, 100)])
    found = cost_indeterminate(even, 0, 1, sens)
    assert found is not None and found.settle_with == ["gear"]
    assert found.margin_p10_p90_usd == (pytest.approx(-4.0), pytest.approx(4.0))
