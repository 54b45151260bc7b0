"""``fabricplan claims``: each quantitative claim in the seeds, what it assumes, what
fabricplan computes under those conditions and whether it holds."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import Progress
from rich.table import Table

from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from, backend_note
from fabricplan.cli.output import console, emit_json, err_console, fail, print_table

if TYPE_CHECKING:
    from fabricplan.claims.result import ClaimResult

HOLDS = {True: "[green]yes[/]", False: "[red]no[/]", None: "[dim]n/a[/]"}


def _claimed(c: dict[str, Any]) -> str:
    unit = c.get("unit", "")
    if "cheaper" in c:
        return f"{c['cheaper']} cheaper"
    if "low" in c:
        return f"{c['low']:g}-{c['high']:g} {unit}"
    if "value" in c:
        return f"{c['value']:.3g} {unit}"
    return ", ".join(f"{k} {_num(v)}" for k, v in c.items())


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, float | int):
        return str(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:g}"


def _verdict(d: ClaimResult) -> str:
    """The verdict, and in how many of the conditions tried the claim holds."""
    cases = d.cases
    if d.holds is None or len(cases) < 2:
        return HOLDS[d.holds]
    return f"{HOLDS[d.holds]}\n{sum(bool(c.holds) for c in cases)}/{len(cases)}"


def claims_cmd(
    group: list[str] | None = typer.Option(
        None,
        "--group",
        help="Only these groups (repeatable): latency, scale, money, hardware, serving, outside.",
    ),
    claim_id: str | None = typer.Option(None, "--id", help="Show one claim and every case."),
    congestion: str | None = CONGESTION_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print JSON: one object per claim."),
) -> None:
    """The quantitative claims of five public InfiniBand-vs-RoCE articles (the seeds; titles in
    the output), recomputed: under which conditions each holds."""
    from fabricplan.claims import GROUPS, check_claims

    backend = backend_from(congestion, as_json)
    groups = [g.strip() for x in (group or []) for g in x.split(",") if g.strip()] or GROUPS
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        fail(f"--group: unknown value '{bad[0]}'; allowed: {', '.join(GROUPS)}", as_json=as_json)
    if as_json:
        results = check_claims(groups=groups, backend=backend)
    else:
        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("recomputing the seeds' claims", total=len(groups))
            results = check_claims(
                groups=groups, progress=lambda g: bar.advance(task), backend=backend
            )
    shown = results
    if claim_id is not None:
        shown = [r for r in results if r.id == claim_id]
        if not shown:
            known = ", ".join(r.id for r in results)
            fail(f"--id: unknown claim '{claim_id}'; known: {known}", as_json=as_json)
    if as_json:
        emit_json([r.to_dict() for r in shown])
        return
    note = backend_note(backend)
    if note:
        console.print(note, highlight=False)
    if claim_id is not None:
        _show_one(shown[0])
        return
    t = Table(title="The seeds' claims, recomputed", title_justify="left", title_style="bold")
    for col, ratio in (
        ("claim", 3),
        ("seed", 0),
        ("claimed", 2),
        ("fabricplan computes", 4),
        ("holds", 0),
    ):
        t.add_column(col, ratio=ratio or None, overflow="fold", no_wrap=not ratio)
    for d in shown:
        seeds = ", ".join(re.findall(r"seed (\d+)", d.source))
        t.add_row(
            f"{d.claim}\n[dim]{d.id}[/]",
            seeds,
            _claimed(d.claimed),
            d.computed.get("summary", ""),
            _verdict(d),
        )
    print_table(t)
    n = {v: sum(d.holds is v for d in shown) for v in (True, False, None)}
    console.print(
        f"{n[True]} hold, {n[False]} do not, {n[None]} are outside the model. 'holds' "
        "is judged under the claim's own conditions; below it, in how many of the "
        "conditions tried the claim holds. `--id ID` shows them.",
        highlight=False,
    )


def _show_one(d: ClaimResult) -> None:
    console.print(f"[bold]{d.claim}[/]  ({d.id})", highlight=False)
    console.print(f"source: {d.source}", highlight=False)
    console.print(f"conditions: {d.conditions}", highlight=False)
    console.print(f"claimed: {_claimed(d.claimed)}", highlight=False)
    console.print(f"fabricplan: {d.computed.get('summary', '')}", highlight=False)
    if d.computed.get("note"):
        console.print(f"note: {d.computed['note']}", highlight=False)
    console.print(f"holds: {HOLDS[d.holds]} (basis: {d.basis})")
    if not d.cases:
        return
    t = Table(title_justify="left")
    for col in ("conditions", "value", "holds", "detail"):
        t.add_column(col, overflow="fold")
    for c in d.cases:
        cond = "; ".join(f"{k}={v}" for k, v in c.conditions.items() if k != "overrides")
        v = c.value
        t.add_row(cond, "-" if v is None else f"{v:.4g}", HOLDS[c.holds], c.note)
    print_table(t)
