"""``fabricplan serve``: the web planner and its JSON API on this machine."""

from __future__ import annotations

import gc
import ipaddress
import os
from pathlib import Path

import typer

from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from

LOOPBACK_NAMES = ("localhost",)
# Most server processes: beyond a machine's cores they only take memory (each loads the models).
MAX_WORKERS = 64


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
    workers: int = typer.Option(
        1,
        "--workers",
        callback=within(1, MAX_WORKERS),
        help="Server processes: the models are CPU-bound, so up to one per core serves more "
        "people at once (each process keeps its own answers).",
    ),
    catalog: Path | None = CATALOG_OPT,
) -> None:
    """Serve the web planner: a scenario editor with the recommendation and charts, grading of
    an uploaded nccl-tests log, the report, and the JSON API (/api/..., schema at
    /openapi.json)."""
    import uvicorn

    from fabricplan.cli.output import err_console
    from fabricplan.web import create_app

    cat = catalog_from(catalog, as_json=False)  # a bad file is refused here, before serving
    if not is_loopback(host):
        err_console.print(
            f"[yellow]warning:[/] listening on {host}: anyone who can reach this machine on port "
            f"{port} can use the planner (it has no authentication)",
            highlight=False,
        )
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"fabricplan web planner on http://{shown}:{port}/", highlight=False)
    gc.freeze()  # what start-up built lives as long as the server: collections skip it
    options = {"host": host, "port": port, "log_level": "warning", "server_header": False}
    if workers == 1:
        uvicorn.run(create_app(cat), **options)
        return
    from fabricplan.web.app import CATALOG_ENV

    if catalog is not None:
        os.environ[CATALOG_ENV] = str(catalog.resolve())
    uvicorn.run(
        "fabricplan.web.app:create_app_from_environment", factory=True, workers=workers, **options
    )
