"""Rented clusters are priced by the run (or the million output tokens), never by a lifecycle,
and every tier price difference is named with its basis."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.cost import fabric_cost, load_assumptions
from fabricplan.cost.rent import RentTier, rent_tier
from fabricplan.scenario import load_scenario
from test_cli import run

CAT = default_catalog()
A = load_assumptions()
FINETUNE = "examples/16-gpu-finetune.yaml"
SERVING = "examples/inference-405b.yaml"
LIFECYCLE_KEYS = ("capex_usd", "capex_network_usd", "opex_usd_per_year", "tco_usd", "risk_usd")


def _advise(*args: str) -> dict:
    out = run("advise", *args, "--no-break-even", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_rent_tiers_come_from_the_assumptions_with_their_basis():
    premium = A.raw["rent"]["premium_share"]
    ib = rent_tier(A, "infiniband", 3.0)
    assert ib.premium_share == premium["infiniband"] == 0.10
    assert ib.price_usd == pytest.approx(3.3)
    assert ib.basis == A.raw["rent"]["basis"] and ib.basis.startswith("assumption:")
    assert ib.describe() == "InfiniBand tier priced 10 % over the scenario's $3/GPU-hour ($3.30)"
    tcp = rent_tier(A, "tcp", 2.0)
    assert tcp.price_usd == pytest.approx(1.7)
    assert tcp.describe() == "TCP-only tier priced 15 % under the scenario's $2/GPU-hour ($1.70)"
    assert "at the scenario's $3/GPU-hour" in rent_tier(A, "roce", 3.0).describe()


def test_a_rented_fabric_has_no_lifecycle_and_prices_the_run_at_its_tier():
    sc = load_scenario(FINETUNE, catalog=CAT)
    own = load_scenario(FINETUNE, catalog=CAT, overrides=["costs.mode=own"])
    c = fabric_cost(sc, CAT, A, "ib-ndr", run_gpu_hours=1000.0, run_days=2.0)
    assert c.lifecycle_years is None and c.tco_usd is None and c.opex_usd_per_year is None
    assert c.rent == RentTier("infiniband", 3.0, 0.10, A.rent_basis)
    assert c.gpu_hour_cost_usd == pytest.approx(3.3)
    # the run-loss risk over the run's 2 days, at the tier price
    risk = c.risk_events_per_year * 2 / 365 * 16 * c.risk_hours_per_event * 3.3
    assert c.risk_per_run_usd == pytest.approx(risk)
    assert c.cost_per_run_usd == pytest.approx(1000 * 3.3 + risk)
    owned = fabric_cost(own, CAT, A, "ib-ndr")
    assert owned.lifecycle_years == 4 and owned.tco_usd is not None and owned.tco_usd > 0


@given(st.floats(0.1, 100), st.floats(1.0, 1e6), st.sampled_from(["ib-ndr", "roce-400g"]))
def test_cost_per_million_output_tokens_is_an_hour_over_the_hours_tokens(price, tok_s, fabric):
    sc = load_scenario(SERVING, catalog=CAT, overrides=[f"costs.gpu_hour_price={price}"])
    c = fabric_cost(sc, CAT, A, fabric, output_tokens_per_s=tok_s)
    per_hour = 64 * price * A.rent_factor(c.family) + c.risk_usd_per_year / (365 * 24)
    assert c.cluster_usd_per_hour == pytest.approx(per_hour)
    assert c.cost_per_million_output_tokens_usd == pytest.approx(per_hour / (tok_s * 3600) * 1e6)


def test_rent_mode_advise_json_has_no_lifecycle_and_names_the_ib_premium():
    js = _advise(FINETUNE)
    assert js["costing"]["kind"] == "rent-train"
    assert js["costing"]["headline"] == "cost_per_run_usd"
    assert "lifecycle_years is not used" in js["costing"]["lifecycle"]
    fabrics = {f["fabric"]: f for f in js["fabrics"]}
    for f in fabrics.values():
        assert all(f[k] is None for k in LIFECYCLE_KEYS), f
        assert f["cost_per_run_usd"] == pytest.approx(
            f["gpu_hours"] * f["gpu_hour_cost_usd"] + f["risk_per_run_usd"]
        )
        assert f["cost_same_work_usd"] == pytest.approx(f["cost_per_run_usd"])
    ib, roce = fabrics["ib-ndr"], fabrics["roce-400g"]
    assert ib["rent_premium_share"] == 0.10 and roce["rent_premium_share"] == 0.0
    assert ib["gpu_hour_cost_usd"] == pytest.approx(3.3) and roce["gpu_hour_cost_usd"] == 3.0
    reasons = js["recommendation"]["reasons"]
    premium = next(r for r in reasons if r.startswith("InfiniBand tier priced 10 % over"))
    assert "the scenario's $3/GPU-hour ($3.30) for ib-ndr" in premium
    assert A.rent_basis in premium  # the premium's basis, labelled an assumption
    # what the tier adds to this run: its GPU-hours x $3 x 10 %
    assert f"+${ib['gpu_hours'] * 0.3:,.2f} on its run" in premium
    assert not any("lifecycle" in r for r in reasons)


def test_rent_mode_does_not_use_the_lifecycle():
    """A rental's advice is the same whatever lifecycle_years says."""
    short, long = (_advise(FINETUNE, "--set", f"costs.lifecycle_years={y}") for y in (1, 10))
    assert short["fabrics"] == long["fabrics"]
    assert short["recommendation"]["reasons"] == long["recommendation"]["reasons"]


def test_rent_mode_tables_show_the_run_not_a_tco():
    out = run("advise", FINETUNE, "--no-break-even")
    assert out.returncode == 0, out.stderr
    table = out.stdout[out.stdout.index("Per fabric") : out.stdout.index("rented: capex")]
    assert "TCO" not in table and "opex" not in table and "capex" not in table
    for head in ("GPU-hours", "$/GPU-h", "run loss", "per run", "$3.30", "$3.00"):
        assert head in table
    assert "so costs.lifecycle_years is not used" in out.stdout


def test_rented_serving_is_priced_per_million_output_tokens_with_each_tier_named():
    js = _advise(SERVING)
    assert js["costing"]["headline"] == "cost_per_million_output_tokens_usd"
    for f in js["fabrics"]:
        assert all(f[k] is None for k in LIFECYCLE_KEYS)
        per_m = f["cluster_usd_per_hour"] / (f["output_tokens_per_s_total"] * 3600) * 1e6
        assert f["cost_per_million_output_tokens_usd"] == pytest.approx(per_m)
        assert f["cost_same_work_usd"] == pytest.approx(per_m)
    reasons = js["recommendation"]["reasons"]
    # both price differences, each with the basis: IB over, TCP-only under the scenario's price
    assert any(
        r.startswith("InfiniBand tier priced 10 % over") and "+$19.20 per hour" in r
        for r in reasons
    )
    assert any(
        r.startswith("TCP-only tier priced 15 % under") and "-$28.80 per hour" in r for r in reasons
    )
    assert any(r.startswith("cost per million output tokens:") for r in reasons)


def test_a_rental_does_not_follow_the_growth_target():
    from dataclasses import replace

    from fabricplan.advise.growth import growth_evaluation, growth_reason

    sc = load_scenario("examples/1024-gpu-30-day-pretraining.yaml", catalog=CAT)
    g = growth_evaluation(sc, CAT)[0]
    assert g is not None and g.within_lifecycle is None and g.locks_in is False
    other = replace(g, cheapest="ib-ndr")
    assert "a rental does not lock the fabric in" in growth_reason(other, "roce-400g")
