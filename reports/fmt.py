"""Cell and line formatters shared by the terminal report, the HTML pages and the
compare text: counts, sizes, shares, command lines, the 100-column width.

Each takes a figure the analysis produced and returns its text; none computes a figure.
"""

from __future__ import annotations

import textwrap
from typing import Any, Mapping

from iowhy import cmdline

from .escape import printable

WIDTH = 100  # columns of a text line


def fmt_mib(b: int) -> str:
    return f"{b / 2**20:,.1f}"


def fmt_count(x: int | None) -> str:
    """Counts that fit a 10-column cell: 99,999 then 123.4k, 422.6M, 1.2G."""
    if x is None:
        return "-"
    if abs(x) < 100_000:
        return f"{x:,}"
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{suffix}"
    return str(x)


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def fit_line(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."


def wrap_text(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first.rstrip()]


def command_text(r: Mapping[str, Any]) -> str:
    """The command as recorded, whole (the metadata block of a page)."""
    tr = r.get("trace") or {}
    cmd = cmdline.full_command(tr.get("command"))
    return cmd if cmd else "(attached process)" if tr.get("pid") else "(unknown)"


def short_command(r: Mapping[str, Any]) -> str:
    """The command in its short form (iowhy.cmdline), as the analysis gave it."""
    tr = r.get("trace") or {}
    return str(tr.get("command_short") or command_text(r))


def yes_no(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, (bool, int)):
        return "yes" if v else "no"
    return str(v)


def cgroup_name(g: Mapping[str, Any], width: int) -> str:
    """A cgroup's path, its tail when too long; `(unknown)` for the threads whose
    cgroup no record names, `(removed, id N)` for one gone before it was named."""
    name = (printable(g["cgroup"]) if g.get("cgroup") is not None  # measured as shown
            else "(unknown)" if not g.get("id") else f"(removed, id {g['id']})")
    return name if len(name) <= width else "..." + name[-(width - 3):]
