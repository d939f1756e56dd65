"""Live tests of what the probes record about wakeups and thread state (format 4).

A wakeup inside a block completion is tied to the request being completed: checked
against the request records (same seq, the woken thread is the request's submitter, the
completion just before the waking) and, for the context, against the kernel's own
tracefs event of the same wakeup, whose flags column says hardirq/softirq/task
independently of the probes. The state of a thread asleep when `attach` starts is
checked against /proc read by the test before attaching.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import recorder_path, run
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, attach_running, release_until_exit

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"

# tracefs's latency flags: the third character of the column after the CPU.
TRACEFS_CTX = {".": abi.WCTX_TASK, "s": abi.WCTX_SOFTIRQ, "h": abi.WCTX_HARDIRQ,
               "H": abi.WCTX_HARDIRQ, "z": abi.WCTX_NMI, "Z": abi.WCTX_NMI}


def _record_with_tracefs_wakings(iowhy_bin, out: Path, comm: str, cmd: list[str],
                                 tmp_path: Path) -> list[tuple[int, int]]:
    """Record `cmd` with `iowhy record` while a private tracefs instance logs every
    sched_waking of tasks named `comm` on the mono clock: [(time ns, context)]."""
    log = tmp_path / "wakings.txt"
    script = tmp_path / "tfs.sh"
    inst = f"/sys/kernel/tracing/instances/iowhy-causal-{os.getpid()}"
    argv = [*iowhy_bin, "record", "-q", "-o", str(out), "--", *cmd]
    rec = " ".join(shlex.quote(a) for a in argv)
    script.write_text(f"""set -e
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
I={inst}
mkdir $I
trap 'echo 0 > $I/events/sched/sched_waking/enable; rmdir $I' EXIT
echo mono > $I/trace_clock
echo 'comm == "{comm}"' > $I/events/sched/sched_waking/filter
echo 1 > $I/events/sched/sched_waking/enable
{rec}
echo 0 > $I/events/sched/sched_waking/enable
cat $I/trace > {shlex.quote(str(log))}
""")
    run(["unshare", "-m", "--propagation", "private", "sh", str(script)])
    events = []
    for line in log.read_text().splitlines():
        if line.startswith("#") or "sched_waking:" not in line:
            continue
        # "  ksoftirqd/0-14  [000] d.s3.  1366.209574: sched_waking: comm=dd pid=..."
        head = line.split("sched_waking:")[0].split()
        flags, stamp = head[-2], head[-1].rstrip(":")
        sec, _, frac = stamp.partition(".")
        events.append((int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]), TRACEFS_CTX[flags[2]]))
    return events


@pytest.mark.parametrize("flavour", ["tp_btf", "raw_tp"])
def test_direct_write_wakeup_links_its_own_request(bpf, make_loop, tmp_path, iowhy_bin,
                                                   monkeypatch, flavour):
    """dd oflag=direct on a loop device: each write waits in D for its own request;
    every such wait is linked to that request, from the context tracefs shows. Both
    program flavours (raw_tp reads every kernel field through probe reads)."""
    if flavour == "raw_tp":
        wrapper = tmp_path / "rec-raw-tp"
        wrapper.write_text(f'#!/bin/sh\nexec {recorder_path()} --raw-tp "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("IOWHY_RECORDER", str(wrapper))
    lp = make_loop(64)
    n = 200
    comm = f"dio{os.getpid() % 100000}"
    dd = tmp_path / comm
    dd.symlink_to("/usr/bin/dd")  # a comm of our own for the tracefs filter
    out = tmp_path / "dio.iowt"
    wakings = _record_with_tracefs_wakings(
        iowhy_bin, out, comm,
        [str(dd), "if=/dev/zero", f"of={lp.dev}", "bs=4k", f"count={n}", "oflag=direct",
         "status=none"], tmp_path)
    tr = read_trace(str(out))
    assert tr.recorder["attach_mode"] == flavour
    assert_nothing_dropped(tr)
    rq = tr.records("request")
    mine = rq[(rq["dev_major"] == lp.major) & (rq["dev_minor"] == lp.minor)
              & (rq["op"] == abi.OP_WRITE)]
    assert len(mine) == n, len(mine)
    dd_tid = int(mine["tid"][0])
    assert (mine["tid"] == dd_tid).all()
    off = tr.records("offcpu")
    waits = off[(off["tid"] == dd_tid) & ((off["flags_u16"] & abi.OFF_D) != 0)
                & ((off["flags_u16"] & abi.OFF_IOWAIT) != 0)]
    assert len(waits) >= n * 9 // 10, len(waits)
    linked = waits[(waits["flags_u16"] & abi.OFF_WAKER_RQ) != 0]
    # The kernel does not run the probes in a softirq on top of PID 1 on some kernels
    # (docs/trace-format.md): allow a few unlinked waits, never a wrong link.
    assert len(linked) >= len(waits) * 95 // 100, (len(linked), len(waits))
    by_seq = {int(s): i for i, s in enumerate(rq["seq"])}
    seen_seqs = set()
    for w in linked:
        q = rq[by_seq[int(w["waker_rq_seq"])]]
        assert int(q["tid"]) == dd_tid, "linked to another thread's request"
        # dd's own writes, or (every disk is recorded) a read of its own on another disk:
        # a page of its binary or libraries faulted back in on a busy machine.
        assert ((int(q["dev_major"]), int(q["dev_minor"])) == (lp.major, lp.minor)
                or int(q["op"]) == abi.OP_READ), q
        lag = int(w["waking_ns"]) - int(q["done_ns"])
        assert 0 <= lag < 1_000_000, f"woken {lag} ns after the linked completion"
        assert int(w["waker_rq_depth"]) >= 1
        seen_seqs.add(int(q["seq"]))
    assert len(seen_seqs) == len(linked), "two waits linked to one request"
    # Context: the same wakeup as tracefs saw it (its clock read is a few us apart).
    assert wakings, "tracefs saw no wakeup of the workload"
    times = np.array([t for t, _ in wakings], dtype=np.int64)
    checked = 0
    for w in linked:
        i = int(np.abs(times - int(w["waking_ns"])).argmin())
        if abs(int(times[i]) - int(w["waking_ns"])) > 20_000:
            continue
        assert int(w["waker_ctx_u16"]) == wakings[i][1], (w, wakings[i])
        checked += 1
    assert checked >= len(linked) * 9 // 10, (checked, len(linked))
    assert set(linked["waker_ctx_u16"].tolist()) <= {abi.WCTX_SOFTIRQ, abi.WCTX_HARDIRQ,
                                                     abi.WCTX_TASK}


PIPE_WAITER = r"""
import os, sys, threading, time
r, w = os.pipe()
go = sys.argv[1]
def reader():
    os.read(r, 1)
t = threading.Thread(target=reader)
t.start()
with open(go + ".tid", "w") as f:
    f.write(f"{t.native_id} {r}")
while not os.path.exists(go):
    time.sleep(0.01)
time.sleep(0.2)
os.write(w, b"x")
t.join()
"""


def test_attach_records_the_state_of_a_sleeping_thread(bpf, tmp_path, iowhy_bin, request):
    """A thread asleep in read(2) of a pipe when `attach` starts: its THREAD record gives
    /proc's state and syscall, and its wait is an off-CPU interval from the attach,
    ended by the main thread's write."""
    go = tmp_path / "go"
    target = subprocess.Popen([PY, "-c", PIPE_WAITER, str(go)])
    request.addfinalizer(lambda: (target.poll() is None and target.kill(), target.wait()))
    tidfile = Path(str(go) + ".tid")
    deadline = time.monotonic() + 30
    while not tidfile.exists() or not tidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    tid, fd = (int(x) for x in tidfile.read_text().split())
    for _ in range(100):  # until the thread is asleep in read
        stat = Path(f"/proc/{target.pid}/task/{tid}/stat").read_text()
        sc = Path(f"/proc/{target.pid}/task/{tid}/syscall").read_text().split()
        if stat.rpartition(")")[2].split()[0] == "S" and sc[0] == "0":
            break
        time.sleep(0.02)
    state = stat.rpartition(")")[2].split()[0]
    assert state == "S" and sc[0] == "0", (state, sc)
    tids = sorted(int(t) for t in os.listdir(f"/proc/{target.pid}/task"))
    out = tmp_path / "attach.iowt"
    argv = [*iowhy_bin, "attach", "-q", "-p", str(target.pid), "-o", str(out)]
    inner = " ".join(shlex.quote(a) for a in argv)
    rec = attach_running(request, [
        "unshare", "-m", "--propagation", "private", "sh", "-c",
        "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; "
        f"exec {inner}"], out)
    tr = release_until_exit(rec, target, go, out)
    th = tr.records("thread")
    assert sorted(th["tid"].tolist()) == tids
    mine = th[th["tid"] == tid]
    assert len(mine) == 1
    t = mine[0]
    assert chr(int(t["state_u8"])) == state
    assert int(t["syscall_nr"]) == int(sc[0]) and int(t["arg0"]) == int(sc[1], 16) == fd
    assert int(t["tgid"]) == target.pid
    assert t["ts_ns"] >= tr.start_ns - 10**9 and t["ts_ns"] <= tr.end_ns
    off = tr.records("offcpu")
    first = off[(off["tid"] == tid) & ((off["flags_u16"] & abi.OFF_FROM_START) != 0)]
    assert len(first) == 1, off[off["tid"] == tid]
    f = first[0]
    assert int(f["start_ns"]) <= tr.start_ns
    assert int(f["syscall_nr"]) == 0
    assert int(f["state"]) & 0x1 and not int(f["flags_u16"]) & abi.OFF_D  # S, not D
    assert int(f["waker_tid"]) == target.pid  # the main thread wrote the pipe
    assert int(f["waker_ctx_u16"]) == abi.WCTX_TASK
    assert int(f["end_ns"]) > int(f["waking_ns"]) > tr.start_ns
    # Nothing earlier for that thread: the interval is its first.
    assert int(off[off["tid"] == tid]["start_ns"].min()) == int(f["start_ns"])


def test_bio_based_device_bios_are_recorded(bpf, zram, tmp_path, iowhy_bin):
    """zram has no requests: every bio is a bio record, as many as the device's own
    write count in /sys/block/<zram>/stat, and the metadata names it bio-based."""
    n = 64
    major, minor = (int(x) for x in Path(f"/sys/block/{zram}/dev").read_text().split(":"))
    writes0 = int(Path(f"/sys/block/{zram}/stat").read_text().split()[4])
    out = tmp_path / "zram.iowt"
    argv = [*iowhy_bin, "record", "-q", "-o", str(out), "--", "dd", "if=/dev/zero",
            f"of=/dev/{zram}", "bs=4k", f"count={n}", "seek=3", "oflag=direct", "status=none"]
    run(["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; "
         "exec " + " ".join(shlex.quote(a) for a in argv)])
    writes = int(Path(f"/sys/block/{zram}/stat").read_text().split()[4]) - writes0
    tr = read_trace(str(out))
    assert_nothing_dropped(tr)
    b = tr.records("bio")
    mine = b[(b["dev_major"] == major) & (b["dev_minor"] == minor)]
    assert len(mine) == writes == n, (len(mine), writes)
    assert (mine["op"] == abi.OP_WRITE).all() and (mine["len_bytes"] == 4096).all()
    assert sorted(mine["sector"].tolist()) == [(3 + i) * 8 for i in range(n)]
    assert (mine["error"] == 0).all()
    assert {c.decode() for c in mine["comm"]} == {"dd"}  # zram ends bios in the submitter
    rq = tr.records("request")
    assert not ((rq["dev_major"] == major) & (rq["dev_minor"] == minor)).any()
    assert zram in tr.meta.get("bio_based_devices", [])


FSYNC_LOOP = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(40):
    os.pwrite(fd, b"x" * 8192, i * 8192)
    os.fsync(fd)
"""


def test_jbd2_is_recorded_as_a_helper_while_fsync_waits(bpf, make_fs, tmp_path, iowhy_bin):
    """ext4 fsync: the workload waits on the jbd2 thread's commit. That thread's
    intervals are recorded (helper records) while the workload sleeps, including its own wait on
    the commit write, linked to its own request; its CPU time between intervals comes
    from run_total_ns, which never goes back."""
    lp, mnt = make_fs("ext4", size_mib=64)
    out = tmp_path / "helper.iowt"
    argv = [*iowhy_bin, "record", "-q", "-o", str(out), "--", PY, "-c", FSYNC_LOOP,
            str(mnt / "f")]
    run(["unshare", "-m", "--propagation", "private", "sh", "-c",
         "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; "
         "exec " + " ".join(shlex.quote(a) for a in argv)])
    tr = read_trace(str(out))
    assert_nothing_dropped(tr)
    jbd2 = None
    for t in os.listdir("/proc"):
        if t.isdigit():
            try:
                if Path(f"/proc/{t}/comm").read_text().strip() == f"jbd2/{lp.name}-8":
                    jbd2 = int(t)
            except OSError:
                pass
    assert jbd2 is not None
    off = tr.records("offcpu")
    root = int(tr.recorder["pid"])
    waits = off[(off["tgid"] == root) & ((off["flags_u16"] & abi.OFF_D) != 0)
                & (off["waker_tid"] == jbd2)]
    assert len(waits) >= 10, len(waits)  # fsyncs woken at the end of a commit
    hel = tr.records("helper")
    helper = hel[hel["tid"] == jbd2]
    assert len(helper) and ((helper["flags_u16"] & abi.OFF_HELPER) != 0).all()
    # The workload's threads are exactly those with offcpu records: no helper there.
    assert not (off["flags_u16"] & abi.OFF_HELPER).any()
    assert not np.isin(hel["tgid"], off["tgid"]).any()
    rq = tr.records("request")
    by_seq = {int(s): i for i, s in enumerate(rq["seq"])}
    inside = 0
    for w in waits:
        h = helper[(helper["start_ns"] >= w["start_ns"]) & (helper["end_ns"] <= w["waking_ns"])
                   & ((helper["flags_u16"] & abi.OFF_WAKER_RQ) != 0)]
        for x in h:
            q = rq[by_seq[int(x["waker_rq_seq"])]]
            if int(q["tid"]) == jbd2:
                inside += 1
                assert 0 <= int(x["waking_ns"]) - int(q["done_ns"]) < 1_000_000
    assert inside >= len(waits) // 2, (inside, len(waits))
    order = helper[np.argsort(helper["start_ns"])]
    assert (np.diff(order["run_total_ns"].astype(np.int64)) >= 0).all()
    assert (order["run_total_ns"] > 0).all()
