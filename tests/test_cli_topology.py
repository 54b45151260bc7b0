"""topology through the installed entry point."""

from __future__ import annotations

import json

from test_cli import DESIGN_EXAMPLE, run


def test_topology_json_keys_and_values():
    out = json.loads(
        run(
            "topology",
            "--gpu",
            "h100",
            "--gpus",
            "1024",
            "--design",
            "rail-optimized",
            "--fabric",
            "ib-ndr",
            "--switch",
            "qm9700",
            "--oversubscription",
            "1",
            "--json",
        ).stdout
    )
    assert out["switches"] == {"leaf": 32, "spine": 16, "core": 0}
    assert out["cables"] == {"node_leaf": 1024, "leaf_spine": 1024, "spine_core": 0}
    assert out["nics"] == 1024 and out["transceivers"] == 512 + 1024 + 1024
    assert out["bisection_GBps"] == 1024 / 2 * 50
    assert out["hops"]["same_rail"] == 3 and out["hops"]["max"] == 3
    assert out["max_endpoints"] == 65536
    assert 80 < out["power_kw"] < 110


def test_topology_three_tier_table():
    proc = run("topology", "--gpus", "4096")
    assert proc.returncode == 0
    assert "leaf 128, spine 128, core 64" in proc.stdout


def test_topology_table_shows_the_cable_runs_used():
    proc = run("topology", "--gpus", "1024", "--cable-length", "leaf_spine=3")
    assert "node_leaf 20 m, leaf_spine 3 m (given)" in proc.stdout


def test_topology_impossible_exit_2():
    proc = run("topology", "--gpus", "100000", "--json")
    assert proc.returncode == 2
    assert "reaches at most 65,536 GPUs" in json.loads(proc.stdout)["error"]
    proc = run("topology", "--gpus", "1024", "--oversubscription", "0.5")
    assert proc.returncode == 2 and "non-blocking" in proc.stderr
    proc = run("topology", "--gpus", "1024", "--cable-length", "node_leaf")
    assert proc.returncode == 2 and "TIER=METRES" in proc.stderr


def test_topology_from_scenario_designs_every_fabric():
    out = json.loads(run("topology", "--scenario", str(DESIGN_EXAMPLE), "--json").stdout)
    fabrics = [d["fabric"] for d in out["designs"]]
    assert fabrics == ["ib-ndr", "roce-400g"]
    assert all(d["gpus"] == 512 for d in out["designs"])


def test_topology_dragonfly_and_spine_oversubscription():
    out = json.loads(
        run(
            "topology",
            "--gpus",
            "16384",
            "--design",
            "dragonfly",
            "--fabric",
            "roce-800g",
            "--json",
        ).stdout
    )
    assert out["hops"]["valiant_max"] == 6 and out["dragonfly"]["groups"] > 1
    out = json.loads(
        run("topology", "--gpus", "8192", "--oversubscription", "1,2", "--json").stdout
    )
    assert out["oversubscription"] == {"leaf": 1.0, "spine": 2.0}
    assert out["switches"]["core"] < 128
