"""Progress on a terminal: shown on a tty after the delay, with the phase running and
the records read per second, and erased; nothing at all on a pipe or in captured output,
and never on stdout. Every reading command (report, hist, compare, requests, info,
export, query, import) is run past the threshold with a fake terminal for stderr, and
`report --json` once with a real pty."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import subprocess
import sys
import threading
import time

import pytest

import tracebuilder as tb
from iowhy import progress as progress_mod
from iowhy import traceformat
from iowhy.cli import main
from iowhy.importers import ftrace as ftrace_mod
from iowhy.progress import progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_names_the_step_and_is_erased():
    s = Tty()
    with progress("analyzing t.iowt", stream=s, after_s=0.05) as step:
        step("latency")
        time.sleep(0.3)
    out = s.getvalue()
    assert "\riowhy: analyzing t.iowt (latency) ... 0 s" in out
    last = out.rsplit("\r", 2)
    assert last[-1] == "" and last[-2].strip() == ""  # the line is blanked at the end


def test_no_progress_before_the_delay_or_off_a_terminal():
    s = Tty()
    with progress("quick", stream=s, after_s=5):
        pass
    assert s.getvalue() == ""
    p = io.StringIO()  # a pipe or a file
    with progress("slow", stream=p, after_s=0.0):
        time.sleep(0.2)
    assert p.getvalue() == ""


def test_a_real_pty_gets_progress_and_a_pipe_does_not(tmp_path):
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty:
            with progress("x", stream=tty, after_s=0.05):
                time.sleep(0.2)
        assert b"iowhy: x ... " in os.read(master, 1000)
    finally:
        os.close(master)
        os.close(slave)


def test_commands_print_nothing_on_captured_stderr(tmp_path, capsys):
    t = tb.busy_trace(tmp_path, n=500)
    for argv in (["report", t], ["hist", t], ["requests", t], ["compare", t, t]):
        assert main(argv) == 0
        assert "iowhy:" not in capsys.readouterr().err


# -- every reading command, past the threshold ---------------------------------------------

SLOW_S = 0.4  # each command is held this long after reading its trace: past the threshold
FTRACE = ("              dd-100     [001] d..1.     1.000000100: block_rq_issue: 8,0 W 4096 () "
          "1000 + 8 be,0,4 [dd]\n"
          "          <idle>-0       [001] d..1.     1.000200000: block_rq_complete: 8,0 W () "
          "1000 + 8 be,0,4 [0]\n")


@pytest.fixture
def slow(monkeypatch):
    """Progress after 0.05 s, rewritten every 0.05 s, and every trace read (or import
    written) SLOW_S later."""
    monkeypatch.setattr(progress_mod, "PROGRESS_AFTER_S", 0.05)
    monkeypatch.setattr(progress_mod, "TICK_S", 0.05)
    read = traceformat.read_trace

    def slow_read(*a, **kw):
        tr = read(*a, **kw)
        time.sleep(SLOW_S)
        return tr
    monkeypatch.setattr(traceformat, "read_trace", slow_read)
    write = ftrace_mod.write_imported

    def slow_write(*a, **kw):
        time.sleep(SLOW_S)
        return write(*a, **kw)
    monkeypatch.setattr(ftrace_mod, "write_imported", slow_write)


def commands(tmp_path):
    """(name, argv, stdout is JSON) of every reading command, on a small busy trace."""
    t = tb.busy_trace(tmp_path, n=500)
    ft = tmp_path / "ft.txt"
    ft.write_text(FTRACE)
    out = [("report", ["report", "--json", t], True), ("hist", ["hist", "--json", t], True),
           ("compare", ["compare", "--json", t, t], True),
           ("requests", ["requests", "--csv", t], False), ("info", ["info", "--json", t], True),
           ("import", ["import", "ftrace", str(ft), "-o", str(tmp_path / "imp.iowt")], False)]
    with contextlib.suppress(ImportError):
        import pyarrow  # noqa: F401
        out.append(("export", ["export", "--format", "parquet", "-o",
                               str(tmp_path / "pq"), t], False))
        import duckdb  # noqa: F401
        out.append(("query", ["query", "--json", "SELECT count(*) AS n FROM requests", t],
                    True))
    return out


def run_with(argv, stderr) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(stderr):
        rc = main(argv)
    return rc, out.getvalue()


def test_every_reading_command_shows_progress_on_a_terminal_only(tmp_path, slow):
    for name, argv, is_json in commands(tmp_path):
        err = Tty()
        rc, out = run_with(argv, err)
        assert rc == 0, name
        shown = err.getvalue()
        assert "\riowhy: " in shown, name
        assert "records/s" in shown or name == "import", (name, shown)
        if name == "query":
            assert "(reading busy.iowt) ... 0 s, " in shown, shown
        elif name == "import":
            assert "(writing) ... 0 s" in shown, shown
        else:
            assert "(read trace) ... 0 s, " in shown, (name, shown)
        assert "\r" not in out and "iowhy: " not in out, name  # stdout untouched
        if is_json:
            json.loads(out)
        # the same command with stderr a pipe or a file: not a byte of progress
        p = io.StringIO()
        rc, out2 = run_with(argv, p)
        assert rc == 0 and "\r" not in p.getvalue() and "iowhy: " not in p.getvalue(), name
        if name not in ("import", "export"):
            assert out2 == out, name


def test_nothing_before_the_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_mod, "PROGRESS_AFTER_S", 30.0)
    t = tb.busy_trace(tmp_path, n=500)
    err = Tty()
    assert run_with(["report", "--json", t], err)[0] == 0
    assert err.getvalue() == ""


def test_the_line_keeps_the_rate_and_fits():
    st = progress_mod.Step()
    st("workload view")
    st.add(16_353_708)
    s = progress_mod.line("analyzing /var/cache/iowhy/bench-analyze/busy-60s.iowt", st, 1234.4)
    assert len(s) <= 79
    assert s.startswith("iowhy: analyzing ") and "busy-60s.iowt (workload view)" in s
    assert s.endswith(" ... 1234 s, 13.2 k records/s")
    wide = progress_mod.line("analyzing t.iowt", st, 12.0, width=200)
    assert wide == ("iowhy: analyzing t.iowt (workload view) ... 12 s, 16.4 M records, "
                    "1.4 M records/s")
    assert progress_mod.line("analyzing t.iowt", progress_mod.Step(), 3.0) == \
        "iowhy: analyzing t.iowt ... 3 s"
    odd = progress_mod.Step()
    odd("x\x1b[2Jy")
    assert "\x1b" not in progress_mod.line("a\x1bb", odd, 1.0)


def test_the_phase_shown_is_the_longest_running_of_live_threads():
    st = progress_mod.Step()
    st("load records")
    st("workload view")  # the calling thread's phase now
    started = threading.Event()
    leave = threading.Event()

    def other() -> None:
        st("device view")  # starts later, on another thread
        started.set()
        leave.wait(5)
    th = threading.Thread(target=other)
    th.start()
    started.wait(5)
    assert st.name == "workload view"
    leave.set()
    th.join()
    st("formatting")
    assert st.name == "formatting"  # the other thread is gone


def test_a_real_pty_gets_the_report_progress_and_stdout_only_json(tmp_path):
    t = tb.busy_trace(tmp_path, n=500)
    child = (
        "import sys, time\n"
        "from iowhy import progress, traceformat\n"
        "progress.PROGRESS_AFTER_S = 0.05\n"
        "read = traceformat.read_trace\n"
        "def slow(*a, **kw):\n"
        "    tr = read(*a, **kw)\n"
        "    time.sleep(0.4)\n"
        "    return tr\n"
        "traceformat.read_trace = slow\n"
        "from iowhy.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    master, slave = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-c", child, "report", "--json", t],
                           stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        slave = -1
        got = b""
        with contextlib.suppress(OSError):
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                got += chunk
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert p.returncode == 0
    assert b"\riowhy: analyzing " in got and b"records/s" in got
    assert b"iowhy:" not in p.stdout and b"\r" not in p.stdout
    json.loads(p.stdout)
