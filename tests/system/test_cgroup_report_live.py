"""`iowhy report --by cgroup` on a real recording: two processes, each in a cgroup v2 of
its own below a parent the test makes, run fsync loops at different rates while
`iowhy attach --cgroup PARENT` records. Each process forks the child that runs its loop
once the recording is on, so that a group holds one process the recorder named at the
start (its cgroup read from /proc) and one the probes saw fork (its cgroup id from the
kernel, named by the recorder). The report puts each loop's fsync count and time, and
the time it was blocked in fsync, under its own cgroup; the loops' own clock readings
around each fsync are the independent count. A third process joins a cgroup made while
recording: its cgroup is named from the id the probes give."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import need, run
from iowhy import abi
from iowhy.traceformat import read_trace
from recording import (assert_nothing_dropped, attach_flight, attach_running, cgroup_mount,
                       interrupt)

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
# Writes its pid to PIDFILE; once GO exists, forks a child that does COUNT 4 KiB
# append+fsyncs, SLEEP s apart, timing each fsync with CLOCK_MONOTONIC, and writes
# "pid count total_ns" to LOG; exits when the child has.
WORKER = r"""
import os, sys, time
pidfile, go, path, count, sleep, log = sys.argv[1:7]
open(pidfile + ".tmp", "w").write(str(os.getpid()))
os.rename(pidfile + ".tmp", pidfile)
while not os.path.exists(go):
    time.sleep(0.01)
child = os.fork()
if child == 0:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    n = total = 0
    for _ in range(int(count)):
        os.write(fd, b"x" * 4096)
        t0 = time.monotonic_ns()
        os.fsync(fd)
        total += time.monotonic_ns() - t0
        n += 1
        time.sleep(float(sleep))
    with open(log + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {n} {total}\n")
    os.rename(log + ".tmp", log)
    os._exit(0)
sys.exit(os.waitpid(child, 0)[1] != 0)
"""
# fsyncs, seconds between them; `late` joins its cgroup, made once the recording is on,
# while recording: the probes name its cgroup first (a JOIN record), the recorder finds
# the path from the id alone
LOOPS = {"fast": (150, 0.002), "slow": (30, 0.03), "late": (20, 0.01)}


@pytest.fixture
def cgroups(root, request):
    """A new cgroup v2 with two below it, removed at teardown once the test's processes
    (ended by its finalizers first) have left them."""
    base = cgroup_mount()
    need(base is not None and os.access(base, os.W_OK), "needs a writable cgroup2 mount")
    parent = base / f"iowhy-test-{uuid.uuid4().hex[:8]}"
    parent.mkdir()
    kids = {name: parent / name for name in LOOPS}

    def remove():
        for d in (*kids.values(), parent):  # those not made are not found
            for _ in range(200):  # a killed worker leaves its cgroup when it is reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
    request.addfinalizer(remove)
    for name, d in kids.items():
        if name != "late":  # made by the test
            d.mkdir()
    return base, parent, kids


def _worker(tmp_path, request, name, cgroup, mnt):
    pidfile = tmp_path / f"{name}.pid"
    count, sleep = LOOPS[name]

    def join() -> None:  # in its cgroup before it execs
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    p = subprocess.Popen([PY, "-c", WORKER, str(pidfile), str(tmp_path / f"{name}.go"),
                          str(mnt / f"{name}.dat"), str(count), str(sleep),
                          str(tmp_path / f"{name}.log")],
                         preexec_fn=join if name != "late" else None,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    request.addfinalizer(lambda: (p.poll() is None and p.kill(), p.wait()))
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()
        time.sleep(0.01)
    return p, int(pidfile.read_text())


def test_report_by_cgroup_puts_each_loop_under_its_cgroup(bpf, cgroups, make_fs, tmp_path,
                                                          iowhy_bin, request):
    base, parent, kids = cgroups
    _, mnt = make_fs("ext4", 256)
    workers = {name: _worker(tmp_path, request, name, kids[name], mnt) for name in LOOPS}
    out = tmp_path / "cg.iowt"
    # every probe attached, the cgroup walked
    rec = attach_running(
        request, [*iowhy_bin, "attach", "-q", "--cgroup", str(parent), "-o", str(out)], out)
    kids["late"].mkdir()
    (kids["late"] / "cgroup.procs").write_text(str(workers["late"][1]))
    for name in LOOPS:
        (tmp_path / f"{name}.go").touch()
    for name, (p, _) in workers.items():
        assert p.wait(timeout=120) == 0, p.stderr.read()
    rec.send_signal(signal.SIGINT)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode in (0, 128 + signal.SIGINT), err
    tr = read_trace(str(out))
    assert_nothing_dropped(tr)

    doc = json.loads(run([*iowhy_bin, "report", "--by", "cgroup", "--json", str(out)]).stdout)
    cg = doc["cgroups"]
    assert cg["recorded"] and cg["unknown_threads"] == 0 and cg["unnamed_cgroups"] == 0
    assert cg["moved_threads"] == 0
    rows = {g["cgroup"]: g for g in cg["groups"]}
    want = {name: "/" + str(kids[name].relative_to(base)) for name in LOOPS}
    assert set(rows) == set(want.values()), rows.keys()
    for name, (_, pid) in workers.items():
        child, n, total = (int(x) for x in (tmp_path / f"{name}.log").read_text().split())
        g = rows[want[name]]
        assert g["pids"] == sorted([pid, child]) and g["processes"] == 2, g
        fs = g["calls"]["fsync"]
        assert fs["count"] == n == LOOPS[name][0], (name, fs, n)
        # the kernel's entry to exit is inside the loop's clock readings around the call
        assert 0.8 * total <= fs["total_ns"] <= total, (name, fs["total_ns"], total)
        blocked = g["blocked_in_ns"].get("fsync", 0)
        assert 0 < blocked <= fs["total_ns"], (name, blocked, fs["total_ns"])
        assert g["on_cpu_ns"] + g["runqueue_ns"] + g["blocked_ns"] == g["thread_ns"]
    assert rows[want["fast"]]["calls"]["fsync"]["count"] > rows[want["slow"]]["calls"][
        "fsync"]["count"]
    # the late one's cgroup came from the probes first (its process's JOIN)
    tk = tr.records("task")
    join = tk[(tk["tgid"] == workers["late"][1]) & (tk["event_u16"] == abi.TASK_JOIN)]
    assert len(join) == 1 and int(join["cgroup_id"][0]) == os.stat(kids["late"]).st_ino
    assert tr.cgroup_paths[os.stat(kids["late"]).st_ino] == want["late"]
    # both paths in the text, each on its row with its fsync count
    text = run([*iowhy_bin, "report", "--by", "cgroup", str(out)]).stdout
    for name in LOOPS:
        row = next(line for line in text.splitlines() if want[name][-27:] in line)
        assert row.split()[-2] == str(LOOPS[name][0]), row


# Appends 4 KiB and fsyncs 10 ms apart until STOP exists.
LOOP = r"""
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
while not os.path.exists(stop):
    os.write(fd, b"x" * 4096)
    os.fsync(fd)
    time.sleep(0.01)
"""


def test_a_flight_dump_names_the_cgroup_of_a_thread_seen_before_its_window(
        bpf, cgroups, make_fs, tmp_path, iowhy_bin, request):
    """`attach --cgroup PARENT --flight 3 --dump-on-exit`: a loop in a cgroup below it
    since before the recording; after 7 s its task records are all older than the
    3 s window, and the dump still puts it under its cgroup (TRAILER thread_cgroups)."""
    base, parent, kids = cgroups
    _, mnt = make_fs("ext4", 256)
    stop = tmp_path / "stop"

    def join() -> None:
        (kids["fast"] / "cgroup.procs").write_text(str(os.getpid()))
    w = subprocess.Popen([PY, "-c", LOOP, str(mnt / "f"), str(stop)], preexec_fn=join)
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    out = tmp_path / "fl.iowt"
    rec = attach_flight(iowhy_bin, request, ["--cgroup", str(parent)], out,
                        "--flight", "3", "--dump-on-exit")
    time.sleep(7)
    interrupt(rec)
    stop.touch()
    assert w.wait(timeout=60) == 0

    tr = read_trace(str(out))
    assert tr.trailer["flight"]["trigger"] == "stop (SIGINT)"
    tk = tr.records("task")
    assert not len(tk[tk["tid"] == w.pid]), tk  # its ROOT record is older than the window
    ino = os.stat(kids["fast"]).st_ino
    assert [w.pid, ino] in tr.trailer["thread_cgroups"]["threads"]
    assert tr.trailer["thread_cgroups"]["not_kept"] == 0
    doc = json.loads(run([*iowhy_bin, "report", "--by", "cgroup", "--json", str(out)]).stdout)
    cg = doc["cgroups"]
    assert cg["unknown_threads"] == 0, cg
    g, = cg["groups"]
    assert g["cgroup"] == "/" + str(kids["fast"].relative_to(base)) and g["pids"] == [w.pid]
    fs = tr.records("fsync")
    assert g["calls"]["fsync"]["count"] == int((fs["tid"] == w.pid).sum()) >= 100
