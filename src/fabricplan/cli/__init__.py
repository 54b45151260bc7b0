"""Command-line interface. Entry point: :func:`main`."""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    """Run the CLI; internal errors print one line (set FABRICPLAN_DEBUG=1 for a traceback)."""
    from fabricplan.cli.app import app
    from fabricplan.cli.output import EXIT_INTERNAL

    # A command is a short process. What the imports built (modules, classes, pydantic schemas)
    # lives until it exits: frozen, the collector stops rescanning it on every collection. At
    # the end everything is frozen again, so the interpreter's collections at exit have nothing
    # to walk (the memory returns to the system with the process). Together about a tenth of a
    # second of a command that runs in under one; nothing the command computes changes.
    gc.freeze()
    from fabricplan.inputs import LimitError, file_cap, limits_scale

    try:  # the limits the environment asks for, checked once before any input is read
        limits_scale()
        file_cap(0)
    except LimitError as exc:
        from fabricplan.cli.output import EXIT_BAD_INPUT, err_console

        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)
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
    finally:
        gc.freeze()  # see above
