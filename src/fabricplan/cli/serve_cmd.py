"""``fabricplan serve``: the web planner and its JSON API on this machine."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import typer

from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve_cmd(
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to listen on. The default answers this machine only; 0.0.0.0 answers "
        "anyone who can reach it (there is no authentication).",
    ),
    port: int = typer.Option(8000, "--port", callback=within(0, 65535), help="TCP port."),
    catalog: Path | None = CATALOG_OPT,
) -> None:
    """Serve the web planner: a scenario editor with the recommendation and charts, grading of
    an uploaded nccl-tests log, the report, and the JSON API (/api/..., schema at
    /openapi.json)."""
    import uvicorn

    from fabricplan.cli.output import err_console
    from fabricplan.web import create_app

    app = create_app(catalog_from(catalog, as_json=False))
    if not is_loopback(host):
        err_console.print(
            f"[yellow]warning:[/] listening on {host}: anyone who can reach this machine on port "
            f"{port} can use the planner (it has no authentication)",
            highlight=False,
        )
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"fabricplan web planner on http://{shown}:{port}/", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
