"""Which devices and requests are the workload's, on hand-built traces: bio-based devices
(zram, device-mapper, md: bio records, no request records) in every device view and
class table; an XFS external log; other processes' requests (background); a workload
that submitted nothing; loop devices stacked on one disk.

Device stacks come as META fixtures in the shape metadata.collect() writes them
(tests/unit/test_metadata_stack.py builds them from a fake sysfs)."""

from __future__ import annotations


from iowhy import abi
from iowhy.analysis import AnalysisConfig, analyze
from iowhy.reports.html import render_html
from iowhy.reports.terminal import render_report
from iowhy.traceformat import read_trace

import tracebuilder as tb

ZRAM = (252, 1)
DM, SDA = (253, 0), (8, 32)
MD, SDB, SDC = (9, 0), (8, 48), (8, 64)
LOGDEV = (8, 16)
KW = {"comm": b"kworker/u8:3"}
DD = {"comm": b"dd"}
ORIGIN = abi.RQ_ORIGIN


def disk(name: str, dev: tuple[int, int], **kw) -> dict:
    return tb.disk(name, dev, **{"rotational": 0, "kind": "disk", "bio_based": False, **kw})


def fs_on(name: str, dev: tuple[int, int], log=None) -> dict:
    """An ext4 on the whole of device `name`, its journal `log` (default LOG_RANGE's)."""
    return tb.fs_entry("ext4", dev, dev, name, f"/mnt/{name}", source=f"/dev/{name}",
                       part_start_sector=0, **({"log": log} if log else {}))


def text(r: dict) -> str:
    return " ".join(render_report(r).split())


# -- bio-based devices ------------------------------------------------------------------

def zram_trace(path) -> str:
    # ext4 on zram1: the workload's data bios (context: its thread, zram ends a bio in
    # the submitter's), the journal thread's log bios, another process's write.
    m = tb.meta()
    m["devices"] = [disk("zram1", ZRAM, kind="zram", bio_based=True, rotational=0)]
    m["bio_based_devices"] = ["zram1"]
    m["filesystems"] = [fs_on("zram1", ZRAM)]
    z = {"dev": ZRAM}
    bios = [tb.bio(1010 + i, sector=50_000 + 8 * i, nbytes=8192, tid=100, comm=b"star", **z)
            for i in range(5)]
    bios += [tb.bio(1030 + i, sector=tb.LOG_RANGE[0] + 8 * i, iflags=abi.F_META, tid=50,
                    comm=b"jbd2/zram1-8", **z) for i in range(3)]
    bios += [tb.bio(1040, op=abi.OP_READ, sector=90_000, nbytes=4096, tid=100,
                    comm=b"star", **z),
             tb.bio(1050, sector=70_000, nbytes=4096, tid=777, comm=b"dd", **z)]
    return tb.write_trace(path, bios=bios, meta_obj=m,
                          recorder={"probes": {"block_bio_complete": "tp_btf"}})


def test_zram_bios_are_in_the_class_tables_devices_and_figures(tmp_path):
    p = zram_trace(tmp_path / "z.iowt")
    r = analyze(read_trace(p), AnalysisConfig(figures=True))
    req = r["requests"]
    # 5 data bios of 8 KiB, 3 journal bios (log: the journal range), 1 read; the dd
    # write is another process's (background).
    assert (req["data"]["count"], req["data"]["bytes"]) == (5, 5 * 8192)
    assert req["log"]["count"] == 3 and req["read"]["count"] == 1
    assert req["data"]["tracked"] == 5 and req["log"]["tracked"] == 0
    # Bios have no start: no latency, no busy time, but counted.
    assert req["data"]["device_ns"]["p50"] is None
    dev = {d["name"]: d for d in r["devices"]}["zram1"]
    assert (dev["requests"], dev["bios"], dev["busy_ns"]) == (10, 10, 0)
    assert dev["write_bytes"] == 5 * 8192 + 3 * 4096 + 4096
    assert r["workload"]["devices"] == ["zram1"]
    assert r["background"]["devices"] == [{"name": "zram1", "requests": 1, "read_bytes": 0,
                                           "write_bytes": 4096, "set_apart": False}]
    assert "bio-based: 10 bios" in text(r)
    assert "bio-based: 10 bios" in render_html(r)
    assert "includes 10 bios of zram1 (bio-based: counted at their end, no latency)" in text(r)
    fig = r["_figures"]
    assert [s.name for s in fig.scatters] == ["zram1"] and fig.scatters[0].total == 10
    assert fig.tput_write.sum() == 5 * 8192 + 3 * 4096 + 4096
    # A bio-based device with bios is no warning.
    assert not any("bio-based" in x for x in r["problems"])


def dm_md_meta() -> dict:
    # dm-0 (bio-based) over sda, ext4 on dm-0; md0 (raid1, bio-based) over sdb and sdc.
    m = tb.meta()
    m["devices"] = [disk("sda", SDA), disk("sdb", SDB), disk("sdc", SDC),
                    disk("dm-0", DM, kind="dm", bio_based=True),
                    disk("md0", MD, kind="md", bio_based=True)]
    m["bio_based_devices"] = ["dm-0", "md0"]
    m["filesystems"] = [fs_on("dm-0", DM), fs_on("md0", MD)]
    m["stack"] = [{"upper": "dm-0", "lower": "sda", "via": "slave", "lower_dev_major": SDA[0],
                   "lower_dev_minor": SDA[1]},
                  {"upper": "md0", "lower": "sdb", "via": "slave", "lower_dev_major": SDB[0],
                   "lower_dev_minor": SDB[1]},
                  {"upper": "md0", "lower": "sdc", "via": "slave", "lower_dev_major": SDC[0],
                   "lower_dev_minor": SDC[1]}]
    return m


def test_dm_and_md_count_each_byte_once_at_the_top(tmp_path):
    # The workload writes 4 x 4 KiB through dm-0 (device-mapper submits to sda in its
    # context: tracked requests on sda; the dm bios end in sda's completion context,
    # an interrupt on another task) and 2 x 8 KiB through md0 (raid1: each reaches sdb
    # and sdc). sda also flushes once (its own: not carried).
    reqs = [tb.req(1010 + 5 * i, 1013 + 5 * i, sector=2000 + 8 * i, dev=SDA, seq=1 + i)
            for i in range(4)]
    reqs.append(tb.req(1040, 1042, op=abi.OP_FLUSH, dev=SDA, flags=0, tid=0, seq=9))
    reqs += [tb.req(1050 + 5 * i, 1053 + 5 * i, nbytes=8192, sector=4000 + 16 * i, dev=d,
                    seq=10 + 2 * i + k) for i in range(2) for k, d in enumerate((SDB, SDC))]
    bios = [tb.bio(1013 + 5 * i, sector=2000 + 8 * i, dev=DM, tid=555, comm=b"ksoftirqd/1")
            for i in range(4)]
    bios += [tb.bio(1054 + 5 * i, nbytes=8192, sector=4000 + 16 * i, dev=MD, tid=0,
                    comm=b"swapper/0") for i in range(2)]
    p = tb.write_trace(tmp_path / "d.iowt", requests=reqs, bios=bios, meta_obj=dm_md_meta())
    r = tb.run(p)
    req = r["requests"]
    # Counted once, at the top: 4 x 4 KiB of dm-0, 2 x 8 KiB of md0; sda's flush.
    assert (req["data"]["count"], req["data"]["bytes"]) == (6, 4 * 4096 + 2 * 8192)
    assert req["flush"]["count"] == 1
    carried = {(e["upper"], e["lower"]): e["requests"] for e in r["stack_carried"]}
    assert carried == {("dm-0", "sda"): 4, ("md0", "sdb"): 2, ("md0", "sdc"): 2}
    # Every device of both stacks is the workload's (dm-0 and md0 above its requests).
    assert sorted(r["workload"]["devices"]) == ["dm-0", "md0", "sda", "sdb", "sdc"]
    dev = {d["name"]: d for d in r["devices"]}
    assert dev["dm-0"]["bios"] == 4 and dev["sda"]["requests"] == 5
    assert dev["sdb"]["write_bytes"] == dev["sdc"]["write_bytes"] == 2 * 8192
    assert "4 requests (0.0 MiB) of sda only carried dm-0's I/O" in text(r)
    assert "background" not in r or not r["background"]["devices"]


def test_a_partition_keeps_its_journal_range_on_the_disk(tmp_path):
    # ext4 on sdz1 (partition at 2048): its journal is LOG_RANGE in whole-disk sectors.
    reqs = [tb.req(1010, 1020, sector=tb.LOG_RANGE[0] + 16, flags=ORIGIN, tid=50, seq=1),
            tb.req(1030, 1040, sector=tb.LOG_RANGE[1] + 16, seq=2)]
    r = tb.run(tb.write_trace(tmp_path / "p.iowt", requests=reqs,
                              fsyncs=[tb.fsync(100, 1005, 1045)]))
    assert r["requests"]["log"]["count"] == 1 and r["requests"]["data"]["count"] == 1
    assert r["workload"]["devices"] == ["sdz"]


# -- an XFS external log ----------------------------------------------------------------

def xfs_logdev_meta() -> dict:
    m = tb.meta("xfs")
    m["devices"].append(disk("sdy", LOGDEV))
    m["filesystems"][0]["log"] = {
        "kind": "external", "ranges": [], "fc_ranges": [], "bytes": 10 << 20,
        "device": {"source": "/dev/sdy", "dev_major": LOGDEV[0], "dev_minor": LOGDEV[1],
                   "disk": "sdy", "disk_major": LOGDEV[0], "disk_minor": LOGDEV[1],
                   "ranges": [[0, (10 << 20) // 512]]}}
    return m


def test_xfs_external_log_writes_are_log(tmp_path):
    # The workload's data write on sdz; the CIL push kworker's iclog writes on sdy (the
    # external log, sectors [0, 20480)), one with FUA+PREFLUSH; nothing the workload
    # submitted or fsynced is on sdy, yet it is its filesystem's log device.
    reqs = [tb.req(1010, 1020, sector=5000, seq=1)]
    reqs += [{**tb.req(1030 + 10 * i, 1035 + 10 * i, sector=64 * i, dev=LOGDEV, flags=ORIGIN,
                       tid=300, seq=2 + i, iflags=abi.F_META | (abi.F_FUA if i == 2 else 0)),
              **KW} for i in range(3)]
    # a write past the log's end on sdy is not log
    reqs.append({**tb.req(1080, 1085, sector=30_000, dev=LOGDEV, flags=ORIGIN, tid=300,
                          seq=9), **KW})
    p = tb.write_trace(tmp_path / "x.iowt", requests=reqs, meta_obj=xfs_logdev_meta(),
                       offcpu=[tb.off(100, 1025, 1070, waker=300, comm="kworker/u8:3")])
    r = tb.run(p)
    assert r["requests"]["log"]["count"] == 3
    assert r["requests"]["data"]["count"] == 2
    assert sorted(r["workload"]["devices"]) == ["sdy", "sdz"]
    assert r["metadata_data"]["log_bytes"] == 3 * 4096
    assert "sdy" in {d["name"] for d in r["devices"]}
    assert not r["background"]["devices"]


# -- other processes' requests ----------------------------------------------------------

UPPER = (7, 1)


def loop_meta(n_loops: int = 1) -> dict:
    """loop1..loopN, each backed by a file on sdz's filesystem."""
    m = tb.meta()
    m["stack"] = []
    for k in range(1, n_loops + 1):
        m["devices"].append(disk(f"loop{k}", (7, k), kind="loop",
                                 loop={"backing_file": f"/mnt/t/img{k}", "dio": 0,
                                       "backing_disk": "sdz", "backing_dev_major": tb.PART[0],
                                       "backing_dev_minor": tb.PART[1]}))
        m["stack"].append({"upper": f"loop{k}", "lower": "sdz", "via": "loop",
                           "lower_dev_major": tb.PART[0], "lower_dev_minor": tb.PART[1]})
    m["devices"].append(disk("sdy", LOGDEV))
    return m


def test_other_processes_requests_on_a_shared_lower_disk_are_background(tmp_path):
    # The workload writes 3 x 4 KiB to loop1 (1010-1030, 1040-1060, 1070-1090), which
    # lives on a file of sdz; sdz is the workload's only as the disk below loop1.
    up = dict(dev=UPPER)
    reqs = [tb.req(1010, 1030, seq=1, **up), tb.req(1040, 1060, seq=2, **up),
            tb.req(1070, 1090, seq=3, **up)]
    # On sdz: the loop worker carries each (data, during the upper request); a flush (no
    # submitter known) during the second, while no flush of loop1 was in flight (sdz's
    # own: not carried, views/stack.py); another process (dd) writes
    # 1042-1048, in flight with loop1's request, and 1062-1066; the host's flusher
    # writes back another file 1032-1038, when nothing of loop1 was in flight; the
    # filesystem's journal during loop1's third request (its own extra I/O).
    reqs += [{**tb.req(1012 + 30 * i, 1020 + 30 * i, sector=4000 + 8 * i, flags=ORIGIN,
                       tid=300, seq=10 + i), **KW} for i in range(3)]
    reqs += [tb.req(1050, 1055, op=abi.OP_FLUSH, flags=0, tid=0, seq=20),
             {**tb.req(1043, 1048, submit=1042, sector=9000, flags=ORIGIN, tid=777, seq=21),
              **DD},
             {**tb.req(1063, 1066, submit=1062, sector=9008, flags=ORIGIN, tid=777, seq=22),
              **DD},
             {**tb.req(1033, 1038, submit=1032, sector=7000, flags=ORIGIN, tid=301, seq=23),
              **KW},
             {**tb.req(1075, 1080, sector=tb.LOG_RANGE[0], flags=ORIGIN, tid=50, seq=24,
                       iflags=abi.F_META), "comm": b"jbd2/sdz1-8"}]
    # sdy: another process entirely (a device set apart: the recorder's trace names
    # every waker, so the devices the workload never touched are set apart).
    reqs.append({**tb.req(1015, 1025, dev=LOGDEV, flags=ORIGIN, tid=888, seq=30), **DD})
    r = tb.run(tb.write_trace(tmp_path / "s.iowt", requests=reqs, meta_obj=loop_meta(),
                              recorder={"attach_mode": "run"}))
    req = r["requests"]
    # The class tables: loop1's 3 writes, sdz's flush and journal write; the carried
    # writes are counted at loop1; dd's and the flusher's are background.
    assert req["data"]["count"] == 3 and req["data"]["bytes"] == 3 * 4096
    assert req["flush"]["count"] == 1 and req["log"]["count"] == 1
    assert r["stack_carried"] == [{"upper": "loop1", "lower": "sdz", "requests": 3,
                                   "read_bytes": 0, "write_bytes": 3 * 4096, "flushes": 0,
                                   "empty_preflush": 0}]
    bg = {d["name"]: d for d in r["background"]["devices"]}
    assert bg["sdz"] == {"name": "sdz", "requests": 3, "read_bytes": 0,
                         "write_bytes": 3 * 4096, "set_apart": False}
    assert bg["sdy"]["set_apart"] is True and bg["sdy"]["requests"] == 1
    assert r["background"]["requests"] == 4
    assert r["metadata_data"]["data_requests"] == 3
    t = text(r)
    assert "background: 3 requests (0.0 MiB) of sdz were other processes' I/O" in t
    assert "sdz (below loop1)" in t
    assert "background I/O, not waited on: sdy" in t


def test_other_processes_requests_on_the_workloads_own_disk_are_background(tmp_path):
    # On sdz, where the workload writes and fsyncs: its write, the journal thread's,
    # the flusher's, a flush, and another process's write: only that one is background.
    reqs = [tb.req(1010, 1020, sector=5000, seq=1),
            {**tb.req(1025, 1030, sector=tb.LOG_RANGE[0], flags=ORIGIN, tid=50, seq=2,
                      iflags=abi.F_META), "comm": b"jbd2/sdz1-8"},
            {**tb.req(1032, 1036, sector=6000, flags=ORIGIN, tid=301, seq=3), **KW},
            tb.req(1037, 1039, op=abi.OP_FLUSH, flags=0, tid=0, seq=4),
            {**tb.req(1040, 1050, sector=7000, nbytes=8192, flags=ORIGIN, tid=777, seq=5),
             **DD}]
    r = tb.run(tb.write_trace(tmp_path / "o.iowt", requests=reqs,
                              fsyncs=[tb.fsync(100, 1005, 1055)]))
    req = r["requests"]
    assert (req["data"]["count"], req["log"]["count"], req["flush"]["count"]) == (2, 1, 1)
    assert r["background"] == {"devices": [{"name": "sdz", "requests": 1, "read_bytes": 0,
                                            "write_bytes": 8192, "set_apart": False}],
                               "requests": 1}
    # The device view is the device's: every request it served.
    assert {d["name"]: d for d in r["devices"]}["sdz"]["requests"] == 5
    # A trace that names no workload thread (an import) sets nothing apart.
    r = tb.run(tb.write_trace(tmp_path / "n.iowt", requests=reqs, tasks=[]))
    assert r["requests"]["data"]["count"] == 3


def test_a_workload_without_requests_has_no_devices(tmp_path):
    # Only other processes' I/O on two disks; the workload sleeps.
    reqs = [{**tb.req(1010, 1020, flags=ORIGIN, tid=777, seq=1), **DD},
            {**tb.req(1030, 1040, dev=LOGDEV, flags=ORIGIN, tid=778, seq=2), **DD}]
    m = tb.meta()
    m["devices"].append(disk("sdy", LOGDEV))
    r = tb.run(tb.write_trace(tmp_path / "w.iowt", requests=reqs, meta_obj=m,
                              offcpu=[tb.off(100, 1005, 1095, syscall=35)]))
    assert r["workload"]["devices"] == []
    assert r["background"]["requests"] == 2
    assert all(c["count"] == 0 for c in r["requests"].values())


def test_four_loop_devices_on_one_disk_count_each_lower_request_once(tmp_path):
    # loop1..loop4 backed by files on sdz. loop1 and loop2 are busy at once (1010-1040
    # and 1020-1050), loop3 later (1060-1070), loop4 idle. The loop workers' writes on
    # sdz: 1015 (loop1's only), 1025 and 1035 (both in flight: loop2 started last),
    # 1065 (loop3's).
    reqs = [tb.req(1010, 1040, seq=1, dev=(7, 1)), tb.req(1020, 1050, seq=2, dev=(7, 2)),
            tb.req(1060, 1070, seq=3, dev=(7, 3))]
    reqs += [{**tb.req(t, t + 3, sector=4000 + t, flags=ORIGIN, tid=300, seq=10 + k), **KW}
             for k, t in enumerate((1015, 1025, 1035, 1065))]
    r = tb.run(tb.write_trace(tmp_path / "l.iowt", requests=reqs, meta_obj=loop_meta(4)))
    got = {e["upper"]: e["requests"] for e in r["stack_carried"]}
    assert got == {"loop1": 1, "loop2": 2, "loop3": 1}
    assert sum(got.values()) == 4
    lines = [x for x in render_report(r).splitlines() if "only carried" in x]
    assert len(lines) == 3
    assert r["requests"]["data"]["count"] == 3
