"""`iowhy requests`: the per-request listing (views.requests) as a biosnoop-like text
table, CSV or JSON. Presentation only: every figure comes from the view."""

from __future__ import annotations

import csv
import io
import json
from typing import IO, Any, Iterator

from iowhy.names import utf8_text

from .escape import printable
from .units import DEFAULT_TIME_UNIT, MAX_WIDTH, label, time_text

SCHEMA = "iowhy-requests/1"
# Fixed decimals per unit in the listing (a column reads evenly): biosnoop's resolution.
DECIMALS = {"ns": 0, "us": 1, "ms": 3, "s": 6}

# CSV and JSON columns: integer ns and bytes, as every JSON iowhy prints.
CSV_COLUMNS = ("time_ns", "comm", "pid", "disk", "op", "sector", "bytes", "queue_ns",
               "device_ns", "total_ns", "class", "call", "call_index")


BATCH = 4096  # rows formatted at a time: the text never holds the whole listing


def _dicts(rows: Any) -> Iterator[list[dict[str, Any]]]:
    """The rows as dicts, a batch at a time, names as utf8_text writes them."""
    for lo in range(0, len(rows), BATCH):
        batch = rows.as_dicts(lo, lo + BATCH)
        for r in batch:
            r["comm"] = utf8_text(r["comm"])
            r["disk"] = utf8_text(r["disk"])
        yield batch


def write_json(out: IO[str], rows: Any) -> None:
    """{"schema", "count", "requests_in_trace", "requests": [...]}, as json.dumps(...,
    indent=2) writes it, a batch at a time: times in integer ns, null when not observed;
    `call` null when the request was in no fsync-family call."""
    head = json.dumps({"schema": SCHEMA, "count": len(rows), "requests_in_trace": rows.total,
                       "requests": []}, indent=2)
    if not len(rows):
        out.write(head + "\n")
        return
    out.write(head[:-len("[]\n}")] + "[\n")
    for i, batch in enumerate(_dicts(rows)):
        for r in batch:
            for k in ("queue_ns", "device_ns", "total_ns", "call_index"):
                if r[k] < 0:
                    r[k] = None
            r["call"] = r["call"] or None
        text = json.dumps(batch, indent=2, allow_nan=False)[2:-2]  # the list's items
        out.write((",\n" if i else "") + text.replace("\n", "\n  ").join(("  ", "")))
    out.write("\n  ]\n}\n")


def write_csv(out: IO[str], rows: Any) -> None:
    """A header, then one line per request; unknown figures are empty fields."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for batch in _dicts(rows):
        w.writerows(["" if (k.endswith(("_ns", "_index")) and k != "time_ns" and r[k] < 0)
                     else r[k] for k in CSV_COLUMNS] for r in batch)


def render_json(rows: Any) -> str:
    buf = io.StringIO()
    write_json(buf, rows)
    return buf.getvalue().rstrip("\n")


def render_csv(rows: Any) -> str:
    buf = io.StringIO()
    write_csv(buf, rows)
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
