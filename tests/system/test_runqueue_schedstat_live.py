"""Each thread's own CPU and runqueue time against the kernel's per-task schedstat
(/proc/PID/schedstat: time on CPU, time waiting on a runqueue), on a case whose cause
is known by construction: two CPU-bound processes pinned to one CPU, each runnable
about half of its life."""

from __future__ import annotations

import json

import pytest

from conftest import run
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

SPIN = r"""
import json, os, sys, time
def stat():
    cpu, wait, _ = open("/proc/thread-self/schedstat").read().split()
    return int(cpu), int(wait)
c0, w0 = stat()
end = time.monotonic() + 2.0
while time.monotonic() < end:
    pass
c1, w1 = stat()
with open(sys.argv[1], "w") as f:
    json.dump({"tid": os.getpid(), "cpu_ns": c1 - c0, "runqueue_ns": w1 - w0}, f)
"""


def test_cpu_and_runqueue_per_thread_match_schedstat(bpf, tmp_path, iowhy_bin):
    out = tmp_path / "spin.iowt"
    files = [tmp_path / f"s{i}.json" for i in range(2)]
    spin = tmp_path / "spin.py"
    spin.write_text(SPIN)
    script = " ".join(f"/usr/bin/python3 {spin} {f} &" for f in files) + " wait"
    run([*iowhy_bin, "record", "-q", "-o", str(out), "--", "taskset", "-c", "0",
         "sh", "-c", script])
    r = analyze(read_trace(str(out)))
    assert r["workload"]["attribution"] == "causal"
    by = {t["tid"]: t for t in r["thread_time"]["by_thread"]}
    for f in files:
        k = json.loads(f.read_text())
        t = by[k["tid"]]
        life = t["total_ns"]
        # the premise: both were runnable a large part of the time, so the check can fail
        assert k["runqueue_ns"] > 0.3 * life, (k, life)
        # the thread's own state (thread_time.by_thread), not what explains it
        for own, key in (("on_cpu_ns", "cpu_ns"), ("runqueue_ns", "runqueue_ns")):
            assert abs(t[own] - k[key]) <= 0.05 * life, (own, t, k, life)
