"""Requests as the analysis loads them, from a few hand-written request rows
(tracebuilder.req): the input of the model's and views' own unit tests."""

from __future__ import annotations

from typing import Any

import tracebuilder as tb
from iowhy.model.requests import Requests, Window, load_requests, trace_window
from iowhy.traceformat import read_trace


def loaded(tmp_path: Any, rows: list[dict], **trace: Any) -> tuple[Requests, Window]:
    """(the requests of `rows`, the window) of a trace written by tb.write_trace (window
    [1000, 1100) ns unless `start`/`end` say otherwise; `meta_obj`: its META)."""
    tr = read_trace(tb.write_trace(tmp_path / "rq.iowt", requests=rows, **trace))
    win = trace_window(tr)
    return load_requests(tr, win), win
