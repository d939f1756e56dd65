"""`iowhy import ftrace` of text written by a test-only writer from a synthetic run, in
the three dialects (tracefs trace, trace-cmd report, perf script): the analysis of the
import equals the analysis of the original run."""

from __future__ import annotations

import pytest

from iowhy import abi
from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace
from synth_runs import JBD2_TID, synth_run
from tracebuilder import DEV

DIALECTS = ("tracefs", "trace-cmd", "perf")


def rwbs(op: int, iflags: int) -> str:
    s = "F" if iflags & abi.F_PREFLUSH else ""
    s += {abi.OP_READ: "R", abi.OP_WRITE: "W", abi.OP_FLUSH: "F", abi.OP_DISCARD: "D"}[op]
    for bit, ch in ((abi.F_FUA, "F"), (abi.F_RAHEAD, "A"), (abi.F_SYNC, "S"),
                    (abi.F_META, "M")):
        if iflags & bit:
            s += ch
    return s


def line(dialect: str, t: int, comm: str, pid: int, event: str, rest: str, cpu: int = 1,
         digits: int = 9) -> str:
    sec, ns = divmod(t, 1_000_000_000)
    frac = f"{ns:09d}"[:digits]
    sub = {"block": "block", "jbd2": "jbd2", "sched": "sched", "sys_": "syscalls"}
    if dialect == "tracefs":
        if event == "":  # the syscall tracer's own form: sys_fsync(fd: 3)
            return f"{comm:>16}-{pid:<7} [{cpu:03d}] ..... {sec:5d}.{frac}: {rest}"
        return f"{comm:>16}-{pid:<7} [{cpu:03d}] d..1. {sec:5d}.{frac}: {event}: {rest}"
    if dialect == "trace-cmd":
        return f"{comm:>16}-{pid:<7} [{cpu:03d}] {sec:5d}.{frac}: {event}:   {rest}"
    system = next(v for k, v in sub.items() if event.startswith(k))
    return f"{comm:>16} {pid:>6} [{cpu:03d}] {sec:5d}.{frac}: {system}:{event}: {rest}"


NRS = {"fsync": 74, "fdatasync": 75, "read": 0}


def syscall(add, style, t, pid, name, enter, value):
    if style == "event":
        add(t, "worker", pid, f"sys_{'enter' if enter else 'exit'}_{name}",
            f"fd: 0x{value:08x}" if enter else f"0x{value:x}")
    elif style == "raw":
        add(t, "worker", pid, f"sys_{'enter' if enter else 'exit'}",
            f"NR {NRS[name]} ({value:x}, 0, 0, 0, 0, 0)" if enter else f"NR {NRS[name]} = {value}")
    else:
        add(t, "worker", pid, "",
            f"sys_{name}(fd: {value})" if enter else f"sys_{name} -> 0x{value:x}")


def capture_text(s, dialect: str, digits: int = 9, style: str = "event") -> str:
    """The ftrace events the synthetic run stands for, in time order."""
    ev: list[tuple[int, int, str, int, str, str]] = []
    dev = f"{DEV[0]},{DEV[1]}"

    def add(t, comm, pid, event, rest):
        ev.append((t, len(ev), comm, pid, event, rest))
    add(s.start_ns, "worker", 100, "sched_process_exec",
        "filename=/usr/bin/dbbench pid=100 old_pid=100")
    for q in s.requests:
        c = q["comm"].decode() or "kworker/0:1"
        pid = q["tid"] or 7
        rw = rwbs(q["op"], q["iflags"])
        sec, nr = q["start_sector"], q["len_bytes"] // 512
        if q["op"] != abi.OP_FLUSH:
            add(q["submit_ns"], c, pid, "block_bio_queue", f"{dev} {rw} {sec} + {nr} [{c}]")
            add(q["submit_ns"], c, pid, "block_getrq", f"{dev} {rw} {sec} + {nr} [{c}]")
            add(q["insert_ns"], c, pid, "block_rq_insert",
                f"{dev} {rw} {q['len_bytes']} () {sec} + {nr} be,0,4 [{c}]")
        add(q["issue_ns"], c, pid, "block_rq_issue",
            f"{dev} {rw} {q['len_bytes']} () {sec} + {nr} be,0,4 [{c}]")
        add(q["done_ns"], "<idle>", 0, "block_rq_complete",
            f"{dev} {rw} () {sec} + {nr} be,0,4 [0]")
    for f in s.fsyncs:
        name = abi.CALL_NAMES[f["call_u16"]]
        syscall(add, style, f["enter_ns"], 100, name, True, f["fd"])
        syscall(add, style, f["exit_ns"], 100, name, False, 0)
    for o in s.offcpu:
        add(o["start_ns"], "worker", 100, "sched_switch",
            "prev_comm=worker prev_pid=100 prev_prio=120 prev_state=D ==> next_comm=swapper/1 "
            "next_pid=0 next_prio=120")
        waker = o.get("waker_comm", b"kworker/1:1").decode()
        add(o["waking_ns"], waker, o.get("waker_tid", 9), "sched_wakeup",
            "comm=worker pid=100 prio=120 target_cpu=001")
        add(o["end_ns"], "<idle>", 0, "sched_switch",
            "prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=worker "
            "next_pid=100 next_prio=120")
        if o["syscall_nr"] == 0:  # the read the thread sleeps in
            syscall(add, style, o["start_ns"] - 100, 100, "read", True, 4)
            syscall(add, style, o["end_ns"] + 100, 100, "read", False, 4096)
    for j in s.journal:
        name = {abi.J_JBD2_START: "jbd2_start_commit", abi.J_JBD2_END: "jbd2_end_commit"}
        add(j["ts_ns"], "jbd2/sdz1-8", JBD2_TID, name[j["event_u16"]],
            f"dev 8,1 transaction {j['seq']} sync 1" +
            (" head 1" if j["event_u16"] == abi.J_JBD2_END else ""))
    for t in s.tasks:
        if t["event_u16"] == abi.TASK_EXIT:
            add(t["ts_ns"], "worker", 100, "sched_process_exit", "comm=worker pid=100 prio=120")
    add(s.end_ns, "sh", 1, "sched_process_exit", "comm=sh pid=1 prio=120")
    ev.sort()
    head = ["# tracer: nop", "#", "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION"]
    if dialect == "trace-cmd":
        head = ["cpus=2"]
    if dialect == "perf":
        head = []
    return "\n".join(head + [line(dialect, t, c, p, e, r, digits=digits)
                             for t, _, c, p, e, r in ev]) + "\n"


def merged(att):
    a = dict(att)
    a["metadata"] += a.pop("log")
    return a


@pytest.mark.parametrize("dialect,style", [(d, "event") for d in DIALECTS] +
                         [("tracefs", "raw"), ("tracefs", "tracer")])
def test_ftrace_import_analyses_like_the_original(tmp_path, dialect, style):
    # No helper records: the importers have no source for them.
    s = synth_run(tmp_path / "orig.iowt", seed=21, helpers=False)
    src = tmp_path / f"cap.{dialect}.txt"
    src.write_text(capture_text(s, dialect, style=style))
    out = tmp_path / "i.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out), "--pid", "100"]) == 0
    tr = read_trace(str(out))
    assert tr.meta["import"]["unmatched"] == {}
    assert tr.count("request") == len(s.requests)
    assert tr.count("fsync") == len(s.fsyncs)
    assert tr.count("offcpu") == len(s.offcpu)
    assert tr.count("journal") == len(s.journal)
    a, b = analyze(read_trace(s.path)), analyze(tr)
    assert b["elapsed_ns"] == a["elapsed_ns"]
    # Without the filesystem layout the journal writes are metadata: log time moves there.
    assert merged(b["attribution_ns"]) == merged(a["attribution_ns"])
    ra, rb = a["requests"], b["requests"]
    assert rb["flush"]["count"] == ra["flush"]["count"] == 40
    # (flush requests of the flush machinery show no insert in ftrace: device time only)
    assert rb["flush"]["device_ns"] == ra["flush"]["device_ns"]
    for cls in ("data", "read"):
        assert rb[cls]["count"] == ra[cls]["count"]
        for k in ("device_ns", "queue_ns", "total_ns"):
            assert rb[cls][k] == ra[cls][k], (cls, k)
    # The calls, their latencies and their data split; ftrace names no commit a call
    # waited for, so commit time is "other" there (and the trace says so).
    for call, fa in a["fsync"]["by_call"].items():
        fb = b["fsync"]["by_call"][call]
        assert (fb["count"], fb["latency_ns"], fb["total_ns"]) == \
            (fa["count"], fa["latency_ns"], fa["total_ns"])
        assert fb["split_ns"]["data"] == fa["split_ns"]["data"]
    assert b["wait_other_by_syscall_ns"] == a["wait_other_by_syscall_ns"]
    probs = b["problems"]
    assert probs[0].startswith("imported from ftrace: ")
    assert "no filesystem layout" in probs[0] and "no off-CPU" not in probs[0]
    assert "not linked to the journal commit" in probs[0]


def test_ftrace_limits_are_said(tmp_path):
    s = synth_run(tmp_path / "orig.iowt", seed=22, n_fsync=5, n_reads=2, helpers=False)
    text = "\n".join(x for x in capture_text(s, "tracefs", digits=6).splitlines()
                     if "block_" in x or x.startswith("#"))
    src = tmp_path / "trace"
    src.write_text(text + "\nthis line is not ftrace\n")
    out = tmp_path / "i.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out)]) == 0
    tr = read_trace(str(out))
    first = tr.problems()[0]
    for said in ("no workload threads given", "no fsync-family calls", "no journal events",
                 "times to 10^-6 s"):
        assert said in first, said
    assert tr.meta["import"]["unmatched"] == {"lines not in a known ftrace format": 1}
    assert tr.count("offcpu") == 0 and tr.count("request") == len(s.requests)
    assert tr.meta["import"]["attribution"] is False


def test_no_ftrace_is_one_line(tmp_path, capsys):
    src = tmp_path / "x.txt"
    src.write_text("hello\nworld\n")
    assert main(["import", "ftrace", str(src), "-o", str(tmp_path / "o.iowt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iowhy: no ftrace events") and err.count("\n") == 1


def test_exit_seen_as_the_last_switch_out(tmp_path):
    """Without sched_process_exit, a thread's switch-out in state X ends its life: its
    time after that is no task's, as in the original run."""
    s = synth_run(tmp_path / "orig.iowt", seed=23, n_fsync=10, n_reads=4, helpers=False)
    lines = []
    for x in capture_text(s, "tracefs").splitlines():
        if "sched_process_exit: comm=worker pid=100" in x:
            x = x.replace("sched_process_exit: comm=worker pid=100 prio=120",
                          "sched_switch: prev_comm=worker prev_pid=100 prev_prio=120 "
                          "prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120")
            assert "prev_state=X" in x
        lines.append(x)
    src = tmp_path / "trace"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "i.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out), "--pid", "100"]) == 0
    a, b = analyze(read_trace(s.path)), analyze(read_trace(str(out)))
    assert merged(b["attribution_ns"]) == merged(a["attribution_ns"])
    assert b["attribution_ns"]["wait-other"] > 0  # the time after the exit


@pytest.mark.parametrize("fmt", ["ftrace", "blktrace"])
def test_fifo_input_is_refused_without_blocking(tmp_path, capsys, fmt):
    import os
    fifo = tmp_path / "trace_pipe"
    os.mkfifo(fifo)
    assert main(["import", fmt, str(fifo), "-o", str(tmp_path / "o.iowt")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"iowhy: {fifo} is not a regular file") and err.count("\n") == 1


MIB10 = 10 << 20
HEAD = "dd-1234 [001] d..1. 1234.567890: "


def hostile_lines():
    """10 MiB lines built to make a backtracking parser quadratic (a regex with a lazy
    task name took 29.5 s on 40 KB of blanks after a word): (the line, the event whose
    fields are then read)."""
    n = MIB10
    yield "x" + " " * n + "y", None
    yield " " * n + HEAD + "block_rq_issue: 8,0 WS 4096 () 2048 + 8 be,0,4 [dd]", "rq"
    yield "a-1 " * (n // 4), None
    yield "1.0: " * (n // 5), None
    yield "dd-1 " + "[001] " * (n // 6), None
    yield HEAD + "sched_switch: prev_comm=" + " prev_pid=1 prev_prio=x" * (n // 23), "switch"
    yield HEAD + "sched_switch: prev_comm=" + " next_pid=1" * (n // 11), "switch"
    yield HEAD + "sched_wakeup: " + "comm= pid=x" * (n // 11), "wake"
    yield HEAD + "xlog_iclog_sync: " + "dev 1:2 " * (n // 8), "xfs"
    yield HEAD + "block_rq_issue: 8,0 WS " + "9" * n, "rq"
    yield "dd-1 [001] 1.0: sys_fsync(" + "(" * n, None
    yield "dd-1 [001] 1.0: sys_fsync -> " + "0 " * (n // 2), None
    yield "dd-1 [001] 1.0:" + " " * n + "block_rq_issue: x", "rq"


def test_a_10_mib_line_takes_work_linear_in_it():
    """The parser's work (characters it scans, counted by textscan.Scanner) on each
    hostile line is a small multiple of the line's length."""
    from iowhy.importers import ftrace
    from iowhy.importers.textscan import Scanner
    for line, fields in hostile_lines():
        sc = Scanner()
        h = sc.split(line)
        if fields is not None:
            assert h is not None, line[:60]
            rest = h.rest
            if fields == "switch":
                assert sc.sched_switch(rest) is None
            elif fields == "wake":
                assert sc.name_then_number(rest, "comm=", ftrace.PID_AFTER) is None
            elif fields == "xfs":
                g = sc.search(ftrace.XFS_DEV, rest)
                assert g and sc.search(ftrace.XFS_LSN, rest[g.end():]) is None
            else:
                sc.match(ftrace.RQ, rest)
        assert sc.work <= 8 * len(line), (line[:40], sc.work / len(line))


def test_hostile_lines_are_counted_not_fatal(tmp_path, monkeypatch):
    """Through the importer: every line is read (work linear in the file), what is not
    an event is counted, and the events around them are imported."""
    from iowhy.importers import ftrace
    made = []

    class Counted(ftrace.Scanner):
        def __init__(self):
            super().__init__()
            made.append(self)
    monkeypatch.setattr(ftrace, "Scanner", Counted)
    src = tmp_path / "t.txt"
    good = [HEAD + "block_rq_issue: 8,0 WS 4096 () 2048 + 8 be,0,4 [dd]",
            "<idle>-0 [001] d..1. 1234.600000: block_rq_complete: 8,0 WS () 2048 + 8 "
            "be,0,4 [0]"]
    lines = [line for line, _ in hostile_lines()]
    bad = [lines[i] for i in (0, 2, 3, 4, 5)]  # no event, four times; a switch with no fields
    with open(src, "w") as f:
        for x in [good[0], *bad, good[1],
                  HEAD + "block_rq_issue: 8,0 WS 4096 () " + "9" * 30 + " + 8 [dd]",
                  HEAD.replace("1234.", "9" * 15 + ".") + "block_rq_issue: 8,0 W 1 () 1 + 8 [d]"]:
            f.write(x + "\n")
    out = tmp_path / "o.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out)]) == 0
    assert made[0].work <= 8 * src.stat().st_size
    tr = read_trace(str(out))
    assert tr.count("request") == 1
    um = tr.meta["import"]["unmatched"]
    assert um["lines not in a known ftrace format"] == 4
    assert um["sched_switch lines not understood"] == 1
    assert um["lines with a time, PID or CPU out of range"] == 1
    assert um["block_rq_issue lines not understood"] == 1


def test_a_flush_completion_at_sector_minus_one_matches(tmp_path):
    """The block tracepoints print a flush's sector as (sector_t)-1 at its completion: it
    is a u64 like any sector, matches the flush issued at 0, and the record keeps 0."""
    src = tmp_path / "t.txt"
    src.write_text(
        "kworker/0:1H-90 [000] d..1. 1000.000001: block_rq_issue: 8,0 FF 0 () 0 + 0 "
        "none,0,0 [kworker/0:1H]\n"
        "<idle>-0 [000] d..1. 1000.000101: block_rq_complete: 8,0 FF () "
        "18446744073709551615 + 0 none,0,0 [0]\n")
    out = tmp_path / "o.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out)]) == 0
    tr = read_trace(str(out))
    assert tr.meta["import"]["unmatched"] == {} and not tr.damage.damaged
    rq = tr.records("request")
    assert len(rq) == 1 and int(rq["start_sector"][0]) == 0 and int(rq["done_ns"][0])


# A journal commit block (PREFLUSH+FUA) on a write-back device without FUA, as a real
# ext4-on-loop capture shows it: the pre-flush, the data stage, the post-flush, then the
# data request's second completion with no bytes.
FLUSH_SEQ = [
    (100, "jbd2/loop1-8", 222, "block_bio_queue", "7,1 FWFSM 229402 + 2 [jbd2/loop1-8]"),
    (100, "jbd2/loop1-8", 222, "block_getrq", "7,1 FWFSM 229402 + 2 [jbd2/loop1-8]"),
    (113, "kworker/1:1H", 44, "block_rq_issue", "7,1 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]"),
    (11826, "ksoftirqd/1", 22, "block_rq_complete",
     "7,1 FF () 18446744073709551615 + 0 none,0,0 [0]"),
    (11834, "kworker/1:1H", 44, "block_rq_insert",
     "7,1 WSM 1024 () 229402 + 2 be,0,3 [kworker/1:1H]"),
    (11837, "kworker/1:1H", 44, "block_rq_issue",
     "7,1 WSM 1024 () 229402 + 2 be,0,3 [kworker/1:1H]"),
    (11859, "ksoftirqd/1", 22, "block_rq_complete", "7,1 WSM () 229402 + 2 be,0,3 [0]"),
    (11865, "kworker/1:1H", 44, "block_rq_issue", "7,1 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]"),
    (12025, "ksoftirqd/1", 22, "block_rq_complete",
     "7,1 FF () 18446744073709551615 + 0 none,0,0 [0]"),
    (12026, "ksoftirqd/1", 22, "block_rq_complete", "7,1 WSM () 229402 + 0 be,0,3 [0]"),
]


def flush_seq_text(dialect: str, rows=FLUSH_SEQ, base: int = 12970_000_000_000) -> str:
    return "\n".join(line(dialect, base + 1000 * us, comm, pid, ev, rest)
                     for us, comm, pid, ev, rest in rows) + "\n"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_flush_sequenced_write_is_one_request(tmp_path, dialect):
    """The second completion of a PREFLUSH+FUA write finishes the same request (as the
    recorder's data_done_ns and done_ns): no phantom request issued before the capture;
    the device busy with the two flushes and the data stage, one at a time."""
    src = tmp_path / "t.txt"
    src.write_text(flush_seq_text(dialect))
    out = tmp_path / "o.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out)]) == 0
    tr = read_trace(str(out))
    assert tr.meta["import"]["unmatched"] == {}
    rq = tr.records("request")
    w = rq[rq["op"] == abi.OP_WRITE]
    assert len(rq) == 3 and len(w) == 1
    base = 12970_000_000_000
    (w,) = w
    assert (int(w["submit_ns"]), int(w["insert_ns"]), int(w["issue_ns"]),
            int(w["data_done_ns"]), int(w["done_ns"])) == \
        tuple(base + 1000 * us for us in (100, 11834, 11837, 11859, 12026))
    assert int(w["flags_u16"]) & abi.RQ_FLUSH_SEQ and int(w["done_bytes"]) == 1024
    assert int(w["iflags"]) & (abi.F_PREFLUSH | abi.F_FUA) == abi.F_PREFLUSH | abi.F_FUA
    dev = analyze(tr)["devices"][0]
    assert dev["queue_depth"]["max"] == 1
    assert dev["busy_ns"] == 1000 * ((11826 - 113) + (11859 - 11837) + (12025 - 11865))


def test_a_fua_write_completed_once_stays_one_completion(tmp_path):
    """On a device with FUA the write completes once; a later completion of no bytes on
    its sector, with no request there, after another request came and went, is still
    a request issued before the capture. A write without PREFLUSH/FUA never waits for
    a second completion."""
    rows = [
        (100, "dd", 300, "block_bio_queue", "8,0 WFS 2048 + 8 [dd]"),
        (100, "dd", 300, "block_getrq", "8,0 WFS 2048 + 8 [dd]"),
        (110, "dd", 300, "block_rq_issue", "8,0 WFS 4096 () 2048 + 8 be,0,4 [dd]"),
        (200, "<idle>", 0, "block_rq_complete", "8,0 WFS () 2048 + 8 be,0,4 [0]"),
        (300, "dd", 300, "block_bio_queue", "8,0 WS 4096 + 8 [dd]"),
        (300, "dd", 300, "block_getrq", "8,0 WS 4096 + 8 [dd]"),
        (310, "dd", 300, "block_rq_issue", "8,0 WS 4096 () 4096 + 8 be,0,4 [dd]"),
        (400, "<idle>", 0, "block_rq_complete", "8,0 WS () 4096 + 8 be,0,4 [0]"),
        (500, "<idle>", 0, "block_rq_complete", "8,0 WS () 4096 + 0 be,0,4 [0]"),
    ]
    src = tmp_path / "t.txt"
    src.write_text(flush_seq_text("tracefs", rows, base=5_000_000_000))
    out = tmp_path / "o.iowt"
    assert main(["import", "ftrace", str(src), "-o", str(out)]) == 0
    tr = read_trace(str(out))
    rq = tr.records("request")
    assert len(rq) == 3
    fua = rq[rq["start_sector"] == 2048]
    assert int(fua["done_ns"][0]) == int(fua["data_done_ns"][0]) == 5_000_200_000
    assert not int(fua["flags_u16"][0]) & abi.RQ_FLUSH_SEQ
    assert tr.meta["import"]["unmatched"] == {
        "completion of a request issued before the capture": 1}


COMM_ROWS = [
    (100, "python3", 500, "block_bio_queue", "8,0 WS 2048 + 8 [python3]"),
    (150, "python3", 500, "sched_process_fork",
     "comm=python3 pid=500 child_comm=python3 child_pid=501"),
    (200, "python3", 501, "block_bio_queue", "8,0 WS 4096 + 8 [python3]"),
    (300, "python3", 777, "block_bio_queue", "8,0 WS 8192 + 8 [python3]"),
]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_ambiguous_comm_is_refused(tmp_path, capsys, dialect):
    """--comm python3 with two unrelated python3 processes (500 and its child 501 are
    one workload; 777 another): one line lists 500 and 777 with their first time and
    points to --pid, and nothing is written. Without 777 the name is one process."""
    src = tmp_path / "t.txt"
    src.write_text(flush_seq_text(dialect, COMM_ROWS, base=7_000_000_000))
    out = tmp_path / "o.iowt"
    capsys.readouterr()
    assert main(["import", "ftrace", str(src), "-o", str(out), "--comm", "python3"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not out.exists()
    assert ("--comm python3 names 2 processes: pid 500 (first seen at 7.000100 s), "
            "pid 777 (first seen at 7.000300 s)") in err and "--pid" in err
    src.write_text(flush_seq_text(dialect, COMM_ROWS[:3], base=7_000_000_000))
    assert main(["import", "ftrace", str(src), "-o", str(out), "--comm", "python3"]) == 0
    # a --pid thread's children keep its name without making it ambiguous
    src.write_text(flush_seq_text(dialect, COMM_ROWS, base=7_000_000_000))
    assert main(["import", "ftrace", str(src), "-o", str(out), "--comm", "python3",
                 "--pid", "777"]) == 1
