"""``fabricplan validate --suite packet-level``: the congestion simulator against a packet-level
simulator's recorded runs, case by case, with the error and the speed: the suite's cases (the
target), the cases the model was since developed on, then the held-back ones (recorded after
the model was set; no target)."""

from __future__ import annotations

from rich.table import Table

from fabricplan.cli.output import console, emit_json, fail, print_table, progress_bar
from fabricplan.validation import packet_level as P


def show_packet_level(case: str | None, as_json: bool) -> None:
    everything = P.CASES + P.DEVELOPED + P.HELD_BACK
    names = [c.name for c in everything]
    if case is not None and case not in names:
        fail(
            f"--case: {case!r} is not a packet-level case; known: {', '.join(names)}",
            as_json=as_json,
        )
    total = sum(1 for c in everything if case in (None, c.name)) * len(P.ROUTINGS)
    with progress_bar(disable=as_json) as bar:
        task = bar.add_task("simulating", total=total)

        def tick(n: int) -> None:
            bar.advance(task, n)

        checks = P.check_all(only=case, progress=tick)
        developed = P.check_all(only=case, progress=tick, cases=P.DEVELOPED)
        held = P.check_all(only=case, progress=tick, cases=P.HELD_BACK)
    if as_json:
        emit_json(
            {
                "reference": P.meta()["simulator"],
                "tolerance": P.TOLERANCE,
                "cases": [c.to_dict() for c in checks],
                "developed": [c.to_dict() for c in developed],
                "developed_note": P.meta()["developed"]["what"],
                "held_back": [c.to_dict() for c in held],
                "held_back_note": P.meta()["held_back"]["what"],
            }
        )
        return
    sim = P.meta()["simulator"]
    title = (
        f"Flow completion times (us), median over seeds: fabricplan vs {sim['name']} "
        f"(commit {sim['commit']})"
    )
    if checks:
        _table(title, checks)
        ok = sum(c.within for c in checks)
        fast = sum(c.speedup >= 10 for c in checks)
        console.print(
            f"within 10 % on p50, p99 and max: {ok}/{len(checks)}; at least 10x faster per "
            f"seed than one reference run: {fast}/{len(checks)}",
            highlight=False,
        )
    if developed:
        _table(f"Developed on: {P.meta()['developed']['what']}", developed)
        console.print(
            f"developed on, within 10 % on p50, p99 and max: {sum(c.within for c in developed)}/"
            f"{len(developed)} (no target)",
            highlight=False,
        )
    if held:
        _table(f"Held back: {P.meta()['held_back']['what']}", held)
        console.print(
            f"held back, within 10 % on p50, p99 and max: {sum(c.within for c in held)}/"
            f"{len(held)} (no target: how the model does on traffic it was not developed on)",
            highlight=False,
        )
    resent = [c for c in developed + held if c.resent_bytes is not None]
    if resent:
        _resent_table(resent)


def _resent_table(checks: list[P.Comparison]) -> None:
    """What the flowlet moves made RoCE's go-back-N send again, against what the simulator
    retransmitted (no target: where the two part, the flowlet tails do)."""
    t = Table(
        title="Bytes sent again after flowlet moves (MB, median over seeds): fabricplan vs the "
        "simulator's retransmissions",
        title_justify="left",
        title_style="bold",
    )
    for col in ("case", "routing", "ours", "ref", "ours / ref", "p99 error"):
        t.add_column(col, justify="left" if col in ("case", "routing") else "right", no_wrap=True)
    for c in checks:
        ours, ref = c.resent_bytes
        t.add_row(
            c.case,
            c.routing,
            f"{ours / 1e6:,.2f}",
            f"{ref / 1e6:,.2f}",
            f"{ours / ref:.2f}" if ref > 0 else "-",
            f"{100 * c.errors['p99']:+.1f} %",
        )
    print_table(t)


def _table(title: str, checks: list[P.Comparison]) -> None:
    t = Table(title=title, title_justify="left", title_style="bold")
    # fabricplan's figure, the reference's, the error, within 10 %, seconds per seed here,
    # seconds per reference run
    for col in ("case", "routing", "", "ours", "ref", "error", "ok", "s/seed", "ref s", "faster"):
        left = col in ("case", "routing", "")
        t.add_column(col, justify="left" if left else "right", no_wrap=True)
    for c in checks:
        for i, m in enumerate(P.METRICS):
            first = i == 0
            t.add_row(
                c.case if first else "",
                c.routing if first else "",
                m,
                f"{c.predicted[m]:,.1f}",
                f"{c.measured[m]:,.1f}",
                f"{100 * c.errors[m]:+.1f} %",
                ("yes" if c.within else "no") if first else "",
                f"{c.seconds_per_seed:.4f}" if first else "",
                f"{c.reference_seconds:.4f}" if first else "",
                f"{c.speedup:,.0f}x" if first else "",
                end_section=i == len(P.METRICS) - 1,
            )
    print_table(t)
