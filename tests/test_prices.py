"""Network prices: every one with a range and a status, the optics each fabric buys, the parts
no public price backs named wherever they are used, and what the support rates do to advice."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from fabricplan.advise import advise
from fabricplan.catalog import Catalog, default_catalog
from fabricplan.catalog.models import Price
from fabricplan.cli.topology_cmd import price_notes
from fabricplan.cost import load_assumptions
from fabricplan.scenario import load_scenario
from fabricplan.topology import design_fabric
from fabricplan.topology.cabling import OPTICS_POLICY, resolve_optics
from test_cli import run

CAT = default_catalog()
PRICED = [e for e in CAT if hasattr(e, "price")]


def test_every_packaged_price_has_a_range_and_a_status():
    for e in PRICED:
        p = e.price
        assert p.low is not None and p.high is not None, f"{e.id}: no range"
        assert p.low <= p.usd <= p.high, e.id
        if p.status == "quoted":
            assert all(q.source and q.as_of and q.channel for q in p.quotes), e.id
            # the nominal figure lies within what the quotes span, and so does the range
            usds = [q.usd for q in p.quotes]
            assert p.low <= min(usds) and max(usds) <= p.high, e.id
        if p.status == "no-public-price":
            assert "no public price" in p.basis, e.id


def test_the_quoted_ndr_switch_spans_the_reseller_and_the_nvidia_branded_figure():
    p = CAT.switch("qm9700").price
    assert p.status == "quoted" and (p.low, p.usd, p.high) == (32_870, 36_000, 50_000)
    assert sorted((q.channel, q.usd, q.as_of) for q in p.quotes) == [
        ("analyst", 50_000, "2024-08"),
        ("reseller", 32_870, "2026-07"),
        ("reseller", 36_000, "2024-08"),
    ]


@pytest.mark.parametrize(
    "part, low, usd, high",
    [
        ("cx7", 1_599, 1_894, 2_188),  # midpoint of two reseller listings
        ("cx8", 1_779, 1_904, 2_519),  # median of three
        ("xcvr-osfp-800g-dr8-compat", 699, 1_319, 2_275),
        ("xcvr-qsfpdd-400g-dr4-compat", 449.9, 534, 749),
        ("xcvr-osfp-800g-2xsr4-compat", 440, 879, 1_320),  # one listing: +/-50 %
        ("sn5600", 26_000, 51_999, 78_000),
    ],
)
def test_sourced_prices_are_the_median_of_their_listings(part, low, usd, high):
    """Several listings: the nominal figure is their median (the midpoint of two) and the range
    their span; one listing: the figure itself with the catalog's default +/-50 %."""
    p = next(e for e in PRICED if e.id == part).price
    assert p.status == "quoted" and (p.low, p.usd, p.high) == pytest.approx((low, usd, high))
    usds = sorted(q.usd for q in p.quotes)
    mid = len(usds) // 2
    median = usds[mid] if len(usds) % 2 else (usds[mid - 1] + usds[mid]) / 2
    assert p.usd == pytest.approx(median, abs=0.5)
    if len(usds) > 1:
        assert (p.low, p.high) == pytest.approx((usds[0], usds[-1]))
    else:
        assert (p.low, p.high) == pytest.approx((usd / 2, usd * 1.5), rel=2e-3)  # rounded
    assert all("listing" in q.source or "list price" in q.source for q in p.quotes)


def test_the_dpu_rests_on_one_analyst_figure_for_its_family():
    """No listing of the B3140H: one analyst street price for the BlueField-3 family, its
    midpoint, with the catalog's default +/-50 % (one source)."""
    p = CAT.nic("bluefield-3").price
    assert p.status == "quoted" and (p.low, p.usd, p.high) == (1_250, 2_500, 3_750)
    assert [(q.channel, q.usd) for q in p.quotes] == [("analyst", 2_500)]
    assert "not a B3140H listing" in p.quotes[0].source


def test_no_nvidia_optic_has_a_cited_price():
    """Only third-party modules are listed publicly: every OEM cable and module is still an
    assumption or has no public price."""
    oem = [e for e in PRICED if getattr(e, "oem", False) and e.KIND in ("cable", "transceiver")]
    assert oem and all(e.price.status != "quoted" for e in oem)


def test_parts_without_a_public_price_are_labelled():
    none = {e.id for e in PRICED if not e.price.public}
    assert {
        "q3400",
        "arista-7060x6",
        "xcvr-osfp-800g-dr8",
        "xcvr-osfp-1.6t-2xdr4",
    } <= none


@pytest.mark.parametrize(
    "fields",
    [
        {"usd": 10.0, "low": 20.0, "high": 30.0},  # nominal below its range
        {"usd": 10.0, "status": "quoted"},  # quoted without quotes
        {
            "usd": 10.0,
            "status": "no-public-price",
            "quotes": [{"usd": 9.0, "channel": "reseller", "source": "a shop", "as_of": "2024"}],
        },
    ],
)
def test_inconsistent_prices_are_refused(fields):
    with pytest.raises(ValidationError):
        Price(assumption=True, basis="test", **fields)


def test_a_price_without_a_range_gets_the_catalog_spread():
    assert Price(usd=100.0, assumption=True, basis="test").band == (50.0, 150.0)


def test_each_family_buys_its_own_optics_unless_forced():
    assert resolve_optics("policy", "infiniband") == "oem"
    assert resolve_optics("policy", "roce") == "compatible" == OPTICS_POLICY["uec"]
    assert resolve_optics("oem", "roce") == "oem"
    ib = design_fabric(2048, fabric="ib-ndr", catalog=CAT)
    roce = design_fabric(2048, fabric="roce-400g", catalog=CAT)
    assert (ib.optics, roce.optics) == ("oem", "compatible")
    assert all(t.endswith("-compat") for t in roce.transceivers)
    assert not any(t.endswith("-compat") for t in ib.transceivers)
    forced = design_fabric(2048, fabric="roce-400g", optics="oem", catalog=CAT)
    assert forced.cost_usd["optics_and_cables"] > roce.cost_usd["optics_and_cables"]


def test_ethernet_fat_trees_use_the_breakout_dac_too():
    """The 800G-to-2x400G splitter carries InfiniBand and Ethernet (its firmware follows the
    switch): a RoCE fat-tree's 2 m node links are copper, as InfiniBand's are."""
    for fabric in ("ib-ndr", "roce-400g"):
        d = design_fabric(512, "fat-tree", fabric, optics="oem", catalog=CAT)
        node = next(m for m in d.media if m.tier == "node_leaf")
        assert (node.medium, node.cable_id, node.cables) == ("dac", "dac-ndr-splitter", 256)
        assert node.cost_usd == 256 * 500
    # 4-5 m runs take the active splitter
    d = design_fabric(
        512, "fat-tree", "roce-400g", optics="oem", cable_lengths={"node_leaf": 5}, catalog=CAT
    )
    assert next(m for m in d.media if m.tier == "node_leaf").cable_id == "acc-ndr-splitter"


def test_compatible_800g_optics_exist_and_a_fallback_is_named():
    d = design_fabric(512, fabric="roce-800g", optics="compatible", catalog=CAT)
    assert d.oem_fallback == ()
    assert all(t.endswith("-compat") for t in d.transceivers)
    # without the compatible 800G module the OEM one is priced, and named
    without = Catalog(
        by_kind={
            k: {i: e for i, e in v.items() if i != "xcvr-osfp-800g-dr8-compat"}
            for k, v in CAT.by_kind.items()
        },
        files=CAT.files,
    )
    d = design_fabric(512, fabric="roce-800g", optics="compatible", catalog=without)
    assert d.oem_fallback == ("xcvr-osfp-800g-dr8",)
    assert "xcvr-osfp-800g-dr8" in d.transceivers


def test_a_bill_names_its_unpriced_parts_and_its_range():
    d = design_fabric(2048, fabric="ib-xdr", catalog=CAT)
    assert {"q3400", "xcvr-osfp-800g-dr8", "xcvr-osfp-1.6t-2xdr4"} <= set(d.no_public_price)
    assert "cx8" not in d.no_public_price
    low, high = d.cost_range_usd
    assert low < d.cost_usd["total"] < high
    sw = d.switch.price
    assert low == pytest.approx(
        d.switch_count * sw.low
        + d.nics * d.nic.price.low
        + sum(m.cost_range_usd[0] for m in d.media)
    )
    assert design_fabric(2048, fabric="ib-ndr", catalog=CAT).no_public_price == ()


def test_a_bill_names_the_parts_priced_without_a_cited_listing():
    """Every part of a bill priced by a stated assumption is named, and no other: InfiniBand's
    NVIDIA optics and the fibre, not its quoted switch and NIC."""
    d = design_fabric(2048, fabric="ib-ndr", catalog=CAT)
    ids = {i for m in d.media if m.links for i in (m.cable_id, *m.transceivers)}
    parts = [d.switch, d.nic, *(CAT.get(i) for i in ids)]
    assumed = {e.id for e in parts if e.price.status == "assumption"}
    assert set(d.no_listing_cited) == assumed
    assert {"xcvr-osfp-800g-2xsr4", "xcvr-osfp-400g-sr4"} <= assumed
    assert not {"qm9700", "cx7"} & assumed
    assert d.prices_dict()["no_listing_cited"] == list(d.no_listing_cited)
    note = next(n for n in price_notes(d) if n.startswith("no listing cited for "))
    assert all(i in note for i in d.no_listing_cited) and "priced by assumption" in note
    # no-public-price parts are named apart, and never twice
    x = design_fabric(2048, fabric="ib-xdr", catalog=CAT)
    assert not set(x.no_public_price) & set(x.no_listing_cited)


def test_topology_prints_what_has_no_public_price():
    out = run("topology", "--gpus", "512", "--fabric", "roce-400g").stdout
    assert "note: no public price for arista-7060x6: priced by assumption" in out
    js = json.loads(run("topology", "--gpus", "512", "--fabric", "ib-xdr", "--json").stdout)
    assert js["prices"]["optics"] == "oem" and "q3400" in js["prices"]["no_public_price"]
    low, high = js["prices"]["range_usd"]
    assert low < js["cost_usd"]["total"] < high


@pytest.fixture(scope="module")
def demo():
    sc = load_scenario("examples/llama3-70b-512-h100.yaml", catalog=CAT)
    return sc, advise(sc, CAT, break_even=False)


def test_advice_prices_support_as_a_labelled_assumption(demo):
    sc, a = demo
    s = a.recommendation.support
    assert s is not None
    ib = next(f for f in a.fabrics if f.fabric == "ib-ndr")
    A = load_assumptions()
    assert s.rates == {
        "ib-ndr": A.support_share("infiniband"),
        "roce-400g": A.support_share("roce"),
    }
    assert s.dearer == "ib-ndr" and s.to_dict()["assumption"] is True
    # RoCE is the cheaper now and at the growth target: the figures are today's
    assert a.recommendation.growth.cheapest == a.recommendation.fabric == "roce-400g"
    assert s.extra_usd == pytest.approx(sc.costs.lifecycle_years * 0.05 * ib.capex_network_usd)
    line = next(r for r in a.recommendation.reasons if r.startswith("support at "))
    assert "(assumption;" in line and f"at equal rates ({s.equal_rate:.0%})" in line


def test_support_is_drawn_per_fabric_and_unpriced_parts_are_named(demo):
    _, a = demo
    rows = [d for d in a.sensitivity if d.driver == "support"]
    assert {d.fabric for d in rows} == {"ib-ndr", "roce-400g"}
    assert any(
        "no public price for arista-7060x6 (roce-400g)" in r for r in a.recommendation.reasons
    )
    roce = next(f for f in a.fabrics if f.fabric == "roce-400g")
    assert roce.network_prices["no_public_price"] == ["arista-7060x6"]
    assert roce.network_prices["optics"] == "compatible"
    # parts priced by assumption without a cited listing are named per fabric as well
    ib = next(f for f in a.fabrics if f.fabric == "ib-ndr")
    assumed = ib.network_prices["no_listing_cited"]
    assert "xcvr-osfp-800g-2xsr4" in assumed
    assert f"no listing cited for {', '.join(assumed)} (ib-ndr): priced by assumption" in " ".join(
        a.recommendation.reasons
    )


def test_no_module_is_faster_than_its_cage():
    """A 1.6T twin-port module needs a 1.6T cage (Quantum-X800), not an 800G one (SN5600), however
    cheap it is per port."""
    assert (CAT.switch("q3400").cage_gbps, CAT.switch("sn5600").cage_gbps) == (1600, 800)
    assert CAT.switch("qm9700").cage_gbps == 800  # twin-port: 2 x 400G
    eth = design_fabric(512, fabric="roce-800g", optics="compatible", catalog=CAT)
    assert not any(t.startswith("xcvr-osfp-1.6t") for t in eth.transceivers)
    xdr = design_fabric(512, fabric="ib-xdr", catalog=CAT)
    assert "xcvr-osfp-1.6t-2xdr4" in xdr.transceivers
