"""congestion through the installed entry point."""

from __future__ import annotations

import json

import pytest

from test_cli import run

KEYS = (
    "ideal_time_us",
    "p50_time_us",
    "p99_time_us",
    "p50_slowdown",
    "p99_slowdown",
    "busbw_p50_GBps",
    "paused_fraction",
    "victim_flows",
)


def test_congestion_json_keys_and_qps_effect():
    args = (
        "congestion",
        "--gpu",
        "h100",
        "--gpus",
        "512",
        "--fabric",
        "roce-400g",
        "--roce-quality",
        "tuned",
        "--design",
        "fat-tree",
        "--routing",
        "ecmp",
        "--pattern",
        "ring-allreduce",
        "--size",
        "8G",
        "--seeds",
        "5",
        "--json",
    )
    one = json.loads(run(*args).stdout)
    four = json.loads(run(*args, "--qps", "4").stdout)
    for key in KEYS:
        assert key in one
    assert one["p99_time_us"] >= one["p50_time_us"] >= one["ideal_time_us"]
    assert one["p50_slowdown"] > 1.1
    assert four["busbw_p50_GBps"] > 1.2 * one["busbw_p50_GBps"]
    assert one["flow_control"] == "pfc+dcqcn" and one["nodes"] == 64


def test_congestion_incast_table_and_pauses():
    incast = ("congestion", "--gpus", "256", "--pattern", "incast", "--size", "16M")
    proc = run(*incast, "--roce-quality", "default", "--seeds", "2")
    assert proc.returncode == 0
    assert "paused time" in proc.stdout and "hottest links" in proc.stdout
    args = (*incast, "--seeds", "2", "--json", "--roce-quality")
    paused = json.loads(run(*args, "default").stdout)  # PFC acts before ECN: pauses
    lossy = json.loads(run(*args, "misconfigured").stdout)  # no PFC: drops, go-back-N
    assert paused["paused_fraction"] > 0.01 and lossy["paused_fraction"] == 0.0
    assert lossy["p50_slowdown"] > 10 * paused["p50_slowdown"]


def test_congestion_bad_input_exits_2():
    proc = run("congestion", "--gpus", "1024", "--placement", "scattered")
    assert proc.returncode == 2
    assert "placement" in proc.stderr and "contiguous, fragmented" in proc.stderr
    proc = run("congestion", "--roce-quality", "great", "--json")
    assert proc.returncode == 2 and "tuned" in json.loads(proc.stdout)["error"]


def test_congestion_pipeline_sends_adaptive_is_ideal():
    out = json.loads(
        run(
            "congestion",
            "--gpus",
            "1024",
            "--fabric",
            "ib-ndr",
            "--pattern",
            "pipeline",
            "--size",
            "256M",
            "--seeds",
            "3",
            "--jitter-us",
            "0",
            "--json",
        ).stdout
    )
    assert out["routing"] == "adaptive"
    assert out["network_slowdown_p50"] == pytest.approx(1.0, abs=0.02)
    # one stage's 256 MiB over 8 NICs of ~48 GB/s: about 700 us
    assert 600 < out["ideal_time_us"] < 800


def test_congestion_takes_a_spine_ratio_as_topology_does():
    """--oversubscription LEAF,SPINE: a 3-tier HDR fabric (40-port switches at 1,024 GPUs)
    thins its top tiers at 4:1 spine; a bad ratio is exit 2 naming the flag."""
    args = (
        "congestion",
        "--gpu",
        "a100",
        "--gpus",
        "1024",
        "--fabric",
        "ib-hdr",
        "--design",
        "fat-tree",
        "--seeds",
        "1",
        "--json",
    )
    flat = json.loads(run(*args).stdout)
    thin = json.loads(run(*args, "--oversubscription", "1,4").stdout)
    assert flat["fabric_layout"]["tiers"] == thin["fabric_layout"]["tiers"] == 3
    assert thin["case"]["spine_oversubscription"] == 4
    assert thin["fabric_layout"]["switches"]["core"] < flat["fabric_layout"]["switches"]["core"]
    bad = run(*args, "--oversubscription", "1,x")
    assert bad.returncode == 2 and "--oversubscription" in json.loads(bad.stdout)["error"]


def test_congestion_says_what_flowlet_moves_resend():
    # a 1,024-GPU incast on RoCE with PFC alone: flowlet moves reorder flows and RoCE's
    # go-back-N sends bytes again; ECMP never moves a flow, so it resends nothing
    args = ("congestion", "--gpus", "1024", "--pattern", "incast", "--seeds", "2")
    args = (*args, "--fabric", "roce-400g", "--congestion-control", "none", "--routing")
    moved = json.loads(run(*args, "flowlet", "--json").stdout)
    fixed = json.loads(run(*args, "ecmp", "--json").stdout)
    assert moved["resent_bytes"] > 1e8 and fixed["resent_bytes"] == 0.0
    text = run(*args, "flowlet").stdout
    assert "resent after flowlet moves (MB, median per run)" in text
    assert "resent after flowlet moves" not in run(*args, "ecmp").stdout
