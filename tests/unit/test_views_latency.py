"""The latency view's blocked, packed figures against its one definition of the
per-request times (latency_values), around the block edge and past the packed range."""

from __future__ import annotations

import pytest

import synthtrace
import tracebuilder as tb
from iowhy.kernels import sorted_percentiles
from iowhy.model.classify import classify
from iowhy.model.requests import load_requests, trace_window
from iowhy.names import CLASS_NAMES
from iowhy.traceformat import read_trace
from iowhy.views.latency import LATENCY_BLOCK, latency_figures, values_by_class


def _trace(path, n: int, slow: bool):
    d = synthtrace.synth(n, seed=n)
    r = d["request"]
    if slow:  # a few device times beyond 2^28 ns: the figures leave the packed keys
        r["done_ns"][::97] += 1 << 29
        r["data_done_ns"][::97] += 1 << 29
    t = tb.Trace(path, tb.meta(), {"start_ns": int(d["start_ns"]), "command": ["x"],
                                   "pid": 1000})
    return t.add("request", r).close({"end_ns": int(r["done_ns"].max()) + 1,
                                      "stop_reason": "synthetic"})


@pytest.mark.parametrize("n", (LATENCY_BLOCK - 1, LATENCY_BLOCK + 1))
@pytest.mark.parametrize("slow", (False, True))
def test_latency_figures_match_the_definition(tmp_path, n, slow):
    tr = read_trace(_trace(tmp_path / "t.iowt", n, slow))
    win = trace_window(tr)
    rq = load_requests(tr, win)
    cls = classify(rq, tr.meta)
    figs = latency_figures(rq, cls)
    vals = values_by_class(rq, cls)
    for k, name in enumerate(CLASS_NAMES):
        for fig in ("device", "queue", "total"):
            v = vals[fig][name]
            assert figs[k][f"{fig}_ns"] == sorted_percentiles(v, (50, 90, 99)), (name, fig)
            assert (v >= 0).all()
        assert figs[k]["device_total_ns"] == int(vals["device"][name].sum())
