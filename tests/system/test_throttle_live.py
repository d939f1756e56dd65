"""Throttling, recorded live on ext4 over a loop device and checked against what the
kernel itself reports in the same run (bpftrace, attached before the workload starts):

* dirty-page throttling: `dd` (buffered) to a loop device whose bdi is limited
  (strict_limit, max_bytes 32 MiB). iowhy's level-one `throttle` (its detail
  `dirty-pages`) is within 0.5-1.5x of the pauses the `writeback:balance_dirty_pages`
  tracepoint reports, and within 10% of the sleeps that followed them (the thread's
  uninterruptible switch-out after a pause to its waking), which bpftrace's kernel stacks
  place in balance_dirty_pages; wait-other stays under 5% of elapsed.
  A pause of `pause` jiffies sleeps until the timer wheel's next tick after it: up to a
  jiffy more (4 ms at HZ=250), plus the timer's latency. At the 2-jiffy pauses the kernel
  picks for a fast device that alone is +25-50%, so the device is slowed to 10 MB/s
  (blkio throttle on the cgroup-v1 root), which makes the kernel pick pauses of tens of
  milliseconds, where the rounding is a few percent.
* the block layer's throttles inside fsync's writeback (`dd ... conv=fsync`), with
  writeback throttling on (wbt_lat_usec 2000: wbt_wait) or with no wbt and 4 requests
  per queue (blk_mq_get_tag): iowhy's `throttle` (detail `block-throttle`) is within 20% of
  the thread's uninterruptible sleeps between its bio's block_bio_queue (or block_split)
  and its block_getrq (or merge), summed by bpftrace, and within 20% of its sleeps whose
  kernel stack holds the mechanism (rq_qos_wait/wbt_wait, or blk_mq_get_tag); bpftrace's
  wbt_step events on the device show that wbt acted.

Every tunable touched (bdi limits, the blkio throttle, wbt_lat_usec, nr_requests) is put
back in a finalizer; bpftrace is ended by its PID.
"""

from __future__ import annotations

import gzip
import json
import platform
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import need, recorder_path, run
from iowhy.analysis import analyze
from iowhy.traceformat import read_trace

pytestmark = pytest.mark.bpf

COMM = "iowhy-thr-dd"  # the workload: a copy of dd under a name no other process has
TRACEFS = "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; "
BLKIO_WBPS = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device")

# A sleep lasts from the switch-out to the waking, or to the switch-in when no waking was
# seen: the kernel now and then runs no BPF program for an event (docs/design.md, "Events
# the kernel does not deliver"), bpftrace's no more than iowhy's.
BT_SLEEP_END = """
tracepoint:sched:sched_waking /@t0[args->pid] && @w[args->pid] == 0/ { @w[args->pid] = nsecs; }
tracepoint:sched:sched_switch /@t0[args->next_pid]/ {
  $p = args->next_pid;
  $d = (@w[$p] > 0 ? @w[$p] : nsecs) - @t0[$p];
  %(account)s
  delete(@t0[$p]); delete(@w[$p]); delete(@k[$p]);
}
"""

# balance_dirty_pages' `pause` field is in ms (the kernel records pause * 1000 / HZ);
# a pause is followed by the thread's uninterruptible switch-out (TASK_KILLABLE reports
# as D, prev_state 2) until its timer wakes it.
BT_DIRTY = """
tracepoint:writeback:balance_dirty_pages /comm == "%(comm)s" && args->pause > 0/ {
  @pause_ms = sum(args->pause); @pauses = count(); @armed[tid] = 1;
}
tracepoint:sched:sched_switch /@armed[args->prev_pid] && args->prev_state == 2/ {
  @t0[args->prev_pid] = nsecs; @k[args->prev_pid] = kstack(10);
  delete(@armed[args->prev_pid]);
}
""" + BT_SLEEP_END % {"account": "@slept_ns = sum($d); @by_stack[@k[$p]] = sum($d);"}

# The bios the thread queued (or split off) and has not placed yet, as the probes count
# them; every uninterruptible sleep of the thread, its kernel stack, and whether one of
# its bios was unplaced then.
BT_BLOCK = """
tracepoint:block:block_bio_queue /comm == "%(comm)s"/ { @pend[tid] = @pend[tid] + 1; }
tracepoint:block:block_split /comm == "%(comm)s" && @pend[tid] > 0/ {
  @pend[tid] = @pend[tid] + 1;
}
tracepoint:block:block_getrq, tracepoint:block:block_bio_backmerge,
tracepoint:block:block_bio_frontmerge /comm == "%(comm)s" && @pend[tid] > 0/ {
  @pend[tid] = @pend[tid] - 1;
}
tracepoint:syscalls:sys_exit_fsync /comm == "%(comm)s"/ { delete(@pend[tid]); }
tracepoint:sched:sched_switch /args->prev_state == 2 && args->prev_comm == "%(comm)s"/ {
  @t0[args->prev_pid] = nsecs; @p[args->prev_pid] = @pend[args->prev_pid];
  @k[args->prev_pid] = kstack(10);
}
tracepoint:wbt:wbt_step { @wbt_step[args->name] = count(); }
""" + BT_SLEEP_END % {"account": "if (@p[$p] > 0) { @pending_ns = sum($d); @pending_n = count(); }"
                                 " @by_stack[@k[$p]] = sum($d); delete(@p[$p]);"}


class BpfTrace:
    """bpftrace running `script`, attached before the workload starts; stop() gives
    its maps."""

    def __init__(self, script: str, request):
        need(shutil.which("bpftrace") is not None, "bpftrace not installed")
        self.p = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c",
             TRACEFS + "exec bpftrace -f json -e " + shlex.quote(script)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        request.addfinalizer(self.kill)
        line = self.p.stdout.readline()  # {"type": "attached_probes", ...}
        assert "attached_probes" in line, (line, self.p.stderr.read() if self.p.poll() else "")

    def stop(self) -> dict:
        self.p.send_signal(2)
        out, _ = self.p.communicate(timeout=60)
        maps: dict = {}
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                if d.get("type") == "map":
                    maps.update(d["data"])
        return maps

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def _set(request, path: Path, value: str) -> None:
    """Write a sysfs tunable, and its old value back at teardown."""
    old = path.read_text().strip()
    path.write_text(value + "\n")
    request.addfinalizer(lambda: path.write_text(old + "\n"))


def _kernel_hz() -> int | None:
    for cfg in (Path("/proc/config.gz"), Path(f"/boot/config-{platform.release()}")):
        try:
            text = (gzip.decompress(cfg.read_bytes()).decode() if cfg.suffix == ".gz"
                    else cfg.read_text())
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("CONFIG_HZ="):
                return int(line.split("=")[1])
    return None


def _stack_ns(by_stack: dict, *funcs: str) -> int:
    """Time in the sleeps whose kernel stack holds one of `funcs`."""
    return sum(ns for st, ns in by_stack.items()
               if any(f"{f}+" in st for f in funcs))


def _flavour(flavour: str, tmp_path: Path, monkeypatch) -> None:
    """Record with the raw_tp programs (every kernel field read through probe reads, the
    pause by its position) instead of the tp_btf ones the recorder prefers."""
    if flavour == "raw_tp":
        wrapper = tmp_path / "rec-raw-tp"
        wrapper.write_text(f'#!/bin/sh\nexec {recorder_path()} --raw-tp "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("IOWHY_RECORDER", str(wrapper))


def _record(iowhy_bin, tmp_path: Path, bt: BpfTrace, dd_args: list[str], cwd: Path,
            flavour: str = "tp_btf"):
    dd = tmp_path / COMM
    shutil.copy("/usr/bin/dd", dd)
    out = tmp_path / "dd.iowt"
    argv = [*iowhy_bin, "record", "-q", "-o", str(out), "--", str(dd), *dd_args]
    t0 = time.monotonic()
    run(["unshare", "-m", "--propagation", "private", "sh", "-c",
         TRACEFS + "exec " + " ".join(shlex.quote(a) for a in argv)], cwd=cwd)
    wall = time.monotonic() - t0
    time.sleep(0.3)  # the last events reach bpftrace's maps
    maps = bt.stop()
    tr = read_trace(str(out))
    assert tr.recorder["attach_mode"] == flavour
    return analyze(tr), maps, wall


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


@pytest.mark.parametrize("flavour", ["tp_btf", "raw_tp"])
def test_dirty_throttling_under_a_bdi_limit(bpf, make_fs, tmp_path, iowhy_bin, request,
                                            monkeypatch, flavour):
    _flavour(flavour, tmp_path, monkeypatch)
    need(BLKIO_WBPS.exists(), f"no {BLKIO_WBPS} (cgroup-v1 blkio) to slow the device with")
    lp, mnt = make_fs("ext4", 512)
    bdi = Path(f"/sys/class/bdi/{lp.major}:{lp.minor}")
    _set(request, bdi / "strict_limit", "1")
    # max_bytes is kept as a ratio of the global limit: the ratio is what goes back
    ratio = bdi / "max_ratio_fine" if (bdi / "max_ratio_fine").exists() else bdi / "max_ratio"
    _set(request, ratio, ratio.read_text().strip())
    (bdi / "max_bytes").write_text(f"{32 << 20}\n")
    devt = f"{lp.major}:{lp.minor}"
    BLKIO_WBPS.write_text(f"{devt} {10 << 20}\n")
    request.addfinalizer(lambda: BLKIO_WBPS.write_text(f"{devt} 0\n"))

    bt = BpfTrace(BT_DIRTY % {"comm": COMM}, request)
    r, maps, wall = _record(iowhy_bin, tmp_path, bt,
                            ["if=/dev/zero", f"of={mnt}/f", "bs=1M", "count=64"], tmp_path,
                            flavour)
    hz = _kernel_hz()
    pauses = int(maps.get("@pauses", 0))
    pause_ns = int(maps.get("@pause_ms", 0)) * 1_000_000
    slept = int(maps.get("@slept_ns", 0))
    in_bdp = _stack_ns(maps.get("@by_stack", {}), "balance_dirty_pages")
    el = r["elapsed_ns"]
    thr = r["attribution_ns"]["throttle"]
    other = r["attribution_ns"]["wait-other"]
    print(f"\ndirty ({flavour}): load {_load()}, HZ {hz}, elapsed {el / 1e6:.0f} ms "
          f"(wall {wall:.2f} s); "
          f"{pauses} pauses {pause_ns / 1e6:.0f} ms, slept {slept / 1e6:.0f} ms "
          f"(in balance_dirty_pages {in_bdp / 1e6:.0f} ms); iowhy throttle {thr / 1e6:.0f} ms"
          f" = {thr / max(pause_ns, 1):.3f}x the pauses, {thr / max(slept, 1):.3f}x the sleeps;"
          f" wait-other {100 * other / el:.2f}%")
    # the premise: the kernel throttled this dd, and bpftrace saw its sleeps
    assert pauses >= 5 and pause_ns > 0.2 * el, maps
    assert in_bdp >= 0.9 * slept > 0, maps
    if hz and 1000 % hz == 0:  # the field is ms of whole jiffies
        assert (pause_ns // 1_000_000) % (1000 // hz) == 0, (pause_ns, hz)
    assert 0.5 * pause_ns <= thr <= 1.5 * pause_ns, (thr, pause_ns)
    assert 0.9 * slept <= thr <= 1.1 * slept, (thr, slept)
    assert r["attribution_detail_ns"]["throttle"] == {"dirty-pages": thr}
    assert other < 0.05 * el, r["attribution_ns"]


@pytest.mark.parametrize("mechanism,flavour",
                         [("wbt", "tp_btf"), ("tags", "tp_btf"), ("wbt", "raw_tp")])
def test_block_throttling_in_fsync_writeback(bpf, make_fs, tmp_path, iowhy_bin, request,
                                             monkeypatch, mechanism, flavour):
    _flavour(flavour, tmp_path, monkeypatch)
    lp, mnt = make_fs("ext4", 1024)
    q = Path(f"/sys/block/{lp.name}/queue")
    need((q / "wbt_lat_usec").exists(), "this kernel has no writeback throttling (wbt)")
    if mechanism == "wbt":
        _set(request, q / "wbt_lat_usec", "2000")
    else:
        _set(request, q / "wbt_lat_usec", "0")
        _set(request, q / "nr_requests", "4")

    bt = BpfTrace(BT_BLOCK % {"comm": COMM}, request)
    r, maps, wall = _record(iowhy_bin, tmp_path, bt,
                            ["if=/dev/zero", f"of={mnt}/f", "bs=1M", "count=400",
                             "conv=fsync"], tmp_path, flavour)
    pending = int(maps.get("@pending_ns", 0))
    stacks = maps.get("@by_stack", {})
    funcs = ("wbt_wait", "rq_qos_wait") if mechanism == "wbt" else ("blk_mq_get_tag",)
    by_mech = _stack_ns(stacks, *funcs)
    any_mech = _stack_ns(stacks, "rq_qos_wait", "wbt_wait", "blk_mq_get_tag")
    steps = sum(int(n) for name, n in maps.get("@wbt_step", {}).items()
                if name.split("\0")[0] == f"{lp.major}:{lp.minor}")
    el = r["elapsed_ns"]
    thr = r["attribution_ns"]["throttle"]
    other = r["attribution_ns"]["wait-other"]
    print(f"\n{mechanism} ({flavour}): load {_load()}, elapsed {el / 1e6:.0f} ms "
          f"(wall {wall:.2f} s); "
          f"bpftrace: D sleeps with a bio unplaced {pending / 1e6:.0f} ms, by stack "
          f"{'/'.join(funcs)} {by_mech / 1e6:.0f} ms, wbt_step on {lp.name} {steps}; iowhy "
          f"throttle {thr / 1e6:.0f} ms = {thr / max(pending, 1):.3f}x, "
          f"{thr / max(any_mech, 1):.3f}x the stacks; wait-other {100 * other / el:.2f}%")
    # the premise: the mechanism held the thread, by its own kernel stacks
    assert by_mech > 0.05 * el and by_mech >= 0.8 * any_mech, stacks
    if mechanism == "wbt":
        assert steps > 0, maps.get("@wbt_step")
    assert 0.8 * pending <= thr <= 1.2 * pending, (thr, pending)
    assert 0.8 * any_mech <= thr <= 1.2 * any_mech, (thr, any_mech)
    assert r["attribution_detail_ns"]["throttle"] == {"block-throttle": thr}
    assert other < 0.05 * el, r["attribution_ns"]


def test_no_throttle_without_one(bpf, make_fs, tmp_path, iowhy_bin, request):
    """The same fsync with no wbt and the default queue depth: the thread's sleeps are
    its writeback and commit waits, and nothing is called throttle."""
    lp, mnt = make_fs("ext4", 512)
    q = Path(f"/sys/block/{lp.name}/queue")
    if (q / "wbt_lat_usec").exists():
        _set(request, q / "wbt_lat_usec", "0")
    bt = BpfTrace(BT_BLOCK % {"comm": COMM}, request)
    r, maps, _ = _record(iowhy_bin, tmp_path, bt,
                         ["if=/dev/zero", f"of={mnt}/f", "bs=1M", "count=100",
                          "conv=fsync"], tmp_path)
    stacks = maps.get("@by_stack", {})
    held = _stack_ns(stacks, "rq_qos_wait", "wbt_wait", "blk_mq_get_tag")
    assert r["attribution_ns"]["throttle"] <= held + 0.01 * r["elapsed_ns"], (
        r["attribution_ns"], held)
    assert sum(stacks.values()) > 0  # it did sleep
