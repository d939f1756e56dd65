"""A value in a cell of each output the analyzer writes itself (`iowhy query`'s table,
CSV and JSON), and the line of an aligned text table, which the reports' tables share
(reports/fmt.py re-exports them). Each takes a value and returns its text; none
computes a figure. A name in a text cell is then made printable (iowhy.escape)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from .names import utf8_text


def json_value(v: Any) -> Any:
    """A value as JSON holds it: names as utf8_text writes them, a NaN or an infinity
    as null, lists and dicts element by element."""
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {utf8_text(k): json_value(x) for k, x in v.items()}
    if v is None or isinstance(v, (int, bool)):
        return v
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    return utf8_text(v)


def list_text(v: Any) -> str:
    """A list (argv, devices) as a JSON array: its elements' boundaries stay visible."""
    return json.dumps(json_value(v), ensure_ascii=False, allow_nan=False)


def text_cell(v: Any) -> str:
    """A value in a text table: NULL, floats to 15 significant digits, lists as JSON."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.15g}"
    if isinstance(v, (list, tuple)):
        return list_text(v)
    return utf8_text(v)


# The control characters a CSV field holds as `\xNN`, as a byte that is not UTF-8 is
# written (docs/export.md, "Names are bytes"): one line per row, whatever a name holds.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def csv_cell(v: Any) -> str:
    """A value in CSV: empty for NULL, floats as repr (they read back to the same
    double), lists as JSON arrays, control characters escaped."""
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return list_text(v)
    return utf8_text(v).translate(_CONTROL)


def aligned(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool],
            indent: int = 0) -> str:
    """One line of a text table: each cell padded to its column's width (right[i]
    right-aligns column i), two spaces between columns, `indent` spaces before the
    first, no trailing blanks."""
    parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
    return (" " * indent + "  ".join(parts)).rstrip()
