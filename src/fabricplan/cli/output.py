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
    from rich.console import Console, RenderableType
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


# Wider than any table: measuring against it gives each column's natural width.
UNBOUNDED_WIDTH = 10_000


def fitted(table: Table, con: Console) -> RenderableType:
    """``table`` laid out in ``con``'s width without cutting a number or an id: text cells
    wrap at spaces; a column never gets narrower than its longest word (a ``no_wrap`` column
    than its longest cell). When even that does not fit, each row is printed as a block of
    "header  value" lines instead.

    Rich's own squeezing shrinks the widest columns first, below their longest word, and cuts
    what no longer fits with an ellipsis (``$26.…``): the widths are set here instead."""
    opts = con.options.update_width(UNBOUNDED_WIDTH)
    # rich measures a column's cells (header included) with its padding; its private helpers
    # are used so the sums below are exactly what it will draw
    cols = table.columns
    spans = [table._measure_column(con, opts, c) for c in cols]
    lows = [s.maximum if c.no_wrap else s.minimum for s, c in zip(spans, cols, strict=True)]
    highs = [s.maximum for s in spans]
    room = con.width - table._extra_width
    if sum(highs) <= room:
        return table
    if sum(lows) > room:
        return stacked(table)
    widths = _share_out(lows, highs, room)
    for i, (col, w) in enumerate(zip(cols, widths, strict=True)):
        col.width = w - table._get_padding_width(i)
        col.overflow = "fold"  # never an ellipsis, whatever rich decides
    return table


def _share_out(lows: list[int], highs: list[int], room: int) -> list[int]:
    """Widths from ``lows`` up towards ``highs`` that add up to at most ``room``: the room left
    over the minimums goes to each column in proportion to what it lacks."""
    spare, lack = room - sum(lows), [h - lo for lo, h in zip(lows, highs, strict=True)]
    total = sum(lack)
    widths = [lo + spare * k // total for lo, k in zip(lows, lack, strict=True)]
    for i in sorted(range(len(lack)), key=lambda i: lack[i] - (widths[i] - lows[i]), reverse=True):
        if sum(widths) >= room:
            break
        if widths[i] < highs[i]:
            widths[i] += 1
    return widths


def stacked(table: Table) -> Table:
    """``table`` as one block per row, a line per column ("header  value"): the layout for
    widths too narrow for the columns side by side."""
    from rich.table import Table as RichTable

    out = RichTable(title=table.title, show_header=False, title_justify="left", title_style="bold")
    out.add_column(style="cyan", overflow="fold")
    out.add_column(overflow="fold")
    heads = [str(c.header) for c in table.columns]
    rows = [list(c._cells) for c in table.columns]
    for r in range(table.row_count):
        for i, head in enumerate(heads):
            out.add_row(head, rows[i][r], end_section=i == len(heads) - 1)
    return out


def print_table(table: Table) -> None:
    """Print ``table`` within the console's width (80 when output is not a terminal) without
    cutting any figure or id (see :func:`fitted`)."""
    con = _console("console")
    con.print(fitted(table, con))


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
