"""The causal attribution over a two-level stack: a loop device (loop1) whose backing file
lives on the filesystem of disk sdz, both recorded. A request of the loop device is only
carried by its loop worker, which serves it with I/O of the backing file on sdz (an upper
flush: the lower filesystem's fsync of the file, i.e. its data writes, journal writes and
cache flushes). A wait on it is named by the loop device's own service (its flushes, its
stage: the service, not the server); how sdz served the loop device is `stack_service`.
An upper flush in flight is no flush of sdz. Window [1000, 1200); the expected figures
are worked out in the comments."""

from __future__ import annotations

import copy

from iowhy import abi

import tracebuilder as tb

UPPER = (7, 1)
UPPER_LOG = (500_000, 600_000)  # the upper filesystem's journal (loop1 sectors)
K, H = abi.WCTX_SOFTIRQ, abi.WCTX_HARDIRQ
FSYNC = 74


def stack_meta() -> dict:
    m = tb.meta()
    m["devices"].append({"name": "loop1", "major": UPPER[0], "minor": UPPER[1],
                         "size_bytes": 1 << 28, "rotational": 0, "write_cache": "write back",
                         "fua": 0, "kind": "loop",
                         "loop": {"backing_file": "/mnt/t/img", "offset_bytes": 0,
                                  "sizelimit_bytes": 0, "dio": 0,
                                  "backing_dev_major": tb.PART[0],
                                  "backing_dev_minor": tb.PART[1], "backing_ino": 12,
                                  "backing_disk": "sdz", "backing_part_start_sector": 2048}})
    up_fs = copy.deepcopy(m["filesystems"][0])
    up_fs.update({"source": "/dev/loop1", "mountpoint": "/mnt/up", "dev_major": UPPER[0],
                  "dev_minor": UPPER[1], "st_dev_major": UPPER[0], "st_dev_minor": UPPER[1],
                  "disk": "loop1", "disk_major": UPPER[0], "disk_minor": UPPER[1],
                  "part_start_sector": 0,
                  "log": {"kind": "jbd2", "ranges": [list(UPPER_LOG)], "fc_ranges": []}})
    m["filesystems"].append(up_fs)
    m["stack"] = [{"upper": "loop1", "lower": "sdz", "via": "loop",
                   "lower_dev_major": tb.PART[0], "lower_dev_minor": tb.PART[1]}]
    return m


def stack_trace(path, helpers=()) -> str:
    R = tb.req
    up = dict(dev=UPPER, flags=0, tid=60)
    low = dict(flags=0, tid=300)  # the loop worker's I/O of the backing file
    lower_log = tb.LOG_RANGE[0] + 8
    requests = [
        # A. the upper journal commit (FUA-emulated, flush-sequenced): its pre-flush
        # [1012, 1040), its data [1040, 1045), its post-flush [1046, 1089), done 1090.
        R(1012, 1040, op=abi.OP_FLUSH, seq=3, **up),
        R(1040, 1090, submit=1012, data_done=1045, sector=UPPER_LOG[0] + 8,
          iflags=abi.F_META | abi.F_PREFLUSH | abi.F_FUA, seq=2,
          **{**up, "flags": abi.RQ_FLUSH_SEQ}),
        R(1046, 1089, op=abi.OP_FLUSH, seq=4, **up),
        # ... served by the loop worker's fsync of the backing file on sdz: a data write,
        # a journal write and a cache flush for the pre-flush, a journal write and a
        # cache flush for the post-flush; sdz idle in between.
        R(1015, 1025, sector=4000, seq=5, **low),
        R(1027, 1035, sector=lower_log, iflags=abi.F_META, seq=6, **low),
        R(1036, 1060, op=abi.OP_FLUSH, seq=7, **low),
        R(1062, 1066, sector=lower_log + 8, iflags=abi.F_META, seq=8, **low),
        R(1070, 1085, op=abi.OP_FLUSH, seq=9, **low),
        # B. the workload's own data write on sdz's filesystem while an upper flush is in
        # flight (sdz is flushing nothing).
        R(1100, 1120, sector=9000, seq=10, tid=100),
        R(1095, 1125, op=abi.OP_FLUSH, seq=11, **up),
        # C. an upper data write with sdz idle (the loop worker copies it into the
        # backing file's pages), then a journal write on sdz.
        R(1128, 1145, sector=2000, seq=12, dev=UPPER, tid=100),
        R(1140, 1148, sector=lower_log + 16, iflags=abi.F_META, seq=13, **low),
    ]
    offs = [
        # A. fsync on the upper filesystem, woken by the completion of its commit
        tb.off(100, 1010, 1090, ctx=K, rq_seq=2, syscall=FSYNC),
        # B. woken by the completion of its write on sdz
        tb.off(100, 1100, 1120, ctx=H, rq_seq=10, syscall=FSYNC),
        # C. an I/O wait ended by an interrupt with no request link
        tb.off(100, 1130, 1150, ctx=H, syscall=FSYNC, flags=abi.OFF_IOWAIT),
    ]
    fsyncs = [tb.fsync(100, 1005, 1092, dev=UPPER), tb.fsync(100, 1098, 1152)]
    return tb.write_trace(path, start=1000, end=1200, requests=requests, offcpu=offs,
                          fsyncs=fsyncs, meta_obj=stack_meta(), helpers=helpers)


def test_a_wait_on_a_loop_device_is_its_own_service(tmp_path):
    r = tb.run(stack_trace(tmp_path / "s.iowt"))
    tb.assert_sums(r)
    assert r["workload"]["attribution"] == "causal"
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    # A [1010, 1090): a wait on the upper commit block (class log) -> level one log 80,
    # served by the upper device's own service: its pre-flush [1010, 1040) and
    # post-flush [1045, 1090) -> flush 75, its stage [1040, 1045) -> log 5 (not what sdz
    # did meanwhile: its flushes, journal and data writes and the loop worker's CPU are
    # how the loop device served its flushes, stack_service below).
    # B [1100, 1120): the write on sdz -> data 20, served by sdz writing it (the upper
    # flush in flight is not one of sdz's: not a flush).
    # C [1130, 1150), an interrupt with no request, filled from the devices, the loop
    # device's own requests among them (no purpose: each part its own level one): sdz's
    # journal write [1140, 1148) -> log 8; the upper data write in flight [1130, 1140)
    # -> data 10 (its own service, as a wait linked to it reads: not the loop worker's
    # helper-cpu); nothing in flight [1148, 1150) -> wait-other 2.
    # cpu: [1000, 1010) [1090, 1100) [1120, 1130) [1150, 1200) = 80.
    assert att == {"cpu": 80, "log": 80 + 8, "data": 20 + 10, "wait-other": 2}
    det = r["attribution_detail_ns"]
    assert det["log"] == {"flush": 75, "log": 5 + 8}
    assert det["data"] == {"data": 30}
    assert r["wait_other_by_waker_ns"] == {"(irq, no request)": 2}
    assert r["thread_time"]["attribution_ns"] == r["attribution_ns"]
    assert r["thread_time"]["attribution_detail_ns"] == det


def test_how_the_device_below_served_the_loop_device(tmp_path):
    # loop1's busy time by its own best category in flight, split by what sdz did then.
    # barrier: its flushes [1012, 1040) [1046, 1089) [1095, 1125) = 101; over them sdz
    # flushed [1036, 1040) [1046, 1060) [1070, 1085) = 33, wrote its journal [1027, 1035)
    # [1062, 1066) = 12, data [1015, 1025) [1100, 1120) = 30 (the second is the
    # workload's own write: what sdz was doing), and was idle 3 + 2 + 1 + 2 + 4 + 4 + 10
    # = 26. log: the commit block's device stage [1040, 1045): sdz flushing 5. data: the
    # upper write [1128, 1145): sdz's journal write [1140, 1145) 5, idle 12.
    r = tb.run(stack_trace(tmp_path / "s.iowt"))
    (e,) = r["stack_service"]
    assert (e["upper"], e["lower"]) == ("loop1", ["sdz"])
    assert e["by_category_ns"] == {
        "barrier": {"flush": 33, "log": 12, "data": 30, "idle below": 26},
        "log": {"flush": 5},
        "data": {"log": 5, "idle below": 12}}
    assert e["busy_ns"] == 101 + 5 + 17
    loop1 = next(d for d in r["devices"] if d["name"] == "loop1")
    assert {k: v for k, v in loop1["busy_by_category_ns"].items() if v} == {
        k: sum(v.values()) for k, v in e["by_category_ns"].items()}
    from iowhy.reports.terminal import render_report
    text = render_report(r)
    assert "served below by sdz" in text
    assert "barrier 101 ns: data I/O 30%, cache flushes 33%" not in text  # largest first
    assert "barrier 101 ns: cache flushes 33%, data I/O 30%, idle 26%, journal/log writes 12%" \
        in text


def test_the_pieces_of_a_carried_wait_are_placed_where_they_happened(tmp_path):
    # The interval view of A: its pre-flush [1010, 1040), its stage [1040, 1045), its
    # post-flush [1045, 1090).
    r = tb.run(stack_trace(tmp_path / "s.iowt"), interval_ns=10)
    iv = r["intervals"]
    by_start = {i["start_ns"]: {k: v for k, v in i["attribution_ns"].items() if v}
                for i in iv}
    # All of it is the commit's wait (log); what served it is placed where it happened.
    assert by_start[10] == by_start[20] == by_start[40] == {"log": 10}
    parts = {i["start_ns"]: {k: v for k, v in i["attribution_detail_ns"]["log"].items()}
             for i in iv}
    assert parts[10] == parts[20] == parts[50] == {"flush": 10}
    assert parts[40] == {"log": 5, "flush": 5}
    for i in iv:
        assert sum(i["attribution_ns"].values()) == i["end_ns"] - i["start_ns"]


def test_without_the_lower_device_recorded_the_loop_device_is_its_own(tmp_path):
    # Only the loop device's requests of A (sdz not recorded): nothing below explains
    # them, so the commit (log 80) is served as the loop device shows: its pre-flush
    # [1010, 1040) and post-flush [1045, 1090), flush 75, its data stage, log 5.
    R = tb.req
    up = dict(dev=UPPER, flags=0, tid=60)
    requests = [R(1012, 1040, op=abi.OP_FLUSH, seq=3, **up),
                R(1040, 1090, submit=1012, data_done=1045, sector=UPPER_LOG[0] + 8,
                  iflags=abi.F_META | abi.F_PREFLUSH | abi.F_FUA, seq=2,
                  **{**up, "flags": abi.RQ_FLUSH_SEQ}),
                R(1046, 1089, op=abi.OP_FLUSH, seq=4, **up)]
    p = tb.write_trace(tmp_path / "u.iowt", start=1000, end=1200, requests=requests,
                       offcpu=[tb.off(100, 1010, 1090, ctx=K, rq_seq=2, syscall=FSYNC)],
                       fsyncs=[tb.fsync(100, 1005, 1092, dev=UPPER)], meta_obj=stack_meta())
    r = tb.run(p)
    assert {k: v for k, v in r["attribution_ns"].items() if v} == {"cpu": 120, "log": 80}
    assert r["attribution_detail_ns"]["log"] == {"flush": 75, "log": 5}


def test_carrier_devices_follow_loop_edges_to_the_bottom():
    from iowhy.views.stack import carrier_devices, served_devices
    m = stack_meta()
    m["devices"].append({"name": "loop2", "major": 7, "minor": 2})
    m["stack"].append({"upper": "loop2", "lower": "loop1", "via": "loop"})
    devices = [tb.DEV, UPPER, (7, 2)]
    # loop2 on a file of loop1's filesystem, loop1 on a file of sdz's: both carry sdz's
    assert carrier_devices(m, devices, [0, 1, 2]) == {1: [0], 2: [0]}
    assert served_devices([1, 2], {1: [0], 2: [0]}) == [0]
    # sdz without requests: loop1 serves itself, and loop2 is carried by it
    assert carrier_devices(m, devices, [1, 2]) == {2: [1]}
    assert carrier_devices(m, devices, [2]) == {}


def test_recorded_helpers_do_not_displace_the_loop_devices_service(tmp_path):
    # As the first test, with two helpers recorded: 300 (the loop worker) waiting for a
    # CPU [1140, 1144) (asleep [1134, 1140) before), and 301 (the upper jbd2) asleep on
    # the upper commit [1011, 1090) itself. C's fill names its wait by the devices, the
    # loop device's own write among them, before any helper's time: sdz's journal write
    # (log 8), the upper write in flight (data 10), nothing in flight (wait-other 2),
    # whatever the loop worker was doing. A (a wait on the loop device's own request) is
    # the loop device's service, whatever its worker did: log 80.
    hel = [tb.off(300, 1134, 1144, waking=1140, ctx=H),
           tb.off(301, 1011, 1090, ctx=K, rq_seq=2)]
    for h in hel:
        h["flags_u16"] |= abi.OFF_HELPER
    p = stack_trace(tmp_path / "h.iowt", helpers=hel)
    r = tb.run(p)
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    assert att == {"cpu": 80, "log": 88, "data": 30, "wait-other": 2}
    assert r["attribution_detail_ns"]["log"] == {"flush": 75, "log": 13}


def test_an_unlinked_wait_on_a_loop_devices_metadata_read_is_metadata(tmp_path):
    """A metadata read of the upper filesystem (REQ_META on loop1) that its loop worker
    serves with a plain read of the backing file on sdz, and the workload's wait on it
    woken with no request link (XFS's buffer completion runs in a kworker the trace did
    not follow): the fill names the wait by the loop device's own request, metadata, as a
    wait linked to it reads; not by the class of the read below (read), nor by the loop
    worker (helper-cpu) where sdz was idle."""
    R = tb.req
    requests = [
        R(1010, 1050, op=abi.OP_READ, sector=3000, iflags=abi.F_META, seq=2, dev=UPPER,
          tid=100),
        # the loop worker's read of the backing file, sdz idle before and after it
        R(1015, 1045, op=abi.OP_READ, sector=7000, seq=3, flags=0, tid=300),
    ]
    offs = [tb.off(100, 1010, 1050, ctx=K, syscall=217, flags=abi.OFF_IOWAIT)]
    p = tb.write_trace(tmp_path / "m.iowt", start=1000, end=1100, requests=requests,
                       offcpu=offs, meta_obj=stack_meta())
    r = tb.run(p)
    tb.assert_sums(r)
    att = {k: v for k, v in r["attribution_ns"].items() if v}
    # cpu: [1000, 1010) [1050, 1100) = 60; the wait [1010, 1050) -> metadata 40
    assert att == {"cpu": 60, "metadata": 40}
    assert r["attribution_detail_ns"]["metadata"] == {"metadata": 40}
