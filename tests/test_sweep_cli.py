"""``fabricplan sweep`` through the real entry point: run, show, export, errors, a resume after a
real ``kill -9`` midway, and the Ray engine on a local instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DESIGN_EXAMPLE, ROOT

EXAMPLE_64 = ROOT / "examples" / "64-gpu-70b-training.yaml"
# The checkout's own code, whatever an installed copy holds.
ENV = {"PATH": "/usr/bin:/bin", "COLUMNS": "120", "PYTHONPATH": str(ROOT / "src")}
CLI = [sys.executable, "-m", "fabricplan"]
# 65 combinations at the advise level: a few seconds on two cores, long enough to be killed
# midway.
RESUMABLE = [
    "sweep",
    "run",
    str(EXAMPLE_64),
    "--grid",
    "cluster.gpus=16..256:x2",
    "--grid",
    "costs.gpu_hour_price=1..4:+0.25",
    "--what",
    "advise",
    "--jobs",
    "2",
    "--json",
]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=ENV
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _rows(path: Path) -> list[dict]:
    from fabricplan.sweep.store import load

    df = load(path).drop(columns=["time"])
    return df.to_dict("records")


def test_run_show_export(tmp_path: Path):
    out = tmp_path / "s.duckdb"
    proc = run(
        "sweep",
        "run",
        str(DESIGN_EXAMPLE),
        "--grid",
        "cluster.gpus=256,4096",
        "--grid",
        "workload.parallel.pp=4,3",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "4 combinations" in proc.stdout and "skipped" in proc.stdout
    # 4,096 GPUs is past the growth target: the target follows, the combination runs
    rows = _rows(out)
    big = [r for r in rows if r["cluster.gpus"] == 4096 and r["status"] == "ok"]
    assert len(big) == 2 and "target_gpus -> 4096" in big[0]["followed"]
    shown = json.loads(run("sweep", "show", str(out), "--json").stdout)
    assert shown["combinations"] == 4 and shown["skipped"] == 2 and shown["rows"] == 6
    assert shown["swept"] == ["cluster.gpus", "workload.parallel.pp"]
    assert shown["what"] == "step"
    assert run("sweep", "show", str(out)).stdout.count("does not divide") >= 1
    csv = tmp_path / "s.csv"
    done = json.loads(run("sweep", "export", str(out), "--csv", str(csv), "--json").stdout)
    assert done["rows"] == 6
    header = csv.read_text().splitlines()[0].split(",")
    assert header[2:4] == ["cluster.gpus", "workload.parallel.pp"]
    assert run("sweep", "export", str(out), "--csv", str(csv)).returncode == 2  # no --force
    pq = tmp_path / "s.parquet"
    assert run("sweep", "export", str(out), "--parquet", str(pq)).returncode == 0
    import duckdb

    ((n,),) = duckdb.sql(f"SELECT count(*) FROM '{pq}'").fetchall()
    assert n == 6


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (["--grid", "cluster.gpus=0,8"], "cluster.gpus", "outside the allowed range"),
        (["--grid", "cluster.gpuz=8"], "cluster.gpuz", "unknown key"),
        (["--grid", "cluster.gpus=8..4:x2"], "cluster.gpus", "below its start"),
    ],
)
def test_errors_exit_2_with_field_value_and_range(tmp_path: Path, args, field, words):
    proc = run(
        "sweep", "run", str(DESIGN_EXAMPLE), *args, "--out", str(tmp_path / "x.duckdb"), "--json"
    )
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["problems"][0]["field"] == field and words in doc["problems"][0]["message"]
    assert not (tmp_path / "x.duckdb").exists()
    text = run("sweep", "run", str(DESIGN_EXAMPLE), *args, "--out", str(tmp_path / "x.duckdb"))
    assert text.returncode == 2 and field in text.stderr


def test_other_errors_exit_2(tmp_path: Path):
    assert run("sweep", "show", str(tmp_path / "none.duckdb")).returncode == 2
    (tmp_path / "junk.duckdb").write_text("not a database")
    assert run("sweep", "show", str(tmp_path / "junk.duckdb")).returncode == 2
    bad = run("sweep", "run", str(DESIGN_EXAMPLE), "--grid", "cluster.gpus=8", "--what", "all")
    assert bad.returncode == 2 and "--what" in bad.stderr


def test_resume_after_kill_9(tmp_path: Path):
    out = tmp_path / "killed.duckdb"
    wal = Path(str(out) + ".wal")
    proc = subprocess.Popen(
        [*CLI, *RESUMABLE, "--out", str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # kill once a second batch is committed: the first is the combinations skipped up front
    first, deadline = 0, time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        size = wal.stat().st_size if wal.exists() else 0
        if first and size > first:
            break
        first = first or size
        time.sleep(0.005)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _rows(out)
    stored = {r["combination"] for r in partial}
    assert 0 < len(stored) < 65
    again = json.loads(run(*RESUMABLE, "--out", str(out)).stdout)
    assert again["already_stored"] == len(stored)
    assert again["evaluated"] == 65 - len(stored)
    whole = tmp_path / "whole.duckdb"
    run(*RESUMABLE, "--out", str(whole))
    resumed, uninterrupted = _rows(out), _rows(whole)
    key = lambda r: (r["combination_index"], str(r["fabric"]))  # noqa: E731
    assert len({r["combination"] for r in resumed}) == 65  # every combination...
    assert len(resumed) == len(uninterrupted)  # ... exactly once
    for a, b in zip(sorted(resumed, key=key), sorted(uninterrupted, key=key), strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]), k  # NaN equals NaN here


@pytest.mark.ray
def test_ray_engine_gives_the_rows_of_the_local_engine(cat, tmp_path: Path):
    pytest.importorskip("ray")
    import ray

    from fabricplan.scenario.yaml_io import parse_yaml
    from fabricplan.sweep.engine import CACHE, Spec
    from fabricplan.sweep.executors import InProcess, RayExecutor
    from fabricplan.sweep.grid import parse_grid
    from fabricplan.sweep.run import run_sweep
    from fabricplan.sweep.store import load

    base = parse_yaml(EXAMPLE_64.read_text())
    axes = parse_grid(["cluster.gpus=32,64,128", "costs.gpu_hour_price=2,3"])
    a, b = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    run_sweep(base, axes, Spec("cost", cat), a, InProcess())
    CACHE.clear()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        s = run_sweep(base, axes, Spec("cost", cat), b, RayExecutor(), engine="ray")
    finally:
        ray.shutdown()
    assert s.workers == 2 and s.evaluated == 6
    assert load(a).drop(columns=["time"]).equals(load(b).drop(columns=["time"]))


def test_start_up_and_advise_import_no_duckdb_pandas_or_ray():
    code = (
        "import sys, fabricplan.cli.app, fabricplan.cli.sweep_cmd; "
        "from fabricplan.advise.break_even import sweep; "
        "print(sorted({'duckdb', 'pandas', 'ray'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True
    )
    assert out.stdout.strip() == "[]"
