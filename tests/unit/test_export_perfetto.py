"""`iowhy export --format perfetto|chrome-json`: the files parsed back (the Perfetto one
with the protos of the `perfetto` package) hold one slice per request, call, off-CPU
state and commit, on tracks where slices nest, and the attribution as counters."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from iowhy import abi
from iowhy.analysis import analyze
from iowhy.cli import main
from iowhy.traceformat import read_trace
from perfetto_sched import thread_states
from synth_runs import JBD2_TID, meta, rq, synth_run
from tracebuilder import DEV, Trace, jev

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
FLOWS: dict = {"out": {}, "in": {}}  # flow id -> (track, time) of the last file checked
SCHED: list = []  # the ftrace bundles of the last file checked
INSTANTS: list = []  # (track, name, time, args) of the last file checked
CLOCK_MONOTONIC, CLOCK_BOOTTIME = 3, 6


def parse(path):
    t = pb.Trace()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def check_and_collect(t):
    """Tracks by uuid; every slice as (track, name, start, end, args); counter values per
    track. Fails if an event names an undeclared track or slices do not nest."""
    tracks = {}
    slices = []
    counters = defaultdict(list)
    stacks = defaultdict(list)
    last_ts = defaultdict(int)
    flows_out, flows_in = FLOWS["out"], FLOWS["in"]
    flows_out.clear()
    flows_in.clear()
    SCHED.clear()
    INSTANTS.clear()
    first = t.packet[0]
    assert first.sequence_flags & 1  # incremental state cleared first
    # the clocks: track events in CLOCK_MONOTONIC, tied to BOOTTIME by a snapshot
    assert first.trace_packet_defaults.timestamp_clock_id == CLOCK_MONOTONIC
    clocks = {c.clock_id: c.timestamp for c in first.clock_snapshot.clocks}
    assert set(clocks) == {CLOCK_MONOTONIC, CLOCK_BOOTTIME}
    assert first.clock_snapshot.primary_trace_clock == CLOCK_BOOTTIME
    assert t.packet[1].system_info.utsname.sysname == "Linux"
    interned: dict = defaultdict(dict)  # table -> iid -> name
    for p in t.packet[2:]:
        if p.HasField("ftrace_events"):
            assert p.trusted_packet_sequence_id == 2
            SCHED.append(p.ftrace_events)
            continue
        assert p.trusted_packet_sequence_id == 1
        assert not p.HasField("timestamp_clock_id")  # the sequence's default
        for table in ("event_names", "event_categories", "debug_annotation_names"):
            for e in getattr(p.interned_data, table):
                assert e.iid not in interned[table]  # each name sent once
                interned[table][e.iid] = e.name
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            assert td.uuid not in tracks
            if td.HasField("parent_uuid"):
                assert td.parent_uuid in tracks  # parents are declared first
            tracks[td.uuid] = td
            continue
        te = p.track_event
        assert te.track_uuid in tracks
        assert p.timestamp >= last_ts[te.track_uuid]  # in time order per track
        last_ts[te.track_uuid] = p.timestamp
        if te.type in (BEGIN, INSTANT):
            assert p.sequence_flags & 2  # uses the interned names
            assert all(c in interned["event_categories"] for c in te.category_iids)
        if te.type in (BEGIN, INSTANT):
            for f in te.flow_ids:
                assert f not in flows_out
                flows_out[f] = (te.track_uuid, p.timestamp)
            for f in te.terminating_flow_ids:
                assert f not in flows_in
                flows_in[f] = (te.track_uuid, p.timestamp)
            args = {interned["debug_annotation_names"][a.name_iid]:
                    (a.string_value or a.int_value or a.bool_value)
                    for a in te.debug_annotations}
        if te.type == INSTANT:
            INSTANTS.append((te.track_uuid, interned["event_names"][te.name_iid],
                             p.timestamp, args))
        if te.type == BEGIN:
            stacks[te.track_uuid].append((interned["event_names"][te.name_iid], p.timestamp,
                                          args))
        elif te.type == END:
            name, start, args = stacks[te.track_uuid].pop()
            assert p.timestamp >= start
            slices.append((te.track_uuid, name, start, p.timestamp, args))
        elif te.type == COUNTER:
            counters[te.track_uuid].append((p.timestamp, te.counter_value or
                                            te.double_counter_value))
        else:
            assert te.type == INSTANT
    assert all(not s for s in stacks.values())  # every slice ended
    assert set(flows_out) == set(flows_in)  # every flow leaves one slice, ends on one
    assert all(flows_out[f][1] <= flows_in[f][1] for f in flows_out)  # forward in time
    return tracks, slices, counters


def test_perfetto_round_trip(tmp_path):
    s = synth_run(tmp_path / "a.iowt", seed=4)
    out = tmp_path / "a.pftrace"
    assert main(["export", s.path, "--format", "perfetto", "-o", str(out)]) == 0
    tracks, slices, counters = check_and_collect(parse(out))
    r = analyze(read_trace(s.path))
    names = {u: (td.name or td.thread.thread_name or td.process.process_name)
             for u, td in tracks.items()}
    # Requests: one slice each on the device's track (its lanes share its name and merge
    # key, under "block devices"), named by class, with class and served-by as args.
    dev_tracks = {u for u, n in names.items() if n == "sdz"}
    (parent,) = [u for u, n in names.items() if n == "block devices"]
    assert all(tracks[u].parent_uuid == parent and tracks[u].sibling_merge_key == "sdz"
               and tracks[u].sibling_merge_behavior == 3 for u in dev_tracks)
    per_class = Counter(n for u, n, *_ in slices if u in dev_tracks)
    assert per_class == Counter({c: f["count"] for c, f in r["requests"].items() if f["count"]})
    # served_by: the level two a wait on it counts as (the Parquet column's value)
    level_two = {"flush": "flush", "log": "log", "metadata": "metadata", "data": "data",
                 "read": "read"}
    assert all(a["class"] == n and a["served_by"] == level_two[n]
               for u, n, *_, a in slices if u in dev_tracks)
    flush = [x for x in slices if x[0] in dev_tracks and x[1] == "flush"]
    assert sorted(e - b for _, _, b, e, _ in flush) == \
        sorted(q["done_ns"] - q["issue_ns"] for q in s.requests if q["op"] == abi.OP_FLUSH)
    data = [x for x in slices if x[0] in dev_tracks and x[1] == "data"]
    assert all(a["submitter"] == "worker/100" and a["bytes"] > 0 and "sector" in a
               for *_, a in data)
    # One workload thread: its calls on its track, named by its comm.
    (thread,) = [u for u, td in tracks.items() if td.HasField("thread")
                 and td.thread.tid == 100]
    assert tracks[thread].thread.thread_name == "worker"
    calls = [x for x in slices if x[0] == thread]
    assert Counter(x[1] for x in calls) == Counter(
        abi.CALL_NAMES[f["call_u16"]] for f in s.fsyncs)
    # No scheduling as slices: it is native scheduler data, from which the thread's
    # states follow as Perfetto derives them.
    assert not any(n.endswith("state") for n in names.values())
    st = thread_states(SCHED)[100]
    off = sorted(s.offcpu, key=lambda o: o["start_ns"])
    # Its first running period's CPU is unknown (left out): the states start at the
    # first switch-in, then each off-CPU record is a blocked (D) and a runnable state,
    # woken by its waker; the thread ends in X at its exit.
    want = [("Running", off[0]["end_ns"])]
    for o in off[1:]:
        want += [("D", o["start_ns"]), ("R", o["waking_ns"]), ("Running", o["end_ns"])]
    exit_ns = s.tasks[-1]["ts_ns"]
    want.append(("X", exit_ns))
    assert [(x[0], x[1]) for x in st] == want
    assert [x[4] for x in st if x[0] == "R"] == [o["waker_tid"] for o in off[1:]]
    running = sum(x[2] - x[1] for x in st if x[0] == "Running")
    assert running == exit_ns - off[0]["end_ns"] - sum(
        o["end_ns"] - o["start_ns"] for o in off[1:])
    # Journal: one commit per jbd2 start/end pair.
    jt = {u for u, n in names.items() if n.startswith("journal")}
    assert sum(1 for x in slices if x[0] in jt and x[1].startswith("commit")) == \
        sum(1 for j in s.journal if j["event_u16"] == abi.J_JBD2_START)
    # Attribution counters end at the report's totals.
    for cat, v in r["attribution_ns"].items():
        (u,) = [u for u, n in names.items() if n == f"attribution {cat} (ns)"]
        assert counters[u][-1] == (s.end_ns, v)
    assert any(n.startswith("lost_ringbuf_request") for n in names.values())
    # Flows: from each fsync call to the data write its thread submitted inside it;
    # from each waker to the thread it woke; from each request to the thread its
    # completion woke (the jbd2 helper's wakeups carry the request).
    calls_out = [f for f, (u, _) in FLOWS["out"].items() if u == thread
                 and FLOWS["in"][f][0] in dev_tracks]
    assert len(calls_out) == len(data) == len(s.fsyncs)
    woken = [x for x in INSTANTS if x[1] == "woken"]
    wakes = [x for x in INSTANTS if x[1] == "wakes"]
    assert len(woken) == len(s.offcpu) + len(s.helpers) and len(wakes) == len(s.offcpu)
    from_rq = [f for f, (u, _) in FLOWS["out"].items() if u in dev_tracks]
    assert len(from_rq) == len(s.helpers) > 0
    seq_end = {q["seq"]: q["done_ns"] for q in s.requests}
    for f in from_rq:
        u, t = FLOWS["in"][f]
        assert names[u] == "jbd2/sdz1-8" and tracks[u].thread.tid == JBD2_TID
        (w,) = [x for x in woken if x[0] == u and x[2] == t]
        assert seq_end[w[3]["request_seq"]] <= t
    assert len(FLOWS["out"]) == len(s.fsyncs) + len(s.offcpu) + len(s.helpers)


def test_perfetto_clock_offset_from_the_recording(tmp_path):
    """The snapshot ties MONOTONIC to BOOTTIME by the offset the recording measured,
    and the scheduler data (ftrace's BOOTTIME) is shifted by it."""
    import json as _json
    s = synth_run(tmp_path / "a.iowt", seed=6, n_fsync=5)
    tr = read_trace(s.path)
    m = dict(tr.meta)
    m["clock"] = dict(m.get("clock") or {}, boottime_minus_monotonic_ns=7_000_000_000)
    p = tmp_path / "b.iowt"
    t = Trace(p, _json.loads(_json.dumps(m)),
              {"start_ns": tr.start_ns, "pid": 100, "command": ["x"]})
    for name in ("request", "fsync", "offcpu", "task"):
        t.add(name, tr.records(name))
    t.close({"end_ns": s.end_ns})
    out = tmp_path / "b.pftrace"
    assert main(["export", str(p), "--format", "perfetto", "-o", str(out)]) == 0
    t = parse(out)
    check_and_collect(t)
    clocks = {c.clock_id: c.timestamp for c in t.packet[0].clock_snapshot.clocks}
    assert clocks[CLOCK_BOOTTIME] - clocks[CLOCK_MONOTONIC] == 7_000_000_000
    off = sorted(s.offcpu, key=lambda o: o["start_ns"])
    st = thread_states(SCHED, boot=7_000_000_000)[100]
    assert st[0][:2] == ("Running", off[0]["end_ns"])
    assert all(e.timestamp - 7_000_000_000 in {o["waking_ns"] for o in off}
               for b in SCHED for e in b.event)


def test_overlapping_requests_go_on_lanes(tmp_path):
    # Three requests in flight together, a fourth after them: three lanes, and the
    # fourth back on the first.
    reqs = [rq(1_000, 1_100, 5_000, sector=100), rq(1_200, 1_300, 4_000, sector=900),
            rq(1_400, 1_500, 6_000, sector=50), rq(7_000, 7_100, 8_000, sector=58)]
    p = tmp_path / "o.iowt"
    Trace(p, meta("h", "k"), {"start_ns": 500, "command": ["x"], "pid": 100}) \
        .add("request", reqs).close({"end_ns": 9_000})
    out = tmp_path / "o.pftrace"
    assert main(["export", str(p), "--format", "perfetto", "-o", str(out)]) == 0
    tracks, slices, _ = check_and_collect(parse(out))
    dev = {u for u, td in tracks.items() if td.name == "sdz" and not td.HasField("counter")}
    assert len(dev) == 3
    by_track = defaultdict(list)
    for u, n, b, e, a in slices:
        if u in dev:
            by_track[u].append((b, e))
    assert sorted(len(v) for v in by_track.values()) == [1, 1, 2]
    for v in by_track.values():
        v.sort()
        assert all(a[1] <= b[0] for a, b in zip(v, v[1:]))
    assert DEV == (8, 0)


def test_chrome_json_matches_perfetto(tmp_path):
    s = synth_run(tmp_path / "a.iowt", seed=5, n_fsync=12)
    pf, cj = tmp_path / "a.pftrace", tmp_path / "a.json"
    assert main(["export", s.path, "--format", "perfetto", "-o", str(pf)]) == 0
    assert main(["export", s.path, "--format", "chrome-json", "-o", str(cj)]) == 0
    _, slices, counters = check_and_collect(parse(pf))
    doc = json.loads(cj.read_text())
    ev = doc["traceEvents"]
    thread_name = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
                   if e["ph"] == "M" and e["name"] == "thread_name"}
    # The JSON draws the scheduling states as slices (Perfetto has them natively).
    xs = [e for e in ev if e["ph"] == "X"
          and not thread_name[(e["pid"], e["tid"])].endswith(" state")]
    assert len(xs) == len(slices)
    assert Counter(e["name"] for e in xs) == Counter(x[1] for x in slices)
    assert sum(1 for e in ev if e["ph"] == "C") == sum(len(v) for v in counters.values())
    # Slices on one (pid, tid) nest: sorted by start, each ends before the next
    # starts or inside its parent.
    by = defaultdict(list)
    for e in xs:
        by[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for v in by.values():
        stack: list = []
        for b, e in sorted(v, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= b + 1e-9:
                stack.pop()
            assert not stack or e <= stack[-1] + 1e-9
            stack.append(e)
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    assert starts == {e["id"] for e in ev if e["ph"] == "f"} and len(starts) == 12
    names = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    assert "worker 100" in names and "sdz" in names


def test_xfs_log_forces_and_iclogs(tmp_path):
    # Two forces at 2000 and 2500 wait for the iclog completing at 3000; a force at
    # 3500 has no later completion: an instant. Two iclogs in flight together: lanes.
    def j(ev, ts, seq, tid=300):
        return jev(ev, ts, seq, tid=tid, fs=abi.FS_XFS, comm=b"xfsaild")
    rows = [j(abi.J_XLOG_SYNC, 1000, 7), j(abi.J_XLOG_SYNC, 1500, 8),
            j(abi.J_XFS_FORCE, 2000, 0, tid=100), j(abi.J_XFS_FORCE, 2500, 0, tid=101),
            j(abi.J_XLOG_DONE, 3000, 7), j(abi.J_XLOG_DONE, 3200, 8),
            j(abi.J_XFS_FORCE, 3500, 0, tid=100)]
    p = tmp_path / "x.iowt"
    Trace(p, meta("h", "k", fstype="xfs"), {"start_ns": 500, "command": ["x"], "pid": 100}) \
        .add("journal", rows).close({"end_ns": 4_000})
    out = tmp_path / "x.pftrace"
    assert main(["export", str(p), "--format", "perfetto", "-o", str(out)]) == 0
    t = parse(out)
    tracks, slices, _ = check_and_collect(t)
    got = sorted((n, b, e) for _, n, b, e, _ in slices)
    assert got == [("iclog write", 1000, 3000), ("iclog write", 1500, 3200),
                   ("log force", 2000, 3000), ("log force", 2500, 3000)]
    instants = [p.timestamp for p in t.packet if p.track_event.type == INSTANT]
    assert instants == [3500]
    journal = [u for u, td in tracks.items() if td.name.startswith("journal xfs")]
    assert len(journal) == 4  # the journal track and three more lanes


def test_jbd2_commits_phases_and_fast_commits(tmp_path):
    # A jbd2 commit (seq 5) cut into its phases; a fast commit in task 100; a phase of
    # a commit never begun (seq 9) draws nothing; the commit's stats record is an instant.
    rows = [jev(abi.J_JBD2_START, 1000, 5), jev(abi.J_JBD2_LOCKING, 1100, 5),
            jev(abi.J_JBD2_FLUSHING, 1300, 5), jev(abi.J_JBD2_LOGGING, 1600, 5),
            jev(abi.J_JBD2_END, 2000, 5), jev(abi.J_JBD2_STATS, 2100, 5),
            jev(abi.J_EXT4_FC_START, 2500, 0, tid=100),
            jev(abi.J_JBD2_LOCKING, 2600, 9),
            jev(abi.J_EXT4_FC_STOP, 2700, 0, tid=100)]
    p = tmp_path / "j.iowt"
    Trace(p, meta("h", "k"), {"start_ns": 500, "command": ["x"], "pid": 100}) \
        .add("journal", rows).close({"end_ns": 4_000})
    out = tmp_path / "j.pftrace"
    assert main(["export", str(p), "--format", "perfetto", "-o", str(out)]) == 0
    tracks, slices, _ = check_and_collect(parse(out))
    got = sorted((n, b, e) for tr, n, b, e, _ in slices
                 if tracks[tr].name.startswith("journal "))
    assert got == [("commit 5", 1000, 2000), ("fast commit", 2500, 2700),
                   ("flushing", 1300, 1600), ("locking", 1100, 1300), ("logging", 1600, 2000)]
    journal = [(n, t) for tr, n, t, _ in INSTANTS if tracks[tr].name.startswith("journal ")]
    assert journal == [("jbd2_stats", 2100)]


def test_lanes_are_placed_in_n_log_n():
    """Placing slices on lanes takes a constant number of heap operations per slice, so
    O(n log n) in all (a scan of every lane per slice made a 5 KB trace of 40,000
    requests in flight together run for over 10 minutes), and puts each slice on the
    lowest-numbered lane free at its start, as a scan would."""
    import random

    from iowhy.export.timeline import Lanes, Timeline
    rng = random.Random(7)
    for n, spread in ((1_500, 1), (3_000, 10**6), (3_000, 10**3)):
        tl = Timeline()
        lanes = Lanes(tl, tl.track("q"), "q")
        ends: list[int] = []  # the scan's view: per lane, the end of its last slice
        starts = sorted(rng.randrange(spread) for _ in range(n))
        for s in starts:
            e = s + rng.randrange(1, 10**6)
            lane = lanes.lanes.index(lanes.place(s, e))
            want = next((i for i, f in enumerate(ends) if f <= s), len(ends))
            assert lane == want
            if want == len(ends):
                ends.append(0)
            ends[want] = e
        assert lanes.steps <= 4 * n, (n, lanes.steps)
        assert len(lanes.lanes) == len(ends)


def test_imported_scheduling_keeps_its_cpus(tmp_path):
    """An ftrace import's off-CPU records carry the CPU of the switch-in that ends them,
    as a recording's do: the exported scheduler data puts each running period on its
    CPU, names each waker, and leaves the first period (CPU unknown) out."""
    sw = ("sched_switch: prev_comm={} prev_pid={} prev_prio=120 prev_state={} ==> "
          "next_comm={} next_pid={} next_prio=120")
    lines = [
        ("worker-100", 1, "1.000000", sw.format("worker", 100, "D", "swapper/1", 0)),
        ("<idle>-0", 0, "1.000500", "sched_waking: comm=worker pid=100 prio=120 "
         "target_cpu=000"),
        ("<idle>-0", 0, "1.000600", sw.format("swapper/0", 0, "R", "worker", 100)),
        ("worker-100", 0, "1.002000", sw.format("worker", 100, "S", "swapper/0", 0)),
        ("ksoftirqd/1-22", 1, "1.003000", "sched_waking: comm=worker pid=100 prio=120 "
         "target_cpu=001"),
        ("<idle>-0", 1, "1.003100", sw.format("swapper/1", 0, "R", "worker", 100)),
        ("worker-100", 1, "1.004000", sw.format("worker", 100, "R+", "kworker/1:1", 31)),
        ("kworker/1:1-31", 1, "1.004500", sw.format("kworker/1:1", 31, "I", "worker", 100)),
        ("worker-100", 1, "1.009000", "sched_process_exit: comm=worker pid=100 prio=120"),
    ]
    src = tmp_path / "t.txt"
    src.write_text("".join(f"{who:>16} [{cpu:03d}] d..2. {ts}: {ev}\n"
                           for who, cpu, ts, ev in lines))
    imp, out = tmp_path / "i.iowt", tmp_path / "i.pftrace"
    assert main(["import", "ftrace", str(src), "-o", str(imp), "--pid", "100"]) == 0
    assert main(["export", str(imp), "--format", "perfetto", "-o", str(out)]) == 0
    check_and_collect(parse(out))
    st = thread_states(SCHED)[100]
    ms = 1_000_000
    assert [(x[0], x[1] - 1000 * ms, x[3], x[4]) for x in st] == [
        ("Running", 600_000, 0, None), ("S", 2 * ms, 0, None), ("R", 3 * ms, 1, 22),
        ("Running", 3_100_000, 1, None), ("R+", 4 * ms, 1, None),
        ("Running", 4_500_000, 1, None)]


def _cpu_events_reference(tl, c):
    """The scheduler events of CPU c as the writer defines them, as plain lists."""
    OUT, WAKE, IN = 1, 2, 3
    ev = []
    for cpu, s, e, tid, st in tl.sched.tolist():
        if cpu == c:
            ev.append((s, IN, 0, 0, tid))
            if e:
                ev.append((e, OUT, 0, st, 0))
    ev += [(t, WAKE, 1, tid, waker) for cpu, t, tid, waker in tl.wakings.tolist() if cpu == c]
    ev = sorted(ev)
    ev.insert(0, (min(tl.start_ns, ev[0][0]), 0, 0, 0, 0))
    merged = []
    for x in ev:
        if (merged and x[2] == 0 and x[1] == IN and merged[-1][2] == 0
                and merged[-1][1] == OUT and merged[-1][0] == x[0]):
            t, o, k, st, _ = merged.pop()
            x = (t, o, k, st, x[4])
        merged.append(x)
    return merged


@pytest.mark.parametrize("seed", range(5))
def test_cpu_events_are_the_plain_merge_of_switches_and_wakings(seed):
    # Few distinct times, so that switch-outs meet switch-ins (merged) and wakings
    # between them (not merged), zero-length periods and chains of switch-ins.
    import numpy as np

    from iowhy.export import perfetto as pf
    from iowhy.export.timeline import Timeline
    rng = np.random.default_rng(seed)
    tl = Timeline(start_ns=5)
    sched = []
    for _ in range(2000):
        s = int(rng.integers(0, 60))
        e = 0 if rng.random() < 0.05 else s + int(rng.choice([0, 1, 3]))
        sched.append((int(rng.integers(0, 3)), s, e, int(rng.integers(1, 9)),
                      int(rng.choice([1, 2, 0x100]))))
    tl.sched = np.array(sched, np.int64)
    tl.wakings = np.array([(int(rng.integers(0, 3)), int(rng.integers(0, 60)),
                            int(rng.integers(1, 9)), int(rng.integers(0, 9)))
                           for _ in range(500)], np.int64)
    runs, wakes = tl.sched, tl.wakings
    for c in range(3):
        assert list(pf._cpu_events(tl, c, runs, wakes)) == _cpu_events_reference(tl, c)
