"""The ``fabricplan`` command: a thin layer over the documented Python API."""

from __future__ import annotations

import typer

from fabricplan import __version__
from fabricplan.cli import catalog_cmd, scenario_cmd
from fabricplan.cli.lazy import LazyGroup
from fabricplan.cli.output import emit_json

# Commands are imported when used (see cli.lazy); the two groups and ``version`` are light.
app = typer.Typer(
    name="fabricplan",
    help=(
        "InfiniBand, RoCEv2 or Ethernet for your GPU cluster: what each does to training "
        "time and cost, and whether the fabric you were sold performs as it should.\n\n"
        "Exit codes: 0 ok, 1 internal error, 2 bad input, 3 a graded run failed."
    ),
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog_cmd.app, name="catalog")
app.add_typer(scenario_cmd.app, name="scenario")


@app.command()
def version(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Print the fabricplan version."""
    if as_json:
        emit_json({"version": __version__})
    else:
        print(f"fabricplan {__version__}")
