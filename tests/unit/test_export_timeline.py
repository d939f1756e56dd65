"""iowhy.export.timeline: a run as tracks, slices, instants, flows and counters (what
the Perfetto and Trace Event writers draw). Lanes, thread lifetimes and the event order
in isolation; the whole timeline of one tiny hand-written trace, each slice worked out
here from its records."""

from __future__ import annotations

import numpy as np
import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.export import timeline as tlm
from iowhy.traceformat import read_trace

W = 100  # the workload thread


def test_lanes_never_overlap_and_reuse_the_lowest_free():
    tl = tlm.Timeline()
    parent = tl.track("sdz")
    lanes = tlm.Lanes(tl, parent, "sdz")
    got = [lanes.place(s, e) for s, e in ((0, 10), (5, 15), (6, 8), (10, 20), (9, 30),
                                          (16, 17))]
    a, b, c = parent, lanes.lanes[1], lanes.lanes[2]
    # (10, 20) starts as (0, 10) ends: lane 0 again; (9, 30): lane 2, free since 8;
    # (16, 17): lane 1, free since 15
    assert got == [a, b, c, a, c, b]
    assert [tl.tracks[t].name for t in lanes.lanes] == ["sdz", "sdz lane 1", "sdz lane 2"]
    same = tlm.Lanes(tl, parent, "sdz", same_name=True)
    same.place(0, 5)
    assert tl.tracks[same.place(1, 2)].name == "sdz"


def test_lifetimes():
    tasks = tb.records(tb.DTYPES["task"], [
        tb.task(1, 900, comm=b"a"),  # before the window: born at its start
        tb.task(2, 1010, abi.TASK_FORK, comm=b"b"), tb.task(2, 1050, abi.TASK_EXIT),
        tb.task(2, 1060, abi.TASK_DEAD),  # its last switch-out, after the exit
        tb.task(3, 1020, abi.TASK_EXIT, comm=b"c"), tb.task(3, 1030, abi.TASK_EXEC,
                                                            comm=b"c2"),
        # the last switch-out read before the exit: still the death
        tb.task(4, 1060, abi.TASK_DEAD), tb.task(4, 1050, abi.TASK_EXIT)])
    life = tlm._lifetimes(tasks, 1000, 1100)
    assert life[1] == (1, 1000, 1100, "a")
    assert life[2] == (2, 1010, 1060, "b")
    assert life[3] == (3, 1000, 1020, "c2")  # an exec renames
    assert life[4][2] == 1060


def test_prev_state():
    assert tlm._prev_state(0, abi.OFF_PREEMPT | abi.OFF_D) == tlm.PREV_PREEMPTED
    assert tlm._prev_state(0x402, abi.OFF_D) == tlm.PREV_I
    assert tlm._prev_state(2, abi.OFF_D) == tlm.PREV_D
    assert tlm._prev_state(1, 0) == tlm.PREV_S


def test_sorted_events_nest_slices():
    tl = tlm.Timeline()
    for s, e, name in ((0, 4, "inner"), (4, 10, "after"), (0, 10, "outer"), (4, 4, "point")):
        tl.slices.add(1, s, e, name, "x")
    tl.counters = [(2, 4, 1.0)]
    got = [(k, s.name if k != "C" else s[2]) for k, s in tlm.sorted_events(tl)]
    assert got == [("B", "outer"), ("B", "inner"), ("E", "inner"), ("B", "after"),
                   ("I", "point"), ("C", 1.0), ("E", "after"), ("E", "outer")]


def tiny(path) -> str:
    origin = abi.RQ_TRACKED | abi.RQ_ORIGIN
    return tb.write_trace(
        path, counters={"lost_events": 2},
        requests=[tb.req(1022, 1040, seq=1, submit=1021, insert=1021, flags=origin,
                         comm=b"app"),
                  tb.req(1030, 1050, seq=2, sector=5000, submit=1029, flags=origin,
                         comm=b"app"),
                  tb.req(1060, 0, seq=3, sector=9000, flags=abi.RQ_INCOMPLETE)],
        fsyncs=[tb.fsync(W, 1020, 1055, seq=7)],
        offcpu=[tb.off(W, 1031, 1054, waking=1051, waker=50, comm="jbd2/sdz1-8",
                       rq_seq=2, cpu=1)],
        journal=[tb.jev(abi.J_JBD2_START, 1025, 7), tb.jev(abi.J_JBD2_LOCKING, 1026, 7),
                 tb.jev(abi.J_JBD2_FLUSHING, 1028, 7), tb.jev(abi.J_JBD2_LOGGING, 1032, 7),
                 tb.jev(abi.J_JBD2_END, 1045, 7),
                 tb.jev(abi.J_XFS_FORCE, 1070, 3, fs=abi.FS_XFS),  # no iclog done after
                 ],
        tasks=[tb.task(W, 1000, comm=b"app")])


@pytest.fixture(scope="module")
def tl(tmp_path_factory):
    return tlm.build(read_trace(tiny(tmp_path_factory.mktemp("tl") / "t.iowt")))


def on(tl, track_name):
    return sorted(((s.start, s.end, s.name) for s in tl.slices
                   if tl.tracks[s.track].name == track_name))


def test_requests_on_device_lanes(tl):
    assert (tl.start_ns, tl.end_ns) == (1000, 1100)
    reqs = [s for s in tl.slices if s.cat == "request"]
    assert [(s.start, s.end) for s in reqs] == [(1022, 1040), (1030, 1050), (1060, 1100)]
    # the first two overlap: two lanes, both named as the device
    assert reqs[0].track != reqs[1].track and reqs[2].track == reqs[0].track
    assert {tl.tracks[s.track].name for s in reqs} == {"sdz"}
    assert reqs[2].args["incomplete"] is True  # runs to the end
    assert reqs[0].args["submitter"] == "app/100" and reqs[0].args["sector"] == 1000
    assert reqs[0].args["device_ns"] == 18 and reqs[0].args["queue_ns"] == 1


def test_calls_and_their_flows(tl):
    [call] = [s for s in tl.slices if s.cat == "fsync"]
    assert (call.start, call.end, call.name) == (1020, 1055, "fsync")
    assert call.args["commit_seq"] == 7 and tl.tracks[call.track].name == "app 100"
    reqs = [s for s in tl.slices if s.cat == "request"]
    # the requests the thread submitted inside the call
    assert reqs[0].flows_in and reqs[1].flows_in
    assert set(call.flows_out) >= set(reqs[0].flows_in + reqs[1].flows_in)
    assert not reqs[2].flows_in


def test_scheduling_states(tl):
    assert on(tl, "app 100 state") == [(1000, 1031, "running"),
                                       (1031, 1051, "blocked: fsync"),
                                       (1051, 1054, "runnable"), (1054, 1100, "running")]
    assert tl.wakings.tolist() == [[1, 1051, W, 50]]
    assert tl.comms[W] == "app"


def test_wakeup_instants_and_flows(tl):
    woken = [s for s in tl.instants if s.name == "woken"]
    wakes = [s for s in tl.instants if s.name == "wakes"]
    assert [(s.start, s.args["waker"], s.args["request_seq"]) for s in woken] == \
        [(1051, "jbd2/sdz1-8/50", 2)]
    assert [(s.start, tl.tracks[s.track].name) for s in wakes] == [(1051, "jbd2/sdz1-8 50")]
    req2 = [s for s in tl.slices if s.cat == "request"][1]
    assert set(woken[0].flows_in) == set(req2.flows_out) | set(wakes[0].flows_out)


def test_a_wakeup_whose_numbers_do_not_fit_keeps_its_arguments(tmp_path, monkeypatch):
    # no waker name index fits in the packed number: the arguments are kept as they are
    monkeypatch.setattr(tlm, "WAKER_MASK", 0)
    tl = tlm.build(read_trace(tiny(tmp_path / "t.iowt")))
    [woken] = [s for s in tl.instants if s.name == "woken"]
    assert dict(woken.args) == {"waker": "jbd2/sdz1-8/50", "request_seq": 2}
    assert tl.instants.maker_ix[tl.instants.start.index(1051) + 1] == 1  # an object


def test_journal_commit_with_phases_and_a_log_force(tl):
    j = [(s.start, s.end, s.name) for s in tl.slices if s.cat == "journal"]
    # each phase from its event to the next, the last to the commit's end
    assert sorted(j) == [(1025, 1045, "commit 7"), (1026, 1028, "locking"),
                         (1028, 1032, "flushing"), (1032, 1045, "logging")]
    # a log force with no iclog completion after it: an instant
    assert [(s.start, s.name) for s in tl.instants if s.cat == "journal"] == [(1070, "log force")]


def test_counters(tl):
    names = {t.uuid: t.name for t in tl.tracks.values()}
    lost = [(ts, v) for t, ts, v in tl.counters if names[t] == "lost_events (events)"]
    assert lost == [(1000, 0.0), (1100, 2.0)]
    att = [(names[t], ts, v) for t, ts, v in tl.counters if names[t].startswith("attribution")
           and "served by" not in names[t]]
    assert att and all(ts in (1000, 1100) for _, ts, _ in att)
    assert sum(v for _, ts, v in att if ts == 1100) == 100  # the elapsed time, all of it
    assert all(v == 0 for _, ts, v in att if ts == 1000)


def test_xfs_log_force_lasts_until_the_next_iclog_completion(tmp_path):
    x = (8, 1)
    p = tb.write_trace(tmp_path / "x.iowt", meta_obj=tb.meta("xfs"), journal=[
        tb.jev(abi.J_XFS_FORCE, 1010, 1, fs=abi.FS_XFS, dev=x),
        tb.jev(abi.J_XLOG_DONE, 1005, 1, fs=abi.FS_XFS, dev=x),  # before it: not its end
        tb.jev(abi.J_XLOG_DONE, 1030, 1, fs=abi.FS_XFS, dev=x)])
    tl = tlm.build(read_trace(p))
    forces = [(s.start, s.end) for s in tl.slices if s.name == "log force"]
    assert forces == [(1010, 1030)]
    assert {tl.tracks[s.track].name for s in tl.slices if s.cat == "journal"} == \
        {"journal xfs /dev/sdz1"}


def test_an_empty_trace_has_a_timeline(tmp_path):
    tl = tlm.build(read_trace(tb.write_trace(tmp_path / "e.iowt")))
    assert not [s for s in tl.slices if s.cat in ("request", "fsync", "journal")]
    assert not len(tl.sched) and np.isfinite([v for _, _, v in tl.counters]).all()


def _sorted_reference(tl: tlm.Timeline) -> list:
    """The order sorted_events promises, as a plain sort of Python tuples: (kind, what
    it is) for each event."""
    ev = []
    for k, s in enumerate(tl.slices):
        d = s.end - s.start
        if d <= 0:
            ev.append((s.start, 2, 0, k, ("I", ("slice", k))))
            continue
        ev.append((s.start, 1, -d, k, ("B", ("slice", k))))
        ev.append((s.end, 0, d, -k, ("E", ("slice", k))))
    for k, s in enumerate(tl.instants):
        ev.append((s.start, 2, 0, k, ("I", ("instant", k))))
    for k, c in enumerate(tl.counters):
        ev.append((c[1], 3, 0, k, ("C", ("counter", k))))
    ev.sort(key=lambda x: x[:4])
    return [x[4] for x in ev]


@pytest.mark.parametrize("seed", range(5))
def test_sorted_events_is_the_plain_sort_of_its_keys(seed):
    # Many ties (few distinct times, equal lengths, instants at slice edges) across more
    # events than it turns into objects at once.
    rng = np.random.default_rng(seed)
    tl = tlm.Timeline()
    n = 3000
    st = rng.integers(0, 40, n)
    ln = rng.choice([0, 0, 1, 2, 5], n)
    for i, (a, d) in enumerate(zip(st, ln)):
        tl.slices.add(int(rng.integers(1, 4)), int(a), int(a + d), f"s{i}", "x")
    for i, a in enumerate(rng.integers(0, 40, 500)):
        tl.instants.add(1, int(a), int(a), f"i{i}", "x")
    tl.counters = [(9, int(a), float(i)) for i, a in enumerate(rng.integers(0, 40, 200))]
    old = tlm.EVENTS_AT_ONCE
    tlm.EVENTS_AT_ONCE = 256
    try:
        got = list(tlm.sorted_events(tl))
        no_ends = list(tlm.sorted_events(tl, ends=False))
    finally:
        tlm.EVENTS_AT_ONCE = old
    want = _sorted_reference(tl)
    # each event named by what it is made of: a slice's or an instant's name is its
    # row, a counter value is its own tuple
    row = {f"s{i}": ("slice", i) for i in range(n)} | {f"i{i}": ("instant", i)
                                                       for i in range(500)}
    named = [(k, ("counter", tl.counters.index(x)) if k == "C" else row[x.name])
             for k, x in got]
    assert named == want
    assert [(k, x) for k, x in got if k != "E"] == no_ends  # the same, less the ends
    # a begin or an instant is its row whole; an end carries no arguments or flows
    for k, x in got:
        if k in "BE":
            assert (x.track, x.start, x.end) == (tl.slices.track[row[x.name][1]],
                                                 tl.slices.start[row[x.name][1]],
                                                 tl.slices.end[row[x.name][1]])


def test_shared_arguments_are_one_object_per_set_and_read_only():
    tl = tlm.Timeline()
    a = tl.shared_args(syscall="fsync", waker="kworker/7")
    assert tl.shared_args(syscall="fsync", waker="kworker/7") is a
    assert tl.shared_args(waker="kworker/7", syscall="fsync") is not a  # another order
    with pytest.raises(TypeError):
        a["syscall"] = "read"  # type: ignore[index]
    s = tl.slices.add(1, 0, 1, "x", "x")
    assert dict(tl.slices[s].args) == {} and tl.slices[s].flows_in == () and \
        tl.slices[s].flows_out == ()
    t = tl.instants.add(1, 1, 1, "y", "x", a)
    u = tl.slices.add(1, 1, 2, "z", "x", a)
    assert tl.slices.objs == [a]  # the shared set kept once
    assert tl.flow(tl.slices, s, tl.instants, t) == 1
    tl.flow_all(tl.slices, np.array([s, u]), tl.instants, np.array([t, t]))
    assert tl.slices[s].flows_out == [1, 2] and tl.instants[t].flows_in == [1, 2, 3]
    assert tl.slices[u].flows_out == [3] and tl.flows == 3
    assert tl.slices[u].args is a and not tl.slices[u].flows_in


def test_fields_take_only_the_named_fields_of_every_chunk(tmp_path):
    tr = read_trace(tiny(tmp_path / "t.iowt"))
    full = tr.records("request")
    got = tlm._fields(tr, "request", ("seq", "issue_ns", "comm"))
    assert got.dtype.names == ("seq", "issue_ns", "comm")
    assert got["seq"].tolist() == full["seq"].tolist() == [1, 2, 3]
    assert got["comm"].tolist() == full["comm"].tolist()
    some = tlm._fields(tr, "request", ("seq",), lambda v: v["seq"] != 2)
    assert some["seq"].tolist() == [1, 3]


def test_sorted_events_names_its_progress(monkeypatch):
    tl = tlm.Timeline()
    for i in range(1000):
        tl.slices.add(1, i, i + 5, "s", "x")
    said: list[str] = []
    monkeypatch.setattr(tlm, "phase", said.append)
    monkeypatch.setattr(tlm, "EVENTS_AT_ONCE", 100)
    assert len(list(tlm.sorted_events(tl, label="writing"))) == 2000
    share = [int(p.split("%")[0]) for p in said]
    assert said[0] == "0% writing" and share == sorted(share)
    assert len(said) > 10 and share[-1] >= 90
    said.clear()
    list(tlm.sorted_events(tl))
    assert not said  # no label, no progress
