"""The command line, run as a user runs it: the installed entry point in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DESIGN_EXAMPLE, ROOT

SCRIPT = Path(sys.executable).with_name("fabricplan")
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "fabricplan"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*ENTRY, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_help_lists_commands():
    from fabricplan.cli.lazy import COMMANDS

    proc = run("--help")
    assert proc.returncode == 0 and "Exit codes" in proc.stdout
    # the first word of each row of the command panel, not the help prose
    listed = {
        line.split()[1]
        for line in proc.stdout.splitlines()
        if line.startswith("│ ") and not line.startswith("│  ") and len(line.split()) > 1
    }
    assert listed >= {"catalog", "scenario", "version", *COMMANDS}


def test_help_wraps_each_commands_summary_as_one_paragraph():
    # a docstring's own line breaks must not reach the command panel: at 120 columns every
    # summary below fits on one line, so a second line there is a break the docstring made
    proc = run("--help")
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│ ")]
    step = next(i for i, line in enumerate(rows) if line.split()[1] == "step")
    assert "workload.serving.concurrency is per replica" in " ".join(rows[step : step + 2])
    assert rows[step + 1].split()[1] != "rates"  # was: "token" / "rates per replica ..."


def test_version():
    from fabricplan import __version__

    assert run("version").stdout.strip() == f"fabricplan {__version__}"
    assert json.loads(run("version", "--json").stdout) == {"version": __version__}


def test_catalog_list_json_has_required_keys():
    proc = run("catalog", "list", "--json")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    assert len(rows) > 50
    for row in rows:
        assert {"kind", "id", "source", "as_of"} <= set(row)
    assert {r["kind"] for r in rows} == {
        "fabric",
        "switch",
        "nic",
        "cable",
        "transceiver",
        "gpu",
        "model",
    }


def test_catalog_list_one_kind_accepts_plurals():
    rows = json.loads(run("catalog", "list", "fabrics", "--json").stdout)
    assert {r["kind"] for r in rows} == {"fabric"}
    ndr = next(r for r in rows if r["id"] == "ib-ndr")
    assert ndr["line_rate_gbps"] == 400.0 and ndr["flow_control"] == "credit"
    table = run("catalog", "list", "optics")
    assert table.returncode == 0 and "xcvr-osfp-800g-2xsr4" in table.stdout


def test_catalog_show():
    rec = json.loads(run("catalog", "show", "llama3-405b", "--json").stdout)
    assert rec["kind"] == "model" and rec["layers"] == 126
    assert rec["derived"]["params_b"] == pytest.approx(405.85, rel=1e-3)
    proc = run("catalog", "show", "qm9700")
    assert proc.returncode == 0 and "price.assumption" in proc.stdout


@pytest.mark.parametrize("args", [("catalog", "show", "h1000"), ("catalog", "list", "widgets")])
def test_catalog_unknown_exits_2(args):
    proc = run(*args)
    assert proc.returncode == 2
    assert "unknown" in proc.stderr
    as_json = json.loads(run(*args, "--json").stdout)
    assert "unknown" in as_json["error"]


def test_scenario_check_ok():
    proc = run("scenario", "check", str(DESIGN_EXAMPLE))
    assert proc.returncode == 0
    assert "ok" in proc.stdout and "512 x h100 in 64 nodes" in proc.stdout


def test_scenario_check_json_is_resolved():
    out = json.loads(run("scenario", "check", str(DESIGN_EXAMPLE), "--json").stdout)
    assert out["valid"] is True
    assert out["scenario"]["workload"]["parallel"]["dp"] == 16
    assert out["scenario"]["cluster"]["fabric"] == ["ib-ndr", "roce-400g"]


def test_scenario_set_overrides(tmp_path):
    out = json.loads(
        run(
            "scenario",
            "check",
            str(DESIGN_EXAMPLE),
            "--set",
            "cluster.gpus=1024",
            "--set",
            "workload.parallel.pp=8",
            "--json",
        ).stdout
    )
    assert out["scenario"]["cluster"]["gpus"] == 1024
    assert out["scenario"]["workload"]["parallel"]["dp"] == 16


def test_bad_scenario_exits_2_with_every_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "cluster:\n  gpus: 100\n  fabric: [ib-ndr, roce-401g]\n"
        "workload:\n  model: llama3-70b\n  parallel: {tp: 3}\n"
    )
    proc = run("scenario", "check", str(bad))
    assert proc.returncode == 2
    err = proc.stderr
    assert "cluster.fabric[1]: unknown fabric" in err and "roce-400g" in err
    assert "cluster.gpus: must be a multiple of gpus_per_node (8)" in err
    assert "workload.parallel.tp: must divide gpus_per_node (8)" in err
    out = json.loads(run("scenario", "check", str(bad), "--json").stdout)
    fields = [p["field"] for p in out["problems"]]
    assert "cluster.fabric[1]" in fields and "cluster.gpus" in fields
    assert next(p for p in out["problems"] if p["field"] == "cluster.gpus")["value"] == 100


def test_unknown_key_and_bad_set(tmp_path):
    proc = run("scenario", "check", str(DESIGN_EXAMPLE), "--set", "cluster.colour=blue")
    assert proc.returncode == 2 and "cluster.colour: unknown key" in proc.stderr
    proc = run("scenario", "check", str(DESIGN_EXAMPLE), "--set", "nonsense")
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stderr


def test_missing_file_exits_2():
    proc = run("scenario", "check", "no/such/file.yaml")
    assert proc.returncode == 2 and "cannot read file" in proc.stderr


def test_scenario_show_table_and_json():
    proc = run("scenario", "show", str(DESIGN_EXAMPLE))
    assert proc.returncode == 0
    assert "ib-ndr" in proc.stdout and "roce-400g" in proc.stdout and "llama3-70b" in proc.stdout
    out = json.loads(run("scenario", "show", str(DESIGN_EXAMPLE), "--json").stdout)
    assert [f["id"] for f in out["fabrics"]] == ["ib-ndr", "roce-400g"]
    assert out["cluster"]["nodes"] == 64
    assert out["workload"]["params_b"] == pytest.approx(70.55, rel=1e-3)


def test_usage_error_exits_2():
    proc = run("scenario", "check")
    assert proc.returncode == 2


def test_light_commands_do_not_load_the_numerics_at_start_up():
    """`version`, `catalog` and `scenario` must start without numpy (see cli.lazy)."""
    import subprocess
    import sys

    code = "import sys, fabricplan.cli.app; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
