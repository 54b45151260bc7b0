"""collective, grade and validate through the installed entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricplan.validation import packet_level as P
from test_cli import DESIGN_EXAMPLE, run

DATA = Path(__file__).resolve().parents[1] / "src/fabricplan/validation/data/nccl-tests"


def test_collective_json_rows():
    out = json.loads(
        run(
            "collective",
            "--op",
            "all_reduce",
            "--gpu",
            "h100",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--nics-per-node",
            "8",
            "--fabric",
            "ib-ndr",
            "--sizes",
            "8,1K,1M,64M,1G,8G",
            "--json",
        ).stdout
    )
    rows = out["rows"]
    assert [r["size_bytes"] for r in rows] == [8, 1024, 2**20, 64 * 2**20, 2**30, 8 * 2**30]
    for r in rows:
        assert set(r) == {
            "size_bytes",
            "time_us",
            "algbw_GBps",
            "busbw_GBps",
            "algorithm",
            "protocol",
        }
    assert rows[-1]["busbw_GBps"] == pytest.approx(458.9, rel=0.01)
    assert out["p2p_latency_us"] == pytest.approx(1.1)


def test_collective_range_and_table():
    args = ("collective", "--nodes", "4", "--fabric", "roce-400g")
    sizes = ("--min", "1M", "--max", "1G", "--factor", "4")
    proc = run(*args, *sizes)
    assert proc.returncode == 0
    assert "1M" in proc.stdout and "1G" in proc.stdout and "roce-400g" in proc.stdout
    rows = json.loads(run(*args, *sizes, "--json").stdout)["rows"]
    assert [r["size_bytes"] for r in rows] == [2**20 * 4**i for i in range(6)]


def test_collective_from_scenario():
    out = json.loads(
        run("collective", "--scenario", str(DESIGN_EXAMPLE), "--sizes", "1G", "--json").stdout
    )
    assert out["nranks"] == 512 and out["system"]["fabric"] == "ib-ndr"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nodes", "2", "--sizes", "12Q"), "is not a size"),
        (("--nodes", "2", "--op", "allreduce2"), "unknown collective"),
        (("--nodes", "2", "--fabric", "ib-ndx"), "unknown fabric"),
        (("--sizes", "8"), "give --nodes"),
        (("--nodes", "2", "--min", "1G", "--max", "1M"), "below --min"),
    ],
)
def test_collective_bad_input(args, message):
    proc = run("collective", *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_grade_catches_gdr_off():
    f = next(DATA.glob("10_*"))
    proc = run(
        "grade",
        str(f),
        "--gpu",
        "h100",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--nics-per-node",
        "1",
        "--fabric",
        "roce-400g",
        "--json",
    )
    assert proc.returncode == 3
    out = json.loads(proc.stdout)
    assert out["verdict"] == "fail"
    assert out["findings"][0]["code"] == "gdr_off"
    row = out["rows"][0]
    assert set(row) >= {"size_bytes", "measured_busbw_GBps", "expected_busbw_GBps", "ratio"}
    assert row["ratio"] == pytest.approx(15.12 / 47.0, rel=0.01)


def test_grade_healthy_run_passes():
    proc = run("grade", str(next(DATA.glob("01_*"))), "--nodes", "2", "--json")
    out = json.loads(proc.stdout)
    assert out["runs"][0]["verdict"] == "pass"


def test_grade_bad_file(tmp_path):
    bad = tmp_path / "r.txt"
    bad.write_text("#  size count type\n1024 256 float sum -1 25.1 0.04\n")
    proc = run("grade", str(bad), "--nodes", "2")
    assert proc.returncode == 2 and "line 2" in proc.stderr


def test_collective_on_tcpx_follows_its_plugin_and_the_channels_given():
    args = ("collective", "--fabric", "tcpx-200g", "--nodes", "2", "--nics-per-node", "4")
    proc = run(*args, "--sizes", "1M,4G", "--max-ctas", "8")
    assert proc.returncode == 0
    assert "algorithms ring; protocols Simple; 8 channels" in proc.stdout
    assert "12.50 GB/s a NIC" in proc.stdout
    out = json.loads(run(*args, "--sizes", "1M,4G", "--json").stdout)
    assert {(r["algorithm"], r["protocol"]) for r in out["rows"]} == {("Ring", "Simple")}
    assert out["system"]["max_ctas"] == 12 and out["system"]["channel_GBps"] == 6.25
    # a selection by hand replaces the fabric's own
    tree = json.loads(run(*args, "--sizes", "1M", "--algo", "tree", "--json").stdout)
    assert tree["rows"][0]["algorithm"] == "Tree"
    bad = run(*args, "--sizes", "1M", "--min-ctas", "9", "--max-ctas", "8")
    assert bad.returncode == 2 and "--min-ctas 9 is above --max-ctas 8" in bad.stderr
    assert out["warnings"] == []
    # without --nics-per-node TCPX comes on the node that rents it (A3 High: 4 NICs); 8 NICs,
    # the H100 reference node's, are flagged: no provider rents TCPX so
    own = json.loads(run("collective", "--fabric", "tcpx-200g", "--nodes", "2", "--json").stdout)
    assert own["system"]["nics_per_node"] == 4 and own["warnings"] == []
    eight = ("collective", "--fabric", "tcpx-200g", "--nodes", "2", "--nics-per-node", "8")
    assert json.loads(run(*eight, "--json").stdout)["warnings"] == [
        "tcpx-200g with h100 is rented as a3-highgpu-8g (4 NICs); this table uses 8 NICs a "
        "node: set the NICs per node, or predict the provider's node type (providers --predict)"
    ]


def test_efa_on_p5_is_32_ports_driven_as_one_device_per_gpu():
    """EFA on H100 comes as p5's 32 x 100G ports, which aws-ofi-nccl drives as 8 devices of 4
    rails: 8 devices at 4 x 12 GB/s, the table says so, and the node matches p5 (no warning),
    whether the 32 ports are given or left to the default."""
    args = ("collective", "--fabric", "efa-gen2-100g", "--nodes", "2", "--sizes", "1G")
    for extra in ((), ("--nics-per-node", "32")):
        out = json.loads(run(*args, *extra, "--json").stdout)
        assert out["system"]["nics_per_node"] == 8 and out["system"]["nic_ports"] == 32
        assert out["system"]["nic_GBps"] == pytest.approx(4 * 12.0)
        assert out["warnings"] == []
    text = run(*args).stdout
    assert "32 NIC ports/node as 8 devices at 48.0 GB/s" in text


def test_validate_json():
    data = json.loads(run("validate", "--json").stdout)
    out = data["runs"]
    # every run graded as expected, the held-back TCPX and TCPXO all_reduces among them
    assert len(out) == 22
    assert [r["file"][:3] for r in out if not r["grade_ok"]] == []
    assert all("predicted_busbw_GBps" in p for r in out for p in r["points"])
    assert {r["family"] for r in out} == {"infiniband", "roce", "tcp", "srd"}
    held = {(a["family"], a["band"]): a for a in data["accuracy"] if a["held_back"]}
    assert held[("all", "busbw >= 64 MiB")]["runs"] == 6
    # every healthy run together: held_back null, 10 built-on and 6 held-back runs
    every = {(a["family"], a["band"]): a for a in data["accuracy"] if a["held_back"] is None}
    assert every[("all", "busbw >= 64 MiB")]["runs"] == 16
    assert every[("all", "time <= 64 KiB")]["median_abs_error"] == pytest.approx(0.1366, abs=5e-4)


def test_calibrate_writes_a_usable_fabric(tmp_path):
    out = tmp_path / "moc.toml"
    f = next(DATA.glob("10_*"))
    one_gpu = ("--nodes", "2", "--gpus-per-node", "1", "--nics-per-node", "1")
    # GDR off: grade calls the log broken, --force fits it anyway
    proc = run(
        "calibrate",
        str(f),
        *one_gpu,
        "--fabric",
        "roce-400g",
        "--id",
        "roce-moc",
        "--force",
        "--out",
        str(out),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    fit = json.loads(proc.stdout)
    assert fit["fabric"] == "roce-moc"
    assert fit["nic_goodput_GBps"] == pytest.approx(15.0, rel=0.02)  # GDR off: what it delivers
    assert fit["rms_log_error_after"] < fit["rms_log_error_before"]
    # every command can use the calibrated definition
    table = json.loads(
        run(
            "collective",
            "--catalog",
            str(out),
            "--fabric",
            "roce-moc",
            "--nodes",
            "2",
            "--gpus-per-node",
            "1",
            "--nics-per-node",
            "1",
            "--sizes",
            "16G",
            "--json",
        ).stdout
    )
    assert table["rows"][0]["busbw_GBps"] == pytest.approx(15.0, rel=0.03)
    graded = json.loads(
        run(
            "grade",
            str(f),
            "--catalog",
            str(out),
            "--fabric",
            "roce-moc",
            "--nodes",
            "2",
            "--gpus-per-node",
            "1",
            "--nics-per-node",
            "1",
            "--json",
        ).stdout
    )
    assert graded["runs"][0]["bandwidth_ratio"] == pytest.approx(1.0, rel=0.03)
    check = run(
        "scenario",
        "check",
        str(DESIGN_EXAMPLE),
        "--catalog",
        str(out),
        "--set",
        "cluster.fabric=[ib-ndr, roce-moc]",
    )
    assert check.returncode == 0, check.stderr
    # the workload, congestion simulation included, runs on the calibrated fabric too
    step = run(
        "step",
        str(DESIGN_EXAMPLE),
        "--catalog",
        str(out),
        "--set",
        "cluster.fabric=[ib-ndr, roce-moc]",
        "--json",
    )
    assert step.returncode == 0, step.stderr
    assert [r["fabric"] for r in json.loads(step.stdout)] == ["ib-ndr", "roce-moc"]


def test_run_selection(tmp_path):
    f = next(DATA.glob("01_*"))
    out = json.loads(run("grade", str(f), "--nodes", "8", "--run", "6", "--json").stdout)
    assert len(out["runs"]) == 1 and out["runs"][0]["label"].startswith("(F)")
    proc = run("grade", str(f), "--nodes", "8", "--run", "9")
    assert proc.returncode == 2 and "has 7 run(s)" in proc.stderr


def test_collective_cta_limits():
    def busbw(*extra: str) -> float:
        out = json.loads(
            run(
                "collective",
                "--nodes",
                "8",
                "--fabric",
                "ib-ndr",
                "--sizes",
                "256M",
                *extra,
                "--json",
            ).stdout
        )
        return out["rows"][0]["busbw_GBps"]

    assert busbw("--min-ctas", "24") < 0.95 * busbw()
    bad = run("collective", "--nodes", "8", "--min-ctas", "0")
    assert bad.returncode == 2 and "--min-ctas" in bad.stderr


def test_without_fabric_each_command_takes_the_gpus_own_nic_speed():
    """A100 nodes carry 200 Gb/s HDR NICs: collective and topology default to ib-hdr,
    congestion to roce-200g, as a scenario on A100 would; an unknown GPU is exit 2."""
    coll = json.loads(
        run("collective", "--gpu", "a100", "--nodes", "2", "--sizes", "1G", "--json").stdout
    )
    assert coll["system"]["fabric"] == "ib-hdr"
    topo = json.loads(run("topology", "--gpu", "a100", "--gpus", "256", "--json").stdout)
    assert topo["fabric"] == "ib-hdr"
    cong = json.loads(
        run("congestion", "--gpu", "a100", "--gpus", "64", "--seeds", "1", "--json").stdout
    )
    assert cong["case"]["fabric"] == "roce-200g"
    bad = run("topology", "--gpu", "a1000", "--gpus", "256", "--json")
    assert bad.returncode == 2 and "unknown gpu 'a1000'" in json.loads(bad.stdout)["error"]


def test_calibrate_on_tcpx_fits_what_a_channel_carries(tmp_path):
    """The A3 High all_gather through the CLI (its log names no channels: the fabric's 12):
    the channels bound the bandwidth, so the per-channel goodput is what is fitted, written to
    channel_goodput_GBps, and the NIC's goodput is left alone."""
    out = tmp_path / "tcpx.toml"
    proc = run(
        "calibrate",
        str(next(DATA.glob("11_*"))),
        "--run",
        "3",
        "--fabric",
        "tcpx-200g",
        "--nodes",
        "2",
        "--nics-per-node",
        "4",
        "--id",
        "tcpx-fit",
        "--out",
        str(out),
        "--json",
    )
    fit = json.loads(proc.stdout)
    assert fit["bandwidth_fitted"] == "channel" and fit["nic_goodput_GBps"] is None
    # 50 GB/s busbw on 12 channels over 4 NICs: about 4.2-4.5 GB/s a channel
    assert 4.0 < fit["channel_goodput_GBps"] < 4.7
    assert fit["rms_log_error_after"] < fit["rms_log_error_before"]
    text = out.read_text()
    assert "channel_goodput_GBps = { low = 4.42" in text


def test_validate_packet_level_held_back_case():
    # a case developed on alone: no suite case, its two routings, both within 10 %
    data = json.loads(
        run("validate", "--suite", "packet-level", "--case", "incast8", "--json").stdout
    )
    assert data["cases"] == [] and data["held_back"] == []
    developed = data["developed"]
    assert [c["routing"] for c in developed] == ["ecmp", "flowlet"]
    assert all(c["within_tolerance"] for c in developed)
    assert developed[0]["measured_fct_us"]["max"] == pytest.approx(649.541)
    text = run("validate", "--suite", "packet-level", "--case", "incast8").stdout
    assert "developed on, within 10 % on p50, p99 and max: 2/2" in text
    # a held-back one: its own table and count
    data = json.loads(
        run("validate", "--suite", "packet-level", "--case", "incast32half", "--json").stdout
    )
    held = data["held_back"]
    assert data["developed"] == [] and [c["routing"] for c in held] == ["ecmp", "flowlet"]
    assert held[0]["measured_fct_us"]["max"] == pytest.approx(
        P.measured()[("incast32half", "ecmp")]["max"]
    )
    # under flowlet routing, beside the simulator's retransmissions: what the moves resend
    assert "resent_bytes" not in held[0]
    resent = held[1]["resent_bytes"]
    assert resent["measured"] == pytest.approx(P.measured_resent()[("incast32half", "flowlet")])
    assert resent["measured"] > 0 and resent["predicted"] >= 0
    text = run("validate", "--suite", "packet-level", "--case", "incast32half").stdout
    assert "held back, within 10 % on p50, p99 and max: 2/2" in text
    assert "Bytes sent again after flowlet moves" in text
    bad = run("validate", "--suite", "packet-level", "--case", "nope")
    assert bad.returncode == 2 and "incast32nic" in bad.stdout + bad.stderr
