"""What the web planner's tests share: the app, the CLI's JSON for the same input, the logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "llama3-70b-512-h100.yaml"
LOGS = ROOT / "src" / "fabricplan" / "validation" / "data" / "nccl-tests"
UNDERPERFORMING = LOGS / "02_nccl-tests-issue290_H100_IB-NDR_2nodes_underperforming.txt"


def cli_json(*args: str) -> tuple[int, Any]:
    """The command's exit code and the JSON it prints, run in this process (the code under
    test, whichever tree it is in)."""
    from fabricplan.cli.app import app

    result = CliRunner().invoke(app, [*args, "--json"], env={"COLUMNS": "120"})
    return result.exit_code, json.loads(result.stdout)


def cli_text(*args: str) -> tuple[int, str]:
    """The command's exit code and what it prints for a person (standard output and error)."""
    from fabricplan.cli.app import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def scenario_body(*sets: str, **extra: Any) -> dict[str, Any]:
    return {"scenario": DEMO.read_text(), "set": list(sets), **extra}
