"""`iowhy export --format perfetto` (a Perfetto protobuf trace, built with the protos the
`perfetto` package ships; nothing is downloaded) and `--format chrome-json` (the Trace
Event JSON format). Both draw the timeline of timeline.py.

The Perfetto trace declares its clocks: a ClockSnapshot ties CLOCK_MONOTONIC (the
trace's times; every track event says so through the sequence's packet defaults) to
CLOCK_BOOTTIME (Perfetto's trace clock, the clock of ftrace data) with the offset the
recording measured (`clock.boottime_minus_monotonic_ns`; a trace without it is taken to
have none, and the writer's counts say so). A SystemInfo packet names the kernel, so
that Perfetto decodes the threads' states as that kernel writes them.

The workload threads' scheduling goes as native scheduler data, so that Perfetto's CPU
tracks, thread-state tracks and `thread_state` table fill: per CPU, FtraceEventBundles
of compact sched_switch events (a switch to the thread when it went on that CPU, a
switch to pid 0 with its state when it left) and sched_waking events. The wakings are
full events, not compact ones: a compact waking names no waker (Perfetto takes the task
running on that CPU, which a trace of only the workload's threads does not know), a
full one carries the waker's pid. Between the traced threads' periods a CPU shows pid 0:
no traced thread ran there (another task or none). Priorities are not recorded: 120
(nice 0) is written."""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterator, Mapping

import numpy as np

from ..names import utf8_text
from ..progress import phase
from . import need
from .files import output_file
from .timeline import Slice, Timeline, build, sorted_events

SEQ_ID = 1
SCHED_SEQ_ID = 2  # the ftrace bundles' sequence (their times are BOOTTIME)
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
# TrackEvent.Type
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
CLOCK_MONOTONIC, CLOCK_BOOTTIME = 3, 6  # BuiltinClock
MERGE_BY_KEY = 3  # TrackDescriptor.SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY
PRIO = 120  # not recorded: nice 0
BUNDLE_EVENTS = 8192  # sched events per ftrace bundle (bounds a packet's size)
JSON_EVENTS_AT_ONCE = 1 << 14  # Trace Event JSON events encoded per write
I64 = np.int64


class _Interner:
    """Names sent once per trace: event names, categories and argument names are
    interned (the packet that first uses one carries it in its interned_data)."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, int]] = {"event_names": {}, "event_categories": {},
                                                  "debug_annotation_names": {}}

    def __call__(self, packet: Any, table: str, name: str) -> int:
        t = self.tables[table]
        iid = t.get(name)
        if iid is None:
            iid = t[name] = len(t) + 1
            entry = getattr(packet.interned_data, table).add()
            entry.iid = iid
            entry.name = utf8_text(name)
        return iid


def _annotate(p: Any, te: Any, args: Mapping[str, Any], intern: _Interner) -> None:
    for k, v in args.items():
        a = te.debug_annotations.add()
        a.name_iid = intern(p, "debug_annotation_names", k)
        if isinstance(v, bool):
            a.bool_value = v
        elif isinstance(v, int):
            a.int_value = v
        elif isinstance(v, float):
            a.double_value = v
        else:
            a.string_value = utf8_text(v)


def _safe(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: utf8_text(v) if isinstance(v, str) else v for k, v in args.items()}


def boottime_offset(trace: Any) -> int | None:
    """CLOCK_BOOTTIME - CLOCK_MONOTONIC as the recording measured it; None if unknown."""
    clock = (trace.meta or {}).get("clock") or {}
    v = clock.get("boottime_minus_monotonic_ns") if isinstance(clock, dict) else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _preamble(b: Any, trace: Any, tl: Timeline, boot: int) -> None:
    """The first packets: the clocks (and the track events' clock as the sequence's
    default), then the system's description."""
    p = b.create_packet()
    p.trusted_packet_sequence_id = SEQ_ID
    p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
    p.trace_packet_defaults.timestamp_clock_id = CLOCK_MONOTONIC
    cs = p.clock_snapshot
    for clock, ts in ((CLOCK_BOOTTIME, tl.start_ns + boot), (CLOCK_MONOTONIC, tl.start_ns)):
        c = cs.clocks.add()
        c.clock_id = clock
        c.timestamp = ts
    cs.primary_trace_clock = CLOCK_BOOTTIME
    b.write_packet(p)
    meta = trace.meta or {}
    p = b.create_packet()
    p.trusted_packet_sequence_id = SEQ_ID
    u = p.system_info.utsname
    u.sysname = "Linux"
    for k in ("kernel", "machine"):
        if isinstance(meta.get(k), str):
            setattr(u, "release" if k == "kernel" else "machine", utf8_text(meta[k]))
    if isinstance(meta.get("ncpus"), int) and meta["ncpus"] > 0:
        p.system_info.num_cpus = int(meta["ncpus"])
    b.write_packet(p)


_OUT, _WAKE, _IN = 1, 2, 3  # the order of a CPU's events at one time


def _cpu_events(tl: Timeline, c: int, runs: np.ndarray, wakes: np.ndarray
                ) -> Iterator[tuple[int, int, int, int, int]]:
    """The scheduler events of CPU c in time order, as (time, order, kind, a, b): order
    at one time switch-out, waking, switch-in; kind 0 a switch (a = prev_state, b = next
    pid), 1 a waking (a = woken tid, b = waker tid). Perfetto takes a CPU's first switch
    only for its next task (the CPU's current one): a switch to pid 0 opens each CPU. A
    switch-out to pid 0 followed at once by switch-ins at its time is one switch (to the
    last of them). runs: (cpu, start, end or 0, tid, state) rows; wakes: (cpu, time,
    tid, waker) rows."""
    r = runs[runs[:, 0] == c] if len(runs) else runs
    w = wakes[wakes[:, 0] == c] if len(wakes) else wakes
    out = r[r[:, 2] != 0]
    nr, no, nw = len(r), len(out), len(w)
    t = np.concatenate((r[:, 1], out[:, 2], w[:, 1]))
    order = np.concatenate((np.full(nr, _IN, I64), np.full(no, _OUT, I64), np.full(nw, _WAKE, I64)))
    kind = np.concatenate((np.zeros(nr + no, I64), np.ones(nw, I64)))
    a = np.concatenate((np.zeros(nr, I64), out[:, 4], w[:, 2]))
    bb = np.concatenate((r[:, 3], np.zeros(no, I64), w[:, 3]))
    o = np.lexsort((bb, a, kind, order, t))
    t, order, kind, a, bb = t[o], order[o], kind[o], a[o], bb[o]
    pending = (min(tl.start_ns, int(t[0])) if len(t) else tl.start_ns, 0, 0, 0, 0)
    for lo in range(0, len(t), BUNDLE_EVENTS):
        hi = lo + BUNDLE_EVENTS
        for x in zip(t[lo:hi].tolist(), order[lo:hi].tolist(), kind[lo:hi].tolist(),
                     a[lo:hi].tolist(), bb[lo:hi].tolist()):
            if (x[2] == 0 and x[1] == _IN and pending[2] == 0 and pending[1] == _OUT
                    and pending[0] == x[0]):
                pending = (pending[0], pending[1], 0, pending[3], x[4])
                continue
            yield pending
            pending = x
    yield pending


def _sched(b: Any, tl: Timeline, boot: int) -> tuple[int, int]:
    """The native scheduler data (module docstring): per CPU, bundles of compact
    switches and full waking events, times in BOOTTIME. Returns (switches, wakings)."""
    runs = np.asarray(tl.sched, I64).reshape(-1, 5)
    wakes = np.asarray(tl.wakings, I64).reshape(-1, 4)
    nsw = nwk = 0
    first = True
    for c in np.unique(np.concatenate((runs[:, 0], wakes[:, 0]))).tolist():
        events = _cpu_events(tl, c, runs, wakes)
        while True:
            bundle = list(itertools.islice(events, BUNDLE_EVENTS))
            if not bundle:
                break
            p = b.create_packet()
            p.trusted_packet_sequence_id = SCHED_SEQ_ID
            if first:
                p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
                first = False
            fb = p.ftrace_events
            fb.cpu = c
            cs = fb.compact_sched
            names: dict[str, int] = {}

            def name(tid: int) -> int:
                n = "swapper/%d" % c if tid == 0 else utf8_text(tl.comms.get(tid, ""))
                if n not in names:
                    names[n] = len(names)
                    cs.intern_table.append(n)
                return names[n]
            last = 0
            for t, _, kind, a, bb in bundle:
                t += boot
                if kind == 0:
                    cs.switch_timestamp.append(t - last)
                    last = t
                    cs.switch_prev_state.append(a)
                    cs.switch_next_pid.append(bb)
                    cs.switch_next_prio.append(PRIO)
                    cs.switch_next_comm_index.append(name(bb))
                    nsw += 1
                else:
                    e = fb.event.add()
                    e.timestamp = t
                    e.pid = bb
                    w = e.sched_waking
                    w.comm = utf8_text(tl.comms.get(a, ""))
                    w.pid = a
                    w.prio = PRIO
                    w.success = 1
                    w.target_cpu = c
                    nwk += 1
            b.write_packet(p)
    return nsw, nwk


def write_perfetto(trace: Any, path: str, tl: Timeline | None = None) -> dict[str, int]:
    pb = need("perfetto.trace_builder.proto_builder")
    tl = tl or build(trace, state_slices=False)
    phase("writing perfetto")
    counts = {"tracks": 0, "slices": 0, "instants": 0, "counter values": 0, "flows": tl.flows}
    off = boottime_offset(trace)
    boot = off or 0
    state_tracks = {u for u, t in tl.tracks.items() if t.state}
    with output_file(path) as f:
        b = pb.StreamingTraceProtoBuilder(f)
        _preamble(b, trace, tl, boot)
        for t in tl.tracks.values():
            if t.state:
                continue
            p = b.create_packet()
            p.trusted_packet_sequence_id = SEQ_ID
            p.timestamp = tl.start_ns
            td = p.track_descriptor
            td.uuid = t.uuid
            if t.parent is not None:
                td.parent_uuid = t.parent
            if t.tid is not None and t.pid is not None:
                td.thread.pid = t.pid
                td.thread.tid = t.tid
                td.thread.thread_name = utf8_text(t.comm or t.name)
            elif t.pid is not None:
                td.process.pid = t.pid
                td.process.process_name = utf8_text(t.comm or t.name)
            else:
                td.name = utf8_text(t.name)
            if t.merge_key is not None:
                td.sibling_merge_behavior = MERGE_BY_KEY
                td.sibling_merge_key = utf8_text(t.merge_key)
            if t.counter_unit is not None:
                td.counter.unit_name = t.counter_unit
            b.write_packet(p)
            counts["tracks"] += 1
        intern = _Interner()
        for kind, item in sorted_events(tl, label="writing perfetto"):
            if kind != "C" and item.track in state_tracks:
                continue  # sent as native scheduler data
            p = b.create_packet()
            p.trusted_packet_sequence_id = SEQ_ID
            p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
            te = p.track_event
            if kind == "C":
                track, ts, value = item
                p.timestamp = ts
                te.type = TYPE_COUNTER
                te.track_uuid = track
                if float(value).is_integer():
                    te.counter_value = int(value)
                else:
                    te.double_counter_value = float(value)
                counts["counter values"] += 1
            else:
                s: Slice = item
                te.track_uuid = s.track
                if kind == "E":
                    p.timestamp = s.end
                    te.type = TYPE_SLICE_END
                else:
                    p.timestamp = s.start
                    te.type = TYPE_SLICE_BEGIN if kind == "B" else TYPE_INSTANT
                    if s.flows_out:
                        te.flow_ids.extend(s.flows_out)
                    if s.flows_in:
                        te.terminating_flow_ids.extend(s.flows_in)
                    te.name_iid = intern(p, "event_names", s.name)
                    te.category_iids.append(intern(p, "event_categories", s.cat))
                    _annotate(p, te, s.args, intern)
                    counts["slices" if kind == "B" else "instants"] += 1
            b.write_packet(p)
        counts["sched switches"], counts["wakings"] = _sched(b, tl, boot)
    counts["running periods left out (CPU unknown, or overlapping another)"] = \
        tl.sched_unknown_cpu
    if off is None:
        counts["ns BOOTTIME - MONOTONIC (not recorded: taken as 0)"] = 0
    return counts


def write_chrome_json(trace: Any, path: str, tl: Timeline | None = None) -> dict[str, int]:
    """The Trace Event format: complete ("X") events, instants ("i"), counters ("C"),
    process and thread names ("M"). Tracks that are not threads get synthetic ids."""
    tl = tl or build(trace)
    phase("writing trace event JSON")
    group_pid = {"devices": 1 << 30, "journal": (1 << 30) + 1, "counters": (1 << 30) + 2}
    ids: dict[int, tuple[int, int]] = {}
    events: list[dict[str, Any]] = []
    next_tid = 1 << 30
    for t in tl.tracks.values():
        if t.counter_unit is not None:
            ids[t.uuid] = (group_pid["counters"], 0)
            continue
        if t.tid is not None and t.pid is not None:
            ids[t.uuid] = (t.pid, t.tid)
        elif t.pid is not None:  # a process
            events.append({"ph": "M", "name": "process_name", "pid": t.pid, "tid": 0,
                           "args": {"name": t.name}})
            continue
        else:
            parent = tl.tracks.get(t.parent) if t.parent is not None else None
            pid = parent.pid if parent is not None and parent.pid is not None \
                else group_pid.get(t.group, group_pid["devices"])
            ids[t.uuid] = (pid, next_tid)
            next_tid += 1
        events.append({"ph": "M", "name": "thread_name", "pid": ids[t.uuid][0],
                       "tid": ids[t.uuid][1], "args": {"name": t.name}})
    for g, pid in group_pid.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": g}})
    counts = {"tracks": len(tl.tracks), "slices": 0, "instants": 0, "counter values": 0,
              "flows": 0}
    # Flows join slices in this format: the wakeups' flows, between instants, stay out.
    at_instants = np.zeros(tl.flows + 1, bool)
    at_instants[tl.instants.flow_ids()] = True

    def us(ns: int) -> float:
        return round((ns - tl.start_ns) / 1000.0, 3)

    def timeline_events() -> Iterator[dict[str, Any]]:
        for kind, item in sorted_events(tl, ends=False, label="writing trace event JSON"):
            if kind == "C":
                track, ts, value = item
                yield {"ph": "C", "name": tl.tracks[track].name, "ts": us(ts),
                       "pid": group_pid["counters"], "tid": 0, "args": {"value": value}}
                counts["counter values"] += 1
                continue
            s: Slice = item
            pid, tid = ids[s.track]
            if kind == "B":
                yield {"ph": "X", "name": s.name, "cat": s.cat, "ts": us(s.start),
                       "dur": round((s.end - s.start) / 1000.0, 3), "pid": pid, "tid": tid,
                       "args": _safe(s.args)}
                counts["slices"] += 1
                # flows: "s" inside the call's slice, "f" bound to the request's slice
                for fid in s.flows_out:
                    if at_instants[fid]:
                        continue
                    counts["flows"] += 1
                    yield {"ph": "s", "id": fid, "name": "submitted", "cat": "flow",
                           "ts": us(s.start), "pid": pid, "tid": tid}
                for fid in s.flows_in:
                    if at_instants[fid]:
                        continue
                    yield {"ph": "f", "bp": "e", "id": fid, "name": "submitted",
                           "cat": "flow", "ts": us(s.start), "pid": pid, "tid": tid}
            else:
                yield {"ph": "i", "s": "t", "name": s.name, "cat": s.cat,
                       "ts": us(s.start), "pid": pid, "tid": tid, "args": _safe(s.args)}
                counts["instants"] += 1
    other = {"source": "iowhy export", "trace": utf8_text(trace.path),
             "start_monotonic_ns": tl.start_ns,
             "note": "ts are microseconds from start_monotonic_ns"}
    # The document json.dumps(separators=(",", ":")) makes of {"traceEvents": [...],
    # "displayTimeUnit": "ns", "otherData": {...}}, written as the events are made.
    dump = json.JSONEncoder(separators=(",", ":")).encode
    with output_file(path) as f:
        part = ['{"traceEvents":[']
        sep = ""
        for e in itertools.chain(events, timeline_events()):
            part.append(sep + dump(e))
            sep = ","
            if len(part) >= JSON_EVENTS_AT_ONCE:
                f.write("".join(part).encode())
                part = []
        part.append('],"displayTimeUnit":"ns","otherData":' + dump(other) + "}")
        f.write("".join(part).encode())
    return counts
