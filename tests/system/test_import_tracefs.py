"""A tracefs capture of real I/O, imported with `iowhy import ftrace` and checked against
the kernel's own accounting of the device (/sys/block/NAME/stat deltas).

The capture runs in a private mount namespace (tracefs is mounted there if the host has
it unmounted) and in its own ftrace instance, removed afterwards, so nothing of the
host's tracing setup is touched. The workload writes and reads a loop device this test
creates: direct writes, buffered writes merged into one request, two fsyncs (empty
PREFLUSH writes and their flushes) and direct reads.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from conftest import need
from iowhy import abi
from iowhy.cli import main
from iowhy.traceformat import read_trace

SCRIPT = r"""
set -e
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
I=$T/instances/iowhy-test-$$
mkdir $I
trap 'echo 0 > $I/tracing_on; rmdir $I' EXIT
echo 0 > $I/tracing_on
echo mono > $I/trace_clock
echo 8192 > $I/buffer_size_kb
echo 1 > $I/events/block/enable
echo "dev == $DEVT" > $I/events/block/filter
for e in sched/sched_switch sched/sched_wakeup syscalls/sys_enter_fsync syscalls/sys_exit_fsync; do
    echo 1 > $I/events/$e/enable
done
cat /sys/block/$NAME/stat > $OUT/stat0
echo 1 > $I/tracing_on
dd if=/dev/zero of=$DEV bs=64k count=48 oflag=direct conv=fsync status=none
dd if=/dev/zero of=$DEV bs=4k count=64 seek=6000 conv=fsync status=none
dd if=$DEV of=/dev/null bs=64k count=16 iflag=direct status=none
sleep 0.3
echo 0 > $I/tracing_on
cat /sys/block/$NAME/stat > $OUT/stat1
cat $I/trace > $OUT/trace.txt
cat $I/per_cpu/cpu*/stats > $OUT/cpustats
"""


def stat(p: Path) -> list[int]:
    return [int(x) for x in p.read_text().split()]


def test_tracefs_capture_matches_block_stat(make_loop, tmp_path):
    need(shutil.which("unshare") is not None, "needs unshare(1)")
    need(Path("/sys/kernel/tracing").is_dir(), "kernel without tracefs")
    lp = make_loop(64)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEV": lp.dev, "NAME": lp.name,
           "DEVT": str((lp.major << 20) | lp.minor), "OUT": str(tmp_path)}
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", SCRIPT],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    overruns = [int(line.split()[-1]) for line in (tmp_path / "cpustats").read_text().splitlines()
                if line.startswith("overrun:")]
    assert overruns and not any(overruns), "the ftrace buffer overran: the capture lost events"
    d = np.array(stat(tmp_path / "stat1")) - np.array(stat(tmp_path / "stat0"))
    out = tmp_path / "cap.iowt"
    assert main(["import", "ftrace", str(tmp_path / "trace.txt"), "-o", str(out),
                 "--comm", "dd"]) == 0
    tr = read_trace(str(out))
    assert tr.meta["import"]["unmatched"] == {}
    rq = tr.records("request")
    mine = (rq["dev_major"] == lp.major) & (rq["dev_minor"] == lp.minor) & (rq["done_ns"] > 0)
    assert mine.sum() == len(rq)

    def of(op):
        sel = mine & (rq["op"] == op)
        return int(sel.sum()), int(rq["len_bytes"][sel].sum()) // 512
    # /sys/block/NAME/stat: 0 reads, 2 sectors read, 4 writes, 6 sectors written,
    # 15 flushes (Documentation/block/stat.rst).
    assert of(abi.OP_READ) == (d[0], d[2]) == (16, 16 * 128)
    assert of(abi.OP_WRITE) == (d[4], d[6])
    assert d[6] == 48 * 128 + 64 * 8
    assert of(abi.OP_FLUSH)[0] == d[15] >= 2
    # Each dd's fsync is a call; dd's off-CPU time was seen, so the trace attributes.
    assert tr.count("fsync") == 2
    assert tr.count("offcpu") > 0 and tr.meta["import"]["attribution"] is True
    calls = tr.records("fsync")
    assert all(calls["exit_ns"] > calls["enter_ns"])
    assert tr.problems()[0].startswith("imported from ftrace: ")


PERF_SCRIPT = r"""
set -e
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
cat /sys/block/$NAME/stat > $OUT/stat0
perf record -q -a -k mono -o $OUT/perf.data -e 'block:block_bio_queue' -e 'block:block_getrq' \
    -e 'block:block_bio_backmerge' -e 'block:block_rq_insert' -e 'block:block_rq_issue' \
    -e 'block:block_rq_complete' -e 'sched:sched_switch' -e 'sched:sched_wakeup' -- \
    sh -c "dd if=/dev/zero of=$DEV bs=64k count=32 oflag=direct conv=fsync status=none;
           dd if=/dev/zero of=$DEV bs=4k count=32 seek=6000 conv=fsync status=none;
           dd if=$DEV of=/dev/null bs=64k count=8 iflag=direct status=none; sleep 0.3"
cat /sys/block/$NAME/stat > $OUT/stat1
perf script -i $OUT/perf.data > $OUT/perf.txt
"""


def test_perf_script_capture_matches_block_stat(make_loop, tmp_path):
    need(shutil.which("unshare") is not None, "needs unshare(1)")
    need(shutil.which("perf") is not None, "needs perf(1)")
    lp = make_loop(64)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEV": lp.dev, "NAME": lp.name,
           "OUT": str(tmp_path)}
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", PERF_SCRIPT],
                       env=env, capture_output=True, text=True, timeout=180)
    need(p.returncode == 0, f"perf record failed here: {p.stderr.strip()[-200:]}")
    d = np.array(stat(tmp_path / "stat1")) - np.array(stat(tmp_path / "stat0"))
    out = tmp_path / "perf.iowt"
    assert main(["import", "ftrace", str(tmp_path / "perf.txt"), "-o", str(out),
                 "--comm", "dd"]) == 0
    tr = read_trace(str(out))
    rq = tr.records("request")
    # perf records every device: only this loop device is compared; its requests all
    # match (other devices may have had requests in flight at the start or end).
    mine = (rq["dev_major"] == lp.major) & (rq["dev_minor"] == lp.minor)
    assert not (rq["flags_u16"][mine] & (abi.RQ_UNMATCHED | abi.RQ_INCOMPLETE)).any()

    def of(op):
        sel = mine & (rq["op"] == op) & (rq["done_ns"] > 0)
        return int(sel.sum()), int(rq["len_bytes"][sel].sum()) // 512
    assert of(abi.OP_READ) == (d[0], d[2]) == (8, 8 * 128)
    assert of(abi.OP_WRITE) == (d[4], d[6])
    assert d[6] == 32 * 128 + 32 * 8
    assert of(abi.OP_FLUSH)[0] == d[15] >= 2
    assert tr.count("offcpu") > 0
