#!/usr/bin/env python3
"""What the analysis costs, on the traces users record (printed, never asserted).

    .venv/bin/python bench/bench_analyze.py                    # every trace, as root
    .venv/bin/python bench/bench_analyze.py --only fsync --only synthetic
    .venv/bin/python bench/bench_analyze.py --trace T.iowt     # an existing trace
    .venv/bin/python bench/bench_analyze.py --venv OTHER/.venv  # another build's figures

Traces (--only, repeatable; default all). The recorded ones are made with the real
recorder (`.venv/bin/iowhy record`) once and kept in --cache (default
/var/cache/iowhy/bench-analyze, or $IOWHY_CACHE/bench-analyze) under a name that
carries their size; later runs reuse them (--rerecord makes them again). Recording
needs root, fio, xfsprogs and losetup; every loop device and mount is removed in a
`finally`, and only processes this script started are signalled, by PID.

  busy       BUSY-60s.iowt: fio as the workload, `--time_based --runtime=S` (--busy-seconds,
             default 60): job `rw`, 4 KiB randwrite, --ioengine=psync --numjobs=2
             --direct=1, on a loop device over a 1 GiB file in /dev/shm; job `fs`, 4 KiB
             sequential writes each followed by fsync (--fsync=1, a 200 MiB file it appends
             to, then rewrites), on XFS on a second loop device over /dev/shm.
  fio        fio-psync-20s.iowt: one fio job, 4 KiB randwrite, psync, --direct=1, on a loop
             device over /dev/shm, --fio-seconds (default 20).
  fsync      fsync-tasks-8x300.iowt: bench_record.py's workload, `lab/workloads.py
             fsync-tasks MNT 8 300` (--tasks, --k) on a fresh XFS on a loop device over
             /var/tmp (direct I/O).
  untar      untar-20000.iowt: bench_record.py's, `sh -c 'tar -xf linux-6.1-N.tar -C MNT &&
             sync -f MNT'` (--files) on the same kind of XFS.
  synthetic  tests/synthtrace.py's recorded_mix(): --synthetic-records records (default
             2e6) in the record mix measured on the busy trace (the proportions are in
             tests/synthtrace.py), written to a temporary file (--keep PATH keeps it).
             `--synthetic requests` is the older generator instead (requests, fsync,
             journal and blocked intervals, no wakeup links: the figure this bench
             printed before it measured recorded traces).

For each trace it prints the records of every type, the record mix (shares of each type,
what woke the off-CPU and helper intervals), then:

  * analyze(): read_trace() and analyze() (no plots, AnalysisConfig(timings=True)) in a
    fresh process: seconds, records/s end to end (all records / (read + analyze)), the
    CPU time of read + analyze (all threads) and records per CPU second (a figure other
    processes on the host disturb far less than the wall time), peak
    RSS of that process (VmHWM: interpreter, the decoded trace and the analysis) per
    record, and seconds and records/s per analysis phase;
  * `iowhy report --json TRACE` as a subprocess (every trace), `iowhy export --format
    parquet` and `iowhy query 'SELECT count(*) FROM requests' TRACE` (the busy trace;
    --export-all: every one; --timelines adds `export --format perfetto` and `--format
    chrome-json` there): wall time, records/s, CPU time (the child's, from wait4), peak
    RSS per record (the child's ru_maxrss).

--cpu runs analyze() alone, on one thread (the decoding too), every figure read from that
thread's CPU clock: per phase the work it does, which the other processes of a shared
host disturb far less than its wall time; no command is run.

--venv DIR measures another build (default: this tree's .venv): its bin/python runs
analyze() and its bin/iowhy the commands; recording always uses this tree's build.

A run that exceeds --timeout (default 1200 s) is stopped (SIGTERM, then SIGKILL, by
PID) and printed as not finished, with the phase it was in. The 1, 5 and 15 min load
averages are printed before and after every measured run.

Targets, printed as ratios: >= 2 M records/s end to end; peak RSS <= 300 B per record;
the busy trace (60 s) reported (`report --json`) in under 60 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the synthetic generator is the tests' (synthtrace)
import synthtrace  # noqa: E402
from iowhy import abi  # noqa: E402  (the installed package: run with .venv/bin/python)

IOWHY = REPO / ".venv" / "bin" / "iowhy"
WORKLOADS = REPO / "lab" / "workloads.py"
PY = "/usr/bin/python3"
CACHE = Path(os.environ.get("IOWHY_CACHE", "/var/cache/iowhy")) / "bench-analyze"

TARGET_RATE = 2_000_000  # records/s end to end
TARGET_RSS = 300  # peak RSS bytes per record (all record types)
TARGET_BUSY_S = 60.0  # `report --json` of the 60 s busy trace, s
QUERY = "SELECT count(*) FROM requests"  # `iowhy query` on a trace: its tables in memory
KINDS = ("busy", "fio", "fsync", "untar", "synthetic")
RECORDED = ("busy", "fio", "fsync", "untar")
# what recording each trace runs besides iowhy
RECORD_TOOLS = {"busy": ("fio", "losetup", "mkfs.xfs", "mount"), "fio": ("fio", "losetup"),
                "fsync": ("losetup", "mkfs.xfs", "mount"),
                "untar": ("losetup", "mkfs.xfs", "mount", "tar")}


def say(*a: Any) -> None:
    print(*a, flush=True)


def loadavg() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


# -- recording --------------------------------------------------------------------------

def trace_name(kind: str, a: argparse.Namespace) -> str:
    """The cache name of a recorded trace: the workload and its size."""
    return {"busy": f"busy-{a.busy_seconds:g}s", "fio": f"fio-psync-{a.fio_seconds:g}s",
            "fsync": f"fsync-tasks-{a.tasks}x{a.k}", "untar": f"untar-{a.files}"}[kind] + ".iowt"


def fio_busy(l1: str, mnt: Path, seconds: float) -> list[str]:
    return ["fio", "--output=/dev/null", "--time_based", f"--runtime={seconds:g}",
            "--name=rw", f"--filename={l1}", "--rw=randwrite", "--bs=4k", "--ioengine=psync",
            "--numjobs=2", "--direct=1", "--size=900M",
            "--name=fs", f"--filename={mnt}/f", "--rw=write", "--bs=4k", "--ioengine=psync",
            "--fsync=1", "--size=200M"]


def fio_psync(dev: str, seconds: float) -> list[str]:
    return ["fio", "--output=/dev/null", "--time_based", f"--runtime={seconds:g}",
            "--name=psync", f"--filename={dev}", "--rw=randwrite", "--bs=4k",
            "--ioengine=psync", "--numjobs=1", "--direct=1", "--size=900M"]


@contextlib.contextmanager
def workload(kind: str, a: argparse.Namespace) -> Iterator[tuple[list[str], float]]:
    """The devices and filesystem a workload needs (removed on exit, even on failure),
    and its command and timeout."""
    import bench_record as br
    with contextlib.ExitStack() as st:
        if kind == "busy":
            l1 = st.enter_context(br.loop_device(Path("/dev/shm"), 1024))
            _, mnt = st.enter_context(br.fresh_xfs(Path("/dev/shm"), 1024))
            yield fio_busy(l1, mnt, a.busy_seconds), a.busy_seconds + 300
        elif kind == "fio":
            l1 = st.enter_context(br.loop_device(Path("/dev/shm"), 1024))
            yield fio_psync(l1, a.fio_seconds), a.fio_seconds + 300
        elif kind == "fsync":
            _, mnt = st.enter_context(br.fresh_xfs(a.workdir, 512, direct_io=True))
            yield [PY, str(WORKLOADS), "fsync-tasks", str(mnt), str(a.tasks), str(a.k)], 1800
        else:
            tar = br.wait_for_tar(a.files)
            size = max(1024, 4 * tar.stat().st_size >> 20)
            _, mnt = st.enter_context(br.fresh_xfs(a.workdir, size, direct_io=True))
            q = shlex.quote
            yield ["sh", "-c", f"tar -xf {q(str(tar))} -C {q(str(mnt))} && sync -f {q(str(mnt))}"
                   ], 1800


def record(kind: str, out: Path, a: argparse.Namespace) -> None:
    """Record one workload with `iowhy record` into `out` (written beside it, renamed
    when the recording succeeded), with a side file `out`.json saying how."""
    import bench_record as br
    out.parent.mkdir(parents=True, exist_ok=True)
    new = out.with_name(out.name + ".new")
    with workload(kind, a) as (cmd, timeout):
        full = [str(IOWHY), "record", "-q", "-o", str(new), "--", *cmd]
        say(f"   recording {out.name}: {shlex.join(full)}")
        la = os.getloadavg()
        t0 = time.monotonic()
        try:
            rc, _out, err = br.run_pid_safe(full, timeout)
        finally:
            for p in out.parent.glob(new.name + ".partial-*"):
                p.unlink(missing_ok=True)  # a recording cut short (only ours: our name)
        wall = time.monotonic() - t0
        if rc != 0:
            new.unlink(missing_ok=True)
            raise RuntimeError(f"{shlex.join(full)} exited {rc}: {err.strip()[-2000:]}")
    br.wait_probes_detached()
    new.rename(out)
    side = {"workload": kind, "command": cmd, "iowhy_record_wall_s": round(wall, 3),
            "recorded": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "loadavg_before": la,
            "loadavg_after": os.getloadavg(), "kernel": platform.release(),
            "iowhy": subprocess.run([str(IOWHY), "--version"], capture_output=True,
                                    text=True).stdout.strip()}
    out.with_name(out.name + ".json").write_text(json.dumps(side, indent=1) + "\n")
    say(f"   recorded {out} ({mib(out.stat().st_size)}) in {wall:.1f} s")


# -- the record mix ----------------------------------------------------------------------

def mix_child(path: str) -> dict[str, Any]:
    """Runs in a fresh process: the record mix of a trace (synthtrace.measure_mix)."""
    from iowhy.traceformat import read_trace
    return synthtrace.measure_mix(read_trace(path))


def print_mix(m: dict[str, Any]) -> None:
    say("   record mix (share of all records): " + ", ".join(
        f"{k} {v:.4f}" for k, v in m["share"].items() if v))
    say(f"   workload threads {m['threads']}, helper threads {m['helpers']} "
        f"({', '.join(f'{k} {v}' for k, v in m['helper_kinds'].items())}); "
        f"requests per device: {', '.join(f'{k} {v:.3f}' for k, v in m['rq_devices'].items())}")
    for name in ("offcpu", "helper"):
        o = m[name]
        if not o["n"]:
            continue
        say(f"   {name} ({o['n']:,}): preempted {o['preempt']:.4f}; of the waits: "
            + ", ".join(f"{k} {v:.4f}" for k, v in o["woken"].items())
            + f"; iowait {o['iowait']:.4f}, D {o['D']:.4f}; syscalls "
            + ", ".join(f"{k} {v:.4f}" for k, v in o["syscalls"].items()))


# -- measured runs -----------------------------------------------------------------------

def _hwm(pid: int) -> int:
    """VmHWM of a live child, bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measured(cmd: list[str], timeout: float, stdout: Any = subprocess.PIPE) -> dict[str, Any]:
    """Run cmd, reaped with wait4 for its peak RSS (ru_maxrss). Stopped by its PID
    (SIGTERM, SIGKILL 10 s later) past `timeout` s. Lines on its stdout (when piped) are
    collected as they come, with the time they came (the child's progress).
    Returns rc, wall_s, maxrss (bytes), timed_out, lines [(t_s, line)], stderr."""
    lines: list[tuple[float, str]] = []
    err: list[str] = []
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)

    def pump(src: Any, into: list, stamp: bool) -> None:
        for line in src:
            into.append((time.monotonic() - t0, line.rstrip("\n")) if stamp else line)

    pumps = [threading.Thread(target=pump, args=(p.stderr, err, False), daemon=True)]
    if stdout is subprocess.PIPE:
        pumps.append(threading.Thread(target=pump, args=(p.stdout, lines, True), daemon=True))
    for th in pumps:
        th.start()
    timed_out = False
    hwm = 0
    status, ru = 0, None
    try:
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            hwm = max(hwm, _hwm(p.pid))
            if time.monotonic() - t0 > timeout and not timed_out:
                timed_out = True
                os.kill(p.pid, signal.SIGTERM)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid:
                        break
                    time.sleep(0.1)
                if not pid:
                    os.kill(p.pid, signal.SIGKILL)
                    _, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.1)
    except BaseException:
        # interrupted: stop the child (ours, by PID) before leaving
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(p.pid, signal.SIGKILL)
            os.wait4(p.pid, 0)
        raise
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    for th in pumps:
        th.join(timeout=10)
    maxrss = max(hwm, (ru.ru_maxrss * 1024) if ru is not None else 0)
    cpu = (ru.ru_utime + ru.ru_stime) if ru is not None else 0.0
    return {"rc": p.returncode, "wall_s": wall, "cpu_s": cpu, "maxrss": maxrss,
            "timed_out": timed_out, "lines": lines, "stderr": "".join(err)}


def analyze_child(path: str, threads: int, cpu: bool = False) -> None:
    """Runs in a fresh process: read_trace and analyze, printing one JSON line as each
    phase starts ({"phase", "t"}: the parent knows where a stopped run was) and the
    result last. cpu: everything on this one thread (the decoding too) and every time,
    the phases' included, read from its CPU clock (--cpu)."""
    if cpu:
        # The analysis times its phases with time.perf_counter() (analysis._Clock).
        time.perf_counter = time.thread_time
        threads = 1
    from iowhy import traceformat
    from iowhy.analysis import AnalysisConfig, analyze
    from iowhy.memory import tune_allocator
    from iowhy.traceformat import read_trace
    if cpu:
        traceformat.DECODE_THREADS = 1
    tune_allocator()  # as `iowhy report` does
    t0 = time.perf_counter()
    c0 = time.process_time()

    lock = threading.Lock()

    def phase(name: str) -> None:  # called from the analysis's threads
        with lock:
            sys.stdout.write(json.dumps({"phase": name, "t": time.perf_counter() - t0}) + "\n")
            sys.stdout.flush()

    rss_base = _status("VmRSS")  # imports done: what any command starts from
    phase("read trace")
    tr = read_trace(path)
    t_read = time.perf_counter() - t0
    counts = {n: tr.count(n) for n in abi.RECORD_NAMES}
    rss_read = _status("VmRSS")
    res = analyze(tr, AnalysisConfig(timings=True, threads=threads, progress=phase))
    t_all = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(json.dumps({"done": True, "read_s": t_read, "seconds": t_all, "cpu_s": cpu,
                      "counts": counts,
                      "phases": res.get("_timings_s", {}), "rss_read": rss_read,
                      "rss_base": rss_base,
                      "hwm": _status("VmHWM")}), flush=True)


def _status(key: str) -> int:
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


# -- one trace ---------------------------------------------------------------------------

def iowhy(a: argparse.Namespace) -> str:
    """The iowhy command of the build measured (--venv)."""
    return str(a.venv / "bin" / "iowhy")


def rate(n: int, s: float) -> str:
    return f"{n / s / 1e6:.3f} M records/s" if s > 0 else "-"


def ratio(x: float, target: float) -> str:
    """A figure against its target (LEGEND says which way meets it)."""
    return f"[{x / target:.3f} of the target]"


LEGEND = ("[x of the target] is the figure divided by its target: a rate meets its target at"
          f" >= 1 ({TARGET_RATE / 1e6:.0f} M records/s end to end), a peak RSS per record"
          f" or a time at <= 1 ({TARGET_RSS} B/record; the busy trace's `report --json` in"
          " less time than its load ran, 60 s for 60 s)")


def run_analysis(path: Path, total_hint: int, a: argparse.Namespace) -> dict[str, Any]:
    """analyze_child in a fresh process, under --timeout; prints what it measured."""
    say(f"   analyze() in a fresh process ({loadavg()})")
    r = measured([str(a.venv / "bin" / "python"), __file__, "--child", "analyze", "--threads",
                  str(a.threads), *(["--cpu"] if a.cpu else []),
                  "--trace", str(path)], a.timeout)
    say(f"     ({loadavg()} after)")
    starts = []
    done = None
    for _t, line in r["lines"]:
        with contextlib.suppress(ValueError):
            d = json.loads(line)
            if "phase" in d:
                starts.append((d["phase"], float(d["t"])))
            elif d.get("done"):
                done = d
    out: dict[str, Any] = {"timed_out": r["timed_out"], "maxrss": r["maxrss"],
                           "wall_s": r["wall_s"]}
    if done is None:
        why = (f"did not finish in {a.timeout:.0f} s" if r["timed_out"]
               else f"failed (exit {r['rc']}): {r['stderr'].strip()[-1500:]}")
        running = [n for n, _ in starts[-2:]]
        say(f"     {why}; peak RSS so far {mib(r['maxrss'])}"
            + (f" = {r['maxrss'] / total_hint:,.0f} B/record" if total_hint else "")
            + f"; phases started: {', '.join(f'{n} at {t:.1f} s' for n, t in starts)}"
            + (f"; running at the end: {' / '.join(running)}" if running else ""))
        out["failed"] = why
        out["started"] = starts
        return out
    n = sum(done["counts"].values())
    hwm = max(int(done["hwm"]), r["maxrss"])
    out.update(records=n, counts=done["counts"], seconds=done["seconds"], read_s=done["read_s"],
               cpu_s=done.get("cpu_s", 0.0),
               hwm=hwm, rss_read=done["rss_read"], phases=done["phases"])
    e2e = n / done["seconds"]
    how = (f" of CPU, one thread: {n / done['seconds'] / 1e6:.3f} M records per CPU second"
           if a.cpu
           else f": {rate(n, done['seconds'])} end to end {ratio(e2e, TARGET_RATE)}")
    say(f"     read_trace {done['read_s']:.2f} s + analyze {done['seconds'] - done['read_s']:.2f}"
        f" s = {done['seconds']:.2f} s{how}")
    if done.get("cpu_s") and not a.cpu:
        say(f"     CPU time of read + analyze (all threads) {done['cpu_s']:.2f} s:"
            f" {n / done['cpu_s'] / 1e6:.3f} M records per CPU second")
    base = int(done["rss_base"])
    say(f"     peak RSS {mib(hwm)} = {hwm / n:,.0f} B/record {ratio(hwm / n, TARGET_RSS)}; of"
        f" which the interpreter and imports {mib(base)}, the trace read"
        f" {mib(done['rss_read'] - base)} = {(done['rss_read'] - base) / n:,.0f} B/record, the"
        f" analysis's peak above that {mib(hwm - done['rss_read'])} ="
        f" {(hwm - done['rss_read']) / n:,.0f} B/record")
    say("     per phase, CPU seconds of the one thread:" if a.cpu else
        "     per phase (the phases after 'load records' run two at a time: their sum exceeds"
        " the elapsed time):")
    say(f"       {'phase':<28}{'seconds':>9}{'M records/s':>13}{'share':>8}")
    phases = {"read trace": done["read_s"], **done["phases"]}
    for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
        per_s = f"{n / v / 1e6:13.3f}" if v >= 1e-3 else f"{'-':>13}"  # the clock's 4 digits
        say(f"       {k:<28}{v:9.3f}{per_s}{v / done['seconds']:8.1%}")
    return out


def run_command(label: str, cmd: list[str], n: int, a: argparse.Namespace,
                stdout: Any) -> dict[str, Any]:
    """One `iowhy` command as a subprocess: wall, records/s, peak RSS per record."""
    say(f"   {label}: {shlex.join(cmd)} ({loadavg()})")
    r = measured(cmd, a.timeout, stdout=stdout)
    say(f"     ({loadavg()} after)")
    if r["timed_out"]:
        say(f"     did not finish in {a.timeout:.0f} s; peak RSS so far {mib(r['maxrss'])} ="
            f" {r['maxrss'] / n:,.0f} B/record")
    elif r["rc"] != 0:
        say(f"     failed (exit {r['rc']}): {r['stderr'].strip()[-1500:]}")
    else:
        say(f"     {r['wall_s']:.2f} s wall: {rate(n, r['wall_s'])}"
            f" {ratio(n / r['wall_s'], TARGET_RATE)}; CPU {r['cpu_s']:.2f} s; peak RSS"
            f" {mib(r['maxrss'])} ="
            f" {r['maxrss'] / n:,.0f} B/record {ratio(r['maxrss'] / n, TARGET_RSS)}")
    return r


def bench_trace(label: str, path: Path, a: argparse.Namespace, tmp: Path,
                export: bool) -> dict[str, Any]:
    say(f"\n== {label}: {path} ({mib(path.stat().st_size)})")
    side = path.with_name(path.name + ".json")
    if side.exists():
        d = json.loads(side.read_text())
        say(f"   recorded {d.get('recorded')} by {d.get('iowhy')} (load average before"
            f" {', '.join(f'{x:.2f}' for x in d.get('loadavg_before', []))}):"
            f" {shlex.join(d.get('command', []))}")
    res: dict[str, Any] = {"label": label, "path": str(path)}
    mix = measured([str(a.venv / "bin" / "python"), __file__, "--child", "mix", "--trace",
                    str(path)], a.timeout)
    if mix["rc"] == 0 and mix["lines"]:
        m = json.loads(mix["lines"][-1][1])
        res["mix"] = m
        n = m["records"]
        types = ", ".join(f"{k} {v:,}" for k, v in m["counts"].items() if v)
        say(f"   {n:,} records: {types}; {m['counts']['request']:,} requests")
        print_mix(m)
    else:
        say(f"   reading it failed: {mix['stderr'].strip()[-1500:]}")
        res["failed"] = True
        return res
    res["analysis"] = run_analysis(path, n, a)
    res["records"] = n
    if a.cpu:
        return res
    with open(tmp / "report.json", "w") as f:
        res["report"] = run_command("iowhy report --json", [iowhy(a), "report", "--json",
                                                            str(path)], n, a, f)
    if res["report"]["rc"] == 0 and not res["report"]["timed_out"]:
        json.loads((tmp / "report.json").read_text())  # a whole JSON document
    (tmp / "report.json").unlink(missing_ok=True)
    if export:
        out = tmp / "export"
        res["export"] = run_command("iowhy export --format parquet",
                                    [iowhy(a), "export", "--format", "parquet", "-o",
                                     str(out), str(path)], n, a, subprocess.DEVNULL)
        shutil.rmtree(out, ignore_errors=True)
        # the .iowt's tables in memory, all at once (a query may read any of them)
        res["query"] = run_command("iowhy query", [iowhy(a), "query", QUERY, str(path)],
                                   n, a, subprocess.DEVNULL)
        for fmt in (("perfetto", "chrome-json") if a.timelines else ()):
            out = tmp / f"timeline.{fmt}"
            res[fmt] = run_command(f"iowhy export --format {fmt}",
                                   [iowhy(a), "export", "--format", fmt, "-o", str(out),
                                    str(path)], n, a, subprocess.DEVNULL)
            out.unlink(missing_ok=True)
    res["records"] = n
    return res


# -- summary -----------------------------------------------------------------------------

def summary(results: list[dict[str, Any]], a: argparse.Namespace) -> None:
    say("\n== summary (targets: >= 2 M records/s end to end, <= 300 B peak RSS per record,"
        " the 60 s busy trace reported in < 60 s)")
    head = (f"{'trace':<26}{'records':>12}{'requests':>11}{'analyze s':>11}{'M rec/s':>9}"
            f"{'CPU s':>7}{'B/rec':>7}{'report s':>10}{'M rec/s':>9}{'B/rec':>7}"
            f"{'export s':>10}{'B/rec':>7}{'query s':>9}{'B/rec':>7}")
    say(head)

    def secs(r: dict[str, Any] | None, key: str, w: int) -> str:
        if r is None:
            return f"{'':>{w}}"
        if r.get("timed_out"):
            return f"{'>' + format(a.timeout, '.0f'):>{w}}"
        if r.get("failed") or r.get("rc", 0) != 0:
            return f"{'failed':>{w}}"
        return f"{r[key]:>{w}.2f}"

    def per_rec(r: dict[str, Any] | None, n: int, w: int) -> str:
        if r is None:
            return f"{'':>{w}}"
        v = r.get("hwm") or r["maxrss"]
        # a stopped run's peak so far: at least that much
        return f"{('>=' if r.get('timed_out') else '') + format(v / n, ',.0f'):>{w}}"

    def rec_s(r: dict[str, Any] | None, key: str, n: int, w: int) -> str:
        ok = r is not None and key in r and not r.get("timed_out") and not r.get("rc")
        return f"{n / r[key] / 1e6:>{w}.3f}" if ok and r is not None else f"{'-':>{w}}"

    for res in results:
        n = res.get("records", 0)
        if not n:
            continue
        an, rp, ex, qu = (res.get(k) for k in ("analysis", "report", "export", "query"))
        rq = res["mix"]["counts"]["request"]
        cpu = (f"{an['cpu_s']:>7.2f}" if an is not None and an.get("cpu_s")
               else f"{'-':>7}")
        say(f"{res['label']:<26}{n:>12,}{rq:>11,}{secs(an, 'seconds', 11)}"
            f"{rec_s(an, 'seconds', n, 9)}{cpu}{per_rec(an, n, 7)}{secs(rp, 'wall_s', 10)}"
            f"{rec_s(rp, 'wall_s', n, 9)}{per_rec(rp, n, 7)}{secs(ex, 'wall_s', 10)}"
            f"{per_rec(ex, n, 7)}{secs(qu, 'wall_s', 9)}{per_rec(qu, n, 7)}")
    timed = [r for r in results if r.get("perfetto") or r.get("chrome-json")]
    if timed:
        say(f"\n{'trace':<26}{'records':>12}{'perfetto s':>11}{'B/rec':>7}"
            f"{'chrome-json s':>14}{'B/rec':>7}")
    for res in timed:
        n = res["records"]
        pf, cj = res.get("perfetto"), res.get("chrome-json")
        say(f"{res['label']:<26}{n:>12,}{secs(pf, 'wall_s', 11)}{per_rec(pf, n, 7)}"
            f"{secs(cj, 'wall_s', 14)}{per_rec(cj, n, 7)}")
    say("analyze s: read_trace + analyze() in a fresh process; CPU s: its CPU time (all"
        " threads); report/export/query s: the whole"
        " command's wall time; M rec/s: all records per second of that time; B/rec: peak"
        f" RSS per record (all record types); >{a.timeout:.0f}: stopped at --timeout (B/rec"
        " then the peak so far)")
    say("\nrecord mix (shares of all records; of the workload's off-CPU waits, what woke"
        " them; tests/synthtrace.py's BUSY_MIX is the busy trace's):")
    say(f"{'trace':<26}{'request':>8}{'offcpu':>8}{'helper':>8}{'fsync':>8}{'journal':>8}"
        f"{'preempt':>8}{'by rq':>8}{'helper':>8}{'wkload':>8}{'irq':>8}{'unseen':>8}"
        f"{'poll':>8}")
    for res in results:
        m = res.get("mix")
        if not m:
            continue
        sh, o = m["share"], m["offcpu"]
        w = o["woken"]
        say(f"{res['label']:<26}" + "".join(f"{x:>8.4f}" for x in (
            sh["request"], sh["offcpu"], sh["helper"], sh["fsync"], sh["journal"],
            o["preempt"], w["request"], w["helper"], w["workload"], w["irq"], w["unseen"],
            o["sleep-syscall"])))
    for res in results:
        if res.get("kind") == "busy" and res.get("report"):
            # the target: reported in less time than the load ran (60 s for 60 s)
            rp, limit = res["report"], a.busy_seconds * TARGET_BUSY_S / 60
            s = (f"did not finish in {a.timeout:.0f} s" if rp["timed_out"] or rp["rc"]
                 else f"{rp['wall_s']:.1f} s")
            say(f"{res['label']} `report --json`: {s} (target < {limit:.0f} s, the time the"
                " load ran)" + (f" {ratio(rp['wall_s'], limit)}" if s.endswith(" s") else ""))


# -- main --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=KINDS,
                    help="bench this trace (repeatable; default: all)")
    ap.add_argument("--trace", action="append", default=[], metavar="PATH",
                    help="bench an existing trace instead (repeatable)")
    ap.add_argument("--cache", type=Path, default=CACHE,
                    help="where recorded traces are kept (default: %(default)s)")
    ap.add_argument("--rerecord", action="store_true",
                    help="record the traces again even if the cache has them")
    ap.add_argument("--record-only", action="store_true",
                    help="record the traces the cache lacks, measure nothing")
    ap.add_argument("--busy-seconds", type=float, default=60.0, help="busy: fio runtime, s")
    ap.add_argument("--fio-seconds", type=float, default=20.0, help="fio: runtime, s")
    ap.add_argument("--tasks", type=int, default=8, help="fsync: processes (default 8)")
    ap.add_argument("--k", type=int, default=300, help="fsync: append+fsync per process")
    ap.add_argument("--files", type=int, default=20000, help="untar: files (default 20000)")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp"),
                    help="fsync and untar: where the XFS loop device's file goes")
    ap.add_argument("--synthetic", choices=("mix", "requests"), default="mix",
                    help="mix: the recorded traces' record mix (default); requests: the"
                         " older requests-only generator")
    ap.add_argument("--synthetic-records", type=float, default=2e6,
                    help="records (mix) or requests (requests) of the synthetic trace")
    ap.add_argument("--keep", metavar="PATH", help="write the synthetic trace here and keep it")
    ap.add_argument("--export-all", action="store_true",
                    help="time `iowhy export --format parquet` and `iowhy query` on every"
                         " trace (default: busy)")
    ap.add_argument("--timelines", action="store_true",
                    help="also time `iowhy export --format perfetto` and `--format"
                         " chrome-json` where the parquet export runs")
    ap.add_argument("--timeout", type=float, default=1200.0,
                    help="stop a measured run after this many seconds (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2,
                    help="AnalysisConfig.threads of the analyze() run (default: 2, as report)")
    ap.add_argument("--cpu", action="store_true",
                    help="analyze() on one thread (the decoding too), every figure in CPU"
                         " seconds of that thread (per phase: the work each does, whatever"
                         " else runs on the host); no commands are run")
    ap.add_argument("--venv", type=Path, default=REPO / ".venv",
                    help="the build to measure: its bin/python runs analyze(), its bin/iowhy"
                         " the commands (default: %(default)s)")
    ap.add_argument("--child", choices=("analyze", "mix"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "analyze":
        analyze_child(a.trace[0], a.threads, a.cpu)
        return 0
    if a.child == "mix":
        print(json.dumps(mix_child(a.trace[0])), flush=True)
        return 0

    say(f"command: {shlex.join([sys.executable, *sys.argv])}")
    ver = subprocess.run([iowhy(a), "--version"], capture_output=True, text=True).stdout
    say(f"Linux {platform.release()}, {os.cpu_count()} CPUs, {ver.strip()},"
        f" {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {loadavg()}")
    say(LEGEND)
    todo: list[tuple[str, str, Path]] = [("trace", Path(t).name, Path(t)) for t in a.trace]
    if not a.trace:
        for kind in a.only or KINDS:
            if kind in RECORDED:
                todo.append((kind, trace_name(kind, a).removesuffix(".iowt"),
                             a.cache / trace_name(kind, a)))
            else:
                todo.append((kind, f"synthetic-{a.synthetic}", Path()))
    results = []
    tmp = Path(tempfile.mkdtemp(prefix="iowhy-bench-analyze-"))
    try:
        for kind, label, path in todo:
            if kind in RECORDED and (a.rerecord or not path.exists()):
                if os.geteuid() != 0:
                    say(f"\n== {label}: not recorded yet, and recording needs root: skipped")
                    continue
                gone = [t for t in RECORD_TOOLS[kind] if shutil.which(t) is None]
                if gone:
                    say(f"\n== {label}: not recorded yet, and recording needs"
                        f" {', '.join(gone)} (apt-get install fio xfsprogs mount tar):"
                        " skipped")
                    continue
                record(kind, path, a)
            if a.record_only:
                continue
            if kind == "synthetic":
                path = Path(a.keep) if a.keep else tmp / "synthetic.iowt"
                t0 = time.perf_counter()
                if a.synthetic == "mix":
                    synthtrace.write_recorded_mix(str(path), int(a.synthetic_records), seed=1)
                else:
                    synthtrace.write_synth(str(path), int(a.synthetic_records))
                say(f"\nwrote {path} ({mib(path.stat().st_size)}) in"
                    f" {time.perf_counter() - t0:.1f} s")
            res = bench_trace(label, path, a, tmp, export=a.export_all or kind == "busy")
            res["kind"] = kind
            results.append(res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary(results, a)
    say(f"{loadavg()} at the end")
    # a run stopped at --timeout is a figure; one that failed is a failure
    failed = [r["label"] for r in results if r.get("failed") or any(
        r.get(k) and not r[k].get("timed_out") and (r[k].get("rc") or r[k].get("failed"))
        for k in ("analysis", "report", "export", "query", "perfetto", "chrome-json"))]
    if failed:
        say(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
