"""whatif/predict.py: a scenario in words, the device each scenario makes of the
recorded one, and a prediction's own invariants: the predicted attribution sums to the
predicted elapsed time, the baseline is replayed once, the changes are those of 1% of
the elapsed time or more, largest first."""

from __future__ import annotations

import json

import pytest

import tracebuilder as tb
from iowhy import abi
from iowhy.categories import ATTRIBUTION_CATEGORIES
from iowhy.traceformat import read_trace
from iowhy.whatif import predict as PR

T0 = 1_000_000


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """tracebuilder.fsync_through_flushes: thread 100's fsync through a pre-flush, its
    FUA write and a post-flush."""
    tr = read_trace(tb.fsync_through_flushes(tmp_path_factory.mktemp("p") / "p.iowt", t=T0))
    return tr, PR.prepare(tr)


def test_scenarios_in_words():
    assert PR.Scenario().words() == "as recorded"
    sc = PR.Scenario(nobarrier=True, write_cache="off", disk="ssd")
    assert sc.words() == "--disk ssd --write-cache off --nobarrier"
    assert sc.as_dict() == {"nobarrier": True, "write_cache": "off", "disk": "ssd"}
    prof = PR.Scenario(profile={"x": 1}, profile_name="p.json")
    assert prof.words() == "--disk p.json" and prof.as_dict()["disk"] == "p.json"


def test_a_profile_that_cannot_be_read_is_one_error(tmp_path):
    with pytest.raises(PR.WhatifError, match="cannot read") as e:
        PR.load_profile(str(tmp_path / "none.json"))
    assert "--fit" in e.value.hint and "\n" not in str(e.value)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(PR.WhatifError, match="not a device profile"):
        PR.load_profile(str(tmp_path / "bad.json"))


def test_the_device_of_each_scenario(traced):
    _, prep = traced
    base = prep.fits[0]
    rec, info = PR._spec(base, prep.reqs, 0, None)
    assert rec.flushes and rec.params.cache_on
    # fitted with nothing measured: every parameter from the preset it leaned on
    assert base["measured"] == [] and info["model"] == \
        f"assumed ({base['prior']}: too few requests to fit)"
    fb = PR._fallback_fit(prep.reqs, 0)
    assert fb["fallback"] == "hdd-7200"  # sdz is rotational
    assert PR._spec(fb, prep.reqs, 0, None)[1]["model"] == \
        "assumed (hdd-7200: too few requests to fit)"
    nb, _ = PR._spec(base, prep.reqs, 0, PR.Scenario(nobarrier=True))
    assert not nb.flushes and nb.params.cache_on
    wt, _ = PR._spec(base, prep.reqs, 0, PR.Scenario(write_cache="off"))
    assert not wt.flushes and not wt.params.cache_on
    ssd, info = PR._spec(base, prep.reqs, 0, PR.Scenario(disk="ssd"))
    assert ssd.params.name == "ssd" and ssd.queue_depth == 1 and ssd.flushes
    assert ssd.params.size_bytes == rec.params.size_bytes
    assert info["model"].startswith("preset ssd")


def test_a_prediction_and_its_invariants(traced):
    tr, prep = traced
    r = PR.predict(tr, PR.Scenario(nobarrier=True), prep)
    json.dumps(r, allow_nan=False)
    assert r["schema"] == PR.SCHEMA and r["measured_elapsed_ns"] == 3100
    assert set(r["predicted_attribution_ns"]) == set(ATTRIBUTION_CATEGORIES)
    assert sum(r["predicted_attribution_ns"].values()) == r["predicted_elapsed_ns"]
    assert sum(r["baseline_attribution_ns"].values()) == r["baseline_elapsed_ns"]
    # no flush reaches the device: faster than the same device with its flushes
    assert r["predicted_elapsed_ns"] < r["baseline_elapsed_ns"]
    assert r["replay"]["flushes"] == 0 < r["replay"]["baseline_flushes"]
    assert r["replay"]["recorded_flushes"] == 2
    assert r["replay"]["requests"] == len(prep.reqs) == 4
    d = [c["delta_ns"] for c in r["changes"]]
    assert d == sorted(d, key=lambda x: -abs(x))
    assert all(abs(x) >= 0.01 * 3100 for x in d)
    for c in r["changes"]:
        assert c["delta_ns"] == c["predicted_ns"] - c["recorded_ns"]
        assert c["text"].startswith(c["category"] + " ")
    assert any(a.startswith("--nobarrier") for a in r["assumptions"])
    # the baseline is replayed once, then kept
    base = prep.baseline
    ssd = PR.predict(tr, PR.Scenario(disk="ssd"), prep)
    assert prep.baseline is base
    # another disk's path is the recorded device's: said for a preset, not otherwise
    path = [c for c in ssd["cannot_tell"] if c.startswith("each request's path")]
    assert len(path) == 1 and "--fit" in path[0]
    assert not [c for c in r["cannot_tell"] if c.startswith("each request's path")]
    assert PR.render(r).startswith("iowhy whatif")


def test_no_attribution_or_no_links_nothing_to_replay(traced):
    tr, prep = traced
    with pytest.raises(PR.WhatifError, match="no attribution"):
        PR.prepare_from(tr, {**prep.result, "attribution_unavailable": "all lost"})
    with pytest.raises(PR.WhatifError, match="no wakeup links"):
        PR.prepare_from(tr, {**prep.result, "_causal": None})


def test_changes_of_1_percent_or_more_largest_first(traced):
    _, prep = traced
    zero = {k: 0 for k in ATTRIBUTION_CATEGORIES}
    out = {"measured_elapsed_ns": 10_000,
           "attribution_ns": {**zero, "cpu": 1000, "data": 500, "barrier": 300, "log": 10},
           "predicted_attribution_ns": {**zero, "cpu": 1000, "data": 100, "log": 15,
                                        "read": 150},
           "replay": {"by_class_recorded": {"flush": {"requests": 2, "service_ns": 300},
                                            "data": {"requests": 4, "service_ns": 400}},
                      "by_class": {"data": {"requests": 4, "service_ns": 100}}}}
    ch = PR.changes(prep, out, None, None)
    assert [c["category"] for c in ch] == ["data", "barrier", "read"]  # log moves 0.05%
    assert ch[0]["text"] == ("data 500 ns would shrink to 100 ns: 4 -> 4 data/discard "
                             "requests, device 100 ns -> 25 ns each")
    assert ch[1]["text"] == "barrier 300 ns would go: 2 cache flushes x 150 ns no longer sent"
    assert ch[2]["text"] == "read 0 would grow to 150 ns"
    assert ch[1]["delta_ns"] == -300
    assert all(c["baseline_delta_ns"] == 0 for c in ch)  # no baseline given
    # The baseline (the replay with nothing changed) moves barrier by -200 and read by
    # +50 (under 1% of elapsed): the barrier line says so, the read line does not.
    out["baseline_attribution_ns"] = {**out["attribution_ns"], "barrier": 100, "read": 50}
    ch = PR.changes(prep, out, None, None)
    assert ch[1]["text"].endswith("(with nothing changed, the replay moves it -200 ns)")
    assert ch[1]["baseline_delta_ns"] == -200
    assert ch[2]["text"] == "read 0 would grow to 150 ns" and ch[2]["baseline_delta_ns"] == 50


def _write_through_commit(tmp_path, fstype: str, options: str = "rw,relatime") -> str:
    """An fsync on a write-through disk (the block layer dropped every PREFLUSH and
    FUA): thread 100 writes data [100, 300), then waits in fsync [410, 1000) for the
    last log write. ext4: the journal thread (50) logs commit 7 (LOGGING at 450, END at
    1010) with log writes at 500 [500, 700) and 800 [800, 1000) (its commit block);
    thread 60 writes to the log at 600 too. XFS: thread 100's iclog write (XLOG_WRITE
    at 450, ic_flags NEED_FLUSH | NEED_FUA) is its log write at 500, and it writes to
    the log again at 800. btrfs: the writes at 500 and 800 are its primary superblock
    (64 KiB into the partition, sector 2048) and its first mirror (64 MiB in). Times
    from t = 1e6."""
    t = 1_000_000
    fl = abi.RQ_TRACKED | abi.RQ_ORIGIN
    log_tid = 50 if fstype == "ext4" else 100
    comm = b"jbd2/sdz1-8" if fstype == "ext4" else b"star"
    at = {"btrfs": (2048 + 128, 2048 + 131072)}.get(
        fstype, (tb.LOG_RANGE[0] + 8, tb.LOG_RANGE[0] + 16))
    reqs = [tb.req(t + 100, t + 300, sector=1000, seq=1, flags=fl),
            tb.req(t + 500, t + 700, sector=at[0], seq=2, tid=log_tid, comm=comm,
                   flags=abi.RQ_ORIGIN | (fl if log_tid == 100 else 0)),
            tb.req(t + 800, t + 1000, sector=at[1], seq=3, tid=log_tid, comm=comm,
                   flags=abi.RQ_ORIGIN | (fl if log_tid == 100 else 0))]
    journal = []
    if fstype == "ext4":
        reqs.append(tb.req(t + 600, t + 650, sector=tb.LOG_RANGE[0] + 24, seq=4, tid=60,
                           comm=b"jbd2/sdz1-8", flags=abi.RQ_ORIGIN))
        journal = [tb.jev(abi.J_JBD2_LOGGING, t + 450, 7), tb.jev(abi.J_JBD2_END, t + 1010, 7)]
    elif fstype == "xfs":
        journal = [tb.jev(abi.J_XLOG_WRITE, t + 450, 9, tid=100, fs=abi.FS_XFS, aux0=3)]
    h = abi.WCTX_HARDIRQ
    offs = [tb.off(100, t + 110, t + 300, waker=0, ctx=h, rq_seq=1, syscall=1),
            tb.off(100, t + 410, t + 1000, waker=0, ctx=h, rq_seq=3, syscall=74)]
    m = tb.meta(fstype, write_cache="write through")
    m["filesystems"][0]["options"] = options
    return tb.write_trace(tmp_path / f"wt-{fstype}.iowt", start=t, end=t + 1100,
                          requests=reqs, journal=journal, offcpu=offs, meta_obj=m,
                          tasks=[tb.task(100, t), tb.task(100, t + 1100, abi.TASK_EXIT)])


@pytest.mark.parametrize("fstype,options,asked", [
    ("ext4", "rw,relatime", {3: abi.F_PREFLUSH | abi.F_FUA}),
    ("xfs", "rw,relatime", {2: abi.F_PREFLUSH | abi.F_FUA}),
    ("ext4", "rw,barrier=0", {}),
    ("btrfs", "rw,relatime", {2: abi.F_PREFLUSH | abi.F_FUA}),
    ("btrfs", "rw,nobarrier", {}),
])
def test_write_cache_on_sends_the_flushes_the_journal_asked_for(tmp_path, fstype,
                                                                options, asked):
    """A recording on a write-through disk carries no PREFLUSH or FUA; `--write-cache on`
    sends those the journal records say the filesystem asked for: ext4's commit block
    (the journal thread's last log write of the commit), XFS's iclog write (the log
    write its task submitted next), btrfs's primary superblock write (not its mirror);
    none under barrier=0 or nobarrier."""
    tr = read_trace(_write_through_commit(tmp_path, fstype, options))
    prep = PR.prepare(tr)
    got = {int(prep.reqs.seq[i]): int(prep.asked[i]) for i in range(len(prep.reqs))
           if prep.asked[i]}
    assert got == asked
    r = PR.predict(tr, PR.Scenario(write_cache="on"), prep)
    assert r["replay"]["asked_barriers"] == len(asked)
    assert r["replay"]["flushes"] == (2 if asked else 0)  # the disk has no FUA: pre, post
    assert r["replay"]["baseline_flushes"] == 0
    said = [c for c in r["cannot_tell"] if c.startswith("the recording sent no flush")]
    assert len(said) == 1 and f"({len(asked)} requests:" in said[0]
    # as recorded (write-through), nothing is asked
    assert PR.predict(tr, PR.Scenario(disk="ssd"), prep)["replay"]["asked_barriers"] == 0


def test_the_report_asks_a_write_through_recording_about_a_write_cache(tmp_path):
    """The HTML report's what-if: barriers off and the write cache off change nothing on
    a recording whose devices were all write-through; it asks for the write cache on,
    with and without barriers, instead (and the ssd, as for any)."""
    from iowhy.analysis import AnalysisConfig, analyze
    tr = read_trace(_write_through_commit(tmp_path, "ext4"))
    w = PR.for_report(tr, analyze(tr, AnalysisConfig(keep_causal=True)))
    got = {p["name"]: p for p in w["predictions"]}
    assert list(got) == ["write cache on", "write cache on, barriers off", "the emulated ssd"]
    assert got["write cache on"]["replay"]["flushes"] == 2
    assert got["write cache on, barriers off"]["replay"]["flushes"] == 0
    tr = read_trace(tb.fsync_through_flushes(tmp_path / "wb.iowt"))
    w = PR.for_report(tr, analyze(tr, AnalysisConfig(keep_causal=True)))
    assert [p["name"] for p in w["predictions"]] == [n for n, _ in PR.REPORT_SCENARIOS]


def test_the_replay_is_explained_as_deep_as_the_recording(tmp_path):
    """A chain of 9 threads, each woken by the next (100 by 101, ..., 107 by 108, which
    runs): the analysis follows it to its end (AnalysisConfig.causal_depth), and so
    must the prediction's attribution of the replay, or the chain's end reads wait-other
    "(depth limit)" there only. Thread 100+k waits [1010, 1100 - 5k) in futex, woken
    by 100+k+1 just before; a read [1001, 1002) gives the trace its device."""
    t = 1000
    tasks = [tb.task(100 + k, t) for k in range(9)]
    offs = [tb.off(100 + k, t + 10, t + 100 - 5 * k, waking=t + 99 - 5 * k, waker=101 + k,
                   ctx=abi.WCTX_TASK, comm="w", syscall=202) for k in range(8)]
    reqs = [tb.req(t + 1, t + 2, op=abi.OP_READ, seq=1, flags=abi.RQ_TRACKED | abi.RQ_ORIGIN)]
    tr = read_trace(tb.write_trace(tmp_path / "chain.iowt", start=t, end=t + 200,
                                   tasks=tasks, offcpu=offs, requests=reqs))
    r = PR.predict(tr, PR.Scenario(nobarrier=True))
    assert r["attribution_ns"]["wait-other"] == 0
    assert r["baseline_attribution_ns"] == r["attribution_ns"]
