"""Reports: one self-contained HTML file (and its PDF) on a scenario or a graded nccl-tests log.

Nothing here imports matplotlib until a chart is drawn.
"""

from fabricplan.report.grade_report import grade_report_html
from fabricplan.report.pdf import BrowserMissing, ReportError, html_to_pdf
from fabricplan.report.scenario_report import (
    ScenarioReport,
    build_scenario_report,
    render_scenario_report,
    scenario_report_html,
)

__all__ = [
    "BrowserMissing",
    "ReportError",
    "ScenarioReport",
    "build_scenario_report",
    "grade_report_html",
    "html_to_pdf",
    "render_scenario_report",
    "scenario_report_html",
]
