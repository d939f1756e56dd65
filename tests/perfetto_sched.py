"""Test helper: the thread states Perfetto's trace processor derives from a trace's
native scheduler data, by its rules (read from its sources: importers/ftrace
sched_event_tracker.cc and ftrace_parser.cc), for tests that cannot run the trace
processor itself (the `perfetto` package downloads its binary at first use)."""

from __future__ import annotations

from collections import defaultdict


def thread_states(bundles, boot: int = 0):
    """The thread states Perfetto's trace processor derives from the scheduler data
    (its thread_state table), by its rules: a CPU's first compact switch only sets its
    current task; a switch ends the current task's running with prev_state and starts
    the next one's; a full sched_waking makes a blocked thread runnable and names its
    waker (the event's pid). Returns {tid: [(state, start, end or None, cpu, waker)]},
    times back in CLOCK_MONOTONIC, and checks every CPU's switches are in time order."""
    STATE = {0x1: "S", 0x2: "D", 0x10: "X", 0x80: "I", 0x100: "R+", 0: "R"}
    events = []  # (ts, order, cpu, kind, fields)
    for b in bundles:
        cs = b.compact_sched
        names = list(cs.intern_table)
        ts = 0
        for k, d in enumerate(cs.switch_timestamp):
            ts += d
            sw = (cs.switch_prev_state[k], cs.switch_next_pid[k],
                  names[cs.switch_next_comm_index[k]])
            events.append((ts, 1, b.cpu, "switch", sw))
        for e in b.event:
            assert e.HasField("sched_waking")
            wk = (e.sched_waking.pid, e.pid, e.sched_waking.target_cpu)
            events.append((e.timestamp, 0, b.cpu, "waking", wk))
    events.sort(key=lambda x: (x[0], x[1]))
    cur: dict = {}
    out: dict = defaultdict(list)

    def close(tid, ts):
        if out[tid] and out[tid][-1][2] is None:
            st, s0, _, c, w = out[tid][-1]
            out[tid][-1] = (st, s0, ts, c, w)
    last: dict = {}
    for ts, _, cpu, kind, f in events:
        t = ts - boot
        if kind == "switch":
            assert ts >= last.get(cpu, 0)
            last[cpu] = ts
            prev_state, nxt, _ = f
            if cpu in cur:
                prev = cur[cpu]
                if prev:
                    close(prev, t)
                    out[prev].append((STATE[prev_state], t, None, cpu, None))
            cur[cpu] = nxt
            if nxt:
                close(nxt, t)
                out[nxt].append(("Running", t, None, cpu, None))
        else:
            wakee, waker, target = f
            assert target == cpu
            if out[wakee] and out[wakee][-1][0] in ("S", "D", "I"):
                close(wakee, t)
                out[wakee].append(("R", t, None, cpu, waker))
    return out
