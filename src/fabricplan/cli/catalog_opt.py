"""The ``--catalog`` and ``--json`` options every command shares. Kept apart from
``system_opts`` so that light commands (``scenario``, ``catalog``, ``version``) do not import the
collective model and numpy at start-up."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricplan.catalog import Catalog
from fabricplan.cli.output import fail_with

JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")
CATALOG_OPT = typer.Option(
    None, "--catalog", help="Extra catalog file (e.g. written by `fabricplan calibrate`)."
)


def catalog_from(path: Path | None, as_json: bool) -> Catalog:
    from fabricplan.ops import BadInput
    from fabricplan.ops.options import catalog_with

    try:
        return catalog_with(path)
    except BadInput as exc:
        fail_with(exc, as_json)
