"""Shared output helpers: JSON for programs, rich tables for people, clean errors for both."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from fabricplan.ops import BadInput, jsonable
from fabricplan.scenario import Problem

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

# Exit codes: 0 success; 1 an internal error; 2 bad input (usage, unknown id, invalid scenario).
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2

# ``console`` and ``err_console`` (rich Consoles) are made on first use, by the module's
# ``__getattr__``: rich takes ~20 ms to import, and JSON output never prints through them.
_CONSOLES: dict[str, dict[str, bool]] = {
    "console": {"soft_wrap": True},
    "err_console": {"stderr": True, "soft_wrap": True},  # no hard wraps: errors get grepped
}


def _console(name: str) -> Console:
    made = globals().get(name)
    if made is None:
        from rich.console import Console

        made = globals()[name] = Console(**_CONSOLES[name])
    return made


def __getattr__(name: str) -> Console:
    if name in _CONSOLES:
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(obj), indent=2) + "\n")


def fail(message: str, problems: Iterable[Problem] = (), *, as_json: bool = False) -> NoReturn:
    """Report bad input and exit with code 2 (JSON on stdout when ``as_json``)."""
    problems = list(problems)
    if as_json:
        emit_json({"error": message, "problems": [p.to_dict() for p in problems]})
    else:
        from rich.markup import escape

        err = _console("err_console")
        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        for p in problems:
            err.print(f"  [red]-[/] {escape(str(p))}", highlight=False)
    raise typer.Exit(EXIT_BAD_INPUT)


def fail_with(exc: BadInput, as_json: bool) -> NoReturn:
    """Report an operation's bad input (its message and problems) and exit with code 2."""
    fail(exc.message, exc.problems, as_json=as_json)


def fmt(value: Any, digits: int = 3) -> str:
    """Compact human formatting of a number or value."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e6 or abs(value) < 1e-3:
            return f"{value:.{digits}g}"
        return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v, digits) for v in value)
    return str(value)


def kv_table(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left", title_style="bold")
    table.add_column(style="cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, fmt(value))
    return table


# Wider than any table of short cells: measuring against it gives a table's natural width.
UNBOUNDED_WIDTH = 10_000


def show_whole(table: Table) -> None:
    """Print a table of short cells at its natural width even when the terminal is narrower:
    the terminal folds the long lines, but no figure is ever split across two rows."""
    from rich.measure import Measurement

    con = _console("console")
    need = Measurement.get(con, con.options.update_width(UNBOUNDED_WIDTH), table).maximum
    width = con.width
    con.width = max(width, need)  # print(width=) can only narrow
    try:
        con.print(table)
    finally:
        con.width = width


def progress_bar(disable: bool = False) -> Progress:
    """The counting bar long commands show on stderr (description, bar, n/total, time),
    gone when it ends; ``disable`` (JSON output) shows nothing."""
    from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    return Bar(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console("err_console"),
        transient=True,
        disable=disable,
    )
