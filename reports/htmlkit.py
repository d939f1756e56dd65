"""Building blocks of iowhy's self-contained HTML pages (reports/html.py assembles the
report and compare pages from them): the document around the fragments, sections,
tables, figure blocks, nested mappings, and the escaping every one of them applies.

Escaping: every value a helper puts into the page goes through html.escape unless it is
a `Raw` (markup built here), after its control characters and undecodable bytes are
made visible (escape.printable).
"""

from __future__ import annotations

import base64
import html
from typing import Any, Iterable, Mapping, Sequence

from iowhy import __version__

from .escape import printable_lines


class Raw(str):
    """Markup built by this module: inserted as is (everything else is escaped)."""


def esc(value: Any) -> str:
    """A value as HTML text: Raw passes through, None is "-", anything else is escaped."""
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "-"
    return html.escape(printable_lines(str(value)), quote=True)


# -- building blocks -----------------------------------------------------------------------

CSS = """
:root { --fg: #1a1a1a; --muted: #5a5a5a; --line: #d9d9d9; --zebra: #f6f7f9;
        --warn-bg: #fff4e5; --warn-line: #d9822b; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #ffffff;
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 18px 28px 60px; }
h1 { font-size: 24px; margin: 6px 0 4px; }
h1 .cmd { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 18px;
          font-weight: normal; color: var(--muted); word-break: break-all; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px;
     border-bottom: 2px solid var(--fg); }
h3 { font-size: 16px; margin: 22px 0 8px; }
p { margin: 6px 0; }
.muted { color: var(--muted); }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
nav.toc { margin: 10px 0 4px; font-size: 14px; }
nav.toc a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.problems { background: var(--warn-bg); border-left: 6px solid var(--warn-line);
            padding: 10px 14px; margin: 12px 0; }
.problems p { margin: 3px 0; font-weight: 600; }
.problems p.note { font-weight: normal; }
.problems p:not(.note)::before { content: "\\26A0\\FE0E  "; color: var(--warn-line); }
.ok { color: #1b7a3a; font-weight: 600; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 14px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { text-align: left; background: #eceef2; font-weight: 600; }
thead th { vertical-align: bottom; }
td:first-child { white-space: nowrap; }
.scroll { max-width: 100%; overflow-x: auto; }
tbody tr:nth-child(even) td { background: var(--zebra); }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.num { text-align: right; }
table.kv th { background: none; color: var(--muted); font-weight: normal; width: 11em; }
table.kv td { word-break: break-word; }
.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 6px;
          border-radius: 2px; vertical-align: -1px; }
.barcell { width: 330px; }
.bar { display: block; height: 13px; border-radius: 2px; min-width: 1px; }
ol.findings li { margin: 5px 0; font-size: 16px; }
p.lead { font-size: 16px; font-weight: 600; margin: 8px 0 12px; }
figure { margin: 14px 0 22px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { margin-top: 5px; font-size: 14px; color: var(--muted); }
figcaption b { color: var(--fg); }
.cols { display: flex; gap: 28px; flex-wrap: wrap; }
.cols > div { flex: 1 1 480px; min-width: 0; }
pre.text { font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: var(--zebra);
           border: 1px solid var(--line); padding: 10px 12px; overflow-x: auto; }
details > summary { cursor: pointer; color: var(--accent); margin: 8px 0; }
footer { margin-top: 40px; font-size: 12px; color: var(--muted); }
"""


def page(title: str, parts: Iterable[str], heading: str | Raw | None = None) -> str:
    """A whole HTML document: inline stylesheet, <h1>, then the fragments in order."""
    body = "\n".join(parts)
    h1 = heading if heading is not None else esc(title)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            f"<h1>{esc(h1) if not isinstance(h1, Raw) else h1}</h1>\n{body}\n"
            f"<footer>iowhy {esc(__version__)}: times in s/ms/us (10^-6 s), sizes in MiB "
            "(2^20 bytes), sectors of 512 bytes. Definitions: docs/report-json.md."
            "</footer>\n</main>\n</body>\n</html>\n")


def section(sec_id: str, title: str, *parts: str) -> str:
    """A titled section; `sec_id` is its anchor (used by nav())."""
    return (f"<section id=\"{esc(sec_id)}\">\n<h2>{esc(title)}</h2>\n"
            + "\n".join(p for p in parts if p) + "\n</section>")


def nav(entries: Sequence[tuple[str, str]]) -> str:
    """Links to sections: (anchor, label) pairs."""
    links = " ".join(f"<a href=\"#{esc(a)}\">{esc(label)}</a>" for a, label in entries)
    return f"<nav class=\"toc\">{links}</nav>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (),
          table_id: str | None = None, cls: str | None = None) -> str:
    """A table; `numeric` are the column indices to right-align. Cells are escaped unless
    they are Raw."""
    num = set(numeric)
    tid = f" id=\"{esc(table_id)}\"" if table_id else ""
    tcl = f" class=\"{esc(cls)}\"" if cls else ""
    right = " class=\"num\""
    head = "".join(f"<th{right if i in num else ''}>{esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(f"<td{right if i in num else ''}>{esc(c)}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    # Wide tables scroll inside their box instead of widening the page.
    return (f"<div class=\"scroll\"><table{tid}{tcl}>\n<thead><tr>{head}</tr></thead>\n"
            "<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table></div>")


def kv_table(pairs: Iterable[tuple[str, Any]], table_id: str | None = None,
             cls: str = "") -> str:
    """Label/value lines as a two-column table (`cls`: more classes of the table)."""
    tid = f" id=\"{esc(table_id)}\"" if table_id else ""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>\n" for k, v in pairs)
    classes = esc(f"kv {cls}".strip())
    return f"<table class=\"{classes}\"{tid}>\n<tbody>\n{rows}</tbody>\n</table>"


def figure_block(fig_id: str, title: str, caption: str, png: bytes | None,
                 note: str = "") -> str:
    """A figure: the PNG as a data URI, its title and a one-line caption saying how to
    read it (`note`: an extra sentence, e.g. about downsampling)."""
    if png is None:
        img = f"<p class=\"muted\">({esc(note or 'not available')})</p>"
        note = ""
    else:
        data = base64.b64encode(png).decode("ascii")
        img = f"<img src=\"data:image/png;base64,{data}\" alt=\"{esc(title)}\">"
    extra = f" {esc(note)}" if note else ""
    return (f"<figure id=\"{esc(fig_id)}\">\n{img}\n<figcaption><b>{esc(title)}.</b> "
            f"{esc(caption)}{extra}</figcaption>\n</figure>")


def prefix_ids(fragment: str, prefix: str) -> str:
    """The fragment with every id="x" renamed id="prefix-x": the same section twice on
    one page (run A and run B) keeps its ids unique."""
    return fragment.replace(' id="', f' id="{prefix}-')


def _swatch(color: str) -> Raw:
    return Raw(f"<span class=\"swatch\" style=\"background:{esc(color)}\"></span>")


def _bar(frac: float, color: str) -> Raw:
    w = max(0.0, min(1.0, frac)) * 100
    return Raw(f"<span class=\"bar\" style=\"width:{w:.2f}%;background:{esc(color)}\"></span>"
               if frac > 0 else "")


def _label(name: str, color: str | None) -> Raw:
    return Raw(f"{_swatch(color) if color else ''}{esc(name)}")


# -- sections of one result ----------------------------------------------------------------

def section_mapping(sec_id: str, title: str, obj: Any, folded: str = "") -> str:
    """Any JSON-like value as nested tables (for results without a dedicated section,
    e.g. the comparison of `iowhy compare`); `folded`: a summary line under which the
    tables are folded away (<details>, no script)."""
    body = _mapping_html(obj, 0)
    if folded:
        body = f"<details><summary>{esc(folded)}</summary>\n{body}\n</details>"
    return section(sec_id, title, body)


def text_block(text: str, block_id: str | None = None) -> str:
    """Preformatted terminal text (escaped), e.g. a text report embedded in a page."""
    bid = f" id=\"{esc(block_id)}\"" if block_id else ""
    return f"<pre class=\"text\"{bid}>{esc(text)}</pre>"


def _mapping_html(obj: Any, depth: int) -> str:
    if isinstance(obj, Mapping):
        if not obj:
            return "<span class=\"muted\">(empty)</span>"
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_mapping_html(v, depth + 1)}</td></tr>\n"
                       for k, v in obj.items())
        return f"<table class=\"kv\">\n<tbody>\n{rows}</tbody>\n</table>"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(x, (Mapping, list, tuple)) for x in obj):
            return esc(", ".join("-" if x is None else str(x) for x in obj)) or "-"
        return "".join(f"<div>{_mapping_html(x, depth + 1)}</div>" for x in obj)
    if isinstance(obj, float):
        return esc(f"{obj:.6g}")
    if isinstance(obj, int) and not isinstance(obj, bool):
        return esc(f"{obj:,}")
    return esc(obj)


# -- figures of one result -----------------------------------------------------------------
