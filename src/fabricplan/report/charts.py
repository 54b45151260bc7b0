"""Charts as inline SVG, drawn with matplotlib (imported on the first chart, not before).

Text stays text (``svg.fonttype: none``) in generic font families, so the page loads no font
and its words can be searched and selected; the ids matplotlib writes are salted with a fixed
string and prefixed per chart, so one input gives the same page every time and the charts of
one page share no id. Each bar, line and marker carries a ``gid`` naming its series, which the
SVG keeps as its ``id``.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabricplan.report.html import Html, esc

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Okabe-Ito: tells its colours apart for colour-blind readers and in greyscale print.
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#56B4E9",
    "#CC79A7",
    "#F0E442",
    "#000000",
    "#999999",
)
RC = {
    "svg.fonttype": "none",  # text as text, no embedded glyphs
    "svg.hashsalt": "fabricplan",  # the same clip-path and marker ids on every run
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e6ea",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "legend.frameon": False,
}
WIDTH_IN = 7.2  # the printed page's text width, about


def _figure(height_in: float, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure  # no pyplot: no backend, no global figure list

    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def _svg(fig: Figure, key: str, label: str) -> Html:
    """The figure as an SVG element for a page: no XML prolog, no metadata, ids of its own."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    pre = f"{key}-"
    text = re.sub(r'\bid="', f'id="{pre}', text)
    text = text.replace("url(#", f"url(#{pre}").replace('xlink:href="#', f'xlink:href="#{pre}')
    text = text.replace("<svg ", f'<svg role="img" aria-label="{esc(label)}" ', 1)
    return Html(text)


def _chart(
    key: str, height_in: float, label: str, draw: Callable[[Any], None], ncols: int = 1
) -> Html:
    """A chart drawn by ``draw`` on its axes (a list of them when ``ncols`` > 1); ``key``
    prefixes its ids (unique on a page). matplotlib's settings are global: one chart at a time,
    so charts drawn by several threads (a web server's) do not mix them."""
    import matplotlib

    with _LOCK, matplotlib.rc_context(RC):
        fig, axes = _figure(height_in, ncols)
        draw(axes if ncols > 1 else axes[0])
        return _svg(fig, key, label)


_LOCK = threading.Lock()


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@dataclass(frozen=True)
class Stack:
    """Horizontal stacked bars: one bar per category, one segment per part."""

    categories: Sequence[str]  # bars, top to bottom
    parts: Sequence[tuple[str, Sequence[float]]]  # (part, value per category)
    xlabel: str
    total: Callable[[float], str]  # the total printed at the end of each bar
    money: bool = False  # dollars on the axis ($1M), not a scale factor (1e6)


def stacked_bars(key: str, s: Stack, label: str) -> Html:
    def draw(ax: Axes) -> None:
        y = list(range(len(s.categories)))[::-1]
        left = [0.0] * len(s.categories)
        for j, (name, values) in enumerate(s.parts):
            if not any(values):
                continue
            bars = ax.barh(y, values, left=left, color=colour(j), label=name, height=0.6)
            for i, bar in enumerate(bars):
                bar.set_gid(f"bar-{i}-{j}")
            left = [a + b for a, b in zip(left, values, strict=True)]
        for yi, total in zip(y, left, strict=True):
            ax.annotate(
                s.total(total),
                (total, yi),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(y, list(s.categories))
        ax.set_xlabel(s.xlabel)
        ax.set_xlim(0, max(left or [1]) * 1.18 or 1)
        ax.grid(axis="y", visible=False)
        if s.money:
            ax.xaxis.set_major_formatter(_money_axis())
        ax.figure.legend(loc="outside lower center", ncols=min(4, len(s.parts)), fontsize=8)

    return _chart(
        key, 0.7 + 0.45 * len(s.categories) + 0.25 * ((len(s.parts) + 3) // 4), label, draw
    )


@dataclass(frozen=True)
class TornadoRow:
    label: str
    at_low: float  # the margin at the driver's low end
    at_high: float
    tips: str  # where the margin reaches zero, for people; "" when it does not within reach


def tornado(key: str, rows: Sequence[TornadoRow], base: float, xlabel: str, label: str) -> Html:
    """Each driver's margin at its low and high end around the nominal margin ``base``; a
    margin below zero means the runner-up wins."""

    def draw(ax: Axes) -> None:
        y = list(range(len(rows)))[::-1]
        for yi, i, r in zip(y, range(len(rows)), rows, strict=True):
            lo = ax.barh(
                yi,
                r.at_low - base,
                left=base,
                color=PALETTE[0],
                height=0.6,
                label="driver at its low end" if i == 0 else None,
            )
            hi = ax.barh(
                yi,
                r.at_high - base,
                left=base,
                color=PALETTE[1],
                height=0.6,
                label="driver at its high end" if i == 0 else None,
            )
            lo[0].set_gid(f"bar-{i}-low")
            hi[0].set_gid(f"bar-{i}-high")
            if r.tips:
                ends = (r.at_low, r.at_high, base)
                ax.annotate(
                    f"tips at {r.tips}",
                    (max(ends), yi),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7.5,
                )
        ax.axvline(base, color="#333333", linewidth=0.8)
        ax.axvline(
            0, color="#cf222e", linewidth=1.0, linestyle="--", label="margin 0: the choice flips"
        )
        ax.set_yticks(y, [_wrap(r.label, 38) for r in rows])
        ax.set_xlabel(xlabel)
        ax.grid(axis="y", visible=False)
        ax.margins(x=0.25)
        ax.xaxis.set_major_formatter(_money_axis())
        ax.figure.legend(loc="outside lower center", ncols=3, fontsize=8)

    return _chart(key, 1.0 + 0.42 * len(rows), label, draw)


def histogram(
    key: str, values: Any, marks: Sequence[tuple[str, float]], xlabel: str, label: str
) -> Html:
    """The distribution of ``values`` with vertical marks (P10, P90, zero)."""

    def draw(ax: Axes) -> None:
        _, _, patches = ax.hist(values, bins=40, color=PALETTE[0], alpha=0.85)
        for i, p in enumerate(patches):
            p.set_gid(f"bin-{i}")
        styles = ("--", ":", "-")
        for i, (name, x) in enumerate(marks):
            line = ax.axvline(
                x,
                color=colour(i + 3) if name != "0" else "#cf222e",
                linestyle=styles[i % 3],
                linewidth=1.2,
                label=name,
            )
            line.set_gid(f"mark-{i}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("samples")
        ax.xaxis.set_major_formatter(_money_axis())
        ax.legend(fontsize=8)

    return _chart(key, 2.8, label, draw)


@dataclass(frozen=True)
class Series:
    name: str
    x: Sequence[float]
    y: Sequence[float | None]


def lines(
    key: str,
    panels: Sequence[tuple[str, Sequence[Series], bool]],
    xlabel: str,
    marks: Sequence[tuple[str, float]],
    label: str,
    x_format: Callable[[float], str] = lambda v: f"{v:,.0f}",
    height_in: float = 3.0,
) -> Html:
    """Panels side by side, each (y label, series, money axis), on a base-2 log x axis, with
    vertical marks shared by every panel (the scenario's size, the break-even)."""

    def draw(axes: Any) -> None:
        axes = axes if isinstance(axes, list) else [axes]
        for p, (ax, (ylabel, series, is_money)) in enumerate(zip(axes, panels, strict=True)):
            for i, s in enumerate(series):
                pts = [(x, y) for x, y in zip(s.x, s.y, strict=True) if y is not None]
                (ln,) = ax.plot(
                    [a for a, _ in pts],
                    [b for _, b in pts],
                    marker="o",
                    markersize=3.5,
                    color=colour(i),
                    label=s.name,
                )
                ln.set_gid(f"line-{p}-{i}")
            for k, (name, x) in enumerate(marks):
                ax.axvline(
                    x,
                    color="#cf222e" if k else "#57606a",
                    linestyle="--" if k else ":",
                    linewidth=1.0,
                    label=name,
                    gid=f"mark-{p}-{k}",
                )
            if all(y >= 0 for s in series for y in s.y if y is not None):
                ax.set_ylim(bottom=0)
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(_axis(x_format))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            if is_money:
                ax.yaxis.set_major_formatter(_money_axis())
        axes[0].legend(fontsize=8)

    return _chart(key, height_in, label, draw, ncols=len(panels))


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _money_axis() -> Any:
    from matplotlib.ticker import FuncFormatter

    from fabricplan.cost import usd

    return FuncFormatter(lambda v, _: usd(v, 3))


def _axis(show: Callable[[float], str]) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: show(v))


@dataclass(frozen=True)
class Heat:
    """A heat map of one quantity over columns (left to right) and rows (top to bottom); a cell
    not in ``values`` is grey, marked with a dash. ``marks`` puts a bar at the left edge of a
    cell, per row."""

    title: str
    columns: Sequence[int]
    rows: Sequence[str]
    values: Mapping[tuple[str, int], float]  # (row, column) -> value
    marks: Mapping[str, int]  # row -> the column whose left edge is marked
    text: Callable[[float], str]  # a cell's value as printed in it


def heat_map(key: str, h: Heat, limit: float, colour_label: str, xlabel: str, label: str) -> Html:
    """Cells coloured on a diverging scale centred on zero, from ``-limit`` (blue) to
    ``limit`` (red), each with its value printed; every cell carries the id
    ``cell-ROW-COLUMN`` (one without a value ``blank-ROW-COLUMN``) and every mark
    ``mark-ROW``."""

    def draw(ax: Axes) -> None:
        from matplotlib import colormaps
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize
        from matplotlib.patches import Rectangle

        cmap, norm = colormaps["RdBu_r"], Normalize(-limit, limit)
        for y, row in enumerate(h.rows):
            for x, col in enumerate(h.columns):
                v = h.values.get((row, col))
                if v is None:
                    ax.add_patch(
                        Rectangle(
                            (x - 0.5, y - 0.5),
                            1,
                            1,
                            facecolor="#f0f1f3",
                            edgecolor="white",
                            gid=f"blank-{row}-{col}",
                        )
                    )
                    ax.text(x, y, "\u2013", ha="center", va="center", fontsize=7.5)
                    continue
                shade = norm(v)
                ax.add_patch(
                    Rectangle(
                        (x - 0.5, y - 0.5),
                        1,
                        1,
                        facecolor=cmap(shade),
                        edgecolor="white",
                        linewidth=1.0,
                        gid=f"cell-{row}-{col}",
                    )
                )
                dark = abs(shade - 0.5) > 0.3
                ink = "white" if dark else "black"
                ax.text(x, y, h.text(v), ha="center", va="center", fontsize=7.5, color=ink)
            if row in h.marks and h.marks[row] in h.columns:
                x = list(h.columns).index(h.marks[row]) - 0.5
                ax.plot([x, x], [y - 0.5, y + 0.5], color="black", linewidth=3.0, gid=f"mark-{row}")
        ax.set_xlim(-0.5, len(h.columns) - 0.5)
        ax.set_ylim(len(h.rows) - 0.5, -0.5)
        ax.set_xticks(range(len(h.columns)), [f"{c:,}" for c in h.columns])
        ax.set_yticks(range(len(h.rows)), list(h.rows))
        ax.grid(False)
        ax.tick_params(length=0)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_xlabel(xlabel)
        ax.set_title(h.title, fontsize=9, loc="left")
        bar = ax.figure.colorbar(ScalarMappable(norm, cmap), ax=ax, fraction=0.04, pad=0.01)
        bar.set_label(_wrap(colour_label, 22), fontsize=7.5)
        bar.ax.tick_params(labelsize=7.5)

    return _chart(key, 0.55 + 0.32 * len(h.rows), label, draw)
