"""Shared output helpers: JSON for programs, rich tables for people, clean errors for both."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricplan.scenario import Problem

# Exit codes: 0 success; 1 an internal error; 2 bad input (usage, unknown id, invalid scenario).
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # no hard wraps: errors get grepped


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(_jsonable(obj), indent=2) + "\n")


def fail(message: str, problems: Iterable[Problem] = (), *, as_json: bool = False) -> NoReturn:
    """Report bad input and exit with code 2 (JSON on stdout when ``as_json``)."""
    problems = list(problems)
    if as_json:
        emit_json({"error": message, "problems": [p.to_dict() for p in problems]})
    else:
        err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        for p in problems:
            err_console.print(f"  [red]-[/] {escape(str(p))}", highlight=False)
    raise typer.Exit(EXIT_BAD_INPUT)


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
    table = Table(title=title, show_header=False, title_justify="left", title_style="bold")
    table.add_column(style="cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, fmt(value))
    return table
