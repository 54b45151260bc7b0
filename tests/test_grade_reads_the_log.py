"""grade and calibrate read each run's shape and setup from its own log (entry point runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from fabricplan.nccltests import parse
from fabricplan.nccltests.layout import resolve_layout
from nccl_writer import Row, writer_json

SCRIPT = Path(sys.executable).with_name("fabricplan")
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "fabricplan"]
DATA = ROOT / "src/fabricplan/validation/data/nccl-tests"
ISSUE_309 = next(DATA.glob("01_*"))
ROCE_1GPU = next(DATA.glob("10_*"))


def run(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*ENTRY, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def graded(*args: str | Path) -> tuple[int, dict]:
    proc = run("grade", *args, "--json")
    return proc.returncode, json.loads(proc.stdout)


def test_each_run_of_a_file_is_graded_with_its_own_node_count():
    code, out = graded(ISSUE_309, "--nodes", "2")
    runs = out["runs"]
    assert [r["layout"]["nodes"] for r in runs] == [2, 4, 8, 2, 4, 8, 2]
    # as the manifest rates them: the congested 8- and 4-node runs warn, none fails
    assert [r["verdict"] for r in runs] == ["pass", "pass", "warn", "pass", "warn", "pass", "pass"]
    assert code == 0
    disagree = [f["message"] for f in runs[1]["findings"] if f["code"] == "flag_disagrees_with_log"]
    assert disagree == [
        "--nodes 2, but the log shows 4 (busbw/algbw: 32 ranks, 8 GPUs a node); graded as 4 nodes"
    ]
    assert not any(f["code"] == "flag_disagrees_with_log" for f in runs[0]["findings"])


def test_the_init_line_gives_gpus_per_node():
    code, out = graded(ROCE_1GPU)
    layout = out["runs"][0]["layout"]
    assert (layout["nodes"], layout["gpus_per_node"], layout["nics_per_node"]) == (2, 1, 1)
    assert layout["read_from"] == "NCCL init line: nRanks 2 nNodes 2 localRanks 1"
    assert 0.25 < out["runs"][0]["bandwidth_ratio"] < 0.40  # 15 GB/s of one 400G NIC
    assert code == 3


def test_a_flag_the_log_contradicts_is_named_with_the_log():
    _, out = graded(ROCE_1GPU, "--gpus-per-node", "8")
    messages = [f["message"] for f in out["findings"] if f["code"] == "flag_disagrees_with_log"]
    assert messages == [
        "--gpus-per-node 8, but the log says 1 (NCCL init line: nRanks 2 nNodes 2 localRanks 1); "
        "graded with 1"
    ]
    assert out["runs"][0]["layout"]["gpus_per_node"] == 1


def test_layout_fills_only_what_the_log_leaves_open():
    one_host = parse(writer_json([Row(2**30, 2**28, 5000.0, 214.75, 214.75)], processes=["a"] * 2))
    shape = resolve_layout(
        one_host[0],
        nodes_flag=None,
        gpn_flag=None,
        nics_flag=None,
        reference_gpn=8,
        reference_nics=8,
    )
    assert (shape.nodes, shape.gpus_per_node, shape.nics_per_node) == (1, 2, 2)
    unknown = parse("1073741824 268435456 float sum -1 5000.0 214.75 214.75 0")[0]
    shape = resolve_layout(
        unknown, nodes_flag=2, gpn_flag=None, nics_flag=None, reference_gpn=8, reference_nics=8
    )
    assert (shape.nodes, shape.gpus_per_node, shape.warnings) == (
        2,
        1,
        [],
    )  # busbw = algbw: 2 ranks


def test_json_from_the_writer_is_graded_with_its_ranks_and_hosts(tmp_path):
    rows = [Row(2**s, 2**s // 4, 2**s / 46e3, 46.0, 80.5) for s in range(26, 31)]
    (tmp_path / "r.json").write_text(writer_json(rows, processes=["a", "b"], ngpus=8))
    _, out = graded(tmp_path / "r.json")
    layout = out["runs"][0]["layout"]
    assert (layout["nodes"], layout["gpus_per_node"], layout["ranks"]) == (2, 8, 16)


def test_calibrate_refuses_a_run_grade_finds_broken_unless_forced(tmp_path):
    proc = run("calibrate", ROCE_1GPU, "--out", tmp_path / "a.toml", "--json")
    assert proc.returncode == 2 and not (tmp_path / "a.toml").exists()
    error = json.loads(proc.stdout)["error"]
    assert "gdr_off" in error and "line 20: " in error and "--force" in error
    proc = run("calibrate", ROCE_1GPU, "--out", tmp_path / "a.toml", "--force", "--json")
    assert proc.returncode == 0, proc.stdout
    fit = json.loads(proc.stdout)
    assert 14 < fit["nic_goodput_GBps"] < 16  # the 15 GB/s the bounce through host memory gives
    assert fit["nic_goodput_sigma_GBps"] < 1 and fit["at_bounds"] == []
    assert fit["rms_log_error_after"] < fit["rms_log_error_before"]


def test_rows_that_cannot_be_real_are_graded_fail_and_never_fitted(tmp_path):
    zero = "\n".join(f"{2**s} {2**s // 4} float sum -1 0 0 0 0" for s in (30, 31))
    (tmp_path / "zero.txt").write_text(zero + "\n")
    code, out = graded(tmp_path / "zero.txt", "--nodes", "2")
    assert code == 3 and out["findings"][0]["code"] == "impossible_rows"
    assert (
        "line 1 (1,073,741,824 B): a collective of 1,073,741,824 bytes took 0 us"
        in (out["findings"][0]["message"])
    )
    for extra in ((), ("--force",)):
        proc = run("calibrate", tmp_path / "zero.txt", "--nodes", "2", "--out", "-", *extra)
        assert proc.returncode == 2 and "impossible_rows" in proc.stderr and not proc.stdout


def test_a_fit_the_bounds_stop_is_reported(tmp_path):
    # 2 nodes x 8 GPUs, Ring: 430 GB/s busbw asks for 54 GB/s a NIC, more than 400G carries
    rows = [Row(2**s, 2**s // 4, 2**s / 229.33e3, 229.33, 430.0) for s in range(26, 34)]
    text = writer_json(rows, processes=["a", "b"], ngpus=8, env=("NCCL_ALGO=Ring",))
    (tmp_path / "fast.json").write_text(text)
    proc = run("calibrate", tmp_path / "fast.json", "--out", tmp_path / "f.toml", "--json")
    fit = json.loads(proc.stdout)
    assert fit["nic_goodput_GBps"] == pytest.approx(50.0)
    assert fit["at_bounds"] == [
        "NIC goodput 50 GB/s is at its upper search bound (50 GB/s): the data ask for a value "
        "beyond it"
    ]
    written = (tmp_path / "f.toml").read_text()
    assert "typical = 50.0," in written and "at its upper search bound" in written
