"""`iowhy export --format perfetto` (a Perfetto protobuf trace, built with the protos the
`perfetto` package ships; nothing is downloaded) and `--format chrome-json` (the Trace
Event JSON format). Both draw the timeline of timeline.py."""

from __future__ import annotations

import json
from typing import Any

from ..names import utf8_text
from ..progress import phase
from . import need
from .files import output_file
from .timeline import Slice, Timeline, build, sorted_events

SEQ_ID = 1
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
# TrackEvent.Type
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4


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


def _annotate(p: Any, te: Any, args: dict[str, Any], intern: _Interner) -> None:
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


def _safe(args: dict[str, Any]) -> dict[str, Any]:
    return {k: utf8_text(v) if isinstance(v, str) else v for k, v in args.items()}


def write_perfetto(trace: Any, path: str, tl: Timeline | None = None) -> dict[str, int]:
    pb = need("perfetto.trace_builder.proto_builder")
    tl = tl or build(trace)
    phase("writing perfetto")
    counts = {"tracks": 0, "slices": 0, "instants": 0, "counter values": 0, "flows": tl.flows}
    with output_file(path) as f:
        b = pb.StreamingTraceProtoBuilder(f)
        first = True
        for t in tl.tracks.values():
            p = b.create_packet()
            p.trusted_packet_sequence_id = SEQ_ID
            p.timestamp = tl.start_ns
            if first:
                p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
                first = False
            td = p.track_descriptor
            td.uuid = t.uuid
            if t.parent is not None:
                td.parent_uuid = t.parent
            if t.tid is not None and t.pid is not None:
                td.thread.pid = t.pid
                td.thread.tid = t.tid
                td.thread.thread_name = utf8_text(t.name)
            elif t.pid is not None:
                td.process.pid = t.pid
                td.process.process_name = utf8_text(t.name)
            else:
                td.name = utf8_text(t.name)
            if t.counter_unit is not None:
                td.counter.unit_name = t.counter_unit
            b.write_packet(p)
            counts["tracks"] += 1
        intern = _Interner()
        for kind, item in sorted_events(tl):
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
              "flows": tl.flows}

    def us(ns: int) -> float:
        return round((ns - tl.start_ns) / 1000.0, 3)
    for kind, item in sorted_events(tl):
        if kind == "E":
            continue
        if kind == "C":
            track, ts, value = item
            events.append({"ph": "C", "name": tl.tracks[track].name, "ts": us(ts),
                           "pid": group_pid["counters"], "tid": 0, "args": {"value": value}})
            counts["counter values"] += 1
            continue
        s: Slice = item
        pid, tid = ids[s.track]
        if kind == "B":
            events.append({"ph": "X", "name": s.name, "cat": s.cat, "ts": us(s.start),
                           "dur": round((s.end - s.start) / 1000.0, 3), "pid": pid, "tid": tid,
                           "args": _safe(s.args)})
            counts["slices"] += 1
            # flows: "s" inside the call's slice, "f" bound to the request's slice
            for fid in s.flows_out:
                events.append({"ph": "s", "id": fid, "name": "submitted", "cat": "flow",
                               "ts": us(s.start), "pid": pid, "tid": tid})
            for fid in s.flows_in:
                events.append({"ph": "f", "bp": "e", "id": fid, "name": "submitted",
                               "cat": "flow", "ts": us(s.start), "pid": pid, "tid": tid})
        else:
            events.append({"ph": "i", "s": "t", "name": s.name, "cat": s.cat,
                           "ts": us(s.start), "pid": pid, "tid": tid, "args": _safe(s.args)})
            counts["instants"] += 1
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"source": "iowhy export", "trace": utf8_text(trace.path),
                         "start_monotonic_ns": tl.start_ns,
                         "note": "ts are microseconds from start_monotonic_ns"}}
    with output_file(path) as f:
        f.write(json.dumps(doc, separators=(",", ":")).encode())
    return counts
