"""``fabricplan report``: the scenario's advice as one self-contained HTML file, or PDF."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from fabricplan.cli import output
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from
from fabricplan.cli.output import emit_json, fail
from fabricplan.cli.report_out import output_targets, progress, write_reports
from fabricplan.cli.scenario_cmd import (
    FILE_ARG,
    JSON_OPT,
    SET_OPT,
    load_or_fail,
    warn_on_stderr,
)
from fabricplan.cost import CostError
from fabricplan.ops.scenario import text_with_overrides
from fabricplan.workload import WorkloadError

HTML_OPT = typer.Option(
    None, "-o", "--output", metavar="FILE.html", help="Write the HTML report here (replaced)."
)
PDF_OPT = typer.Option(
    None,
    "--pdf",
    metavar="FILE.pdf",
    help="Also (or only) print it to PDF here (replaced); needs headless Chromium.",
)


def report_cmd(
    file: Path = FILE_ARG,
    html_out: Path | None = HTML_OPT,
    pdf_out: Path | None = PDF_OPT,
    set_: list[str] | None = SET_OPT,
    seed: int = typer.Option(0, "--seed", callback=within(0), help="Monte Carlo seed."),
    by_model: bool = typer.Option(
        False,
        "--break-even-models",
        help="Also the break-even surface of every training model in the catalog, each with "
        "its published training layout where it has one, else its fastest fitting plan "
        "(as advise --break-even-models; 10-15 s more).",
    ),
    congestion: str | None = CONGESTION_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Write the scenario's report: the recommendation and its reasons, each fabric's figures,
    charts (step time, cost by part, tornado, Monte Carlo, cluster size, the break-even surface
    by size, maturity and model, bill of materials), the provider questions, assumptions and
    sources, and the scenario. One file, no external
    resources, printable; every price in it is a labelled assumption unless a quote is cited."""
    targets = output_targets(html_out, pdf_out, as_json)
    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(file, set_, as_json, cat)
    warn_on_stderr(sc, cat, as_json)
    text = _scenario_text(file, set_)
    start = time.monotonic()
    from fabricplan.report import build_scenario_report, render_scenario_report

    with progress(f"making the report on {file}"):
        try:
            r = build_scenario_report(
                sc, cat, backend=backend, seed=seed, scenario_text=text, by_model=by_model
            )
        except (WorkloadError, CostError) as exc:
            fail(str(exc), as_json=as_json)
        html = render_scenario_report(r)
        written = write_reports(html, targets, as_json)
    rec = r.advice.recommendation
    summary = {
        "written": written,
        "scenario": sc.name,
        "recommendation": rec.fabric,
        "confidence": rec.confidence,
        "p_cheapest": rec.p_cheapest,
        "break_even_gpus": r.advice.break_even_gpus.gpus,
        "seconds": round(time.monotonic() - start, 2),
    }
    if as_json:
        emit_json(summary)
        return
    for path in written.values():
        output.console.print(f"wrote {path}", highlight=False)
    output.console.print(
        f"recommendation: {rec.fabric} (confidence {rec.confidence})", highlight=False
    )


def _scenario_text(file: Path, overrides: list[str] | None) -> str | None:
    """The scenario file as given, with the --set overrides applied to it named at its end."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # the page shows the scenario as loaded instead
    return text_with_overrides(text, overrides or ())
