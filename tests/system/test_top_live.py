"""`iowhy top` beside an fsync loop (real BPF): it names the loop, with its time blocked
on I/O causes, counts the fsyncs the loop timed itself in the same intervals, and shows
the loop's device from the kernel's own counters."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import run
from recording import FSYNC_LOOP, fsync_calls

pytestmark = pytest.mark.bpf

PY = "/usr/bin/python3"
IO = ("barrier", "log", "metadata", "data")


def _top_beside(iowhy_bin, request, dev: str, stop, script: list[str]):
    """`python3 -c SCRIPT...` (it runs until the file `stop` exists), and three 1 s
    snapshots of `iowhy top -p` on it, device `dev`; then the script stopped. Returns
    (its Popen, the snapshots)."""
    w = subprocess.Popen([PY, "-c", *script])
    request.addfinalizer(lambda: (stop.touch(), w.poll() is None and w.kill(), w.wait()))
    p = run([*iowhy_bin, "top", "-p", str(w.pid), "-n", "3", "-i", "1", "--json",
             "-d", dev], timeout=120)
    stop.touch()
    assert w.wait(timeout=60) == 0
    snaps = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(snaps) == 3, p.stdout
    return w, snaps


def test_top_names_an_fsync_loop_with_io_causes(bpf, make_fs, tmp_path, iowhy_bin, request):
    lp, mnt = make_fs("ext4", 256)
    stop, log = tmp_path / "stop", tmp_path / "calls"
    w, snaps = _top_beside(iowhy_bin, request, lp.dev, stop,
                           [FSYNC_LOOP, str(mnt / "f"), str(stop), str(log)])
    calls = fsync_calls(log)
    dev = os.path.basename(os.path.realpath(lp.dev))
    counted = 0
    for s in snaps:
        assert 0.9e9 <= s["interval_ns"] <= 3e9, s["interval_ns"]
        assert s["processes"], s
        top = s["processes"][0]  # sorted by blocked time: the loop, the only process
        assert top["pid"] == w.pid and top["comm"] == "python3", top
        a = top["attribution_ns"]
        io = sum(a[c] for c in IO)
        assert io > 0.5 * top["blocked_ns"] > 0, a  # its waits are on its I/O
        assert top["blocked_ns"] <= s["interval_ns"] * 1.01
        # no fsync of the loop's is longer than the loop measured around its calls
        inside = calls[(calls[:, 1] >= s["start_ns"]) & (calls[:, 1] < s["end_ns"])]
        if top["fsync"]["count"]:
            assert top["fsync"]["max_ns"] <= int((inside[:, 1] - inside[:, 0]).max())
        counted += top["fsync"]["count"]
        # the device line, from /sys/block: the loop device, flushed by every fsync
        names = [d["name"] for d in s["devices"]]
        assert names == [dev] or not names, names
    assert any(s["devices"] and s["devices"][0]["flushes_per_s"] > 0 for s in snaps), snaps
    # the fsyncs the loop timed itself between the first snapshot's start and the last
    # one's end; a record can fall in the neighbouring interval at each end
    own = int(((calls[:, 1] >= snaps[0]["start_ns"]) & (calls[:, 1] < snaps[-1]["end_ns"])).sum())
    assert own > 20 and abs(counted - own) <= 3, (counted, own)


# Overwrite one committed 4 KiB block and fdatasync it until STOP: the data is written,
# no journal commit is needed, so each call ends with an empty PREFLUSH write (ext4's
# blkdev_issue_flush) and the caller waits for that flush (docs: KERNEL-NOTES).
OVERWRITE = r"""
import os, sys
path, stop = sys.argv[1:3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, b"x" * 4096)
os.fsync(fd)
while not os.path.exists(stop):
    os.pwrite(fd, b"y" * 4096, 0)
    os.fdatasync(fd)
"""


def test_top_names_a_wait_for_a_flush_barrier(bpf, make_fs, tmp_path, iowhy_bin, request):
    lp, mnt = make_fs("ext4", 256)
    stop = tmp_path / "stop"
    w, snaps = _top_beside(iowhy_bin, request, lp.dev, stop,
                           [OVERWRITE, str(mnt / "f"), str(stop)])
    a = {c: 0 for c in ("barrier", "log", "metadata", "data")}
    calls = flushes = blocked = requests = rq_max = call_max = 0
    for s in snaps:
        top = s["processes"][0]
        assert top["pid"] == w.pid, top
        for c in a:
            a[c] += top["attribution_ns"][c]
        blocked += top["blocked_ns"]
        calls += top["fsync"]["count"]
        requests += top["requests"]["count"]
        # (not in the first interval: a call under way at the attach is not counted,
        # its requests after the attach are, and the attach itself can stall it)
        if s is not snaps[0] and top["requests"]["count"]:
            rq_max = max(rq_max, top["requests"]["max_ns"])
        call_max = max(call_max, top["fsync"]["max_ns"] if top["fsync"]["count"] else 0)
        flushes += sum(d["flushes_per_s"] * s["interval_ns"] / 1e9 for d in s["devices"])
    # the kernel's own count (/sys/block/DEV/stat): a flush per call, so the calls were
    # what this test means them to be
    assert calls > 20 and flushes >= 0.8 * calls, (calls, flushes)
    # the loop submits two requests per call, its 4 KiB write and the empty PREFLUSH
    # write of blkdev_issue_flush (a call a journal commit served has the commit's flush
    # instead; a request can fall in the neighbouring interval at each end)
    assert abs(requests - 2 * calls) <= 0.05 * calls + 3, (requests, calls)
    # each completes inside its call: the longest no longer than the longest call
    assert 0 < rq_max <= call_max, (rq_max, call_max)
    # and the loop's waits went by the flush its completion ended
    assert max(a, key=lambda c: a[c]) == "barrier" and a["barrier"] > 0.5 * blocked, (a, blocked)


def test_top_batch_text_and_bad_targets(bpf, tmp_path, iowhy_bin, request):
    w = subprocess.Popen(["sleep", "60"])
    request.addfinalizer(lambda: (w.kill(), w.wait()))
    p = run([*iowhy_bin, "top", "-p", str(w.pid), "-n", "2", "-i", "0.5"], timeout=120)
    blocks = p.stdout.split("\n\n")
    assert len(blocks) == 2 and all(b.startswith("iowhy top  interval") for b in blocks), p.stdout
    assert all(len(line) <= 100 for line in p.stdout.splitlines())
    for argv, words in ((["-p", "1"], "refusing to attach to PID 1"),
                        (["-p", str(w.pid), "-a"], "not allowed with"),
                        ([], "one target"), (["--cgroup", str(tmp_path)], "not a cgroup v2")):
        r = run([*iowhy_bin, "top", *argv, "-n", "1"], check=False)
        assert r.returncode != 0 and words in r.stderr, (argv, r.stderr)
        assert r.stderr.count("\n") <= 3, r.stderr
