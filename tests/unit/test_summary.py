"""`record`'s end-of-run summary (iowhy.summary): decided from the trace's size and its
trailer's record counts before anything is loaded; a huge trace gets a one-line count
from the trailer and a word that the analysis was skipped, within the analysis's memory
budget (200 B per request). Peak memory is measured in a fresh process (tracemalloc
for allocations, ru_maxrss for the whole process); nothing is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iowhy import summary
import synthtrace
from tracebuilder import Trace

REPO = Path(__file__).resolve().parents[2]
BUDGET = 200          # bytes of peak memory per request, the analysis's own target

CHILD = r"""
import json, resource, sys, tracemalloc
from iowhy import summary
import numpy, iowhy.analysis, iowhy.traceformat   # imports are not the summary's memory
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tracemalloc.start()
args = [sys.argv[1]] + ([int(sys.argv[2])] if len(sys.argv) > 2 else [])
text = summary.short_summary(*args)
peak = tracemalloc.get_traced_memory()[1]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"text": text, "peak": peak, "rss_growth": rss - rss0}))
"""


def summarize(path: str, *limit: int) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, path, *map(str, limit)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def bench_trace(path: Path, n: int) -> str:
    synthtrace.write_synth(str(path), n)
    return str(path)


N_BIG = 850_000     # with its fsync, journal and off-CPU records: over 1,000,000 records


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    return bench_trace(tmp_path_factory.mktemp("big") / "big.iowt", N_BIG)


def test_huge_trace_counts_from_the_trailer_only(big):
    p = summary.peek(big)
    assert p.records() is not None and p.records()["request"] == N_BIG
    assert p.record_count() > summary.SUMMARY_MAX_RECORDS
    r = summarize(big)
    lines = r["text"].splitlines()
    assert len(lines) == 2, r["text"]
    assert lines[0].startswith("iowhy: ") and f"{N_BIG:,} block requests" in lines[0]
    assert " s recorded (synthetic)" in lines[0]
    assert lines[1] == (f"iowhy: summary skipped for a trace this large "
                        f"({p.record_count():,} records, more than "
                        f"{summary.SUMMARY_MAX_RECORDS:,}): run `iowhy report {big}`")
    # nothing of the records was loaded: a few MiB at most, far below the budget
    assert r["peak"] < 4 << 20
    assert r["rss_growth"] < 16 << 20
    assert r["peak"] < BUDGET * N_BIG


def test_full_summary_below_the_limit_stays_in_the_budget(big):
    r = summarize(big, 2 * summary.SUMMARY_MAX_RECORDS)
    assert r["text"].splitlines()[0].startswith("WHERE THE TIME WENT"), r["text"]
    assert r["text"].endswith(f"(full report: iowhy report {big})")
    assert r["peak"] < BUDGET * N_BIG, r["peak"] / N_BIG


def write(path: Path, trailer: dict | None, n: int = 100) -> str:
    d = synthtrace.synth(n, seed=5)
    t = Trace(path, {"devices": [], "filesystems": []},
              {"start_ns": int(d["start_ns"]), "pid": 1000, "command": ["x"]})
    for name in ("task", "fsync", "journal", "offcpu", "request"):
        t.add(name, d[name])
    return t.close(trailer)


def test_limit_is_on_every_record_and_on_the_file_size(tmp_path):
    t = write(tmp_path / "t.iowt", {"end_ns": 2 * 10**9, "stop_reason": "signal"})
    n = summary.peek(t).record_count()
    assert summary.peek(t).start_ns == 10**9
    assert "WHERE THE TIME WENT" in summary.short_summary(t, n)
    small = summary.short_summary(t, n - 1)
    assert "summary skipped" in small and "1.0 s recorded (signal)" in small
    # without a trailer the file's size stands for the count: the most it could hold
    cut = write(tmp_path / "cut.iowt", None)
    p = summary.peek(cut)
    assert p.trailer is None
    most = (Path(cut).stat().st_size - summary._HDR) // summary._MIN_RECORD_BYTES
    assert p.record_count() == most
    text = summary.short_summary(cut, 10)
    assert text.splitlines()[0].startswith("iowhy: the trace has no readable trailer")
    assert "WHERE THE TIME WENT" in summary.short_summary(cut)


@pytest.mark.parametrize("records", [None, "many", {"request": "9"}, {"request": -1},
                                     {"request": True}, {"request": 1e30}, [1, 2]])
def test_hostile_trailer_counts_fall_back_to_the_size(tmp_path, records):
    t = write(tmp_path / "h.iowt", {"end_ns": "soon", "records": records,
                                    "counters": {"lost_x": "1", "lost_y": 3, "lost_z": -4},
                                    "stop_reason": "\x1b[2J"})
    p = summary.peek(t)
    assert p.records() is None
    assert p.record_count() == (Path(t).stat().st_size - summary._HDR) // summary._MIN_RECORD_BYTES
    assert p.lost_events() == 3
    text = summary.counters_summary(t, p, 10)
    assert "\x1b" not in text
    assert text.splitlines()[0] == f"iowhy: 3 events lost in the kernel (`iowhy info {t}` " \
                                   "lists them)"


def test_after_record_prints_it(big, capsys):
    from iowhy.cli import _after_record
    _after_record(big)
    err = capsys.readouterr().err
    assert "summary skipped for a trace this large" in err
