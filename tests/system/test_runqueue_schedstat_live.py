"""Each thread's own CPU and runqueue time against the kernel's per-task schedstat, on a
loaded machine: the test starts its own background CPU load (spinners outside the
workload, at least 6 runnable tasks on average while it records), then records a
workload of single-threaded processes whose mix of CPU, sleeps, fsync and pipe
wake-ups is known by construction.

The truth is each process's whole life: /proc/PID/schedstat (time on CPU, time waiting
on a runqueue, both 0 at fork) read by the parent after the child has exited and
before it is reaped (waitid WNOWAIT), so no part of its life (its start under load, its
exit) is outside the comparison. Tolerance: 2 points of the process's life.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import run
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

SPINNERS = 12           # background CPU load on top of the workload (2 CPUs here)
MIN_RUNNABLE = 6.0      # the load the check must hold at (mean runnable tasks)
TOLERANCE = 0.02        # of each process's life

HARNESS = r"""
import json, os, subprocess, sys
out, secs, tmp = sys.argv[1], float(sys.argv[2]), sys.argv[3]
PRE = "import os, time\nend = time.monotonic() + %r\n" % secs
SPIN = "def spin(s):\n    t = time.monotonic() + s\n    while time.monotonic() < t: pass\n"
kinds = {
    "spin": PRE + SPIN + "spin(end - time.monotonic())\n",
    "sleep": PRE + SPIN + "while time.monotonic() < end:\n    spin(0.001); time.sleep(0.001)\n",
    "fsync": PRE + SPIN + "fd = os.open(%r, os.O_WRONLY | os.O_CREAT, 0o600)\n"
             "while time.monotonic() < end:\n"
             "    spin(0.0005); os.write(fd, b'x' * 4096); os.fsync(fd)\n"
             "os.unlink(%r)\n" % (tmp + "/f", tmp + "/f"),
}
kids = [(k, subprocess.Popen([sys.executable, "-c", src])) for k, src in kinds.items()]
# a pipe ping-pong: each side works 0.2 ms between messages
r, w = os.pipe(); r2, w2 = os.pipe()
PING = PRE + SPIN + ("rd, wr = %d, %d\nwhile time.monotonic() < end:\n"
                     "    spin(0.0002); os.write(wr, b'x'); os.read(rd, 1)\nos.write(wr, b'q')\n")
PONG = PRE + SPIN + ("rd, wr = %d, %d\nwhile os.read(rd, 1) == b'x':\n"
                     "    spin(0.0002); os.write(wr, b'y')\n")
kids.append(("ping", subprocess.Popen([sys.executable, "-c", PING % (r2, w)], pass_fds=(r2, w))))
kids.append(("pong", subprocess.Popen([sys.executable, "-c", PONG % (r, w2)], pass_fds=(r, w2))))
for fd in (r, w, r2, w2):
    os.close(fd)
res = {}
for name, k in kids:
    os.waitid(os.P_PID, k.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    cpu, wait, _ = open(f"/proc/{k.pid}/schedstat").read().split()
    res[k.pid] = {"kind": name, "cpu_ns": int(cpu), "runqueue_ns": int(wait)}
    k.wait()
with open(out, "w") as f:
    json.dump(res, f)
"""


def _runnable_now() -> int:
    """Runnable tasks on the machine now (/proc/loadavg's fourth field, less this one)."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0]) - 1


@pytest.fixture
def cpu_load(request):
    """SPINNERS busy processes, stopped by PID at teardown; yields a list that the
    runnable-task samples are appended to while the test holds it."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(SPINNERS)]
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            samples.append(_runnable_now())

    t = threading.Thread(target=sample, daemon=True)

    def teardown() -> None:
        stop.set()
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
    request.addfinalizer(teardown)
    time.sleep(0.5)
    t.start()
    yield samples
    stop.set()
    t.join()


def test_cpu_and_runqueue_per_thread_match_schedstat_under_load(
        bpf, tmp_path, iowhy_bin, cpu_load):
    out = tmp_path / "load.iowt"
    truth = tmp_path / "schedstat.json"
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS)
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--", "/usr/bin/python3", str(harness),
         str(truth), "1.5", str(tmp_path)])
    runnable = sum(cpu_load) / max(len(cpu_load), 1)
    assert runnable >= MIN_RUNNABLE, f"the load did not reach {MIN_RUNNABLE}: {runnable:.1f}"
    r = analyze(read_trace(str(out)))
    assert r["workload"]["attribution"] == "causal"
    by = {t["tid"]: t for t in r["thread_time"]["by_thread"]}
    bad = []
    for pid, k in json.loads(truth.read_text()).items():
        t = by[int(pid)]
        life = t["total_ns"]
        # the premise: each waited for a CPU a good part of its life, so the check can fail
        assert k["runqueue_ns"] > 0.25 * life, (k, life, runnable)
        for own, key in (("on_cpu_ns", "cpu_ns"), ("runqueue_ns", "runqueue_ns")):
            if abs(t[own] - k[key]) > TOLERANCE * life:
                bad.append(f"{k['kind']} {own}: iowhy {t[own] / life:.1%}, schedstat "
                           f"{k[key] / life:.1%} of {life / 1e6:.0f} ms")
    assert not bad, f"at {runnable:.1f} runnable tasks: " + "; ".join(bad)
