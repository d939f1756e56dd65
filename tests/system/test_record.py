"""Live recording tests: real probes, real filesystems on loop devices.

Each figure iowhy records is checked against what the workload did (it makes a known
number of calls) or against an independent tool run at the same time (bpftrace on the
same tracepoint, strace). Needs root and BPF: under IOWHY_REQUIRE_BPF=1 a skip fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, need, recorder_path, run
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import assert_nothing_dropped, attach_running, record, release_until_exit

pytestmark = pytest.mark.bpf

WORKLOADS = str(REPO / "lab" / "workloads.py")
PY = "/usr/bin/python3"
FILESYSTEMS = ["ext4", "xfs", "btrfs"]


def info(iowhy_bin, path) -> dict:
    return json.loads(run([*iowhy_bin, "info", "--json", str(path)]).stdout)


def dev_requests(tr, lp):
    r = tr.records("request")
    return r[(r["dev_major"] == lp.major) & (r["dev_minor"] == lp.minor)]


def fs_dev(tr, mnt) -> tuple[int, int]:
    """The device number filesystem events carry for this mount (sb->s_dev: btrfs's is
    an anonymous device), as the trace metadata recorded it."""
    for fs in tr.meta["filesystems"]:
        if fs["mountpoint"] == str(mnt):
            return fs["st_dev_major"], fs["st_dev_minor"]
    raise AssertionError(f"{mnt} missing from the trace metadata")


@pytest.fixture
def fsyncs_on(bpf, make_fs, tmp_path, iowhy_bin):
    """Record `fsyncmix` (N fsync + M fdatasync, the last in a forked child) on FS."""
    def _go(fstype, n=7, m=4, write_cache="write back"):
        lp, mnt = make_fs(fstype)
        lp.set_write_cache(write_cache)
        assert lp.write_cache() == write_cache
        out = tmp_path / f"{fstype}.iowt"
        record(iowhy_bin, out, [PY, WORKLOADS, "fsyncmix", str(mnt), str(n), str(m)])
        return lp, mnt, out, read_trace(str(out))
    return _go


@pytest.mark.parametrize("fstype", FILESYSTEMS)
def test_fsync_records_flushes_commits(fsyncs_on, fstype, iowhy_bin):
    n, m = 7, 4
    lp, mnt, out, tr = fsyncs_on(fstype, n, m)
    d = info(iowhy_bin, out)
    assert not d["truncated"], d
    assert_nothing_dropped(tr)
    assert os.stat(out).st_mode & 0o777 == 0o600

    f = tr.records("fsync")
    calls = f["call_u16"]
    assert len(f) == n + m == d["records"]["fsync"]
    assert (calls == abi.CALL_FSYNC).sum() == n
    assert (calls == abi.CALL_FDATASYNC).sum() == m
    assert len(set(f["tgid"].tolist())) == 2, "the forked child's fdatasync is recorded"
    assert (f["ret"] == 0).all()
    assert (f["exit_ns"] >= f["enter_ns"]).all()
    # Every call reached the filesystem's fsync path, on this mount.
    assert (f["flags_u16"] & abi.FS_F_FSEVENT).all()
    assert {(int(a), int(b)) for a, b in zip(f["dev_major"], f["dev_minor"])} == {fs_dev(tr, mnt)}

    rq = dev_requests(tr, lp)
    assert len(rq) > 0
    assert (rq["op"] == abi.OP_FLUSH).sum() > 0, "write-back cache: flush requests expected"
    assert (rq["flags_u16"] & abi.RQ_INCOMPLETE).sum() == 0
    size = lp_size(lp)
    end = rq["start_sector"].astype(np.int64) * 512 + rq["len_bytes"]
    assert (end <= size).all(), "every request lies within the device"
    assert (rq["done_ns"] >= rq["issue_ns"]).all()
    tracked = rq[(rq["flags_u16"] & abi.RQ_TRACKED) != 0]
    assert set(tracked["tgid"].tolist()) <= set(f["tgid"].tolist()) | {
        int(t) for t in tr.records("task")["tgid"]}

    j = tr.records("journal")
    fsd = fs_dev(tr, mnt)
    j = j[(j["dev_major"] == fsd[0]) & (j["dev_minor"] == fsd[1])]
    ev = j["event_u16"]
    if fstype == "ext4":
        commits = (ev == abi.J_JBD2_END).sum()
        assert 1 <= commits <= n + m
        # Each fsync names the jbd2 transaction it waited for, and that one committed.
        done = set(j[ev == abi.J_JBD2_END]["seq"].tolist())
        assert set(f["commit_seq"].tolist()) <= done | {0}
    elif fstype == "xfs":
        forced = set(j[(ev == abi.J_XFS_FORCE) & (j["seq"] > 0)]["seq"].tolist())
        assert 1 <= len(forced) <= n + m
        assert set(f[f["commit_seq"] > 0]["commit_seq"].tolist()) <= forced
        assert (ev == abi.J_XLOG_DONE).sum() >= 1
    else:
        assert (ev == abi.J_BTRFS_SYNC).sum() == n + m


@pytest.mark.parametrize("syscalls", ["all", "sync", "sync-eager"])
@pytest.mark.parametrize("fstype", FILESYSTEMS)
def test_every_fsync_family_call(bpf, make_fs, tmp_path, iowhy_bin, fstype, syscalls):
    """sync, syncfs, sync_file_range, msync once each, and K O_DSYNC + K O_SYNC writes,
    which run the filesystem's fsync path inside write(2). The same with --syscalls sync,
    which traces only those calls' own tracepoints and attaches the write family at the
    first O_SYNC write (its entry then unseen), and with --eager-writes, from the start."""
    k = 3
    lp, mnt = make_fs(fstype)
    out = tmp_path / "mix.iowt"
    opts = ["--syscalls", syscalls.split("-")[0]] + (["--eager-writes"] * ("eager" in syscalls))
    record(iowhy_bin, out, [PY, WORKLOADS, "callmix", str(mnt), "--k", str(k)], *opts)
    tr = read_trace(str(out))
    assert tr.recorder["syscalls"] == syscalls.split("-")[0]
    assert tr.recorder["write_probes"] == ("lazy" if syscalls == "sync" else "start")
    assert_nothing_dropped(tr)
    f = tr.records("fsync")
    got = {abi.CALL_NAMES[int(c)]: int(n) for c, n in zip(*np.unique(f["call_u16"],
                                                                     return_counts=True))}
    assert got == {"sync": 1, "syncfs": 1, "sync_file_range": 1, "msync": 1,
                   "osync_write": 2 * k}, got
    osync = np.sort(f[f["call_u16"] == abi.CALL_OSYNC_WRITE], order="enter_ns")
    assert (osync["flags_u16"] & abi.FS_F_FSEVENT).all()
    assert (osync["syscall_nr"] == 1).all()  # write(2) on x86-64
    assert (osync["exit_ns"] > osync["enter_ns"]).all()
    late = (osync["flags_u16"] & abi.FS_F_LATE_ENTER) != 0
    unseen = (osync["flags_u16"] & abi.FS_F_EXIT_UNSEEN) != 0
    assert (osync["ret"][~unseen] == 4096).all() and (osync["ret"][unseen] == 0).all()
    assert int(late.sum()) == tr.counters.get("late_syscall_entry", 0)
    if syscalls == "sync":
        # The first write is seen from its sync event on; the rest from their entries
        # (a write that beat the attach is late too, and its exit may be unseen).
        n = int(late.sum())
        assert n >= 1 and late[:n].all() and not late[n:].any(), late
        assert not unseen[n:].any()
        assert tr.trailer["write_probes_ns"] > tr.recorder["start_ns"]
    else:
        assert not late.any() and not unseen.any()


def test_osync_writes_before_the_write_probes_attach_are_all_written(
        bpf, make_fs, tmp_path, iowhy_bin):
    """With the write family attached lazily and late (a test-only delay), every O_SYNC
    write returns before its exit probe exists: each is still one record, opened at its
    fs sync event and closed, flagged, at the next one's or at the thread's exit, never
    after the next call began; counted in lost_syscall_exit."""
    k = 3
    lp, mnt = make_fs("xfs")
    out = tmp_path / "late.iowt"
    env = {**os.environ, "IOWHY_TEST_WRITE_ATTACH_DELAY_MS": "1500"}
    record(iowhy_bin, out, [PY, WORKLOADS, "callmix", str(mnt), "--k", str(k)], env=env)
    tr = read_trace(str(out))
    assert_nothing_dropped(tr)
    f = tr.records("fsync")
    osync = np.sort(f[f["call_u16"] == abi.CALL_OSYNC_WRITE], order="enter_ns")
    assert len(osync) == 2 * k
    fl = osync["flags_u16"]
    assert ((fl & abi.FS_F_LATE_ENTER) != 0).all()
    assert ((fl & abi.FS_F_EXIT_UNSEEN) != 0).all(), fl
    assert tr.counters["lost_syscall_exit"] == 2 * k
    assert tr.counters["late_syscall_entry"] == 2 * k
    assert (osync["ret"] == 0).all()
    assert (osync["exit_ns"][:-1] <= osync["enter_ns"][1:]).all()
    assert (osync["exit_ns"] > osync["enter_ns"]).all()
    assert (osync["ino"] > 0).all() and (osync["fd"] >= 0).all()


def lp_size(lp) -> int:
    return int(Path(f"/sys/block/{lp.name}/size").read_text()) * 512


@pytest.mark.parametrize("fstype", FILESYSTEMS)
def test_write_through_has_no_flushes(fsyncs_on, fstype):
    lp, mnt, out, tr = fsyncs_on(fstype, 5, 2, write_cache="write through")
    rq = dev_requests(tr, lp)
    assert len(tr.records("fsync")) == 7
    assert len(rq) > 0
    assert (rq["op"] == abi.OP_FLUSH).sum() == 0
    assert (rq["iflags"] & (abi.F_PREFLUSH | abi.F_FUA)).sum() == 0


def test_counts_match_bpftrace_and_strace(bpf, make_fs, tmp_path, iowhy_bin):
    """Request count against bpftrace's block_rq_issue counter on the same device, and
    fsync/fdatasync counts against strace -f -c, all in the same run."""
    need(shutil.which("bpftrace") is not None, "bpftrace not installed")
    need(shutil.which("strace") is not None, "strace not installed")
    lp, mnt = make_fs("xfs")
    subprocess.run(["sync"], check=True)
    devt = lp.major << 20 | lp.minor
    # One line per issue with its time: `iowhy record` reads the superblock before the
    # probes attach, so only issues inside the recorder's lifetime are comparable.
    prog = (f"tracepoint:block:block_rq_issue /args->dev == {devt}/ "
            "{ printf(\"I %llu\\n\", nsecs); }")
    bt = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    try:
        t0 = time.monotonic()
        line = ""
        while "Attaching" not in line and time.monotonic() - t0 < 60:
            line = bt.stdout.readline()
            if not line and bt.poll() is not None:
                break
        assert "Attaching" in line, f"bpftrace did not start: {line!r}"
        out = tmp_path / "x.iowt"
        sfile = tmp_path / "strace.txt"
        record(iowhy_bin, out, ["strace", "-f", "-c", "-o", str(sfile), PY, WORKLOADS,
                                "fsyncmix", str(mnt), "9", "5"])
    finally:
        bt.send_signal(signal.SIGINT)
        bt_out, _ = bt.communicate(timeout=60)
    tr = read_trace(str(out))
    t_first = tr.start_ns - int(tr.recorder["startup_ns"])  # the recorder's main()
    stamps = [int(m) for m in re.findall(r"^I (\d+)$", bt_out, re.M)]
    issues = sum(t_first <= t <= tr.end_ns for t in stamps)
    rq = dev_requests(tr, lp)
    issued = rq[rq["issue_ns"] > 0]
    ours = int(len(issued) + issued["requeues"].sum())
    assert ours == issues, f"iowhy saw {ours} issues, bpftrace {issues}"

    counts = {}
    for ln in sfile.read_text().splitlines():
        parts = ln.split()
        if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync"):
            counts[parts[-1]] = int(parts[3])
    f = tr.records("fsync")
    assert counts == {"fsync": int((f["call_u16"] == abi.CALL_FSYNC).sum()),
                      "fdatasync": int((f["call_u16"] == abi.CALL_FDATASYNC).sum())}
    assert counts == {"fsync": 9, "fdatasync": 5}


def test_probe_stats_and_recorder_cpu(bpf, make_fs, tmp_path, iowhy_bin):
    """--probe-stats stores the kernel's run count and time of each program over the
    recording: at least one run of the issue program per request the trace saw issued,
    of the fsync exit program per fsync call the workload made; the recorder's own CPU
    time is in every trailer, and `info` shows both."""
    lp, mnt = make_fs("xfs")
    out = tmp_path / "s.iowt"
    record(iowhy_bin, out, [PY, WORKLOADS, "fsyncmix", str(mnt), "7", "3"], "--probe-stats")
    tr = read_trace(str(out))
    d = info(iowhy_bin, out)
    cpu = d["recorder_cpu_ns"]
    assert set(cpu) == {"user", "system"} and all(int(v) >= 0 for v in cpu.values())
    ps = {r["program"]: r for r in d["probe_stats"]}
    assert [r["run_ns"] for r in d["probe_stats"]] == sorted(
        (r["run_ns"] for r in d["probe_stats"]), reverse=True)
    # Requests issued once the workload started: the statistics start just before it,
    # after the probes are attached, so other devices' requests issued between the two
    # are in the trace but not in the run counts.
    rq = tr.records("request")
    tasks = tr.records("task")
    started = int(tasks["ts_ns"][tasks["event_u16"] == abi.TASK_ROOT].min())
    issued = int((rq["issue_ns"] >= started).sum())
    assert issued > 0
    issue_prog = "tpb_block_rq_issue" if "tpb_block_rq_issue" in ps else "raw_block_rq_issue"
    assert ps[issue_prog]["runs"] >= issued
    assert ps[issue_prog]["run_ns"] > 0
    f = tr.records("fsync")
    assert int((f["call_u16"] == abi.CALL_FSYNC).sum()) == 7
    assert ps["scx_fsync"]["runs"] >= 7 and ps["scx_fdatasync"]["runs"] >= 3
    assert all(r["runs"] > 0 for r in ps.values())
    text = run([*iowhy_bin, "info", str(out)]).stdout
    assert "probe cost (ms):" in text and issue_prog in text and "recorder cpu (ms):" in text
    # Without the option: no statistics (they cost every program run), CPU time still.
    out2 = tmp_path / "n.iowt"
    record(iowhy_bin, out2, ["true"])
    d2 = info(iowhy_bin, out2)
    assert d2["probe_stats"] is None and set(d2["recorder_cpu_ns"]) == {"user", "system"}
    assert "not measured (record with --probe-stats)" in run(
        [*iowhy_bin, "info", str(out2)]).stdout


def test_attach_follows_later_fsyncs_and_children(bpf, make_fs, tmp_path, iowhy_bin, request):
    lp, mnt = make_fs("ext4")
    go = tmp_path / "go"
    pidfile = tmp_path / "pid"
    k = 4
    target = subprocess.Popen([PY, WORKLOADS, "wait-then-fsync", str(mnt), str(go), str(pidfile),
                               "--k", str(k)])
    request.addfinalizer(lambda: (target.poll() is None and target.kill(), target.wait()))
    out = tmp_path / "attach.iowt"
    rec = attach_running(
        request, [*iowhy_bin, "attach", "-q", "-p", str(target.pid), "-o", str(out)], out)
    tr = release_until_exit(rec, target, go, out)
    f = tr.records("fsync")
    by_tgid = {int(t): int(c) for t, c in zip(*np.unique(f["tgid"], return_counts=True))}
    assert by_tgid.get(target.pid) == k
    children = [t for t in by_tgid if t != target.pid]
    assert len(children) == 1 and by_tgid[children[0]] == k
    tasks = tr.records("task")
    forks = tasks[tasks["event_u16"] == abi.TASK_FORK]
    assert children[0] in forks["tgid"].tolist()


def test_kill9_keeps_every_complete_chunk(bpf, make_fs, tmp_path, iowhy_bin, request):
    lp, mnt = make_fs("xfs")
    out = tmp_path / "killed.iowt"
    pidfile = tmp_path / "wl.pid"
    rec = subprocess.Popen([str(recorder_path()), "-q", "-o", str(out), "--", PY, WORKLOADS,
                            "fsync-loop", str(mnt), "30", "--pidfile", str(pidfile)],
                           stderr=subprocess.PIPE)

    def _cleanup():
        if rec.poll() is None:
            rec.kill()
        rec.wait()
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    request.addfinalizer(_cleanup)
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.5)  # at least two periodic flushes
    rec.kill()
    rec.wait()
    os.kill(int(pidfile.read_text()), signal.SIGKILL)
    # A killed recorder never renamed its trace into place: it is the partial file.
    assert not out.exists()
    out = out.with_name(f"{out.name}.partial-{rec.pid}")
    d = info(iowhy_bin, out)
    assert d["truncated"] is True
    assert d["records"]["fsync"] > 0 and d["records"]["request"] > 0
    tr = read_trace(str(out))
    assert tr.progress is not None, "counters survive in the last progress chunk"
    assert tr.bad_regions == 0
    # Everything in the file is accounted for: whole chunks plus at most one torn tail.
    text = run([*iowhy_bin, "info", str(out)]).stdout
    assert "truncated" in text.lower()


def test_dry_run_attaches_every_probe(bpf, iowhy_bin):
    p = run([*iowhy_bin, "record", "--dry-run"])
    lines = [ln for ln in p.stdout.splitlines() if ln and not ln.startswith("attached")]
    assert len(lines) >= 29
    # Both flavours of syscall probes: raw sys_enter/sys_exit (--syscalls all) and the
    # classic syscalls:sys_enter_<call> tracepoints (sync, the default).
    how = {ln.split()[0]: ln.split()[1] for ln in lines}
    assert how["sys_enter"] == how["sys_exit"] == "tp_btf", p.stdout
    assert how["sys_enter_fsync"] == how["sys_enter_write"] == "tracepoint", p.stdout
    assert all(h == ("tracepoint" if t.startswith("sys_enter_") else "tp_btf")
               for t, h in how.items()), p.stdout
    assert re.search(r"attached (\d+) of \1 probes", p.stdout), p.stdout
    raw = run([str(recorder_path()), "--dry-run", "--raw-tp"])
    assert re.search(r"attached (\d+) of \1 probes \(raw_tp, thread state in hash\)",
                     raw.stdout), raw.stdout


def test_live_line_on_a_terminal_then_the_counts_once(bpf, iowhy_bin, tmp_path):
    """On a terminal the recorder redraws one progress line a second and erases it at
    the stop; the counts are then printed once. Without a terminal it prints no line."""
    need(shutil.which("script") is not None, "script (util-linux) is not installed")
    out = tmp_path / "t.iowt"
    cmd = " ".join([*iowhy_bin, "record", "-o", str(out), "--", "sleep", "2.5"])
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True,
                       timeout=120, stdin=subprocess.DEVNULL)   # bytes: keep each \r
    text = p.stdout.decode(errors="replace")
    assert p.returncode == 0, text
    lines = re.findall(r"\riowhy-record: (\d+) s, (\d+) requests, (\d+) records "
                       r"\((\d+)/s\), (\d+) events lost\x1b\[K", text)
    assert [int(x[0]) for x in lines][:2] == [1, 2], repr(text[:600])
    assert "\r\x1b[K" in text                       # erased before the counts
    assert len(re.findall(r"iowhy-record: \S+: \d+ requests,", text)) == 1
    q = run([*iowhy_bin, "record", "-o", str(tmp_path / "u.iowt"), "--", "sleep", "1.5"])
    assert "events lost\x1b" not in q.stderr and "\r" not in q.stderr


FD_WORKLOAD = """
import os, sys, time
time.sleep(0.05)  # clock_nanosleep(2): an off-CPU interval in an untraced syscall
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.dup2(fd, 57)
for i in range(5):
    os.write(57, b"x" * 4096)
    (os.fsync if i < 3 else os.fdatasync)(57)
"""


@pytest.mark.parametrize("backend,syscalls", [("task-storage", "all"), ("hash", "all"),
                                              ("task-storage", "sync"), ("hash", "sync")])
def test_thread_state_backends_record_the_same(bpf, make_fs, tmp_path, iowhy_bin, backend,
                                               syscalls):
    """Per-thread state lives in task storage (tp_btf) or a hash map (raw_tp fallback).
    Both give each call's fd (read from the registers at exit, or kept from the entry
    with --syscalls sync), the exact counts, and the per-syscall totals: 3 fsync and 2
    fdatasync on fd 57, 5 writes (not counted where the write family waits for an
    O_SYNC write). With --syscalls sync no other syscall is counted. The
    50 ms sleep's off-CPU interval is named clock_nanosleep in every mode: from the traced
    entry with --syscalls all, from the saved registers with sync (tp_btf only: the
    raw_tp fallback cannot reach them and says "unknown", -2)."""
    lp, mnt = make_fs("ext4")
    env = dict(os.environ)
    if backend == "hash":
        wrapper = tmp_path / "rec-raw-tp"
        wrapper.write_text(f'#!/bin/sh\nexec {recorder_path()} --raw-tp "$@"\n')
        wrapper.chmod(0o755)
        env["IOWHY_RECORDER"] = str(wrapper)
    out = tmp_path / f"{backend}.iowt"
    record(iowhy_bin, out, [PY, "-c", FD_WORKLOAD, str(mnt / "f")], "--syscalls", syscalls,
           env=env)
    tr = read_trace(str(out))
    assert tr.recorder["task_state"] == backend
    assert tr.recorder["syscalls"] == syscalls
    assert tr.recorder["attach_mode"] == ("raw_tp" if backend == "hash" else "tp_btf")
    f = tr.records("fsync")
    calls = sorted(abi.CALL_NAMES[int(c)] for c in f["call_u16"])
    assert calls == ["fdatasync"] * 2 + ["fsync"] * 3, calls
    assert (f["fd"] == 57).all(), f["fd"]
    assert (f["exit_ns"] > f["enter_ns"]).all()
    sc = tr.records("syscall")
    by_nr = {int(n): int(c) for n, c in zip(sc["syscall_nr"], sc["count"])}
    assert by_nr.get(74) == 3 and by_nr.get(75) == 2, by_nr  # x86-64 fsync, fdatasync
    # write(2): timed from the start, except with sync on tp_btf, where the write family
    # waits for an O_SYNC write that never comes (none of these writes syncs).
    lazy = syscalls == "sync" and backend != "hash"
    assert tr.recorder["write_probes"] == ("lazy" if lazy else "start")
    assert tr.trailer["write_probes_ns"] == (0 if lazy else tr.recorder["start_ns"])
    assert by_nr.get(1, 0) == 0 if lazy else by_nr.get(1, 0) >= 5, by_nr
    off = tr.records("offcpu")
    nrs = set(off["syscall_nr"].astype(np.int32).tolist())
    sleep = off[(off["end_ns"] - off["start_ns"]) >= 45_000_000]
    assert len(sleep) == 1, sleep
    if syscalls == "sync":
        assert set(by_nr) <= {1, 18, 20, 26, 74, 75, 162, 277, 296, 306, 328}, by_nr
    else:
        assert len(by_nr) > 10  # python's start-up alone makes many kinds of calls
        assert by_nr.get(230) == 1, by_nr  # the sleep, counted and timed
    if backend == "hash" and syscalls == "sync":
        assert int(sleep["syscall_nr"][0].astype(np.int32)) == -2
    else:
        assert int(sleep["syscall_nr"][0].astype(np.int32)) == 230  # x86-64 clock_nanosleep
        assert -2 not in nrs, nrs


def test_recorder_counter_names_match_analyzer(bpf):
    p = run([str(recorder_path()), "--list-counters"])
    assert tuple(p.stdout.split()) == abi.COUNTER_NAMES


# Loopback TCP traffic for argv[1] seconds: its softirq work makes the kernel run block
# completions on top of other tasks' kernel code, where this VM's kernel sometimes runs no
# BPF program at all (docs/trace-format.md, "Events the kernel does not deliver").
NET_LOAD = """
import socket, sys, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def sink():
    c, _ = srv.accept()
    while c.recv(65536):
        pass
threading.Thread(target=sink, daemon=True).start()
c = socket.create_connection(srv.getsockname())
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    c.send(b"x" * 64)
"""


def test_unseen_events_are_written_and_counted(bpf, make_loop, tmp_path, iowhy_bin, request):
    """Every request the device completed is a record, with the right op, even when the
    kernel ran no probe for its completion or its issue: checked against the device's own
    counts in /sys/block/*/stat, under network load."""
    need(shutil.which("fio") is not None, "needs fio")
    lp = make_loop(1024)
    net = subprocess.Popen([PY, "-c", NET_LOAD, "30"])

    def _stop():
        net.kill()
        net.wait()
    request.addfinalizer(_stop)
    stat = Path(f"/sys/block/{lp.name}/stat")
    before = [int(x) for x in stat.read_text().split()]
    out = tmp_path / "t.iowt"
    record(iowhy_bin, out, ["fio", "--name=w", f"--filename={lp.dev}", "--rw=randwrite",
                            "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=32",
                            "--time_based", "--runtime=3", "--size=1000M",
                            "--rate_iops=30000", "--randrepeat=0", "--norandommap",
                            "--output=/dev/null"], "--dev", lp.dev)
    after = [int(x) for x in stat.read_text().split()]
    reads, writes = after[0] - before[0], after[4] - before[4]
    tr = read_trace(str(out))
    r = dev_requests(tr, lp)
    assert writes > 10_000
    assert int((r["op"] == abi.OP_WRITE).sum()) == writes
    assert int((r["op"] == abi.OP_READ).sum()) == reads
    assert len(r) == reads + writes
    w = r[r["op"] == abi.OP_WRITE]
    assert (w["len_bytes"] == 4096).all() and (w["start_sector"] < 1000 << 11).all()
    lost_done = (r["flags_u16"] & abi.RQ_LOST_DONE) != 0
    lost_issue = (r["flags_u16"] & abi.RQ_LOST_ISSUE) != 0
    assert_nothing_dropped(tr)
    seen = ~(lost_done | lost_issue)
    assert (w["issue_ns"][seen[r["op"] == abi.OP_WRITE]] > 0).all()
    assert (r["done_ns"][seen] >= r["issue_ns"][seen]).all()
    off = tr.records("offcpu")
    assert (off["end_ns"] >= off["start_ns"]).all()


def test_every_request_numbered_while_recording_is_written_once(bpf, make_loop, tmp_path,
                                                                iowhy_bin, request):
    """Recording stops while fio keeps 16 direct writes in flight. Every request the
    probes numbered ends up in exactly one record, from the ring or from the stop-time
    dump, or is counted as merged: a request that completes while the recorder reads the
    tables at stop is neither lost nor written twice."""
    need(shutil.which("fio") is not None, "fio not installed")
    lp = make_loop(256)
    # --thread: the job runs inside fio's own process, so ending that PID ends the I/O
    fio = subprocess.Popen(
        ["fio", "--name=w", "--thread", f"--filename={lp.dev}", "--rw=randwrite", "--bs=4k",
         "--direct=1", "--ioengine=libaio", "--iodepth=16", "--time_based", "--runtime=60",
         "--size=128m"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _stop_fio():
        if fio.poll() is None:
            os.kill(fio.pid, signal.SIGKILL)
            fio.wait()
    request.addfinalizer(_stop_fio)
    stat = Path(f"/sys/block/{lp.name}/stat")
    for _ in range(100):  # until fio's writes reach the device
        if int(stat.read_text().split()[4]) > 1000:
            break
        time.sleep(0.05)
    out = tmp_path / "t.iowt"
    record(iowhy_bin, out, ["sleep", "1"], "--dev", lp.dev)
    assert fio.poll() is None, "fio ended before recording stopped"
    tr = read_trace(str(out))
    assert_nothing_dropped(tr)
    seq = tr.records("request")["seq"]
    assert len(seq) > 1000, len(seq)
    assert len(np.unique(seq)) == len(seq), "a request written twice"
    merged = tr.counters.get("requests_merged", 0)
    # seq = n * stride + cpu with n consecutive from 0 per CPU: the numbers handed out
    # are, per CPU, 0 .. its highest n
    stride = int(tr.trailer["rq_seq_stride"])
    assert stride >= (os.cpu_count() or 1), stride
    handed_out = sum(int(seq[seq % stride == c].max()) // stride + 1
                     for c in np.unique(seq % stride))
    assert len(seq) + merged == handed_out, (len(seq), merged, handed_out)


# -- bad input: one line on stderr, non-zero exit, no traceback ---------------------------

def one_line_error(p, code=None, pattern=""):
    assert p.returncode != 0
    if code is not None:
        assert p.returncode == code, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert lines[0].startswith("iowhy: ")
    assert re.search(pattern, lines[0], re.I), lines[0]


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_not_root(bpf, iowhy_bin, request):
    need(shutil.which("setpriv") is not None, "setpriv missing")
    cli = list(iowhy_bin)
    if run([*NOBODY, "test", "-r", cli[-1]], check=False).returncode:
        # A checkout under a directory only root may enter (mktemp -d): run the same
        # package from a copy nobody can read, with the system Python (the refusal comes
        # before anything needs numpy).
        import tempfile
        import iowhy
        d = tempfile.mkdtemp()
        request.addfinalizer(lambda: shutil.rmtree(d, ignore_errors=True))
        os.chmod(d, 0o755)
        shutil.copytree(os.path.dirname(iowhy.__file__), os.path.join(d, "iowhy"))
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
        cli = ["/usr/bin/python3", "-c", f"import sys; sys.path.insert(0, {d!r}); "
               "from iowhy.cli import main; sys.exit(main(sys.argv[1:]))"]
    p = run([*NOBODY, *cli, "record", "-o", "/tmp/iowhy-nobody.iowt", "--", "true"],
            check=False)
    one_line_error(p, 1, "root")


def test_no_btf(bpf, iowhy_bin, tmp_path):
    env = dict(os.environ, IOWHY_SYSFS_BTF=str(tmp_path / "no-such-btf"))
    p = run([*iowhy_bin, "record", "-o", str(tmp_path / "x.iowt"), "--", "true"],
            check=False, env=env)
    one_line_error(p, 1, "BTF")


def test_missing_pid(bpf, iowhy_bin, tmp_path):
    pid = 4194303
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    p = run([*iowhy_bin, "attach", "-p", str(pid), "-o", str(tmp_path / "x.iowt")], check=False)
    one_line_error(p, 1, f"no process with PID {pid}")


def test_dev_not_block_device(bpf, iowhy_bin, tmp_path):
    p = run([*iowhy_bin, "record", "--dev", "/etc/passwd", "-o", str(tmp_path / "x.iowt"),
             "--", "true"], check=False)
    one_line_error(p, 1, "not a block device")


def test_output_not_writable(bpf, iowhy_bin, tmp_path):
    p = run([*iowhy_bin, "record", "-o", str(tmp_path / "nodir" / "x.iowt"), "--", "true"],
            check=False)
    one_line_error(p, 1, "cannot write")
    (tmp_path / "afile").write_text("")
    p = run([*iowhy_bin, "record", "-o", str(tmp_path / "afile" / "x.iowt"), "--", "true"],
            check=False)
    one_line_error(p, 1, "is not a directory")


def test_command_not_found(bpf, iowhy_bin, tmp_path):
    p = run([*iowhy_bin, "record", "-o", str(tmp_path / "x.iowt"), "--",
             "no-such-command-iowhy"], check=False)
    one_line_error(p, 127, "command not found")


def test_workload_exit_status_is_returned(bpf, iowhy_bin, tmp_path):
    p = record(iowhy_bin, tmp_path / "x.iowt", ["sh", "-c", "exit 7"], check=False)
    assert p.returncode == 7, p.stderr
    assert read_trace(str(tmp_path / "x.iowt")).trailer["exit_status"] == 7


def test_disk_full_stops_cleanly(bpf, make_fs, tmp_path, iowhy_bin, request):
    """The trace's own filesystem fills up: the recorder stops, says so, and what it
    wrote stays readable."""
    lp, mnt = make_fs("ext4")
    small = tmp_path / "small"
    small.mkdir()
    run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)])
    request.addfinalizer(lambda: subprocess.run(["umount", str(small)], capture_output=True))
    # 640 KiB left: under a second of this loop's trace on an idle machine, several on a
    # loaded one, where the loop runs many times slower (2 MiB lasted its 20 s at a load
    # average of 9)
    (small / "filler").write_bytes(b"\0" * (2048 - 640) * 1024)
    out = small / "full.iowt"
    p = record(iowhy_bin, out, [PY, WORKLOADS, "fsync-loop", str(mnt), "20"], check=False)
    assert p.returncode == 1, p.stderr
    assert "No space left on device" in p.stderr, p.stderr
    assert p.stderr.count("\n") <= 3
    assert "Traceback" not in p.stderr
    d = info(iowhy_bin, out)
    assert d["records"]["request"] + d["records"]["fsync"] > 0
    assert d["duration_ns"] < 20e9, "recording stopped before the workload ended"
    assert d["stop_reason"] in (None, "disk-full")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
