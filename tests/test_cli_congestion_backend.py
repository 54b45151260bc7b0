"""--congestion (the network backend) on step, advise, claims and validate, through the installed
entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from test_cli import run

MOE = "examples/256-gpu-moe.yaml"
SMALL = "examples/16-gpu-finetune.yaml"
# a 2:1 oversubscribed RoCE fat-tree, where the MoE example's traffic collides
CONGESTED = (
    "--fabric",
    "roce-400g",
    "--set",
    "cluster.topology.design=fat-tree",
    "--set",
    "cluster.topology.oversubscription=2",
)
ALLOWED = "allowed: none, closed-form, flow"


def test_step_json_names_the_backend_and_none_is_the_ideal_fabric():
    flow = json.loads(run("step", MOE, *CONGESTED, "--json").stdout)[0]
    none = json.loads(run("step", MOE, *CONGESTED, "--json", "--congestion", "none").stdout)[0]
    assert (flow["congestion_backend"], none["congestion_backend"]) == ("flow", "none")
    # the data-parallel ring collides on the 2:1 leaves: the exposed reduction grows by a tenth
    assert none["step_time_s"] < flow["step_time_s"]
    assert none["breakdown"]["dp_comm_s"] < 0.95 * flow["breakdown"]["dp_comm_s"]
    assert none["breakdown"]["compute_s"] == flow["breakdown"]["compute_s"]
    # the flag --congestion replaced still works, as a deprecated alias of none
    alias = run("step", MOE, *CONGESTED, "--json", "--no-congestion")
    assert alias.returncode == 0 and json.loads(alias.stdout) == [none]
    assert "--no-congestion is deprecated; use --congestion none" in alias.stderr


def test_an_unknown_backend_exits_2_with_the_allowed_names():
    for cmd in (("step", SMALL), ("advise", SMALL), ("claims",), ("validate", "--suite", "claims")):
        proc = run(*cmd, "--congestion", "ideal")
        assert proc.returncode == 2 and f"unknown backend 'ideal'; {ALLOWED}" in proc.stderr
    out = run("step", SMALL, "--json", "--congestion", "ideal")
    assert out.returncode == 2 and ALLOWED in json.loads(out.stdout)["error"]


def test_conflicting_or_pointless_congestion_options_exit_2():
    both = run("step", SMALL, "--no-congestion", "--congestion", "flow")
    assert both.returncode == 2 and "--no-congestion means --congestion none" in both.stderr
    nccl = run("validate", "--congestion", "none")  # the nccl-tests suite
    assert nccl.returncode == 2 and "uses no congestion backend" in nccl.stderr


def test_closed_form_outside_its_law_is_a_clean_error():
    proc = run("step", MOE, *CONGESTED, "--congestion", "closed-form")
    assert proc.returncode == 2
    assert "--congestion closed-form: its law covers ring and tree traffic" in proc.stderr
    assert proc.stderr.rstrip().endswith("use --congestion flow")
    # the validation's InfiniBand runs route adaptively: outside the law, refused the same way
    runs = run("validate", "--suite", "training", "--congestion", "closed-form")
    assert runs.returncode == 2 and "not ib-hdr's adaptive routing" in runs.stderr


def test_advise_json_names_the_backend():
    args = ("advise", SMALL, "--json", "--no-break-even")
    flow = json.loads(run(*args).stdout)
    none = json.loads(run(*args, "--congestion", "none").stdout)
    assert (flow["congestion_backend"], none["congestion_backend"]) == ("flow", "none")
    # RoCE tuning is a congestion question: the ideal fabric has nothing to say about it
    assert "roce_tuning" in flow["recommendation"]
    assert "roce_tuning" not in none["recommendation"]


def test_a_table_priced_by_another_backend_says_so():
    flow, none = run("step", SMALL), run("step", SMALL, "--congestion", "none")
    assert "congestion priced by" not in flow.stdout
    assert "congestion priced by the none backend (--congestion none)" in none.stdout


def test_step_help_lists_the_backends_without_loading_the_simulator():
    code = (
        "import sys\nfrom fabricplan.cli import main\nsys.argv = ['fabricplan', 'step', '--help']"
        "\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('scipy', 'fabricplan.congestion.simulate', 'fabricplan.congestion.case')\n"
        "print([m for m in heavy if m in sys.modules], file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    assert out.stderr.strip() == "[]"
    assert "--congestion" in out.stdout and "none|closed-form|flow" in out.stdout
    assert "--no-congestion" not in out.stdout  # hidden: deprecated
