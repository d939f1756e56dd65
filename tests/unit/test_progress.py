"""Progress on a terminal: shown on a tty after the delay, with the step running, and
erased; nothing at all on a pipe or in captured output."""

from __future__ import annotations

import io
import os
import pty
import time

import tracebuilder as tb
from iowhy.cli import main
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
