"""The replay of `iowhy whatif` (analyzer/iowhy/whatif) on synthetic traces whose
answer is worked out by hand: the recording replayed as recorded gives back its
elapsed time, and a changed device moves only what waited on it.

Device of the worked examples (DEV): no positioning, 4 KiB in 200 ns on the media and
over the interface, a flush 1,000 ns plus what it destages, no path."""

from __future__ import annotations

import dataclasses
import json
import subprocess


import numpy as np
import pytest

from iowhy import abi
from iowhy.traceformat import read_trace
from iowhy.model import classify
from iowhy.whatif import disk, predict, program, replay
from tracebuilder import (LOG_RANGE, fsync_through_flushes, helper, meta, off, req, task,
                          write_trace)

T, H = abi.WCTX_TASK, abi.WCTX_HARDIRQ
FSYNC = 74
RATE = 4096 * 10**9 // 200  # 4 KiB in 200 ns
DEV = disk.DiskParams("test", 0, 0, 0, RATE, RATE, 1 << 20, 1000, 1 << 30, False)
T0 = 1_000_000  # the traces' clock at the window start (times below are from it)


def spec(flushes: bool = True, cache: bool = False) -> replay.DeviceSpec:
    return replay.DeviceSpec(DEV.with_cache(cache), {"read": 0, "write": 0, "flush": 0}, 1,
                             flushes, False)


Replayed = tuple[int, replay.Result, predict.Prepared]


def replay_of(path, specs, service: str = "model") -> Replayed:
    prep = predict.prepare(read_trace(str(path)))
    rp = replay.Replay(prep.progs, prep.births, prep.reqs, prep.anchor_actor,
                       prep.anchor_t, specs, service=service)
    res = rp.run(prep.cm.window.start_ns)
    root = prep.cm.root
    end = int(res.death[root] + prep.cm.window.end_ns - prep.cm.timeline.death[root])
    return end - prep.cm.window.start_ns, res, prep


def fsync_trace(tmp_path, meta_obj=None, sectors=(8, 16)) -> str:
    """tracebuilder.fsync_through_flushes, from T0."""
    return fsync_through_flushes(tmp_path / "fsync.iowt", t=T0, meta_obj=meta_obj,
                                 sectors=sectors)


def test_identity_replay_gives_back_the_recording(tmp_path):
    p = fsync_trace(tmp_path)
    el, res, prep = replay_of(p, [spec()], service="recorded")
    assert el == 3100
    assert res.flushes == 2 and res.stuck == 0 and res.forced == 0
    assert prep.progs.linked_waits == 2 and prep.progs.linked_unplaced == 0


def test_model_replay_and_nobarrier_worked_out(tmp_path):
    p = fsync_trace(tmp_path)
    el, res, _ = replay_of(p, [spec()])
    assert el == 3100  # the device model charges what was recorded
    # without flushes: write 2 is a plain write [400, 600); the thread resumes at 600
    el, res, _ = replay_of(p, [spec(flushes=False)])
    assert el == 110 + 190 + 110 + 190 + 500
    assert res.flushes == 0


def test_predict_nobarrier_attribution_and_changes(tmp_path, monkeypatch):
    p = fsync_trace(tmp_path)
    tr = read_trace(p)
    prep = predict.prepare(tr)
    # the device is too small to fit from 2 requests: give it the worked example's
    prep.fits[0] = {"disk": DEV.as_dict(), "path_ns": {"read": 0, "write": 0, "flush": 0},
                    "queue_depth": 1, "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, predict.Scenario(nobarrier=True), prep)
    assert r["measured_elapsed_ns"] == 3100
    assert r["baseline_elapsed_ns"] == 3100
    assert r["predicted_elapsed_ns"] == 1100
    pa = r["predicted_attribution_ns"]
    assert sum(pa.values()) == 1100
    assert {k: v for k, v in pa.items() if v} == {"cpu": 720, "data": 380}
    assert r["attribution_ns"]["data"] == 190 + 2190
    texts = [c["text"] for c in r["changes"]]
    assert any(t.startswith("data ") for t in texts), texts
    assert set(r) >= {"measured_elapsed_ns", "predicted_elapsed_ns", "predicted_attribution_ns",
                      "assumptions", "cannot_tell", "devices"}
    assert r["devices"][0]["kernel_flushes"] is False
    json.dumps(r, allow_nan=False)


def test_write_cache_off_sends_no_flush_and_writes_go_to_the_media(tmp_path):
    p = fsync_trace(tmp_path)
    tr = read_trace(p)
    prep = predict.prepare(tr)
    prep.fits[0] = {"disk": DEV.with_cache(True).as_dict(),
                    "path_ns": {"read": 0, "write": 0, "flush": 0}, "queue_depth": 1,
                    "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, predict.Scenario(write_cache="off"), prep)
    assert r["devices"][0]["disk"]["write_cache"] == "off"
    assert r["replay"]["flushes"] == 0
    assert r["predicted_elapsed_ns"] == 1100


SEEKS = dataclasses.replace(DEV, t2t_ns=1000, full_stroke_ns=2000)


OFF = predict.Scenario(write_cache="off")
IN_LOG = (LOG_RANGE[0] + 8, LOG_RANGE[0] + 16)  # no data written: journal writes only


@pytest.mark.parametrize("fstype,options,scenario,dev,sectors,said", [
    ("ext4", "rw,relatime", OFF, SEEKS, (8, 16), True),
    ("ext4", "rw,relatime", predict.Scenario(nobarrier=True), SEEKS, (8, 16), False),
    ("ext4", "rw,relatime", OFF, DEV, (8, 16), False),
    ("ext4", "rw,relatime", OFF, SEEKS, IN_LOG, False),
    ("ext4", "rw,nodelalloc", OFF, SEEKS, (8, 16), False),
    ("xfs", "rw,relatime", OFF, SEEKS, (8, 16), False)])
def test_write_cache_off_on_ext4_says_the_placement_is_kept(tmp_path, fstype, options,
                                                            scenario, dev, sectors, said):
    """ext4 places small files' data at writeback by the CPU the writeback runs on; a
    write-through disk makes the writeback wait and move between CPUs, which the
    recording cannot show. The prediction says so for --write-cache off, of an ext4
    with delayed allocation, on a device recorded with its write cache on that was
    written data and that seeks; not where no data was written or a move costs no
    positioning."""
    m = meta(fstype)
    m["filesystems"][0]["options"] = options
    tr = read_trace(fsync_trace(tmp_path, m, sectors))
    prep = predict.prepare(tr)
    assert set(prep.reqs.cls[prep.reqs.kind == disk.WRITE].tolist()) == (
        {classify.LOG} if sectors == IN_LOG else {classify.DATA})
    prep.fits[0] = {"disk": dev.with_cache(True).as_dict(),
                    "path_ns": {"read": 0, "write": 0, "flush": 0}, "queue_depth": 1,
                    "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, scenario, prep)
    lines = [c for c in r["cannot_tell"] if c.startswith("where ext4 would place")]
    assert len(lines) == int(said), r["cannot_tell"]
    if said:
        assert "on sdz:" in lines[0] and "a seek per move" in lines[0]
        assert r["cannot_tell"].index(lines[0]) == 1  # beside "other requests"


def helper_trace(tmp_path, dev_ns: int = 1000) -> str:
    """Thread 100 fsyncs [110, 140 + dev_ns + 65): it wakes kworker 50 at 110 (the
    kworker runs [120, 150), submits a log write at 140 and waits [150, 140 + dev_ns)
    for it, runs 60 more and wakes the thread at its end). Before that, the kworker ran
    a job of another process's, [20, 100), woken by it."""
    t = T0
    fl = abi.RQ_ORIGIN
    done = 140 + dev_ns
    reqs = [req(t + 140, t + done, submit=t + 140, sector=8, seq=1, flags=fl, tid=50)]
    wake = done + 10 + 50
    end = wake + 5 + 100
    helpers = [off(50, t + 0, t + 20, waking=t + 10, waker=777, ctx=T, comm="other"),
               off(50, t + 100, t + 120, waking=t + 110, waker=100, ctx=T, comm="star"),
               off(50, t + 150, t + done + 10, waking=t + done, ctx=H, rq_seq=1),
               off(50, t + wake + 1, t + end, waking=t + end - 1, waker=777, ctx=T,
                   comm="other")]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    offs = [off(100, t + 110, t + wake + 5, waking=t + wake, waker=50, ctx=T,
                comm="kworker/0:1", syscall=FSYNC)]
    return write_trace(tmp_path / "helper.iowt", start=t, end=t + end, requests=reqs,
                       offcpu=offs, helpers=helpers,
                       tasks=[task(100, t), task(100, t + end, abi.TASK_EXIT)])


def test_a_wait_on_a_helper_follows_the_helpers_request(tmp_path):
    # recorded: the log write took 1000 ns; on the test device a 4 KiB write takes 200:
    # the kworker is woken 800 ns sooner, and so is the thread
    p = helper_trace(tmp_path, dev_ns=1000)
    el_rec, _, prep = replay_of(p, [spec()], service="recorded")
    assert el_rec == 140 + 1000 + 10 + 50 + 5 + 100
    el, res, _ = replay_of(p, [spec()])
    assert el == el_rec - 800
    # the other process's job [20, 100) is none of the workload's: idle in the replay
    st = prep.progs
    assert st.kept_episodes < st.episodes


def handover_trace(tmp_path) -> str:
    """syncfs's shape: thread 100 runs [0, 1000), wakes kworker 50 at 1000 (handing it
    the writeback) and waits [1005, 2115) for it. The kworker was asleep and not followed
    before: its helper record opens at the waking (start = waking = 1000, the recorder's
    way), so the record's wait is empty. It waits for a CPU [1000, 1010), runs [1010,
    1050) (submits a data write at 1040, device [1040, 2040)), waits [1050, 2050) for
    it, runs [2050, 2110) and wakes the thread at 2110; the thread runs [2115, 2215)
    and exits."""
    t = T0
    reqs = [req(t + 1040, t + 2040, submit=t + 1040, sector=8, seq=1, flags=abi.RQ_ORIGIN,
                tid=50)]
    helpers = [off(50, t + 1000, t + 1010, waking=t + 1000, waker=100, ctx=T, comm="sync"),
               off(50, t + 1050, t + 2050, waking=t + 2040, ctx=H, rq_seq=1),
               off(50, t + 2111, t + 2215, waking=t + 2214, waker=777, ctx=T,
                   comm="other")]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    offs = [off(100, t + 1005, t + 2115, waking=t + 2110, waker=50, ctx=T,
                comm="kworker/u8:7", syscall=306)]
    return write_trace(tmp_path / "handover.iowt", start=t, end=t + 2215, requests=reqs,
                       offcpu=offs, helpers=helpers,
                       tasks=[task(100, t), task(100, t + 2215, abi.TASK_EXIT)])


def test_a_helper_starts_the_work_when_it_is_handed_over(tmp_path):
    """A helper stretch opened at its waking (an empty wait: no timeline segment) waits,
    in the replay, for its waker to reach that waking: the writeback a syncfs hands a
    kworker does not run before the syncfs, and stays on the syncfs's critical path
    (helper-cpu, helper-runqueue, data) when the device changes."""
    p = handover_trace(tmp_path)
    el_rec, res, prep = replay_of(p, [spec()], service="recorded")
    assert el_rec == 2215
    # the write takes 200 ns on the test device instead of 1,000: the kworker wakes the
    # thread 800 ns sooner, at 1,310, and no sooner
    el, res, _ = replay_of(p, [spec()])
    assert el == 2215 - 800
    kw = int(np.flatnonzero(prep.cm.timeline.tids == 50)[0])
    st = prep.progs
    a, b = int(st.first[kw]), int(st.first[kw + 1])
    assert st.gate is not None and st.gate[a:b].sum() == 1
    g = a + int(np.flatnonzero(st.gate[a:b])[0])
    assert st.kind[g] == program.WAIT_ACTOR and st.dep[g] == prep.cm.root
    assert st.ra[g] == st.rb[g] == T0 + 1000
    assert res.step_end[g] == T0 + 1000  # the kworker's job starts at the hand-over
    tr = read_trace(p)
    prep = predict.prepare(tr)
    prep.fits[0] = {"disk": DEV.as_dict(), "path_ns": {"read": 0, "write": 0, "flush": 0},
                    "queue_depth": 1, "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, predict.Scenario(nobarrier=True), prep)
    assert r["predicted_elapsed_ns"] == 2215 - 800
    # the thread: on CPU [0, 1005) and [1315, 1415), waiting for one [1310, 1315); its
    # wait [1005, 1310) is the kworker's: waiting for a CPU [1005, 1010) and [1240, 1250),
    # on one [1010, 1050) and [1250, 1310), its write [1050, 1240): all of it level one
    # data (the write's completion handed the kworker the work that woke the thread),
    # the kworker's own time its level two
    pa = r["predicted_attribution_ns"]
    assert {k: v for k, v in pa.items() if v} == {"cpu": 1105, "runqueue": 5, "data": 305}
    detail = r["predicted_attribution_detail_ns"]["data"]
    assert {k: v for k, v in detail.items() if v} == {
        "helper-runqueue": 15, "helper-cpu": 100, "data": 190}, detail


def fork_trace(tmp_path) -> str:
    """sh (100) forks a child (101) at 50 and waits [60, 2100) in wait4 until it exits;
    the child reads [100, 2000) from the disk (device [100, 2000)), exits at 2050."""
    t = T0
    reqs = [req(t + 100, t + 2000, op=abi.OP_READ, submit=t + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, tid=101)]
    offs = [off(100, t + 60, t + 2100, waking=t + 2050, waker=101, ctx=T, comm="child",
                syscall=61),
            off(101, t + 100, t + 2000, waker=0, ctx=H, rq_seq=1, syscall=0)]
    tasks = [task(100, t),
             {"tid": 101, "tgid": 101, "parent_tgid": 100, "ts_ns": t + 50,
              "event_u16": abi.TASK_FORK},
             {"tid": 101, "tgid": 101, "ts_ns": t + 2050, "event_u16": abi.TASK_EXIT},
             task(100, t + 2200, abi.TASK_EXIT)]
    return write_trace(tmp_path / "fork.iowt", start=t, end=t + 2200, requests=reqs,
                       offcpu=offs, tasks=tasks)


def test_a_child_starts_where_its_parent_forked_it(tmp_path):
    p = fork_trace(tmp_path)
    el, res, prep = replay_of(p, [spec()], service="recorded")
    assert el == 2200
    child = int(np.flatnonzero(prep.cm.timeline.tids == 101)[0])
    assert prep.births.parent[child] == prep.cm.root
    # the read costs 200 ns instead of 1,900: everything after it moves 1,700 sooner
    el, res, _ = replay_of(p, [spec()])
    assert el == 2200 - 1700
    assert res.birth[child] == T0 + 50


def test_cli_whatif_text_json_and_fit(tmp_path, capsys):
    """`iowhy whatif` in-process (the installed CLI runs it in the tests below)."""
    from iowhy.cli import main
    p = fsync_trace(tmp_path)

    def run(*a: str) -> subprocess.CompletedProcess:
        rc = main(["whatif", *a])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["whatif", *a], rc, out, err)
    r = run(p, "--nobarrier")
    assert r.returncode == 0, r.stderr
    assert "WHERE THE TIME WOULD GO" in r.stdout and "predicted" in r.stdout
    assert "WHAT THE TRACE CANNOT TELL" in r.stdout
    j = run(p, "--disk", "ssd", "--json")
    assert j.returncode == 0, j.stderr
    d = json.loads(j.stdout)
    assert d["schema"] == "iowhy-whatif/1" and d["scenario"]["disk"] == "ssd"
    assert sum(d["predicted_attribution_ns"].values()) == d["predicted_elapsed_ns"]
    prof = tmp_path / "dev.json"
    f = run(p, "--fit", "-o", str(prof))
    assert f.returncode == 0, f.stderr
    assert json.loads(prof.read_text())["schema"] == "iowhy-whatif-profile/1"
    assert run(p, "--disk", str(prof)).returncode == 0
    # its refusals: test_whatif_cli.py


def test_a_trace_without_wakeup_links_is_refused(tmp_path, iowhy_bin):
    # format-4 records with no waker at all (converted from another tool): no causal links
    reqs = [req(T0 + 100, T0 + 300, sector=8, seq=1)]
    p = write_trace(tmp_path / "nolinks.iowt", start=T0, end=T0 + 1000, requests=reqs,
                    offcpu=[off(100, T0 + 110, T0 + 300)], recorder={})
    r = subprocess.run([*iowhy_bin, "whatif", p], capture_output=True, text=True)
    assert r.returncode == 1
    assert "no wakeup links" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_trace_without_an_attribution_is_refused(tmp_path, iowhy_bin):
    """Every off-CPU record lost (the analysis' attribution_unavailable): nothing says
    what a thread waited for. whatif says so in one line; the page has no section."""
    import htmlcheck
    reqs = [req(T0 + 100, T0 + 300, submit=T0 + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN)]
    p = write_trace(tmp_path / "nooff.iowt", start=T0, end=T0 + 1000, requests=reqs,
                    tasks=[task(100, T0), task(100, T0 + 1000, abi.TASK_EXIT)],
                    counters={"lost_ringbuf_offcpu": 40})
    r = subprocess.run([*iowhy_bin, "whatif", p, "--nobarrier"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert "no attribution: every off-CPU record was lost" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    text = htmlcheck.render(p, tmp_path / "r.html")
    assert 'id="whatif"' not in text and 'href="#whatif"' not in text


@pytest.mark.parametrize("bad", ["{}", "[]", '{"schema": "iowhy-whatif-profile/1"}',
                                 '{"schema": "iowhy-whatif-profile/1", "disk": '
                                 '{"media_rate": 0, "iface_rate": 1}}'])
def test_bad_profiles_are_one_line_errors(tmp_path, bad):
    f = tmp_path / "p.json"
    f.write_text(bad)
    with pytest.raises(predict.WhatifError, match="not a device profile"):
        predict.load_profile(str(f))


def test_the_html_report_has_a_what_if_section(tmp_path):
    import htmlcheck
    text = htmlcheck.render(fsync_trace(tmp_path), tmp_path / "r.html")
    htmlcheck.assert_self_contained(text)
    htmlcheck.assert_complete(text)
    sec = text[text.index('<section id="whatif">'):]
    sec = sec[:sec.index("</section>")]
    assert 'href="#whatif"' in text
    for name in ("barriers off", "write cache off", "the emulated ssd"):
        assert f"<td>{name}</td>" in sec
    assert "What the trace cannot tell" in sec
    for caveat in ("may issue other requests", "keep their recorded length",
                   "as busy as it was then"):
        assert caveat in sec, caveat


def test_no_what_if_section_without_wakeup_links(tmp_path):
    import htmlcheck
    reqs = [req(T0 + 100, T0 + 300, sector=8, seq=1)]
    p = write_trace(tmp_path / "nolinks.iowt", start=T0, end=T0 + 1000, requests=reqs,
                    offcpu=[off(100, T0 + 110, T0 + 300)], recorder={})
    text = htmlcheck.render(p, tmp_path / "r.html")
    assert 'id="whatif"' not in text and 'href="#whatif"' not in text


def test_a_cycle_of_waits_is_broken_after_the_recorded_length():
    """Two actors each waiting for the other's end (records no real run makes, but a
    damaged trace can): the wait that started first ends after its recorded length,
    then the other follows, and the replay says how many it forced."""
    from iowhy.whatif import program
    from iowhy.whatif.requests import RequestTable
    z = np.zeros(0, np.int64)
    progs = program.Programs(
        first=np.array([0, 1, 2]), kind=np.array([program.WAIT_ACTOR] * 2, np.int8),
        ra=np.array([0, 5]), rb=np.array([10, 10]), dep=np.array([1, 0]),
        seg=np.array([0, 1]))
    births = program.Births(parent=np.array([-1, -1]), at=np.array([0, 5]))
    reqs = RequestTable(seq=z, dev=z, devices=[], cls=z.astype(np.int8),
                        kind=z.astype(np.int8), offset=z, nbytes=z, iflags=z,
                        flush_seq=z.astype(bool), is_ff=z.astype(bool), arrive=z, issue=z,
                        data_done=z, done=z, tid=z, origin=z.astype(bool),
                        observed=z.astype(bool))
    res = replay.Replay(progs, births, reqs, z, z, []).run(0)
    assert res.forced == 1 and res.stuck == 0
    assert list(res.death) == [10, 10]


def test_the_report_replays_no_trace_too_large(tmp_path, monkeypatch):
    tr = read_trace(fsync_trace(tmp_path))
    from iowhy.analysis import AnalysisConfig, analyze
    full = analyze(tr, AnalysisConfig(keep_causal=True))
    monkeypatch.setattr(predict, "REPORT_MAX_STEPS", 1)
    w = predict.for_report(tr, full)
    assert "not replayed for the report" in w["note"] and "iowhy whatif" in w["note"]


def test_a_wait_for_a_cpu_moves_with_the_sleep_before_it():
    """The machine's waits for a CPU after sleeps of each length (program.WakeLatency):
    a wait recorded after a long sleep, replayed after a short one, takes the same
    percentile of the short sleeps' distribution; a bin with too few wakeups moves
    nothing."""
    from iowhy.whatif.program import WakeLatency
    pct = [np.percentile(np.arange(0, 1000), np.arange(101)),  # < 20 us: 0-1 us
           None, None, None, None, None,
           np.percentile(np.arange(0, 100_000, 100), np.arange(101))]  # >= 10 ms
    w = WakeLatency((0, 20_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000), pct)
    # the median after a 20 ms sleep (50 us) becomes the median after a 5 us one
    assert w.moved(50_000, 20_000_000, 5_000) == pytest.approx(500, abs=2)
    assert w.moved(50_000, 20_000_000, 15_000_000) == 50_000  # the same bin
    assert w.moved(50_000, 20_000_000, 200_000) == 50_000  # no wakeups in that bin


def polling_trace(tmp_path, syscall: int) -> str:
    """fio's shape: the main thread (100) sleeps 10 ns on its timer again and again
    (20 times from 60 on, 1 ns of CPU between), in `syscall`, while a job thread (101,
    forked at 50) reads [100, 2000) from the disk and exits at 2010; the main thread
    exits at 2200."""
    t = T0
    reqs = [req(t + 100, t + 2000, op=abi.OP_READ, submit=t + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, tid=101)]
    offs = [off(101, t + 100, t + 2000, waker=0, ctx=H, rq_seq=1, syscall=0)]
    s = 60
    while s + 11 < 2200:
        offs.append(off(100, t + s, t + s + 100, waker=0, ctx=H, syscall=syscall))
        s += 101
    tasks = [task(100, t),
             {"tid": 101, "tgid": 101, "parent_tgid": 100, "ts_ns": t + 50,
              "event_u16": abi.TASK_FORK},
             {"tid": 101, "tgid": 101, "ts_ns": t + 2010, "event_u16": abi.TASK_EXIT},
             task(100, t + 2200, abi.TASK_EXIT)]
    return write_trace(tmp_path / f"poll-{syscall}.iowt", start=t, end=t + 2200,
                       requests=reqs, offcpu=offs, tasks=tasks)


def test_a_polling_loop_stops_when_the_work_it_polls_is_done(tmp_path):
    """polling_trace in clock_nanosleep (230). On the test device the read takes 200:
    the job exits at 310 and the polling ends with it."""
    p = polling_trace(tmp_path, 230)
    el_rec, _, prep = replay_of(p, [spec()], service="recorded")
    assert prep.progs.kind.tolist().count(program.POLL) >= 3
    # replayed as recorded, the polling ends with the job, not at the next tick
    assert 2010 <= el_rec <= 2200
    el, res, _ = replay_of(p, [spec()])
    assert el < 500, el


def test_timer_sleeps_inside_another_call_are_no_polling_loop(tmp_path):
    """polling_trace with the main thread's timer sleeps inside openat (257: a
    filesystem's timed wait, not a sleeping syscall, model/wakeups.py SLEEP_SYSCALLS,
    which the analysis' polling loops are made of too): the work's own, kept at their
    recorded length; the thread exits at 2,200 as recorded."""
    el, _, prep = replay_of(polling_trace(tmp_path, 257), [spec()])
    assert prep.progs.kind.tolist().count(program.POLL) == 0
    assert el == 2200


def test_a_poller_that_others_wait_for_keeps_polling(tmp_path):
    """fio's start: its main thread (100) forks a job (101) at 50 and polls on its timer
    (clock_nanosleep, 100 ns at a time from 55, 1 ns of CPU between); the job waits
    [60, 156) for the main thread, which starts it after its first sleep (at 155), and
    reads [160, 1160) from the disk; the job exits at 1170, the main thread at 1300.
    The job waits for the poller itself: the poller's sleep is what it waits out, kept
    at its length, and the replay as recorded gives back the recording (ending the
    polling there would start the job 100 ns early)."""
    t = T0
    reqs = [req(t + 160, t + 1160, op=abi.OP_READ, submit=t + 160, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, tid=101)]
    offs = [off(101, t + 60, t + 156, waking=t + 155, waker=100, ctx=T, comm="fio",
                syscall=202),
            off(101, t + 160, t + 1160, waker=0, ctx=H, rq_seq=1, syscall=0)]
    s = 55
    while s + 101 < 1300:
        offs.append(off(100, t + s, t + s + 100, waker=0, ctx=H, syscall=230))
        s += 101
    tasks = [task(100, t),
             {"tid": 101, "tgid": 101, "parent_tgid": 100, "ts_ns": t + 50,
              "event_u16": abi.TASK_FORK},
             {"tid": 101, "tgid": 101, "ts_ns": t + 1170, "event_u16": abi.TASK_EXIT},
             task(100, t + 1300, abi.TASK_EXIT)]
    p = write_trace(tmp_path / "start.iowt", start=t, end=t + 1300, requests=reqs,
                    offcpu=offs, tasks=tasks)
    el, res, prep = replay_of(p, [spec()], service="recorded")
    job = int(np.flatnonzero(prep.cm.timeline.tids == 101)[0])
    assert res.death[job] - T0 == 1170
    assert 1170 <= el <= 1300


def test_a_loop_workers_wait_for_its_server_is_the_request_it_serves(tmp_path):
    """Thread 100 writes (request 1, issued at 100, done at 1060) and waits [100, 1070)
    for kworker 50, which woke it at 1065 (the loop worker completes the request and
    the thread's wait). The kworker, handed the work at 100, waits [110, 1050) for the
    process serving its backing file (woken by "emudisk", another task, no request link:
    an I/O wait completed in another task), then runs. No request completed just
    before that wait ended, but request 1 was in flight all through it and completed
    right after: the kworker served it, and in the replay its wait is that request's
    service. Replayed as recorded, the thread exits at 1210: the kworker's wait now
    ends at the request's completion (1060), 10 after it did (it woke first, then
    completed the request), and what follows moves by that. On the test device the
    request takes 200 ([100, 300)); the kworker runs 15 and wakes the thread at 315,
    which waits 5 for a CPU, runs its last 130 and exits at 450."""
    t = T0
    reqs = [req(t + 100, t + 1060, submit=t + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN)]
    offs = [off(100, t + 100, t + 1070, waking=t + 1065, waker=50, ctx=T,
                comm="kworker/u8:1", syscall=74)]
    helpers = [helper(50, t + 100, t + 105, waking=t + 100, waker=100, ctx=T, comm="w"),
               helper(50, t + 110, t + 1050, waker=777, ctx=T, comm="emudisk",
                      flags=abi.OFF_IOWAIT),
               helper(50, t + 1066, t + 1200, waker=777, ctx=T, comm="other")]
    p = write_trace(tmp_path / "loopw.iowt", start=t, end=t + 1200, requests=reqs,
                    offcpu=offs, helpers=helpers,
                    tasks=[task(100, t), task(100, t + 1200, abi.TASK_EXIT)])
    el_rec, _, prep = replay_of(p, [spec()], service="recorded")
    kw = int(np.flatnonzero(prep.cm.timeline.tids == 50)[0])
    st = prep.progs
    wait = [k for k in range(int(st.first[kw]), int(st.first[kw + 1]))
            if st.ra[k] == T0 + 110]
    assert len(wait) == 1 and st.kind[wait[0]] == program.WAIT_RQ
    assert int(prep.reqs.seq[st.dep[wait[0]]]) == 1
    assert el_rec == 1210
    el, _, _ = replay_of(p, [spec()])
    assert el == 450


TIMER_END = 150 + 3_000_000  # the kworker's timer sleep ends (from T0)


def helper_timer_trace(tmp_path) -> str:
    """Thread 100 hands kworker 50 work at 90 and, in openat from 100, waits for it;
    the kworker waits for a CPU [90, 95), runs [95, 150), sleeps on its own timer for
    3 ms, [150, TIMER_END) (woken from an interrupt, no request completed within
    program.GUESS_NS before), runs 41 ns, waking the thread at TIMER_END + 40, and
    sleeps; the thread waits 10 for a CPU, runs 100 and exits at TIMER_END + 150. A
    read [10, 50) gives the trace its device."""
    t, e = T0, T0 + TIMER_END
    reqs = [req(t + 10, t + 50, op=abi.OP_READ, submit=t + 10, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, tid=100)]
    offs = [off(100, t + 10, t + 50, waker=0, ctx=H, rq_seq=1, syscall=0),
            off(100, t + 100, e + 50, waking=e + 40, waker=50, ctx=T, comm="kworker/0:1",
                syscall=257)]
    helpers = [helper(50, t + 90, t + 95, waking=t + 90, waker=100, ctx=T, comm="tar"),
               helper(50, t + 150, e, waker=0, ctx=H),
               helper(50, e + 41, e + 150, waker=777, ctx=T, comm="other")]
    return write_trace(tmp_path / "htimer.iowt", start=t, end=e + 150, requests=reqs,
                       offcpu=offs, helpers=helpers,
                       tasks=[task(100, t), task(100, e + 150, abi.TASK_EXIT)])


def test_a_helpers_own_timer_the_workload_waits_out_keeps_its_length(tmp_path):
    """The kworker's timer sleep ends while the thread waits for it: the helper slept in
    the middle of the thread's work, not waiting for work, and the replay keeps it (the
    analysis names it the thread's `sleep`): the thread exits at TIMER_END + 150 as
    recorded, where a helper's other waits cost nothing (without this, 3 ms sooner)."""
    p = helper_timer_trace(tmp_path)
    el, res, prep = replay_of(p, [spec()], service="recorded")
    kw = int(np.flatnonzero(prep.cm.timeline.tids == 50)[0])
    st = prep.progs
    steps = range(int(st.first[kw]), int(st.first[kw + 1]))
    timer = [k for k in steps if st.ra[k] == T0 + 150]
    assert len(timer) == 1 and st.kind[timer[0]] == program.FIXED
    assert el == TIMER_END + 150
    r = predict.predict(read_trace(p), predict.Scenario(nobarrier=True))
    assert r["attribution_ns"]["sleep"] == 3_000_000
    assert r["predicted_attribution_ns"]["sleep"] == 3_000_000


def hidden_runq_trace(tmp_path) -> str:
    """A kworker's long wait for a CPU hidden behind a slow request. Thread 100 runs
    [0, 100), handing kworker 50 work at 90; writes (request 1, device [100, 10100)) and
    waits for it [100, 10100), then for a CPU [10100, 10120); runs [10120, 10200), wakes
    the kworker again at 10200 and waits [10200, 10300) for it, then for a CPU [10300,
    10305); runs [10305, 10405), then 20 times 10 ns on a CPU and 10 ns off it, woken by
    another process after 8 and waiting 2 for a CPU; exits at 10805. Its waits for a
    CPU: 20 ns at most. The kworker, woken at 90 (its stretch opens there), waits for a
    CPU [90, 10090), 10,000 ns, hidden by the write; runs [10090, 10100); sleeps until
    10200, waits for a CPU [10200, 10215) (15 ns, within the thread's), runs [10215,
    10301) and wakes the thread at 10300."""
    t = T0
    reqs = [req(t + 100, t + 10100, submit=t + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN, tid=100)]
    offs = [off(100, t + 100, t + 10120, waking=t + 10100, ctx=H, rq_seq=1, syscall=1),
            off(100, t + 10200, t + 10305, waking=t + 10300, waker=50, ctx=T,
                comm="kworker/0:1", syscall=FSYNC)]
    for i in range(20):
        s = t + 10415 + 20 * i
        offs.append(off(100, s, s + 10, waking=s + 8, waker=777, ctx=T, comm="other",
                        syscall=0))
    helpers = [off(50, t + 90, t + 10090, waking=t + 90, waker=100, ctx=T, comm="tar"),
               off(50, t + 10100, t + 10215, waking=t + 10200, waker=100, ctx=T,
                   comm="tar"),
               off(50, t + 10301, t + 10400, waker=777, ctx=T, comm="other")]
    for h in helpers:
        h["flags_u16"] |= abi.OFF_HELPER
    return write_trace(tmp_path / "hidden.iowt", start=t, end=t + 10805, requests=reqs,
                       offcpu=offs, helpers=helpers,
                       tasks=[task(100, t), task(100, t + 10805, abi.TASK_EXIT)])


def test_a_helpers_wait_for_a_cpu_lasts_at_most_what_the_workload_met(tmp_path):
    """The kworker's 10,000 ns wait for a CPU, hidden in the recording by the 10,000 ns
    write, would be on the critical path once the write takes 200 ns: the replay keeps
    it at most as long as 99% of the thread's waits for a CPU (of 22: the longest, 20
    ns), and keeps the kworker's 15 ns one. Worked out: the write [100, 300), the
    thread's CPU wait [300, 320), on CPU [320, 400); the kworker waits for a CPU [90,
    110) (capped), runs [110, 120), sleeps until the thread wakes it at 400, waits [400,
    415), runs [415, 501) and wakes the thread at 500, which waits for a CPU [500, 505),
    runs [505, 605), then 400 more as recorded: it exits at 1,005. Uncapped, the
    kworker's first job ends at 10,100 and the thread exits at 10,705."""
    p = hidden_runq_trace(tmp_path)
    el_rec, _, prep = replay_of(p, [spec()], service="recorded")
    assert el_rec == 10805
    assert (prep.progs.runq_bound, prep.progs.runq_waits) == (20, 22)
    el, res, _ = replay_of(p, [spec()])  # no cap: as before
    assert el == 10705 and res.capped == 0
    rp = replay.Replay(prep.progs, prep.births, prep.reqs, prep.anchor_actor,
                       prep.anchor_t, [spec()], helper_runq_cap=prep.progs.runq_bound)
    res = rp.run(prep.cm.window.start_ns)
    assert res.death[prep.cm.root] - T0 == 1005
    assert (res.capped, res.capped_ns) == (1, 10000 - 20)
    st = prep.progs
    kw = int(np.flatnonzero(prep.cm.timeline.tids == 50)[0])
    runq = [k for k in range(int(st.first[kw]), int(st.first[kw + 1]))
            if st.runq[k] and st.kind[k] == program.FIXED]
    assert [int(res.step_end[k] - res.step_start[k]) for k in runq] == [20, 15]
    # the prediction says so, with its figures
    tr = read_trace(p)
    prep = predict.prepare(tr)
    prep.fits[0] = {"disk": DEV.as_dict(), "path_ns": {"read": 0, "write": 0, "flush": 0},
                    "queue_depth": 1, "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, predict.Scenario(nobarrier=True), prep)
    assert r["predicted_elapsed_ns"] == 1005
    assert r["replay"]["helper_runqueue_cap"] == {
        "bound_ns": 20, "workload_waits": 22, "shortened": 1, "removed_ns": 9980,
        "baseline_shortened": 1, "baseline_removed_ns": 9980}
    line = [a for a in r["assumptions"] if "kernel helper's wait for a CPU" in a]
    assert len(line) == 1 and "(20 ns, of 22 waits;" in line[0], r["assumptions"]
    assert "1 shortened, 9.98 us in all" in line[0], line[0]
    assert "kernel helper's wait for a CPU is the machine's load" in predict.render(r)


def test_too_few_waits_for_a_cpu_bound_no_helpers_wait(tmp_path):
    """The handover trace: the thread waited for a CPU once (5 ns), the kworker twice
    10 ns; one wait says nothing of the machine's load, and the kworker keeps both."""
    tr = read_trace(handover_trace(tmp_path))
    prep = predict.prepare(tr)
    assert (prep.progs.runq_bound, prep.progs.runq_waits) == (-1, 1)
    prep.fits[0] = {"disk": DEV.as_dict(), "path_ns": {"read": 0, "write": 0, "flush": 0},
                    "queue_depth": 1, "measured": list(predict.fit.COLS), "assumed": []}
    r = predict.predict(tr, predict.Scenario(nobarrier=True), prep)
    assert r["replay"]["helper_runqueue_cap"]["shortened"] == 0
    assert any("keeps its recorded length (the workload's threads waited for a CPU 1 "
               "times" in a for a in r["assumptions"]), r["assumptions"]


def test_a_guessed_wait_ends_as_long_after_its_request_as_recorded(tmp_path):
    """Thread 100 writes (request 1, recorded [100, 1000)) and waits [100, 1310) in
    fsync, in iowait, woken at 1300 from an interrupt that names no request (the
    completion's way to it ran elsewhere): the replay guesses request 1, done 300
    before the waking, and
    keeps those 300. As recorded, the thread waits 10 for a CPU, runs [1310, 1400) and
    exits at 1400 (ending the wait at the completion gave 1100). On the test device the
    write takes 200, [100, 300): the wait ends at 600; what follows takes what it took."""
    t = T0
    reqs = [req(t + 100, t + 1000, submit=t + 100, sector=8, seq=1,
                flags=abi.RQ_TRACKED | abi.RQ_ORIGIN)]
    offs = [off(100, t + 100, t + 1310, waking=t + 1300, ctx=H, syscall=FSYNC,
                flags=abi.OFF_IOWAIT)]
    p = write_trace(tmp_path / "guess.iowt", start=t, end=t + 1400, requests=reqs,
                    offcpu=offs, tasks=[task(100, t), task(100, t + 1400, abi.TASK_EXIT)])
    el, _, prep = replay_of(p, [spec()], service="recorded")
    st = prep.progs
    k = int(np.flatnonzero(st.ra == t + 100)[0])
    assert st.kind[k] == program.WAIT_RQ and prep.progs.guessed == 1
    assert st.lag is not None and int(st.lag[k]) == 300
    assert el == 1400
    el, res, _ = replay_of(p, [spec()])
    assert int(res.step_end[k]) - t == 600
    assert el == 700
