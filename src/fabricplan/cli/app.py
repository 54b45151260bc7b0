"""The ``fabricplan`` command: a thin layer over the documented Python API."""

from __future__ import annotations

import typer

from fabricplan import __version__
from fabricplan.cli import (
    advise_cmd,
    calibrate_cmd,
    catalog_cmd,
    claims_cmd,
    collective_cmd,
    congestion_cmd,
    cost_cmd,
    grade_cmd,
    providers_cmd,
    scenario_cmd,
    step_cmd,
    topology_cmd,
)
from fabricplan.cli.output import emit_json

app = typer.Typer(
    name="fabricplan",
    help=(
        "InfiniBand, RoCEv2 or Ethernet for your GPU cluster: what each does to training "
        "time and cost, and whether the fabric you were sold performs as it should.\n\n"
        "Exit codes: 0 ok, 1 internal error, 2 bad input, 3 a graded run failed."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog_cmd.app, name="catalog")
app.add_typer(scenario_cmd.app, name="scenario")
app.command("collective")(collective_cmd.collective)
app.command("grade")(grade_cmd.grade_cmd)
app.command("calibrate")(calibrate_cmd.calibrate_cmd)
app.command("validate")(grade_cmd.validate_cmd)
app.command("topology")(topology_cmd.topology)
app.command("congestion")(congestion_cmd.congestion)
app.command("step")(step_cmd.step_cmd)
app.command("cost")(cost_cmd.cost_cmd)
app.command("advise")(advise_cmd.advise_cmd)
app.command("providers")(providers_cmd.providers_cmd)
app.command("claims")(claims_cmd.claims_cmd)


@app.command()
def version(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Print the fabricplan version."""
    if as_json:
        emit_json({"version": __version__})
    else:
        print(f"fabricplan {__version__}")
