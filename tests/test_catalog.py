"""The catalog loads, covers the public ids, and every fact is sourced and consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricplan.catalog import (
    CatalogError,
    Fabric,
    Nic,
    UnknownIdError,
    count_params,
    entries_to_toml,
    load_catalog,
)

# Public identifiers from DESIGN.md: scenario files depend on them.
DESIGN_FABRICS = {
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "roce-100g",
    "roce-200g",
    "roce-400g",
    "roce-800g",
    "tcp-25g",
    "tcp-100g",
    "tcp-200g",
}
DESIGN_GPUS = {"a100", "h100", "h800", "h20", "h200", "b200", "mi300x"}
DESIGN_MODELS = {
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "gpt3-175b",
    "mixtral-8x7b",
    "deepseek-v3",
}


def test_covers_every_public_id(cat):
    assert DESIGN_FABRICS <= set(cat.ids("fabric"))
    assert DESIGN_GPUS <= set(cat.ids("gpu"))
    assert DESIGN_MODELS <= set(cat.ids("model"))


def test_covers_the_hardware_classes_the_issue_names(cat):
    switches = {s.id: s for s in cat.entries("switch")}
    assert {"qm8700", "qm9700"} <= set(switches)
    asics = {s.asic for s in switches.values()}
    assert {"Spectrum-4", "Tomahawk 5"} <= asics
    assert any(s.form_factor == "chassis" and (s.buffer_mb or 0) > 1000 for s in switches.values())
    assert {"cx6", "cx7", "bluefield-3"} <= set(cat.ids("nic"))
    media = {c.medium for c in cat.entries("cable")}
    assert {"dac", "aoc"} <= media
    xcvrs = cat.entries("transceiver")
    assert any(x.oem for x in xcvrs) and any(not x.oem for x in xcvrs)


def test_every_entry_is_sourced_and_dated(cat):
    for e in cat:
        assert len(e.source) > 10, e.id
        assert e.as_of[:2] in ("19", "20"), e.id


def test_every_price_is_labelled(cat):
    priced = [e for e in cat if hasattr(e, "price")]
    assert len(priced) >= 20
    for e in priced:
        assert e.price.assumption is True, f"{e.id}: a price must say it is an assumption"
        assert e.price.basis


def test_latency_ranges_keep_the_seeds_disagreement(cat):
    ndr, roce = cat.fabric("ib-ndr"), cat.fabric("roce-400g")
    # seed 000: IB NDR 1.0-1.3 us, RoCE 3.5-5 us; seed 004: RoCE 7-10 us. All inside the ranges.
    assert ndr.rdma_latency_us.low <= 1.0 and ndr.rdma_latency_us.high >= 1.3
    assert roce.rdma_latency_us.low <= 3.5 and roce.rdma_latency_us.high >= 10.0
    assert any("seed 000" in s for s in roce.rdma_latency_us.sources)
    assert any("seed 004" in s for s in roce.rdma_latency_us.sources)


def test_fabric_physics_is_consistent(cat):
    for f in cat.entries("fabric"):
        # goodput cannot exceed the line rate; credit/PFC fabrics are lossless, TCP is not
        assert f.nic_goodput_GBps.high <= f.line_rate_gbps / 8
        assert f.lossless == (f.flow_control in ("credit", "pfc"))
        assert cat.nic(f.default_nic).port_speed_gbps >= f.line_rate_gbps / 2
        assert cat.switch(f.default_switch).radix_at(f.line_rate_gbps) > 0
    # a ConnectX-7 at NDR gives about 46-49 GB/s of its 50
    ndr = cat.fabric("ib-ndr").nic_goodput_GBps
    assert 46.0 <= ndr.nominal <= 49.0
    assert cat.fabric("ib-ndr").flow_control == "credit"
    assert cat.fabric("roce-400g").flow_control == "pfc"
    assert cat.fabric("tcp-100g").gpudirect_rdma is False


def test_pcie_bandwidth_is_the_analytic_value(cat):
    # Gen5 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s per direction
    assert cat.nic("cx7").pcie_GBps == pytest.approx(63.015, rel=1e-4)
    # Gen4 x16 = 31.5 GB/s: enough for HDR's 25 GB/s, not for NDR's 50
    assert cat.nic("cx6").pcie_GBps == pytest.approx(31.508, rel=1e-4)
    # a link trains at the older generation: a Gen5 NIC in a Gen4 host gets Gen4 x16
    assert cat.nic("cx7").pcie_GBps_in(4) == pytest.approx(31.508, rel=1e-4)
    assert cat.nic("cx8").pcie_GBps_in(5) == pytest.approx(63.015, rel=1e-4)


def test_a_nic_delivers_the_least_of_fabric_ports_and_pcie(cat):
    cx7 = cat.nic("cx7")  # one 400G port, PCIe Gen5 x16
    assert cx7.goodput_GBps(48.0, 5) == 48.0  # the fabric's goodput
    assert cx7.goodput_GBps(48.0, 4) == pytest.approx(31.508, rel=1e-4)  # a Gen4 host
    assert cx7.goodput_GBps(60.0, 5) == pytest.approx(50.0)  # its port: 400 Gb/s


def test_switch_radix_with_breakout(cat):
    qm = cat.switch("qm9700")
    assert qm.radix_at(400) == 64
    assert qm.radix_at(200) == 128
    assert qm.radix_at(800) == 0
    th5 = cat.switch("arista-7060x6")
    assert th5.capacity_tbps == pytest.approx(51.2)
    assert th5.radix_at(400) == 128
    assert th5.radix_at(100) == 256  # capped by max_ports, not capacity (512)


def test_gpu_reference_nodes(cat):
    assert cat.gpu("h100").node.nics_per_node == 8
    assert cat.gpu("h100").node.nic_speed_gbps == 400
    assert cat.gpu("a100").node.nic_speed_gbps == 200
    assert cat.gpu("a100").fp8_dense_tflops is None
    assert cat.gpu("h800").scaleup_bidir_GBps < cat.gpu("h100").scaleup_bidir_GBps
    assert cat.gpu("h100").scaleup_unidir_GBps == 450


@pytest.mark.parametrize("model_id", sorted(DESIGN_MODELS))
def test_parameter_count_matches_published_size(cat, model_id):
    m = cat.model(model_id)
    p = count_params(m)
    assert p.total / 1e9 == pytest.approx(m.params_published_b, rel=0.01)
    if m.active_params_published_b:
        assert p.active / 1e9 == pytest.approx(m.active_params_published_b, rel=0.02)
    else:
        assert p.active == p.total


def test_parameter_count_by_hand_for_llama3_8b(cat):
    p = count_params(cat.model("llama3-8b"))
    attn = 2 * 4096 * 4096 + 2 * 4096 * 1024  # q, o + k, v (8 KV heads x 128)
    ffn = 3 * 4096 * 14336
    assert p.attention_per_layer == attn
    assert p.dense_ffn_per_layer == ffn
    assert p.total == 2 * 128256 * 4096 + 32 * (attn + ffn) + (2 * 32 + 1) * 4096


def test_ids_are_unique_across_kinds(cat):
    ids = [e.id for e in cat]
    assert len(ids) == len(set(ids))


def test_unknown_id_suggests_and_lists(cat):
    with pytest.raises(UnknownIdError) as err:
        cat.fabric("roce-401g")
    assert "did you mean 'roce-400g'" in str(err.value)
    assert "ib-ndr" in str(err.value)


def test_extra_file_adds_and_replaces(tmp_path: Path, cat):
    base = cat.fabric("ib-ndr").model_dump(mode="json")
    base.update(id="ib-ndr-measured", name="NDR as measured", source="calibration run 1")
    base["nic_goodput_GBps"] = {"low": 40.0, "high": 42.0, "typical": 41.0}
    path = tmp_path / "mine.toml"
    path.write_text(entries_to_toml([Fabric.model_validate(base)]))
    merged = load_catalog([path])
    assert merged.fabric("ib-ndr-measured").nic_goodput_GBps.nominal == 41.0
    assert (
        merged.fabric("ib-ndr").nic_goodput_GBps.nominal
        == cat.fabric("ib-ndr").nic_goodput_GBps.nominal
    )


def test_malformed_file_names_file_entry_and_field(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text(
        '[[nic]]\nid = "x1"\nname = "X"\nsource = "a datasheet"\nas_of = "2024"\n'
        'vendor = "V"\nlink_layers = ["ethernet"]\nports = 0\nport_speed_gbps = 400\n'
        "pcie_gen = 5\npcie_lanes = 16\npower_w = 20\n"
        'price = { usd = 1, assumption = true, basis = "guess" }\n'
    )
    with pytest.raises(CatalogError) as err:
        load_catalog([path], packaged=False)
    text = str(err.value)
    assert "bad.toml" in text and "'x1'" in text and "ports" in text


def test_id_reused_across_kinds_is_rejected(tmp_path: Path, cat):
    nic = cat.nic("cx7").model_dump(mode="json")
    nic["id"] = "h100"
    path = tmp_path / "clash.toml"
    path.write_text(entries_to_toml([Nic.model_validate(nic)]))
    with pytest.raises(CatalogError, match="already a gpu"):
        load_catalog([path])


def test_toml_round_trip(tmp_path: Path, cat):
    entries = cat.entries()
    path = tmp_path / "all.toml"
    path.write_text(entries_to_toml(entries, header="every entry"))
    again = load_catalog([path], packaged=False)
    assert [e.model_dump() for e in again.entries()] == [e.model_dump() for e in entries]
