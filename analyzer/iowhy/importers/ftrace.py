"""`iowhy import ftrace`: the text of tracefs `trace` / `trace_pipe`, `trace-cmd report`
and `perf script`, as an iowhy trace.

Lines look like (tracefs, trace-cmd; perf script):

    dd-1234     [001] d..1.  1234.567890: block_rq_issue: 7,0 WS 4096 () 2048 + 8 be,0,4 [dd]
    dd  1234 [001]  1234.567890:  block:block_rq_issue: 7,0 WS 4096 () 2048 + 8 be,0,4 [dd]

Read: block_bio_queue, block_getrq, block_bio_backmerge/frontmerge, block_rq_insert,
block_rq_issue, block_rq_requeue, block_rq_complete (requests, matched as blktrace's
are: common.py); jbd2 commits and their phases, xfs_log_force and the XLOG iclog
events; ext4/xfs/btrfs fsync events and the syscalls:sys_enter/exit_ events of the
fsync family (calls); sched_switch, sched_wakeup/waking and process fork/exit (off-CPU
intervals and tasks of the workload threads: --pid / --comm). Every other event is
counted, not used. Times are the capture's clock (`trace_clock`; choose `mono` to
compare with iowhy recordings) at the precision it printed.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import abi
from ..progress import count, phase
from .common import (ImportError_, ImportStats, RequestMatcher, open_input, parse_rwbs,
                     request_records, write_imported)

LINE = re.compile(
    r"^\s*(?P<comm>.+?)(?:-(?P<pid1>\d+)|\s+(?P<pid2>\d+)(?:/(?P<tid>\d+))?)\s+"
    r"(?:\(\s*(?:\d+|-+)\)\s+)?"  # tgid (tracefs record-tgid option)
    r"(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:[.a-zA-Z0-9]{3,6}\s+)?"  # irq/preempt flags
    r"(?P<sec>\d+)\.(?P<frac>\d+):\s+"
    r"(?:\w+:)?(?P<event>\w+):\s*(?P<rest>.*)$")
# The syscall tracer's own form in tracefs: "sys_fsync(fd: 3)" and "sys_fsync -> 0x0".
SYSLINE = re.compile(
    r"^\s*(?P<comm>.+?)-(?P<pid1>\d+)\s+(?:\(\s*(?:\d+|-+)\)\s+)?(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:[.a-zA-Z0-9]{3,6}\s+)?(?P<sec>\d+)\.(?P<frac>\d+):\s+sys_(?P<name>\w+)"
    r"(?:\((?P<args>.*)\)| -> (?P<ret>\S+))\s*$")
BIO = re.compile(r"(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+(?P<sector>\d+)\s+\+\s+"
                 r"(?P<nr>\d+)")
RQ = re.compile(r"(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+(?:(?P<bytes>\d+)\s+)?"
                r"(?:\((?P<cmd>[^)]*)\)\s+)?(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)"
                r"(?:\s+[^\[\s]+)?\s+\[(?P<tail>[^\]]*)\]")
DEV_SEQ = re.compile(r"dev (?P<maj>\d+)[,:](?P<min>\d+) transaction (?P<seq>\d+)")
XFS = re.compile(r"dev (?P<maj>\d+):(?P<min>\d+).*?lsn 0x(?P<lsn>[0-9a-fA-F]+)")
FSYNC_EV = re.compile(r"dev (?P<maj>\d+)[,:](?P<min>\d+) ino (?P<ino>(?:0x)?[0-9a-fA-F]+)")
KV = re.compile(r"(\w+)=(\S*)")
SWITCH = re.compile(r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>\d+) prev_prio=\S+ "
                    r"prev_state=(?P<ps>\S+) ==> next_comm=(?P<nc>.*?) next_pid=(?P<np>\d+)")
WAKE = re.compile(r"comm=(?P<comm>.*?) pid=(?P<pid>\d+)")
FORK = re.compile(r"comm=.*? pid=(?P<pid>\d+) child_comm=(?P<cc>.*?) child_pid=(?P<cp>\d+)")
CALLS = {v: k for k, v in abi.CALL_NAMES.items() if k != abi.CALL_OSYNC_WRITE}
JBD2 = {"jbd2_start_commit": abi.J_JBD2_START, "jbd2_commit_locking": abi.J_JBD2_LOCKING,
        "jbd2_commit_flushing": abi.J_JBD2_FLUSHING, "jbd2_commit_logging": abi.J_JBD2_LOGGING,
        "jbd2_end_commit": abi.J_JBD2_END}
XLOG = {"xfs_log_force": abi.J_XFS_FORCE, "xlog_iclog_sync": abi.J_XLOG_SYNC,
        "xlog_iclog_write": abi.J_XLOG_WRITE, "xlog_iclog_sync_done": abi.J_XLOG_DONE}
USED_ELSEWHERE = {"block_rq_merge", "block_split", "block_plug", "block_unplug",
                  "block_bio_remap", "block_rq_remap", "block_bio_complete",
                  "block_dirty_buffer", "block_touch_buffer", "block_bio_bounce",
                  "block_io_start", "block_io_done"}


def _syscall_numbers() -> dict[str, int]:
    from ..syscall_table import TABLES
    return {v: k for k, v in TABLES["x86_64"].items()}


@dataclass
class _State:
    stats: ImportStats
    matcher: RequestMatcher
    workload: set[int]
    comms: set[str]
    names: dict[int, str] = field(default_factory=dict)
    first_seen: dict[int, int] = field(default_factory=dict)
    calls_open: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    syscall_of: dict[int, str] = field(default_factory=dict)
    journal: list[dict[str, Any]] = field(default_factory=list)
    off_open: dict[int, dict[str, Any]] = field(default_factory=dict)
    offcpu: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    sched_seen: bool = False
    calls_seen: bool = False
    journal_seen: bool = False
    precision: int = 9

    def is_workload(self, pid: int, comm: str, t: int) -> bool:
        if pid in self.workload:
            return True
        if comm and comm in self.comms and pid:
            self.workload.add(pid)
            self.tasks.append({"tid": pid, "tgid": pid, "ts_ns": t,
                               "event_u16": abi.TASK_ROOT, "comm": comm.encode()[:16]})
            return True
        return False


def _ns(sec: str, frac: str) -> int:
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def _block(st: _State, ev: str, rest: str, t: int, pid: int, comm: str, cpu: int) -> None:
    m = st.matcher
    if ev in ("block_bio_queue", "block_getrq", "block_bio_backmerge", "block_bio_frontmerge"):
        b = BIO.match(rest)
        if not b:
            st.stats.unmatched[f"{ev} lines not understood"] += 1
            return
        dev = (int(b["maj"]), int(b["min"]))
        op, ifl = parse_rwbs(b["rwbs"])
        sector, nbytes = int(b["sector"]), int(b["nr"]) * 512
        if ev == "block_bio_queue":
            m.queue(t, dev, sector, nbytes, op, ifl, pid, comm)
        elif ev == "block_getrq":
            m.getrq(t, dev, sector, nbytes, op, ifl, pid, comm)
        else:
            m.merge(t, dev, sector, nbytes, op, front=ev == "block_bio_frontmerge")
        return
    r = RQ.match(rest)
    if not r:
        st.stats.unmatched[f"{ev} lines not understood"] += 1
        return
    dev = (int(r["maj"]), int(r["min"]))
    op, ifl = parse_rwbs(r["rwbs"])
    sector = int(r["sector"])
    nbytes = int(r["bytes"]) if r["bytes"] is not None else int(r["nr"]) * 512
    if ev == "block_rq_insert":
        m.insert(t, dev, sector, nbytes, op, ifl, pid, comm)
    elif ev == "block_rq_issue":
        m.issue(t, dev, sector, nbytes, op, ifl, cpu, pid, comm)
    elif ev == "block_rq_requeue":
        m.requeue(t, dev, sector, op)
    else:
        try:
            err = int(r["tail"])
        except ValueError:
            err = 0
        m.complete(t, dev, sector, int(r["nr"]) * 512, op, err, cpu)


def _call_open(st: _State, pid: int, t: int, call: int, **kw: Any) -> dict[str, Any]:
    c = {"tid": pid, "tgid": pid, "enter_ns": t, "exit_ns": 0, "call_u16": call,
         "fs_u16": abi.FS_NONE, "flags_u16": 0, "fd": -1, "ret": 0, "ino": 0,
         "dev_major": 0, "dev_minor": 0, "syscall_nr": 0, "comm": st.names.get(pid, "")}
    c.update(kw)
    st.calls_open[pid] = c
    return c


def _call_close(st: _State, pid: int, t: int, ret: int) -> None:
    c = st.calls_open.pop(pid)
    c["exit_ns"] = t
    c["ts_ns"] = t
    c["ret"] = ret
    st.calls.append(c)


RAW_SYS = re.compile(r"NR (?P<nr>-?\d+)(?: \((?P<args>[^)]*)\)| = (?P<ret>-?\d+))?")


def _line(st: _State, ev: str, rest: str, t: int, pid: int, comm: str, cpu: int,
          nrs: dict[str, int]) -> None:
    stats = st.stats
    if ev in ("sys_enter", "sys_exit"):  # raw_syscalls: x86-64 numbers
        g = RAW_SYS.match(rest)
        names = {v: k for k, v in nrs.items()}
        if not g or int(g["nr"]) not in names:
            stats.ignored[ev] += 1
            return
        name = names[int(g["nr"])]
        if ev == "sys_enter":
            first = (g["args"] or "").split(",")[0].strip()
            ev, rest = f"sys_enter_{name}", f"fd: 0x{int(first or '0', 16):x}"
        else:
            ev, rest = f"sys_exit_{name}", str(int(g["ret"] or 0))
    if ev.startswith("block_") and ev not in USED_ELSEWHERE:
        _block(st, ev, rest, t, pid, comm, cpu)
        return
    if ev in JBD2 or ev in XLOG:
        st.journal_seen = True
        if ev in JBD2:
            g = DEV_SEQ.search(rest)
            fs, code = abi.FS_EXT4, JBD2[ev]
            seq = int(g["seq"]) if g else 0
        else:
            g = XFS.search(rest)
            fs, code = abi.FS_XFS, XLOG[ev]
            seq = int(g["lsn"], 16) if g else 0
        if not g:
            stats.unmatched[f"{ev} lines not understood"] += 1
            return
        st.journal.append({"event_u16": code, "ts_ns": t, "seq": seq, "tid": pid, "tgid": pid,
                           "dev_major": int(g["maj"]), "dev_minor": int(g["min"]),
                           "fs_u16": fs, "comm": comm.encode()[:16]})
        return
    if ev.startswith("sys_enter_") or ev.startswith("sys_exit_"):
        enter = ev.startswith("sys_enter_")
        name = ev[10:] if enter else ev[9:]
        if name in CALLS and st.is_workload(pid, comm, t):
            st.calls_seen = True
            if enter:
                if pid in st.calls_open:
                    stats.unmatched["fsync-family entry with no exit"] += 1
                    st.calls_open.pop(pid)
                fd = re.search(r"fd: (0x[0-9a-fA-F]+|\d+)", rest)
                _call_open(st, pid, t, CALLS[name], fd=int(fd.group(1), 0) if fd else -1,
                           syscall_nr=nrs.get(name, 0))
            elif pid in st.calls_open:
                try:
                    ret = int(rest.strip(), 0)
                except ValueError:
                    ret = 0
                if ret < 0:
                    ret += 1 << 64
                _call_close(st, pid, t, ret - (1 << 64) if ret >= 1 << 63 else ret)
            else:
                stats.unmatched["fsync-family exit with no entry"] += 1
        if enter:
            st.syscall_of[pid] = name
        else:
            st.syscall_of.pop(pid, None)
        if name not in CALLS:
            stats.ignored[ev] += 1
        return
    if ev in ("ext4_sync_file_enter", "xfs_file_fsync", "btrfs_sync_file"):
        if not st.is_workload(pid, comm, t):
            return
        st.calls_seen = True
        g = FSYNC_EV.search(rest)
        fs = {"e": abi.FS_EXT4, "x": abi.FS_XFS, "b": abi.FS_BTRFS}[ev[0]]
        c = st.calls_open.get(pid)
        if c is None:  # no syscall events: the call is the filesystem's fsync
            c = _call_open(st, pid, t, abi.CALL_FSYNC, opened_by_fs=True)
        c["fs_u16"] = fs
        c["flags_u16"] |= abi.FS_F_FSEVENT
        if g:
            c["dev_major"], c["dev_minor"] = int(g["maj"]), int(g["min"])
            c["ino"] = int(g["ino"], 0) if g["ino"].startswith("0x") else int(g["ino"])
        if "datasync 1" in rest or "datasync=1" in rest:
            c["flags_u16"] |= abi.FS_F_DATASYNC
        return
    if ev == "ext4_sync_file_exit":
        c = st.calls_open.get(pid)
        if c is not None and c.get("opened_by_fs"):
            m = re.search(r"ret (-?\d+)", rest)
            _call_close(st, pid, t, int(m.group(1)) if m else 0)
        return
    if ev == "sched_switch":
        st.sched_seen = True
        s = SWITCH.search(rest)
        if not s:
            stats.unmatched["sched_switch lines not understood"] += 1
            return
        prev, nxt = int(s["pp"]), int(s["np"])
        if st.is_workload(prev, s["pc"], t) and s["ps"].rstrip("+") in ("X", "Z", "X|Z", "Z|X"):
            # the thread's last switch-out: it exited (no sched_process_exit needed)
            if not any(x["tid"] == prev and x["event_u16"] == abi.TASK_EXIT for x in st.tasks):
                st.tasks.append({"tid": prev, "tgid": prev, "ts_ns": t,
                                 "event_u16": abi.TASK_EXIT, "comm": s["pc"].encode()[:16]})
        elif st.is_workload(prev, s["pc"], t):
            state = s["ps"]
            flags = abi.OFF_PREEMPT if state.startswith("R") else 0
            if "D" in state:
                flags |= abi.OFF_D
            sysname = st.syscall_of.get(prev)
            st.off_open[prev] = {"tid": prev, "tgid": prev, "start_ns": t, "waking_ns": 0,
                                 "end_ns": 0, "flags_u16": flags,
                                 "syscall_nr": nrs.get(sysname, -1) if sysname else -1}
        if nxt in st.off_open:
            o = st.off_open.pop(nxt)
            o["end_ns"] = o["ts_ns"] = t
            if o["flags_u16"] & abi.OFF_PREEMPT:
                o["waking_ns"] = 0
            elif not o["waking_ns"]:
                o["waking_ns"] = t
            st.offcpu.append(o)
        return
    if ev in ("sched_wakeup", "sched_waking", "sched_wakeup_new"):
        w = WAKE.search(rest)
        if w and int(w["pid"]) in st.off_open:
            o = st.off_open[int(w["pid"])]
            if not o["waking_ns"] and not o["flags_u16"] & abi.OFF_PREEMPT:
                o["waking_ns"] = t
                o["waker_tid"] = o["waker_tgid"] = pid
                o["waker_comm"] = comm.encode()[:16]
        return
    if ev == "sched_process_fork":
        f = FORK.search(rest)
        if f and int(f["pid"]) in st.workload:
            child = int(f["cp"])
            st.workload.add(child)
            st.tasks.append({"tid": child, "tgid": child, "parent_tgid": int(f["pid"]),
                             "ts_ns": t, "event_u16": abi.TASK_FORK,
                             "comm": f["cc"].encode()[:16]})
        return
    if ev == "sched_process_exit":
        w = WAKE.search(rest)
        if w and int(w["pid"]) in st.workload:
            st.tasks.append({"tid": int(w["pid"]), "tgid": int(w["pid"]), "ts_ns": t,
                             "event_u16": abi.TASK_EXIT, "comm": w["comm"].encode()[:16]})
        return
    stats.ignored[ev] += 1


def _records(dtype: np.dtype, rows: list[dict[str, Any]]) -> np.ndarray:
    a = np.zeros(len(rows), dtype=dtype)
    names = set(dtype.names or ())
    for i, row in enumerate(rows):
        for k, v in row.items():
            if k in names:
                a[k][i] = v.encode()[:16] if isinstance(v, str) else v
    return a


def import_ftrace(inputs: list[str], out: str, workload: set[int] | None = None,
                  comms: set[str] | None = None) -> dict[str, Any]:
    stats = ImportStats()
    st = _State(stats, RequestMatcher(stats), set(workload or ()), set(comms or ()))
    for tid in sorted(st.workload):
        st.tasks.append({"tid": tid, "tgid": tid, "ts_ns": 0, "event_u16": abi.TASK_ROOT})
    nrs = _syscall_numbers()
    lines = 0
    first = last = None
    parsed: list[tuple[int, int, str, str, int, str, int]] = []
    phase("reading")
    for p in inputs:
        with io.TextIOWrapper(open_input(p), encoding="utf-8", errors="replace") as f:
            for k, raw in enumerate(f):
                line = raw.rstrip("\n")
                if not line.strip() or line.lstrip().startswith("#") or line.startswith(
                        ("cpus=", "version =", "CPU ")):
                    continue
                lines += 1
                if not lines & 0xFFFF:
                    count(0x10000)  # lines read, on the progress line
                m = LINE.match(line)
                if m:
                    pid = int(m["tid"] or m["pid1"] or m["pid2"])
                    event, rest = m["event"], m["rest"]
                else:
                    m = SYSLINE.match(line)
                    if not m:
                        stats.unmatched["lines not in a known ftrace format"] += 1
                        continue
                    pid = int(m["pid1"])
                    if m["ret"] is not None:
                        event, rest = f"sys_exit_{m['name']}", m["ret"]
                    else:
                        event, rest = f"sys_enter_{m['name']}", m["args"]
                t = _ns(m["sec"], m["frac"])
                st.precision = min(st.precision, len(m["frac"]))
                parsed.append((t, len(parsed), event, rest, pid, m["comm"].strip(),
                               int(m["cpu"] or 0)))
    if not parsed:
        raise ImportError_("no ftrace events in " + ", ".join(inputs),
                           "give the text of tracefs trace/trace_pipe, `trace-cmd report` or "
                           "`perf script`")
    phase("matching events")
    parsed.sort()
    for t, _, ev, rest, pid, comm, cpu in parsed:
        stats.events[ev] += 1
        if comm and comm != "<...>":
            st.names.setdefault(pid, comm)
        first = t if first is None else first
        last = t
        _line(st, ev, rest, t, pid, comm, cpu, nrs)
    assert first is not None and last is not None
    for row in st.tasks:
        if not row["ts_ns"]:
            row["ts_ns"] = first
    reqs = st.matcher.finish()
    # Calls and off-CPU intervals still open at the end are kept, flagged incomplete.
    for pid, c in list(st.calls_open.items()):
        c["flags_u16"] |= abi.FS_F_INCOMPLETE
        c["ts_ns"] = last
        st.calls.append(c)
        stats.unmatched["fsync-family call still running at the end"] += 1
    for pid, o in st.off_open.items():
        o["end_ns"] = o["ts_ns"] = last
        o["flags_u16"] |= abi.OFF_LATE_END
        st.offcpu.append(o)
    arr = request_records(reqs, st.workload)
    devs = sorted({r.dev for r in reqs})
    devices: list[dict[str, Any]] = [
        {"name": f"{a}:{b}", "major": a, "minor": b, "size_bytes": None, "rotational": None,
         "write_cache": None, "fua": None, "partitions": []} for a, b in devs]
    missing = []
    attribution = bool(st.workload) and st.sched_seen
    if not st.workload:
        missing.append("no workload threads given (--pid/--comm), so no off-CPU data and no "
                       "workload attribution")
    elif not st.sched_seen:
        missing.append("no sched_switch events, so no off-CPU data and no workload "
                       "attribution")
    if not st.calls_seen:
        missing.append("no fsync-family calls")
    else:
        missing.append("fsync-family calls not linked to the journal commit they waited for "
                       "(their commit time counts as other)")
    if not st.journal_seen:
        missing.append("no journal events")
    if st.precision < 9:
        missing.append(f"times to 10^-{st.precision} s (the capture's precision)")
    missing.append("no filesystem layout, so journal writes are classed metadata or data")
    counts: Counter = Counter(stats.events)
    if not any(k.startswith("block_rq") for k in counts):
        missing.append("no block request events")
    records = {"request": arr,
               "fsync": _records(abi.FSYNC_DTYPE, st.calls),
               "journal": _records(abi.JOURNAL_DTYPE, st.journal),
               "offcpu": _records(abi.OFFCPU_DTYPE, st.offcpu if attribution else []),
               "task": _records(abi.TASK_DTYPE, st.tasks if attribution else [])}
    root = min(st.workload) if st.workload else 0
    phase("writing")
    write_imported(out, "ftrace", inputs, first, last, records, devices, missing, stats,
                   attribution=attribution, command=[os.path.basename(inputs[0])], pid=root)
    return {"requests": len(arr), "calls": len(st.calls), "off-CPU intervals":
            len(st.offcpu) if attribution else 0, "journal events": len(st.journal),
            "unmatched": sum(stats.unmatched.values()), "lines": lines}
