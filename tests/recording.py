"""Recording helpers shared by the system and lab tiers: `iowhy record` as the user runs
it, and the check that nothing was dropped."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from conftest import MKFS, need, run
from iowhy import abi
from iowhy.traceformat import read_trace


def record(iowhy_bin, out, cmd, *extra, check=True, **kw):
    p = run([*iowhy_bin, "record", "-q", "-o", str(out), *extra, "--", *cmd], check=False, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"iowhy record exited {p.returncode}: {p.stderr}")
    return p


# Appends 4 KiB and fsyncs, SLEEP s apart (argument 4, default 0: none), until the file
# STOP exists; then writes the CLOCK_MONOTONIC ns before and after every fsync, one
# "t0 t1" line each, to LOG (whole: written aside, then renamed). Arguments: PATH STOP
# LOG [SLEEP]; fsync_calls(LOG) reads them.
FSYNC_LOOP = r"""
import os, sys, time
path, stop, log = sys.argv[1:4]
sleep = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
calls = []
while not os.path.exists(stop):
    os.write(fd, b"x" * 4096)
    t0 = time.monotonic_ns()
    os.fsync(fd)
    calls.append((t0, time.monotonic_ns()))
    if sleep:
        time.sleep(sleep)
with open(log + ".tmp", "w") as f:
    f.write("".join(f"{a} {b}\n" for a, b in calls))
os.rename(log + ".tmp", log)
"""


def fsync_calls(log: Path) -> np.ndarray:
    """FSYNC_LOOP's LOG: one row (t0, t1) per fsync, ns."""
    return np.array([[int(x) for x in line.split()] for line in log.read_text().splitlines()],
                    dtype=np.int64).reshape(-1, 2)


def wait_attached(rec, out, timeout: float = 60) -> None:
    """Until the recorder `rec` (a Popen of `iowhy record` or `attach`, output `out`) has
    every probe attached: it writes its RECORDER chunk then, to the partial file that is
    renamed to `out` when recording stops."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        partial = next(out.parent.glob(out.name + ".partial-*"), None)
        if partial and partial.stat().st_size > 64:
            try:
                if read_trace(str(partial)).recorder:
                    return
            except Exception:
                pass
        assert rec.poll() is None, rec.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{out}: the recorder did not attach in {timeout} s")


def cgroup_mount(fstype: str = "cgroup2") -> Path | None:
    """The first mount point of `fstype` (cgroup2, or cgroup: a v1 hierarchy) in
    /proc/self/mountinfo, or None."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        if tail.split()[:1] == [fstype]:
            return Path(head.split()[4])
    return None


def _recorder(request, argv, env=None):
    """`argv` (an `iowhy attach` command line, or one that execs it) started, stopped by
    SIGINT in a finalizer if still running."""
    rec = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    request.addfinalizer(lambda: (rec.poll() is None and rec.send_signal(signal.SIGINT),
                                  rec.wait(timeout=60)))
    return rec


def attach_running(request, argv, out):
    """Start `argv` (an `iowhy attach ... -o OUT` command line, or one that execs it),
    stopped by SIGINT in a finalizer; returned once every probe is attached."""
    rec = _recorder(request, argv)
    wait_attached(rec, out)
    return rec


def release_until_exit(rec, target, go: Path, out: Path):
    """Let the attached `target` run (it waits for file `go`), wait for it to exit and
    for the recorder `rec` to stop there by itself; the trace it wrote to `out`."""
    go.write_text("go")
    assert target.wait(timeout=60) == 0
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err
    tr = read_trace(str(out))
    assert tr.trailer["stop_reason"] == "target-exit"
    return tr


def attach_flight(iowhy_bin, request, target, out, *extra, env=None, timeout: float = 60):
    """`iowhy attach TARGET -o OUT EXTRA` (target: its -p PID or --cgroup DIR arguments;
    extra: --flight SECONDS and the rest), stopped by SIGINT in a finalizer, returned
    once it says it is recording (a flight recorder writes no file until a dump: its
    line on stderr, once every probe is attached)."""
    rec = _recorder(request, [*iowhy_bin, "attach", *target, "-o", str(out), *extra], env)
    deadline = time.monotonic() + timeout
    for line in rec.stderr:
        if "flight: recording" in line:
            return rec
        assert time.monotonic() < deadline, line
    raise AssertionError(f"the recorder ended: {rec.wait()}")


def interrupt(rec) -> str:
    """Ctrl-C to the recorder `rec` (a Popen of `iowhy record` or `attach`): it must stop
    as a user's Ctrl-C stops it (exit 128 + SIGINT); its stderr."""
    rec.send_signal(signal.SIGINT)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 128 + signal.SIGINT, err
    return err


def wait_for_file(path: Path, timeout: float = 60) -> None:
    """Until `path` exists (a flight recorder's dump, a workload's report)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not written"
        time.sleep(0.05)


def emulated_disk(tmp_path, request, size_bytes: int, *, detach_wait_s: float = 5, **kw):
    """The lab's emulated disk (lab/emudisk.py; `kw`: its options), started, stopped in a
    finalizer; skipped without its binary or /dev/fuse. A disk slow to flush may still be
    flushing what the loop device flushes as it is detached when its stop gives up:
    the stop is tried again after `detach_wait_s`."""
    from iowhy.lab import emudisk  # the installed lab, as conftest's lab_runs takes it
    try:
        emudisk.find_binary()
    except emudisk.EmulatedDiskError as e:
        need(False, f"{e} (or `make`)")
    need(Path("/dev/fuse").exists(), "needs /dev/fuse")
    d = emudisk.EmulatedDisk(tmp_path, size_bytes, **kw)

    def stop() -> None:
        try:
            d.stop()
        except emudisk.EmulatedDiskError as e:
            if "still attached" not in str(e):
                raise
            time.sleep(detach_wait_s)
            d.stop()
    request.addfinalizer(stop)
    d.start()
    return d


def slow_flush_fs(tmp_path, request, flush_ns: int, fstype: str = "ext4",
                  size_bytes: int = 128 << 20):
    """A filesystem (the lab's mkfs: for ext4 no lazy init, so no background writes and
    flushes of its own) on an emulated RAM disk with a write cache whose every flush
    takes flush_ns, mounted at tmp_path/mnt (unmounted, and its cache flushed, in a
    finalizer). Returns (disk, mount point)."""
    d = emulated_disk(tmp_path, request, size_bytes, preset="ram", cache=True,
                      extra_args=["--flush-ns", str(flush_ns)],
                      detach_wait_s=max(5, 2 * flush_ns / 1e9))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    run([*MKFS[fstype], d.dev])
    run(["mount", d.dev, str(mnt)])

    def umount() -> None:
        run(["umount", str(mnt)], check=False)
        # what the device still caches is written and flushed now, at flush_ns a flush,
        # not while the disk is detached (which waits 5 s at most)
        run(["blockdev", "--flushbufs", d.dev], check=False)
    request.addfinalizer(umount)
    return d, mnt


# Events the kernel did not deliver to the probes (docs/trace-format.md, "Events the
# kernel does not deliver"): not drops, each is still a record flagged as such.
UNSEEN = {"lost_completion": ("request", abi.RQ_LOST_DONE),
          "lost_issue": ("request", abi.RQ_LOST_ISSUE),
          "lost_switch_in": ("offcpu", abi.OFF_LATE_END),
          "lost_syscall_exit": ("fsync", abi.FS_F_EXIT_UNSEEN)}


def assert_nothing_dropped(tr) -> None:
    """No record dropped by the probes or the recorder (ring buffer, maps, recursion),
    and every event the kernel did not deliver is a flagged record, counted."""
    c = tr.counters
    drops = {k: v for k, v in c.items() if k.startswith("lost_") and k not in UNSEEN and v}
    assert not drops, drops
    for name, (rec, flag) in UNSEEN.items():
        flagged = int(((tr.records(rec)["flags_u16"] & flag) != 0).sum())
        assert flagged == c.get(name, 0), (name, flagged, c)
