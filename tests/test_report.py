"""`fabricplan report` and `grade --report`: one self-contained page with the advice's figures,
charts that parse and carry their series, every user string escaped, and the PDF."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabricplan
from conftest import DESIGN_EXAMPLE, ROOT
from fabricplan.advise import advise
from fabricplan.advise.break_even import BreakEven, SizeRow
from fabricplan.report import build_scenario_report, fmt, html_to_pdf, render_scenario_report
from fabricplan.report.scenario_sections import scenario_charts
from fabricplan.report.surface_section import Surface, surface_charts, surface_section, words
from fabricplan.scenario import load_scenario
from fabricplan.scenario.models import MATURITIES

SCRIPT = Path(sys.executable).with_name("fabricplan")
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "fabricplan"]
# the package under test, whichever way it is installed
SRC = str(Path(fabricplan.__file__).resolve().parents[1])
NCCL_LOGS = ROOT / "src" / "fabricplan" / "validation" / "data" / "nccl-tests"
ISSUE_290 = NCCL_LOGS / "02_nccl-tests-issue290_H100_IB-NDR_2nodes_underperforming.txt"
SECTIONS = (
    "recommendation",
    "fabrics",
    "step-time",
    "cost",
    "sensitivity",
    "uncertainty",
    "size",
    "surface",
    "topology",
    "questions",
    "assumptions",
    "scenario",
)


def run(*args: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*ENTRY, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PATH": path, "PYTHONPATH": SRC, "COLUMNS": "120"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def example(cat):
    """The example's report: its record, charts and page, made once."""
    sc = load_scenario(DESIGN_EXAMPLE, catalog=cat)
    r = build_scenario_report(sc, cat, scenario_text=DESIGN_EXAMPLE.read_text())
    charts = scenario_charts(r)
    return r, charts, render_scenario_report(r, charts)


def svgs(page: str) -> dict[str, ET.Element]:
    """Each inline chart parsed as XML, by the key its ids start with."""
    out = {}
    for text in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        root = ET.fromstring(text)
        first = next(e.get("id") for e in root.iter() if e.get("id"))
        out[first.split("-")[0]] = root
    return out


def ids(root: ET.Element, pattern: str) -> list[str]:
    return [e.get("id") for e in root.iter() if re.search(pattern, e.get("id") or "")]


def texts(root: ET.Element) -> str:
    return " ".join(t for e in root.iter() if e.tag.endswith("text") for t in e.itertext())


def test_every_section_and_the_recommendation(example):
    r, _, page = example
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in page, sid
    assert f"Recommendation: {r.best}</strong>" in page
    assert f"{r.best} (recommended)" in page  # its column in the per-fabric table
    assert "labelled assumption" in page
    assert f"fabricplan {fabricplan.__version__}" in page
    assert "name: llama3-70b-on-512-h100" in page  # the scenario itself


def test_the_advice_figures_appear_formatted(example, cat):
    """The numbers advise gives (its JSON is Advice.to_dict), in the report's units."""
    r, _, page = example
    js = json.loads(json.dumps(advise(r.scenario, cat).to_dict()))
    assert js["recommendation"]["fabric"] == r.best
    for f in js["fabrics"]:
        for shown in (
            fmt.seconds(f["step_time_s"]),
            fmt.days(f["time_to_train_days"]),
            fmt.days(f["expected_time_to_train_days"]),
            fmt.number(f["gpu_hours"], unit="GPU-h"),
            fmt.money(f["capex_usd"]),
            fmt.money(f["opex_usd_per_year"]),
            fmt.money(f["tco_usd"]),
            fmt.money(f["cost_per_run_usd"]),
            fmt.money(f["risk_usd"]),
            fmt.money(f["cost_same_work_usd"]),
        ):
            assert f">{shown}</td>" in page, (f["fabric"], shown)
    assert fmt.share(js["recommendation"]["p_cheapest"]) in page
    for reason in js["recommendation"]["reasons"]:
        assert f"<li>{html.escape(reason)}</li>" in page
    for d in js["sensitivity"]:
        assert fmt.money(d["margin_at_low_usd"]) in page
        if d["tips_at"] is not None and d["range"].startswith("x"):
            assert fmt.multiplier(d["tips_at"]) in page
    for row in js["break_even_gpus"]["sizes"]:
        assert fmt.money(row["ib-ndr_usd"]) in page and fmt.money(row["roce-400g_usd"]) in page
    for q in js["questions"]:
        assert html.escape(q["question"]) in page


def _section(page: str, sid: str) -> str:
    start = page.index(f'<section id="{sid}">')
    return page[start : page.index("</section>", start)]


def _cells(root: ET.Element) -> set[tuple[str, int]]:
    """The heat map's (maturity, GPUs) cells, from their ids."""
    got = [i.split("-") for i in ids(root, r"-cell-\w+-\d+$")]
    return {(p[2], int(p[3])) for p in got}


def _check_surface(
    root: ET.Element, section: str, rows: dict[str, list[SizeRow]], ib: str, roce: str
) -> None:
    """One cell per (size, maturity) advise evaluated, each with its margin printed in the cell
    and, in dollars and per cent, in the table."""
    want = {(m, x.gpus) for m in MATURITIES for x in rows[m]}
    assert _cells(root) == want and len(want) == len(ids(root, r"-cell-"))
    printed = texts(root)
    for m in MATURITIES:
        for x in rows[m]:
            d = x.ib_usd - x.roce_usd
            pct = 100 * d / x.roce_usd
            assert f"{pct:+.1f}%" in printed, (m, x.gpus)
            assert f">{fmt.money(d)} ({pct:+.1f} %)</td>" in section, (m, x.gpus)


def _check_words(sentence: str, rows: dict[str, list[SizeRow]], found: dict) -> None:
    """The sentence says, per maturity, what the rows say."""
    said: dict[str, str] = {}
    for part in sentence.rstrip(".").split(": ", 1)[1].split("; "):
        at, phrase = part.split(", ", 1)
        group = MATURITIES if at == "at every maturity" else re.findall(r"low|medium|high", at)
        said.update(dict.fromkeys(group, phrase))
    assert set(said) == set(MATURITIES)
    for m in MATURITIES:
        cheaper = [x.gpus for x in rows[m] if x.ib_cheaper]
        if found[m] is not None:
            first = rows[m][0].gpus
            assert said[m] == f"from {found[m]:,} GPUs" or (
                found[m] == first and said[m].startswith("at every size evaluated")
            )
        elif cheaper:
            assert said[m].endswith("GPUs but not at every larger size")
            assert re.findall(r"[\d,]+(?= |,| and)", said[m].replace(", ", " , ")) == [
                f"{n:,}" for n in cheaper
            ]
        else:
            assert said[m] == f"never up to the largest size evaluated ({rows[m][-1].gpus:,} GPUs)"


def test_break_even_surface_is_advise_break_even(example, cat):
    """The surface shows, for the scenario's model, the margin at every size and maturity that
    advise's break-even evaluated, and says in words what those margins say."""
    from fabricplan.advise.break_even import break_even_gpus

    r, _, page = example
    be = r.advice.break_even_gpus
    fresh = break_even_gpus(r.scenario, cat)  # evaluated again: the same figures
    assert fresh.sizes_by_maturity == be.sizes_by_maturity
    rows = be.sizes_by_maturity
    assert rows is not None and be.ib is not None and be.roce is not None
    assert rows[r.scenario.organization.network_maturity] == be.sizes
    assert all(rows[m] for m in MATURITIES)
    section = _section(page, "surface")
    _check_surface(svgs(page)["surface0"], section, rows, be.ib, be.roce)
    sentence = html.unescape(re.search(r'<p class="verdict">(.*?)</p>', section).group(1))
    _check_words(sentence, rows, be.by_maturity or {})
    assert "--break-even-models adds every training model" in section


def _synthetic_rows(margin: dict[str, list[float]]) -> dict[str, list[SizeRow]]:
    """Rows as advise gives them, at 64 to 1,024 GPUs, with IB minus RoCE as given."""
    sizes = [64, 128, 256, 512, 1024]
    return {
        m: [
            SizeRow(n, 100.0 + d, 100.0, None, None, d <= 0)
            for n, d in zip(sizes, margin[m], strict=True)
        ]
        for m in MATURITIES
    }


def test_break_even_surface_marks_and_words(example):
    """A break-even is marked on its maturity's row and said in words, each kind of answer."""
    r, _, _ = example
    rows = _synthetic_rows(
        {
            "low": [3.0, 1.0, -1.0, -2.0, -4.0],  # from 256
            "medium": [-1.0, 2.0, 2.0, -1.0, 2.0],  # at 64 and 512, not after
            "high": [1.0, 2.0, 3.0, 4.0, 5.0],  # never
        }
    )
    found = {"low": 256, "medium": None, "high": None}
    be = BreakEven(None, "", "ib", "roce", rows["low"], found, rows)
    r2 = replace(r, advice=replace(r.advice, break_even_gpus=be))
    ch = surface_charts(r2)
    root = ET.fromstring(ch["surface0"])
    assert ids(root, r"-mark-") == ["surface0-mark-low"]
    section = surface_section(r2, ch)
    _check_surface(root, section, rows, "ib", "roce")
    said = words(Surface("m", "", "ib", "roce", rows, found))
    assert said == (
        "InfiniBand (ib) is no dearer than RoCE (roce) for the same work: at low maturity, "
        "from 256 GPUs; at medium maturity, at 64 and 512 GPUs but not at every larger size; "
        "at high maturity, never up to the largest size evaluated (1,024 GPUs)."
    )
    _check_words(said, rows, found)
    same = {m: [-1.0] * 5 for m in MATURITIES}
    assert "at every maturity, at every size evaluated (64 to 1,024 GPUs)" in words(
        Surface("m", "", "ib", "roce", _synthetic_rows(same), dict.fromkeys(same, 64))
    )


def test_break_even_surface_per_model(cat):
    """With every training model (as advise --break-even-models): a heat map per model that
    has a size evaluated, columns aligned, each model's cells and margins advise's."""
    sc = load_scenario(ROOT / "examples" / "64-gpu-70b-training.yaml", catalog=cat)
    r = build_scenario_report(sc, cat, by_model=True)
    charts = scenario_charts(r)
    page = render_scenario_report(r, charts)
    section = _section(page, "surface")
    be = r.advice.break_even_gpus
    assert be.by_model is not None and be.sizes_by_maturity is not None
    assert be.ib is not None and be.roce is not None
    models = [m for m in be.by_model if m.evaluated_gpus]
    assert len(models) < len(be.by_model) == len(cat.ids("model"))  # deepseek-v3 fits none
    keys = sorted(k for k in charts if k.startswith("surface"))
    assert keys == [f"surface{i}" for i in range(1 + len(models))]
    got = svgs(page)
    _check_surface(got["surface0"], section, be.sizes_by_maturity, be.ib, be.roce)
    columns = sorted(
        {n for m in models for n in m.evaluated_gpus} | {x.gpus for x in be.sizes or []}
    )
    for i, m in enumerate(models, 1):
        root = got[f"surface{i}"]
        assert m.model in texts(root)
        assert {x.gpus for x in m.sizes_by_maturity["low"]} == set(m.evaluated_gpus)
        _check_surface(root, section, m.sizes_by_maturity, be.ib, be.roce)
        blanks = len(ids(root, r"-blank-"))
        assert blanks + len(_cells(root)) == 3 * len(columns)
        assert html.escape(f"{m.model} (") in section
    assert "--break-even-models adds" not in section


def test_the_page_loads_nothing_from_outside(example):
    _, _, page = example
    assert not re.search(r"<script|<link|<iframe|<img|@import|@font-face", page, re.I)
    for attr in re.findall(r'\b(?:src|href)="([^"]*)"', page):
        assert attr.startswith(("#", "data:")), attr
    for target in re.findall(r"url\(([^)]*)\)", page):
        assert target.startswith(("#", "data:")), target


def test_charts_parse_and_carry_their_series(example):
    r, charts, page = example
    names = [f.fabric for f in r.advice.fabrics]
    got = svgs(page)
    keys = {"step", "cost", "tornado", "margin", "size", "surface0", "bom"}
    assert set(got) == keys == set(charts)
    for key in ("step", "cost", "bom"):  # one bar per fabric and part, the fabrics named
        bars = ids(got[key], r"-bar-\d+-\d+$")
        assert {b.split("-")[2] for b in bars} == {str(i) for i in range(len(names))}, key
        assert all(n in texts(got[key]) for n in names), key
    assert len(ids(got["bom"], r"-bar-")) == 3 * len(names)  # switches, optics and cables, NICs
    rows = min(len(r.advice.sensitivity), 10)
    assert len(ids(got["tornado"], r"-bar-\d+-(low|high)$")) == 2 * rows
    assert len(ids(got["margin"], r"-bin-")) == 40 and len(ids(got["margin"], r"-mark-")) == 3
    assert len(ids(got["size"], r"-line-")) == 5  # cost x2, their difference, step time x2
    all_ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(all_ids) == len(set(all_ids))  # no chart's id clashes with another's


def test_the_same_input_gives_the_same_page(example):
    r, _, page = example
    assert render_scenario_report(r) == page


class _Page(HTMLParser):
    """Start tags, and the text of <title>, <h1> and the last <pre>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.open: list[str] = []
        self.text: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.open.append(tag)
        if tag in ("title", "h1", "pre"):
            self.text[tag] = ""

    def handle_endtag(self, tag):
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_data(self, data):
        if self.open and self.open[-1] in ("title", "h1", "pre"):
            self.text[self.open[-1]] += data


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


user_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"),
    min_size=1,
    max_size=200,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=user_text, note=user_text)
def test_user_strings_are_escaped(example, name, note):
    """Whatever a scenario's name or text holds, it is text on the page: the page has the same
    elements, and the title, heading and scenario read back exactly."""
    r, charts, page = example
    base = _parse(page)
    text = f"name: {note}\n# {note}\n"
    sc = r.scenario.model_copy(update={"name": name})
    got = _parse(render_scenario_report(replace(r, scenario=sc, scenario_text=text), charts))
    assert got.tags == base.tags
    assert got.text["title"] == got.text["h1"] == f"Fabric report: {name}"
    assert got.text["pre"] == text


def test_report_command_json_and_errors(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("old")  # -o replaces the named file
    proc = run("report", str(DESIGN_EXAMPLE), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    js = json.loads(proc.stdout)
    assert js["written"] == {"html": str(out)}
    assert js["recommendation"] in ("ib-ndr", "roce-400g") and js["confidence"]
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and f"Recommendation: {js['recommendation']}" in page
    assert run("report", str(DESIGN_EXAMPLE)).returncode == 2  # no output named
    missing = run("report", str(DESIGN_EXAMPLE), "-o", str(tmp_path / "no" / "r.html"))
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    assert run("report", str(tmp_path / "none.yaml"), "-o", str(out)).returncode == 2
    no_browser = run(
        "report", str(DESIGN_EXAMPLE), "--pdf", str(tmp_path / "r.pdf"), path=str(tmp_path)
    )
    assert no_browser.returncode == 2 and "chromium" in no_browser.stderr


def test_grade_report_shows_each_run_and_finding(tmp_path):
    out = tmp_path / "grade.html"
    proc = run("grade", str(ISSUE_290), "--report", str(out), "--json")
    assert proc.returncode == 3  # the log has failing runs: the grade's own exit code
    js = json.loads(proc.stdout)
    assert js["report"] == {"html": str(out)}
    page = out.read_text()
    got = svgs(page)
    assert len(js["runs"]) == 3
    for i, r in enumerate(js["runs"], 1):
        assert f'<section id="run-{i}">' in page and f"Run {i}: {r['verdict']}" in page
        assert len(ids(got[f"run{i}"], r"-line-0-[01]$")) == 2  # measured and expected busbw
        assert "measured" in texts(got[f"run{i}"]) and "expected" in texts(got[f"run{i}"])
        for row in r["rows"]:
            assert f">{fmt.size_bytes(row['size_bytes'])}</td>" in page
        for f in r["findings"]:
            assert f"{f['severity']} {f['code']}" in page
            for line in f["evidence"]:
                assert html.escape(line) in page


def test_nothing_imports_matplotlib_until_a_chart_is_drawn():
    code = (
        "import sys, fabricplan.cli.app, fabricplan.cli.report_cmd, fabricplan.report; "
        "print('matplotlib' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC},
        timeout=60,
    )
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (make browser)")
def test_pdf(example, tmp_path):
    out = tmp_path / "r.pdf"
    html_to_pdf(example[2], out)
    data = out.read_bytes()
    assert data.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page\b", data)) >= 1
