"""Waits still open when the recording stopped (offcpu flag OPEN_END, format 10), and
the caveat on recordings of older formats, which have none (views/causal.py
cpu_to_stop). Window [1000, 1100) unless said otherwise."""

from __future__ import annotations

from iowhy import abi
from tracebuilder import att, assert_sums, off, req, run, write_trace

H = abi.WCTX_HARDIRQ
REC = {"attach_mode": "tp_btf"}  # made by the recorder: it names every waker it saw
FUTEX, NANOSLEEP, FSYNC = 202, 35, 74  # x86-64 numbers
OPEN = abi.OFF_OPEN_END


def test_io_wait_open_at_the_stop_is_what_the_devices_did(tmp_path):
    # The thread runs [1000, 1050), then waits in fsync, in iowait, until the stop: a
    # flush is in flight over [1060, 1100), nothing before. What will end the wait is not
    # in the trace; what the devices did over it is: 10 ns with nothing in flight stay
    # the open wait's, 40 ns the flush's.
    reqs = [req(1060, 1100, op=abi.OP_FLUSH, seq=1)]
    offs = [off(100, 1050, 1100, syscall=FSYNC, flags=OPEN | abi.OFF_IOWAIT, waking_ns=0)]
    r = run(write_trace(tmp_path / "t.iowt", requests=reqs, offcpu=offs, version=10,
                        recorder=REC))
    assert_sums(r)
    assert att(r) == {"cpu": 50, "barrier": 40, "wait-other": 10}
    assert r["wait_other_by_waker_ns"] == {"(blocked at the stop)": 10}
    assert r["unseen_wakers"]["count"] == 0
    assert "cpu_to_stop" not in r


def test_a_wait_in_fsync_open_at_the_stop_is_what_the_devices_did(tmp_path):
    # Not in iowait (ext4's fsync waits for the journal thread's commit), but in fsync:
    # the same as an I/O wait. In futex instead: not seen.
    reqs = [req(1060, 1100, op=abi.OP_FLUSH, seq=1)]
    for syscall, want in ((FSYNC, {"cpu": 50, "barrier": 40, "wait-other": 10}),
                          (FUTEX, {"cpu": 50, "wait-other": 50})):
        offs = [off(100, 1050, 1100, syscall=syscall, flags=OPEN, waking_ns=0)]
        r = run(write_trace(tmp_path / f"t{syscall}.iowt", requests=reqs, offcpu=offs,
                            version=10, recorder=REC))
        assert att(r) == want, syscall


def test_other_waits_open_at_the_stop_are_sleep_or_not_seen(tmp_path):
    # 100 sleeps in nanosleep from 1040 to the stop; 101 waits on a futex (no iowait)
    # from 1070 to the stop, woken by nothing in the window: not seen, never cpu.
    offs = [off(100, 1040, 1100, syscall=NANOSLEEP, flags=OPEN, waking_ns=0),
            off(101, 1070, 1100, syscall=FUTEX, flags=OPEN, waking_ns=0)]
    tasks = [{"tid": 100, "tgid": 100, "ts_ns": 1000, "event_u16": abi.TASK_ROOT},
             {"tid": 101, "tgid": 100, "ts_ns": 1000, "event_u16": abi.TASK_ROOT}]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, tasks=tasks, version=10,
                        recorder=REC))
    assert att(r) == {"cpu": 40, "sleep": 60}
    tt = r["thread_time"]["attribution_ns"]
    assert {k: v for k, v in tt.items() if v} == {"cpu": 110, "sleep": 60, "wait-other": 30}
    assert r["unseen_wakers"] == {"count": 1, "blocked_ns": 30}  # a sleep is no unseen waker


def test_woken_at_the_stop_waits_for_a_cpu(tmp_path):
    # Woken at 1090 by another task, not back on a CPU by the stop: runnable 10 ns.
    offs = [off(100, 1050, 1100, 1090, syscall=FUTEX, flags=OPEN, waker=7, ctx=abi.WCTX_TASK,
                comm="other")]
    r = run(write_trace(tmp_path / "t.iowt", offcpu=offs, version=10, recorder=REC))
    assert att(r) == {"cpu": 50, "external": 40, "runqueue": 10}


LONG = 100_000_000  # views/causal.py CPU_TO_STOP_NS


def _tail_trace(tmp_path, version, **recorder):
    # One thread: on CPU, asleep [+1 s, +2 s) woken by its timer, then on CPU for 3 s to
    # the stop (or asleep, unrecorded: a format-9 recorder wrote no interval for it).
    s = 1000
    offs = [off(100, s + 10 * LONG, s + 20 * LONG, waker=0, ctx=H, syscall=NANOSLEEP)]
    return run(write_trace(tmp_path / f"t{version}.iowt", start=s, end=s + 50 * LONG,
                           offcpu=offs, version=version,
                           recorder={"attach_mode": "tp_btf", **recorder}))


def test_older_recording_names_its_cpu_up_to_the_stop(tmp_path):
    r = _tail_trace(tmp_path, 9)
    assert r["cpu_to_stop"] == {"threads": 1, "ns": 30 * LONG}
    assert "cpu_to_stop" not in _tail_trace(tmp_path, 10)
    # an import closes its open intervals itself (importers/ftrace.py)
    assert "cpu_to_stop" not in _tail_trace(tmp_path, 9, imported="ftrace")


def test_cpu_to_stop_note_in_the_reports(tmp_path):
    from iowhy.reports.html import render_html
    from iowhy.reports.terminal import cpu_to_stop_note, render_report
    r = _tail_trace(tmp_path, 9)
    note = cpu_to_stop_note(r)
    assert note and "1 thread, 3 s" in note and "format 10" in note
    assert note in " ".join(render_report(r).split())
    assert "format 10" in render_html(r)
