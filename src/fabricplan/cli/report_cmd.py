"""``fabricplan report``: the scenario's advice as one self-contained HTML file, or PDF."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from fabricplan.cli import output
from fabricplan.cli.bounds import within
from fabricplan.cli.catalog_opt import CATALOG_OPT, catalog_from
from fabricplan.cli.congestion_opt import CONGESTION_OPT, backend_from
from fabricplan.cli.outfile import OutFileError, check_target, write_out
from fabricplan.cli.output import emit_json, fail
from fabricplan.cli.scenario_cmd import FILE_ARG, JSON_OPT, SET_OPT, load_or_fail
from fabricplan.cost import CostError
from fabricplan.workload import WorkloadError

# A report that takes longer than this says on standard error that it is being made.
PROGRESS_AFTER_S = 2.0

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
    congestion: str | None = CONGESTION_OPT,
    catalog: Path | None = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Write the scenario's report: the recommendation and its reasons, each fabric's figures,
    charts (step time, cost by part, tornado, Monte Carlo, cluster size, bill of materials), the
    provider questions, assumptions and sources, and the scenario. One file, no external
    resources, printable; every price in it is a labelled assumption unless a quote is cited."""
    targets = output_targets(html_out, pdf_out, as_json)
    backend = backend_from(congestion, as_json)
    cat = catalog_from(catalog, as_json)
    sc = load_or_fail(file, set_, as_json, cat)
    text = _scenario_text(file, set_)
    start = time.monotonic()
    from fabricplan.report import build_scenario_report, render_scenario_report

    with progress(f"making the report on {file}"):
        try:
            r = build_scenario_report(sc, cat, backend=backend, seed=seed, scenario_text=text)
        except (WorkloadError, CostError) as exc:
            fail(str(exc), as_json=as_json)
        html = render_scenario_report(r)
        written = write_reports(html, targets, as_json)
    rec = r.advice.recommendation
    summary = {
        "written": written,
        "scenario": sc.name,
        "recommendation": rec["fabric"],
        "confidence": rec["confidence"],
        "p_cheapest": rec["p_cheapest"],
        "break_even_gpus": r.advice.break_even_gpus.get("gpus"),
        "seconds": round(time.monotonic() - start, 2),
    }
    if as_json:
        emit_json(summary)
        return
    for path in written.values():
        output.console.print(f"wrote {path}", highlight=False)
    output.console.print(
        f"recommendation: {rec['fabric']} (confidence {rec['confidence']})", highlight=False
    )


def _scenario_text(file: Path, overrides: list[str] | None) -> str | None:
    """The scenario file as given, with the --set overrides applied to it named at its end."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # the page shows the scenario as loaded instead
    if overrides:
        text += "\n# applied with --set:\n" + "".join(f"#   {o}\n" for o in overrides)
    return text


def output_targets(html: Path | None, pdf: Path | None, as_json: bool) -> dict[str, Path]:
    """The files asked for, checked before any work: at least one, none a directory or a link,
    and a browser for the PDF. Exits with code 2 otherwise."""
    from fabricplan.report.pdf import INSTALL_HINT, find_browser

    targets = {k: p for k, p in (("html", html), ("pdf", pdf)) if p is not None}
    if not targets:
        fail("give -o FILE.html, --pdf FILE.pdf or both", as_json=as_json)
    for kind, path in targets.items():
        flag = "-o" if kind == "html" else "--pdf"
        if str(path) == "-":
            fail(f"{flag}: give a file name (the report is a file, not a stream)", as_json=as_json)
        try:
            check_target(path, force=True, flag=flag)
        except OutFileError as exc:
            fail(str(exc), as_json=as_json)
        if not path.parent.is_dir():
            fail(f"{flag} {path}: no such folder: {path.parent}", as_json=as_json)
    if "pdf" in targets and find_browser() is None:
        fail(f"--pdf: {INSTALL_HINT}", as_json=as_json)
    return targets


def write_reports(html: str, targets: dict[str, Path], as_json: bool) -> dict[str, str]:
    """Write the HTML and print the PDF where asked; where each went."""
    from fabricplan.report import ReportError, html_to_pdf

    written = {}
    try:
        if "html" in targets:
            written["html"] = write_out(targets["html"], html, force=True, flag="-o")
        if "pdf" in targets:
            html_to_pdf(html, targets["pdf"])
            written["pdf"] = str(targets["pdf"])
    except (OutFileError, ReportError) as exc:
        fail(str(exc), as_json=as_json)
    return written


@contextmanager
def progress(what: str, after_s: float = PROGRESS_AFTER_S) -> Iterator[None]:
    """Say ``what`` on standard error if the block is still running after ``after_s``."""
    say: Callable[[], None] = lambda: output.err_console.print(f"{what}...", highlight=False)  # noqa: E731
    timer = threading.Timer(after_s, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
