"""The terminal output of `iowhy compare`: plain text, every line at most 100 columns.

Renders the dict of iowhy.compare.compare(); computes nothing new. Table values carry
their unit in the row label, one unit for every time row (`--unit`, microseconds by
default, as the report and `hist`) and one for every size row (the one that suits the
largest size of the table).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from iowhy import cmdline

from .escape import printable
from .fmt import fit_line, fmt_count, wrap_text
from .terminal import damage_first
from .units import DEFAULT_TIME_UNIT, time_text

LABEL = 34  # row label column (after a 2-column indent)
CELL = 18  # A and B cells: value, then the share of elapsed for attribution rows
DELTA = 14
RATIO = 9
SECTION_TITLES = {"time": "elapsed and where it went", "requests": "requests by class",
                  "fsync": "fsync and commits", "flushes": "cache flushes (workload devices)",
                  "placement": "metadata and placement", "devices": "devices"}
BYTE_UNITS = (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("bytes", 1.0))


def _scale(row: Mapping[str, Any], units: tuple[tuple[str, float], ...]) -> tuple[str, float]:
    """The largest unit the larger of A and B reaches (the smallest unit if neither)."""
    big = max(abs(v) for v in (row["a"] or 0, row["b"] or 0))
    for name, scale in units:
        if big >= scale:
            return name, scale
    return units[-1]


def _decimals(big: float) -> int:
    return 1 if big >= 100 else 2 if big >= 10 else 3


def _cells(row: Mapping[str, Any], tunit: str = DEFAULT_TIME_UNIT,
           bunit: tuple[str, float] = ("KiB", 2.0**10)) -> tuple[str, str, str, str]:
    """(label with unit, A, B, delta) for one row: times in `tunit`, sizes in `bunit`."""
    unit = row["unit"]
    a, b, d = row["a"], row["b"], row["delta"]
    if unit == "ns":
        def tfmt(v: Any, sign: str = "") -> str:
            return time_text(v, tunit, sign=sign)
        return f"{row['label']} ({tunit})", tfmt(a), tfmt(b), tfmt(d, "+")
    if unit == "bytes":
        name, scale = bunit
        big = max(abs(v) for v in (a or 0, b or 0)) / scale
        n = 0 if scale == 1.0 else _decimals(big)

        def fmt(v: Any, sign: str = "") -> str:
            return "-" if v is None else f"{v / scale:{sign},.{n}f}"
        return f"{row['label']} ({name})", fmt(a), fmt(b), fmt(d, "+")
    if unit == "share":
        def pct(v: Any, sign: str = "") -> str:
            return "-" if v is None else f"{100 * v:{sign}.1f}"
        return f"{row['label']} (%)", pct(a), pct(b), pct(d, "+")
    if unit == "ratio":
        def r3(v: Any, sign: str = "") -> str:
            return "-" if v is None else f"{v:{sign}.3f}"
        return row["label"], r3(a), r3(b), r3(d, "+")
    # counts and sectors: integers, sectors compact (523.2k)

    def num(v: Any, sign: bool = False) -> str:
        if v is None:
            return "-"
        s = fmt_count(int(v)) if unit == "sectors" else f"{int(v):,}"
        return ("+" + s) if sign and v > 0 else s
    label = f"{row['label']} (sectors)" if unit == "sectors" else row["label"]
    return label, num(a), num(b), num(d, True)


def _pct_cell(pct: float | None, present: bool) -> str:
    if not present:
        return " " * 7
    return f"{'-' if pct is None else f'{pct:.1f}%':>7}"


def _byte_unit(c: Mapping[str, Any]) -> tuple[str, float]:
    """The size unit of the table: the largest the largest size reaches (KiB at least)."""
    big = max([abs(v) for row in c["rows"] if row["unit"] == "bytes"
               for v in (row["a"] or 0, row["b"] or 0)] + [0])
    for name, scale in BYTE_UNITS[:-1]:
        if big >= scale:
            return name, scale
    return BYTE_UNITS[-2]


def _table(c: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> list[str]:
    bunit = _byte_unit(c)
    lines = [f"{'SIDE BY SIDE':<{LABEL + 2}}{'A':>{CELL}}{'B':>{CELL}}{'B - A':>{DELTA}}"
             f"{'B / A':>{RATIO}}"]
    section = None
    for row in c["rows"]:
        if row["section"] != section:
            section = row["section"]
            lines.append(f"  {SECTION_TITLES.get(section, section)}")
        label, va, vb, vd = _cells(row, unit, bunit)
        if row["delta"] == 0:
            vd = "0"  # no "+0.000": an unchanged figure reads as such
        # attribution rows also show the share of each run's own elapsed
        va += _pct_cell(row.get("a_pct"), "a_pct" in row)
        vb += _pct_cell(row.get("b_pct"), "b_pct" in row)
        ratio = ""
        if row["ratio"] is not None and row["unit"] in ("ns", "count", "bytes"):
            ratio = f"{row['ratio']:.2f}x"
        label = label if len(label) <= LABEL - 2 else label[: LABEL - 5] + "..."
        lines.append(f"    {label:<{LABEL - 2}}{va:>{CELL}}{vb:>{CELL}}{vd:>{DELTA}}"
                     f"{ratio:>{RATIO}}")
    return lines


def _name(s: Mapping[str, Any]) -> str:
    """A run's name: its label, else its short command (iowhy.cmdline)."""
    return cmdline.title(s)


def _title(c: Mapping[str, Any]) -> list[str]:
    """The first lines: the damage (if any), the two runs' names, what was lost."""
    dmg = c.get("damage") or {}
    first = damage_first(dmg.get("a"), "A: ") + damage_first(dmg.get("b"), "B: ")
    shown = {f"{who}: {(dmg.get(k) or {}).get('summary')}" for who, k in (("A", "a"), ("B", "b"))
             if (dmg.get(k) or {}).get("damaged")}
    lines = first + [f"iowhy compare  A: {_name(c['a'])}", f"               B: {_name(c['b'])}"]
    for p in c.get("problems") or []:
        if p not in shown:  # the damage is already the first line
            lines += wrap_text(p, "! ", "  ")
    return lines


def _runs(c: Mapping[str, Any]) -> list[str]:
    """What was compared (after the answer): each run's trace and short command."""
    lines = ["RUNS"]
    for who in ("a", "b"):
        s = c[who]
        cmd = s.get("command_short") or cmdline.full_command(s.get("command"))
        lines.append(f"  {who.upper()}  {s.get('path') or '(no path)'}")
        lines += wrap_text(f"workload {cmd or '(unknown)'}", "     ", "       ")[:2]
    return lines


# Keep "3 -> 5,000" and "30 ms" on one line when wrapping: join them with no-break spaces
# (textwrap does not break on them), then give the plain spaces back.
_KEEP_UNIT = re.compile(r"(?<=\d) (?=(?:ns|us|ms|s|KiB|MiB|GiB|sectors)\b)")


def _wrap_kept(text: str, first: str, rest: str) -> list[str]:
    kept = _KEEP_UNIT.sub("\u00a0", text.replace(" -> ", "\u00a0->\u00a0"))
    return [line.replace("\u00a0", " ") for line in wrap_text(kept, first, rest)]


def _explained(c: Mapping[str, Any]) -> list[str]:
    lines = ["WHAT CHANGED"]
    note = c.get("basis_note")
    if note:
        lines += _wrap_kept(note["text"], "  ", "  ")
    shown_config = False
    for i, e in enumerate(c["explanations"], 1):
        if e["category"] == "config" and not shown_config:
            lines.append("  configuration differences:")
            shown_config = True
        lines += _wrap_kept(e["text"], f"  {i}. ", "     ")
    if not c["config_differences"]:
        lines.append("  no configuration difference found")
    return lines


def _lines(*sections: list[str]) -> str:
    out: list[str] = []
    for s in sections:
        if out:
            out.append("")
        out += [fit_line(printable(line).rstrip()) for line in s]
    return "\n".join(out)


def render_compare(c: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> str:
    """The whole comparison as one string (no trailing newline), the answer first: what
    was lost, what changed, then the runs and the side-by-side table (its time rows in
    `unit`, reports.units.TIME_UNITS)."""
    return _lines(_title(c), _explained(c), _runs(c), _table(c, unit))


def render_explained(c: Mapping[str, Any]) -> str:
    """WHAT CHANGED alone (the compare page's answer)."""
    return _lines(_explained(c))


def render_side_by_side(c: Mapping[str, Any], unit: str = DEFAULT_TIME_UNIT) -> str:
    """The SIDE BY SIDE table alone."""
    return _lines(_table(c, unit))
