"""The same HTML, printed to PDF by headless Chromium (Debian's ``chromium`` package).

The page loads nothing from outside, so Chromium runs with networking, sync and component
updates off, in a throw-away profile, and prints with the page's own ``@page`` and ``@media
print`` rules.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

# Executables tried in order: Debian's package, then the name other distributions use.
BROWSERS = ("chromium", "chromium-browser")
# A report prints in a few seconds; a browser that hangs is stopped.
PRINT_TIMEOUT_S = 120
INSTALL_HINT = (
    "printing a PDF needs headless Chromium: install the Debian package 'chromium' "
    "(apt-get install chromium, or `make browser`), or write HTML with -o and print it from a "
    "browser"
)


class ReportError(RuntimeError):
    """A report that could not be written (the browser failed, the output is not writable)."""


class BrowserMissing(ReportError):
    """No Chromium on PATH."""


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def html_to_pdf(html: str, out: Path) -> None:
    """Print ``html`` to the PDF file ``out`` (replaced if it exists)."""
    browser = find_browser()
    if browser is None:
        raise BrowserMissing(INSTALL_HINT)
    with tempfile.TemporaryDirectory(prefix="fabricplan-pdf-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html, encoding="utf-8")
        pdf = Path(tmp) / "report.pdf"
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            f"--user-data-dir={Path(tmp) / 'profile'}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}",
            page.as_uri(),
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise ReportError(f"{browser} did not print within {PRINT_TIMEOUT_S} s") from None
        if not pdf.exists() or pdf.stat().st_size == 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise ReportError(f"{browser} printed no PDF (exit {proc.returncode}): {tail}")
        try:
            shutil.move(str(pdf), out)
        except OSError as exc:
            raise ReportError(f"{out}: cannot write: {exc.strerror or exc}") from None
