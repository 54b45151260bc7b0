"""The report on a graded nccl-tests log: each run's measured busbw against what the fabric
should deliver, its verdict, and the findings with the log lines behind them.

It takes the runs as ``fabricplan grade --json`` gives them (its ``runs``), so any caller
that graded a log can lay it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabricplan import __version__
from fabricplan.report import charts, fmt
from fabricplan.report.html import Column, Html, Section, figure, join, page, table, tag

VERDICTS = ("pass", "warn", "fail")


def grade_report_html(
    runs: Sequence[Mapping[str, Any]],
    *,
    source: str,
    settings: Mapping[str, str] | None = None,
    version: str = __version__,
) -> str:
    """The whole report as one self-contained HTML document. ``source`` names the log;
    ``settings`` are what the grading was told besides the log (fabric, GPU, ...)."""
    if not runs:
        raise ValueError("no graded run to report on")
    worst = max((r["verdict"] for r in runs), key=VERDICTS.index)
    sections = [Section("summary", "Summary", _summary(runs, worst, settings or {}))]
    for i, r in enumerate(runs, 1):
        sections.append(Section(f"run-{i}", f"Run {i}: {r['verdict']}", _run(r, i)))
    sections.append(Section("method", "How it is graded", _method(version)))
    subtitle = f"{source}: {len(runs)} run{'s' if len(runs) != 1 else ''}, worst verdict {worst}."
    footer = (
        f"fabricplan {version}. Expected figures come from the collective model (NCCL's tuner "
        "with the fabric's catalog latency and goodput); they are models, not measurements."
    )
    return page(f"nccl-tests grade: {source}", subtitle, sections, footer)


def _ratio(v: float | None) -> str:
    return fmt.share(v, 0) + " of expected" if v is not None else fmt.NONE


def _summary(runs: Sequence[Mapping[str, Any]], worst: str, settings: Mapping[str, str]) -> Html:
    cols = [
        Column("run", numeric=True),
        Column("label"),
        Column("collective"),
        Column("nodes x GPUs", numeric=True),
        Column("verdict"),
        Column("large-message busbw", numeric=True),
        Column("small-message time", numeric=True),
        Column("findings", numeric=True),
    ]
    rows = [
        [
            f"{i}",
            r["label"],
            r["op"],
            f"{r['layout']['nodes']} x {r['layout']['gpus_per_node']}",
            r["verdict"],
            _ratio(r["bandwidth_ratio"]),
            f"{r['latency_ratio']:.2f}x expected" if r["latency_ratio"] is not None else fmt.NONE,
            f"{len(r['findings'])}",
        ]
        for i, r in enumerate(runs, 1)
    ]
    parts = [tag("p", f"Worst verdict: {worst}", cls=f"verdict {worst}"), table(cols, rows)]
    if settings:
        parts.append(
            table(
                [Column("setting"), Column("value")],
                [[k, v] for k, v in settings.items()],
                caption="Graded with",
            )
        )
    return join(parts)


def _run(r: Mapping[str, Any], i: int) -> Html:
    rows = r["rows"]
    sizes = [float(x["size_bytes"]) for x in rows]
    chart = charts.lines(
        f"run{i}",
        [
            (
                "busbw (GB/s)",
                [
                    charts.Series("measured", sizes, [x["measured_busbw_GBps"] for x in rows]),
                    charts.Series("expected", sizes, [x["expected_busbw_GBps"] for x in rows]),
                ],
                False,
            )
        ],
        "message size",
        [],
        f"run {i}: measured and expected busbw",
        x_format=lambda v: fmt.size_bytes(int(v)),
        height_in=2.6,
    )
    lay = r["layout"]
    head = tag(
        "p",
        f"{r['label']} ({r['op']}; {lay['nodes']} nodes x {lay['gpus_per_node']} GPUs, "
        f"{lay['nics_per_node']} NICs per node, {lay['ranks']} ranks, read from "
        f"{lay['read_from']}): {r['verdict']}, large-message busbw "
        f"{_ratio(r['bandwidth_ratio'])}.",
        cls=f"verdict {r['verdict']}",
    )
    return join(
        [
            head,
            figure(chart, "busbw per message size: as measured, and as the fabric should give"),
            _findings(r["findings"]),
            _rows_table(r),
        ]
    )


def _findings(findings: Sequence[Mapping[str, Any]]) -> Html:
    if not findings:
        return tag("p", "No findings.", cls="note")
    items = []
    for f in findings:
        evidence = (
            [tag("pre", "\n".join(f["evidence"]))]
            if f["evidence"]
            else [tag("p", "No log line quoted: the figures above show it.", cls="note")]
        )
        items.append(
            tag(
                "li",
                [tag("strong", f"{f['severity']} {f['code']}"), f": {f['message']}", *evidence],
            )
        )
    return join([tag("h3", "Findings"), tag("ul", items)])


def _rows_table(r: Mapping[str, Any]) -> Html:
    worst = set(r["worst"])
    cols = [
        Column("size", numeric=True),
        Column("busbw", numeric=True),
        Column("expected", numeric=True),
        Column("speed", numeric=True),
        Column("time", numeric=True),
        Column("expected time", numeric=True),
        Column("algorithm"),
        Column("worst"),
    ]
    rows = [
        [
            fmt.size_bytes(x["size_bytes"]),
            _gbps(x["measured_busbw_GBps"]),
            _gbps(x["expected_busbw_GBps"]),
            fmt.NONE if x["ratio"] is None else f"{x['ratio']:.2f}",
            fmt.number(x["measured_time_us"], 2, "us"),
            fmt.number(x["expected_time_us"], 2, "us"),
            x["expected_algorithm"],
            "yes" if x["size_bytes"] in worst else "",
        ]
        for x in r["rows"]
    ]
    return table(cols, rows, caption="Per message size (speed: expected over measured time)")


def _gbps(v: float) -> str:
    """GB/s with nccl-tests' two decimals; three significant digits below 0.01."""
    return f"{v:,.2f} GB/s" if v == 0 or v >= 0.01 else f"{v:.3g} GB/s"


def _method(version: str) -> Html:
    from fabricplan.nccltests.grade import (
        PASS_BW_RATIO,
        PASS_LAT_RATIO,
        PLATEAU_SHARE,
        WARN_BW_RATIO,
        WARN_LAT_RATIO,
    )

    return tag(
        "p",
        f"fabricplan {version} compares each row's bus bandwidth and time with the collective "
        "model's for the run's own ranks, nodes and GPUs per node, read from the log. A run "
        f"passes when its large messages (64 MiB and up) and its plateau (the sizes expected "
        f"within {1 - PLATEAU_SHARE:.0%} of its best busbw), each as a median over its sizes, "
        f"reach {PASS_BW_RATIO:.0%} of the expected busbw and its small messages (64 KiB and "
        f"down) take at most {PASS_LAT_RATIO:g}x the expected time, as a median; below "
        f"{WARN_BW_RATIO:.0%}, or over {WARN_LAT_RATIO:g}x, it fails, and between it is a "
        "warning. A run that did not measure the fabric as built (GPUDirect off, a TCP "
        "fallback, fewer NICs than the node has, rows no GPU could have measured) fails "
        "whatever its figures; what only runs side by side show (busbw falling as nodes are "
        "added, repeated runs that disagree) makes a passing run a warning. Findings quote the "
        "log lines that show them, with their line numbers.",
    )
