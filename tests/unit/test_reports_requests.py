"""reports/requests.py: the `iowhy requests` listing as biosnoop's table, CSV and JSON,
from the rows of views/requests.py: unknown times empty or null, comm cut to fit."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from iowhy.reports import requests as R
from iowhy.views.requests import RequestRows


def _rows(n: int = 2, comm: str = "tar") -> RequestRows:
    A = np.array
    rows = RequestRows(
        time_ns=A([1_500_000, 2_000_000_000]), comm=[comm, "kworker/0:1"], pid=A([100, 0]),
        disk=["sdz", "sdz"], op=["W", "FWS"], sector=A([2048, 0]), nbytes=A([4096, 0]),
        queue_ns=A([1_500, -1]), device_ns=A([250_000, 1_000]), total_ns=A([251_500, -1]),
        cls=["data", "flush"], call=["fsync", ""], call_index=A([0, -1]), total=5)
    keep = slice(0, n)
    return RequestRows(**{k: (v[keep] if k != "total" else v) for k, v in vars(rows).items()})


def test_text_table():
    lines = R.render_text(_rows()).splitlines()
    assert lines[0].split() == ["time", "(s)", "comm", "pid", "disk", "op", "sector", "bytes",
                                "queue", "(us)", "device", "(us)", "class", "call"]
    assert lines[1].split() == ["0.001500", "tar", "100", "sdz", "W", "2048", "4,096",
                                "1.5", "250.0", "data", "fsync"]
    # a time not observed is "-", as is no call
    assert lines[2].split() == ["2.000000", "kworker/0:1", "0", "sdz", "FWS", "0", "0", "-",
                                "1.0", "flush", "-"]
    assert R.render_text(_rows(), unit="ns").splitlines()[1].split()[7:9] == ["1,500", "250,000"]


def test_a_long_comm_is_cut_to_the_width():
    rows = _rows(comm="x" * 80)
    text = R.render_text(rows, width=100)
    assert max(len(x) for x in text.splitlines()) <= 100
    assert "x" * 7 + "~" in text
    assert len(R.render_text(rows, width=1000).splitlines()[1]) > 100


def test_no_row():
    assert R.render_text(_rows(0)).splitlines()[1] == "no request matches"
    doc = json.loads(R.render_json(_rows(0)))
    assert doc == {"schema": R.SCHEMA, "count": 0, "requests_in_trace": 5, "requests": []}
    assert R.render_csv(_rows(0)).splitlines() == [",".join(R.CSV_COLUMNS)]


def test_json_and_csv_carry_integer_ns_and_nothing_for_the_unknown(monkeypatch):
    monkeypatch.setattr(R, "BATCH", 1)  # one row a batch: the batches join up
    doc = json.loads(R.render_json(_rows()))
    assert (doc["count"], doc["requests_in_trace"]) == (2, 5)
    a, b = doc["requests"]
    assert a == {"time_ns": 1_500_000, "comm": "tar", "pid": 100, "disk": "sdz", "op": "W",
                 "sector": 2048, "bytes": 4096, "queue_ns": 1500, "device_ns": 250_000,
                 "total_ns": 251_500, "class": "data", "call": "fsync", "call_index": 0}
    assert (b["queue_ns"], b["total_ns"], b["call"], b["call_index"]) == (None, None, None, None)
    rows = list(csv.DictReader(io.StringIO(R.render_csv(_rows()))))
    assert rows[0]["device_ns"] == "250000" and rows[1]["queue_ns"] == ""
    assert rows[1]["call_index"] == "" and rows[1]["time_ns"] == "2000000000"
