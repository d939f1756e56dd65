"""`iowhy top`: a live view of where processes' time goes, by cause, refreshed every
interval, like top or biotop.

The recorder runs with `--top MS` (probes/rec_top.c): it keeps no trace and no record,
folds each record into per-process totals as it arrives, and prints one JSON line per
interval, with the kernel's own counters of each disk (/sys/block/DEV/stat) read at the
interval's start and end. This module names the processes (comm and cgroup from /proc),
adds a line per device from those counters (busy time, time in queue, flushes), and
prints a table sorted by blocked time, or one JSON object per interval.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from .categories import TOP_SHORT
from .errors import EXIT_USAGE, UserError

# The columns: the level ones with a short heading (categories.py), in code order.
CAUSES = tuple(TOP_SHORT)
# blocked: every cause but running and waiting for a CPU
BLOCKED = tuple(c for c in CAUSES if c not in ("cpu", "runqueue"))
SHORT = TOP_SHORT


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def process_names(pid: int) -> tuple[str, str | None]:
    """(comm, cgroup v2 path) of a running process; ("?", None) once it is gone."""
    comm = _read(f"/proc/{pid}/comm") or "?"
    cg = None
    for line in (_read(f"/proc/{pid}/cgroup") or "").splitlines():
        if line.startswith("0::"):
            cg = line[3:]
    return comm, cg


def block_counters(raw: dict[str, Any], key: str,
                   names: list[str] | None = None) -> dict[str, list[int]]:
    """The disks' /sys/block/DEV/stat fields as the recorder read them at the start
    (key "block_start") or the end ("block_end") of its interval, so that the device
    line covers the interval of the processes' rows (of `names` only, if given)."""
    out: dict[str, list[int]] = {}
    got = raw.get(key)
    if not isinstance(got, dict):
        return out
    for d, fields in got.items():
        if (names is None or d in names) and isinstance(fields, list) and all(
                isinstance(x, int) for x in fields):
            out[d] = fields
    return out


def device_rows(before: dict[str, list[int]], after: dict[str, list[int]],
                interval_ns: int) -> list[dict[str, Any]]:
    """Per device with I/O in the interval: busy (io_ticks), mean queue depth
    (time_in_queue over the interval, as iostat's aqu-sz), requests and flushes per
    second, from the kernel's counters."""
    rows = []
    s = max(interval_ns, 1) / 1e9
    for d, b in after.items():
        a = before.get(d)
        if a is None or len(a) < 11 or len(b) < 11:
            continue
        reads, writes = b[0] - a[0], b[4] - a[4]
        # field 16: flush requests completed (Documentation/ABI/stable/sysfs-block, 5.5+)
        flushes = b[15] - a[15] if len(a) >= 16 and len(b) >= 16 else 0
        if not (reads or writes or flushes):
            continue
        rows.append({"name": d, "busy_pct": min(100.0, (b[9] - a[9]) / 1e3 / s * 100),
                     "queue_depth": (b[10] - a[10]) / 1e3 / s, "reads_per_s": reads / s,
                     "writes_per_s": writes / s, "flushes_per_s": flushes / s})
    return sorted(rows, key=lambda r: -r["busy_pct"])


def bucket_top(b: int) -> int:
    """The largest value of histogram bucket b (probes/rec_top.c, bucket_top)."""
    if b < 8:
        return b
    msb = b // 8 + 2
    return ((8 + (b & 7) + 1) << (msb - 3)) - 1


def merge_hists(hs: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency histograms of several processes as one: count, p99 (the upper bound of the
    bucket holding it, at most the max, as the recorder computes it) and max."""
    counts: dict[int, int] = {}
    for h in hs:
        for b, n in h.get("buckets", []):
            counts[int(b)] = counts.get(int(b), 0) + int(n)
    n = sum(counts.values())
    mx = max((int(h.get("max_ns", 0)) for h in hs), default=0)
    p99, seen, want = mx, 0, n - n // 100
    for b in sorted(counts):
        seen += counts[b]
        if seen >= want:
            p99 = min(bucket_top(b), mx)
            break
    return {"count": n, "p99_ns": p99 if n else 0, "max_ns": mx}


def _public(h: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in h.items() if k != "buckets"}


def by_cgroup(procs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-process rows summed per cgroup (its v2 path; "?" when unknown), sorted by
    blocked time."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in procs:
        groups.setdefault(p["cgroup"] or "?", []).append(p)
    rows = []
    for cg, ps in groups.items():
        a = {c: sum(int(p["attribution_ns"].get(c, 0)) for p in ps) for c in CAUSES}
        rows.append({"cgroup": cg, "pids": sorted(p["pid"] for p in ps), "attribution_ns": a,
                     "blocked_ns": sum(p["blocked_ns"] for p in ps),
                     "fsync": merge_hists([p["fsync"] for p in ps]),
                     "requests": merge_hists([p["requests"] for p in ps])})
    rows.sort(key=lambda r: (-r["blocked_ns"], r["cgroup"]))
    return rows


def blocked_ns(p: dict[str, Any]) -> int:
    return sum(int(p["attribution_ns"].get(c, 0)) for c in BLOCKED)


def snapshot(raw: dict[str, Any], devices: list[dict[str, Any]],
             names: dict[int, tuple[str, str | None]], by: str = "process") -> dict[str, Any]:
    """The JSON object of one interval: the recorder's, each process named, the devices
    added, processes sorted by blocked time (by="cgroup": `cgroups` instead, summed per
    cgroup)."""
    procs = []
    for p in raw.get("processes", []):
        pid = int(p["pid"])
        if pid not in names:
            names[pid] = process_names(pid)
        comm, cg = names[pid]
        procs.append({"pid": pid, "comm": comm, "cgroup": cg,
                      "attribution_ns": p["attribution_ns"], "blocked_ns": blocked_ns(p),
                      "fsync": p["fsync"], "requests": p["requests"]})
    procs.sort(key=lambda p: (-p["blocked_ns"], p["pid"]))
    lost = {k: v for k, v in raw.get("counters", {}).items() if k.startswith("lost_") and v}
    out = {"start_ns": raw["start_ns"], "end_ns": raw["end_ns"],
           "interval_ns": raw["interval_ns"], "devices": devices, "lost": lost,
           "dropped_processes": raw.get("dropped_processes", 0)}
    if by == "cgroup":
        out["cgroups"] = by_cgroup(procs)
    else:
        out["processes"] = [{**p, "fsync": _public(p["fsync"]),
                             "requests": _public(p["requests"])} for p in procs]
    return out


def render(snap: dict[str, Any], rows: int = 20) -> str:
    """The terminal view of one snapshot, at most 100 columns."""
    iv = snap["interval_ns"] or 1
    cg = "cgroups" in snap
    rows_of = snap["cgroups"] if cg else snap["processes"]
    out = [f"iowhy top  interval {iv / 1e9:.2f} s  "
           + (f"cgroups {len(rows_of)}" if cg else f"processes {len(rows_of)}")
           + (f"  (+{snap['dropped_processes']} not shown: table full)"
              if snap["dropped_processes"] else "")]
    if snap["lost"]:
        out.append("  events lost in the kernel: " + ", ".join(
            f"{v} {k[5:]}" for k, v in sorted(snap["lost"].items())))
    for d in snap["devices"]:
        out.append(f"  {d['name']:<10} busy {d['busy_pct']:5.1f}%  queue depth "
                   f"{d['queue_depth']:5.2f}  flushes {d['flushes_per_s']:7.1f}/s  "
                   f"reads {d['reads_per_s']:7.1f}/s  writes {d['writes_per_s']:7.1f}/s")
    out.append("  % of the interval per cause (blk: blocked, every cause but cpu and rq)")
    head = ((f"{'CGROUP':<20}" if cg else f"{'PID':>7} {'COMM':<12}") + f" {'blk':>4}"
            + "".join(f"{SHORT[c]:>4}" for c in CAUSES)
            + f" {'fsync':>6} {'p99 ms':>7} {'req':>6} {'p99 ms':>7}")
    out.append(head)
    for p in rows_of[:rows]:
        a = p["attribution_ns"]
        pct = [min(999, round(100 * int(a.get(c, 0)) / iv)) for c in CAUSES]
        name = (f"{('...' + p['cgroup'][-17:]) if len(p['cgroup']) > 20 else p['cgroup']:<20}"
                if cg else f"{p['pid']:>7} {p['comm'][:12]:<12}")
        out.append(f"{name} {min(999, round(100 * p['blocked_ns'] / iv)):>4}"
                   + "".join(f"{x:>4}" for x in pct)
                   + f" {p['fsync']['count']:>6} {p['fsync']['p99_ns'] / 1e6:>7.2f}"
                   + f" {p['requests']['count']:>6} {p['requests']['p99_ns'] / 1e6:>7.2f}")
    return "\n".join(out)


def _lines(proc: subprocess.Popen) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def cmd_top(args: argparse.Namespace) -> int:
    from .cli import _check_target, check_privileges, find_recorder, parse_dev
    targets = sum(x for x in (args.pid is not None, args.cgroup is not None, args.all))
    if targets != 1:
        raise UserError("top needs one target: -p PID, --cgroup PATH or -a",
                        "e.g. iowhy top -p 1234", EXIT_USAGE)
    if not 0.1 <= args.interval <= 3600:
        raise UserError(f"-i {args.interval} is not a number of seconds from 0.1 to 3600",
                        "e.g. -i 1", EXIT_USAGE)
    if args.count is not None and args.count < 1:
        raise UserError(f"-n {args.count} is not a count of snapshots", "e.g. -n 5",
                        EXIT_USAGE)
    target: list[str]
    if args.cgroup is not None:
        from .cgroups import cgroup_target
        target = ["--cgroup", cgroup_target(args.cgroup)["path"]]
    elif args.all:
        target = ["-p", "1", "--force"]
    else:
        _check_target(args.pid, False)
        target = ["-p", str(args.pid)]
    devs = [parse_dev(d) for d in (args.dev or [])]
    check_privileges()
    names = None
    if devs:
        names = [Path(os.path.realpath(f"/sys/dev/block/{a}:{b}")).name for a, b in devs]
    cmd = [find_recorder(), "--top", str(round(args.interval * 1000)), "-q", *target]
    for a, b in devs:
        cmd += ["-D", f"{a}:{b}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    old = signal.signal(signal.SIGINT, lambda *_: proc.send_signal(signal.SIGINT))
    seen: dict[int, tuple[str, str | None]] = {}
    shown = 0
    tty = sys.stdout.isatty() and not args.json and args.count is None
    try:
        for raw in _lines(proc):
            devices = device_rows(block_counters(raw, "block_start", names),
                                  block_counters(raw, "block_end", names),
                                  int(raw["interval_ns"]))
            snap = snapshot(raw, devices, seen, args.by)
            if args.json:
                print(json.dumps(snap, sort_keys=True), flush=True)
            else:
                text = render(snap)
                print(("\x1b[H\x1b[2J" if tty else ("\n" if shown else "")) + text, flush=True)
            shown += 1
            if args.count is not None and shown >= args.count:
                break
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        rc = proc.wait()
        signal.signal(signal.SIGINT, old)
    if args.count is not None and shown < args.count and rc not in (0, 130):
        raise UserError(f"the recorder stopped after {shown} snapshots (exit {rc})", "")
    return 0


def add_top_parser(sub: Any) -> None:
    t = sub.add_parser(
        "top", help="a live view of processes' time by cause, refreshed every interval",
        description="Follow processes (-p PID and its children, --cgroup PATH, or -a: every "
                    "process) and show, every interval, one row per process: the share of "
                    "the interval per cause (a live approximation of report's level one, "
                    "each wait by what ended it), fsync calls and their p99, requests and "
                    "their p99 latency, sorted by blocked time; and a line per device "
                    "(busy, queue depth, flushes/s) from the kernel's counters. No trace "
                    "is written and no event is kept: the recorder folds each record into "
                    "per-process totals (bench/bench_top.py measures what it costs).")
    g = t.add_mutually_exclusive_group()
    g.add_argument("-p", "--pid", type=int, help="a process and the children it forks")
    g.add_argument("--cgroup", metavar="PATH", help="every process of a cgroup v2")
    g.add_argument("-a", "--all", action="store_true", help="every process")
    t.add_argument("-i", "--interval", type=float, default=1.0, metavar="SECONDS",
                   help="refresh interval, 0.1 to 3600 (default: %(default)s)")
    t.add_argument("-n", "--count", type=int, metavar="COUNT",
                   help="print COUNT snapshots, one after the other, and exit (batch mode)")
    t.add_argument("--json", action="store_true",
                   help="one JSON object per interval: interval_ns, start_ns, end_ns, "
                        "processes [{pid, comm, cgroup, attribution_ns, blocked_ns, fsync, "
                        "requests}], devices, lost")
    t.add_argument("--by", choices=("process", "cgroup"), default="process",
                   help="one row per process, or per cgroup v2 (its processes summed; "
                        "JSON: `cgroups` [{cgroup, pids, attribution_ns, blocked_ns, fsync, "
                        "requests}] instead of `processes`) (default: %(default)s)")
    t.add_argument("-d", "--dev", action="append", metavar="DEV",
                   help="only this device's requests and line (path or MAJ:MIN); repeatable")
    t.set_defaults(func=cmd_top)
