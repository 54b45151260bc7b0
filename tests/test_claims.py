"""The seeds' claims: the arithmetic behind each verdict, and the command."""

from __future__ import annotations

import json

import pytest

from fabricplan.catalog import default_catalog
from fabricplan.claims import check_claims
from fabricplan.claims.latency import (
    latency_for_time,
    path_latency_us,
    small_all_reduce_us,
)
from fabricplan.claims.money import PREMIUM_SIZES, _pair, run_cost_claim
from fabricplan.claims.result import POINT_TOLERANCE, in_range, near
from fabricplan.claims.scale import (
    EXAMPLES,
    LATENCY_POSITION,
    catalog_with_one_switch_latency,
)
from fabricplan.collectives import build_system
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.scenario import load_scenario
from fabricplan.workload import evaluate_scenario
from fabricplan.workload.positions import Positions
from test_cli import run

CAT = default_catalog()


def test_path_latency_adds_each_further_switch():
    base = CAT.fabric("ib-ndr").rdma_latency_us.nominal
    hop = CAT.switch("qm9700").port_to_port_latency_ns.nominal / 1000
    assert path_latency_us(CAT, "ib-ndr", ()) == pytest.approx(base)
    assert path_latency_us(CAT, "ib-ndr", ("qm9700", "qm9700")) == pytest.approx(base + 2 * hop)


def test_solved_latency_reproduces_the_target_time():
    lat = latency_for_time(CAT, 64, "roce-400g", 210.0)
    assert lat is not None and lat > CAT.fabric("roce-400g").rdma_latency_us.nominal
    # rebuilt from a catalog with that latency: the solver's shifted system agrees with it
    at = catalog_with_one_switch_latency(CAT, "roce-400g", lat)
    roce = build_system("h100", 64, "roce-400g", catalog=at)
    assert small_all_reduce_us(roce) == pytest.approx(210.0, rel=1e-6)
    # a target below the zero-latency time has no solution
    assert latency_for_time(CAT, 64, "roce-400g", 1.0) is None


def test_latency_position_reaches_the_workload():
    """RoCE's RDMA latency at its range's high end as a hardware position (how the claims'
    "latency high" case is evaluated) equals a catalog whose typical latency is that end, and
    leaves InfiniBand alone."""
    hi = CAT.fabric("roce-400g").rdma_latency_us.high
    high = catalog_with_one_switch_latency(CAT, "roce-400g", hi)
    at_high = Positions(rdma_latency=LATENCY_POSITION["high"], fabrics=("roce-400g",), network=True)
    sc = load_scenario(EXAMPLES / "256-gpu-mixtral.yaml", catalog=CAT)

    def step(c, fabric, positions=None):
        adjust = None if positions is None else (lambda hw: positions.apply(hw, CAT))
        (r,) = evaluate_scenario(
            sc, c, [fabric], backend=NO_CONGESTION, adjust=adjust, adjust_key=positions
        )
        return r.figures.step_time_s

    moved = step(CAT, "roce-400g", at_high)
    assert moved == pytest.approx(step(high, "roce-400g"), rel=1e-12)
    assert moved > step(CAT, "roce-400g")
    assert step(CAT, "ib-ndr", at_high) == step(CAT, "ib-ndr")


def test_run_cost_claim_is_exact():
    c = run_cost_claim()
    assert c.holds is True
    assert c.computed["wasted_gpu_hours"] == 36_864
    assert c.computed["wasted_usd"] == pytest.approx(110_592)
    assert c.computed["cost_usd"] == pytest.approx(2_211_840)


def test_judging_helpers():
    assert in_range(0.2, 0.15, 0.25) and not in_range(0.26, 0.15, 0.25)
    assert near(1.1, 1.0) and near(0.8, 1.0) and not near(0.79, 1.0)


@pytest.fixture(scope="module")
def money():
    return {c.id: c for c in check_claims(groups=("money",))}


def test_premium_is_the_capex_ratio(money):
    ib, roce = _pair(CAT, 1024, "policy")
    c = money["ib-premium-15-30pct"]
    assert c.conditions["gpus"] == 1024 and c.conditions["premium_of"] == "network capex"
    assert c.conditions["optics"] == "policy" and c.conditions["ib_switch_usd"] == 36_000
    assert c.computed["value"] == pytest.approx(ib.capex_network_usd / roce.capex_network_usd - 1)
    assert c.holds == in_range(c.computed["value"], 0.15, 0.30)


def test_premium_claims_are_tried_at_each_price_condition(money):
    """Optics policy (or OEM or compatible on both) x the IB switch's low, nominal and high
    price x three bases, at every size; the summary names the conditions where it holds."""
    c = money["ib-premium-15-30pct"]
    assert len(c.cases) == len(PREMIUM_SIZES) * 3 * 3 * 3
    assert {x.conditions["ib_switch_usd"] for x in c.cases} == {32_870, 36_000, 50_000}
    # a dearer IB switch raises the premium, all else equal
    at = {
        (
            x.conditions["gpus"],
            x.conditions["optics"],
            x.conditions["premium_of"],
            x.conditions["ib_switch_usd"],
        ): x.value
        for x in c.cases
    }
    for gpus in PREMIUM_SIZES[1:]:
        v = [at[gpus, "oem", "network capex", usd] for usd in (32_870, 36_000, 50_000)]
        assert v[0] < v[1] < v[2]
    # the policy buys NVIDIA optics for IB and multi-vendor ones for RoCE: a larger premium
    assert at[1024, "policy", "network capex", 36_000] > at[1024, "oem", "network capex", 36_000]
    ok = [
        x
        for x in c.cases
        if x.holds
        and x.conditions["gpus"] == 1024
        and x.conditions["premium_of"] == "network capex"
    ]
    for x in ok:
        assert f"{x.conditions['optics']} optics with the IB switch at " in c.computed["holds_when"]


def test_pays_verdicts_follow_the_sign(money):
    for cid, ib_should_win in (
        ("16-gpu-ib-does-not-pay", False),
        ("64-gpu-ib-pays-for-itself", True),
    ):
        c = money[cid]
        for case in c.cases:
            assert case.holds == ((case.value >= 0) == ib_should_win)
        assert c.holds == c.cases[0].holds


def test_money_claims_name_the_prices_they_rest_on_without_a_source(money):
    """Each claim priced from catalog capex says which of its parts no public price backs."""
    ib, roce = _pair(CAT, 1024, "policy")
    for cid in ("ib-premium-15-30pct", "one-fault-exceeds-capex-difference"):
        c = money[cid]
        gaps = c.computed["unsourced_prices"]
        assert gaps["roce-400g"]["no_public_price"] == roce.network_prices["no_public_price"]
        assert gaps["ib-ndr"]["no_listing_cited"] == ib.network_prices["no_listing_cited"]
        assert "priced by assumption: " in c.computed["summary"]
        assert "arista-7060x6 (roce-400g, no public price)" in c.computed["summary"]
    pays = money["64-gpu-ib-pays-for-itself"].computed
    assert pays["unsourced_prices"]["roce-400g"]["no_public_price"] == ["arista-7060x6"]


def test_fault_claim_compares_event_with_capex_difference(money):
    c = money["one-fault-exceeds-capex-difference"]
    ib, roce = _pair(CAT, 1024, "policy")
    diff = abs(ib.capex_usd - roce.capex_usd)
    first = c.cases[0]
    assert first.holds == (first.value >= 1)
    # these clusters run no training job: an interruption costs the restart, 10 minutes
    assert roce.risk_hours_per_event == pytest.approx(10 / 60)
    hours = roce.risk_hours_per_event
    assert first.value * diff == pytest.approx(1024 * hours * roce.gpu_hour_cost_usd)


def test_claims_command_json():
    out = json.loads(run("claims", "--group", "latency,hardware,outside", "--json").stdout)
    assert len(out) >= 10
    for d in out:
        assert {"claim", "source", "conditions", "computed", "holds"} <= set(d)
        assert d["source"].startswith("seed 00")
    by = {d["id"]: d for d in out}
    assert by["h100-fp8-1979-tflops"]["holds"] is True
    assert by["mellanox-6.9b"]["holds"] is None
    ar = by["allreduce-512-h100-47-vs-210us"]
    # below the claimed 210 / 47 by more than the tolerance a point claim is judged with
    assert ar["holds"] is False and 1.0 < ar["computed"]["value"] < 210 / 47 * (1 - POINT_TOLERANCE)


def test_claims_command_errors_and_one_claim():
    assert run("claims", "--group", "nope").returncode == 2
    assert run("claims", "--group", "latency", "--id", "nope").returncode == 2
    proc = run("claims", "--group", "latency", "--id", "roce-latency-7-10us")
    assert proc.returncode == 0
    assert "deep-buffer" in proc.stdout
