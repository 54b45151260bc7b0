"""Where a report goes: the files asked for, checked before any work, then written; and a
word on standard error while a slow report is being made."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fabricplan.cli import output
from fabricplan.cli.outfile import OutFileError, check_target, write_out
from fabricplan.cli.output import fail

# A report that takes longer than this says on standard error that it is being made.
PROGRESS_AFTER_S = 2.0


@dataclass(frozen=True)
class Targets:
    """The report files asked for, and the flags that named them (for messages)."""

    html: Path | None
    pdf: Path | None
    html_flag: str
    pdf_flag: str


def output_targets(
    html: Path | None, pdf: Path | None, as_json: bool, flags: tuple[str, str] = ("-o", "--pdf")
) -> Targets:
    """The files asked for, checked before any work: at least one, none a directory, a link
    or in a missing folder, and a browser for the PDF. Exits with code 2 otherwise."""
    from fabricplan.report.pdf import INSTALL_HINT, find_browser

    t = Targets(html, pdf, *flags)
    named = [(flag, p) for flag, p in zip(flags, (html, pdf), strict=True) if p is not None]
    if not named:
        fail(f"give {t.html_flag} FILE.html, {t.pdf_flag} FILE.pdf or both", as_json=as_json)
    for flag, path in named:
        if str(path) == "-":
            fail(f"{flag}: give a file name (the report is a file, not a stream)", as_json=as_json)
        try:
            check_target(path, force=True, flag=flag)  # the named file is replaced: no --force
        except OutFileError as exc:
            fail(str(exc), as_json=as_json)
        if not path.parent.is_dir():
            fail(f"{flag} {path}: no such folder: {path.parent}", as_json=as_json)
    if pdf is not None and find_browser() is None:
        fail(f"{t.pdf_flag}: {INSTALL_HINT}", as_json=as_json)
    return t


def write_reports(html: str, t: Targets, as_json: bool) -> dict[str, str]:
    """Write the HTML and print the PDF where asked; where each went, as "html" and "pdf"."""
    from fabricplan.report import ReportError, html_to_pdf

    written = {}
    try:
        if t.html is not None:
            written["html"] = write_out(t.html, html, force=True, flag=t.html_flag)
        if t.pdf is not None:
            html_to_pdf(html, t.pdf)
            written["pdf"] = str(t.pdf)
    except (OutFileError, ReportError) as exc:
        fail(str(exc), as_json=as_json)
    return written


@contextmanager
def progress(what: str, after_s: float = PROGRESS_AFTER_S) -> Iterator[None]:
    """Say ``what`` on standard error if the block is still running after ``after_s``."""
    timer = threading.Timer(
        after_s, lambda: output.err_console.print(f"{what}...", highlight=False)
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
