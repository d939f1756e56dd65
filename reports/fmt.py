"""Cell and line formatters shared by the terminal report, the HTML pages, the compare
text and `info`: counts, sizes, shares, command lines, the 100-column width, the line of
an aligned table. Those the analyzer's own outputs use too (`iowhy query`) are in
iowhy/cells.py and read from here.

Each takes a figure the analysis produced and returns its text; none computes a figure.
"""

from __future__ import annotations

import textwrap
from typing import Any, Mapping

from iowhy import cmdline
from iowhy.categories import PART_WORDS
from iowhy.cells import aligned  # noqa: F401 (the reports' tables read it here)
from iowhy.findings import fmt_ns

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


# What the devices below a loop device did while it served a request (`stack_service`).
BELOW_WORDS = {**PART_WORDS, "idle below": "idle"}
SERVED_BELOW_NOTE = ("idle: nothing in flight there; the loop worker or the lower journal "
                     "thread on a CPU or waiting for one")


def remapped_note(r: Mapping[str, Any]) -> str:
    """The placement table's note on the loop devices left out of its positioning and
    device time (`placement_remapped`)."""
    names = r.get("placement_remapped") or []
    return (f"positioning and dev time leave out {', '.join(names)}: a loop device's sectors "
            "are offsets in its backing file, which the filesystem below places on its disk "
            "(that disk's own positioning is counted when it is recorded)")


def served_below(r: Mapping[str, Any], name: str) -> tuple[list[str], list[str]] | None:
    """How the devices below loop device `name` served its busy time (`stack_service`):
    (the devices below, one text per category of its own with at least 1% of its busy
    time: "barrier 91.3 ms: idle 41%, metadata I/O 41%, ..."), None if none did."""
    for e in r.get("stack_service") or []:
        if e["upper"] != name:
            continue
        texts = []
        for cat, below in e["by_category_ns"].items():
            tot = sum(below.values())
            if tot and tot >= e["busy_ns"] / 100:
                how = ", ".join(f"{BELOW_WORDS.get(k, k)} {100 * v / tot:.0f}%"
                                for k, v in sorted(below.items(), key=lambda kv: -kv[1])
                                if v >= tot / 100)
                texts.append(f"{cat} {fmt_ns(tot)}: {how}")
        return [printable(x) for x in e["lower"]], texts
    return None
