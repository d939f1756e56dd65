"""`iowhy requests`: the per-request listing (views.requests) as a biosnoop-like text
table, CSV or JSON. Presentation only: every figure comes from the view."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from .escape import printable
from .units import DEFAULT_TIME_UNIT, MAX_WIDTH, label, time_text

SCHEMA = "iowhy-requests/1"
# Fixed decimals per unit in the listing (a column reads evenly): biosnoop's resolution.
DECIMALS = {"ns": 0, "us": 1, "ms": 3, "s": 6}

# CSV and JSON columns: integer ns and bytes, as every JSON iowhy prints.
CSV_COLUMNS = ("time_ns", "comm", "pid", "disk", "op", "sector", "bytes", "queue_ns",
               "device_ns", "total_ns", "class", "call", "call_index")


def render_json(rows: Any) -> str:
    """{"schema", "count", "requests_in_trace", "requests": [...]}: times in integer ns,
    null when not observed; `call` null when the request was in no fsync-family call."""
    out = []
    for r in rows.as_dicts():
        for k in ("queue_ns", "device_ns", "total_ns", "call_index"):
            if r[k] < 0:
                r[k] = None
        r["call"] = r["call"] or None
        out.append(r)
    return json.dumps({"schema": SCHEMA, "count": len(out), "requests_in_trace": rows.total,
                       "requests": out}, indent=2, allow_nan=False)


def render_csv(rows: Any) -> str:
    """A header, then one line per request; unknown figures are empty fields."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows.as_dicts():
        w.writerow(["" if (k.endswith(("_ns", "_index")) and k != "time_ns" and r[k] < 0)
                    else r[k] for k in CSV_COLUMNS])
    return buf.getvalue()


def render_text(rows: Any, unit: str = DEFAULT_TIME_UNIT, width: int = MAX_WIDTH) -> str:
    """biosnoop's table: time of completion (s), comm, pid, disk, RWBS, sector, bytes,
    queue and device time in `unit`, class and the fsync-family call. Columns are as
    wide as their widest value; when the table is wider than `width`, comm is cut."""
    heads = ("time (s)", "comm", "pid", "disk", "op", "sector", "bytes",
             label("queue", unit), label("device", unit), "class", "call")
    right = (True, False, True, False, False, True, True, True, True, False, False)
    body = [[time_text(t, "s", decimals=6), printable(c) or "?", str(p), printable(d), o,
             str(s), f"{b:,}",
             time_text(q, unit, decimals=DECIMALS[unit]),
             time_text(dv, unit, decimals=DECIMALS[unit]), k, cl or "-"]
            for t, c, p, d, o, s, b, q, dv, k, cl in zip(
                rows.time_ns.tolist(), rows.comm, rows.pid.tolist(), rows.disk, rows.op,
                rows.sector.tolist(), rows.nbytes.tolist(), rows.queue_ns.tolist(),
                rows.device_ns.tolist(), rows.cls, rows.call)]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(heads)]
    over = sum(widths) + len(widths) - 1 - width
    for col, least in ((1, 8), (3, 6)):  # comm, then disk, cut to fit
        if over > 0:
            cut = min(over, widths[col] - least)
            if cut > 0:
                widths[col] -= cut
                over -= cut

    def line(cells: list[str]) -> str:
        parts = []
        for c, w, r in zip(cells, widths, right):
            c = c if len(c) <= w else c[:w - 1] + "~"
            parts.append(c.rjust(w) if r else c.ljust(w))
        return " ".join(parts).rstrip()
    lines = [line(list(heads))] + [line(r) for r in body]
    if not body:
        lines.append("no request matches")
    return "\n".join(lines)
