"""Tables for people never cut a number or an id: they wrap text, or stack rows, to fit."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from conftest import DESIGN_EXAMPLE, ROOT
from fabricplan.cli.output import fitted

ENTRY = [sys.executable, "-m", "fabricplan"]


def _render(table: Table, width: int) -> list[str]:
    con = Console(width=width, file=io.StringIO(), color_system=None, soft_wrap=True)
    con.print(fitted(table, con))
    return con.file.getvalue().splitlines()


def _table(headers: list[str], rows: list[list[str]]) -> Table:
    t = Table(title="t")
    for h in headers:
        t.add_column(h)
    for r in rows:
        t.add_row(*r)
    return t


def test_a_table_that_fits_is_left_as_drawn():
    t = _table(["fabric", "TCO"], [["ib-ndr", "$27.0M"], ["roce-400g", "$24.8M"]])
    lines = _render(t, 80)
    assert any("roce-400g" in line and "$24.8M" in line for line in lines)


def test_text_wraps_at_spaces_and_figures_stay_whole():
    words = "the top driver is network gear price (switches, NICs, optics) of ib-ndr"
    t = _table(["driver", "range", "margin"], [[words, "x0.75-x1.25", "$26,123,456"]])
    lines = _render(t, 40)
    assert max(len(line) for line in lines) <= 40
    text = "\n".join(lines)
    assert "x0.75-x1.25" in text and "$26,123,456" in text and "…" not in text
    # the driver's text went onto several lines, each word whole
    for word in words.split():
        assert word in text


def test_too_narrow_for_columns_side_by_side_stacks_rows():
    headers = [f"column{i}" for i in range(8)]
    rows = [[f"value-{r}-{i}-0123456789" for i in range(8)] for r in range(2)]
    lines = _render(_table(headers, rows), 60)
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 60 and "…" not in text
    for r in rows:
        for cell in r:
            assert cell in text
    # one line per cell, the header beside it
    assert any("column7" in line and "value-1-7-0123456789" in line for line in lines)


tokens = st.text(alphabet="0123456789.,$%-xkMG", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    n_cols=st.integers(1, 9),
    cells=st.lists(tokens, min_size=1, max_size=40),
    width=st.integers(40, 130),
)
def test_no_token_is_ever_cut(n_cols: int, cells: list[str], width: int):
    """Whatever the width (40 columns up), every cell's figure appears whole on one line and
    no line is wider than the console."""
    headers = [f"h{i}" for i in range(n_cols)]
    rows = [(cells[i : i + n_cols] + ["-"] * n_cols)[:n_cols] for i in range(0, len(cells), n_cols)]
    lines = _render(_table(headers, rows), width)
    assert max(len(line) for line in lines) <= width
    for r in rows:
        for cell in r:
            assert any(cell in line for line in lines), (cell, lines)


def _cli(*args: str) -> str:
    # output to a pipe, as in a script or CI log: rich lays it out in 80 columns
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [*ENTRY, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_piped_output_keeps_every_figure_of_advise():
    import json

    text = _cli("advise", str(DESIGN_EXAMPLE))
    data = json.loads(_cli("advise", str(DESIGN_EXAMPLE), "--json"))
    assert "…" not in text
    table_lines = [line for line in text.splitlines() if line[:1] in "│┃┏┡└┌├"]
    assert max(len(line) for line in table_lines) <= 80
    for f in data["fabrics"]:
        assert f["fabric"] in text and f"{f['step_time_s']:.3f}" in text


def test_piped_validation_tables_cut_nothing():
    text = _cli("validate", "--suite", "held-back")
    assert "…" not in text and "overlap_slowdown" in text


def test_piped_topology_keeps_every_part_id_whole():
    import json

    args = ("topology", "--gpus", "2048", "--design", "rail-optimized", "--fabric", "ib-ndr")
    text = _cli(*args)
    data = json.loads(_cli(*args, "--json"))
    assert "…" not in text
    for part in data["transceivers_by_id"]:
        assert part in text
