"""Command-line interface. Entry point: :func:`main`."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the CLI; internal errors print one line (set FABRICPLAN_DEBUG=1 for a traceback)."""
    from fabricplan.cli.app import app
    from fabricplan.cli.output import EXIT_INTERNAL

    try:
        app(standalone_mode=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("FABRICPLAN_DEBUG"):
            raise
        from fabricplan.cli.output import err_console

        err_console.print(
            f"[bold red]internal error:[/] {type(exc).__name__}: {exc}\n"
            "rerun with FABRICPLAN_DEBUG=1 for the traceback and please report it",
            highlight=False,
        )
        sys.exit(EXIT_INTERNAL)
