"""A thread asleep when the recording stops: its last sleep is a sleep, not time on CPU.

The probes write an off-CPU interval when the thread comes back on a CPU; a sleep still
open at the stop is written by the recorder from the thread's probe state (flag
OPEN_END). Without it, the time from a thread's last switch-in to the stop reads as
CPU. The workload: three threads that work a known while, then block until well after
the stop (one in clock_nanosleep, one in a pipe read that nothing ends, the main thread
in clock_nanosleep). The truth is each thread's on-CPU time from the kernel's per-task
schedstat, read by the workload itself before and after its work; its threads do
nothing else in the window.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import run  # noqa: F401  (the tier's fixtures)
from iowhy import abi
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace
from recording import attach_flight, attach_running, interrupt, slow_flush_fs, wait_for_file

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
WORKLOAD = r"""
import json, os, sys, threading, time
go, out = sys.argv[1], sys.argv[2]

def cpu(tid):
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])

def burn(s):
    t = time.monotonic() + s
    while time.monotonic() < t:
        pass

done = {}
def worker(name, s, block):
    tid = threading.get_native_id()
    burn(s)
    done[name] = (tid, cpu(tid))
    block()

while not os.path.exists(go):
    time.sleep(0.01)
me = threading.get_native_id()
c0 = cpu(me)
rd, wr = os.pipe()
ts = [threading.Thread(target=worker, args=("nanosleep", 0.3, lambda: time.sleep(120)),
                       daemon=True),
      threading.Thread(target=worker, args=("pipe", 0.2, lambda: os.read(rd, 1)),
                       daemon=True)]
for t in ts:
    t.start()
burn(0.25)
while len(done) < 2:
    time.sleep(0.005)
res = {str(tid): {"name": n, "cpu_ns": c} for n, (tid, c) in done.items()}
res[str(me)] = {"name": "main", "cpu_ns": cpu(me) - c0}
with open(out + ".tmp", "w") as f:
    json.dump(res, f)
os.rename(out + ".tmp", out)
time.sleep(120)
"""
ASLEEP_S = 1.5       # how long every thread is blocked before the stop
TOLERANCE_NS = 30_000_000  # the main thread's polls and its JSON, the threads' starts


def _record(tmp_path, iowhy_bin, request, flight: bool):
    """The workload recorded until ASLEEP_S after its threads blocked: stopped by SIGINT,
    or (flight) a flight recorder's dump on SIGUSR1 while recording goes on. The trace
    and the workload's truth."""
    go, truth, out = tmp_path / "go", tmp_path / "truth.json", tmp_path / "t.iowt"
    w = subprocess.Popen([PY, "-c", WORKLOAD, str(go), str(truth)])
    request.addfinalizer(lambda: (w.poll() is None and w.kill(), w.wait()))
    deadline = time.monotonic() + 60
    if flight:
        rec = attach_flight(iowhy_bin, request, ["-p", str(w.pid)], out,
                            "--flight", "10", "--after", "0")
    else:
        rec = attach_running(
            request, [*iowhy_bin, "attach", "-q", "-p", str(w.pid), "-o", str(out)], out)
    go.write_text("go")
    while not truth.exists():
        assert time.monotonic() < deadline and w.poll() is None, "the workload did not report"
        time.sleep(0.02)
    time.sleep(ASLEEP_S)
    if flight:
        rec.send_signal(signal.SIGUSR1)
        wait_for_file(out)
    interrupt(rec)
    return read_trace(str(out)), json.loads(truth.read_text())


@pytest.mark.parametrize("flight", [False, True], ids=["stop", "flight-dump"])
def test_threads_asleep_at_the_end_are_not_on_cpu(bpf, tmp_path, iowhy_bin, request, flight):
    tr, known = _record(tmp_path, iowhy_bin, request, flight)
    off = tr.records("offcpu")
    open_end = off[(off["flags_u16"] & abi.OFF_OPEN_END) != 0]
    # each thread's last sleep is written, ending at the end of the window, and counted
    assert sorted(int(t) for t in open_end["tid"]) == sorted(int(t) for t in known)
    assert (open_end["end_ns"] == tr.trailer["end_ns"]).all()
    assert ((open_end["end_ns"] - open_end["start_ns"]) >= ASLEEP_S * 1e9 * 0.9).all()
    assert tr.trailer["sleeps_open_at_stop"] == len(known)
    if flight:  # the window covers the whole work: it began before the recording did
        assert tr.trailer["flight"]["trigger"] == "SIGUSR1"
        assert tr.start_ns == tr.recorder["start_ns"]
    r = analyze(tr)
    assert r["workload"]["attribution"] == "causal"
    by = {t["tid"]: t for t in r["thread_time"]["by_thread"]}
    bad = []
    for tid, k in known.items():
        t = by[int(tid)]
        if abs(t["on_cpu_ns"] - k["cpu_ns"]) > TOLERANCE_NS:
            bad.append(f"{k['name']}: iowhy {t['on_cpu_ns'] / 1e6:.0f} ms on CPU, schedstat "
                       f"{k['cpu_ns'] / 1e6:.0f} ms (life {t['total_ns'] / 1e6:.0f} ms)")
    assert not bad, "; ".join(bad)


FSYNC_ONCE = r"""
import os, sys, time
path, go, log = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, b"x" * 4096)
while not os.path.exists(go):
    time.sleep(0.01)
t0 = time.monotonic_ns(); os.fsync(fd); t1 = time.monotonic_ns()
open(log, "w").write(f"{t0} {t1}\n")
"""
FLUSH_S = 2  # what the emulated disk charges for a cache flush
STOP_AFTER_S = 1.0  # into the fsync


def test_an_fsync_blocked_at_the_stop_is_the_flush_in_flight(bpf, tmp_path, iowhy_bin,
                                                             request):
    """An fsync on ext4 over the emulated disk, whose cache flush takes FLUSH_S by
    construction, still blocked (waiting for the journal's commit, whose flush is in
    flight) when the recording stops STOP_AFTER_S into it: the wait open at the stop is
    the flush's (barrier), not unexplained; the call is written incomplete. The
    workload's own clock says the fsync outlasted the stop."""
    _, mnt = slow_flush_fs(tmp_path, request, FLUSH_S * 10**9)
    go, log, out = tmp_path / "go", tmp_path / "calls", tmp_path / "f.iowt"
    w = subprocess.Popen([PY, "-c", FSYNC_ONCE, str(mnt / "f"), str(go), str(log)])
    request.addfinalizer(lambda: (go.touch(), w.poll() is None and w.kill(), w.wait()))
    rec = attach_running(
        request, [*iowhy_bin, "attach", "-q", "-p", str(w.pid), "-o", str(out)], out)
    go.touch()
    time.sleep(STOP_AFTER_S)
    interrupt(rec)
    assert w.wait(timeout=60) == 0
    (t0, t1), = [[int(x) for x in line.split()] for line in log.read_text().splitlines()]
    tr = read_trace(str(out))
    assert t0 < tr.end_ns < t1, "the fsync did not outlast the stop"
    fs = tr.records("fsync")
    call = fs[(fs["tid"] == w.pid) & (fs["call_u16"] == abi.CALL_FSYNC)]
    assert len(call) == 1 and call["flags_u16"][0] & abi.FS_F_INCOMPLETE
    r = analyze(tr)
    f = r["thread_time"]["by_syscall"]["fsync"]
    total, att = f["total_ns"], f["attribution_ns"]
    assert total >= (STOP_AFTER_S - 0.2) * 1e9, total
    assert att.get("barrier", 0) >= 0.8 * total, att
    assert att.get("wait-other", 0) <= 0.1 * total, att


WAKE_DURING_DUMP = r"""
import json, os, sys, threading, time
go, fifo, out = sys.argv[1:4]

def cpu():
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        return int(f.read().split()[0])

while not os.path.exists(go):
    time.sleep(0.01)
c0 = cpu()
t = time.monotonic() + 0.2
while time.monotonic() < t:
    pass
fd = os.open(fifo, os.O_RDWR)  # never blocks: it is its own writer
c1 = cpu()
with open(out + ".tmp", "w") as f:
    json.dump({"tid": threading.get_native_id(), "cpu_ns": c1 - c0}, f)
os.rename(out + ".tmp", out)
os.read(fd, 1)  # the sleep the dump must keep
woke = time.monotonic_ns()
with open(out + ".woke", "w") as f:
    f.write(str(woke))
time.sleep(120)
"""
STATE_DELAY_MS = 4000  # the recorder's wait between its drain and reading the probes' state
WAKE_AFTER_S = 1.5     # after SIGUSR1: the drain is done, the state not yet read


def test_a_sleep_ending_while_a_dump_is_made_stays_a_sleep(bpf, tmp_path, iowhy_bin, request):
    """A flight dump made while recording goes on takes the probes' records, then reads
    what is still open from their state. A thread whose sleep ends in between is in
    neither (its record is written at the wakeup, after the drain; its state is no
    longer asleep): the dump must still hold that sleep, open at the dump's end, or the
    thread reads as on CPU for the whole of it. The recorder's test hook widens the gap
    to STATE_DELAY_MS; the thread is woken WAKE_AFTER_S after the signal. The truth is
    the thread's schedstat before it blocked."""
    go, fifo, truth, out = (tmp_path / n for n in ("go", "wake", "truth.json", "t.iowt"))
    os.mkfifo(fifo)
    w = subprocess.Popen([PY, "-c", WAKE_DURING_DUMP, str(go), str(fifo), str(truth)])
    request.addfinalizer(lambda: (w.poll() is None and w.kill(), w.wait()))
    env = dict(os.environ, IOWHY_FLIGHT_STATE_DELAY_MS=str(STATE_DELAY_MS))
    rec = attach_flight(iowhy_bin, request, ["-p", str(w.pid)], out,
                        "--flight", "10", "--after", "0", env=env)
    deadline = time.monotonic() + 60
    go.write_text("go")
    while not truth.exists():
        assert time.monotonic() < deadline and w.poll() is None, "the workload did not report"
        time.sleep(0.02)
    time.sleep(0.5)
    rec.send_signal(signal.SIGUSR1)
    time.sleep(WAKE_AFTER_S)
    wfd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.write(wfd, b"x")
    os.close(wfd)
    wait_for_file(out)
    interrupt(rec)
    known = json.loads(truth.read_text())
    woke = int((tmp_path / "truth.json.woke").read_text())
    tr = read_trace(str(out))
    end = tr.trailer["end_ns"]
    if not end < woke < end + STATE_DELAY_MS * 10**6:
        load = os.getloadavg()[0]
        pytest.skip(f"the thread woke {(woke - end) / 1e6:.0f} ms after the dump's end, "
                    f"not while its state was read (load average {load:.1f})")
    off = tr.records("offcpu")
    mine = off[(off["tid"] == known["tid"]) & ((off["flags_u16"] & abi.OFF_OPEN_END) != 0)]
    assert len(mine) == 1 and mine["end_ns"][0] == end, off[off["tid"] == known["tid"]]
    assert end - int(mine["start_ns"][0]) >= 0.5e9
    assert tr.trailer["sleeps_open_at_stop"] >= 1
    r = analyze(tr)
    by = {t["tid"]: t for t in r["thread_time"]["by_thread"]}
    on_cpu = by[known["tid"]]["on_cpu_ns"]
    assert abs(on_cpu - known["cpu_ns"]) <= TOLERANCE_NS, (on_cpu, known["cpu_ns"])
