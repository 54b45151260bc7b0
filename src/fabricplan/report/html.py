"""A self-contained HTML page: one template, embedded CSS (screen and print), and helpers that
escape every piece of text they are given.

Text is escaped where it enters the page: the helpers take ``str`` (escaped) or :class:`Html`
(markup already built by a helper, passed through). Nothing on the page loads anything: no
scripts, no stylesheets, no fonts but the reader's own (generic font families only).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Html(str):
    """Markup that is already safe: built by these helpers from escaped text."""

    __slots__ = ()


Text = str | Html


def esc(text: Text) -> Html:
    """``text`` escaped for any element or quoted attribute; markup passes through."""
    return text if isinstance(text, Html) else Html(html.escape(str(text), quote=True))


def tag(
    name: str, body: Text | Iterable[Text] = "", *, cls: str | None = None, **attrs: str
) -> Html:
    """``<name class=... attr=...>body</name>``; attribute values are escaped."""
    parts = [f' class="{esc(cls)}"'] if cls else []
    parts += [f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items()]
    inner = esc(body) if isinstance(body, str) else join(body)
    return Html(f"<{name}{''.join(parts)}>{inner}</{name}>")


def join(items: Iterable[Text], sep: str = "") -> Html:
    return Html(sep.join(esc(i) for i in items))


def bullets(items: Iterable[Text], cls: str | None = None) -> Html:
    return tag("ul", (tag("li", i) for i in items), cls=cls)


@dataclass(frozen=True)
class Column:
    head: str
    numeric: bool = False  # right-aligned, tabular figures, never wrapped


def table(columns: Sequence[Column], rows: Iterable[Sequence[Text]], caption: str = "") -> Html:
    """A table styled for print: figures right-aligned and never wrapped or cut."""
    head = tag("tr", (tag("th", c.head, cls="num" if c.numeric else None) for c in columns))
    body = (
        tag(
            "tr",
            (
                tag("td", cell, cls="num" if c.numeric else None)
                for c, cell in zip(columns, row, strict=True)
            ),
        )
        for row in rows
    )
    cap = [tag("caption", caption)] if caption else []
    return tag("table", [*cap, tag("thead", head), tag("tbody", body)])


def figure(svg: Html, caption: Text) -> Html:
    """A chart (inline SVG) with its caption; kept on one printed page."""
    return tag("figure", [svg, tag("figcaption", caption)])


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    body: Html


def page(title: str, subtitle: Text, sections: Sequence[Section], footer: Text) -> str:
    """The whole document: contents, sections, footer."""
    toc = tag(
        "nav",
        [
            tag("h2", "Contents"),
            tag("ol", (tag("li", tag("a", s.title, href=f"#{s.id}")) for s in sections)),
        ],
        cls="toc",
    )
    main = join(tag("section", [tag("h2", s.title), s.body], id=s.id) for s in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"{tag('header', [tag('h1', title), tag('p', subtitle, cls='subtitle')])}\n"
        f"{toc}\n<main>\n{main}\n</main>\n{tag('footer', footer)}\n</body>\n</html>\n"
    )


CSS = """
:root { --ink: #1b1f24; --muted: #57606a; --rule: #d0d7de; --band: #f6f8fa; --accent: #0b5394; }
* { box-sizing: border-box; }
html { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
       sans-serif; color: var(--ink); font-size: 14px; line-height: 1.45; }
body { margin: 0 auto; max-width: 1100px; padding: 24px 32px; }
h1 { font-size: 1.7rem; margin: 0 0 4px; }
h2 { font-size: 1.25rem; margin: 28px 0 8px; border-bottom: 2px solid var(--accent);
     padding-bottom: 2px; }
h3 { font-size: 1.05rem; margin: 18px 0 6px; }
p, li { max-width: 80ch; }
.subtitle { color: var(--muted); margin: 0; }
.toc ol { columns: 2; padding-left: 1.4em; margin: 4px 0; }
.toc a { color: var(--accent); text-decoration: none; }
.verdict { font-size: 1.15rem; border-left: 6px solid var(--accent); background: var(--band);
           padding: 8px 12px; margin: 8px 0; max-width: none; }
.warn { border-left-color: #bf8700; }
.fail { border-left-color: #cf222e; }
.pass { border-left-color: #1a7f37; }
.note { color: var(--muted); font-size: 0.92rem; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 0.92rem; }
caption { text-align: left; font-weight: 600; padding: 4px 0; caption-side: top; }
th, td { border-bottom: 1px solid var(--rule); padding: 3px 8px; vertical-align: top;
         text-align: left; }
thead th { border-bottom: 2px solid var(--ink); background: var(--band); }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
figure { margin: 10px 0 18px; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.9rem; }
pre { background: var(--band); border: 1px solid var(--rule); padding: 8px 10px;
      font-size: 0.85rem; white-space: pre-wrap; overflow-wrap: anywhere; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono",
            monospace; }
footer { color: var(--muted); font-size: 0.85rem; border-top: 1px solid var(--rule);
         margin-top: 32px; padding-top: 6px; }
@page { size: A4; margin: 14mm 12mm 16mm; }
@media print {
  html { font-size: 10.5pt; }
  body { max-width: none; padding: 0; }
  .toc { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  h3 { break-after: avoid; }
  section { break-before: auto; }
  figure, tr, pre, .verdict { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  tbody tr:nth-child(even) td { background: none; }
  a { color: inherit; text-decoration: none; }
}
"""
