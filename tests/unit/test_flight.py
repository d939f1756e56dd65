"""The flight recorder without the kernel: `attach --flight` options refused in one line
before anything starts, and a dump (TRAILER `flight`) read by every command, which says
first that it is one: its window, its trigger and the chunks it dropped."""

from __future__ import annotations

import json

import pytest

from iowhy import cli
from iowhy.errors import EXIT_USAGE
from iowhy.traceformat import read_trace
from tracebuilder import Trace, fsync, meta, req, task

FLIGHT = {"window_ns": 30_000_000_000, "after_ns": 1_000_000_000, "trigger": "fsync>200ms",
          "trigger_ns": 29_000_001_000, "dump": 2, "bound_bytes": 256 << 20,
          "dropped_chunks": 0, "dropped_bytes": 0, "aged_chunks": 12, "triggers_during": 0}


@pytest.mark.parametrize("argv,words", [
    (["--trigger", "fsync>200ms"], "need --flight SECONDS"),
    (["--after", "2"], "need --flight SECONDS"),
    (["--dump-on-exit"], "need --flight SECONDS"),
    (["--flight", "0.5"], "--flight 0.5 is not a number of seconds from 1"),
    (["--flight", "nan"], "--flight nan"),
    (["--flight", "10", "--after", "-1"], "--after -1.0"),
    (["--flight", "10", "--max-dumps", "0"], "--max-dumps 0"),
    (["--flight", "10", "--trigger", "fsync>"], "is not KIND>TIME"),
    (["--flight", "10", "--trigger", "write>1s"], "is not KIND>TIME"),
    (["--flight", "10", "--trigger", "fsync>0ms"], "is not KIND>TIME"),
    (["--flight", "10", "--trigger", "blocked>2h"], "is not KIND>TIME"),
])
def test_flight_options_are_checked_in_one_line(argv, words, tmp_path, capsys):
    assert cli.main(["attach", "-p", "1", "-o", str(tmp_path / "t.iowt"), *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("iowhy: ") and words in err and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("expr", ["fsync>200ms", "request>1s", "flush>100ms", "blocked>2s",
                                  "fsync>200", "request>1.5s", "flush>500us", "blocked>9ns"])
def test_the_issue_triggers_are_taken(expr):
    assert cli.TRIGGER_RE.fullmatch(expr)


def _dump(path, flight=FLIGHT, start=1_000_000_000, end=30_000_002_000) -> str:
    t = Trace(path, meta(), {"start_ns": start, "command": ["db"], "pid": 100,
                             "mode": "attach"})
    t.add("request", [req(start + 10_000, start + 50_000, seq=i) for i in range(3)])
    t.add("fsync", [fsync(100, start + 5_000, start + 60_000)])
    t.add("task", [task(100, start)])
    trailer = {"end_ns": end, "stop_reason": "flight-dump", "exit_status": None,
               "records": {"request": 3, "fsync": 1, "task": 1}}
    if flight is not None:
        trailer["flight"] = flight
    t.close(trailer)
    return str(path)


def test_a_dump_says_what_it_is_first(tmp_path, capsys):
    path = _dump(tmp_path / "d.iowt")
    tr = read_trace(path)
    assert not tr.damage.damaged, tr.damage.summary()
    line = tr.flight_line()
    assert line == ("flight recorder dump 2, 0 chunks of its window dropped: fsync>200ms "
                    "fired 28.000 s into the window, which holds up to 30 s before it and 1 s "
                    "after")
    assert tr.problems()[0] == line
    for argv in (["hist", path, "--metric", "device"], ["requests", path]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("NOTE: flight recorder dump 2, 0 chunks"), out[:200]
    assert cli.main(["report", path]) == 0
    assert "flight recorder dump 2" in capsys.readouterr().out
    assert cli.main(["info", "--json", path]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["flight"] == FLIGHT and d["stop_reason"] == "flight-dump"


def test_a_dump_written_at_stop_says_so(tmp_path):
    """--dump-on-exit: the window up to the stop, nothing after it."""
    tr = read_trace(_dump(tmp_path / "d.iowt", {**FLIGHT, "trigger": "stop (SIGINT)",
                                                "trigger_ns": 30_000_002_000}))
    assert tr.flight_line() == ("flight recorder dump 2, 0 chunks of its window dropped: "
                                "written at stop (SIGINT), it holds up to 30 s before it")


def test_dropped_chunks_are_on_the_first_line(tmp_path, capsys):
    path = _dump(tmp_path / "d.iowt", {**FLIGHT, "dropped_chunks": 7, "dropped_bytes": 5 << 20,
                                       "bound_bytes": 4 << 20})
    assert cli.main(["requests", path]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "7 chunks of its window dropped" in first, first
    assert "to stay within 4 MiB" in read_trace(path).flight_line()


def test_a_trace_that_is_no_dump_reads_as_before(tmp_path, capsys):
    path = _dump(tmp_path / "d.iowt", flight=None)
    tr = read_trace(path)
    assert tr.flight_line() is None and not tr.damage.damaged and not tr.problems()
    assert cli.main(["info", "--json", path]) == 0
    assert "flight" not in json.loads(capsys.readouterr().out)


def test_a_bad_flight_object_is_dropped_and_counted(tmp_path):
    tr = read_trace(_dump(tmp_path / "d.iowt", {**FLIGHT, "trigger_ns": "soon"}))
    assert tr.flight_line() is None
    assert any("flight" in p for p in tr.problems()), tr.problems()
