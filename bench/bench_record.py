#!/usr/bin/env python3
"""What recording costs: probe overhead, the highest lossless event rate, the size of a
request record and the time until the probes are attached.

    .venv/bin/python bench/bench_record.py            # the full protocol, as root
    .venv/bin/python bench/bench_record.py --quick    # a smoke run

Prints figures and their targets; asserts nothing about speed (it exits non-zero only
when a workload or the recorder fails).

Overhead protocol (sections `untar` and `fsync`): one untraced warm-up run, then pairs of
one untraced and one traced run (`iowhy record -q -o ... -- CMD`), in an order drawn per
pair (--seed). Every run waits until no iowhy-record is left detaching probes, gets a
fresh XFS on a loop device (direct I/O) over a sparse file in --workdir, runs `sync`, and
starts the workload exactly --start-delay (1 s) after that sync, traced or not: the
wrapper around the workload process sleeps until then, so the recorder's startup happens
inside that second and both runs meet the same memory state (bench/README, "Why this
protocol": on a VM that hands freed memory back to the hypervisor, how much fresh memory
a run meets decides its speed). The workload's own wall time is taken by the
wrapper (CLOCK_MONOTONIC right before it starts the workload and right after the workload
exits); that is the ratio that counts. For the traced runs the trace's own elapsed time
(trailer end_ns - recorder start_ns, which includes the recorder's poll interval at
exit) and the outer wall time of the whole `iowhy record` command are
printed too. `--aa` runs the same protocol with both halves untraced (the noise floor).

    untar: sh -c 'tar -xf linux-6.1-N.tar -C MNT && sync -f MNT'  (GNU tar; the cached
           tar of lab/workloads.py; `sync -f` = syncfs(2) of the test filesystem only, so
           the deferred writeback of the extracted files is inside the measured time and
           unrelated dirty data on other filesystems is not)
    fsync: python3 lab/workloads.py fsync-tasks MNT TASKS K

Max lossless rate (section `rate`): fio 4 KiB O_DIRECT random writes on a block device,
recorded with `iowhy record --dev DEV` and the default ring buffer, at increasing rates
until iowhy drops an event (ring buffer or map full). Events the kernel ran no probe for
(flagged records, docs/design.md "Events the kernel does not deliver") are printed per step but
do not end the sweep: no recorder setting changes them. A zram device is tried first
(`modprobe zram`); zram is bio-based (no blk-mq queue, so no block_rq_* events and no
request records), in which case it falls back to a loop device over a file in /dev/shm.

Record size and startup (sections `size`, `startup`): abi.REQUEST_DTYPE.itemsize, file
bytes per request record of real traces, the recorder's startup_ns (its main() to every
probe attached), the time from launching `iowhy record` to the recorder's start_ns (both
CLOCK_MONOTONIC), and the wall time of `iowhy record --dry-run`.

Dispatch floor (section `floor`, run only with `--only floor`): the fsync workload in
--pairs rounds of three runs (untraced; recorded by the probes built with
IOWHY_EMPTY_PROBES, every tracepoint attached and every program returning at once,
`make probes-empty`; recorded as shipped), in an order drawn per round. empty/untraced
is what the kernel's dispatch to the attached programs costs, shipped/empty what the
programs' own work adds.

Needs root, BPF, xfsprogs and fio. Every loop device, zram device and mount it makes is
removed in `finally` blocks; it only ever signals processes it started, by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from iowhy import abi  # the installed package: run with .venv/bin/python
from iowhy.traceformat import read_trace

REPO = Path(__file__).resolve().parents[1]
IOWHY = REPO / ".venv" / "bin" / "iowhy"
WORKLOADS = REPO / "lab" / "workloads.py"
PY = "/usr/bin/python3"
CACHE = Path(os.environ.get("IOWHY_CACHE", "/var/cache/iowhy"))

# `python3 -c WRAP TIMEFILE AT_NS CMD...`: waits until CLOCK_MONOTONIC AT_NS (at once if it
# has passed), runs CMD and writes "start_ns end_ns at_ns" around it to TIMEFILE; exits with
# CMD's status. Interpreter startup and imports happen before the first timestamp.
WRAP = ("import subprocess, sys, time\n"
        "at = int(sys.argv[2])\n"
        "if at > time.monotonic_ns():\n"
        "    time.sleep((at - time.monotonic_ns()) / 1e9)\n"
        "t0 = time.monotonic_ns()\n"
        "rc = subprocess.call(sys.argv[3:])\n"
        "t1 = time.monotonic_ns()\n"
        "open(sys.argv[1], 'w').write(f'{t0} {t1} {at}\\n')\n"
        "sys.exit(rc)\n")

TRACE_DIR: Path | None = None  # --trace-dir
NOTES: set[str] = set()  # said once, with the results
TARGET_UNTAR = 1.02
TARGET_FSYNC = 1.05
TARGET_FLIGHT = 1.03  # fsync tasks beside the flight recorder (attach -a --flight)
TARGET_BYTES_PER_RQ = 48  # trace file bytes per request record (zstd-compressed chunks)
SECTIONS = ("untar", "fsync", "rate", "startup", "size")
# Run only when asked (--only floor): it needs the IOWHY_EMPTY_PROBES build.
EXTRA_SECTIONS = ("floor",)


def say(*a: Any) -> None:
    print(*a, flush=True)


def run(cmd: list[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    p = subprocess.run(cmd, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return p


def run_pid_safe(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    """Run CMD; on timeout or interruption stop it by its PID (SIGTERM: `iowhy record`
    forwards it to the recorder, which then writes its trailer), then SIGKILL."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.communicate()
        raise
    return p.returncode, out, err


def drop_caches() -> None:
    run(["sync"])
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def info(trace: Path) -> dict:
    return json.loads(run([str(IOWHY), "info", "--json", str(trace)]).stdout)


def median(xs: list[float]) -> float:
    return float(np.median(np.asarray(xs, dtype=float))) if xs else float("nan")


def bootstrap_median(xs: list[float], seed: int, n: int = 10000) -> tuple[float, float]:
    """The 5th and 95th percentiles of the median of xs resampled with replacement: how
    far the median of this many noisy pairs can be trusted."""
    x = np.asarray(xs, dtype=float)
    meds = np.median(np.random.default_rng(seed).choice(x, size=(n, len(x))), axis=1)
    return float(np.percentile(meds, 5)), float(np.percentile(meds, 95))


# -- devices and filesystems ----------------------------------------------------------

@contextlib.contextmanager
def loop_device(backing_dir: Path, size_mib: int,
                write_cache: str = "write back", direct_io: bool = False) -> Iterator[str]:
    """A loop device over a fresh sparse file; detached and the file removed on exit.
    With direct_io the loop writes its backing file with O_DIRECT (`losetup
    --direct-io=on`), so the data is not cached twice, in the filesystem on the loop
    device and again in the backing file's page cache.

    queue/write_cache of a loop device survives detach and re-attach, so a device left
    "write through" by someone else would silently drop every flush: set it explicitly
    (the kernel's default for a file-backed loop is "write back") and put back what was
    there before detaching."""
    fd, name = tempfile.mkstemp(prefix="iowhy-bench-", suffix=".img", dir=backing_dir)
    backing = Path(name)
    dev = None
    wc_file = None
    wc_before = None
    try:
        os.ftruncate(fd, size_mib << 20)
        os.close(fd)
        fd = -1
        dev = run(["losetup", "--find", "--show",
                   *(["--direct-io=on"] if direct_io else []), str(backing)]).stdout.strip()
        if direct_io and Path(f"/sys/block/{os.path.basename(dev)}/loop/dio").read_text(
                ).strip() != "1":
            raise RuntimeError(f"{dev}: losetup --direct-io=on did not take")
        wc_file = Path(f"/sys/block/{os.path.basename(dev)}/queue/write_cache")
        wc_before = wc_file.read_text().strip()
        if wc_before != write_cache:
            NOTES.add(f"loop devices were found with write_cache {wc_before!r}: set to"
                      f" {write_cache!r} while in use, {wc_before!r} put back after")
            wc_file.write_text(write_cache + "\n")
        if wc_file.read_text().strip() != write_cache:
            raise RuntimeError(f"{dev}: cannot set write_cache to {write_cache!r}")
        yield dev
    finally:
        if fd >= 0:
            os.close(fd)
        if wc_file and wc_before:
            with contextlib.suppress(OSError):
                if wc_file.read_text().strip() != wc_before:
                    wc_file.write_text(wc_before + "\n")
        if dev:
            for _ in range(50):
                if run(["losetup", "-d", dev], check=False).returncode == 0:
                    break
                time.sleep(0.1)
        backing.unlink(missing_ok=True)


@contextlib.contextmanager
def fresh_xfs(workdir: Path, size_mib: int,
              direct_io: bool = False) -> Iterator[tuple[str, Path]]:
    """mkfs.xfs on a new loop device, mounted on a new directory; unmounted on exit."""
    with loop_device(workdir, size_mib, direct_io=direct_io) as dev:
        run(["mkfs.xfs", "-q", "-f", dev])
        mnt = Path(tempfile.mkdtemp(prefix="mnt-", dir=workdir))
        mounted = False
        try:
            run(["mount", dev, str(mnt)])
            mounted = True
            yield dev, mnt
        finally:
            if mounted:
                for _ in range(100):
                    if run(["umount", str(mnt)], check=False).returncode == 0:
                        break
                    if not os.path.ismount(mnt):
                        break
                    time.sleep(0.1)
            if not os.path.ismount(mnt):
                mnt.rmdir()


@contextlib.contextmanager
def zram_device(size_mib: int) -> Iterator[str | None]:
    """A new zram device (hot_add), or None if zram is unavailable; hot_removed on exit."""
    try:
        mp = run(["modprobe", "zram"], check=False)
        why = mp.stderr.strip() or str(mp.returncode)
    except FileNotFoundError:  # no kmod installed
        mp, why = None, "modprobe not installed"
    ctl = Path("/sys/class/zram-control")
    if not ctl.exists():
        say(f"   zram: unavailable (modprobe zram: {why})")
        yield None
        return
    if mp is None or mp.returncode != 0:
        say("   zram: modprobe failed but zram is there (built into the kernel)")
    n = int((ctl / "hot_add").read_text().strip())
    try:
        Path(f"/sys/block/zram{n}/disksize").write_text(f"{size_mib << 20}\n")
        yield f"/dev/zram{n}"
    finally:
        Path(f"/sys/block/zram{n}/reset").write_text("1\n")
        (ctl / "hot_remove").write_text(f"{n}\n")


def blk_mq(dev: str) -> bool:
    return Path(f"/sys/block/{os.path.basename(dev)}/mq").is_dir()


def dev_numbers(dev: str) -> tuple[int, int]:
    st = os.stat(dev)
    return os.major(st.st_rdev), os.minor(st.st_rdev)


# -- one timed run --------------------------------------------------------------------

def timed_run(cmd: list[str], traced: bool, tmp: Path, tag: str, timeout: float,
              extra: tuple[str, ...] = (), start_at_ns: int = 0) -> dict:
    """Run CMD (wrapped), traced or not, starting it at CLOCK_MONOTONIC start_at_ns (at
    once if 0 or past). Returns its wall time, how late it started, and, when traced, the
    trace's elapsed time, the outer wall time of `iowhy record`, loss counters, records."""
    timefile = tmp / f"{tag}.time"
    wrapped = [PY, "-c", WRAP, str(timefile), str(start_at_ns), *cmd]
    trace = (TRACE_DIR or tmp) / f"{tag}.iowt"
    full = ([str(IOWHY), "record", "-q", "-o", str(trace), *extra, "--", *wrapped]
            if traced else wrapped)
    t0 = time.monotonic_ns()
    rc, out, err = run_pid_safe(full, timeout)
    t1 = time.monotonic_ns()
    if rc != 0:
        raise RuntimeError(f"{shlex.join(full)} exited {rc}: {err.strip()[-2000:]}")
    w0, w1, at = (int(x) for x in timefile.read_text().split())
    r: dict[str, Any] = {"wall_s": (w1 - w0) / 1e9, "outer_s": (t1 - t0) / 1e9,
                         "late_s": max(0, w0 - at) / 1e9 if at else 0.0}
    if traced:
        d = info(trace)
        tr = read_trace(str(trace))
        c = d["counters"]
        r.update(trace_s=(tr.end_ns - tr.start_ns) / 1e9, lost=int(d["lost_events"]),
                 dropped=sum(int(c.get(k, 0)) for k in abi.DROP_COUNTERS),
                 unseen=sum(int(c.get(k, 0)) for k in abi.UNSEEN_COUNTERS),
                 records=d["records"], counters=d["counters"], file_bytes=trace.stat().st_size,
                 startup_ns=int(tr.recorder["startup_ns"]), launch_to_attach_ns=tr.start_ns - t0,
                 path=trace, truncated=d["truncated"],
                 recorder_cpu_s=sum(int(v) for v in (d["recorder_cpu_ns"] or {}).values()) / 1e9,
                 zstd_cpu_s=int((tr.trailer or {}).get("chunk_zstd", {}).get("cpu_ns", 0)) / 1e9,
                 probe_stats=d["probe_stats"])
    return r


# -- overhead -------------------------------------------------------------------------

@contextlib.contextmanager
def recorder_env(path: str | None) -> Iterator[None]:
    """`iowhy record` runs the iowhy-record at PATH inside (IOWHY_RECORDER); None: the
    installed one."""
    before = os.environ.get("IOWHY_RECORDER")
    if path is not None:
        os.environ["IOWHY_RECORDER"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("IOWHY_RECORDER", None)
        else:
            os.environ["IOWHY_RECORDER"] = before


KEEP_RECORDERS: set[int] = set()  # the flight recorder a run is measured beside


def recorders_running() -> list[int]:
    """PIDs of live iowhy-record processes (read from /proc; never signalled). A zombie
    has closed its descriptors, so its probes are detached: not counted."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            comm, _, rest = stat.partition("(")[2].rpartition(")")
            if comm == "iowhy-record" and rest.split()[:1] != ["Z"] \
                    and int(d.name) not in KEEP_RECORDERS:
                pids.append(int(d.name))
    return pids


def wait_probes_detached(timeout_s: float = 20.0) -> None:
    """A finished `iowhy record` leaves a child detaching its probes (it waits for RCU
    grace periods): wait until no recorder is left, so that no probe is attached during an
    untraced run."""
    t0 = time.monotonic()
    while recorders_running():
        if time.monotonic() - t0 > timeout_s:
            say(f"   WARNING: iowhy-record still running after {timeout_s:.0f} s: "
                f"{recorders_running()}")
            return
        time.sleep(0.05)


def prepare_run(a: argparse.Namespace, fs_mib: int, stack: contextlib.ExitStack) -> tuple[
        Path, int]:
    """One run's setup (see the module docstring): no probe left attached, a fresh XFS,
    `sync` (and drop_caches with --drop-caches). Returns the mount point and the
    CLOCK_MONOTONIC time at which the workload is to start, --start-delay from now."""
    wait_probes_detached()
    _dev, mnt = stack.enter_context(fresh_xfs(a.workdir, fs_mib, direct_io=a.loop_dio))
    if a.drop_caches:
        drop_caches()
    else:
        run(["sync"])
    return mnt, time.monotonic_ns() + int(a.start_delay * 1e9)


# `python3 -c BALLAST MIB`: holds MIB MiB of anonymous memory, every page written, from
# "ready" on its stdout until its stdin closes.
BALLAST = ("import mmap, sys\n"
           "n = int(sys.argv[1]) << 20\n"
           "m = mmap.mmap(-1, n)\n"
           "for i in range(0, n, 4096):\n"
           "    m[i] = 1\n"
           "print('ready', flush=True)\n"
           "sys.stdin.read()\n")


@contextlib.contextmanager
def ballast(mib: int) -> Iterator[None]:
    """MIB MiB of freshly touched memory held by a child process (nothing if 0): the
    recorder's footprint (mostly its ring buffer) without any probe. Ends by closing its
    stdin, then waiting for it by PID."""
    if not mib:
        yield
        return
    p = subprocess.Popen([PY, "-c", BALLAST, str(mib)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        if p.stdout is None or p.stdout.readline().strip() != "ready":
            raise RuntimeError("ballast process failed to start")
        yield
    finally:
        if p.stdin:
            p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


@contextlib.contextmanager
def flight_recorder(seconds: float, tmp: Path, tag: str, timeout: float) -> Iterator[dict]:
    """`iowhy attach -a --flight SECONDS` running from its probes attached until the
    block ends (then SIGINT, by PID); yields a dict that gets its peak RSS (KiB, the
    recorder's /proc status VmHWM at the end) and exit status."""
    out: dict[str, Any] = {}
    p = subprocess.Popen([str(IOWHY), "attach", "-a", "--flight", f"{seconds:g}", "-o",
                          str(tmp / f"{tag}.iowt")], stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    try:
        t_end = time.monotonic() + timeout
        while True:
            line = p.stderr.readline()
            if not line:
                raise RuntimeError(f"iowhy attach --flight exited {p.wait()} before recording")
            if "flight: recording" in line:
                break
            if time.monotonic() > t_end:
                raise RuntimeError("iowhy attach --flight: not recording in time")
        rec = [int(x) for x in run(["pgrep", "-P", str(p.pid)], check=False).stdout.split()]
        KEEP_RECORDERS.update(rec)
        yield out
        KEEP_RECORDERS.difference_update(rec)
        for pid in rec:
            try:
                for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if ln.startswith("VmHWM:"):
                        out["peak_kib"] = int(ln.split()[1])
            except OSError:
                pass
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGINT)
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.communicate()
        out["rc"] = p.returncode


def overhead(name: str, make_cmd: Any, a: argparse.Namespace, tmp: Path, fs_mib: int) -> dict:
    say(f"\n== overhead: {name}: {shlex.join(make_cmd(Path('MNT')))}")
    extra = ("--syscalls", a.syscalls, *a.record_arg)
    if a.flight:
        say(f"   FLIGHT RECORDER (--flight {a.flight:g}): the workload runs untraced beside"
            f" `iowhy attach -a --flight {a.flight:g}` (every process of the machine, the"
            " window kept in memory, nothing written), started before the run's start"
            " time and stopped after it; 'traced' is that run")
    else:
        say(f"   traced with `iowhy record {shlex.join(extra)}`" if not a.aa else
            "   A/A CONTROL (--aa): both runs of every pair untraced; 'traced' is the"
            " second untraced run, so the ratios show the protocol's own noise and bias")
    if a.aa and a.aa_ballast_mib:
        say(f"   --aa-ballast-mib: the 'traced' run holds {a.aa_ballast_mib} MiB of written"
            " anonymous memory from its sync until the workload exits (the recorder's"
            " footprint, no probe)")
    say(f"   {a.pairs} pairs in random order (seed {a.seed}) after 1 warm-up run; each run on a"
        f" fresh XFS ({fs_mib} MiB sparse loop in {a.workdir}, write_cache \"write back\","
        f" direct-io {'on' if a.loop_dio else 'off'}),"
        f" {'sync + drop_caches' if a.drop_caches else 'sync'}, the workload started"
        f" {a.start_delay:g} s after it in both runs; times in s")
    say("   untraced, traced: the workload's own wall time (wrapper); trace_el: the trace's"
        " end_ns - start_ns; rec_wall: the whole `iowhy record` command")
    vs = [str(x) for x in a.vs_recorder] if not a.aa else []
    if vs:
        say("   --vs-recorder: every pair is a round that also runs the workload traced by"
            " each build below (IOWHY_RECORDER), all in an order drawn per round; first: that"
            " order, u the untraced run, t the installed build, 1.. the builds below")
        for j, b in enumerate(vs, 1):
            say(f"     build {j}: {b}")
    say(f"   {'pair':>4} {'first':>5} {'untraced':>9} {'traced':>9} {'ratio':>7} {'trace_el':>9}"
        f" {'rec_wall':>9} {'drop':>5} {'unseen':>6} {'requests':>9} {'records':>9}"
        + "".join(f" {f'ratio{j}':>7} {f'drop{j}':>5}" for j in range(1, len(vs) + 1)))
    rng = random.Random(a.seed)
    with contextlib.ExitStack() as stack:
        mnt, at = prepare_run(a, fs_mib, stack)
        timed_run(make_cmd(mnt), False, tmp, f"{name}-warmup", a.timeout, start_at_ns=at)
    pairs = []
    late: list[float] = []
    for i in range(a.pairs):
        res: dict[str, dict] = {}
        # "u": untraced; "t": the installed build; "1", "2", ...: the --vs-recorder builds.
        builds = [str(j) for j in range(1, len(vs) + 1)]
        order = ["u", "t", *builds]
        rng.shuffle(order)
        for arm in order:
            traced = arm != "u"
            with contextlib.ExitStack() as stack:
                fl = None
                if traced and a.flight:  # attached before the run is set up: always on
                    fl = stack.enter_context(flight_recorder(a.flight, tmp, f"{name}{i}fl",
                                                             a.timeout))
                mnt, at = prepare_run(a, fs_mib, stack)
                if traced and a.aa:
                    stack.enter_context(ballast(a.aa_ballast_mib))
                if arm in builds:
                    stack.enter_context(recorder_env(vs[int(arm) - 1]))
                res[arm] = timed_run(make_cmd(mnt), traced and not a.aa and not a.flight,
                                     tmp, f"{name}{i}{arm if arm in ('u', 't') else 'v' + arm}",
                                     a.timeout, extra=extra, start_at_ns=at)
            if fl is not None:
                res[arm]["flight"] = fl
            late.append(res[arm]["late_s"])
        u, t = res["u"], res["t"]
        ratio = t["wall_s"] / u["wall_s"]
        first = "".join(order) if vs else order[0]
        if a.aa or a.flight:
            fk = t.get("flight", {})
            say(f"   {i + 1:>4} {first:>5} {u['wall_s']:>9.3f}"
                f" {t['wall_s']:>9.3f} {ratio:>7.3f}"
                + (f"  recorder peak RSS {fk.get('peak_kib', 0) / 1024:.0f} MiB, attach exit"
                   f" {fk.get('rc')}" if a.flight else ""))
        else:
            nrec = sum(t["records"].values())
            say(f"   {i + 1:>4} {first:>5} {u['wall_s']:>9.3f}"
                f" {t['wall_s']:>9.3f} {ratio:>7.3f} {t['trace_s']:>9.3f} {t['outer_s']:>9.3f}"
                f" {t['dropped']:>5} {t['unseen']:>6} {t['records']['request']:>9} {nrec:>9}"
                + "".join(f" {res[b]['wall_s'] / u['wall_s']:>7.3f} {res[b]['dropped']:>5}"
                          for b in builds))
            for arm in ("t", *builds):
                if res[arm]["truncated"]:
                    say(f"        WARNING: trace truncated ({arm})")
                if i < a.pairs - 1 or arm != "t":
                    res[arm]["path"].unlink(missing_ok=True)
        pairs.append({"u": u, "t": t, "ratio": ratio, "vs": [res[b] for b in builds]})
    if max(late) > 0.02:
        say(f"   WARNING: {sum(x > 0.02 for x in late)} run(s) started more than 20 ms after"
            f" their start time (max {max(late):.3f} s late): raise --start-delay above the"
            " recorder's startup")
    ratios = [p["ratio"] for p in pairs]
    uw = [p["u"]["wall_s"] for p in pairs]
    tw = [p["t"]["wall_s"] for p in pairs]
    say(f"   median untraced {median(uw):.3f} s (min {min(uw):.3f}, max {max(uw):.3f}),"
        f" traced {median(tw):.3f} s (min {min(tw):.3f}, max {max(tw):.3f})")
    q1, q3 = (float(x) for x in np.percentile(ratios, [25, 75]))
    lo, hi = bootstrap_median(ratios, a.seed)
    say(f"   ratio per pair: {', '.join(f'{r:.3f}' for r in ratios)}")
    say(f"   ratio median {median(ratios):.3f} (p25 {q1:.3f}, p75 {q3:.3f}; 90% bootstrap"
        f" interval of the median {lo:.3f} - {hi:.3f}); ratio of medians"
        f" {median(tw) / median(uw):.3f}")
    summary = {"ratio": median(ratios), "ratios": ratios, "q1": q1, "q3": q3,
               "ci": (lo, hi), "untraced": median(uw), "traced": median(tw)}
    for j, b in enumerate(vs, 1):
        # Each build against the untraced run of its round, and the installed build
        # against it, paired by round: both met about the same load.
        vr = [p["vs"][j - 1]["wall_s"] / p["u"]["wall_s"] for p in pairs]
        tv = [p["t"]["wall_s"] / p["vs"][j - 1]["wall_s"] for p in pairs]
        vq1, vq3 = (float(x) for x in np.percentile(vr, [25, 75]))
        vlo, vhi = bootstrap_median(vr, a.seed)
        tlo, thi = bootstrap_median(tv, a.seed)
        say(f"   build {j}: ratio median {median(vr):.3f} (p25 {vq1:.3f}, p75 {vq3:.3f}; 90%"
            f" bootstrap interval of the median {vlo:.3f} - {vhi:.3f}); installed / build {j},"
            f" per round: median {median(tv):.3f} ({tlo:.3f} - {thi:.3f}); dropped per run:"
            f" {[p['vs'][j - 1]['dropped'] for p in pairs]}")
        summary.setdefault("vs", []).append(
            {"recorder": b, "ratio": median(vr), "ratios": vr, "q1": vq1, "q3": vq3,
             "ci": (vlo, vhi), "installed_over": median(tv), "installed_over_ci": (tlo, thi)})
    if a.aa or a.flight:
        return summary
    lost = [p["t"]["lost"] for p in pairs]
    dropped = [p["t"]["dropped"] for p in pairs]
    unseen = [p["t"]["unseen"] for p in pairs]
    say("   drop: events dropped by iowhy (ring buffer or map full); unseen: events the"
        " kernel ran no probe for (README, \"Events the kernel does not deliver\"), each a"
        " flagged record")
    say(f"   dropped per traced run: {dropped}; unseen per traced run: {unseen}")
    for i, p in enumerate(pairs, 1):
        if p["t"]["dropped"]:
            kinds = {k: v for k, v in p["t"]["counters"].items()
                     if k in abi.DROP_COUNTERS and v}
            say(f"   pair {i}: dropped {kinds}")
    rcpu = [p["t"]["recorder_cpu_s"] for p in pairs]
    zcpu = [p["t"]["zstd_cpu_s"] for p in pairs]
    say(f"   the recorder's own CPU while recording (trailer recorder_cpu_ns), median "
        f"{median(rcpu) * 1e3:.1f} ms (max {max(rcpu) * 1e3:.1f} ms); its chunk compression "
        f"over the whole run (trailer chunk_zstd.cpu_ns), median {median(zcpu) * 1e3:.1f} ms")
    # More traced runs, not in the ratios: what the probes themselves cost (kernel BPF
    # statistics, which add two clock reads to every program run of the machine).
    pc = probe_costs(name, make_cmd, a, tmp, fs_mib, extra)
    tot, share = pc["shipped"]["total_ns"], pc["shipped"]["share"]
    last = pairs[-1]["t"]
    return {**summary, "lost": lost, "last": last, "dropped": dropped, "unseen": unseen,
            "trace_s": median([p["t"]["trace_s"] for p in pairs]),
            "outer_s": median([p["t"]["outer_s"] for p in pairs]),
            "startup_ns": [p["t"]["startup_ns"] for p in pairs],
            "probe_ns": tot, "probe_share": share, "probe_costs": pc,
            "recorder_cpu_s": median(rcpu), "zstd_cpu_s": median(zcpu)}


def probe_costs(name: str, make_cmd: Any, a: argparse.Namespace, tmp: Path, fs_mib: int,
                extra: tuple[str, ...]) -> dict:
    """--stats-runs traced runs with --probe-stats (not in the ratios), each set up as in
    the overhead protocol; with --stats-recorder, as many with each of those recorder
    builds, in an order drawn per round. Prints, per build, the median over runs of each
    program's runs, ns per run and total, and of the total; returns them per build
    ("shipped", then each --stats-recorder path)."""
    builds = ["shipped"] + [str(x) for x in a.stats_recorder]
    runs: dict[str, list[dict]] = {b: [] for b in builds}
    ncpu = os.cpu_count() or 1
    rng = random.Random(a.seed + 1)
    for i in range(a.stats_runs):
        order = list(builds)
        rng.shuffle(order)
        for b in order:
            env_before = os.environ.get("IOWHY_RECORDER")
            try:
                if b != "shipped":
                    os.environ["IOWHY_RECORDER"] = b
                with contextlib.ExitStack() as stack:
                    mnt, at = prepare_run(a, fs_mib, stack)
                    st = timed_run(make_cmd(mnt), True, tmp, f"{name}-stats{i}-{builds.index(b)}",
                                   a.timeout, extra=(*extra, "--probe-stats"), start_at_ns=at)
            finally:
                if env_before is None:
                    os.environ.pop("IOWHY_RECORDER", None)
                else:
                    os.environ["IOWHY_RECORDER"] = env_before
            st["path"].unlink(missing_ok=True)
            ps = {r["program"]: r for r in st["probe_stats"] or []}
            tot = sum(r["run_ns"] for r in ps.values())
            runs[b].append({"wall_s": st["wall_s"], "total_ns": tot, "progs": ps,
                            "records": st["records"]})
            say(f"   probe cost, {b} build, run {i + 1}: wall {st['wall_s']:.3f} s, "
                f"{tot / 1e6:.1f} ms in {sum(r['runs'] for r in ps.values()):,} program runs"
                f" = {tot / 1e9 / (st['wall_s'] * ncpu) * 100:.1f}% of {ncpu} CPUs; records "
                + ", ".join(f"{k} {v:,}" for k, v in st["records"].items() if v))
    out: dict[str, Any] = {}
    for b in builds:
        rs = runs[b]
        names = sorted({n for r in rs for n in r["progs"]})
        per = {}
        for n in names:
            cnt = [r["progs"].get(n, {}).get("runs", 0) for r in rs]
            ns = [r["progs"].get(n, {}).get("run_ns", 0) for r in rs]
            per[n] = {"runs": median(cnt), "ns_per_run": median(
                [x / c for x, c in zip(ns, cnt) if c] or [0]), "total_ns": median(ns)}
        tot = median([r["total_ns"] for r in rs])
        share = median([r["total_ns"] / 1e9 / (r["wall_s"] * ncpu) for r in rs])
        label = "as installed" if b == "shipped" else f"IOWHY_RECORDER={b}"
        say(f"   probe cost, {b} build ({label}), medians of {len(rs)} --probe-stats run(s):"
            f" {tot / 1e6:.2f} ms per run ({share * 100:.2f}% of {ncpu} CPUs over the run)")
        say(f"     {'program':<28} {'runs':>9} {'ns/run':>7} {'total ms':>9}")
        for n, v in sorted(per.items(), key=lambda kv: -kv[1]["total_ns"]):
            say(f"     {n:<28} {v['runs']:>9,.0f} {v['ns_per_run']:>7.0f}"
                f" {v['total_ns'] / 1e6:>9.2f}")
        out[b] = {"total_ns": tot, "share": share, "programs": per,
                  "totals_ns": [r["total_ns"] for r in rs]}
    for b in builds[1:]:
        # Paired by round: both builds met about the same load.
        ratios = [x / y for x, y in zip(out[b]["totals_ns"], out["shipped"]["totals_ns"])]
        lo, hi = bootstrap_median(ratios, a.seed)
        say(f"   probe cost, {b} / installed build, all programs' time per round: median"
            f" {median(ratios):.3f} (90% bootstrap interval of the median {lo:.3f} - {hi:.3f});"
            f" per round {', '.join(f'{x:.3f}' for x in ratios)}")
        out[b]["ratio"] = {"median": median(ratios), "ci": (lo, hi), "ratios": ratios}
    return out


# -- floor: the kernel's dispatch to the attached probes -------------------------------

EMPTY_RECORDER = REPO / "probes" / ".output" / "iowhy-record-empty"


def floor(a: argparse.Namespace, tmp: Path) -> dict:
    """The fsync workload in rounds of three runs, in an order drawn per round: untraced,
    recorded by iowhy-record-empty (the probes built with IOWHY_EMPTY_PROBES: loaded and
    attached exactly as shipped, every program returning at once) and recorded as shipped.
    empty/untraced is what the kernel's dispatch to the attached tracepoints (and the
    recorder's presence) costs; shipped/empty is what the programs themselves add."""
    if not EMPTY_RECORDER.exists():
        run(["make", "-C", str(REPO), "-s", "probes-empty"])
    cmd = [PY, str(WORKLOADS), "fsync-tasks", "MNT", str(a.tasks), str(a.k)]
    say(f"\n== floor: {shlex.join(cmd)}")
    say(f"   {a.pairs} rounds in random order (seed {a.seed}) after 1 warm-up run, each run as"
        " in the overhead protocol; u: untraced; empty: `iowhy record` with IOWHY_RECORDER="
        f"{EMPTY_RECORDER.relative_to(REPO)}; full: `iowhy record` as installed; times in s")
    say(f"   {'round':>5} {'order':>5} {'u':>7} {'empty':>7} {'full':>7}")
    kinds = ("u", "empty", "full")
    rng = random.Random(a.seed)
    with contextlib.ExitStack() as stack:
        mnt, at = prepare_run(a, 512, stack)
        timed_run([*cmd[:3], str(mnt), *cmd[4:]], False, tmp, "floor-warmup", a.timeout,
                  start_at_ns=at)
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    dropped = 0
    for i in range(a.pairs):
        order = list(kinds)
        rng.shuffle(order)
        for k in order:
            env_before = os.environ.get("IOWHY_RECORDER")
            try:
                if k == "empty":
                    os.environ["IOWHY_RECORDER"] = str(EMPTY_RECORDER)
                with contextlib.ExitStack() as stack:
                    mnt, at = prepare_run(a, 512, stack)
                    r = timed_run([*cmd[:3], str(mnt), *cmd[4:]], k != "u", tmp,
                                  f"floor{i}{k}", a.timeout, start_at_ns=at)
            finally:
                if env_before is None:
                    os.environ.pop("IOWHY_RECORDER", None)
                else:
                    os.environ["IOWHY_RECORDER"] = env_before
            walls[k].append(r["wall_s"])
            # The recorder itself writes the root task record and the threads' states at
            # the start (`thread`); every other record comes from a probe.
            from_probes = 0 if k == "u" else sum(
                v for t, v in r["records"].items() if t not in ("task", "thread"))
            if k != "u" and (from_probes > 0) != (k == "full"):
                raise RuntimeError(f"floor: the {k} run recorded {r['records']}: the"
                                   " recorder used is not the one intended")
            if k != "u":
                dropped += r["dropped"]
                r["path"].unlink(missing_ok=True)
        say(f"   {i + 1:>5} {''.join(x[0] for x in order):>5} {walls['u'][-1]:>7.3f}"
            f" {walls['empty'][-1]:>7.3f} {walls['full'][-1]:>7.3f}")
    out: dict[str, Any] = {"dropped": dropped}
    for num, den in (("empty", "u"), ("full", "u"), ("full", "empty")):
        ratios = [x / y for x, y in zip(walls[num], walls[den])]
        q1, q3 = (float(x) for x in np.percentile(ratios, [25, 75]))
        lo, hi = bootstrap_median(ratios, a.seed)
        out[f"{num}/{den}"] = {"ratio": median(ratios), "q1": q1, "q3": q3, "ci": (lo, hi)}
        say(f"   {num}/{den}: ratio median {median(ratios):.3f} (p25 {q1:.3f}, p75 {q3:.3f};"
            f" 90% bootstrap interval of the median {lo:.3f} - {hi:.3f})")
    say(f"   median wall u {median(walls['u']):.3f} s, empty {median(walls['empty']):.3f} s,"
        f" full {median(walls['full']):.3f} s; events dropped by the full runs: {dropped}")
    return out


# -- max lossless rate ----------------------------------------------------------------

def fio_cmd(dev: str, out: Path, jobs: int, rate: int, depth: int, seconds: float,
            size_mib: int) -> list[str]:
    cmd = ["fio", "--name=randw", f"--filename={dev}", "--rw=randwrite", "--bs=4k",
           "--direct=1", "--ioengine=libaio", f"--iodepth={depth}", f"--numjobs={jobs}",
           "--group_reporting", "--time_based", f"--runtime={seconds}",
           f"--size={size_mib}M", "--randrepeat=0", "--norandommap",
           "--output-format=json", f"--output={out}"]
    if rate:
        cmd.append(f"--rate_iops={rate}")
    return cmd


def rate_step(dev: str, tmp: Path, tag: str, jobs: int, rate: int, depth: int,
              a: argparse.Namespace, size_mib: int) -> dict:
    fout = tmp / f"{tag}.fio.json"
    cmd = fio_cmd(dev, fout, jobs, rate, depth, a.rate_seconds, size_mib)
    r = timed_run(cmd, True, tmp, tag, a.rate_seconds + 120, extra=("--dev", dev))
    fio_iops = float(json.loads(fout.read_text())["jobs"][0]["write"]["iops"])
    tr = read_trace(str(r["path"]))
    maj, mn = dev_numbers(dev)
    rq = tr.records("request")
    rq = rq[(rq["dev_major"] == maj) & (rq["dev_minor"] == mn) & (rq["done_ns"] > 0)]
    n = len(rq)
    if n < 2:
        raise RuntimeError(f"{tag}: no request records for {dev} in the trace")
    span = (int(rq["done_ns"].max()) - int(rq["issue_ns"][rq["issue_ns"] > 0].min())) / 1e9
    # Every record emitted while requests were flowing (request, off-CPU, task, ...).
    lo, hi = int(rq["issue_ns"][rq["issue_ns"] > 0].min()), int(rq["done_ns"].max())
    nrec = 0
    for name in abi.RECORD_NAMES:
        ts = tr.column(name, "ts_ns")
        nrec += int(((ts >= lo) & (ts <= hi)).sum())
    r.update(jobs=jobs, rate=rate, depth=depth, fio_iops=fio_iops, requests=n,
             rq_per_s=n / span, rec_per_s=nrec / span, nrec=nrec,
             bytes_per_rq=r["file_bytes"] / max(1, r["records"]["request"]))
    return r


def max_rate(a: argparse.Namespace, tmp: Path) -> dict:
    size_mib = 512
    say("\n== max lossless event rate: fio 4 KiB O_DIRECT randwrite (libaio), "
        f"{a.rate_seconds:g} s per step, `iowhy record --dev DEV` with the default ring buffer")
    with contextlib.ExitStack() as stack:
        dev = stack.enter_context(zram_device(size_mib))
        kind = "zram"
        if dev and not blk_mq(dev):
            say(f"   {dev}: zram works but is bio-based (no /sys/block/*/mq): no block_rq_*"
                " events, no request records; falling back to loop")
            dev = None
        if dev is None:
            dev = stack.enter_context(loop_device(Path("/dev/shm"), size_mib))
            kind = "loop over /dev/shm file"
        say(f"   device {dev} ({kind}, {size_mib} MiB)")
        steps = [(1, r, 32) for r in a.rate_steps] + [(1, 0, 32), (2, 0, 32), (4, 0, 32)]
        say("   rq/s and records/s: over the span from the first issue to the last completion")
        say(f"   {'jobs':>4} {'iodepth':>7} {'rate_iops':>9} {'fio_iops':>9} {'requests':>9}"
            f" {'rq/s':>9} {'records/s':>9} {'drop':>5} {'unseen':>6} {'B/rq':>5}"
            f" {'rec_cpu':>7} {'zstd_cpu':>8}")
        say("   B/rq: trace file bytes per request record; rec_cpu: the recorder's CPU while"
            " recording (trailer recorder_cpu_ns), zstd_cpu: its chunk compression over the"
            " whole run (trailer chunk_zstd.cpu_ns), both in ms")
        best = None
        first_loss = None
        for i, (jobs, rate, depth) in enumerate(steps):
            r = rate_step(dev, tmp, f"rate{i}", jobs, rate, depth, a, size_mib)
            lim = f"{rate * jobs}" if rate else "max"
            say(f"   {jobs:>4} {depth:>7} {lim:>9} {r['fio_iops']:>9.0f} {r['requests']:>9}"
                f" {r['rq_per_s']:>9.0f} {r['rec_per_s']:>9.0f} {r['dropped']:>5}"
                f" {r['unseen']:>6} {r['bytes_per_rq']:>5.1f} {r['recorder_cpu_s'] * 1e3:>7.1f}"
                f" {r['zstd_cpu_s'] * 1e3:>8.1f}")
            if r["lost"]:
                nz = {k: v for k, v in r["counters"].items() if k.startswith("lost_") and v}
                say(f"        losses: {nz}")
            if r["dropped"]:
                first_loss = r
                break
            if best is None or r["rq_per_s"] > best["rq_per_s"]:
                if best is not None:
                    best["path"].unlink(missing_ok=True)
                best = r
            else:
                r["path"].unlink(missing_ok=True)
        return {"best": best, "first_loss": first_loss, "dev_kind": kind}


# -- startup --------------------------------------------------------------------------

def startup(a: argparse.Namespace, tmp: Path) -> dict:
    say(f"\n== startup: {a.startup_runs} x `iowhy record -q -o T -- true`"
        f" and {a.startup_runs} x `iowhy record --dry-run`")
    st, l2a, dry = [], [], []
    for i in range(a.startup_runs):
        r = timed_run(["true"], True, tmp, f"startup{i}", 120)
        st.append(r["startup_ns"] / 1e6)
        l2a.append(r["launch_to_attach_ns"] / 1e6)
        r["path"].unlink(missing_ok=True)
    for _ in range(a.startup_runs):
        t0 = time.monotonic_ns()
        rc, _out, err = run_pid_safe([str(IOWHY), "record", "--dry-run"], 120)
        if rc != 0:
            raise RuntimeError(f"iowhy record --dry-run exited {rc}: {err.strip()}")
        dry.append((time.monotonic_ns() - t0) / 1e6)
    say(f"   recorder startup_ns (main -> attached), ms: {', '.join(f'{x:.1f}' for x in st)}")
    say(f"   `iowhy record` launch -> start_ns, ms:      {', '.join(f'{x:.1f}' for x in l2a)}")
    say(f"   `iowhy record --dry-run` wall, ms:          {', '.join(f'{x:.1f}' for x in dry)}")
    return {"startup_ms": median(st), "launch_ms": median(l2a), "dry_ms": median(dry)}


# -- main -----------------------------------------------------------------------------

def wait_for_tar(nfiles: int, timeout: float = 1800) -> Path:
    """The cached tar (lab/workloads.py prepare), waiting for a concurrent preparation
    (its .tmp file) to finish rather than racing it."""
    out = CACHE / f"linux-6.1-{nfiles}.tar"
    tmpf = out.with_suffix(".tmp")
    deadline = time.monotonic() + timeout
    while not out.exists() and tmpf.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{tmpf} still being written after {timeout:.0f} s")
        say(f"   waiting for {out} (being prepared elsewhere)")
        time.sleep(10)
    p = run([PY, str(WORKLOADS), "prepare", "--files", str(nfiles)], timeout=timeout)
    return Path(p.stdout.strip().splitlines()[-1])


def row(rows: list, figure: str, value: str, unit: str, target: str, ok: bool | None) -> None:
    rows.append((figure, value, unit, target, "" if ok is None else ("OK" if ok else "MISS")))


def vs_rows(rows: list, label: str, res: dict) -> None:
    """The --vs-recorder builds' rows of the results table."""
    for j, v in enumerate(res.get("vs", []), 1):
        row(rows, f"{label}: build {j} traced/untraced (median; 90% interval); installed /"
            f" build {j} per round (90% interval)", f"{v['ratio']:.3f} ({v['ci'][0]:.3f} -"
            f" {v['ci'][1]:.3f}); {v['installed_over']:.3f} ({v['installed_over_ci'][0]:.3f}"
            f" - {v['installed_over_ci'][1]:.3f})", "x", "", None)


def parse_options(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with the sizes --quick shrinks filled in."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 2 pairs, 2000 files, 4 tasks x 50, short rate steps")
    p.add_argument("--pairs", type=int,
                   help="untraced/traced pairs per workload (default 11: the issue asks for at"
                   " least 5; pair-to-pair noise here is larger than the targets)")
    p.add_argument("--files", type=int, help="files tar extracts (default 20000)")
    p.add_argument("--tasks", type=int, help="fsync-tasks processes (default 8)")
    p.add_argument("--k", type=int, help="append+fsync per task (default 300)")
    p.add_argument("--rate-seconds", type=float, help="fio runtime per rate step (default 3)")
    p.add_argument("--startup-runs", type=int, help="runs for the startup medians (default 5)")
    p.add_argument("--only", action="append", choices=SECTIONS + EXTRA_SECTIONS,
                   help="run only this section (repeatable; default all but floor, the"
                   " dispatch floor of the fsync workload: --pairs rounds of three runs)")
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp"),
                   help="where loop backing files, mounts and traces go (default /var/tmp)")
    p.add_argument("--trace-dir", type=Path,
                   help="where traced runs write their traces (default: --workdir)")
    p.add_argument("--timeout", type=float, default=1800, help="per workload run, s")
    p.add_argument("--syscalls", choices=("sync", "all"), default="sync",
                   help="`iowhy record --syscalls` for the overhead runs (default: sync, as "
                        "iowhy record's)")
    g = p.add_argument_group("overhead protocol (sections untar and fsync)")
    g.add_argument("--start-delay", type=float, default=1.0,
                   help="start every workload this long after its run's sync, traced or not"
                   " (default 1.0 s; must exceed `iowhy record`'s launch-to-attach time,"
                   " about 0.5 s)")
    g.add_argument("--drop-caches", action="store_true",
                   help="also drop the page cache before each run (cold tar; default: keep"
                   " it, as memory freed before a run makes its speed vary, see bench/README)")
    g.add_argument("--loop-buffered", dest="loop_dio", action="store_false",
                   help="loop devices write their backing file through its page cache"
                   " (default: direct I/O)")
    g.add_argument("--seed", type=int, default=1,
                   help="seed of the order within pairs and of the bootstrap (default 1)")
    g.add_argument("--aa", action="store_true",
                   help="A/A control: run both halves of every pair untraced, to measure the"
                   " protocol's own noise and bias")
    g.add_argument("--aa-ballast-mib", type=int, default=0, metavar="MiB",
                   help="with --aa: the second run of each pair holds this much written"
                   " memory from its sync to its end, as the recorder's ring buffer and maps"
                   " do (default 0: none)")
    g.add_argument("--stats-runs", type=int, default=1, metavar="N",
                   help="traced runs with --probe-stats after the pairs (default 1): each"
                   " program's medians over them")
    g.add_argument("--stats-recorder", type=Path, action="append", default=[],
                   metavar="PATH", help="also make --stats-runs runs with this"
                   " iowhy-record build (IOWHY_RECORDER; repeatable), in an order drawn"
                   " per round with the installed one")
    g.add_argument("--vs-recorder", type=Path, action="append", default=[],
                   metavar="PATH", help="make every pair a round that also runs the workload"
                   " traced by this iowhy-record build (IOWHY_RECORDER; repeatable): its"
                   " ratio, and the installed build's against it, paired by round")
    g.add_argument("--flight", type=float, default=0, metavar="SEC",
                   help="the traced run is the workload beside `iowhy attach -a --flight"
                   " SEC` (the flight recorder's always-on cost) instead of `iowhy record`"
                   " (default 0: off)")
    g.add_argument("--record-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG to `iowhy record` in the traced runs (repeatable), e.g."
                   " --record-arg=--ringbuf=8")
    a = p.parse_args(argv)
    q = a.quick
    for k, full, quick in (("pairs", 21, 2), ("files", 20000, 2000), ("tasks", 8, 4),
                           ("k", 300, 50), ("rate_seconds", 3.0, 1.5), ("startup_runs", 5, 3)):
        if getattr(a, k) is None:
            setattr(a, k, quick if q else full)
    a.rate_steps = [20000, 50000, 100000]
    return a


def missing_prerequisite() -> str | None:
    """Why the benchmark cannot run here (root, the tools, the built iowhy), or None."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("mkfs.xfs", "losetup", "fio", "tar"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if not IOWHY.exists():
        return f"{IOWHY} missing: run `make -C {REPO} all`"
    return None


def run_sections(a: argparse.Namespace, sections: list[str]) -> dict[str, Any]:
    """Each section asked for, in order, its results by section name. Its scratch
    directories (in --workdir and --trace-dir) are removed whatever happens."""
    global TRACE_DIR
    a.workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="iowhy-bench-", dir=a.workdir))
    if a.trace_dir:
        TRACE_DIR = Path(tempfile.mkdtemp(prefix="iowhy-bench-", dir=a.trace_dir))
    res: dict[str, Any] = {}
    try:
        if "untar" in sections:
            tar = wait_for_tar(a.files)
            fs_mib = max(1024, 4 * tar.stat().st_size >> 20)

            def untar_cmd(mnt: Path) -> list[str]:
                return ["sh", "-c", f"tar -xf {shlex.quote(str(tar))} -C {shlex.quote(str(mnt))}"
                        f" && sync -f {shlex.quote(str(mnt))}"]
            res["untar"] = overhead(f"untar-{a.files}", untar_cmd, a, tmp, fs_mib)
        if "fsync" in sections:
            def fsync_cmd(mnt: Path) -> list[str]:
                return [PY, str(WORKLOADS), "fsync-tasks", str(mnt), str(a.tasks), str(a.k)]
            res["fsync"] = overhead(f"fsync-{a.tasks}x{a.k}", fsync_cmd, a, tmp, 512)
        if "floor" in sections:
            res["floor"] = floor(a, tmp)
        if "rate" in sections:
            res["rate"] = max_rate(a, tmp)
        if "startup" in sections:
            res["startup"] = startup(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if TRACE_DIR:
            shutil.rmtree(TRACE_DIR, ignore_errors=True)
    return res


def control_rows(rows: list, a: argparse.Namespace, res: dict[str, Any]) -> dict[str, Any]:
    """--aa or --flight: the overhead sections' ratios, which are a control or the flight
    recorder's cost, not the recorder's; returns the other sections' results."""
    for key, label in (("untar", f"(a) untar {a.files} files"),
                       ("fsync", f"(b) fsync-tasks {a.tasks}x{a.k}")):
        if key in res:
            u = res[key]
            if a.aa:
                row(rows, f"{label}: A/A CONTROL, wall untraced/untraced (median of "
                    f"{a.pairs})", f"{u['ratio']:.3f}", "x", "== 1", None)
            else:
                row(rows, f"{label}: beside `attach -a --flight {a.flight:g}`, wall /"
                    f" untraced (median of {a.pairs})", f"{u['ratio']:.3f}", "x",
                    f"<= {TARGET_FLIGHT}", u["ratio"] <= TARGET_FLIGHT)
            row(rows, f"{label}: ratio p25 - p75; 90% interval of the median",
                f"{u['q1']:.3f} - {u['q3']:.3f}; {u['ci'][0]:.3f} - {u['ci'][1]:.3f}",
                "x", "", None)
    return {k: v for k, v in res.items() if k not in ("untar", "fsync")}


def overhead_rows(rows: list, a: argparse.Namespace, title: str, label: str, u: dict,
                  target: float) -> None:
    """One overhead section's rows: `title` heads the ratio row, `label` (e.g.
    "(a) untar") the others."""
    sc = "" if a.syscalls == "sync" else f", --syscalls {a.syscalls}"
    row(rows, f"{title}, XFS/loop: wall traced/untraced (median of {a.pairs}){sc}",
        f"{u['ratio']:.3f}", "x", f"<= {target}", u["ratio"] <= target)
    row(rows, f"{label}: ratio p25 - p75 over pairs; 90% interval of the median",
        f"{u['q1']:.3f} - {u['q3']:.3f}; {u['ci'][0]:.3f} - {u['ci'][1]:.3f}", "x", "", None)
    row(rows, f"{label}: median wall untraced / traced", f"{u['untraced']:.3f} / "
        f"{u['traced']:.3f}", "s", "", None)
    row(rows, f"{label}: median trace elapsed / `iowhy record` wall",
        f"{u['trace_s']:.3f} / {u['outer_s']:.3f}", "s", "", None)
    row(rows, f"{label}: events dropped by iowhy, max over traced runs",
        str(max(u["dropped"])), "events", "== 0", max(u["dropped"]) == 0)
    row(rows, f"{label}: events the kernel ran no probe for (flagged), max over runs",
        str(max(u["unseen"])), "events", "", None)
    row(rows, f"{label}: BPF program time / CPU time, --probe-stats runs (median of "
        f"{a.stats_runs})",
        f"{u['probe_ns'] / 1e6:.1f} ms / {u['probe_share'] * 100:.1f}%", "", "", None)
    row(rows, f"{label}: the recorder's own CPU while recording (median)",
        f"{u['recorder_cpu_s'] * 1e3:.1f}", "ms", "", None)
    row(rows, f"{label}: the recorder's chunk compression, whole run (median)",
        f"{u['zstd_cpu_s'] * 1e3:.1f}", "ms", "", None)
    vs_rows(rows, label, u)


def floor_rows(rows: list, a: argparse.Namespace, fl: dict) -> None:
    """The dispatch floor: each pair of the three arms' ratios."""
    for key, label in (("empty/u", "empty probes / untraced: the kernel's dispatch"),
                       ("full/u", "shipped probes / untraced"),
                       ("full/empty", "shipped / empty probes: the programs' own work")):
        x = fl[key]
        row(rows, f"(floor) fsync-tasks {a.tasks}x{a.k}, {label} (median of {a.pairs}; "
            "p25 - p75; 90% interval)", f"{x['ratio']:.3f} ({x['q1']:.3f} - "
            f"{x['q3']:.3f}; {x['ci'][0]:.3f} - {x['ci'][1]:.3f})", "x", "", None)


def rate_rows(rows: list, r: dict) -> None:
    """The highest rate without drops (if any step had none) and the first with drops."""
    b, fl = r["best"], r["first_loss"]
    if b:
        lim = f"{b['rate'] * b['jobs']} IOPS" if b["rate"] else "unlimited"
        row(rows, f"max request rate without drops ({r['dev_kind']}; {b['jobs']} job(s), "
            f"iodepth {b['depth']}, {lim})", f"{b['rq_per_s']:.0f}", "requests/s",
            "", None)
        row(rows, "  all records/s at that rate (request + off-CPU + task + ...)",
            f"{b['rec_per_s']:.0f}", "records/s", "", None)
        row(rows, "  events the kernel ran no probe for at that rate (flagged)",
            str(b["unseen"]), "events", "", None)
    row(rows, "first rate with drops", f"{fl['rq_per_s']:.0f} ({fl['dropped']} dropped)"
        if fl else "none reached", "requests/s", "", None)


def size_rows(rows: list, res: dict[str, Any]) -> None:
    """The request record's size and the file bytes per request of the traces made."""
    row(rows, "request record size (abi.REQUEST_DTYPE.itemsize)",
        str(abi.REQUEST_DTYPE.itemsize), "bytes", "", None)
    for key, label in (("untar", "(a) untar trace"), ("fsync", "(b) fsync trace")):
        if key in res:
            t = res[key]["last"]
            bpr = t['file_bytes'] / max(1, t['records']['request'])
            row(rows, f"trace file bytes / request records, {label}", f"{bpr:.1f}",
                "bytes", f"<= {TARGET_BYTES_PER_RQ}", bpr <= TARGET_BYTES_PER_RQ)
    if res.get("rate", {}).get("best"):
        b = res["rate"]["best"]
        row(rows, "trace file bytes / request records, fio max-lossless trace",
            f"{b['bytes_per_rq']:.1f}", "bytes", f"<= {TARGET_BYTES_PER_RQ}",
            b["bytes_per_rq"] <= TARGET_BYTES_PER_RQ)


def startup_rows(rows: list, a: argparse.Namespace, s: dict) -> None:
    """The recorder's startup, from its main() and from the `iowhy record` launch."""
    row(rows, f"recorder startup_ns: main() -> probes attached (median of "
        f"{a.startup_runs})", f"{s['startup_ms']:.1f}", "ms", "", None)
    row(rows, "`iowhy record` launch -> probes attached, workload started (median)",
        f"{s['launch_ms']:.1f}", "ms", "", None)
    row(rows, "`iowhy record --dry-run` wall time (median)", f"{s['dry_ms']:.1f}", "ms",
        "", None)


def result_rows(a: argparse.Namespace, sections: list[str], res: dict[str, Any]) -> list:
    """The results table's rows, section by section, in the order they are printed."""
    rows: list = []
    if a.aa or a.flight:
        res = control_rows(rows, a, res)
    if "untar" in res:
        overhead_rows(rows, a, f"(a) untar {a.files} files", "(a) untar", res["untar"],
                      TARGET_UNTAR)
    if "fsync" in res:
        overhead_rows(rows, a, f"(b) fsync-tasks {a.tasks}x{a.k}", "(b) fsync", res["fsync"],
                      TARGET_FSYNC)
    if "floor" in res:
        floor_rows(rows, a, res["floor"])
    if "rate" in res:
        rate_rows(rows, res["rate"])
    if "size" in sections:
        size_rows(rows, res)
    if "startup" in res:
        startup_rows(rows, a, res["startup"])
    return rows


def print_results(rows: list, cmdline: str) -> None:
    """The results table, its columns as wide as their widest cell, then the notes."""
    w = [max(len(r[i]) for r in rows + [("figure", "value", "unit", "target", "")])
         for i in range(5)]
    say("\n== results")
    say(f"command: {cmdline}")
    say(f"{'figure':<{w[0]}}  {'value':>{w[1]}}  {'unit':<{w[2]}}  {'target':<{w[3]}}  status")
    for fig, val, unit, tgt, st in rows:
        say(f"{fig:<{w[0]}}  {val:>{w[1]}}  {unit:<{w[2]}}  {tgt:<{w[3]}}  {st}".rstrip())
    for note in sorted(NOTES):
        say(f"note: {note}")
    say(f"loadavg at end {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    a = parse_options(argv)
    sections = a.only or list(SECTIONS)
    why = missing_prerequisite()
    if why:
        print(f"bench_record: {why}", file=sys.stderr)
        return 1
    cmdline = shlex.join([sys.executable, *sys.argv])
    say(f"command: {cmdline}")
    ver = run([str(IOWHY), "--version"], check=False).stdout.strip()
    say(f"host: {platform.node()}, Linux {platform.release()}, {os.cpu_count()} CPUs, {ver},"
        f" loadavg {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    res = run_sections(a, sections)
    print_results(result_rows(a, sections, res), cmdline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
