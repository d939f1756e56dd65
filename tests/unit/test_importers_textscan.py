"""iowhy.importers.textscan: splitting the ftrace text forms (tracefs trace and
trace_pipe, trace-cmd report, perf script, the syscall tracer) into header and event,
and the fields of the events read. That its work is linear in a hostile line is
test_importers_ftrace.py."""

from __future__ import annotations

import pytest

from iowhy.importers.textscan import (CHILD_PID_AFTER, MAX_DIGITS, PID_AFTER, Header,
                                      Scanner, number)

EVENT = "block_rq_issue: 8,0 WS 4096 () 1000 + 8 [fsync]"
REST = "8,0 WS 4096 () 1000 + 8 [fsync]"


def split(line: str) -> Header | None:
    return Scanner().split(line)


@pytest.mark.parametrize("line,comm,pid,cpu", [
    # tracefs trace / trace_pipe, with and without the tgid column
    (f"           fsync-1234    [002] d..1. 12345.678901: {EVENT}", "fsync", 1234, 2),
    (f"  kworker/u8:2-77      (     77) [001] ....  12345.678901: {EVENT}",
     "kworker/u8:2", 77, 1),
    (f"  kworker/u8:2-77      (-------) [001] ....  12345.678901: {EVENT}",
     "kworker/u8:2", 77, 1),
    # trace-cmd report: no flags
    (f"fsync-1234  [003] 12345.678901: {EVENT}", "fsync", 1234, 3),
    # a task name with blanks and dashes: the pid is the last dash's
    (f" my task-x-42 [000] .... 12345.678901: {EVENT}", "my task-x", 42, 0),
    # perf script: PID or PID/TID a token of its own, SYSTEM:EVENT
    (f"fsync  1234 [002] 12345.678901: block:{EVENT}", "fsync", 1234, 2),
    (f"fsync  1234/1240 [002] 12345.678901: block:{EVENT}", "fsync", 1240, 2),
])
def test_the_header_forms(line, comm, pid, cpu):
    h = split(line)
    assert h == Header(comm, pid, cpu, "12345", "678901", "block_rq_issue", REST)


def test_the_syscall_tracers_forms():
    h = split("  fsync-99 [000] .... 5.000001: sys_fsync(fd: 3)")
    assert (h.comm, h.pid, h.event, h.rest) == ("fsync", 99, "sys_enter_fsync", "fd: 3")
    h = split("  fsync-99 [000] .... 5.000002: sys_fsync -> 0xfffffffffffffffb")
    assert (h.event, h.rest) == ("sys_exit_fsync", "0xfffffffffffffffb")
    assert split("  fsync-99 [000] .... 5.000002: sys_fsync -> 0x0 junk") is None
    assert split("  fsync-99 [000] .... 5.000002: sys_fsync(fd: 3") is None


@pytest.mark.parametrize("line", [
    "", "# tracer: nop", "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
    "fsync-1234 [002] d..1. 12345.678901:",  # no event
    "fsync-1234 [002] d..1. 12345.678901:block_rq_issue: x",  # no blank before it
    "fsync-1234 [002] d..1. 12345.678901: no colon here",
    "12345.678901: block_rq_issue: x",  # no task before the time
    "fsync-1234 [002] d..1. [junk] 12345.678901: block_rq_issue: x",  # not a header column
    f"fsync-{'9' * (MAX_DIGITS + 1)} [002] 1.5: block_rq_issue: x",  # a pid too long
])
def test_what_is_no_event_line(line):
    assert split(line) is None


def test_the_header_is_looked_for_near_the_start_only():
    line = " " * 10 + "x" * 600 + f" fsync-1 [000] .... 1.5: {EVENT}"
    assert split(line) is None
    assert split("x" * 100 + f" fsync-1 [000] .... 1.5: {EVENT}").pid == 1


def test_number():
    assert number("42") == 42 and number("ff", 16) == 255 and number("0x1f", 16) == 31
    assert number(None) is None and number("") is None and number("4a") is None
    assert number("9" * MAX_DIGITS) == int("9" * MAX_DIGITS)
    assert number("9" * (MAX_DIGITS + 3)) is None


def test_sched_switch_with_names_holding_blanks():
    sc = Scanner()
    rest = ("prev_comm=my task prev_pid=5 prev_prio=120 prev_state=D ==> "
            "next_comm=swapper/0 next_pid=0 next_prio=120")
    assert sc.sched_switch(rest) == ("my task", 5, "D", "swapper/0", 0)
    assert sc.sched_switch("prev_comm=x prev_pid=5") is None
    assert sc.sched_switch(rest.replace("next_pid=0", "next_pid=x")) is None
    assert sc.work > 0


def test_name_then_number():
    sc = Scanner()
    rest = "comm=a b pid=12 prio=120 child_comm=c child_pid=13"
    name, pid, at = sc.name_then_number(rest, "comm=", PID_AFTER)
    assert (name, pid) == ("a b", 12) and rest[at:].startswith(" prio")
    assert sc.name_then_number(rest, "child_comm=", CHILD_PID_AFTER)[:2] == ("c", 13)
    assert sc.name_then_number(rest, "nope=", PID_AFTER) is None
    assert sc.name_then_number("comm=x pid=" + "1" * (MAX_DIGITS + 1), "comm=",
                               PID_AFTER) is None


def test_find_counts_what_it_passed_over():
    sc = Scanner()
    assert sc.find("abcdef", "cd") == 2 and sc.work == 5
    assert sc.find("abc", "z") == -1 and sc.work == 5 + 4
