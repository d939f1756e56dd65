"""reports/terminal.py: the terminal report from an analysis result: what was lost
first, then where the time went (one bar per category, scaled to the largest), then
the rest; every line at most 100 columns; and its smaller pieces."""

from __future__ import annotations

import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.reports import terminal as T
from iowhy.reports.fmt import WIDTH


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tb.write_trace(
        tmp_path_factory.mktemp("t") / "t.iowt",
        requests=[tb.req(1010, 1040, seq=1), tb.req(1045, 1050, op=abi.OP_FLUSH, seq=2)],
        fsyncs=[tb.fsync(100, 1005, 1055)], offcpu=[tb.off(100, 1008, 1052, syscall=74)])
    return tb.run(path)


def _lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(x) <= WIDTH for x in lines)
    return lines


def test_the_report_answer_first(result):
    lines = _lines(T.render_report(result))
    assert lines[0] == "iowhy report  star -x"
    heads = [x.split()[0] for x in lines if x[:1].isupper()]
    assert heads == ["WHERE", "RECORDED", "REQUESTS", "FSYNC", "DEVICES", "PLACEMENT",
                     "FINDINGS"]
    where = lines.index(next(x for x in lines if x.startswith("WHERE THE TIME WENT")))
    assert lines[where].endswith("elapsed 100 ns")
    bars = [x for x in lines[where + 1:where + 12] if x.startswith("  ") and "%" in x]
    att = result["attribution_ns"]
    assert len(bars) == len(att)
    shares = {x.split()[0]: float(x.split("%")[0].split()[-1]) for x in bars}
    assert shares == {k: pytest.approx(100 * v / 100, abs=0.05) for k, v in att.items()}


def test_bars_scale_to_the_largest():
    lines = T._bars({"cpu": 900, "log": 1, "data": 0}, 1000)
    by = {x.split()[0]: x for x in lines}
    assert by["cpu"].endswith("#" * T.BAR) and by["log"].endswith(".")
    assert by["data"].split() == ["data", "0", "0.0%"]


def test_damage_comes_first_once(result):
    r = {**result, "damage": {"damaged": True, "summary": "trace cut short"},
         "problems": ["trace cut short", "3 requests lost"]}
    lines = _lines(T.render_report(r))
    assert lines[:3] == ["WARNING: trace cut short", "iowhy report  star -x",
                         "! 3 requests lost"]
    assert T.damage_first(None) == [] and T.damage_first({"damaged": False}) == []


def test_where_without_attribution_and_the_short_form(result):
    r = {**result, "attribution_ns": None, "attribution_unavailable": "no off-CPU data here"}
    lines = T._where(r)
    assert lines[0].startswith("WHERE THE TIME WENT: not available")
    assert lines[1] == "  no off-CPU data here"
    short = T.render_where({**result, "problems": ["p1", "p2", "p3", "p4"],
                            "findings": [{"text": "the disk flushed"}]}).splitlines()
    assert short[:3] == ["p1", "p2", "p3"] and short[3].startswith("WHERE THE TIME WENT")
    assert short[-1] == "  -> the disk flushed"


def test_small_pieces():
    t = {"tid": 812, "comm": "python3", "total_ns": 2_000_000_000, "on_cpu_ns": 40_000_000,
         "runqueue_ns": 1_000_000, "blocked_in_ns": {"futex": 1_940_000_000},
         "waiting_for": [{"tid": 813, "comm": "w", "ns": 1_000_000_000}],
         "explained_ns": {"log": 1_480_000_000, "data": 140_000_000}}
    assert T.thread_line(t) == ("thread 812 python3 (2 s): blocked in futex 97%, on CPU 2%; "
                                "waiting for thread 813 w; explained: log 74%, data 7%")
    e = {"upper": "loop1", "lower": "sdz", "requests": 3, "read_bytes": 0,
         "write_bytes": 3 << 20, "flushes": 2}
    assert T.carried_text(e) == "3 requests (3.0 MiB) and 2 flushes"
    assert T.carried_text({**e, "requests": 0, "flushes": 1}) == "1 flush"
    assert T.lower_devices({"stack_carried": [e, {**e, "upper": "loop2"}]}) == \
        {"sdz": ["loop1", "loop2"]}
    r = {"flushes": {"empty_preflush": 2}, "requests": {"flush": {"count": 0}}}
    assert T.preflush_text(r).startswith("flush counts the FF flushes issued: none; 2 empty")
    assert T._ms(None) == "-" and T._ms(1_500_000) == "1.500"


def test_intervals_rows_sum_to_their_interval(result):
    iv = [{"start_ns": 0, "end_ns": 50, "attribution_ns": {"cpu": 20, "log": 30}},
          {"start_ns": 50, "end_ns": 100, "attribution_ns": {"cpu": 50}}]
    lines = _lines(T.render_intervals({**result, "intervals": iv}, "ns"))
    i = lines.index("ATTRIBUTION PER INTERVAL (ns)")
    # the categories in the report's order, those with time only
    assert lines[i + 1].split() == ["from", "(s)", "to", "(s)", "log", "cpu"]
    assert lines[i + 2].split() == ["0.000", "0.000", "30", "20"]
    assert lines[i + 3].split() == ["0.000", "0.000", "0", "50"]
